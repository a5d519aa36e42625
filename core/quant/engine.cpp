#include "quant/engine.h"

#include "quant/awq.h"
#include "quant/gptq.h"

#include "exec/sequence_ops.h"
#include "quant/bn_fold.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cmath>

namespace bitlens::quant {

namespace {

/// LSTM / GRU: two weights (W, R) and a recurrence whose hidden state is an activation too.
bool isRecurrent(const ir::Node& node)
{
    return node.op == ir::OpKind::LSTM || node.op == ir::OpKind::GRU;
}

bool transposedWeight(const ir::Node& node)
{
    if (node.op == ir::OpKind::MatMul)
        return true;
    return node.op == ir::OpKind::Gemm && node.attrs.getInt("transB", 0) == 0;
}

/// Reshapes a per-input-channel vector to broadcast against an activation [N, C, ...] (Conv)
/// or [..., C] (Gemm / MatMul).
at::Tensor channelShapeForActivation(const ir::Node& node, const at::Tensor& s, std::int64_t rank)
{
    if (node.op == ir::OpKind::Conv) {
        std::vector<std::int64_t> shape(static_cast<std::size_t>(rank), 1);
        shape[1] = -1;
        return s.reshape(shape);
    }
    return s;
}

/// Reshapes a per-input-channel vector to broadcast against the layer's weight.
at::Tensor channelShapeForWeight(const ir::Node& node, const at::Tensor& s, const at::Tensor& w)
{
    std::vector<std::int64_t> shape(static_cast<std::size_t>(w.dim()), 1);
    if (node.op == ir::OpKind::Conv)
        shape[1] = -1;
    else if (isRecurrent(node))
        shape[2] = -1;  // [dirs, gates * H, in]
    else if (transposedWeight(node))
        shape[0] = -1;  // [in, out]
    else
        shape[1] = -1;  // [out, in]
    return s.reshape(shape);
}

/// Per-input-channel max |x| of an activation.
at::Tensor channelAbsMax(const ir::Node& node, const at::Tensor& x)
{
    std::vector<std::int64_t> dims;
    const std::int64_t channelDim = node.op == ir::OpKind::Conv ? 1 : x.dim() - 1;
    for (std::int64_t d = 0; d < x.dim(); ++d)
        if (d != channelDim)
            dims.push_back(d);
    return x.abs().amax(dims).to(at::kFloat).to(at::kCPU);
}

/// Why GPTQ cannot run on this layer (empty: it can). GPTQ needs the layer's input as rows
/// that multiply the weight view [out, in]: Linear / MatMul inputs, and 2-D convolutions of one
/// group with symmetric explicit padding through im2col.
std::string gptqUnsupported(const ir::Node& node, const LayerConfig& c)
{
    if (c.method == LayerConfig::Method::Awq) {
        // AWQ divides the layer's input by a per-channel scale: Linear / MatMul inputs only,
        // in groups that divide the row (its duo scaling and clipping work group by group).
        if (isRecurrent(node))
            return "AWQ does not run on LSTM / GRU weights";
        if (c.ggmlType)
            return "AWQ does not run on ggml block types";
        if (traits(c.weightType).family == TypeFamily::Float)
            return "AWQ rounds to a grid; " + std::string(traits(c.weightType).name) + " is a cast";
        if (node.op == ir::OpKind::Conv)
            return "AWQ runs on Linear / MatMul layers, not convolutions";
        if (node.op == ir::OpKind::Gemm && node.attrs.getInt("transA", 0) != 0)
            return "AWQ does not run on a Gemm with transA = 1";
        return {};
    }
    if (isRecurrent(node))
        return "GPTQ does not run on LSTM / GRU weights";
    if (c.ggmlType)
        return "GPTQ does not run on ggml block types";
    if (traits(c.weightType).family == TypeFamily::Float)
        return "GPTQ rounds to a grid; " + std::string(traits(c.weightType).name) + " is a cast";
    if (node.op == ir::OpKind::Gemm && node.attrs.getInt("transA", 0) != 0)
        return "GPTQ does not run on a Gemm with transA = 1";
    if (node.op == ir::OpKind::Conv) {
        if (node.attrs.getInt("group", 1) != 1)
            return "GPTQ does not run on grouped (depthwise) convolutions";
        if (node.attrs.getString("auto_pad", "NOTSET") != "NOTSET")
            return "GPTQ does not run on convolutions with auto_pad";
        const auto pads = node.attrs.getInts("pads", {});
        if (pads.size() != 0 && (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]))
            return "GPTQ runs on 2-D convolutions with symmetric padding";
    }
    return {};
}

/// The rows of a layer input that multiply the weight view [out, in]: x [..., in] for Linear /
/// MatMul, the im2col patches [N * L, C * kh * kw] for a convolution.
at::Tensor gptqRows(const ir::Node& node, const at::Tensor& x, const at::Tensor& w)
{
    if (node.op != ir::OpKind::Conv)
        return x.reshape({-1, x.size(-1)});
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4, "GPTQ runs on 2-D convolutions, not an input of "
                "shape ", x.sizes());
    const std::vector<std::int64_t> kernel{w.size(2), w.size(3)};
    const auto strides = node.attrs.getInts("strides", {1, 1});
    const auto dilations = node.attrs.getInts("dilations", {1, 1});
    const auto pads = node.attrs.getInts("pads", {0, 0, 0, 0});
    const at::Tensor patches = at::im2col(x, kernel, dilations, {pads[0], pads[1]}, strides);
    return patches.transpose(1, 2).reshape({-1, patches.size(1)});
}

} // namespace

