#include "exec/executor.h"
#include "exec/op_support.h"

#include "exec/cnn_ops.h"
#include "exec/index_ops.h"
#include "exec/sequence_ops.h"
#include "exec/quant_ops.h"
#include "io/mapped_file.h"
#include "jobs/guard.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <ATen/ATen.h>

#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace bitlens::exec {

using ir::Node;
using ir::OpKind;

void NodeHook::beforeNode(const Node&, std::vector<at::Tensor>&) {}
void NodeHook::afterNode(const Node&, std::vector<at::Tensor>&) {}
bool NodeHook::computeNode(const Node&, const std::vector<at::Tensor>&, std::vector<at::Tensor>&)
{
    return false;
}

namespace {

using detail::fail;
using detail::normAxis;
using detail::need;
using detail::shapeText;

std::string declaredShapeText(const std::vector<std::int64_t>& shape)
{
    std::ostringstream out;
    out << '[';
    for (std::size_t i = 0; i < shape.size(); ++i) {
        out << (i ? ", " : "");
        if (shape[i] < 0)
            out << 'N';
        else
            out << shape[i];
    }
    out << ']';
    return out.str();
}

/// Resolves ONNX pads / auto_pad into per-dimension (begin, end) pairs for `spatial` dims.
std::vector<std::pair<std::int64_t, std::int64_t>>
resolvePads(const Node& node, at::IntArrayRef inputSizes, const std::vector<std::int64_t>& kernel,
            const std::vector<std::int64_t>& strides, const std::vector<std::int64_t>& dilations)
{
    const std::size_t spatial = kernel.size();
    std::vector<std::pair<std::int64_t, std::int64_t>> pads(spatial, {0, 0});
    const std::string autoPad = node.attrs.getString("auto_pad", "NOTSET");
    if (autoPad == "NOTSET") {
        const auto p = node.attrs.getInts("pads", std::vector<std::int64_t>(2 * spatial, 0));
        if (p.size() != 2 * spatial)
            fail(node, "pads has " + std::to_string(p.size()) + " values, expected " +
                           std::to_string(2 * spatial));
        for (std::size_t d = 0; d < spatial; ++d)
            pads[d] = {p[d], p[d + spatial]};
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
        for (std::size_t d = 0; d < spatial; ++d) {
            const std::int64_t in = inputSizes[2 + d];
            const std::int64_t out = (in + strides[d] - 1) / strides[d];
            const std::int64_t effKernel = (kernel[d] - 1) * dilations[d] + 1;
            const std::int64_t total = std::max<std::int64_t>(
                (out - 1) * strides[d] + effKernel - in, 0);
            const std::int64_t small = total / 2;
            pads[d] = autoPad == "SAME_UPPER" ? std::pair{small, total - small}
                                              : std::pair{total - small, small};
        }
    } else if (autoPad != "VALID") {
        fail(node, "auto_pad '" + autoPad + "' is not supported");
    }
    for (const auto& [b, e] : pads)
        if (b < 0 || e < 0)
            fail(node, "negative pads are not supported");
    return pads;
}

/// Pads explicitly when begin != end (LibTorch ops take symmetric padding only); returns the
/// symmetric padding left to pass to the op.
std::vector<std::int64_t> applyPads(at::Tensor& x,
                                    const std::vector<std::pair<std::int64_t, std::int64_t>>& pads,
                                    double value)
{
    bool symmetric = true;
    for (const auto& [b, e] : pads)
        symmetric = symmetric && b == e;
    std::vector<std::int64_t> sym;
    if (symmetric) {
        for (const auto& p : pads)
            sym.push_back(p.first);
        return sym;
    }
    std::vector<std::int64_t> padArg; // last dimension first, as at::constant_pad_nd wants
    for (auto it = pads.rbegin(); it != pads.rend(); ++it) {
        padArg.push_back(it->first);
        padArg.push_back(it->second);
    }
    x = at::constant_pad_nd(x, padArg, value);
    return std::vector<std::int64_t>(pads.size(), 0);
}

std::vector<std::int64_t> spatialAttr(const Node& node, const char* name, std::size_t spatial,
                                      std::int64_t fallback)
{
    auto v = node.attrs.getInts(name, std::vector<std::int64_t>(spatial, fallback));
    if (v.size() != spatial)
        fail(node, std::string(name) + " has " + std::to_string(v.size()) + " values, expected " +
                       std::to_string(spatial));
    return v;
}

at::Tensor runConv(const Node& node, const std::vector<at::Tensor>& in)
{
    at::Tensor x = need(node, in, 0);
    const at::Tensor& w = need(node, in, 1);
    const at::Tensor bias = in.size() > 2 ? in[2] : at::Tensor();
    if (w.dim() < 3 || w.dim() > 5)
        fail(node, "weight has rank " + std::to_string(w.dim()) + ", expected 3 to 5");
    const std::size_t spatial = static_cast<std::size_t>(w.dim() - 2);
    if (x.dim() != w.dim())
        fail(node, "input has shape " + shapeText(x.sizes()) + ", expected rank " +
                       std::to_string(w.dim()) + " for weight " + shapeText(w.sizes()));
    std::vector<std::int64_t> kernel(w.sizes().begin() + 2, w.sizes().end());
    const auto strides = spatialAttr(node, "strides", spatial, 1);
    const auto dilations = spatialAttr(node, "dilations", spatial, 1);
    const auto pads = resolvePads(node, x.sizes(), kernel, strides, dilations);
    const auto padding = applyPads(x, pads, 0.0);
    const std::int64_t groups = node.attrs.getInt("group", 1);
    if (groups < 1 || x.size(1) != w.size(1) * groups)
        fail(node, "input has " + std::to_string(x.size(1)) + " channels, weight " +
                       shapeText(w.sizes()) + " with group " + std::to_string(groups) +
                       " expects " + std::to_string(w.size(1) * groups));
    return at::convolution(x, w, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
                           strides, padding, dilations, false,
                           std::vector<std::int64_t>(spatial, 0), groups);
}

at::Tensor runGemm(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& a = need(node, in, 0);
    const at::Tensor& b = need(node, in, 1);
    const at::Tensor c = in.size() > 2 ? in[2] : at::Tensor();
    const bool transA = node.attrs.getInt("transA", 0) != 0;
    const bool transB = node.attrs.getInt("transB", 0) != 0;
    const double alpha = node.attrs.getFloat("alpha", 1.0);
    const double beta = node.attrs.getFloat("beta", 1.0);
    if (a.dim() != 2 || b.dim() != 2)
        fail(node, "Gemm needs 2-D inputs, got " + shapeText(a.sizes()) + " and " +
                       shapeText(b.sizes()));
    const at::Tensor aa = transA ? a.t() : a;
    const at::Tensor bb = transB ? b.t() : b;
    if (aa.size(1) != bb.size(0))
        fail(node, "input has shape " + shapeText(a.sizes()) + ", which does not fit weight " +
                       shapeText(b.sizes()) + (transB ? " (transposed)" : ""));
    // The common Linear case goes through at::linear, which autograd and oneDNN handle best.
    if (!transA && transB && alpha == 1.0 && beta == 1.0 && (!c.defined() || c.dim() == 1))
        return at::linear(a, b, c.defined() ? std::optional<at::Tensor>(c) : std::nullopt);
    at::Tensor y = at::matmul(aa, bb);
    if (alpha != 1.0)
        y = y * alpha;
    if (c.defined())
        y = beta == 1.0 ? y + c : y + c * beta;
    return y;
}

at::Tensor runBatchNorm(const Node& node, const std::vector<at::Tensor>& in,
                        const ExecOptions& options)
{
    const at::Tensor& x = need(node, in, 0);
    const at::Tensor& scale = need(node, in, 1);
    const at::Tensor& bias = need(node, in, 2);
    const at::Tensor& mean = need(node, in, 3);
    const at::Tensor& var = need(node, in, 4);
    if (x.dim() < 2 || x.size(1) != scale.numel())
        fail(node, "input has shape " + shapeText(x.sizes()) + ", expected " +
                       std::to_string(scale.numel()) + " channels in dimension 1");
    const double eps = node.attrs.getFloat("epsilon", 1e-5);
    return at::batch_norm(x, scale, bias, mean, var, options.training, options.bnMomentum, eps,
                          true);
}

at::Tensor runPool(const Node& node, const std::vector<at::Tensor>& in, bool isMax)
{
    at::Tensor x = need(node, in, 0);
    const auto kernel = node.attrs.getInts("kernel_shape", {});
    if (kernel.empty())
        fail(node, "kernel_shape is missing");
    const std::size_t spatial = kernel.size();
    if (spatial > 2 || x.dim() != static_cast<std::int64_t>(spatial) + 2)
        fail(node, "input has shape " + shapeText(x.sizes()) + "; only 1-D and 2-D pooling on "
                   "[N, C, ...] inputs is supported");
    const auto strides = spatialAttr(node, "strides", spatial, 1);
    const auto dilations = spatialAttr(node, "dilations", spatial, 1);
    const auto pads = resolvePads(node, x.sizes(), kernel, strides, dilations);
    const bool ceilMode = node.attrs.getInt("ceil_mode", 0) != 0;
    if (isMax) {
        const auto padding = applyPads(x, pads, -std::numeric_limits<double>::infinity());
        if (spatial == 1)
            return at::max_pool1d(x, kernel, strides, padding, dilations, ceilMode);
        return at::max_pool2d(x, kernel, strides, padding, dilations, ceilMode);
    }
    const bool countPad = node.attrs.getInt("count_include_pad", 0) != 0;
    bool symmetric = true;
    for (const auto& [b, e] : pads)
        symmetric = symmetric && b == e;
    if (!symmetric && !countPad)
        fail(node, "asymmetric pads with count_include_pad = 0 are not supported");
    const auto padding = applyPads(x, pads, 0.0);
    if (spatial == 1)
        return at::avg_pool1d(x, kernel, strides, padding, ceilMode, countPad);
    return at::avg_pool2d(x, kernel, strides, padding, ceilMode, countPad);
}

at::Tensor runReshape(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const at::Tensor shapeTensor = need(node, in, 1).to(at::kCPU).to(at::kLong).contiguous();
    const bool allowZero = node.attrs.getInt("allowzero", 0) != 0;
    std::vector<std::int64_t> shape(shapeTensor.data_ptr<std::int64_t>(),
                                    shapeTensor.data_ptr<std::int64_t>() + shapeTensor.numel());
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == 0 && !allowZero) {
            if (static_cast<std::int64_t>(i) >= x.dim())
                fail(node, "shape copies dimension " + std::to_string(i) + " of an input of rank " +
                               std::to_string(x.dim()));
            shape[i] = x.size(static_cast<std::int64_t>(i));
        }
    }
    return x.reshape(shape);
}

