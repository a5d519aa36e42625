#include "ir/graph.h"

#include <array>
#include <cmath>
#include <set>
#include <stdexcept>
#include <utility>

namespace bitlens::ir {

namespace {

constexpr std::array<std::pair<OpKind, std::string_view>, 106> kOpNames{{
    {OpKind::Conv, "Conv"},
    {OpKind::Gemm, "Gemm"},
    {OpKind::MatMul, "MatMul"},
    {OpKind::BatchNorm, "BatchNormalization"},
    {OpKind::Relu, "Relu"},
    {OpKind::Gelu, "Gelu"},
    {OpKind::Silu, "Silu"},
    {OpKind::Sigmoid, "Sigmoid"},
    {OpKind::Tanh, "Tanh"},
    {OpKind::MaxPool, "MaxPool"},
    {OpKind::AveragePool, "AveragePool"},
    {OpKind::GlobalAveragePool, "GlobalAveragePool"},
    {OpKind::Add, "Add"},
    {OpKind::Sub, "Sub"},
    {OpKind::Mul, "Mul"},
    {OpKind::Div, "Div"},
    {OpKind::Flatten, "Flatten"},
    {OpKind::Reshape, "Reshape"},
    {OpKind::Transpose, "Transpose"},
    {OpKind::Softmax, "Softmax"},
    {OpKind::Concat, "Concat"},
    {OpKind::Identity, "Identity"},
    {OpKind::Dropout, "Dropout"},
    {OpKind::LayerNorm, "LayerNormalization"},
    {OpKind::RMSNorm, "RMSNormalization"},
    {OpKind::Gather, "Gather"},
    {OpKind::Unsqueeze, "Unsqueeze"},
    {OpKind::Squeeze, "Squeeze"},
    {OpKind::Slice, "Slice"},
    {OpKind::Split, "Split"},
    {OpKind::Cast, "Cast"},
    {OpKind::Where, "Where"},
    {OpKind::Expand, "Expand"},
    {OpKind::Equal, "Equal"},
    {OpKind::Less, "Less"},
    {OpKind::Greater, "Greater"},
    {OpKind::Pow, "Pow"},
    {OpKind::Sqrt, "Sqrt"},
    {OpKind::ReduceMean, "ReduceMean"},
    {OpKind::Erf, "Erf"},
    {OpKind::Neg, "Neg"},
    {OpKind::Cos, "Cos"},
    {OpKind::Sin, "Sin"},
    {OpKind::Range, "Range"},
    {OpKind::Shape, "Shape"},
    {OpKind::RotaryEmbedding, "RotaryEmbedding"},
    {OpKind::LSTM, "LSTM"},
    {OpKind::GRU, "GRU"},
    {OpKind::QuantizeLinear, "QuantizeLinear"},
    {OpKind::DequantizeLinear, "DequantizeLinear"},
    {OpKind::DynamicQuantizeLinear, "DynamicQuantizeLinear"},
    {OpKind::Clip, "Clip"},
    {OpKind::HardSigmoid, "HardSigmoid"},
    {OpKind::HardSwish, "HardSwish"},
    {OpKind::LeakyRelu, "LeakyRelu"},
    {OpKind::PRelu, "PRelu"},
    {OpKind::Elu, "Elu"},
    {OpKind::Selu, "Selu"},
    {OpKind::Softplus, "Softplus"},
    {OpKind::Resize, "Resize"},
    {OpKind::ConvTranspose, "ConvTranspose"},
    {OpKind::Pad, "Pad"},
    {OpKind::Abs, "Abs"},
    {OpKind::Exp, "Exp"},
    {OpKind::Log, "Log"},
    {OpKind::Reciprocal, "Reciprocal"},
    {OpKind::Floor, "Floor"},
    {OpKind::Ceil, "Ceil"},
    {OpKind::Min, "Min"},
    {OpKind::Max, "Max"},
    {OpKind::Sum, "Sum"},
    {OpKind::Mean, "Mean"},
    {OpKind::ReduceSum, "ReduceSum"},
    {OpKind::ReduceMax, "ReduceMax"},
    {OpKind::ReduceMin, "ReduceMin"},
    {OpKind::InstanceNorm, "InstanceNormalization"},
    {OpKind::Tile, "Tile"},
    {OpKind::DepthToSpace, "DepthToSpace"},
    {OpKind::SpaceToDepth, "SpaceToDepth"},
    {OpKind::GlobalMaxPool, "GlobalMaxPool"},
    {OpKind::LogSoftmax, "LogSoftmax"},
    {OpKind::LRN, "LRN"},
    {OpKind::Mish, "Mish"},
    {OpKind::GroupNorm, "GroupNormalization"},
    {OpKind::Round, "Round"},
    {OpKind::Mod, "Mod"},
    {OpKind::Not, "Not"},
    {OpKind::And, "And"},
    {OpKind::Or, "Or"},
    {OpKind::Xor, "Xor"},
    {OpKind::ReduceProd, "ReduceProd"},
    {OpKind::ReduceL1, "ReduceL1"},
    {OpKind::ReduceL2, "ReduceL2"},
    {OpKind::ReduceLogSumExp, "ReduceLogSumExp"},
    {OpKind::ReduceSumSquare, "ReduceSumSquare"},
    {OpKind::ArgMax, "ArgMax"},
    {OpKind::ArgMin, "ArgMin"},
    {OpKind::TopK, "TopK"},
    {OpKind::CumSum, "CumSum"},
    {OpKind::Trilu, "Trilu"},
    {OpKind::GatherElements, "GatherElements"},
    {OpKind::GatherND, "GatherND"},
    {OpKind::ScatterND, "ScatterND"},
    {OpKind::NonZero, "NonZero"},
    {OpKind::Einsum, "Einsum"},
    {OpKind::RNN, "RNN"},
}};

template <typename T>
const T* findAttr(const std::map<std::string, AttrValue>& values, const std::string& name)
{
    const auto it = values.find(name);
    return it == values.end() ? nullptr : std::get_if<T>(&it->second);
}

} // namespace

std::string_view opKindName(OpKind op)
{
    for (const auto& [kind, name] : kOpNames)
        if (kind == op)
            return name;
    return "?";
}

std::optional<OpKind> opKindFromName(std::string_view opType)
{
    // "Silu" is BitLens' own node kind (ONNX spells it Sigmoid + Mul), never read from a file.
    if (opType == "Silu")
        return std::nullopt;
    for (const auto& [kind, name] : kOpNames)
        if (name == opType)
            return kind;
    return std::nullopt;
}

std::string_view dtypeName(DType dtype)
{
    switch (dtype) {
    case DType::Float32: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Float64: return "float64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float8E4M3FN: return "float8_e4m3fn";
    case DType::Float8E5M2: return "float8_e5m2";
    case DType::UInt4: return "uint4";
    case DType::Int4: return "int4";
    }
    return "?";
}

int dtypeSize(DType dtype)
{
    switch (dtype) {
    case DType::UInt8:
    case DType::Int8:
    case DType::Bool:
    case DType::Float8E4M3FN:
    case DType::Float8E5M2:
    case DType::UInt4:
    case DType::Int4: return 1;
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Float32:
    case DType::Int32: return 4;
    case DType::Int64:
    case DType::Float64: return 8;
    }
    return 0;
}

std::int64_t dtypeStorageBytes(DType dtype, std::int64_t elements)
{
    if (dtype == DType::Int4 || dtype == DType::UInt4)
        return (elements + 1) / 2;
    return elements * dtypeSize(dtype);
}

std::int64_t Attributes::getInt(const std::string& name, std::int64_t fallback) const
{
    const auto* v = findAttr<std::int64_t>(m_values, name);
    return v ? *v : fallback;
}

double Attributes::getFloat(const std::string& name, double fallback) const
{
    if (const auto* v = findAttr<double>(m_values, name))
        return *v;
    if (const auto* i = findAttr<std::int64_t>(m_values, name))
        return static_cast<double>(*i);
    return fallback;
}

std::string Attributes::getString(const std::string& name, const std::string& fallback) const
{
    const auto* v = findAttr<std::string>(m_values, name);
    return v ? *v : fallback;
}

std::vector<std::int64_t> Attributes::getInts(const std::string& name,
                                              const std::vector<std::int64_t>& fallback) const
{
    const auto* v = findAttr<std::vector<std::int64_t>>(m_values, name);
    return v ? *v : fallback;
}

std::vector<double> Attributes::getFloats(const std::string& name,
                                          const std::vector<double>& fallback) const
{
    const auto* v = findAttr<std::vector<double>>(m_values, name);
    return v ? *v : fallback;
}

std::vector<std::string> Attributes::getStrings(const std::string& name,
                                                const std::vector<std::string>& fallback) const
{
    const auto* v = findAttr<std::vector<std::string>>(m_values, name);
    return v ? *v : fallback;
}

const at::Tensor* Graph::initializer(const std::string& valueName) const
{
    const auto it = initializers.find(valueName);
    return it == initializers.end() ? nullptr : &it->second;
}

at::Tensor Graph::readAs(const std::string& valueName, const at::Tensor& tensor) const
{
    if (!tensor.defined() || widenOnRead.count(valueName) == 0 ||
        tensor.scalar_type() == at::kFloat)
        return tensor;
    at::Tensor f = tensor.to(at::kFloat);
    if (f.numel() > 0) {
        // NaN propagates through min / max and +-inf shows in them: both ends are finite
        // exactly when every element is.
        const auto [lo, hi] = at::aminmax(f);
        if (!std::isfinite(lo.item<float>()) || !std::isfinite(hi.item<float>()))
            throw std::runtime_error("tensor '" + valueName + "' holds NaN or infinite values");
    }
    return f;
}

Result<Graph> widened(const Graph& graph, const std::string& path)
{
    Graph out = graph;
    if (graph.widenOnRead.empty())
        return out;
    std::map<const void*, std::vector<std::string>> byStorage;
    for (const auto& name : graph.widenOnRead)
        if (const at::Tensor* t = graph.initializer(name); t && t->defined())
            byStorage[t->storage().data()].push_back(name);
    try {
        for (const auto& [storage, names] : byStorage) {
            // Views of one storage (W and W^T) widen through one float copy of the storage.
            const at::Tensor& first = graph.initializers.at(names.front());
            const at::Tensor base =
                at::empty({0}, first.options())
                    .set_(first.storage(), 0,
                          {static_cast<std::int64_t>(first.storage().nbytes() /
                                                     first.element_size())},
                          {1});
            const at::Tensor wide = graph.readAs(names.front(), base);
            for (const auto& name : names) {
                const at::Tensor& t = graph.initializers.at(name);
                out.initializers[name] =
                    wide.as_strided(t.sizes(), t.strides(), t.storage_offset());
            }
        }
    } catch (const std::runtime_error& e) {
        return Error::badInput(path, e.what());
    }
    out.widenOnRead.clear();
    return out;
}

Result<void> Graph::validate(const std::string& path) const
{
    std::set<std::string> defined;
    auto define = [&](const std::string& value, const std::string& what) -> Result<void> {
        if (value.empty())
            return Error::badInput(path, what + " has an empty output name");
        if (!defined.insert(value).second)
            return Error::badInput(path, "value '" + value + "' is defined twice (" + what + ")");
        return {};
    };
    for (const auto& [valueName, tensor] : initializers) {
        if (!tensor.defined())
            return Error::badInput(path, "initializer '" + valueName + "' holds no tensor");
        if (auto r = define(valueName, "initializer"); !r)
            return r;
    }
    for (const auto& in : inputs)
        if (auto r = define(in.name, "graph input"); !r)
            return r;
    if (inputs.empty())
        return Error::badInput(path, "graph has no inputs");
    if (outputs.empty())
        return Error::badInput(path, "graph has no outputs");
    std::set<std::string> nodeNames;
    for (const auto& node : nodes) {
        const std::string label = "node '" + node.name + "' (" + std::string(opKindName(node.op)) +
                                  ")";
        if (!node.name.empty() && !nodeNames.insert(node.name).second)
            return Error::badInput(path, "two nodes are named '" + node.name + "'");
        for (const auto& in : node.inputs)
            if (!in.empty() && defined.count(in) == 0)
                return Error::badInput(path, label + " reads '" + in +
                                                 "', which no earlier node, input or "
                                                 "initializer defines");
        if (node.outputs.empty())
            return Error::badInput(path, label + " has no outputs");
        for (const auto& out : node.outputs)
            if (auto r = define(out, label); !r)
                return r;
    }
    for (const auto& out : outputs)
        if (defined.count(out.name) == 0)
            return Error::badInput(path, "graph output '" + out.name + "' is never computed");
    return {};
}

namespace {
/// True when `tensor` views the same elements as an initializer seen before (tied weights,
/// e.g. an LM head that is the transposed token embedding), so they count once.
bool seenStorage(std::set<std::pair<const void*, std::int64_t>>& seen, const at::Tensor& tensor)
{
    if (!tensor.has_storage())
        return false;
    return !seen.emplace(tensor.data_ptr(), tensor.numel()).second;
}
} // namespace

std::int64_t Graph::parameterCount() const
{
    std::int64_t count = 0;
    std::set<std::pair<const void*, std::int64_t>> seen;
    for (const auto& [valueName, tensor] : initializers)
        if (tensor.is_floating_point() && !seenStorage(seen, tensor))
            count += tensor.numel();
    return count;
}

std::int64_t Graph::initializerBytes(const std::string& valueName, const at::Tensor& tensor) const
{
    const auto packed = initializerTypes.find(valueName);
    if (packed != initializerTypes.end())
        return dtypeStorageBytes(packed->second, tensor.numel());
    return tensor.numel() * static_cast<std::int64_t>(tensor.element_size());
}

std::int64_t Graph::parameterBytes() const
{
    std::int64_t bytes = 0;
    std::set<std::pair<const void*, std::int64_t>> seen;
    for (const auto& [valueName, tensor] : initializers)
        if (!seenStorage(seen, tensor))
            bytes += initializerBytes(valueName, tensor);
    return bytes;
}

std::int64_t Graph::nodeParameterCount(const Node& node) const
{
    std::int64_t count = 0;
    for (const auto& in : node.inputs)
        if (const auto* t = initializer(in); t && t->is_floating_point())
            count += t->numel();
    return count;
}

std::int64_t Graph::nodeParameterBytes(const Node& node) const
{
    std::int64_t bytes = 0;
    for (const auto& in : node.inputs)
        if (const auto* t = initializer(in))
            bytes += initializerBytes(in, *t);
    return bytes;
}

std::optional<std::size_t> Graph::producerOf(const std::string& value) const
{
    for (std::size_t i = 0; i < nodes.size(); ++i)
        for (const auto& out : nodes[i].outputs)
            if (out == value)
                return i;
    return std::nullopt;
}

// ---------------------------------------------------------------------------------------------

GraphBuilder::GraphBuilder(std::string graphName) { m_graph.name = std::move(graphName); }

std::string GraphBuilder::input(const std::string& name, std::vector<std::int64_t> shape,
                                DType dtype)
{
    m_graph.inputs.push_back(ValueInfo{name, dtype, std::move(shape)});
    return name;
}

std::string GraphBuilder::constant(const std::string& name, const at::Tensor& value)
{
    m_graph.initializers[name] = value.contiguous();
    return name;
}

void GraphBuilder::output(const std::string& value)
{
    m_graph.outputs.push_back(ValueInfo{value, DType::Float32, {}});
}

std::string GraphBuilder::node(const std::string& name, OpKind op,
                               std::vector<std::string> inputs, Attributes attrs)
{
    Node n;
    n.name = name;
    n.op = op;
    n.inputs = std::move(inputs);
    n.outputs = {name};
    n.attrs = std::move(attrs);
    m_graph.nodes.push_back(std::move(n));
    return name;
}

std::string GraphBuilder::conv2d(const std::string& name, const std::string& x,
                                 const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                 Conv2dOptions options)
{
    std::vector<std::string> ins{x, constant(name + ".weight", weight)};
    if (bias)
        ins.push_back(constant(name + ".bias", *bias));
    Attributes attrs;
    attrs.set("kernel_shape", std::vector<std::int64_t>{weight.size(2), weight.size(3)});
    attrs.set("strides", std::vector<std::int64_t>{options.stride, options.stride});
    attrs.set("pads", std::vector<std::int64_t>(4, options.padding));
    attrs.set("dilations", std::vector<std::int64_t>{options.dilation, options.dilation});
    attrs.set("group", options.groups);
    return node(name, OpKind::Conv, std::move(ins), std::move(attrs));
}

std::string GraphBuilder::linear(const std::string& name, const std::string& x,
                                 const at::Tensor& weight, const std::optional<at::Tensor>& bias)
{
    std::vector<std::string> ins{x, constant(name + ".weight", weight)};
    if (bias)
        ins.push_back(constant(name + ".bias", *bias));
    Attributes attrs;
    attrs.set("transB", std::int64_t{1});
    return node(name, OpKind::Gemm, std::move(ins), std::move(attrs));
}

std::string GraphBuilder::matmul(const std::string& name, const std::string& a,
                                 const std::string& b)
{
    return node(name, OpKind::MatMul, {a, b});
}

std::string GraphBuilder::batchNorm(const std::string& name, const std::string& x,
                                    const at::Tensor& scale, const at::Tensor& bias,
                                    const at::Tensor& mean, const at::Tensor& var, double epsilon)
{
    Attributes attrs;
    attrs.set("epsilon", epsilon);
    return node(name, OpKind::BatchNorm,
                {x, constant(name + ".weight", scale), constant(name + ".bias", bias),
                 constant(name + ".running_mean", mean), constant(name + ".running_var", var)},
                std::move(attrs));
}

std::string GraphBuilder::unary(const std::string& name, OpKind op, const std::string& x)
{
    return node(name, op, {x});
}

std::string GraphBuilder::binary(const std::string& name, OpKind op, const std::string& a,
                                 const std::string& b)
{
    return node(name, op, {a, b});
}

namespace {
Attributes poolAttrs(std::int64_t kernel, std::int64_t stride, std::int64_t padding)
{
    Attributes attrs;
    attrs.set("kernel_shape", std::vector<std::int64_t>{kernel, kernel});
    attrs.set("strides", std::vector<std::int64_t>{stride, stride});
    attrs.set("pads", std::vector<std::int64_t>(4, padding));
    return attrs;
}
} // namespace

std::string GraphBuilder::maxPool(const std::string& name, const std::string& x,
                                  std::int64_t kernel, std::int64_t stride, std::int64_t padding)
{
    return node(name, OpKind::MaxPool, {x}, poolAttrs(kernel, stride, padding));
}

std::string GraphBuilder::avgPool(const std::string& name, const std::string& x,
                                  std::int64_t kernel, std::int64_t stride, std::int64_t padding)
{
    return node(name, OpKind::AveragePool, {x}, poolAttrs(kernel, stride, padding));
}

std::string GraphBuilder::globalAvgPool(const std::string& name, const std::string& x)
{
    return node(name, OpKind::GlobalAveragePool, {x});
}

std::string GraphBuilder::flatten(const std::string& name, const std::string& x, std::int64_t axis)
{
    Attributes attrs;
    attrs.set("axis", axis);
    return node(name, OpKind::Flatten, {x}, std::move(attrs));
}

std::string GraphBuilder::reshape(const std::string& name, const std::string& x,
                                  const std::vector<std::int64_t>& shape)
{
    const auto shapeTensor =
        at::tensor(at::ArrayRef<std::int64_t>(shape), at::TensorOptions().dtype(at::kLong));
    return node(name, OpKind::Reshape, {x, constant(name + ".shape", shapeTensor)});
}

std::string GraphBuilder::softmax(const std::string& name, const std::string& x, std::int64_t axis)
{
    Attributes attrs;
    attrs.set("axis", axis);
    return node(name, OpKind::Softmax, {x}, std::move(attrs));
}

std::string GraphBuilder::concat(const std::string& name, const std::vector<std::string>& xs,
                                 std::int64_t axis)
{
    Attributes attrs;
    attrs.set("axis", axis);
    return node(name, OpKind::Concat, xs, std::move(attrs));
}

Result<Graph> GraphBuilder::build() const
{
    if (auto r = m_graph.validate("<builder:" + m_graph.name + ">"); !r)
        return r.error();
    return m_graph;
}

} // namespace bitlens::ir
