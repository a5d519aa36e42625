#include "train/qat.h"

#include "exec/executor.h"
#include "quant/bn_fold.h"
#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <variant>

namespace bitlens::train {

namespace {

using quant::ActMode;
using quant::Granularity;
using quant::QParams;
using quant::QuantizedModel;
using quant::QuantType;
using quant::TypeFamily;
using ActRange = QatOptions::ActRange;

/// The BatchNorm that follows a layer and is folded into it.
struct BnLink {
    std::string gamma;  ///< initializer names in the training graph
    std::string var;
    double eps = 1e-5;
};

/// Training state of one quantized layer.
struct LayerState {
    const ir::Node* node = nullptr;  ///< in the training graph
    quant::LayerConfig config;
    Granularity weightGranularity;   ///< as the engine applies it to the [out, in] view
    std::optional<BnLink> bn;
    // Weights: min-max qparams of the current weight every step, or an LSQ scale per block.
    bool learnWeightScale = false;
    /// [blocks] float32, learnable (LSQ): the log of the scale, so that one optimizer step
    /// moves every scale by the same relative amount whatever its size (Adam's steps are
    /// about lr in parameter units; a scale of 0.002 would otherwise be gone in a few steps).
    at::Tensor wLogScale;
    at::Tensor wZero;                ///< [blocks] float32, fixed
    std::vector<std::int64_t> scaleShape;  ///< the engine's qparams shape
    // Static activations.
    bool quantAct = false;
    QParams act;                     ///< current qparams (fixed / EMA)
    at::Tensor actLogScale;          ///< [1] learnable (LSQ), log of the scale
    at::Tensor actZero;              ///< [1] float32, fixed
    at::Tensor emaLo;                ///< EMA of the batch minimum / maximum (scalars)
    at::Tensor emaHi;
};

bool isIntegerType(QuantType t) { return quant::traits(t).family == TypeFamily::Integer; }

/// The [out, in] weight view as rows of one scale block each, or an undefined tensor when the
/// blocks are not contiguous rows (a group size that does not divide the row).
at::Tensor blockRows(const at::Tensor& view, const Granularity& g)
{
    switch (g.kind) {
    case Granularity::Kind::PerTensor: return view.reshape({1, -1});
    case Granularity::Kind::PerChannel: return view;
    case Granularity::Kind::PerGroup:
        if (view.size(1) % g.groupSize != 0)
            return {};
        return view.reshape({-1, g.groupSize});
    case Granularity::Kind::PerToken: return view;
    }
    return {};
}

/// Per-output-channel factor reshaped to broadcast against a weight ([out, ...]).
at::Tensor perOutput(const at::Tensor& factor, const at::Tensor& weight)
{
    std::vector<std::int64_t> shape(static_cast<std::size_t>(weight.dim()), 1);
    shape[0] = -1;
    return factor.reshape(shape);
}

/// Fake quantization of weights and inputs during training, with BN folding (see qat.h).
class QatHook : public exec::NodeHook {
public:
    QatHook(std::map<std::string, LayerState>& layers, const ir::Graph& graph,
            const QatOptions& options)
        : m_layers(layers), m_graph(graph), m_options(options)
    {
    }

    bool updateRanges = false;  ///< EMA ranges move only on training steps

    void beforeNode(const ir::Node& node, std::vector<at::Tensor>& inputs) override
    {
        auto it = m_layers.find(node.name);
        if (it == m_layers.end())
            return;
        LayerState& s = it->second;
        if (s.quantAct)
            inputs[0] = fakeQuantAct(s, inputs[0]);
        inputs[1] = fakeQuantWeight(s, node, inputs[1]);
    }