namespace {

/// Block-format activations as rows of features: the channel dimension of a 4-D (convolution)
/// input, else the last one, moved last and flattened to [rows, features], so that blocks run
/// along the reduction dimension of the layer, as the accelerators' MX kernels take them.
at::Tensor actRows(const at::Tensor& x)
{
    const at::Tensor last = x.dim() == 4 ? x.movedim(1, -1) : x;
    return last.reshape({-1, x.dim() == 0 ? 1 : last.size(-1)});
}

at::Tensor fromActRows(const at::Tensor& rows, const at::Tensor& x)
{
    if (x.dim() != 4)
        return rows.reshape(x.sizes());
    return rows.reshape({x.size(0), x.size(2), x.size(3), x.size(1)}).movedim(-1, 1).contiguous();
}

} // namespace

QParams dynamicQParams(const at::Tensor& x, const LayerConfig& c)
{
    if (c.actGranularity.kind == Granularity::Kind::PerGroup) {
        const at::Tensor rows = actRows(x);
        const Granularity g = Granularity::perGroup(1, c.actGranularity.groupSize);
        auto [lo, hi] = blockMinMax(rows, g);
        return chooseQParams(lo, hi, c.actType, true, g, CodeRange::Full, c.mxScale);
    }
    if (c.actGranularity.kind == Granularity::Kind::PerToken && x.dim() >= 2 && x.dim() <= 3) {
        auto [lo, hi] = blockMinMax(x.reshape({-1, x.size(-1)}), Granularity::perToken());
        return chooseQParams(lo, hi, c.actType, c.actSymmetric, Granularity::perToken());
    }
    auto [lo, hi] = blockMinMax(x, Granularity::perTensor());
    return chooseQParams(lo, hi, c.actType, c.actSymmetric, Granularity::perTensor());
}

