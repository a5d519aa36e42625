#include "export/onnx_qdq.h"

#include "quant/quant_type.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <set>

namespace bitlens::exporting {

namespace {

using quant::ActMode;
using quant::Granularity;
using quant::LayerConfig;
using quant::QuantType;

/// The ONNX element type that holds codes of `type`, or nullopt when ONNX has none.
std::optional<ir::DType> onnxCodeType(QuantType type)
{
    switch (type) {
    case QuantType::Int8: return ir::DType::Int8;
    case QuantType::UInt8: return ir::DType::UInt8;
    case QuantType::Int4: return ir::DType::Int4;
    case QuantType::UInt4: return ir::DType::UInt4;
    case QuantType::FP8E4M3: return ir::DType::Float8E4M3FN;
    case QuantType::FP8E5M2: return ir::DType::Float8E5M2;
    default: return std::nullopt;
    }
}

/// Int4 / UInt4 for 4-bit integer types (held one code per byte, packed in the file).
std::optional<ir::DType> packedType(QuantType type)
{
    if (type == QuantType::Int4)
        return ir::DType::Int4;
    if (type == QuantType::UInt4)
        return ir::DType::UInt4;
    return std::nullopt;
}

bool isIntegerCode(QuantType type)
{
    return type == QuantType::Int8 || type == QuantType::UInt8 || type == QuantType::Int4 ||
           type == QuantType::UInt4;
}

bool transposedWeight(const ir::Node& node)
{
    return node.op == ir::OpKind::MatMul ||
           (node.op == ir::OpKind::Gemm && node.attrs.getInt("transB", 0) == 0);
}

/// Zero points as stored: int64 values to the code type (int4 as int8, float8 as 0.0).
at::Tensor zeroPointCodes(const at::Tensor& zeroPoint, QuantType type, at::IntArrayRef shape)
{
    switch (type) {
    case QuantType::Int8:
    case QuantType::Int4: return zeroPoint.to(at::kCPU).to(at::kChar).reshape(shape).contiguous();
    case QuantType::UInt8:
    case QuantType::UInt4: return zeroPoint.to(at::kCPU).to(at::kByte).reshape(shape).contiguous();
    case QuantType::FP8E4M3: return at::zeros(shape, at::kFloat8_e4m3fn);
    case QuantType::FP8E5M2: return at::zeros(shape, at::kFloat8_e5m2);
    default: return {};
    }
}

/// Builds the QDQ graph: names are kept unique, every new value is defined before it is read.
class QdqBuilder {
public:
    explicit QdqBuilder(const quant::QuantizedModel& model) : m_model(model)
    {
        m_graph = model.graph;
        m_graph.nodes.clear();
        for (const auto& info : m_graph.inputs)
            m_names.insert(info.name);
        for (const auto& [name, t] : m_graph.initializers)
            m_names.insert(name);
        for (const auto& node : model.graph.nodes) {
            m_names.insert(node.name);
            m_names.insert(node.outputs.begin(), node.outputs.end());
        }
    }

    Result<void> addLayer(const ir::Node& node, const quant::LayerQuant& lq);
    void addFloat(const ir::Node& node) { m_graph.nodes.push_back(node); }
    ir::Graph finish();

private:
    std::string fresh(const std::string& base)
    {
        std::string name = base;
        for (int n = 1; !m_names.insert(name).second; ++n)
            name = base + "_" + std::to_string(n);
        return name;
    }
    std::string constant(const std::string& base, const at::Tensor& value,
                         std::optional<ir::DType> fileType = std::nullopt)
    {
        const std::string name = fresh(base);
        m_graph.initializers[name] = value.contiguous();
        if (fileType)
            m_graph.initializerTypes[name] = *fileType;
        return name;
    }
    std::string addNode(const std::string& name, ir::OpKind op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs, ir::Attributes attrs = {})
    {
        ir::Node n;
        n.name = fresh(name);
        n.op = op;
        n.inputs = std::move(inputs);
        n.outputs = std::move(outputs);
        n.attrs = std::move(attrs);
        m_graph.nodes.push_back(std::move(n));
        return m_graph.nodes.back().outputs.front();
    }
    Result<std::string> quantizedActivation(const ir::Node& node, const quant::LayerQuant& lq,
                                            std::string x);
    Result<std::string> dequantizedWeight(const ir::Node& node, const quant::LayerQuant& lq);

