#pragma once
// What a quantization run shows: per-layer error (local and accumulated), histograms, bytes,
// the task metric float vs quantized, and throughput — computed on the same batch for the
// float and the quantized model. The GUI and `bitlens-cli quantize` display exactly this.

#include "analysis/error_stats.h"
#include "analysis/layer_filter.h"
#include "analysis/lm_metrics.h"
#include "analysis/metrics.h"
#include "io/dataset.h"
#include "ir/graph.h"
#include "jobs/progress.h"
#include "jobs/result.h"
#include "quant/engine.h"

#include <c10/core/Device.h>

#include <map>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace bitlens::analysis {

/// One quantizable layer in a report.
struct LayerReport {
    std::string name;
    std::string op;
    std::string weightType;      ///< "int8", ..., "float32" when kept float
    std::string actType;         ///< "uint8", ..., "float32" when activations stay float
    std::string config;          ///< LayerConfig::describe()
    /// What runs the layer when throughput is measured: a real LibTorch low-bit kernel
    /// ("at::_int_mm (int8 x int8 -> int32)") or "simulated (fake-quant, float32)[: why]".
    /// Errors and the metric always come from the simulated path (real kernels agree with it
    /// to float rounding; see quant/real_kernels.h).
    std::string kernel;
    bool simulated = true;       ///< true when no real kernel ran this layer
    std::string note;            ///< adaptations, e.g. group size fallback
    /// How the weights were rounded ("rtn", "gptq") and, for GPTQ, the layer output error on
    /// the calibration data that round-to-nearest and GPTQ leave (tr((W-Q) H (W-Q)^T) / 2).
    std::string method = "rtn";
    double methodLossRtn = 0.0;
    double methodLoss = 0.0;
    std::int64_t params = 0;
    std::int64_t bytesFloat = 0;
    std::int64_t bytesQuantized = 0;
    ErrorStats local;            ///< only this layer quantized, float inputs
    ErrorStats accumulated;      ///< everything up to here quantized
    ErrorStats weight;           ///< quantized vs float weights
    /// weightHash() of the quantize-dequantized weights (empty when kept float): equal hashes
    /// mean the same codes and scales (report.json "weight_hash"; the block engine's test
    /// compares it with the whole-model engine's).
    std::string weightHash;
    HistogramData errorHistogram;   ///< accumulated output error (quantized - float)
    HistogramData weightHistogram;  ///< float weights (after smoothing)
    HistogramData actHistogram;     ///< the layer's float input activation on the analysis batch
    double weightMin = 0.0;         ///< range of the float weights
    double weightMax = 0.0;
    std::optional<quant::ClipChoice> actClip;  ///< static activation range and why
    /// Every calibrator on this layer's input (analysis batch): its clip range and the local
    /// output SQNR it gives with this layer's weights. Layers with quantized activations only.
    struct Calibrator {
        std::string method;   ///< observer spec ("minmax", "percentile:99.99", "entropy", "mse")
        double lo = 0.0;
        double hi = 0.0;
        double sqnrDb = 0.0;  ///< local output SQNR with this clip
        std::string why;
    };
    std::vector<Calibrator> calibrators;
};

/// FNV-1a (64 bits, hex) of a tensor's values as float32.
std::string weightHash(const at::Tensor& weight);

/// Throughput of float vs quantized, measured side by side in one process.
struct Throughput {
    std::string device;
    std::string isa;      ///< ISA level of the own CPU kernels (kernels::isaName), "" on CUDA
    std::string isaNote;  ///< what BITLENS_ISA set, if anything (kernels::isaOverrideNote)
    std::string cpu;      ///< the CPU's model name (cpuid)
    std::int64_t batch = 0;
    double floatSamplesPerS = 0.0;
    double quantizedSamplesPerS = 0.0;
    std::map<std::string, std::string> kernels;  ///< layer -> kernel that ran
    /// Per quantizable layer: median milliseconds per batch in the float model and in the
    /// quantized one (input quantization included). CPU only: empty on CUDA, where per-node
    /// host timing would need a device synchronisation per node.
    std::map<std::string, std::pair<double, double>> layerMs;
    /// Per layer that ran a real kernel and measured slower than its float layer in this run:
    /// e.g. "real kernel slower than float32 here (3.10 ms vs 2.70 ms per batch)", so the
    /// choice of kernel never hides a loss. CPU only, like layerMs.
    std::map<std::string, std::string> notes;
    /// Timed runs of each model behind the totals (the median of each round, summed), and
    /// behind layerMs: fewer than the full protocol (9 and 5) when a time budget bounded them.
    int runs = 0;
    int layerRuns = 0;
};

