#pragma once
// The torch-free face of an open model, for the GUI and the CLI: a Model owns the graph and a
// summary (layers, shapes, parameters, bytes) that widgets can show without LibTorch headers.

#include "jobs/progress.h"
#include "jobs/result.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bitlens {

namespace ir {
class Graph;
}
namespace text {
class Tokenizer;
}

/// One layer (graph node) as a user sees it in the layer table.
struct LayerSummary {
    std::string name;
    std::string op;                                 ///< ONNX op_type, e.g. "Conv"
    std::vector<std::vector<std::int64_t>> inputShapes;  ///< activation inputs, batch 1
    std::vector<std::int64_t> outputShape;          ///< first output, batch 1
    std::int64_t params = 0;                        ///< weight elements this layer reads
    std::int64_t bytes = 0;                         ///< bytes of those weights as stored
};

/// A graph input or output as declared by the model (-1 = dynamic).
struct TensorSummary {
    std::string name;
    std::string dtype;
    std::vector<std::int64_t> shape;
};

/// What BitLens shows about an open model.
struct ModelSummary {
    std::string path;
    std::string format;       ///< "onnx", "safetensors", "gguf"
    std::string name;         ///< graph name
    std::string architecture; ///< "bert", "llama", "gpt2" for built graphs; empty for ONNX
    std::string task;         ///< graph metadata "task": classification, lm, embedding, sequence
    std::string metric;       ///< the task's metric: top1, perplexity, embedding_cosine, ...
    /// What the user must know about the numbers, e.g. "float baseline = dequantized Q4_1
    /// weights ..." for a GGUF file that was already quantized; empty when nothing.
    std::string note;
    std::string tokenizerPath; ///< where the model's tokenizer was read from; empty: none
    std::int64_t params = 0;  ///< all parameters
    std::int64_t bytes = 0;   ///< all weights as stored
    std::vector<TensorSummary> inputs;
    std::vector<TensorSummary> outputs;
    std::vector<LayerSummary> layers;
    /// Caveats shown with the model, e.g. "untrusted: TorchScript holds code; BitLens only
    /// reads its tensors".
    std::vector<std::string> notes;
};

/// An open model: the graph plus its summary (and, for language models and encoders, its
/// tokenizer). Shared between the GUI and its jobs; immutable once opened.
class Model {
public:
    Model(std::string path, std::string format, std::shared_ptr<ir::Graph> graph,
          ModelSummary summary, std::shared_ptr<const text::Tokenizer> tokenizer = nullptr);
    const std::string& path() const { return m_path; }
    const std::string& format() const { return m_format; }
    const ir::Graph& graph() const { return *m_graph; }
    std::shared_ptr<ir::Graph> sharedGraph() const { return m_graph; }
    const ModelSummary& summary() const { return m_summary; }
    /// The model's tokenizer (tokenizer.json / vocab.txt beside the weights, or the GGUF's own
    /// vocabulary), or null for models that read no text.
    const std::shared_ptr<const text::Tokenizer>& tokenizer() const { return m_tokenizer; }
    /// summary().note: what the float baseline is when it is not the original model.
    const std::string& note() const { return m_summary.note; }

private:
    std::string m_path;
    std::string m_format;
    std::shared_ptr<ir::Graph> m_graph;
    ModelSummary m_summary;
    std::shared_ptr<const text::Tokenizer> m_tokenizer;
};

/// Opens a model (format detected from its content and extension), checks it, and infers
/// layer shapes:
///  - ONNX files;
///  - safetensors: a .safetensors file with config.json beside it, a
///    model.safetensors.index.json (sharded), or a Hugging Face folder (config.json +
///    model.safetensors[.index.json]); weights stay memory-mapped (float32, and bf16 / fp16
///    in their own width, widened per node: ir::Graph::widenOnRead); the config's model_type
///    picks the builder (model::kHfModelTypes: bert, llama, mistral, qwen2, qwen3, gpt2);
///  - GGUF files with general.architecture "llama"; every tensor is dequantized to float32,
///    so the float baseline is the file's own (quantized) weights — summary().note says so.
/// The tokenizer beside the weights (or inside the GGUF) is loaded with the model.
/// Errors name the file: BadInput for corrupt files (truncated, lying headers), Unsupported
/// for an architecture, op or format BitLens does not run (named).
Result<std::shared_ptr<Model>> openModel(const std::string& path,
                                         Progress& progress = Progress::none(),
                                         const CancelToken& cancel = CancelToken());

/// Builds the summary of a graph (shapes by a traced run on one zero sample).
Result<ModelSummary> summarize(const ir::Graph& graph, const std::string& path,
                               const std::string& format);

/// "1.2 MiB", "640 KiB", "312 B".
std::string formatBytes(std::int64_t bytes);
/// "[1, 28, 28]" (-1 printed as "N").
std::string formatShape(const std::vector<std::int64_t>& shape);

} // namespace bitlens
