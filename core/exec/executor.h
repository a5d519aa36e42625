#pragma once
// Runs an ir::Graph with LibTorch ops on CPU or CUDA. Autograd flows through it (the demo zoo
// trains through it; QAT will). Hooks see and may replace each node's inputs (weights included,
// so a hook can fake-quantize them) and outputs (activations): observers, fake quantization and
// layer-by-layer analysis all attach here.

#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "jobs/result.h"

#include <c10/core/Device.h>

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

namespace bitlens::exec {

/// How a graph is run.
struct ExecOptions {
    c10::Device device = c10::Device(c10::kCPU); ///< where weights and activations live
    bool training = false;      ///< BatchNorm uses batch statistics and updates running stats
    double bnMomentum = 0.1;    ///< running-stat update factor in training mode (PyTorch's)
    /// Float32 copies of 16-bit weights (ir::Graph::widenOnRead) kept between nodes and runs,
    /// up to this many bytes; the rest are widened each time a node reads them and dropped
    /// after it, so a model larger than memory in float32 runs in its file's width.
    std::int64_t widenCacheBytes = std::int64_t{1} << 30;
};

/// Per-node hook; both methods may replace tensors in place in the vector they are given.
class NodeHook {
public:
    virtual ~NodeHook() = default;
    /// Called with the node's inputs (activations and weights, in ONNX input order; an omitted
    /// optional input is an undefined tensor).
    virtual void beforeNode(const ir::Node& node, std::vector<at::Tensor>& inputs);
    /// Called with the node's outputs before later nodes read them.
    virtual void afterNode(const ir::Node& node, std::vector<at::Tensor>& outputs);
    /// May compute the node itself (a low-bit kernel instead of the float op): fill `outputs`
    /// and return true. The first hook that returns true wins; afterNode hooks still run.
    virtual bool computeNode(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                             std::vector<at::Tensor>& outputs);
};

/// Runs one graph. Weights are moved to the device once, at construction; on the graph's own
/// device they are shared, not copied, so gradients reach the graph's initializers.
class Executor {
public:
    explicit Executor(const ir::Graph& graph, ExecOptions options = {});

    /// Adds a hook; hooks run in the order they were added.
    void addHook(std::shared_ptr<NodeHook> hook);
    void clearHooks();

    /// Runs the graph on inputs given in the order of graph.inputs; returns graph.outputs.
    /// Shape or type mismatches come back as ErrorCode::BadInput naming the node.
    Result<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs);
    /// Same as run() but throws c10::Error / std::runtime_error; for training loops.
    std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs);
    /// Runs and returns every value computed (and the inputs), by name.
    Result<std::map<std::string, at::Tensor>> runAll(const std::vector<at::Tensor>& inputs);
    /// Runs and returns the values named in `keep` (and the graph outputs); every other value
    /// is freed after its last reader, as run() frees them. What per-layer analysis needs of a
    /// transformer (layer inputs and outputs) without its attention internals.
    Result<std::map<std::string, at::Tensor>> runKeeping(const std::vector<at::Tensor>& inputs,
                                                         const std::set<std::string>& keep);

    const ExecOptions& options() const { return m_options; }
    const ir::Graph& graph() const { return m_graph; }

private:
    std::map<std::string, at::Tensor> execute(const std::vector<at::Tensor>& inputs,
                                              bool keepAll,
                                              const std::set<std::string>* keep = nullptr);

    const ir::Graph& m_graph;
    ExecOptions m_options;
    std::map<std::string, at::Tensor> m_weights; ///< initializers on m_options.device
    /// The weight `name` as `node` reads it: widened to float32 (and kept, within
    /// widenCacheBytes) where the graph marks it widenOnRead.
    at::Tensor readWeight(const ir::Node& node, const std::string& name, const at::Tensor& w);
    std::map<std::string, at::Tensor> m_widened; ///< float32 copies of widenOnRead weights
    std::int64_t m_widenedBytes = 0;
    std::vector<std::shared_ptr<NodeHook>> m_hooks;
};

/// Computes one node's outputs from its inputs (exposed for tests and single-op analysis).
std::vector<at::Tensor> runNode(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                                const ExecOptions& options);

/// The graph's inputs for one batch of data [N, ...]: the batch (token ids as floats become int64);
/// for windows [N, S], an encoder's further inputs by name: attention_mask (ids != metadata
/// "pad_token_id", default 0), token_type_ids (0), position_ids (0..S-1); else the batch alone.
std::vector<at::Tensor> inputsForBatch(const ir::Graph& graph, const at::Tensor& batch);

/// Output shape of every value for one sample, by value name, found by running the graph on
/// zeros of ir::sampleInputShapes (ir/shape_inference.h). Unlike ir::inferShapes it runs every
/// op, so it also shows that the graph runs (model summaries use it for that); errors are the
/// sample-shape ones and whatever the run reports.
Result<ir::ShapeMap>
traceShapes(const ir::Graph& graph, const std::vector<std::vector<std::int64_t>>& inputShapes = {});

} // namespace bitlens::exec