/// Why a quantized model runs slower than its float one, in words ("" when it does not, or when
/// nothing was measured): which layers stayed simulated (and the first reason), or which real
/// kernels measured slower than float32 here, or, when every layer ran a real kernel at least
/// as fast as float, that the cost is outside the layers. For compare tables (CLI and window)
/// and report.json's throughput.why, so a loss is never shown without its reason.
std::string throughputWhy(const Throughput& t);

/// Everything `quantize` reports.
struct QuantReport {
    std::string modelPath;
    std::string modelFormat;
    std::string modelNote;  ///< Model::note(): e.g. the float baseline of a quantized GGUF
    std::int64_t params = 0;
    std::string schemeSpec;
    quant::Scheme scheme;
    std::optional<MetricValue> metricFloat;
    std::optional<MetricValue> metricQuantized;
    /// The float metric came from an earlier run on the same evaluation data (analyze's
    /// `floatMetric`) instead of a float pass of this one.
    bool metricFloatReused = false;
    /// Language models: the quantized model's next-token distributions against the float
    /// model's over the evaluation windows (KL divergence, same top p, delta p), with both
    /// perplexities from the same pass.
    std::optional<LmDivergence> divergence;
    std::int64_t sizeFloat = 0;
    std::int64_t sizeQuantized = 0;
    std::vector<LayerReport> layers;
    Throughput throughput;
    std::vector<std::string> foldedBatchNorms;
    std::int64_t calibSamples = 0;
    std::vector<std::string> reusedLayers;  ///< layers prepare took unchanged from an earlier run
    std::int64_t analysisSamples = 0;
    double seconds = 0.0;  ///< wall time of prepare + analysis + metric
    /// What ran it: "whole" (quant::prepare, then analyze on the whole model) or "block"
    /// (analysis/block_engine.h: one decoder block at a time; no throughput).
    std::string engine = "whole";
    std::optional<quant::QatSummary> qat;  ///< quantization-aware training, when it ran
};

/// Inputs of an analysis.
struct AnalysisOptions {
    c10::Device device = c10::Device(c10::kCPU);
    std::int64_t analysisSamples = 64;   ///< batch used for layer errors and throughput
    std::int64_t batchSize = 256;        ///< evaluation batch
    int histogramBins = 64;
    /// Sequence models (metadata "task" lm / embedding / sequence): metric batch and window
    /// overlap, and the smaller analysis batch that layer comparison keeps in memory.
    SequenceMetricOptions sequence;
    std::int64_t sequenceAnalysisSamples = 2;
    /// Sensitivity of a language model ranked by the mean KL divergence of its output with each
    /// layer quantized alone (one float and one quantized pass per layer) instead of by the
    /// perplexity change (one pass).
    bool sensitivityByKld = false;
    std::int64_t sequenceAnalysisTokens = 128;
    /// Called once the layer errors and the throughput are in, before the task metric (the
    /// long part on a language model), with the report so far (no metric yet); may be empty.
    std::function<void(const QuantReport&)> onLayers;
    /// Wall-time budget of the timed runs in an analysis (seconds; 0 = the full protocol, as
    /// `bench` uses): a 135M-parameter LM's ~30 runs took ~25 s with no progress shown. The
    /// warm-up run of each model says what one run costs; the rounds are cut to fit, never
    /// below one timed run of each model.
    double throughputSeconds = 6.0;
    /// Sensitivity: sweep only the layers whose name contains one of these (empty = every
    /// quantized layer), e.g. {"down_proj", "o_proj"}.
    std::vector<std::string> sensitivityLayers;
};