at::Tensor runFlatten(const Node& node, const at::Tensor& x)
{
    const std::int64_t rank = x.dim();
    std::int64_t axis = node.attrs.getInt("axis", 1);
    if (axis < -rank || axis > rank)
        fail(node, "axis " + std::to_string(axis) + " is out of range for rank " +
                       std::to_string(rank));
    if (axis < 0)
        axis += rank;
    std::int64_t outer = 1;
    for (std::int64_t d = 0; d < axis; ++d)
        outer *= x.size(d);
    return x.reshape({outer, -1});
}

at::Tensor runBinary(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& a = need(node, in, 0);
    const at::Tensor& b = need(node, in, 1);
    switch (node.op) {
    case OpKind::Add: return at::add(a, b);
    case OpKind::Sub: return at::sub(a, b);
    case OpKind::Mul: return at::mul(a, b);
    case OpKind::Div:
        // ONNX integer division truncates toward zero.
        return a.is_floating_point() ? at::div(a, b) : at::div(a, b, "trunc");
    default: fail(node, "not a binary op");
    }
}

} // namespace

std::vector<at::Tensor> runNode(const Node& node, const std::vector<at::Tensor>& in,
                                const ExecOptions& options)
{
    if (isSequenceOp(node.op))
        return runSequenceOp(node, in, options);
    if (isCnnOp(node.op))
        return runCnnOp(node, in);
    if (isIndexOp(node.op))
        return runIndexOp(node, in);
    switch (node.op) {
    case OpKind::Conv: return {runConv(node, in)};
    case OpKind::Gemm: return {runGemm(node, in)};
    case OpKind::MatMul: return {at::matmul(need(node, in, 0), need(node, in, 1))};
    case OpKind::BatchNorm: return {runBatchNorm(node, in, options)};
    case OpKind::Relu: return {at::relu(need(node, in, 0))};
    case OpKind::Gelu:
        return {at::gelu(need(node, in, 0), node.attrs.getString("approximate", "none"))};
    case OpKind::Silu: return {at::silu(need(node, in, 0))};
    case OpKind::Sigmoid: return {at::sigmoid(need(node, in, 0))};
    case OpKind::Tanh: return {at::tanh(need(node, in, 0))};
    case OpKind::MaxPool: return {runPool(node, in, true)};
    case OpKind::AveragePool: return {runPool(node, in, false)};
    case OpKind::GlobalAveragePool: {
        const at::Tensor& x = need(node, in, 0);
        if (x.dim() < 3)
            fail(node, "input has shape " + shapeText(x.sizes()) + ", expected [N, C, ...]");
        std::vector<std::int64_t> dims;
        for (std::int64_t d = 2; d < x.dim(); ++d)
            dims.push_back(d);
        return {x.mean(dims, /*keepdim=*/true)};
    }
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div: return {runBinary(node, in)};
    case OpKind::Flatten: return {runFlatten(node, need(node, in, 0))};
    case OpKind::Reshape: return {runReshape(node, in)};
    case OpKind::Transpose: {
        const at::Tensor& x = need(node, in, 0);
        std::vector<std::int64_t> reversed(static_cast<std::size_t>(x.dim()));
        std::iota(reversed.rbegin(), reversed.rend(), 0);
        const auto perm = node.attrs.getInts("perm", reversed);
        if (static_cast<std::int64_t>(perm.size()) != x.dim())
            fail(node, "perm has " + std::to_string(perm.size()) + " entries for rank " +
                           std::to_string(x.dim()));
        return {x.permute(perm)};
    }
    case OpKind::Softmax: {
        const at::Tensor& x = need(node, in, 0);
        return {at::softmax(x, normAxis(node, node.attrs.getInt("axis", -1), x.dim()))};
    }
    case OpKind::Concat: {
        std::vector<at::Tensor> parts;
        for (std::size_t i = 0; i < in.size(); ++i)
            parts.push_back(need(node, in, i));
        if (parts.empty())
            fail(node, "no inputs");
        return {at::cat(parts, normAxis(node, node.attrs.getInt("axis", 0), parts[0].dim()))};
    }
    case OpKind::Identity: return {need(node, in, 0)};
    case OpKind::Dropout: {
        // Inference: the input unchanged, and a mask (if asked for) that keeps everything.
        const at::Tensor& x = need(node, in, 0);
        if (node.outputs.size() > 1 && !node.outputs[1].empty())
            return {x, at::ones(x.sizes(), x.options().dtype(at::kBool))};
        return {x};
    }
    case OpKind::QuantizeLinear: return {runQuantizeLinear(node, in)};
    case OpKind::DequantizeLinear: return {runDequantizeLinear(node, in)};
    case OpKind::DynamicQuantizeLinear: return runDynamicQuantizeLinear(node, in);
    default: break;
    }
    fail(node, "unknown op kind " + std::to_string(static_cast<int>(node.op)));
}

