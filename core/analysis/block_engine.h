#pragma once
// The block engine (issue #38, step 1): a stacked decoder quantized and analysed one decoder
// block at a time, so a run holds one block's float32 weights and their quantized copies, the
// float and quantized hidden states of the windows it runs, and one batch of logits, never two
// whole models. The graph is cut into parts by its node names (the Hugging Face builders name
// the nodes of decoder block i "layer.<i>.…"): what runs before the first block (embedding,
// rotary tables, masks), the blocks in order, what runs after the last (final norm, head). Each
// part's quantized layers are prepared (quant::preparePart, configured by the whole graph's
// plan), the analysis batch and the evaluation windows pass through it twice (float stream and
// quantized stream), its layers' rows are measured (layerReport, as analyze measures them), and
// its float32 copies are dropped before the next part. Perplexity and KL divergence come from
// the head's logits, one batch of windows at a time (DivergenceAccumulator).
//
// Covered: language models (task lm) and every post-training scheme: round to nearest (weights
// only, dynamic or cast activations) and those that read calibration data (static activation
// ranges, SmoothQuant, GPTQ, AWQ: step 2, each block calibrated on the float model's inputs to
// it, with Hessians of the block's own layers only). Not yet (issue #38's later steps):
// throughput (it runs the whole model), QAT, export, sensitivity and compare.

#include "analysis/memory_estimate.h"
#include "analysis/quant_report.h"

#include <cstddef>
#include <string>
#include <vector>

namespace bitlens::analysis {

/// A stacked graph's nodes (indices into graph.nodes, in order) by part: parts[0] what runs
/// before the first block, parts[1..blocks] the blocks, parts.back() what runs after them.
struct BlockPartition {
    std::vector<std::vector<std::size_t>> parts;
    std::int64_t blocks = 0;
};

/// Cuts `graph` into parts by its node names ("layer.<i>." prefixes, i = 0, 1, ... in order,
/// each block's nodes contiguous). Unsupported naming `path` when the graph is not such a stack.
Result<BlockPartition> partitionBlocks(const ir::Graph& graph, const std::string& path = {});

/// Why the block engine cannot run `scheme` on `graph` (empty: it can).
std::string blockEngineUnsupported(const ir::Graph& graph, const quant::Scheme& scheme);

/// What analyzeBlockwise holds at its peak, for checkMemory: the part with the most float32
/// weights (its quantized layers' weights widened, their quantize-dequantized copies, and the
/// other 16-bit weights its two executors widen as they read them), the float and quantized
/// values carried between parts for `windows` windows of `batch.seqLen` tokens (the analysis
/// batch included), and one batch `batch` through the graph with its logits scored; with
/// `calibWindows` calibration windows (schemes that read calibration data), their values
/// carried by the float model and the largest part's GPTQ / AWQ Hessians and solve
/// (MemoryEstimate::calibration).
MemoryEstimate estimateBlockQuantize(const ir::Graph& graph, const quant::Scheme& scheme,
                                     const WorkShape& batch, std::int64_t windows,
                                     std::int64_t calibWindows = 0);

/// quant::prepare + analyze, block by block: the report analyze gives for the same data (the
/// same layer rows, weight hashes, perplexities and KL divergence), without throughput.
/// `path` names the model in errors.
/// Schemes that read calibration data (static activation ranges, SmoothQuant, GPTQ, AWQ) read
/// `calib`'s first scheme.calibSamples windows: carried through the parts by the float model in
/// prepare's batches, each part calibrated on its own inputs (quant::preparePart), so a layer's
/// statistics, Hessian and codes are those of prepare on the whole graph; without `calib` such
/// a scheme is a usage error before any part runs.
Result<QuantReport> analyzeBlockwise(const ir::Graph& floatGraph, const quant::Scheme& scheme,
                                     const at::Tensor& analysisBatch, const io::Dataset* eval,
                                     const AnalysisOptions& options, const std::string& path,
                                     Progress& progress = Progress::none(),
                                     const CancelToken& cancel = CancelToken(),
                                     const io::Dataset* calib = nullptr);

} // namespace bitlens::analysis