    const quant::QuantizedModel& m_model;
    ir::Graph m_graph;
    std::set<std::string> m_names;
};

Result<std::string> QdqBuilder::quantizedActivation(const ir::Node& node,
                                                    const quant::LayerQuant& lq, std::string x)
{
    const LayerConfig& c = lq.config;
    const std::string& layer = node.name;
    if (lq.smooth.defined()) {
        // SmoothQuant: the layer reads x / s (the weight already holds W * s).
        const at::Tensor* w = m_model.graph.initializer(node.inputs[1]);
        at::Tensor s = lq.smooth.to(at::kCPU, at::kFloat);
        if (node.op == ir::OpKind::Conv) {
            std::vector<std::int64_t> shape(static_cast<std::size_t>(w->dim()), 1);
            shape[1] = -1;
            s = s.reshape(shape);
        }
        const std::string divisor = constant(layer + ".smooth", s);
        x = addNode(layer + "/smooth", ir::OpKind::Div, {x, divisor},
                    {fresh(layer + ".input_smoothed")});
    }
    switch (c.actMode) {
    case ActMode::Float: return x;
    case ActMode::Static: {
        if (!lq.act)
            return Error::runtime("layer '" + layer + "' has no calibrated activation range");
        const at::Tensor scale = lq.act->scale.to(at::kCPU, at::kFloat).reshape({}).clone();
        const std::string scaleName = constant(layer + ".input_scale", scale);
        const std::optional<ir::DType> packed = packedType(c.actType);
        const std::string zpName = constant(layer + ".input_zero_point",
                                            zeroPointCodes(lq.act->zeroPoint, c.actType, {}),
                                            packed);
        ir::Attributes qAttrs;
        if (packed)
            qAttrs.set("output_dtype", static_cast<std::int64_t>(*packed));
        const std::string q = addNode(layer + "/input_QuantizeLinear", ir::OpKind::QuantizeLinear,
                                      {x, scaleName, zpName}, {fresh(layer + ".input_quantized")},
                                      qAttrs);
        return addNode(layer + "/input_DequantizeLinear", ir::OpKind::DequantizeLinear,
                       {q, scaleName, zpName}, {fresh(layer + ".input_dequantized")});
    }
    case ActMode::Dynamic: {
        // DynamicQuantizeLinear: uint8, asymmetric, one range for the whole tensor, as BitLens'
        // dynamic-int8 computes it per batch (checked by onnxQdqLimitation).
        const std::string q = fresh(layer + ".input_quantized");
        const std::string s = fresh(layer + ".input_scale");
        const std::string zp = fresh(layer + ".input_zero_point");
        ir::Node dq;
        dq.name = fresh(layer + "/input_DynamicQuantizeLinear");
        dq.op = ir::OpKind::DynamicQuantizeLinear;
        dq.inputs = {x};
        dq.outputs = {q, s, zp};
        m_graph.nodes.push_back(std::move(dq));
        return addNode(layer + "/input_DequantizeLinear", ir::OpKind::DequantizeLinear,
                       {q, s, zp}, {fresh(layer + ".input_dequantized")});
    }
    case ActMode::Cast: break;
    }
    return Error::unsupported({}, "layer '" + layer + "': " + *onnxQdqLimitation(c));
}

Result<std::string> QdqBuilder::dequantizedWeight(const ir::Node& node,
                                                  const quant::LayerQuant& lq)
{
    const LayerConfig& c = lq.config;
    const std::string& layer = node.name;
    const std::string& weightName = node.inputs[1];
    const at::Tensor* w = m_model.graph.initializer(weightName);
    if (!w)
        return Error::runtime("layer '" + layer + "' has no constant weight");
    const std::optional<ir::DType> packed = packedType(c.weightType);
    // The codes BitLens' simulation dequantizes (same rounding as lq.weightFq: one code per
    // element of the 2-D view [out, in * kernel]).
    const at::Tensor view =
        quant::weightView(node, quant::codeSource(lq).to(at::kCPU, at::kFloat));
    const at::Tensor codesView = quant::quantize(view, lq.weight).contiguous();
    const quant::QParams& qp = lq.weight;
    const at::Tensor scale = qp.scale.to(at::kCPU, at::kFloat).contiguous();
    const at::Tensor zeroPoint = zeroPointCodes(qp.zeroPoint, c.weightType, scale.sizes());
    const bool transposed = transposedWeight(node);
    const std::int64_t rank = w->dim();

    ir::Attributes attrs;
    at::Tensor codes;
    at::Tensor scaleStored;
    at::Tensor zpStored;  // laid out as the scale
    bool viaView = false;  // DequantizeLinear on the 2-D view, then back to W's layout
    switch (lq.weightGranularity.kind) {
    case Granularity::Kind::PerTensor:
        codes = quant::weightUnview(node, codesView, *w);
        scaleStored = scale.reshape({});
        zpStored = zeroPoint.reshape({});
        break;
    case Granularity::Kind::PerChannel:
        codes = quant::weightUnview(node, codesView, *w);
        scaleStored = scale.reshape({-1});
        zpStored = zeroPoint.reshape({-1});
        attrs.set("axis", transposed ? rank - 1 : std::int64_t{0});
        break;
    case Granularity::Kind::PerGroup:
        attrs.set("block_size", lq.weightGranularity.groupSize);
        if (node.op != ir::OpKind::Conv && rank == 2) {
            // Gemm [out, in]: blocks along axis 1; [in, out] weights: along axis 0.
            codes = quant::weightUnview(node, codesView, *w);
            scaleStored = transposed ? scale.t().contiguous() : scale;
            zpStored = transposed ? zeroPoint.t().contiguous() : zeroPoint;
            attrs.set("axis", transposed ? std::int64_t{0} : std::int64_t{1});
        } else {
            // Conv [out, in, kh, kw]: the groups run over in * kh * kw, which is no single axis
            // of W, so the view is stored and reshaped back after dequantization.
            codes = codesView;
            scaleStored = scale;
            zpStored = zeroPoint;
            attrs.set("axis", std::int64_t{1});
            viaView = true;
        }
        break;
    case Granularity::Kind::PerToken:
        return Error::unsupported({}, "layer '" + layer + "': per-token weights cannot be written");
    }
    const std::string base = m_names.count(weightName + "_quantized") ? layer + "." + weightName
                                                                       : weightName;
    const std::string codesName = constant(base + "_quantized", codes, packed);
    const std::string scaleName = constant(base + "_scale", scaleStored);
    const std::string zpName = constant(base + "_zero_point", zpStored, packed);
    std::string out = addNode(base + "_DequantizeLinear", ir::OpKind::DequantizeLinear,
                              {codesName, scaleName, zpName},
                              {fresh(base + (viaView ? "_dequantized_2d" : "_dequantized"))},
                              attrs);
    if (viaView) {
        if (transposed) {
            ir::Attributes perm;
            perm.set("perm", std::vector<std::int64_t>{1, 0});
            out = addNode(base + "_Transpose", ir::OpKind::Transpose, {out},
                          {fresh(base + "_dequantized_t")}, perm);
        }
        const std::string shape =
            constant(base + "_shape", at::tensor(w->sizes().vec(), at::kLong));
        out = addNode(base + "_Reshape", ir::OpKind::Reshape, {out, shape},
                      {fresh(base + "_dequantized")});
    }
    return out;
}

Result<void> QdqBuilder::addLayer(const ir::Node& node, const quant::LayerQuant& lq)
{
    if (auto why = onnxQdqLimitation(lq.config))
        return Error::unsupported({}, "layer '" + node.name + "' (" + lq.config.describe() +
                                          "): " + *why);
    if (node.inputs.size() < 2)
        return Error::runtime("layer '" + node.name + "' has no weight input");
    auto x = quantizedActivation(node, lq, node.inputs[0]);
    if (!x)
        return x.error();
    auto w = dequantizedWeight(node, lq);
    if (!w)
        return w.error();
    ir::Node layer = node;
    layer.inputs[0] = *x;
    layer.inputs[1] = *w;
    m_graph.nodes.push_back(std::move(layer));
    return {};
}

ir::Graph QdqBuilder::finish()
{
    // Float weights that only quantized layers read are gone from the graph now.
    std::set<std::string> read;
    for (const auto& node : m_graph.nodes)
        read.insert(node.inputs.begin(), node.inputs.end());
    for (auto it = m_graph.initializers.begin(); it != m_graph.initializers.end();) {
        if (read.count(it->first) == 0) {
            m_graph.initializerTypes.erase(it->first);
            it = m_graph.initializers.erase(it);
        } else {
            ++it;
        }
    }
    m_graph.metadata["bitlens.scheme"] = m_model.scheme.spec.empty() ? m_model.scheme.preset
                                                                     : m_model.scheme.spec;
    m_graph.metadata["bitlens.version"] = BITLENS_VERSION;
    return std::move(m_graph);
}

/// The export formats that can hold a configuration ONNX QDQ cannot, in words.
std::string alternatives(const LayerConfig& c)
{
    switch (c.weightType) {
    case QuantType::NF4:
        return "NF4 is a bitsandbytes code table with no ONNX type; for 4-bit ONNX export "
               "w4-int4 (int4 QDQ); GGUF (Q4_0/Q4_1/K-quants) and safetensors (packed int4) "
               "hold int4 groups too";
    case QuantType::FP4E2M1:
        return "BitLens writes no FP4 E2M1 ONNX (FLOAT4E2M1 needs opset 23); for 4-bit ONNX "
               "export w4-int4 (int4 QDQ)";
    case QuantType::Int2:
        return "ONNX has no 2-bit type; int4 and int8 schemes export to ONNX";
    case QuantType::FP16:
    case QuantType::BF16:
        return "16-bit mixed precision is a cast, not a QDQ pattern; GGUF (F16) and safetensors "
               "hold 16-bit weights";
    default: break;
    }
    if (c.outlierThreshold > 0.0)
        return "LLM.int8() picks its fp16 outlier columns per batch at run time, which no ONNX "
               "operator expresses; dynamic-int8 exports to ONNX, and safetensors "
               "(compressed-tensors int8) holds the int8 weights";
    if (c.actMode == ActMode::Dynamic && (c.actType == QuantType::FP8E4M3 ||
                                          c.actType == QuantType::FP8E5M2))
        return "ONNX has no dynamic FP8 activation quantizer (DynamicQuantizeLinear is uint8 "
               "only); safetensors (compressed-tensors fp8) holds FP8 weights with dynamic "
               "activation scales";
    return "ONNX QDQ holds int8/uint8/int4/uint4 and float8 codes with static activations, and "
           "dynamic uint8 per-tensor activations";
}

} // namespace

std::optional<std::string> onnxQdqLimitation(const LayerConfig& c)
{
    if (c.keepFloat)
        return std::nullopt;
    // The executor runs float8 QDQ (tests/data/qdq), but onnxruntime 1.32 miscomputes such
    // files once its extended graph optimizations (the default) rewrite them: fashion-cnn with
    // static float8 weights and activations gives top-1 0.50 instead of 0.93 (0.93 with the
    // optimizations off). A file its main consumer gets wrong by default is not written.
    const auto isFloat8 = [](QuantType t) {
        return t == QuantType::FP8E4M3 || t == QuantType::FP8E5M2;
    };
    if (isFloat8(c.weightType) || (c.actMode == ActMode::Static && isFloat8(c.actType)))
        return "float8 QDQ files are not written: onnxruntime 1.32 with its default graph "
               "optimizations computes them wrongly (fashion-cnn top-1 0.50 instead of 0.93); "
               "safetensors (compressed-tensors fp8) holds FP8 weights";
    const auto weightCode = onnxCodeType(c.weightType);
    if (!weightCode)
        return std::string(quant::traits(c.weightType).name) +
               " weights cannot be written as ONNX QDQ (" + alternatives(c) + ")";
    if (c.weightGranularity.kind == Granularity::Kind::PerGroup && !isIntegerCode(c.weightType))
        return "per-group " + std::string(quant::traits(c.weightType).name) +
               " weights cannot be written as ONNX QDQ (blocked DequantizeLinear is written for "
               "integer codes only)";
    switch (c.actMode) {
    case ActMode::Float: break;
    case ActMode::Static:
        if (!onnxCodeType(c.actType))
            return "static " + std::string(quant::traits(c.actType).name) +
                   " activations cannot be written as ONNX QDQ (" + alternatives(c) + ")";
        if (c.actGranularity.kind != Granularity::Kind::PerTensor)
            return "static activations are calibrated per tensor in ONNX QDQ, not " +
                   c.actGranularity.describe();
        break;
    case ActMode::Dynamic:
        if (c.outlierThreshold > 0.0 || c.actType != QuantType::UInt8 || c.actSymmetric ||
            c.actGranularity.kind != Granularity::Kind::PerTensor)
            return "dynamic " + std::string(quant::traits(c.actType).name) + " " +
                   c.actGranularity.describe() + (c.actSymmetric ? " symmetric" : "") +
                   (c.outlierThreshold > 0.0 ? " with outlier columns" : "") +
                   " activations cannot be written as ONNX (" + alternatives(c) + ")";
        break;
    case ActMode::Cast:
        return "activations cast to " + std::string(quant::traits(c.actType).name) +
               " cannot be written as ONNX QDQ (" + alternatives(c) + ")";
    }
    return std::nullopt;
}

namespace {

/// Recurrent nodes batch-first (layout = 1) rewritten time-major (layout = 0) between
/// Transposes: onnxruntime's CPU LSTM / GRU / RNN refuse layout 1 ("Batchwise recurrent
/// operations (layout == 1) are not supported", found by export --verify's consumer check).
/// X and the initial states go in transposed, Y [S, dirs, B, H] and the final states come out
/// in the batch-first shapes the rest of the graph reads; the numbers are the same.
void timeMajorRecurrences(ir::Graph& graph)
{
    std::vector<ir::Node> nodes;
    nodes.reserve(graph.nodes.size());
    auto transpose = [&nodes](const std::string& name, const std::string& in,
                              const std::string& out, std::vector<std::int64_t> perm) {
        ir::Node t;
        t.name = name;
        t.op = ir::OpKind::Transpose;
        t.inputs = {in};
        t.outputs = {out};
        t.attrs.set("perm", std::move(perm));
        nodes.push_back(std::move(t));
    };
    for (auto& node : graph.nodes) {
        const bool recurrent = node.op == ir::OpKind::LSTM || node.op == ir::OpKind::GRU ||
                               node.op == ir::OpKind::RNN;
        if (!recurrent || node.attrs.getInt("layout", 0) != 1) {
            nodes.push_back(std::move(node));
            continue;
        }
        // Inputs: X (0); initial_h (5) and, for an LSTM, initial_c (6) are [B, dirs, H].
        for (const std::size_t i : {std::size_t{0}, std::size_t{5}, std::size_t{6}}) {
            if (i >= node.inputs.size() || node.inputs[i].empty())
                continue;
            const std::string moved = node.name + "/time_major_in" + std::to_string(i);
            transpose(moved, node.inputs[i], moved, {1, 0, 2});
            node.inputs[i] = moved;
        }
        node.attrs.set("layout", std::int64_t{0});
        std::vector<std::pair<std::string, std::string>> outs;  // (time-major, batch-first)
        for (std::size_t i = 0; i < node.outputs.size(); ++i) {
            if (node.outputs[i].empty())
                continue;
            const std::string original = node.outputs[i];
            node.outputs[i] = node.name + "/time_major_out" + std::to_string(i);
            outs.emplace_back(node.outputs[i], original);
        }
        const std::string name = node.name;
        nodes.push_back(std::move(node));
        for (std::size_t k = 0; k < outs.size(); ++k) {
            const bool y = outs[k].first.back() == '0';  // Y [S, dirs, B, H] -> [B, S, dirs, H]
            transpose(name + "/batch_first" + outs[k].first.substr(outs[k].first.size() - 1),
                      outs[k].first, outs[k].second,
                      y ? std::vector<std::int64_t>{2, 0, 1, 3}
                        : std::vector<std::int64_t>{1, 0, 2});
        }
    }
    graph.nodes = std::move(nodes);
}

} // namespace

Result<ir::Graph> buildQdqGraph(const quant::QuantizedModel& model, Progress& progress,
                                const CancelToken& cancel)
{
    try {
        c10::InferenceMode guard;
        QdqBuilder builder(model);
        const std::string name = model.scheme.spec.empty() ? model.scheme.preset
                                                           : model.scheme.spec;
        const auto total = static_cast<double>(std::max<std::size_t>(model.graph.nodes.size(), 1));
        std::size_t done = 0;
        for (const auto& node : model.graph.nodes) {
            if (cancel.cancelled())
                return Error::cancelled();
            const auto it = model.layers.find(node.name);
            if (it == model.layers.end() || it->second.config.keepFloat) {
                builder.addFloat(node);
            } else if (node.op == ir::OpKind::LSTM || node.op == ir::OpKind::GRU) {
                return Error::unsupported(
                    {}, "scheme " + name + " cannot be exported to ONNX: layer '" + node.name +
                    "' is an " + std::string(ir::opKindName(node.op)) +
                    ", whose hidden state is quantized inside the recurrence, which QDQ nodes "
                    "cannot express (keep it float with an override)");
            } else if (auto r = builder.addLayer(node, it->second); !r) {
                Error e = r.error();
                if (e.code == ErrorCode::Unsupported)
                    e.message = "scheme " + name + " cannot be exported to ONNX: " + e.message;
                return e;
            }
            progress.report(static_cast<double>(++done) / total, "building the QDQ graph");
        }
        ir::Graph graph = builder.finish();
        timeMajorRecurrences(graph);
        if (auto r = graph.validate(); !r)
            return Error::runtime("the QDQ graph is inconsistent: " + r.error().message);
        return graph;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("ONNX export failed: ") + e.what_without_backtrace());
    }
}

} // namespace bitlens::exporting