Executor::Executor(const ir::Graph& graph, ExecOptions options)
    : m_graph(graph), m_options(options)
{
    for (const auto& [name, tensor] : graph.initializers)
        m_weights[name] = tensor.device() == m_options.device ? tensor : tensor.to(m_options.device);
}

at::Tensor Executor::readWeight(const ir::Node& node, const std::string& name, const at::Tensor& w)
{
    if (m_graph.widenOnRead.count(name) == 0 || w.scalar_type() == at::kFloat)
        return w;
    if (auto it = m_widened.find(name); it != m_widened.end())
        return it->second;
    at::Tensor f;
    try {
        f = m_graph.readAs(name, w);
    } catch (const std::runtime_error& e) {
        fail(node, std::string("its weight ") + e.what());
    }
    const auto bytes = static_cast<std::int64_t>(f.nbytes());
    if (m_widenedBytes + bytes <= m_options.widenCacheBytes) {
        m_widened[name] = f;
        m_widenedBytes += bytes;
    }
    // The 16-bit pages just read leave this process's memory again (the page cache keeps
    // them): a kept weight is read from its float32 copy from now on, and one not kept is
    // widened again next time, so a run over a model larger than memory stays at one layer's
    // worth. Nothing writes a widenOnRead tensor, the condition releasePages asks.
    if (w.is_cpu())
        io::MappedFile::releasePages(w.data_ptr(), w.nbytes());
    return f;
}