    at::Tensor fakeQuantWeight(LayerState& s, const ir::Node& node, const at::Tensor& w)
    {
        at::Tensor factor;
        at::Tensor folded = w;
        if (s.bn) {
            const at::Tensor& gamma = *m_graph.initializer(s.bn->gamma);
            const at::Tensor& var = *m_graph.initializer(s.bn->var);
            factor = gamma / at::sqrt(var.detach() + s.bn->eps);
            folded = w * perOutput(factor, w);
        }
        const at::Tensor view = quant::weightView(node, folded);
        at::Tensor fq;
        if (s.learnWeightScale) {
            const at::Tensor rows = blockRows(view, s.weightGranularity);
            const auto& t = quant::traits(s.config.weightType);
            const double gradFactor =
                1.0 / std::sqrt(static_cast<double>(rows.size(1)) * static_cast<double>(t.qmax));
            fq = at::_fake_quantize_learnable_per_channel_affine(rows, at::exp(s.wLogScale),
                                                                 s.wZero, 0,
                                                                 t.qmin, t.qmax, gradFactor)
                     .reshape(view.sizes());
        } else {
            auto [lo, hi] = quant::blockMinMax(view.detach(), s.weightGranularity);
            const QParams qp = quant::chooseQParams(lo, hi, s.config.weightType,
                                                    s.config.weightSymmetric, s.weightGranularity);
            fq = quant::fakeQuantize(view, qp);
        }
        at::Tensor out = quant::weightUnview(node, fq, folded);
        if (s.bn) {
            // conv(x, fq(w * f)) / f == conv(x, fq(w * f) / f) per output channel; a zero
            // gamma leaves the channel at 0 either way.
            const at::Tensor safe = at::where(factor == 0, at::ones_like(factor), factor);
            out = out / perOutput(safe, out);
        }
        return out;
    }

