#include "io/onnx_import.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

namespace bitlens::io::onnx_import {

std::string ValueNames::fresh(const std::string& base)
{
    std::string name = base;
    for (int n = 1; m_names.count(name) != 0; ++n)
        name = base + "_" + std::to_string(n);
    m_names.insert(name);
    return name;
}

namespace {

using ir::Node;
using ir::OpKind;

class Importer {
public:
    Importer(std::string_view opType, std::int64_t opset, ir::Graph& graph, ValueNames& names,
             const std::string& path)
        : m_opType(opType), m_opset(opset), m_graph(graph), m_names(names), m_path(path)
    {
    }

    Result<void> append(Node node);

private:
    std::string label(const Node& node) const
    {
        return "node '" + node.name + "' (" + std::string(m_opType) + ", opset " +
               std::to_string(m_opset) + ")";
    }
    Error unsupported(const Node& node, const std::string& why) const
    {
        return Error::unsupported(m_path, label(node) + ": " + why);
    }
    Error badInput(const Node& node, const std::string& why) const
    {
        return Error::badInput(m_path, label(node) + ": " + why);
    }

    /// Adds an initializer named after the node and returns its value name.
    std::string constant(const Node& node, const std::string& what, at::Tensor value)
    {
        const std::string name = m_names.fresh(node.name + "." + what);
        m_graph.initializers.emplace(name, std::move(value));
        return name;
    }
    std::string intsConstant(const Node& node, const std::string& what,
                             const std::vector<std::int64_t>& values)
    {
        return constant(node, what,
                        at::tensor(values, at::TensorOptions().dtype(at::kLong)).clone());
    }
    std::string floatConstant(const Node& node, const std::string& what, double value)
    {
        return constant(node, what,
                        at::scalar_tensor(value, at::TensorOptions().dtype(at::kFloat)));
    }
    /// Moves an ints attribute into input `index` (when the attribute is set).
    void attrToInput(Node& node, const std::string& attr, std::size_t index)
    {
        if (!node.attrs.has(attr))
            return;
        setInput(node, index, intsConstant(node, attr, node.attrs.getInts(attr, {})));
        node.attrs.erase(attr);
    }
    static void setInput(Node& node, std::size_t index, const std::string& value)
    {
        if (node.inputs.size() <= index)
            node.inputs.resize(index + 1);
        node.inputs[index] = value;
    }
    /// A node computing `op` of `inputs` into a fresh value (or `output` when given).
    std::string emit(const Node& from, const std::string& suffix, OpKind op,
                     std::vector<std::string> inputs, ir::Attributes attrs = {},
                     std::string output = {})
    {
        Node n;
        n.name = from.name + "/" + suffix;
        n.op = op;
        n.inputs = std::move(inputs);
        n.outputs = {output.empty() ? m_names.fresh(n.name) : output};
        n.attrs = std::move(attrs);
        m_graph.nodes.push_back(n);
        return n.outputs[0];
    }

    Result<void> softmaxBefore13(Node node);
    Result<void> batchNorm(Node node);
    Result<void> upsample(Node node);
    Result<void> imageScaler(Node node);
    Result<void> groupNormBefore21(Node node);