namespace {

at::Tensor fakeQuantAct(const at::Tensor& x, const QParams& qp)
{
    if (qp.granularity.kind == Granularity::Kind::PerToken)
        return fakeQuantize(x.reshape({-1, x.size(-1)}), qp).reshape(x.sizes());
    if (qp.granularity.kind == Granularity::Kind::PerGroup)
        return fromActRows(fakeQuantize(actRows(x), qp), x);
    return fakeQuantize(x, qp);
}

Result<LayerQuant> quantizeWeight(const ir::Node& node, const at::Tensor& weight,
                                  const LayerConfig& config, const at::Tensor& smooth,
                                  const at::Tensor& hessian = at::Tensor(),
                                  const at::Tensor& xMean = at::Tensor())
{
    // NaN or Inf in a weight would become a NaN (or an infinite) scale and quantize the whole
    // block to garbage without a word: refuse, naming the layer and the first bad element.
    if (const at::Tensor bad = at::isfinite(weight).logical_not(); bad.any().item<bool>()) {
        const std::int64_t first = bad.reshape({-1}).nonzero()[0][0].item<std::int64_t>();
        const bool nan = at::isnan(weight.reshape({-1})[first]).item<bool>();
        return Error::badInput({}, "weight of layer '" + node.name + "' holds " +
                                       (nan ? "NaN" : "Inf") + " (element " +
                                       std::to_string(first) + " of " +
                                       std::to_string(weight.numel()) + ")");
    }
    LayerQuant lq;
    lq.layer = node.name;
    lq.config = config;
    lq.smooth = smooth;
    lq.weightFloat = smooth.defined() ? weight * channelShapeForWeight(node, smooth, weight)
                                      : weight;
    lq.params = weight.numel();
    lq.bytesFloat = weight.numel() * 4;
    const at::Tensor view = weightView(node, lq.weightFloat);
    if (config.ggmlType) {
        // ggml's block round trip along the input dimension: the weight a GGUF file of this
        // type holds, dequantized as llama.cpp reads it.
        const std::int64_t rowLength = view.size(1);
        const formats::GgmlType type = ggmlTypeForRow(*config.ggmlType, rowLength);
        const auto& t = formats::ggmlTraits(type);
        lq.note = ggmlFallbackNote(*config.ggmlType, rowLength);
        const at::Tensor rows = view.to(at::kCPU, at::kFloat).contiguous();
        const std::span<const float> src(rows.data_ptr<float>(),
                                         static_cast<std::size_t>(rows.numel()));
        auto bytes = formats::ggmlQuantize(src, type);
        if (!bytes)
            return Error{bytes.error().code,
                         "layer '" + node.name + "': " + bytes.error().message, {}, std::nullopt};
        at::Tensor back = at::empty(rows.sizes(), rows.options());
        if (auto r = formats::ggmlDequantize(*bytes, type,
                                    std::span<float>(back.data_ptr<float>(),
                                                     static_cast<std::size_t>(back.numel())));
            !r)
            return r.error();
        lq.weightGranularity =
            t.blockSize > 1 ? Granularity::perGroup(1, t.blockSize) : Granularity::perTensor();
        lq.weight.type = config.weightType;
        lq.weight.granularity = lq.weightGranularity;
        lq.weight.symmetric = config.weightSymmetric;
        lq.weightFq = weightUnview(node, back.to(weight.device()), weight).contiguous();
        lq.bytesQuantized = static_cast<std::int64_t>(bytes->size());
        return lq;
    }
    Granularity g = config.weightGranularity;
    if (g.kind == Granularity::Kind::PerToken)
        g = Granularity::perChannel(0);
    if (g.kind == Granularity::Kind::PerChannel)
        g.axis = 0;
    if (g.kind == Granularity::Kind::PerGroup) {
        g.axis = 1;
        // A row whose length the group size does not divide ends in a shorter block.
        if (view.size(1) % g.groupSize != 0)
            lq.note = "group " + std::to_string(g.groupSize) + " does not divide the " +
                      std::to_string(view.size(1)) + " inputs per output channel; the last " +
                      "block of each row holds " + std::to_string(view.size(1) % g.groupSize);
    }
    lq.weightGranularity = g;
    auto [lo, hi] = blockMinMax(view, g);
    lq.weight = chooseQParams(lo, hi, config.weightType, config.weightSymmetric, g,
                              config.weightCodeRange(), config.mxScale);
    const std::int64_t scaleCount = lq.weight.scale.numel();
    // Double quantization is bitsandbytes' step for NF4 (a layer overridden to another type
    // keeps its own scales).
    const bool doubleQuant = config.doubleQuant && config.weightType == QuantType::NF4;
    if (doubleQuant) {
        // bitsandbytes' compress_statistics: the codes are picked with the float32 absmax
        // (what bitsandbytes stores, unclamped), and dequantized with the double-quantized one.
        const at::Tensor absmax = at::maximum(lo.abs(), hi.abs()).to(at::kFloat);
        lq.weight.codeScale = lq.weight.scale;
        lq.weight.scale = doubleQuantizeAbsmax(absmax).absmax;
    }
    lq.weightFq = weightUnview(node, fakeQuantize(view, lq.weight), weight).contiguous();
    if (hessian.defined() && config.method == LayerConfig::Method::Awq) {
        AwqOptions options;
        options.clip = config.awqClip;
        const std::int64_t groupSize =
            g.kind == Granularity::Kind::PerGroup ? g.groupSize : view.size(1);
        // AutoAWQ leaves the query and key projections unclipped: attention scores are
        // sensitive to their range.
        const bool queryOrKey = node.name.find("q_proj") != std::string::npos ||
                                node.name.find("k_proj") != std::string::npos ||
                                node.name.find("query") != std::string::npos ||
                                node.name.find("key") != std::string::npos;
        if (queryOrKey)
            options.clip = false;
        if (view.size(1) % groupSize != 0) {
            lq.note += (lq.note.empty() ? "" : "; ") +
                       std::string("AWQ needs groups that divide the row; rounded to nearest");
        } else {
            auto awq = awqQuantize(view, hessian, xMean, config.weightType,
                                   config.weightSymmetric, g, config.weightCodeRange(), options);
            if (!awq)
                return Error{awq.error().code,
                             "layer '" + node.name + "': " + awq.error().message, {},
                             std::nullopt};
            lq.methodLossRtn = awq->lossRtn;
            lq.methodLoss = awq->loss;
            lq.smooth = awq->scales.to(weight.device());
            lq.weightFloat = weight * channelShapeForWeight(node, lq.smooth, weight);
            lq.weight = awq->params;
            lq.weight.range = config.weightCodeRange();
            lq.weightFq = weightUnview(node, awq->weight.to(weight.device()), weight).contiguous();
            lq.method = "awq";
            lq.codesFromFq = true;
            char ratio[32];
            std::snprintf(ratio, sizeof ratio, "%.2f", awq->ratio);
            const char* clipText = options.clip ? ", groups clipped"
                                   : queryOrKey ? ", not clipped (query / key)"
                                                : "";
            lq.note += (lq.note.empty() ? "" : "; ") + std::string("AWQ scale ratio ") + ratio +
                       clipText;
        }
    } else if (hessian.defined()) {
        GptqOptions options;
        options.damp = config.gptqDamp;
        options.actOrder = config.gptqActOrder;
        auto gptq = gptqQuantize(view, hessian, config.weightType, config.weightSymmetric, g,
                                 config.weightCodeRange(), options);
        if (!gptq)
            return Error{gptq.error().code, "layer '" + node.name + "': " + gptq.error().message,
                         {}, std::nullopt};
        lq.methodLossRtn = hessianError(view, weightView(node, lq.weightFq), hessian);
        lq.methodLoss = hessianError(view, gptq->weight, hessian);
        lq.weight = gptq->params;
        lq.weight.range = config.weightCodeRange();
        lq.weightFq = weightUnview(node, gptq->weight.to(weight.device()), weight).contiguous();
        lq.method = "gptq";
        lq.codesFromFq = true;
        if (gptq->deadColumns > 0) {
            const std::string dead = std::to_string(gptq->deadColumns) + " of " +
                                     std::to_string(view.size(1)) +
                                     " inputs were 0 in every calibration sample; GPTQ set " +
                                     "their weights to 0";
            lq.note += (lq.note.empty() ? "" : "; ") + dead;
        }
    }
    lq.bytesQuantized = quantizedBytes(view.numel(), lq.weight);
    // One byte per absmax instead of four, plus a float32 per 256 of them and the offset.
    if (doubleQuant)
        lq.bytesQuantized -= scaleCount * 3 - ((scaleCount + 255) / 256) * 4 - 4;
    return lq;
}

/// Collects activation statistics of planned layers during calibration runs.
class CalibrationHook : public exec::NodeHook {
public:
    enum class Pass { ChannelAbsMax, Observe, Hessian };