    at::Tensor fakeQuantAct(LayerState& s, const at::Tensor& x)
    {
        if (m_options.actRange == ActRange::Learned && isIntegerType(s.config.actType)) {
            const auto& t = quant::traits(s.config.actType);
            const double perSample = static_cast<double>(x.numel() / std::max<std::int64_t>(
                                                                         1, x.size(0)));
            const double gradFactor = 1.0 / std::sqrt(perSample * static_cast<double>(t.qmax));
            return at::_fake_quantize_learnable_per_tensor_affine(x, at::exp(s.actLogScale),
                                                                  s.actZero,
                                                                  t.qmin, t.qmax, gradFactor);
        }
        if (m_options.actRange == ActRange::Ema && updateRanges) {
            c10::NoGradGuard noGrad;
            const double c = m_options.emaMomentum;
            const at::Tensor xd = x.detach();
            s.emaLo = s.emaLo * (1.0 - c) + xd.min().to(at::kFloat) * c;
            s.emaHi = s.emaHi * (1.0 - c) + xd.max().to(at::kFloat) * c;
            s.act = quant::chooseQParams(s.emaLo, s.emaHi, s.config.actType,
                                         s.config.actSymmetric, Granularity::perTensor());
        }
        return quant::fakeQuantize(x, s.act);
    }

private:
    std::map<std::string, LayerState>& m_layers;
    const ir::Graph& m_graph;
    const QatOptions& m_options;
};

/// The current activation qparams of a layer (learned ones rounded as the op rounds them).
QParams currentActQParams(const LayerState& s, const QatOptions& options)
{
    if (options.actRange == ActRange::Learned && isIntegerType(s.config.actType)) {
        const auto& t = quant::traits(s.config.actType);
        QParams qp = s.act;
        qp.scale = at::exp(s.actLogScale.detach()).reshape({});
        qp.zeroPoint = s.actZero.detach().round().clamp(static_cast<double>(t.qmin),
                                                        static_cast<double>(t.qmax))
                           .to(at::kLong)
                           .reshape({});
        return qp;
    }
    QParams qp = s.act;
    qp.scale = s.act.scale.clone();
    qp.zeroPoint = s.act.zeroPoint.clone();
    return qp;
}

/// The quantized model of the current training state: weights copied, BatchNorm folded with its
/// running statistics, weight qparams as training used them, activation qparams as trained.
QuantizedModel snapshot(const QuantizedModel& base, const ir::Graph& trainGraph,
                        const std::map<std::string, LayerState>& layers,
                        const QatOptions& options)
{
    c10::NoGradGuard noGrad;
    ir::Graph copy = trainGraph;
    for (auto& [name, t] : copy.initializers)
        t = t.detach().clone();
    QuantizedModel m = base;
    m.graph = base.scheme.foldBatchNorm ? quant::foldBatchNorm(copy) : copy;
    for (const auto& node : m.graph.nodes) {
        auto it = layers.find(node.name);
        if (it == layers.end())
            continue;
        const LayerState& s = it->second;
        quant::LayerQuant& lq = m.layers.at(node.name);
        const at::Tensor& w = *m.graph.initializer(node.inputs[1]);
        const at::Tensor view = quant::weightView(node, w);
        QParams qp;
        if (s.learnWeightScale) {
            const auto& t = quant::traits(s.config.weightType);
            qp = lq.weight;
            qp.scale = at::exp(s.wLogScale.detach()).reshape(s.scaleShape);
            qp.zeroPoint = s.wZero.detach().round().clamp(static_cast<double>(t.qmin),
                                                          static_cast<double>(t.qmax))
                               .to(at::kLong)
                               .reshape(s.scaleShape);
        } else {
            auto [lo, hi] = quant::blockMinMax(view, s.weightGranularity);
            qp = quant::chooseQParams(lo, hi, s.config.weightType, s.config.weightSymmetric,
                                      s.weightGranularity);
        }
        lq.weightFloat = w;
        lq.weight = qp;
        lq.weightFq = quant::weightUnview(node, quant::fakeQuantize(view, qp), w).contiguous();
        if (s.quantAct) {
            lq.act = currentActQParams(s, options);
            if (lq.actClip && options.actRange != ActRange::Fixed) {
                const auto& t = quant::traits(s.config.actType);
                const double scale = lq.act->scale.item<double>();
                const double zp = static_cast<double>(lq.act->zeroPoint.item<std::int64_t>());
                lq.actClip->lo = static_cast<float>((static_cast<double>(t.qmin) - zp) * scale);
                lq.actClip->hi = static_cast<float>((static_cast<double>(t.qmax) - zp) * scale);
                const bool learned = options.actRange == ActRange::Learned;
                lq.actClip->method = learned ? "qat-lsq" : "qat-ema";
                lq.actClip->why = std::string(learned ? "scale learned during QAT (LSQ)"
                                                      : "moving-average min/max during QAT") +
                                  ", starting from " + base.layers.at(node.name).config.observer;
                lq.actClip->candidates.clear();
            }
        }
    }
    return m;
}

/// Runs `model` on `x` in batches and returns the first output, on the CPU.
at::Tensor runQuantized(const QuantizedModel& model, const at::Tensor& x)
{
    c10::InferenceMode guard;
    exec::Executor executor(model.graph);
    executor.addHook(quant::makeQuantHook(model));
    std::vector<at::Tensor> parts;
    for (std::int64_t start = 0; start < x.size(0); start += 256)
        parts.push_back(executor.forward({x.slice(0, start, std::min(x.size(0), start + 256))})
                            .front());
    return at::cat(parts);
}

double sqnrDb(const at::Tensor& ref, const at::Tensor& out)
{
    const double signal = ref.to(at::kDouble).pow(2).sum().item<double>();
    const double noise = (ref.to(at::kDouble) - out.to(at::kDouble)).pow(2).sum().item<double>();
    if (noise == 0.0)
        return std::numeric_limits<double>::infinity();
    return 10.0 * std::log10(signal / noise);
}

double secondsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Checks that QAT can train every planned layer's configuration.
Result<void> checkTrainable(const quant::Plan& plan)
{
    for (const auto& [name, c] : plan.layers) {
        if (c.keepFloat)
            continue;
        if (c.actMode != ActMode::Static && c.actMode != ActMode::Float)
            return Error::unsupported(name, "QAT trains static or weight-only schemes; this "
                                            "layer's activations are dynamic or cast");
        if (c.smoothAlpha > 0.0 || c.outlierThreshold > 0.0 || c.doubleQuant)
            return Error::unsupported(name, "QAT does not train SmoothQuant, LLM.int8() or "
                                            "double-quantized NF4 layers");
        if (!quant::traits(c.weightType).needsScale)
            return Error::unsupported(name, "QAT needs a scaled weight format, not " +
                                                std::string(quant::traits(c.weightType).name));
        if (c.actMode == ActMode::Static && !quant::traits(c.actType).needsScale)
            return Error::unsupported(name, "QAT needs a scaled activation format, not " +
                                                std::string(quant::traits(c.actType).name));
    }
    return {};
}

} // namespace

Result<QuantizedModel> trainQat(const ir::Graph& floatGraph, const quant::Scheme& scheme,
                                const io::Dataset& train, const QatOptions& options,
                                Progress& progress, const CancelToken& cancel,
                                const QatStepCallback& onStep)
{
    const auto started = std::chrono::steady_clock::now();
    const std::int64_t n = train.size();
    if (n < 2)
        return Error::badInput(train.path, "QAT needs training samples; this data holds " +
                                               std::to_string(n));
    const bool haveLabels = train.labels.defined() && train.labels.numel() == n;
    if (options.distill < 0 && !haveLabels)
        return Error::badInput(train.path, "has no labels for supervised QAT; use distill=true "
                                           "(label-free distillation from the float model)");
    const bool distill = options.distill > 0 || !haveLabels;
    try {
        // Calibrated starting point: the post-training model of the same scheme.
        quant::Scheme ptq = scheme;
        ptq.qat.reset();
        Progress prepProgress([&](double f, const std::string& stage) {
            progress.report(0.04 * f, stage);
        });
        auto prepared = quant::prepare(floatGraph, ptq, train.inputs, prepProgress, cancel);
        if (!prepared)
            return prepared.error();
        QuantizedModel base = std::move(prepared).value();
        if (auto r = checkTrainable(base.plan); !r)
            return r.error();

        // The training graph: a deep copy in float32 (the caller's float graph stays as it
        // is; 16-bit weights it reads as float32 are widened).
        auto wide = ir::widened(floatGraph);
        if (!wide)
            return wide.error();
        ir::Graph trainGraph = std::move(wide).value();
        for (auto& [name, t] : trainGraph.initializers)
            t = t.detach().clone();
        std::set<std::string> bnStats;
        std::map<std::string, BnLink> bnOf;  // layer -> folded BN
        {
            std::vector<std::string> pairs;
            (void)quant::foldBatchNorm(trainGraph, &pairs);
            for (const auto& pair : pairs) {
                const auto arrow = pair.find("<-");
                const std::string layer = pair.substr(0, arrow);
                const std::string bnName = pair.substr(arrow + 2);
                for (const auto& node : trainGraph.nodes)
                    if (node.name == bnName)
                        bnOf[layer] = BnLink{node.inputs[1], node.inputs[4],
                                             node.attrs.getFloat("epsilon", 1e-5)};
            }
            for (const auto& node : trainGraph.nodes)
                if (node.op == ir::OpKind::BatchNorm && node.inputs.size() == 5) {
                    bnStats.insert(node.inputs[3]);
                    bnStats.insert(node.inputs[4]);
                }
        }

        // Per-layer state, initialised from the calibrated model.
        std::map<std::string, LayerState> layers;
        std::vector<at::Tensor> scaleParams;
        for (const auto& node : trainGraph.nodes) {
            auto it = base.layers.find(node.name);
            if (it == base.layers.end() || it->second.config.keepFloat)
                continue;
            const quant::LayerQuant& lq = it->second;
            LayerState s;
            s.node = &node;
            s.config = lq.config;
            s.weightGranularity = lq.weightGranularity;
            if (scheme.foldBatchNorm && bnOf.count(node.name))
                s.bn = bnOf.at(node.name);
            s.scaleShape = lq.weight.scale.sizes().vec();
            const at::Tensor wView = quant::weightView(node, *trainGraph.initializer(node.inputs[1]));
            if (options.lsq && isIntegerType(s.config.weightType) &&
                blockRows(wView, s.weightGranularity).defined()) {
                s.learnWeightScale = true;
                s.wLogScale = at::log(lq.weight.scale.reshape({-1})).requires_grad_(true);
                s.wZero = lq.weight.zeroPoint.reshape({-1}).to(at::kFloat).clone();
                scaleParams.push_back(s.wLogScale);
            }
            if (s.config.actMode == ActMode::Static && lq.act) {
                s.quantAct = true;
                s.act = *lq.act;
                s.act.scale = lq.act->scale.clone();
                s.act.zeroPoint = lq.act->zeroPoint.clone();
                const double scale = s.act.scale.item<double>();
                const double zp = static_cast<double>(s.act.zeroPoint.item<std::int64_t>());
                const auto& t = quant::traits(s.config.actType);
                s.emaLo = at::full({}, (static_cast<double>(t.qmin) - zp) * scale, at::kFloat);
                s.emaHi = at::full({}, (static_cast<double>(t.qmax) - zp) * scale, at::kFloat);
                if (options.actRange == ActRange::Learned && isIntegerType(s.config.actType)) {
                    s.actLogScale = at::log(s.act.scale.reshape({1})).requires_grad_(true);
                    s.actZero = s.act.zeroPoint.reshape({1}).to(at::kFloat).clone();
                    scaleParams.push_back(s.actLogScale);
                }
            }
            layers.emplace(node.name, std::move(s));
        }

        // Parameters: every float initializer but BatchNorm running statistics.
        std::vector<at::Tensor> params;
        for (auto& [name, t] : trainGraph.initializers)
            if (t.is_floating_point() && !bnStats.count(name)) {
                t.requires_grad_(true);
                params.push_back(t);
            }
        params.insert(params.end(), scaleParams.begin(), scaleParams.end());
        std::variant<Adam, Sgd> optimizer =
            options.optimizer == QatOptions::Optimizer::Adam
                ? std::variant<Adam, Sgd>(std::in_place_type<Adam>, params, options.lr)
                : std::variant<Adam, Sgd>(std::in_place_type<Sgd>, params, options.lr,
                                          options.momentum);

        auto hook = std::make_shared<QatHook>(layers, trainGraph, options);
        exec::Executor trainExec(trainGraph, exec::ExecOptions{c10::Device(c10::kCPU), true});
        exec::Executor frozenExec(trainGraph, exec::ExecOptions{c10::Device(c10::kCPU), false});
        trainExec.addHook(hook);
        frozenExec.addHook(hook);
        exec::Executor teacher(floatGraph);

        // Held-out slice (the end of the data) and the training pool.
        const std::int64_t holdout =
            std::max<std::int64_t>(1, std::min(options.holdout, n / 5));
        const std::int64_t pool = n - holdout;
        const at::Tensor holdX = train.inputs.slice(0, pool, n);
        const at::Tensor holdY = haveLabels ? train.labels.slice(0, pool, n) : at::Tensor();
        at::Tensor holdRef;  // float outputs, for label-free evaluation
        // The checkpoint criterion follows the loss: top-1 with the labels for supervised runs;
        // for distillation the output SQNR against the float model, which needs no labels and
        // moves smoothly where top-1 on a small slice is noisy.
        const bool byTop1 = !distill;
        const std::string metricName = byTop1 ? "top1" : "output_sqnr_db";
        if (!byTop1) {
            c10::InferenceMode guard;
            std::vector<at::Tensor> parts;
            for (std::int64_t s = 0; s < holdout; s += 256)
                parts.push_back(teacher.forward({holdX.slice(0, s, std::min(holdout, s + 256))})
                                    .front());
            holdRef = at::cat(parts);
        }
        const auto evaluate = [&](const QuantizedModel& m) {
            const at::Tensor out = runQuantized(m, holdX);
            if (byTop1)
                return out.argmax(1).eq(holdY).to(at::kDouble).mean().item<double>();
            return sqnrDb(holdRef, out);
        };

        const std::int64_t perEpoch =
            options.samples > 0 ? std::min(options.samples, pool) : pool;
        const std::int64_t batch = std::min(options.batchSize, perEpoch);
        const std::int64_t stepsPerEpoch = (perEpoch + batch - 1) / batch;
        const std::int64_t totalSteps = stepsPerEpoch * options.epochs;
        const std::int64_t evalEvery =
            options.evalEvery > 0 ? options.evalEvery
                                  : std::max<std::int64_t>(1, (stepsPerEpoch + 3) / 4);
        const std::int64_t warmupSteps =
            static_cast<std::int64_t>(std::llround(options.warmup * static_cast<double>(totalSteps)));
        const std::int64_t freezeStep =
            options.freezeBnStep < 0 ? totalSteps / 2 : options.freezeBnStep;
        const auto lrAt = [&](std::int64_t step) {  // step 0-based
            if (step < warmupSteps)
                return options.lr * static_cast<double>(step + 1) /
                       static_cast<double>(warmupSteps);
            const double t = static_cast<double>(step - warmupSteps) /
                             static_cast<double>(std::max<std::int64_t>(1, totalSteps - warmupSteps));
            return options.lr * 0.5 * (1.0 + std::cos(M_PI * t));
        };

        // The first checkpoint: the calibrated model before any step.
        quant::QatSummary summary;
        if (!distill) {
            summary.lossName = "cross_entropy";
        } else {
            c10::InferenceMode guard;
            const bool logits = teacher.forward({holdX.slice(0, 0, 1)}).front().dim() == 2;
            summary.lossName = logits ? "kl_distill" : "mse_distill";
        }
        summary.metricName = metricName;
        summary.holdoutSamples = holdout;
        summary.trainSamples = pool;
        QuantizedModel best = snapshot(base, trainGraph, layers, options);
        double bestMetric = evaluate(best);
        summary.startMetric = bestMetric;
        summary.metricCurve.emplace_back(0, bestMetric);
        QatStep info;
        info.steps = totalSteps;
        info.epochs = options.epochs;
        info.metricName = metricName;
        info.loss = std::numeric_limits<double>::quiet_NaN();
        info.metric = bestMetric;
        info.bestMetric = bestMetric;
        info.lossName = summary.lossName;
        if (onStep)
            onStep(info);

        at::Generator gen = at::detail::createCPUGenerator(options.seed);
        std::vector<double> losses;
        const std::int64_t thin = std::max<std::int64_t>(1, totalSteps / 2000);
        std::int64_t step = 0;
        int epochsRun = 0;
        for (int epoch = 0; epoch < options.epochs && !summary.cancelled; ++epoch) {
            ++epochsRun;
            const at::Tensor order =
                at::randperm(pool, gen, at::TensorOptions().dtype(at::kLong)).slice(0, 0, perEpoch);
            for (std::int64_t b = 0; b < stepsPerEpoch; ++b) {
                if (cancel.cancelled()) {
                    summary.cancelled = true;
                    break;
                }
                const double lr = lrAt(step);
                std::visit([&](auto& o) { o.setLearningRate(lr); }, optimizer);
                const at::Tensor idx = order.slice(0, b * batch, std::min(perEpoch, (b + 1) * batch));
                const at::Tensor x = train.inputs.index_select(0, idx);
                exec::Executor& student = step < freezeStep ? trainExec : frozenExec;
                hook->updateRanges = true;
                std::visit([](auto& o) { o.zeroGrad(); }, optimizer);
                const at::Tensor out = student.forward({x}).front();
                hook->updateRanges = false;
                at::Tensor loss;
                if (!distill) {
                    if (out.dim() != 2)
                        return Error::unsupported(train.path,
                                                  "supervised QAT needs [batch, classes] "
                                                  "logits; use distill=true for this model");
                    loss = at::cross_entropy_loss(out, train.labels.index_select(0, idx));
                } else {
                    at::Tensor ref;
                    {
                        c10::NoGradGuard noGrad;
                        ref = teacher.forward({x}).front();
                    }
                    if (out.dim() == 2) {
                        const double T = options.temperature;
                        const at::Tensor logP = at::log_softmax(out / T, 1);
                        const at::Tensor logQ = at::log_softmax(ref / T, 1);
                        loss = (logQ.exp() * (logQ - logP)).sum(1).mean() * (T * T);
                    } else {
                        loss = at::mse_loss(out, ref);
                    }
                }
                const double lossValue = loss.item<double>();
                if (!std::isfinite(lossValue))
                    return Error::badInput(train.path,
                                           "QAT loss became " + std::to_string(lossValue) +
                                               " at step " + std::to_string(step + 1) +
                                               " (NaN/Inf in the data, or lr too high)");
                loss.backward();
                std::visit([](auto& o) { o.step(); }, optimizer);
                ++step;
                losses.push_back(lossValue);
                if (step % thin == 0 || step == totalSteps)
                    summary.lossCurve.emplace_back(step, lossValue);

                info = QatStep{};
                info.step = step;
                info.steps = totalSteps;
                info.epoch = epoch + 1;
                info.epochs = options.epochs;
                info.loss = lossValue;
                info.lr = lr;
                info.metricName = metricName;
                info.lossName = summary.lossName;
                const bool epochEnd = b + 1 == stepsPerEpoch;
                if (step % evalEvery == 0 || epochEnd || step == totalSteps) {
                    QuantizedModel current = snapshot(base, trainGraph, layers, options);
                    const double metric = evaluate(current);
                    summary.metricCurve.emplace_back(step, metric);
                    info.metric = metric;
                    if (metric > bestMetric || !options.keepBest) {
                        bestMetric = metric;
                        best = std::move(current);
                        summary.bestStep = step;
                    }
                }
                info.bestMetric = bestMetric;
                progress.report(0.04 + 0.96 * static_cast<double>(step) /
                                           static_cast<double>(totalSteps),
                                "QAT epoch " + std::to_string(epoch + 1) + "/" +
                                    std::to_string(options.epochs) + ", step " +
                                    std::to_string(step) + "/" + std::to_string(totalSteps) +
                                    ", loss " + std::to_string(lossValue));
                if (onStep)
                    onStep(info);
            }
        }
        if (!options.keepBest && summary.bestStep != step) {
            // The last state, even when it was not evaluated (a cancelled run).
            best = snapshot(base, trainGraph, layers, options);
            bestMetric = evaluate(best);
            summary.bestStep = step;
        }
        summary.epochs = epochsRun;
        summary.steps = step;
        summary.bestMetric = bestMetric;
        double tail = 0.0;
        const std::size_t last = std::min<std::size_t>(20, losses.size());
        for (std::size_t i = losses.size() - last; i < losses.size(); ++i)
            tail += losses[i];
        summary.finalLoss = last ? tail / static_cast<double>(last)
                                 : std::numeric_limits<double>::quiet_NaN();
        summary.seconds = secondsSince(started);
        best.scheme = scheme;
        best.qat = std::move(summary);
        progress.report(1.0, best.qat->cancelled ? "QAT cancelled: best checkpoint kept"
                                                 : "QAT done");
        return best;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("QAT failed: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
        return Error::runtime(std::string("QAT failed: ") + e.what());
    }
}

Result<QuantizedModel> prepareScheme(const ir::Graph& floatGraph, const quant::Scheme& scheme,
                                     const io::Dataset* data, Progress& progress,
                                     const CancelToken& cancel, const QatStepCallback& onStep,
                                     const QuantizedModel* reuse)
{
    if (scheme.qat) {
        if (!data || data->size() == 0)
            return Error::usage("scheme " + scheme.preset +
                                " trains the model: give training data (--calib DATA)");
        return trainQat(floatGraph, scheme, *data, *scheme.qat, progress, cancel, onStep);
    }
    return quant::prepare(floatGraph, scheme, data ? data->inputs : at::Tensor(), progress,
                          cancel, reuse);
}

} // namespace bitlens::train