    std::string_view m_opType;
    std::int64_t m_opset;
    ir::Graph& m_graph;
    ValueNames& m_names;
    const std::string& m_path;
};

Result<void> Importer::append(Node node)
{
    if (m_opType == "ImageScaler")
        return imageScaler(std::move(node));
    switch (node.op) {
    case OpKind::Clip:
        // Clip-6: min / max attributes (defaults: the float range, i.e. unbounded).
        if (m_opset < 11) {
            std::vector<std::string> inputs{node.inputs.empty() ? std::string() : node.inputs[0]};
            inputs.push_back(node.attrs.has("min")
                                 ? floatConstant(node, "min", node.attrs.getFloat("min", 0.0))
                                 : std::string());
            inputs.push_back(node.attrs.has("max")
                                 ? floatConstant(node, "max", node.attrs.getFloat("max", 0.0))
                                 : std::string());
            node.inputs = std::move(inputs);
            node.attrs.erase("min");
            node.attrs.erase("max");
        }
        break;
    case OpKind::Pad:
        // Pad-2: pads and value are attributes.
        if (m_opset < 11) {
            if (!node.attrs.has("pads"))
                return badInput(node, "has no pads attribute");
            attrToInput(node, "pads", 1);
            setInput(node, 2, floatConstant(node, "value", node.attrs.getFloat("value", 0.0)));
            node.attrs.erase("value");
        }
        break;
    case OpKind::Slice:
        // Slice-1: starts, ends, axes attributes; no steps.
        if (m_opset < 10) {
            if (!node.attrs.has("starts") || !node.attrs.has("ends"))
                return badInput(node, "needs starts and ends attributes");
            attrToInput(node, "starts", 1);
            attrToInput(node, "ends", 2);
            attrToInput(node, "axes", 3);
        }
        break;
    case OpKind::Split:
        if (m_opset < 13)
            attrToInput(node, "split", 1);
        break;
    case OpKind::Squeeze:
    case OpKind::Unsqueeze:
        if (m_opset < 13)
            attrToInput(node, "axes", 1);
        break;
    case OpKind::ReduceSum:
        // ReduceSum took axes as an input from opset 13 on; Mean / Max / Min only from 18, and
        // the internal form keeps their attribute (the executor reads either).
        if (m_opset < 13)
            attrToInput(node, "axes", 1);
        break;
    case OpKind::TopK:
        // TopK-1: k is an attribute; from opset 10 it is the int64 [1] input K.
        if (m_opset < 10) {
            if (!node.attrs.has("k"))
                return badInput(node, "has no k attribute");
            setInput(node, 1, intsConstant(node, "k", {node.attrs.getInt("k", 0)}));
            node.attrs.erase("k");
        }
        break;
    case OpKind::GroupNorm:
        if (m_opset < 21)
            return groupNormBefore21(std::move(node));
        break;
    case OpKind::RNN:
    case OpKind::LSTM:
    case OpKind::GRU:
        // An omitted optional output (an empty name) is still computed, under a fresh name
        // nothing reads; trailing ones are dropped.
        while (!node.outputs.empty() && node.outputs.back().empty())
            node.outputs.pop_back();
        for (std::size_t i = 0; i < node.outputs.size(); ++i)
            if (node.outputs[i].empty())
                node.outputs[i] = m_names.fresh(node.name + "/unused_" + std::to_string(i));
        break;
    case OpKind::Resize:
        if (m_opType == "Upsample" || m_opset < 11)
            return upsample(std::move(node));
        break;
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
        if (m_opset < 13)
            return softmaxBefore13(std::move(node));
        break;
    case OpKind::BatchNorm: return batchNorm(std::move(node));
    case OpKind::Dropout:
        // At inference Dropout passes its input through; the old ratio / is_test attributes
        // say nothing else, and opset 13 has no such attributes.
        node.attrs.erase("ratio");
        node.attrs.erase("is_test");
        // At inference onnxruntime, the reference, gives an all-false mask before opset 12
        // (float zeros before 10, where the mask has the input's type; float32 models assumed)
        // and an all-true one from 12: the executor's mask is all true, so older files get
        // it cast to float32 and subtracted from itself (then cast back to bool for 10-11).
        if (m_opset < 12 && node.outputs.size() > 1 && !node.outputs[1].empty()) {
            const std::string mask = node.outputs[1];
            node.outputs[1] = m_names.fresh(node.name + "/mask_kept");
            const std::string kept = node.outputs[1];
            Node named;
            named.name = node.name;
            m_graph.nodes.push_back(std::move(node));
            ir::Attributes toFloat;
            toFloat.set("to", static_cast<std::int64_t>(ir::DType::Float32));
            const std::string ones = emit(named, "mask_float", OpKind::Cast, {kept}, toFloat);
            if (m_opset < 10) {
                emit(named, "mask", OpKind::Sub, {ones, ones}, {}, mask);
                return {};
            }
            const std::string zeros = emit(named, "mask_zero", OpKind::Sub, {ones, ones});
            ir::Attributes toBool;
            toBool.set("to", static_cast<std::int64_t>(ir::DType::Bool));
            emit(named, "mask", OpKind::Cast, {zeros}, toBool, mask);
            return {};
        }
        break;
    case OpKind::MaxPool:
        if (node.outputs.size() > 1 && !node.outputs[1].empty())
            return unsupported(node, "the Indices output is not supported");
        node.outputs.resize(1);
        break;
    default: break;
    }
    m_graph.nodes.push_back(std::move(node));
    return {};
}

/// Softmax / LogSoftmax before opset 13 coerce the input to 2-D [prod(d < axis),
/// prod(d >= axis)] (axis default 1) and normalize each row: Flatten, the opset-13 op on the
/// last axis, and a Reshape back to the input's shape.
Result<void> Importer::softmaxBefore13(Node node)
{
    if (node.inputs.empty() || node.outputs.empty())
        return badInput(node, "needs one input and one output");
    const std::int64_t axis = node.attrs.getInt("axis", 1);
    ir::Attributes flattenAttrs;
    flattenAttrs.set("axis", axis);
    const std::string shape = emit(node, "shape", OpKind::Shape, {node.inputs[0]});
    const std::string flat = emit(node, "flatten", OpKind::Flatten, {node.inputs[0]},
                                  flattenAttrs);
    ir::Attributes lastAxis;
    lastAxis.set("axis", std::int64_t{-1});
    Node op;
    op.name = node.name;
    op.op = node.op;
    op.inputs = {flat};
    op.outputs = {m_names.fresh(node.name + "/2d")};
    op.attrs = lastAxis;
    m_graph.nodes.push_back(op);
    emit(node, "reshape", OpKind::Reshape, {op.outputs[0], shape}, {}, node.outputs[0]);
    return {};
}

/// BatchNormalization: opset 7-8's spatial attribute (spatial = 0 normalizes each activation
/// with parameters of shape [C, D1, ...]) and the optional running mean / variance outputs,
/// which at inference are the running inputs.
Result<void> Importer::batchNorm(Node node)
{
    if (node.attrs.getInt("training_mode", 0) != 0)
        return unsupported(node, "training_mode = 1 is not supported");
    node.attrs.erase("training_mode");
    if (node.inputs.size() != 5)
        return badInput(node, "needs 5 inputs (X, scale, B, mean, var)");
    for (std::size_t i = 3; i < node.outputs.size(); ++i)
        if (!node.outputs[i].empty())
            return unsupported(node, "the saved mean / variance outputs (training) are not "
                                     "supported");
    std::vector<std::string> extra;
    for (std::size_t i = 1; i < node.outputs.size() && i < 3; ++i)
        extra.push_back(node.outputs[i]);
    node.outputs.resize(1);
    const bool spatial = node.attrs.getInt("spatial", 1) != 0;
    node.attrs.erase("spatial");
    node.attrs.erase("momentum");
    if (spatial || m_opset >= 9) {
        m_graph.nodes.push_back(node);
    } else {
        // y = (x - mean) / sqrt(var + epsilon) * scale + B; [C, D1, ...] broadcasts against
        // [N, C, D1, ...] from the right.
        const auto& in = node.inputs;
        const std::string eps =
            floatConstant(node, "epsilon", node.attrs.getFloat("epsilon", 1e-5));
        const std::string centered = emit(node, "sub", OpKind::Sub, {in[0], in[3]});
        const std::string varEps = emit(node, "var_eps", OpKind::Add, {in[4], eps});
        const std::string stddev = emit(node, "sqrt", OpKind::Sqrt, {varEps});
        const std::string normed = emit(node, "div", OpKind::Div, {centered, stddev});
        const std::string scaled = emit(node, "mul", OpKind::Mul, {normed, in[1]});
        emit(node, "add", OpKind::Add, {scaled, in[2]}, {}, node.outputs[0]);
    }
    for (std::size_t i = 0; i < extra.size(); ++i)
        if (!extra[i].empty())
            emit(node, i == 0 ? "running_mean" : "running_var", OpKind::Identity,
                 {node.inputs[3 + i]}, {}, extra[i]);
    return {};
}

/// Upsample (opset 7-9: scales attribute, then input) and Resize-10 (X, scales) become
/// Resize with opset 13 inputs: both map output index i to input coordinate i / scale
/// (asymmetric) and take the floor for nearest.
Result<void> Importer::upsample(Node node)
{
    if (node.inputs.empty())
        return badInput(node, "has no input");
    std::string scales;
    if (node.attrs.has("scales")) {
        const auto values = node.attrs.getFloats("scales", {});
        std::vector<float> f(values.begin(), values.end());
        scales = constant(node, "scales",
                          at::tensor(f, at::TensorOptions().dtype(at::kFloat)).clone());
        node.attrs.erase("scales");
    } else if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
        scales = node.inputs[1];
    } else {
        return badInput(node, "has no scales");
    }
    std::string mode = node.attrs.getString("mode", "nearest");
    if (mode == "bilinear")
        mode = "linear";
    if (mode != "nearest" && mode != "linear")
        return unsupported(node, "mode '" + mode + "' is not supported");
    node.attrs.set("mode", mode);
    node.attrs.set("coordinate_transformation_mode", std::string("asymmetric"));
    node.inputs = {node.inputs[0], std::string(), scales};
    if (mode != "nearest") {
        m_graph.nodes.push_back(std::move(node));
        return {};
    }
    // Nearest before opset 11 takes the floor of i / scale where it enlarges and the ceiling
    // where it shrinks (onnxruntime's reading of the old operators). Nearest resizing is
    // separable, so with constant scales that shrink some axes and enlarge others it becomes
    // two Resizes: the shrinking axes (ceil), then the enlarging ones (floor). Scales that are
    // computed at run time are taken to enlarge, as Upsample requires.
    const at::Tensor* constScales = m_graph.initializer(scales);
    std::vector<float> values;
    if (constScales != nullptr) {
        const at::Tensor c = constScales->to(at::kFloat).contiguous().reshape({-1});
        values.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    const bool shrinks = std::any_of(values.begin(), values.end(), [](float v) { return v < 1; });
    const bool enlarges = std::any_of(values.begin(), values.end(), [](float v) { return v > 1; });
    if (shrinks) {
        std::vector<float> down = values;
        for (float& v : down)
            v = std::min(v, 1.0f);
        Node first = node;
        first.name = node.name + (enlarges ? "/shrink" : "");
        first.attrs.set("nearest_mode", std::string("ceil"));
        first.inputs[2] = constant(node, enlarges ? "scales_shrink" : "scales_nearest",
                                   at::tensor(down, at::TensorOptions().dtype(at::kFloat)));
        if (!enlarges) {
            m_graph.nodes.push_back(std::move(first));
            return {};
        }
        first.outputs = {m_names.fresh(node.name + "/shrunk")};
        m_graph.nodes.push_back(first);
        for (float& v : values)
            v = std::max(v, 1.0f);
        node.inputs[0] = first.outputs[0];
        node.inputs[2] = constant(node, "scales_enlarge",
                                  at::tensor(values, at::TensorOptions().dtype(at::kFloat)));
    }
    node.attrs.set("nearest_mode", std::string("floor"));
    m_graph.nodes.push_back(std::move(node));
    return {};
}

/// GroupNormalization-18 scales and shifts each group (scale, bias [num_groups]), which is
/// InstanceNormalization of x seen as [N, num_groups, rest]: Reshape, InstanceNormalization,
/// Reshape back to x's shape. (Opset 21 made scale and bias per channel.)
Result<void> Importer::groupNormBefore21(Node node)
{
    if (node.inputs.size() != 3 || node.outputs.size() != 1)
        return badInput(node, "needs inputs X, scale, bias and one output");
    const std::int64_t groups = node.attrs.getInt("num_groups", 0);
    if (groups < 1)
        return badInput(node, "num_groups must be at least 1");
    const std::string shape = emit(node, "shape", OpKind::Shape, {node.inputs[0]});
    const std::string grouped =
        emit(node, "group", OpKind::Reshape,
             {node.inputs[0], intsConstant(node, "group_shape", {0, groups, -1})});
    ir::Attributes eps;
    eps.set("epsilon", node.attrs.getFloat("epsilon", 1e-5));
    Node norm;
    norm.name = node.name;
    norm.op = OpKind::InstanceNorm;
    norm.inputs = {grouped, node.inputs[1], node.inputs[2]};
    norm.outputs = {m_names.fresh(node.name + "/grouped")};
    norm.attrs = eps;
    m_graph.nodes.push_back(norm);
    emit(node, "reshape", OpKind::Reshape, {norm.outputs[0], shape}, {}, node.outputs[0]);
    return {};
}

/// ImageScaler: y = scale * x + bias[c] over [N, C, H, W], as a Mul and an Add of constants.
Result<void> Importer::imageScaler(Node node)
{
    if (node.inputs.size() != 1 || node.outputs.size() != 1)
        return badInput(node, "needs one input and one output");
    const auto bias = node.attrs.getFloats("bias", {});
    std::vector<float> values(bias.begin(), bias.end());
    const std::string scale = floatConstant(node, "scale", node.attrs.getFloat("scale", 1.0));
    const std::string scaled = emit(node, "scale", OpKind::Mul, {node.inputs[0], scale});
    if (values.empty()) {
        m_graph.nodes.back().outputs = node.outputs;
        return {};
    }
    const auto channels = static_cast<std::int64_t>(values.size());
    const std::string shift = constant(
        node, "bias",
        at::tensor(values, at::TensorOptions().dtype(at::kFloat)).reshape({channels, 1, 1}));
    emit(node, "bias", OpKind::Add, {scaled, shift}, {}, node.outputs[0]);
    return {};
}

} // namespace

Result<void> appendImported(ir::Node node, std::string_view opType, std::int64_t opset,
                            ir::Graph& graph, ValueNames& names, const std::string& path)
{
    return Importer(opType, opset, graph, names, path).append(std::move(node));
}

} // namespace bitlens::io::onnx_import