    CalibrationHook(const QuantizedModel& model, Pass pass, std::set<std::string> skip = {})
        : m_model(model), m_pass(pass), m_skip(std::move(skip))
    {
    }

    void beforeNode(const ir::Node& node, std::vector<at::Tensor>& inputs) override
    {
        auto it = m_model.plan.layers.find(node.name);
        if (it == m_model.plan.layers.end() || it->second.keepFloat || m_error ||
            m_skip.count(node.name))
            return;
        const LayerConfig& c = it->second;
        at::Tensor x = inputs[0];
        if (m_pass == Pass::Hessian) {
            if (c.method != LayerConfig::Method::Rtn && gptqUnsupported(node, c).empty() &&
                inputs.size() > 1) {
                const at::Tensor rows = gptqRows(node, x, inputs[1]);
                m_hessians[node.name].add(rows);
                if (c.method == LayerConfig::Method::Awq) {
                    // AWQ's activation statistic: mean |x| of each input channel.
                    auto& [sum, count] = m_absSum[node.name];
                    const at::Tensor s = rows.abs().to(at::kDouble).sum(0).to(at::kCPU);
                    sum = sum.defined() ? sum + s : s;
                    count += rows.size(0);
                }
            }
            return;
        }
        if (m_pass == Pass::ChannelAbsMax) {
            if (c.smoothAlpha <= 0.0)
                return;
            const at::Tensor m = channelAbsMax(node, x);
            auto& acc = m_channelMax[node.name];
            acc = acc.defined() ? at::maximum(acc, m) : m;
            return;
        }
        if (c.actMode != ActMode::Static)
            return;
        const auto& lq = m_model.layers.at(node.name);
        if (lq.smooth.defined())
            x = x / channelShapeForActivation(node, lq.smooth.to(x.device()), x.dim());
        auto& observer = m_observers[node.name];
        if (!observer) {
            auto factory = observerFactory(c.observer);
            if (!factory) {
                m_error = factory.error();
                return;
            }
            observer = (*factory)();
        }
        if (auto r = observer->observe(x); !r) {
            Error e = r.error();
            e.message = "input of layer '" + node.name + "' " + e.message;
            m_error = e;
        }
    }

    const QuantizedModel& m_model;
    Pass m_pass;
    std::set<std::string> m_skip;  ///< layers taken from an earlier prepare
    std::map<std::string, at::Tensor> m_channelMax;
    std::map<std::string, HessianAccumulator> m_hessians;
    std::map<std::string, std::pair<at::Tensor, std::int64_t>> m_absSum;  ///< AWQ: sum |x|, rows
    std::map<std::string, std::unique_ptr<Observer>> m_observers;
    std::optional<Error> m_error;
};

/// What calibration reads: the whole graph's calibration samples, or a part's inputs batch by
/// batch (preparePart).
struct CalibSource {
    at::Tensor inputs;
    const PartCalibration* part = nullptr;
};

/// Runs calibration batches through the (float) prepared graph with `hook` attached.
Result<void> calibrate(const QuantizedModel& model, const CalibSource& source,
                       CalibrationHook& hookRef, std::shared_ptr<exec::NodeHook> hook,
                       Progress& progress, double from, double to, const CancelToken& cancel)
{
    exec::Executor executor(model.graph);
    executor.addHook(std::move(hook));
    const std::int64_t n = source.part ? source.part->samples : source.inputs.size(0);
    const std::int64_t batch = calibrationBatch(model.graph);
    for (std::int64_t start = 0, b = 0; start < n; start += batch, ++b) {
        if (cancel.cancelled())
            return Error::cancelled();
        const std::int64_t end = std::min(n, start + batch);
        auto out = source.part
                       ? executor.run(source.part->batches.at(static_cast<std::size_t>(b)))
                       : executor.run(exec::inputsForBatch(model.graph,
                                                           source.inputs.slice(0, start, end)));
        if (!out)
            return out.error();
        if (hookRef.m_error) {
            Error e = *hookRef.m_error;
            e.code = ErrorCode::BadInput;
            e.message = "calibration batch " + std::to_string(b + 1) + " (samples " +
                        std::to_string(start) + "-" + std::to_string(end - 1) + "): " +
                        e.message;
            return e;
        }
        progress.report(from + (to - from) * static_cast<double>(end) / static_cast<double>(n),
                        "calibrating");
    }
    return {};
}

class QuantHook : public exec::NodeHook {
public:
    QuantHook(const QuantizedModel& model, std::set<std::string> only)
        : m_model(model), m_only(std::move(only))
    {
    }