/// One layer's row of a report: `lq`'s configuration and weights, its local error (this layer
/// alone quantized on the float run's inputs, `floatValues`) and accumulated error (the
/// quantized run's output, `quantValues`), histograms and the calibrator overlay. Both values
/// maps hold the layer's inputs and output by value name; `model.graph` holds its weights.
LayerReport layerReport(const ir::Node& node, const quant::QuantizedModel& model,
                        const quant::LayerQuant& lq,
                        const std::map<std::string, at::Tensor>& floatValues,
                        const std::map<std::string, at::Tensor>& quantValues,
                        const AnalysisOptions& options);

/// Compares `model` (prepared from `floatGraph`) with the float graph on `analysisBatch`, and
/// measures the task metric on `eval` when given (float metric reused from `floatMetric` when
/// set, so comparisons of many schemes evaluate the float model once).
Result<QuantReport> analyze(const ir::Graph& floatGraph, const quant::QuantizedModel& model,
                            const at::Tensor& analysisBatch, const io::Dataset* eval,
                            const AnalysisOptions& options,
                            std::optional<MetricValue> floatMetric = std::nullopt,
                            Progress& progress = Progress::none(),
                            const CancelToken& cancel = CancelToken());

/// Samples per second of the float graph and of the quantized model on batch `x`, measured
/// interleaved in one process (3 rounds of the median of 3 runs each, after a warm-up run; fewer
/// when options.throughputSeconds bounds them), then per-layer times over 5 runs (or fewer).
/// Reports "measuring throughput: run n of N" and stops between runs when cancelled.
Result<Throughput> measureThroughput(const quant::QuantizedModel& model, const at::Tensor& x,
                                     const AnalysisOptions& options,
                                     Progress& progress = Progress::none(),
                                     const CancelToken& cancel = CancelToken());

/// How many timed runs fit `budgetSeconds` when one float plus one quantized run cost
/// `pairSeconds`: {rounds x reps for the totals, runs for the per-layer times}. budget 0 = the
/// full protocol {3 x 3, 5}; otherwise at least {1 x 1, 1}, 60 % of the budget to the totals.
struct ThroughputPlan {
    int rounds = 3;
    int reps = 3;
    int layerRuns = 5;
};
ThroughputPlan planThroughputRuns(double pairSeconds, double budgetSeconds);

/// Top-1 of the quantized model (or with `only` layers quantized) on `eval`.
Result<MetricValue> evaluateQuantized(const quant::QuantizedModel& model, const io::Dataset& eval,
                                      const AnalysisOptions& options,
                                      const std::set<std::string>& only = {},
                                      Progress& progress = Progress::none(),
                                      const CancelToken& cancel = CancelToken());

/// One row of a sensitivity sweep: the metric with only this layer quantized.
struct SensitivityRow {
    std::string layer;
    double metric = 0.0;
    double drop = 0.0;  ///< how much worse than float: float - metric (perplexity: metric - float)
    double sqnrDb = 0.0;     ///< local SQNR of the layer
    /// Ranked by KL divergence (language models): the mean KLD of the next-token distributions
    /// with only this layer quantized, against the float model's (LmDivergence::meanKld).
    std::optional<double> kld;
};

/// Quantizes each layer alone (each of options.sensitivityLayers' when set) and measures the
/// metric; rows sorted by drop, largest first
/// (with options.sensitivityByKld, a language model's rows carry the KL divergence and are
/// sorted by it; a model of another task is refused with a usage error).
Result<std::vector<SensitivityRow>> sensitivity(const ir::Graph& floatGraph,
                                                const quant::QuantizedModel& model,
                                                const io::Dataset& eval,
                                                const at::Tensor& analysisBatch,
                                                const AnalysisOptions& options,
                                                const MetricValue& floatMetric,
                                                Progress& progress = Progress::none(),
                                                const CancelToken& cancel = CancelToken());

} // namespace bitlens::analysis
