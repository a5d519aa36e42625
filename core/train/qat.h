#pragma once
// Quantization-aware training (QAT): the model is fine-tuned while every quantized layer sees
// fake-quantized weights and inputs, so it learns to live with the rounding; the straight-through
// estimator carries gradients through the rounding (identity inside the clip range, zero outside).
// The result is an ordinary quant::QuantizedModel: analysis, compare, sensitivity and export
// treat it like any post-training one.
//
// BatchNorm during training (as torch.ao's ConvBn QAT modules): the running statistics are
// folded into the weight before fake quantization, w_q = fq(w * gamma / sigma_running), and the
// layer output is rescaled by sigma_running / gamma so the BatchNorm node that follows still
// normalises with batch statistics and updates its running ones. After `freezeBnStep` the
// BatchNorm runs on its frozen running statistics, and the forward pass is exactly the folded
// model the result contains.

#include "io/dataset.h"
#include "ir/graph.h"
#include "jobs/progress.h"
#include "jobs/result.h"
#include "quant/engine.h"
#include "quant/scheme.h"

#include <functional>
#include <optional>
#include <string>

namespace bitlens::train {

using QatOptions = quant::QatOptions;

/// One QAT optimizer step as reported to the caller (curves in the GUI, logs). Step 0 is the
/// calibrated starting point: it carries the held-out metric and a NaN loss.
struct QatStep {
    std::int64_t step = 0;          ///< 1-based optimizer step (0: before training)
    std::int64_t steps = 0;         ///< steps planned in total
    int epoch = 0;                  ///< 1-based
    int epochs = 0;
    double loss = 0.0;              ///< training loss of this step's batch (NaN at step 0)
    double lr = 0.0;                ///< learning rate used for this step
    std::optional<double> metric;   ///< held-out metric, when it was evaluated at this step
    double bestMetric = 0.0;        ///< best held-out metric so far
    std::string metricName;         ///< "top1" (supervised) or "output_sqnr_db" (distillation)
    std::string lossName;           ///< "cross_entropy", "kl_distill" or "mse_distill"
};

/// Called on the training thread after every step (keep it cheap; the GUI queues a signal).
using QatStepCallback = std::function<void(const QatStep&)>;

/// Fine-tunes `floatGraph` through the fake quantization of `scheme` (static or weight-only
/// schemes; integer, NF4/FP4 or FP8 weights) on `train` ([N, ...] inputs, labels optional) and
/// returns the quantized model of the best checkpoint on a held-out slice (the last
/// `options.holdout` samples, at most a fifth of the data, never trained on). Activation ranges
/// start from the scheme's observer on the first scheme.calibSamples samples. Cancel stops at
/// the next step and returns the best checkpoint so far (QatSummary::cancelled is set); it is
/// ErrorCode::Cancelled only before the first checkpoint exists. Training runs on the CPU.
Result<quant::QuantizedModel> trainQat(const ir::Graph& floatGraph, const quant::Scheme& scheme,
                                       const io::Dataset& train, const QatOptions& options,
                                       Progress& progress = Progress::none(),
                                       const CancelToken& cancel = CancelToken(),
                                       const QatStepCallback& onStep = {});

/// The one front commands and the GUI call: trainQat() for schemes with QAT options (`data` is
/// the training set), quant::prepare() on data->inputs for the rest (`data` may be null for
/// schemes that need no calibration). `reuse` (post-training schemes only) is quant::prepare's:
/// an earlier model on the same calibration data whose unchanged layers are taken as they are.
Result<quant::QuantizedModel> prepareScheme(const ir::Graph& floatGraph,
                                            const quant::Scheme& scheme, const io::Dataset* data,
                                            Progress& progress = Progress::none(),
                                            const CancelToken& cancel = CancelToken(),
                                            const QatStepCallback& onStep = {},
                                            const quant::QuantizedModel* reuse = nullptr);

} // namespace bitlens::train
