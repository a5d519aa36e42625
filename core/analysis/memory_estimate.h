#pragma once
// Memory is checked before it is spent (issue #18): what an action will hold at its peak,
// estimated from the graph alone, against the memory this machine has available, so that an
// action that cannot fit is refused with both figures instead of being killed by the kernel.

#include "ir/graph.h"
#include "jobs/result.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace bitlens::quant {
struct Scheme;
}

namespace bitlens::analysis {

/// Peak bytes an action holds, by part. The file's weights are mapped (page cache the kernel
/// can drop and read again), so `mapped` is shown but not counted in total().
struct MemoryEstimate {
    std::string action;             ///< "eval", "quantize"
    std::int64_t mapped = 0;        ///< weights read from the file mapping
    /// Anonymous memory the process holds when the estimate is made (its RssAnon: the runtime,
    /// the opened model's decoded weights, tokenizer and data; heldMemoryBytes()).
    std::int64_t held = 0;
    std::int64_t widened = 0;       ///< float32 copies of 16-bit weights held at once
    std::int64_t quantized = 0;     ///< float32 quantize-dequantized copies of quantized weights
    std::int64_t activations = 0;   ///< live values of one batch at the executor's peak
    /// Calibration held at once (block engine): the calibration windows' values carried between
    /// parts, one part's GPTQ / AWQ Hessians and the largest layer's solve.
    std::int64_t calibration = 0;
    /// Of `held`, heap memory freed earlier and still resident, which the run takes again
    /// before the process grows (reusableHeapBytes()).
    std::int64_t reusable = 0;
    /// Heap the run leaves in holes it cannot fill again (quantize: allocations of many sizes,
    /// freed out of order, served from the heap's top pad).
    std::int64_t fragmentation = 0;
    /// held, plus what the run adds beyond the freed heap it takes again, plus fragmentation.
    std::int64_t total() const;
    /// total() less what the process holds already: what the run adds to it.
    std::int64_t added() const { return widened + quantized + activations + calibration; }
    /// "~21.3 GB (held 0.6 GB, float32 weights 16.0 GB, quantized copies 5.1 GB, activations
    /// 0.2 GB; ...)".
    std::string describe() const;
    /// The parenthesis of describe() alone.
    std::string partsText() const;
};

/// The batch an action runs: samples at once and, for token models, their length.
struct WorkShape {
    std::int64_t batch = 1;
    std::int64_t seqLen = 1;  ///< token models only (inputs of two dynamic dimensions)
    /// Samples (windows) the task metric runs at once; 0: `batch`.
    std::int64_t metricBatch = 0;
    std::int64_t metricRows() const { return metricBatch > 0 ? metricBatch : batch; }
};

/// The batch the estimates plan for from a data set's rows: token models (two-dimensional
/// inputs) a few windows of their length at a time, other models batches of up to 64.
WorkShape workShapeOf(const ir::Graph& graph, const at::Tensor& rows);

/// The batch the GUI's forecast and `info` plan for before any data is loaded: token models
/// 2 windows of `seqLen` tokens (512 by default, model/model_data.h kLmSeqLen), others 64.
WorkShape defaultWorkShape(const ir::Graph& graph, std::int64_t seqLen = 512);

/// Live activation bytes at the peak of one forward pass of `shape`: the value shapes of
/// ir::inferShapes at that batch, freed after their last reader as the executor frees them,
/// 4 bytes per element. Values whose shape cannot be inferred count as the largest one seen.
/// With `keep`, those values stay to the end (exec::Executor::runKeeping); `keptBytes`, when
/// given, receives their sum.
std::int64_t peakActivationBytes(const ir::Graph& graph, const WorkShape& shape,
                                 const std::set<std::string>* keep = nullptr,
                                 std::int64_t* keptBytes = nullptr);

/// A float run (eval, run, the float half of a bench): activations, plus the executor's
/// float32 copies of 16-bit weights (at most exec::ExecOptions::widenCacheBytes, plus the
/// largest weight one node widens).
MemoryEstimate estimateEval(const ir::Graph& graph, const WorkShape& shape);

/// quantize / compare / sensitivity / export: quant::prepare widens every 16-bit weight to
/// float32 and keeps a quantize-dequantized float32 copy of each quantized weight; analysis
/// runs the float and then the quantized model keeping every layer's inputs and output
/// (analysis::analyze), so the float run's kept values plus the quantized run's peak.
MemoryEstimate estimateQuantize(const ir::Graph& graph, const quant::Scheme& scheme,
                                const WorkShape& shape);

/// The process's anonymous resident memory now (RssAnon of /proc/self/status): what it holds
/// before a run starts; 0 where that file cannot be read.
std::int64_t heldMemoryBytes();

/// Heap memory this process freed and still holds resident (RssAnon beyond glibc's live
/// blocks, at most its free bytes): a run's allocations take it before the process grows.
std::int64_t reusableHeapBytes();

/// compare of `schemes` one after another (workspace::compare): the costliest scheme's
/// estimateQuantize, with the quantized copies of the scheme before it, which the workspace
/// holds while the next one is prepared.
MemoryEstimate estimateCompare(const ir::Graph& graph, const std::vector<quant::Scheme>& schemes,
                               const WorkShape& shape);

/// Bytes this process can still use: MemAvailable of /proc/meminfo, or what the cgroup's
/// memory.max leaves where that is lower. BITLENS_MEMORY_AVAILABLE (bytes, or with a K/M/G/T
/// suffix, decimal) overrides it, to plan for a smaller machine or to test; sizes above 1 EB
/// count as 1 EB. nullopt when unknown. A malformed override is passed over here.
std::optional<std::int64_t> availableMemory();

/// A Usage error (exit code 2) when BITLENS_MEMORY_AVAILABLE is set but is not a size ("abc",
/// "-1", "nanG", "inf"): "BITLENS_MEMORY_AVAILABLE='abc' is not a size: ...". The CLI checks it
/// before running any command.
Result<void> checkMemoryOverride();

/// What the process of `estimate` can hold in all: BITLENS_MEMORY_AVAILABLE when set, else
/// availableMemory() plus the memory it holds already (estimate.held), which the machine's
/// free memory does not count. nullopt when unknown.
std::optional<std::int64_t> memoryBudget(const MemoryEstimate& estimate);

/// A Runtime error (exit code 5) naming `path` when `estimate` does not fit in memoryBudget():
/// "quantize needs ~62.1 GB (...), 21.9 GB available; use --limit / --seq-len or a smaller
/// model". Nothing is refused when the available memory is unknown.
Result<void> checkMemory(const MemoryEstimate& estimate, const std::string& path);

/// "21.3 GB" (decimal gigabytes, as memory is sold), "512 MB" below 1 GB.
std::string formatGigabytes(std::int64_t bytes);

} // namespace bitlens::analysis