    void beforeNode(const ir::Node& node, std::vector<at::Tensor>& inputs) override
    {
        const LayerQuant* found = layerOf(node);
        if (!found)
            return;
        const LayerQuant& lq = *found;
        const LayerConfig& c = lq.config;
        at::Tensor x = inputs[0];
        if (isRecurrent(node)) {
            // The activations (X and the hidden state) are quantized in computeNode.
            inputs[1] = device(lq.weightFq, x, lq.layer + ".w");
            inputs[2] = device(lq.recurrentFq, x, lq.layer + ".r");
            return;
        }
        at::Tensor w = device(lq.weightFq, x, lq.layer + ".w");
        if (lq.smooth.defined())
            x = x / channelShapeForActivation(node, device(lq.smooth, x, lq.layer + ".s"), x.dim());
        switch (c.actMode) {
        case ActMode::Float: break;
        case ActMode::Cast:
            x = x.to(c.actType == QuantType::BF16 ? at::kBFloat16 : at::kHalf).to(at::kFloat);
            break;
        case ActMode::Static: x = fakeQuantAct(x, *lq.act); break;
        case ActMode::Dynamic:
            if (c.outlierThreshold > 0.0 && node.op != ir::OpKind::Conv)
                std::tie(x, w) = llmInt8(node, x, lq);
            else
                x = fakeQuantAct(x, dynamicQParams(x, c));
            break;
        }
        inputs[0] = x;
        inputs[1] = w;
    }

    /// LSTM / GRU with quantized activations: X is quantized as any layer input (once for the
    /// whole sequence: dynamic schemes take one range per batch over all steps, as PyTorch's
    /// quantized dynamic LSTM does on the CPU, where it projects the whole input sequence in
    /// one linear_dynamic call), and the hidden state is quantized before every recurrent
    /// product (dynamic: one range per step, over the batch, as PyTorch's per-step
    /// linear_dynamic of h; static: the fixed range [-1, 1] that h = o * tanh(c) cannot leave).
    bool computeNode(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                     std::vector<at::Tensor>& outputs) override
    {
        if (!isRecurrent(node))
            return false;
        const LayerQuant* found = layerOf(node);
        if (!found || found->config.actMode == ActMode::Float)
            return false;
        const LayerQuant& lq = *found;
        const LayerConfig& c = lq.config;
        std::vector<at::Tensor> in = inputs;
        at::Tensor x = in[0];
        if (lq.smooth.defined())
            x = x / channelShapeForActivation(node, device(lq.smooth, x, lq.layer + ".s"), x.dim());
        exec::HiddenQuant hidden;
        switch (c.actMode) {
        case ActMode::Float: break;
        case ActMode::Cast: {
            const auto type = c.actType == QuantType::BF16 ? at::kBFloat16 : at::kHalf;
            x = x.to(type).to(at::kFloat);
            hidden = [type](const at::Tensor& h) { return h.to(type).to(at::kFloat); };
            break;
        }
        case ActMode::Static: {
            x = fakeQuantAct(x, *lq.act);
            const QParams qp = *lq.hiddenAct;
            hidden = [qp](const at::Tensor& h) { return fakeQuantAct(h, qp); };
            break;
        }
        case ActMode::Dynamic:
            if (c.outlierThreshold > 0.0)
                std::tie(x, in[1]) = llmInt8(node, x, lq);
            else
                x = fakeQuantAct(x, dynamicQParams(x, c));
            hidden = [c](const at::Tensor& h) { return fakeQuantAct(h, dynamicQParams(h, c)); };
            break;
        }
        in[0] = x;
        outputs = exec::runRnn(node, in, hidden);
        return true;
    }

private:
    /// LLM.int8(): input columns whose |x| exceeds the threshold anywhere in the batch stay in
    /// 16-bit (x and the matching weight inputs); the rest run int8 (per token / per channel).
    std::pair<at::Tensor, at::Tensor> llmInt8(const ir::Node& node, const at::Tensor& x,
                                              const LayerQuant& lq)
    {
        const LayerConfig& c = lq.config;
        std::vector<std::int64_t> dims;
        for (std::int64_t d = 0; d + 1 < x.dim(); ++d)
            dims.push_back(d);
        const at::Tensor outlier = x.abs().amax(dims).gt(c.outlierThreshold);  // [in]
        at::Tensor w = device(lq.weightFq, x, lq.layer + ".w");
        if (!outlier.any().item<bool>())
            return {fakeQuantAct(x, dynamicQParams(x, c)), w};
        const at::Tensor regular = x.masked_fill(outlier, 0.0);
        const at::Tensor xq = fakeQuantAct(regular, dynamicQParams(regular, c)) +
                              (x - regular).to(at::kHalf).to(at::kFloat);
        const at::Tensor w16 = device(lq.weightFloat, x, lq.layer + ".wf").to(at::kHalf)
                                   .to(at::kFloat);
        const at::Tensor mask = channelShapeForWeight(node, outlier, w16);
        return {xq, at::where(mask, w16, w)};
    }

    /// The prepared layer of `node` when this hook quantizes it, else null.
    const LayerQuant* layerOf(const ir::Node& node) const
    {
        auto it = m_model.layers.find(node.name);
        if (it == m_model.layers.end() || (!m_only.empty() && m_only.count(node.name) == 0) ||
            it->second.config.keepFloat)
            return nullptr;
        return &it->second;
    }