void Executor::addHook(std::shared_ptr<NodeHook> hook) { m_hooks.push_back(std::move(hook)); }

void Executor::clearHooks() { m_hooks.clear(); }

std::map<std::string, at::Tensor> Executor::execute(const std::vector<at::Tensor>& inputs,
                                                    bool keepAll,
                                                    const std::set<std::string>* keep)
{
    if (inputs.size() != m_graph.inputs.size())
        throw std::invalid_argument("the model takes " + std::to_string(m_graph.inputs.size()) +
                                    " input(s), got " + std::to_string(inputs.size()));
    std::map<std::string, at::Tensor> values;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const auto& info = m_graph.inputs[i];
        at::Tensor x = inputs[i];
        if (!x.defined())
            throw std::invalid_argument("input '" + info.name + "' is empty");
        bool fits = info.shape.empty() || x.dim() == static_cast<std::int64_t>(info.shape.size());
        for (std::size_t d = 0; fits && d < info.shape.size(); ++d)
            fits = info.shape[d] < 0 || info.shape[d] == x.size(static_cast<std::int64_t>(d));
        if (!fits)
            throw std::invalid_argument("input '" + info.name + "' has shape " +
                                        shapeText(x.sizes()) + ", the model expects " +
                                        declaredShapeText(info.shape));
        if (x.is_floating_point() && info.dtype == ir::DType::Float32 &&
            x.scalar_type() != at::kFloat)
            x = x.to(at::kFloat);
        values[info.name] = x.to(m_options.device);
    }

    // How many later nodes still read each value, so intermediates can be freed early.
    std::map<std::string, int> readers;
    if (!keepAll) {
        for (const auto& node : m_graph.nodes)
            for (const auto& in : node.inputs)
                ++readers[in];
        for (const auto& out : m_graph.outputs)
            ++readers[out.name];
        if (keep)
            for (const auto& name : *keep)
                ++readers[name];  // one reader that never comes: kept to the end
    }

    std::vector<at::Tensor> nodeInputs;
    for (const auto& node : m_graph.nodes) {
        nodeInputs.clear();
        // A Gather from a 16-bit table (an embedding) picks its rows in 16 bits and widens
        // only them: the same values as gathering from the widened table.
        bool widenGathered = false;
        for (const auto& name : node.inputs) {
            if (name.empty()) {
                nodeInputs.emplace_back();
                continue;
            }
            if (auto w = m_weights.find(name); w != m_weights.end()) {
                if (node.op == ir::OpKind::Gather && nodeInputs.empty() &&
                    m_graph.widenOnRead.count(name) != 0 && w->second.scalar_type() != at::kFloat &&
                    m_widened.count(name) == 0) {
                    widenGathered = true;
                    nodeInputs.push_back(w->second);
                } else {
                    nodeInputs.push_back(readWeight(node, name, w->second));
                }
                continue;
            }
            auto v = values.find(name);
            if (v == values.end())
                fail(node, "reads '" + name + "', which has not been computed");
            nodeInputs.push_back(v->second);
        }
        for (const auto& hook : m_hooks)
            hook->beforeNode(node, nodeInputs);
        std::vector<at::Tensor> outs;
        try {
            bool computed = false;
            for (const auto& hook : m_hooks)
                if ((computed = hook->computeNode(node, nodeInputs, outs)))
                    break;
            if (!computed)
                outs = runNode(node, nodeInputs, m_options);
        } catch (const c10::Error& e) {
            std::string what = e.what_without_backtrace();
            if (auto nl = what.find('\n'); nl != std::string::npos)
                what.resize(nl);
            fail(node, what);
        }
        if (widenGathered && !outs.empty() && outs[0].defined() &&
            outs[0].scalar_type() != at::kFloat) {
            try {
                outs[0] = m_graph.readAs(node.inputs[0], outs[0]);
                if (m_widened.count(node.inputs[0]) == 0 && nodeInputs[0].is_cpu())
                    io::MappedFile::releasePages(nodeInputs[0].data_ptr(), nodeInputs[0].nbytes());
            } catch (const std::runtime_error& e) {
                fail(node, std::string("its weight ") + e.what());
            }
        }
        for (const auto& hook : m_hooks)
            hook->afterNode(node, outs);
        for (std::size_t i = 0; i < node.outputs.size() && i < outs.size(); ++i)
            values[node.outputs[i]] = outs[i];
        if (!keepAll) {
            for (const auto& name : node.inputs)
                if (!name.empty() && --readers[name] == 0)
                    values.erase(name);
        }
    }
    return values;
}

