#pragma once
// Applies a scheme to a graph: folds BatchNorm where the scheme asks, quantizes every planned
// layer's weights, calibrates static activation ranges with observers, and yields a hook that
// makes the executor run the quantized model (simulated: fake quantization in float32).

#include "exec/executor.h"
#include "ir/graph.h"
#include "jobs/progress.h"
#include "jobs/result.h"
#include "quant/observer.h"
#include "quant/quant_type.h"
#include "quant/scheme.h"

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace bitlens::quant {

/// One quantized layer as prepared.
struct LayerQuant {
    std::string layer;
    LayerConfig config;
    Granularity weightGranularity;   ///< what was applied (may differ from config: see note)
    QParams weight;                  ///< qparams of the 2-D weight view [out, in * kernel]
    at::Tensor weightFloat;          ///< the float weight as the layer reads it (smoothed)
    at::Tensor weightFq;             ///< weight after quantize + dequantize, float32
    std::optional<QParams> act;      ///< static activation qparams
    std::optional<ClipChoice> actClip;  ///< what the observer chose, and why
    at::Tensor smooth;               ///< SmoothQuant divisor per input channel (undefined: off)
    std::string note;                ///< what had to be adapted ("group 64 does not divide 9")
    std::int64_t params = 0;         ///< weight elements
    std::int64_t bytesFloat = 0;     ///< weight bytes as float32
    std::int64_t bytesQuantized = 0; ///< weight bytes as stored quantized (codes + scales)
    // LSTM / GRU layers (weight* above is W [dirs, gates * H, in]) also quantize their
    // recurrent weight and the hidden state that enters the recurrence.
    QParams recurrent;               ///< qparams of R's 2-D view [dirs * gates * H, H]
    at::Tensor recurrentFloat;       ///< R [dirs, gates * H, H]; undefined for other ops
    at::Tensor recurrentFq;          ///< R after quantize + dequantize, float32
    std::optional<QParams> hiddenAct; ///< static schemes: h's qparams, range [-1, 1]
    // The rounding method (LayerConfig::method): GPTQ leaves codes that round-to-nearest of
    // weightFloat would not give, so whoever stores or runs the codes reads them from
    // codeSource() (GPTQ: weightFq, which lies on the grid).
    std::string method = "rtn";      ///< "rtn" or "gptq"
    /// GPTQ: the layer output error on the calibration data, tr((W - Q) H (W - Q)^T) / 2,
    /// of round-to-nearest and of GPTQ's own rounding (the gain GPTQ made); NaN for RTN.
    double methodLossRtn = std::numeric_limits<double>::quiet_NaN();
    double methodLoss = std::numeric_limits<double>::quiet_NaN();
    bool codesFromFq = false;        ///< codeSource() is weightFq
};

/// The float weight whose round-to-nearest codes (quantize(weightView(...), weight)) are the
/// layer's stored codes: weightFloat, or weightFq where a method (GPTQ) chose the codes.
const at::Tensor& codeSource(const LayerQuant& lq);

/// What quantization-aware training did (report.json "qat"); absent for post-training schemes.
struct QatSummary {
    int epochs = 0;                 ///< epochs run (a cancelled run counts the one it stopped in)
    std::int64_t steps = 0;         ///< optimizer steps taken
    std::int64_t bestStep = 0;      ///< step of the checkpoint returned (0 = calibrated start)
    double finalLoss = 0.0;         ///< mean training loss over the last 20 steps
    std::string lossName;           ///< "cross_entropy", "kl_distill", "mse_distill"
    std::string metricName;         ///< held-out metric: "top1" or "output_sqnr_db"
    double startMetric = 0.0;       ///< held-out metric of the calibrated model before training
    double bestMetric = 0.0;        ///< held-out metric of the returned checkpoint
    std::int64_t holdoutSamples = 0;
    std::int64_t trainSamples = 0;  ///< training pool (data minus the held-out slice)
    double seconds = 0.0;           ///< wall time of calibration + training + evaluations
    bool cancelled = false;         ///< stopped by Cancel; the best checkpoint was kept
    std::vector<std::pair<std::int64_t, double>> lossCurve;    ///< (step, loss), thinned
    std::vector<std::pair<std::int64_t, double>> metricCurve;  ///< (step, held-out metric)
};

/// A graph prepared for quantized execution.
struct QuantizedModel {
    ir::Graph graph;                            ///< what runs (BN folded), float weights
    Scheme scheme;
    Plan plan;
    std::map<std::string, LayerQuant> layers;   ///< quantized layers by node name
    std::vector<std::string> foldedBatchNorms;  ///< "conv<-bn"
    std::int64_t bytesFloat = 0;                ///< all weights of the original float graph
    std::int64_t bytesQuantized = 0;            ///< all weights as the quantized model stores them
    std::int64_t calibSamples = 0;              ///< samples calibration actually used
    std::vector<std::string> reusedLayers;      ///< layers taken unchanged from `reuse`
    std::optional<QatSummary> qat;              ///< set when the model was trained (QAT)
};

/// Activation qparams computed from `x` itself (dynamic quantization): per token for 2-D and
/// 3-D inputs of a per-token config, per tensor otherwise. The simulated hook and the real
/// kernels both call this one, so their activations quantize alike.
QParams dynamicQParams(const at::Tensor& x, const LayerConfig& c);

/// Prepares `floatGraph` for `scheme`. `calibInputs` ([N, ...] float) is needed by static
/// schemes and SmoothQuant; the first scheme.calibSamples samples are used. NaN/Inf reaching a
/// layer during calibration is BadInput naming the batch and the layer.
///
/// `reuse`, when given, is an earlier result of prepare on the same float graph and the same
/// calibration inputs: its layers whose configuration is unchanged are taken as they are
/// (weights, activation ranges, smoothing), so a re-run after a per-layer override only
/// quantizes and calibrates the layers that changed. Calibration runs the float graph, so one
/// layer's result never depends on another layer's configuration.
Result<QuantizedModel> prepare(const ir::Graph& floatGraph, const Scheme& scheme,
                               const at::Tensor& calibInputs,
                               Progress& progress = Progress::none(),
                               const CancelToken& cancel = CancelToken(),
                               const QuantizedModel* reuse = nullptr);

/// How many calibration samples prepare runs through `graph` at a time: a few windows for a
/// sequence model (its logits are [B, S, vocab]), 100 otherwise. The block engine batches its
/// calibration windows alike, so its statistics are accumulated in the same order.
std::int64_t calibrationBatch(const ir::Graph& graph);

/// The calibration data of a part of a graph: for each calibration batch (calibrationBatch
/// samples of the whole graph's calibration inputs, in order), the values the part reads as
/// the float model computed them, in the order of the part's inputs.
struct PartCalibration {
    std::vector<std::vector<at::Tensor>> batches;
    std::int64_t samples = 0;  ///< samples in all batches
};

/// prepare for a part of a graph (analysis/block_engine.h: one decoder block): `part` holds
/// some of a graph's nodes and their weights, the weights of its quantized layers already in
/// float32 (the rest may stay widenOnRead: the executor widens them as it reads them), and
/// `plan` is the whole graph's (makePlan), so each layer is configured as in the whole graph.
/// Schemes that read calibration data (static activations, SmoothQuant, GPTQ, AWQ) read it from
/// `calib`: the float model's values at the part's inputs, so each layer sees what it sees in
/// prepare's calibration of the whole graph; without `calib` they are a usage error.
Result<QuantizedModel> preparePart(const ir::Graph& part, const Scheme& scheme, const Plan& plan,
                                   const CancelToken& cancel = CancelToken(),
                                   const PartCalibration* calib = nullptr,
                                   Progress& progress = Progress::none());

/// A hook that makes an executor over `model.graph` run the quantized model. With `only`
/// non-empty, just those layers are quantized (for local error and sensitivity).
std::shared_ptr<exec::NodeHook> makeQuantHook(const QuantizedModel& model,
                                              std::set<std::string> only = {});

/// Static qparams of an LSTM / GRU hidden state: h = o * tanh(c) (LSTM) or a convex mix of
/// tanh and the previous h (GRU) lies in [-1, 1] by construction, so it needs no calibration.
/// uint8 asymmetric as torch's MinMaxObserver picks it for [-1, 1]: scale 2 / 255, zero point
/// 127 (-1 / scale = -127.49999 in float32); 0 is exact, codes 0..255 span -0.9961..1.0039.
QParams hiddenStateQParams(const LayerConfig& config);

/// The 2-D [out, in] view of a layer's weight (Conv: [out, in * kh * kw]; Gemm transB = 0 and
/// MatMul weights [in, out] are transposed; LSTM / GRU W and R [dirs, gates * H, in]:
/// [dirs * gates * H, in], one row per gate channel).
at::Tensor weightView(const ir::Node& node, const at::Tensor& weight);
/// Inverse of weightView: back to the layer's own weight layout.
at::Tensor weightUnview(const ir::Node& node, const at::Tensor& view,
                        const at::Tensor& likeWeight);

} // namespace bitlens::quant