    /// `t` on the device of `like`, cached so weights cross to a GPU once.
    const at::Tensor& device(const at::Tensor& t, const at::Tensor& like, const std::string& key)
    {
        if (t.device() == like.device())
            return t;
        auto& cached = m_onDevice[key];
        if (!cached.defined())
            cached = t.to(like.device());
        return cached;
    }

    const QuantizedModel& m_model;
    std::set<std::string> m_only;
    std::map<std::string, at::Tensor> m_onDevice;
};

} // namespace

QParams hiddenStateQParams(const LayerConfig& c)
{
    return chooseQParams(at::full({}, -1.0f), at::full({}, 1.0f), c.actType, c.actSymmetric,
                         Granularity::perTensor());
}

at::Tensor weightView(const ir::Node& node, const at::Tensor& weight)
{
    if (node.op == ir::OpKind::Conv)
        return weight.reshape({weight.size(0), -1});
    if (isRecurrent(node))
        return weight.reshape({-1, weight.size(-1)});
    if (transposedWeight(node))
        return weight.dim() == 2 ? weight.t() : weight.reshape({-1, weight.size(-1)}).t();
    return weight;
}

at::Tensor weightUnview(const ir::Node& node, const at::Tensor& view, const at::Tensor& likeWeight)
{
    if (node.op == ir::OpKind::Conv || isRecurrent(node))
        return view.reshape(likeWeight.sizes());
    if (transposedWeight(node))
        return view.t().reshape(likeWeight.sizes());
    return view;
}

const at::Tensor& codeSource(const LayerQuant& lq)
{
    return lq.codesFromFq ? lq.weightFq : lq.weightFloat;
}