std::vector<at::Tensor> Executor::forward(const std::vector<at::Tensor>& inputs)
{
    auto values = execute(inputs, false);
    std::vector<at::Tensor> outputs;
    for (const auto& out : m_graph.outputs) {
        auto it = values.find(out.name);
        if (it == values.end())
            throw std::runtime_error("graph output '" + out.name + "' was not computed");
        outputs.push_back(it->second);
    }
    return outputs;
}

namespace {
/// An op's inputs that do not fit it are bad input (std::invalid_argument); a LibTorch error
/// is a runtime failure, in LibTorch's words.
template <typename F>
auto guarded(F&& f) -> Result<decltype(f())>
{
    return bitlens::guarded<decltype(f())>(Boundary{.libraryPrefix = ""},
                                           std::forward<F>(f));
}
} // namespace

Result<std::vector<at::Tensor>> Executor::run(const std::vector<at::Tensor>& inputs)
{
    return guarded([&] {
        std::optional<c10::InferenceMode> guard;
        if (!m_options.training)
            guard.emplace();
        return forward(inputs);
    });
}

Result<std::map<std::string, at::Tensor>> Executor::runAll(const std::vector<at::Tensor>& inputs)
{
    return guarded([&] {
        std::optional<c10::InferenceMode> guard;
        if (!m_options.training)
            guard.emplace();
        return execute(inputs, true);
    });
}

Result<std::map<std::string, at::Tensor>>
Executor::runKeeping(const std::vector<at::Tensor>& inputs, const std::set<std::string>& keep)
{
    return guarded([&] {
        std::optional<c10::InferenceMode> guard;
        if (!m_options.training)
            guard.emplace();
        return execute(inputs, false, &keep);
    });
}

std::vector<at::Tensor> inputsForBatch(const ir::Graph& graph, const at::Tensor& batch)
{
    at::Tensor x = batch;
    if (!graph.inputs.empty() && graph.inputs[0].dtype == ir::DType::Int64 &&
        x.is_floating_point())
        x = x.to(at::kLong);  // token ids stored as floats (exact up to 2^24)
    if (graph.inputs.size() < 2 || x.dim() != 2)
        return {x};
    std::int64_t pad = 0;
    if (auto it = graph.metadata.find("pad_token_id"); it != graph.metadata.end()) {
        try {
            pad = std::stoll(it->second);
        } catch (const std::exception&) {
            pad = 0;
        }
    }
    // An encoder's inputs after its token ids, by name, in the type the graph declares.
    std::vector<at::Tensor> feeds = {x};
    for (std::size_t i = 1; i < graph.inputs.size(); ++i) {
        const ir::ValueInfo& in = graph.inputs[i];
        const auto dtype = in.dtype == ir::DType::Int32     ? at::kInt
                           : in.dtype == ir::DType::Float32 ? at::kFloat
                                                            : at::kLong;
        if (in.name == "attention_mask")
            feeds.push_back(x.ne(pad).to(dtype));
        else if (in.name == "token_type_ids")
            feeds.push_back(at::zeros(x.sizes(), x.options().dtype(dtype)));
        else if (in.name == "position_ids")
            feeds.push_back(at::arange(x.size(1), x.options().dtype(dtype)).expand(x.sizes()));
        else
            return {x};  // not one this knows: the run says what it lacks
    }
    return feeds;
}

Result<ir::ShapeMap>
traceShapes(const ir::Graph& graph, const std::vector<std::vector<std::int64_t>>& inputShapes)
{
    auto samples = ir::sampleInputShapes(graph, inputShapes);
    if (!samples)
        return samples.error();
    std::vector<at::Tensor> inputs;
    for (std::size_t i = 0; i < graph.inputs.size(); ++i) {
        const auto dtype = graph.inputs[i].dtype == ir::DType::Int64   ? at::kLong
                           : graph.inputs[i].dtype == ir::DType::Int32 ? at::kInt
                                                                       : at::kFloat;
        inputs.push_back(at::zeros((*samples)[i], at::TensorOptions().dtype(dtype)));
    }
    Executor executor(graph);
    auto values = executor.runAll(inputs);
    if (!values)
        return values.error();
    ir::ShapeMap shapes;
    for (const auto& [name, tensor] : *values)
        shapes[name] = tensor.sizes().vec();
    return shapes;
}

} // namespace bitlens::exec