namespace {

Result<QuantizedModel> prepareImpl(const ir::Graph& floatGraph, const Scheme& scheme,
                                   const at::Tensor& calibInputs, Progress& progress,
                                   const CancelToken& cancel, const QuantizedModel* reuse,
                                   const Plan* givenPlan, const PartCalibration* partCalib)
{
    try {
        c10::InferenceMode guard;
        QuantizedModel model;
        model.scheme = scheme;
        if (givenPlan) {
            // A part: the caller widened the weights its quantized layers read; the rest
            // (a float head, norms) stay as they are, widened by the executor as it reads them.
            // Folding needs a BatchNorm's producer, which may be in another part; a part
            // without BatchNorm (a decoder block) has nothing to fold.
            for (const auto& node : floatGraph.nodes)
                if (scheme.foldBatchNorm && node.op == ir::OpKind::BatchNorm)
                    return Error::unsupported({}, "scheme " + scheme.preset +
                                                      " folds BatchNorm (node '" + node.name +
                                                      "'), which needs the whole graph");
            model.graph = floatGraph;
            model.bytesFloat = model.graph.parameterBytes();
        } else {
            // Passes rewrite weights in float32: 16-bit weights kept mapped at open widen here.
            auto wide = ir::widened(floatGraph);
            if (!wide)
                return wide.error();
            model.bytesFloat = wide->parameterBytes();
            model.graph = scheme.foldBatchNorm ? foldBatchNorm(*wide, &model.foldedBatchNorms)
                                               : std::move(wide).value();
        }
        if (givenPlan) {
            // A part of a graph: its layers as the whole graph's plan configures them.
            for (const auto& node : model.graph.nodes)
                if (auto it = givenPlan->layers.find(node.name); it != givenPlan->layers.end())
                    model.plan.layers[node.name] = it->second;
        } else {
            auto plan = makePlan(model.graph, scheme);
            if (!plan)
                return plan.error();
            model.plan = *plan;
        }

        // Layers an earlier prepare already did with the same configuration and calibration.
        const std::int64_t calibCount =
            partCalib ? partCalib->samples
            : calibInputs.defined() ? std::min(calibInputs.size(0), scheme.calibSamples)
                                    : 0;
        std::set<std::string> reused;
        if (reuse && reuse->scheme.foldBatchNorm == scheme.foldBatchNorm) {
            for (const auto& [name, c] : model.plan.layers) {
                auto old = reuse->layers.find(name);
                if (old == reuse->layers.end() || !(old->second.config == c))
                    continue;
                const bool calibrated =
                    !c.keepFloat && (c.actMode == ActMode::Static || c.smoothAlpha > 0.0 ||
                                     c.method != LayerConfig::Method::Rtn);
                if (calibrated && reuse->calibSamples != calibCount)
                    continue;
                reused.insert(name);
            }
        }
        model.reusedLayers.assign(reused.begin(), reused.end());

        bool needsCalibration = false;
        bool needsSmoothing = false;
        bool needsHessians = false;
        bool anyCalibrated = false;
        std::int64_t hessianBytes = 0;
        for (const auto& [name, c] : model.plan.layers) {
            const bool isStatic = !c.keepFloat && c.actMode == ActMode::Static;
            const bool isSmoothed = !c.keepFloat && c.smoothAlpha > 0.0;
            const bool byMethod = !c.keepFloat && c.method != LayerConfig::Method::Rtn;
            anyCalibrated = anyCalibrated || isStatic || isSmoothed || byMethod;
            if (reused.count(name))
                continue;
            needsCalibration = needsCalibration || isStatic;
            needsSmoothing = needsSmoothing || isSmoothed;
            if (byMethod) {
                needsHessians = true;
                for (const auto& node : model.graph.nodes) {
                    if (node.name != name || node.inputs.size() < 2)
                        continue;
                    if (const at::Tensor* w = model.graph.initializer(node.inputs[1])) {
                        const std::int64_t in = weightView(node, *w).size(1);
                        hessianBytes += in * in * 4;
                    }
                }
            }
        }
        CalibSource calib;
        if (needsCalibration || needsSmoothing || needsHessians) {
            if (calibCount == 0)
                return Error::usage("scheme " + scheme.preset +
                                    (needsHessians && !needsCalibration && !needsSmoothing
                                         ? std::string(" with method=") +
                                               (scheme.config.method ==
                                                        LayerConfig::Method::Awq
                                                    ? "awq"
                                                    : "gptq") +
                                               " reads each layer's inputs"
                                         : " calibrates activations") +
                                    ": give calibration data (--calib)");
            if (partCalib)
                calib.part = partCalib;
            else
                calib.inputs = calibInputs.slice(0, 0, calibCount);
        }
        // GPTQ holds one Hessian [in, in] per layer until the weights are rounded.
        constexpr std::int64_t kHessianBudget = std::int64_t{8} << 30;
        if (hessianBytes > kHessianBudget)
            return Error::unsupported({}, "GPTQ / AWQ would hold " +
                                              std::to_string(hessianBytes >> 20) +
                                              " MiB of Hessians at once (budget " +
                                              std::to_string(kHessianBudget >> 20) +
                                              " MiB); quantize fewer layers with this method "
                                              "(per-layer overrides)");
        if (anyCalibrated)
            model.calibSamples = calibCount;

        // Pass 1 (SmoothQuant only): per-input-channel activation maxima.
        std::map<std::string, at::Tensor> smooth;
        if (needsSmoothing) {
            auto hook = std::make_shared<CalibrationHook>(
                model, CalibrationHook::Pass::ChannelAbsMax, reused);
            if (auto r = calibrate(model, calib, *hook, hook, progress, 0.0, 0.3, cancel); !r)
                return r.error();
            for (const auto& [name, actMax] : hook->m_channelMax) {
                const ir::Node* node = nullptr;
                for (const auto& n : model.graph.nodes)
                    if (n.name == name)
                        node = &n;
                const at::Tensor& w = *model.graph.initializer(node->inputs[1]);
                // s_j = max|X_j|^alpha / max|W_j|^(1 - alpha), over the input channel j.
                const at::Tensor wView = weightView(*node, w);  // [out, in * k]
                const std::int64_t in = actMax.numel();
                const at::Tensor wMax =
                    wView.reshape({wView.size(0), in, -1}).abs().amax({0, 2});
                const double alpha = model.plan.layers.at(name).smoothAlpha;
                smooth[name] = (actMax.clamp_min(1e-5).pow(alpha) /
                                wMax.clamp_min(1e-5).pow(1.0 - alpha))
                                   .clamp_min(1e-5);
            }
        }

        // Pass 1b (GPTQ, AWQ): each layer's Hessian 2/N X^T X of its float inputs (and, for
        // AWQ, the mean |x| of each input channel).
        std::map<std::string, HessianAccumulator> hessians;
        std::map<std::string, at::Tensor> inputAbsMean;
        if (needsHessians) {
            auto hook = std::make_shared<CalibrationHook>(model, CalibrationHook::Pass::Hessian,
                                                          reused);
            if (auto r = calibrate(model, calib, *hook, hook, progress, 0.0, 0.3, cancel); !r)
                return r.error();
            hessians = std::move(hook->m_hessians);
            for (const auto& [name, acc] : hook->m_absSum)
                inputAbsMean[name] =
                    (acc.first / static_cast<double>(std::max<std::int64_t>(acc.second, 1)))
                        .to(at::kFloat);
        }
        std::size_t gptqDone = 0;

        // Weights.
        std::int64_t quantizedWeightBytes = 0;
        std::set<std::string> quantizedWeightNames;
        for (const auto& node : model.graph.nodes) {
            auto it = model.plan.layers.find(node.name);
            if (it == model.plan.layers.end())
                continue;
            const at::Tensor& w = *model.graph.initializer(node.inputs[1]);
            const bool recurrent = isRecurrent(node);
            // An LSTM / GRU also reads R, quantized like W (per gate row).
            const at::Tensor* r = recurrent ? model.graph.initializer(node.inputs[2]) : nullptr;
            if (reused.count(node.name)) {
                const LayerQuant& old = reuse->layers.at(node.name);
                if (!old.config.keepFloat) {
                    quantizedWeightBytes += old.bytesQuantized;
                    quantizedWeightNames.insert(node.inputs[1]);
                    if (r)
                        quantizedWeightNames.insert(node.inputs[2]);
                }
                model.layers[node.name] = old;
                continue;
            }
            if (it->second.keepFloat) {
                LayerQuant lq;
                lq.layer = node.name;
                lq.config = it->second;
                lq.params = w.numel() + (r ? r->numel() : 0);
                lq.bytesFloat = lq.bytesQuantized = lq.params * 4;
                // Float without an override of its own: a language model's output head, which
                // the LLM presets keep float32 by default (quant/scheme.cpp, makePlan).
                if (!scheme.config.keepFloat && scheme.overrides.count(node.name) == 0)
                    lq.note = "output head kept float32 by this preset, as transformers with "
                              "bitsandbytes does (scheme option head=quantize quantizes it)";
                model.layers[node.name] = lq;
                continue;
            }
            auto sIt = smooth.find(node.name);
            auto hIt = hessians.find(node.name);
            if (hIt != hessians.end()) {
                if (cancel.cancelled())
                    return Error::cancelled();
                progress.report(0.3 + 0.7 * static_cast<double>(gptqDone) /
                                          static_cast<double>(hessians.size()),
                                (it->second.method == LayerConfig::Method::Awq ? "AWQ "
                                                                               : "GPTQ ") +
                                    node.name);
                ++gptqDone;
            }
            auto lq = quantizeWeight(node, w, it->second,
                                     sIt == smooth.end() ? at::Tensor() : sIt->second,
                                     hIt == hessians.end() ? at::Tensor()
                                                           : hIt->second.hessian(),
                                     inputAbsMean.count(node.name) ? inputAbsMean.at(node.name)
                                                                   : at::Tensor());
            if (!lq)
                return lq.error();
            const bool awq = it->second.method == LayerConfig::Method::Awq;
            if (it->second.method != LayerConfig::Method::Rtn && lq->method == "rtn" &&
                lq->note.find("rounded to nearest") == std::string::npos) {
                const std::string why = gptqUnsupported(node, it->second);
                lq->note += (lq->note.empty() ? "" : "; ") +
                            (why.empty() ? std::string(awq ? "AWQ" : "GPTQ") +
                                               " had no calibration input for this layer"
                                         : why) +
                            "; rounded to nearest";
            }
            if (hIt != hessians.end())
                hessians.erase(hIt);  // the Hessian is done with: free it
            if (r) {
                auto rq = quantizeWeight(node, *r, it->second, at::Tensor());
                if (!rq)
                    return rq.error();
                lq->recurrent = rq->weight;
                lq->recurrentFloat = rq->weightFloat;
                lq->recurrentFq = rq->weightFq;
                lq->params += rq->params;
                lq->bytesFloat += rq->bytesFloat;
                lq->bytesQuantized += rq->bytesQuantized;
                if (!rq->note.empty())
                    lq->note += (lq->note.empty() ? "" : "; ") + ("R: " + rq->note);
                if (it->second.actMode == ActMode::Static)
                    lq->hiddenAct = hiddenStateQParams(it->second);
                quantizedWeightNames.insert(node.inputs[2]);
            }
            quantizedWeightBytes += lq->bytesQuantized;
            quantizedWeightNames.insert(node.inputs[1]);
            model.layers[node.name] = std::move(lq).value();
        }

        // Pass 2: static activation ranges.
        if (needsCalibration) {
            auto hook = std::make_shared<CalibrationHook>(model, CalibrationHook::Pass::Observe,
                                                          reused);
            const double from = needsSmoothing ? 0.3 : 0.0;
            if (auto r = calibrate(model, calib, *hook, hook, progress, from, 1.0, cancel); !r)
                return r.error();
            for (auto& [name, observer] : hook->m_observers) {
                LayerQuant& lq = model.layers.at(name);
                ClipChoice clip = observer->choose(lq.config.actType, lq.config.actSymmetric);
                const at::Tensor lo = at::full({}, clip.lo, at::kFloat);
                const at::Tensor hi = at::full({}, clip.hi, at::kFloat);
                lq.act = chooseQParams(lo, hi, lq.config.actType, lq.config.actSymmetric,
                                       Granularity::perTensor());
                lq.actClip = std::move(clip);
            }
        }

        // Model size: quantized weights as stored, everything else as it is (16-bit schemes
        // store the rest in 16 bits too).
        model.bytesQuantized = quantizedWeightBytes;
        for (const auto& [name, t] : model.graph.initializers) {
            if (quantizedWeightNames.count(name))
                continue;
            model.bytesQuantized += t.numel() * static_cast<std::int64_t>(t.element_size());
        }
        progress.report(1.0, "prepared");
        return model;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("quantization failed: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
        return Error::runtime(std::string("quantization failed: ") + e.what());
    }
}

} // namespace

Result<QuantizedModel> prepare(const ir::Graph& floatGraph, const Scheme& scheme,
                               const at::Tensor& calibInputs, Progress& progress,
                               const CancelToken& cancel, const QuantizedModel* reuse)
{
    return prepareImpl(floatGraph, scheme, calibInputs, progress, cancel, reuse, nullptr,
                       nullptr);
}

std::int64_t calibrationBatch(const ir::Graph& graph)
{
    // Sequence models (metadata "task") run a few windows at a time: logits are [B, S, vocab].
    return graph.metadata.count("task") != 0 ? 4 : 100;
}

Result<QuantizedModel> preparePart(const ir::Graph& part, const Scheme& scheme, const Plan& plan,
                                   const CancelToken& cancel, const PartCalibration* calib,
                                   Progress& progress)
{
    return prepareImpl(part, scheme, at::Tensor(), progress, cancel, nullptr, &plan, calib);
}

std::shared_ptr<exec::NodeHook> makeQuantHook(const QuantizedModel& model,
                                              std::set<std::string> only)
{
    return std::make_shared<QuantHook>(model, std::move(only));
}

} // namespace bitlens::quant
