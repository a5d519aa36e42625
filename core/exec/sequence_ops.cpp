#include "exec/sequence_ops.h"
#include "exec/op_support.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace bitlens::exec {

using ir::Node;
using ir::OpKind;

namespace {

using detail::fail;
using detail::normAxis;
using detail::need;
using detail::optionalInput;
using detail::shapeText;

/// The values of a small integer tensor (axes, starts, shapes), read on the CPU.
std::vector<std::int64_t> intsOf(const Node& node, const at::Tensor& t, const char* what)
{
    if (t.is_floating_point() || t.dim() > 1)
        fail(node, std::string(what) + " must be a 1-D integer tensor, got " +
                       std::string(c10::toString(t.scalar_type())) + " " + shapeText(t.sizes()));
    const at::Tensor c = t.to(at::kCPU).to(at::kLong).contiguous().reshape({-1});
    return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

/// Axes given as input `index` (opset 13+) or as the "axes" attribute (older opsets).
std::optional<std::vector<std::int64_t>> axesOf(const Node& node, const std::vector<at::Tensor>& in,
                                                std::size_t index)
{
    const at::Tensor t = optionalInput(in, index);
    if (t.defined())
        return intsOf(node, t, "axes");
    if (node.attrs.has("axes"))
        return node.attrs.getInts("axes", {});
    return std::nullopt;
}

at::ScalarType scalarTypeOfOnnx(const Node& node, std::int64_t code)
{
    switch (code) {
    case 1: return at::kFloat;
    case 2: return at::kByte;
    case 3: return at::kChar;
    case 6: return at::kInt;
    case 7: return at::kLong;
    case 9: return at::kBool;
    case 10: return at::kHalf;
    case 11: return at::kDouble;
    case 16: return at::kBFloat16;
    default: fail(node, "cast to ONNX data type " + std::to_string(code) + " is not supported");
    }
}

at::Tensor runLayerNorm(const Node& node, const std::vector<at::Tensor>& in,
                        std::vector<at::Tensor>* extra)
{
    const at::Tensor& x = need(node, in, 0);
    at::Tensor scale = need(node, in, 1);
    at::Tensor bias = optionalInput(in, 2);
    const std::int64_t axis = normAxis(node, node.attrs.getInt("axis", -1), x.dim());
    const double eps = node.attrs.getFloat("epsilon", 1e-5);
    const std::vector<std::int64_t> normalized(x.sizes().begin() + axis, x.sizes().end());
    std::int64_t count = 1;
    for (const auto d : normalized)
        count *= d;
    if (scale.numel() != count || (bias.defined() && bias.numel() != count))
        fail(node, "scale " + shapeText(scale.sizes()) + " does not match the normalized shape " +
                       shapeText(normalized) + " of input " + shapeText(x.sizes()));
    scale = scale.reshape(normalized);
    if (bias.defined())
        bias = bias.reshape(normalized);
    const auto optBias = bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt;
    if (extra == nullptr)
        return at::layer_norm(x, normalized, scale, optBias, eps);
    auto [y, mean, rstd] = at::native_layer_norm(x, normalized, scale, optBias, eps);
    extra->push_back(mean);
    extra->push_back(rstd);
    return y;
}

/// y = x / sqrt(mean(x^2) + eps) * scale over the dimensions from `axis`, computed in float32
/// (stash_type 1) in the order Hugging Face's LlamaRMSNorm uses, so results match it exactly.
at::Tensor runRmsNorm(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const at::Tensor& scale = need(node, in, 1);
    const std::int64_t axis = normAxis(node, node.attrs.getInt("axis", -1), x.dim());
    const double eps = node.attrs.getFloat("epsilon", 1e-5);
    std::vector<std::int64_t> dims;
    for (std::int64_t d = axis; d < x.dim(); ++d)
        dims.push_back(d);
    const at::Tensor xf = x.to(at::kFloat);
    const at::Tensor variance = xf.pow(2).mean(dims, /*keepdim=*/true);
    const at::Tensor y = (xf * at::rsqrt(variance + eps)).to(x.scalar_type());
    return scale * y;
}

at::Tensor runGather(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& data = need(node, in, 0);
    const at::Tensor& indices = need(node, in, 1);
    if (indices.is_floating_point())
        fail(node, "indices must be integers, got " +
                       std::string(c10::toString(indices.scalar_type())));
    const std::int64_t axis = normAxis(node, node.attrs.getInt("axis", 0), data.dim());
    const std::int64_t n = data.size(axis);
    at::Tensor idx = indices.to(at::kLong);
    if (idx.numel() > 0) {
        const auto lo = idx.min().item<std::int64_t>();
        const auto hi = idx.max().item<std::int64_t>();
        if (lo < -n || hi >= n)
            fail(node, "index " + std::to_string(lo < -n ? lo : hi) + " is out of range for " +
                           "dimension " + std::to_string(axis) + " of size " + std::to_string(n));
        if (lo < 0)
            idx = at::where(idx < 0, idx + n, idx);
    }
    std::vector<std::int64_t> shape(data.sizes().begin(), data.sizes().begin() + axis);
    shape.insert(shape.end(), indices.sizes().begin(), indices.sizes().end());
    shape.insert(shape.end(), data.sizes().begin() + axis + 1, data.sizes().end());
    return data.index_select(axis, idx.reshape({-1})).reshape(shape);
}

at::Tensor runUnsqueeze(const Node& node, const std::vector<at::Tensor>& in)
{
    at::Tensor x = need(node, in, 0);
    const auto axes = axesOf(node, in, 1);
    if (!axes || axes->empty())
        fail(node, "axes are missing");
    const std::int64_t rank = x.dim() + static_cast<std::int64_t>(axes->size());
    std::vector<std::int64_t> sorted;
    for (const auto a : *axes)
        sorted.push_back(normAxis(node, a, rank));
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
        fail(node, "axes repeat a dimension");
    for (const auto a : sorted)
        x = x.unsqueeze(a);
    return x;
}

at::Tensor runSqueeze(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const auto axes = axesOf(node, in, 1);
    std::vector<std::int64_t> shape;
    std::vector<bool> drop(static_cast<std::size_t>(x.dim()), false);
    if (!axes) {
        for (std::int64_t d = 0; d < x.dim(); ++d)
            drop[static_cast<std::size_t>(d)] = x.size(d) == 1;
    } else {
        for (const auto a : *axes) {
            const std::int64_t d = normAxis(node, a, x.dim());
            if (x.size(d) != 1)
                fail(node, "dimension " + std::to_string(d) + " of " + shapeText(x.sizes()) +
                               " is not 1");
            drop[static_cast<std::size_t>(d)] = true;
        }
    }
    for (std::int64_t d = 0; d < x.dim(); ++d)
        if (!drop[static_cast<std::size_t>(d)])
            shape.push_back(x.size(d));
    return x.reshape(shape);
}

at::Tensor runSlice(const Node& node, const std::vector<at::Tensor>& in)
{
    at::Tensor x = need(node, in, 0);
    const auto starts = intsOf(node, need(node, in, 1), "starts");
    const auto ends = intsOf(node, need(node, in, 2), "ends");
    const at::Tensor axesT = optionalInput(in, 3);
    const at::Tensor stepsT = optionalInput(in, 4);
    std::vector<std::int64_t> axes;
    if (axesT.defined()) {
        axes = intsOf(node, axesT, "axes");
    } else {
        for (std::size_t i = 0; i < starts.size(); ++i)
            axes.push_back(static_cast<std::int64_t>(i));
    }
    const std::vector<std::int64_t> steps = stepsT.defined()
                                                ? intsOf(node, stepsT, "steps")
                                                : std::vector<std::int64_t>(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() ||
        steps.size() != starts.size())
        fail(node, "starts, ends, axes and steps differ in length");
    for (std::size_t i = 0; i < starts.size(); ++i) {
        const std::int64_t axis = normAxis(node, axes[i], x.dim());
        const std::int64_t dim = x.size(axis);
        const std::int64_t step = steps[i];
        if (step == 0)
            fail(node, "a step is 0");
        // ONNX clamps out-of-range starts and ends (INT64_MAX means "to the end").
        std::int64_t start = starts[i] < 0 ? std::max<std::int64_t>(starts[i], -dim) + dim
                                           : starts[i];
        std::int64_t end = ends[i] < 0 ? std::max<std::int64_t>(ends[i], -dim - 1) + dim
                                       : ends[i];
        if (step > 0) {
            start = std::clamp<std::int64_t>(start, 0, dim);
            end = std::clamp<std::int64_t>(end, 0, dim);
            x = x.slice(axis, start, std::max(start, end), step);
        } else {
            start = std::clamp<std::int64_t>(start, 0, dim - 1);
            end = std::clamp<std::int64_t>(end, -1, dim - 1);
            const at::Tensor idx =
                start > end ? at::arange(start, end, step, at::TensorOptions().dtype(at::kLong))
                            : at::empty({0}, at::TensorOptions().dtype(at::kLong));
            x = x.index_select(axis, idx.to(x.device()));
        }
    }
    return x;
}

std::vector<at::Tensor> runSplit(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const std::int64_t axis = normAxis(node, node.attrs.getInt("axis", 0), x.dim());
    const std::int64_t dim = x.size(axis);
    const std::int64_t parts = static_cast<std::int64_t>(node.outputs.size());
    std::vector<std::int64_t> sizes;
    if (const at::Tensor s = optionalInput(in, 1); s.defined())
        sizes = intsOf(node, s, "split");
    else if (node.attrs.has("split"))
        sizes = node.attrs.getInts("split", {});
    std::vector<at::Tensor> out;
    if (sizes.empty()) {
        // Equal parts; with num_outputs (opset 18) the last part may be smaller.
        const std::int64_t n = node.attrs.getInt("num_outputs", parts);
        if (n < 1)
            fail(node, "num_outputs must be positive");
        out = at::split(x, (dim + n - 1) / n, axis);
    } else {
        std::int64_t total = 0;
        for (const auto s : sizes) {
            if (s < 0)
                fail(node, "a split size is negative");
            total += s;
        }
        if (total != dim)
            fail(node, "split sizes add up to " + std::to_string(total) + ", dimension " +
                           std::to_string(axis) + " has " + std::to_string(dim));
        out = at::split_with_sizes(x, sizes, axis);
    }
    if (static_cast<std::int64_t>(out.size()) != parts)
        fail(node, "splits into " + std::to_string(out.size()) + " parts but has " +
                       std::to_string(parts) + " outputs");
    return out;
}

at::Tensor runReduceMean(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const bool keep = node.attrs.getInt("keepdims", 1) != 0;
    auto axes = axesOf(node, in, 1);
    if (!axes || axes->empty()) {
        if (node.attrs.getInt("noop_with_empty_axes", 0) != 0)
            return x;
        axes = std::vector<std::int64_t>();
        for (std::int64_t d = 0; d < x.dim(); ++d)
            axes->push_back(d);
    }
    std::vector<std::int64_t> dims;
    for (const auto a : *axes)
        dims.push_back(normAxis(node, a, x.dim()));
    return x.mean(dims, keep);
}

at::Tensor runRange(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& start = need(node, in, 0);
    const at::Tensor& limit = need(node, in, 1);
    const at::Tensor& delta = need(node, in, 2);
    if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1)
        fail(node, "start, limit and delta must be scalars");
    const auto opts = at::TensorOptions().dtype(start.scalar_type()).device(start.device());
    if (start.is_floating_point()) {
        const double d = delta.item<double>();
        if (d == 0.0)
            fail(node, "delta is 0");
        return at::arange(start.item<double>(), limit.item<double>(), d, opts);
    }
    const auto d = delta.item<std::int64_t>();
    if (d == 0)
        fail(node, "delta is 0");
    const auto s = start.item<std::int64_t>();
    const auto l = limit.item<std::int64_t>();
    const std::int64_t count = std::max<std::int64_t>((l - s + d + (d > 0 ? -1 : 1)) / d, 0);
    if (count > (std::int64_t{1} << 31))
        fail(node, "would produce " + std::to_string(count) + " elements");
    return at::arange(s, l, d, opts);
}

at::Tensor runShape(const Node& node, const at::Tensor& x)
{
    const std::int64_t rank = x.dim();
    auto clampIndex = [rank](std::int64_t i) {
        if (i < 0)
            i += rank;
        return std::clamp<std::int64_t>(i, 0, rank);
    };
    const std::int64_t start = clampIndex(node.attrs.getInt("start", 0));
    const std::int64_t end = clampIndex(node.attrs.getInt("end", rank));
    std::vector<std::int64_t> sizes;
    for (std::int64_t d = start; d < end; ++d)
        sizes.push_back(x.size(d));
    return at::tensor(sizes, at::TensorOptions().dtype(at::kLong)).to(x.device());
}

at::Tensor runRotary(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& input = need(node, in, 0);
    at::Tensor cosCache = need(node, in, 1);
    at::Tensor sinCache = need(node, in, 2);
    const at::Tensor positions = optionalInput(in, 3);
    const bool interleaved = node.attrs.getInt("interleaved", 0) != 0;
    const std::int64_t heads = node.attrs.getInt("num_heads", 0);
    // Work in [B, S, heads, head_size].
    at::Tensor x;
    if (input.dim() == 4) {
        x = input.transpose(1, 2);
    } else if (input.dim() == 3) {
        if (heads <= 0 || input.size(2) % heads != 0)
            fail(node, "a 3-D input needs num_heads dividing its hidden size " +
                           std::to_string(input.size(2)));
        x = input.reshape({input.size(0), input.size(1), heads, input.size(2) / heads});
    } else {
        fail(node, "input has shape " + shapeText(input.sizes()) +
                       ", expected [B, heads, S, head_size] or [B, S, hidden]");
    }
    const std::int64_t headSize = x.size(3);
    const std::int64_t rotary = node.attrs.getInt("rotary_embedding_dim", 0) == 0
                                    ? headSize
                                    : node.attrs.getInt("rotary_embedding_dim", 0);
    if (rotary % 2 != 0 || rotary > headSize || rotary < 2)
        fail(node, "rotary_embedding_dim " + std::to_string(rotary) + " does not fit head size " +
                       std::to_string(headSize));
    if (positions.defined()) {
        if (positions.is_floating_point())
            fail(node, "position_ids must be integers");
        const std::int64_t maxPos = cosCache.size(0);
        const at::Tensor p = positions.to(at::kLong);
        if (p.numel() > 0 && (p.min().item<std::int64_t>() < 0 ||
                              p.max().item<std::int64_t>() >= maxPos))
            fail(node, "a position id is outside the cache of " + std::to_string(maxPos) +
                           " positions");
        std::vector<std::int64_t> shape = p.sizes().vec();
        shape.push_back(cosCache.size(-1));
        cosCache = cosCache.index_select(0, p.reshape({-1})).reshape(shape);
        sinCache = sinCache.index_select(0, p.reshape({-1})).reshape(shape);
    }
    if (cosCache.size(-1) != rotary / 2 || sinCache.size(-1) != rotary / 2)
        fail(node, "cos/sin caches have " + std::to_string(cosCache.size(-1)) +
                       " values per position, expected " + std::to_string(rotary / 2));
    if (cosCache.dim() != 3 || cosCache.size(1) != x.size(1))
        fail(node, "cos cache " + shapeText(cosCache.sizes()) + " does not cover " +
                       std::to_string(x.size(1)) + " positions as [B, S, rotary/2]");
    const at::Tensor cos = cosCache.unsqueeze(2);  // [B or 1, S, 1, rotary/2]
    const at::Tensor sin = sinCache.unsqueeze(2);
    const at::Tensor rot = x.narrow(3, 0, rotary);
    at::Tensor x1;
    at::Tensor x2;
    if (interleaved) {
        x1 = rot.slice(3, 0, rotary, 2);
        x2 = rot.slice(3, 1, rotary, 2);
    } else {
        x1 = rot.narrow(3, 0, rotary / 2);
        x2 = rot.narrow(3, rotary / 2, rotary / 2);
    }
    const at::Tensor real = cos * x1 - sin * x2;
    const at::Tensor imag = sin * x1 + cos * x2;
    at::Tensor y = interleaved ? at::stack({real, imag}, -1).reshape(rot.sizes())
                               : at::cat({real, imag}, -1);
    if (rotary < headSize)
        y = at::cat({y, x.narrow(3, rotary, headSize - rotary)}, -1);
    if (input.dim() == 4)
        return y.transpose(1, 2).contiguous();
    return y.reshape(input.sizes());
}

/// Shared checks and layout handling of ONNX LSTM / GRU / RNN. `gates` is 4 (LSTM), 3 (GRU)
/// or 1 (RNN).
struct RnnSetup {
    at::Tensor x;               ///< [S, B, F]
    std::int64_t hidden = 0;
    std::int64_t directions = 1;
    std::string direction;
    bool batchFirst = false;    ///< layout = 1
    at::Tensor h0;              ///< [dirs, B, H] or undefined
    at::Tensor c0;
};

RnnSetup rnnSetup(const Node& node, const std::vector<at::Tensor>& in, std::int64_t gates)
{
    RnnSetup s;
    const at::Tensor& x = need(node, in, 0);
    const at::Tensor& w = need(node, in, 1);
    const at::Tensor& r = need(node, in, 2);
    s.batchFirst = node.attrs.getInt("layout", 0) != 0;
    if (x.dim() != 3)
        fail(node, "input has shape " + shapeText(x.sizes()) + ", expected [S, B, F]" +
                       (s.batchFirst ? " (layout 1: [B, S, F])" : ""));
    s.x = s.batchFirst ? x.transpose(0, 1) : x;
    s.direction = node.attrs.getString("direction", "forward");
    if (s.direction != "forward" && s.direction != "reverse" && s.direction != "bidirectional")
        fail(node, "direction '" + s.direction + "' is not forward, reverse or bidirectional");
    s.directions = s.direction == "bidirectional" ? 2 : 1;
    s.hidden = node.attrs.getInt("hidden_size", r.dim() == 3 ? r.size(2) : 0);
    const std::int64_t h = s.hidden;
    const std::int64_t f = s.x.size(2);
    if (w.dim() != 3 || w.size(0) != s.directions || w.size(1) != gates * h || w.size(2) != f)
        fail(node, "W has shape " + shapeText(w.sizes()) + ", expected " +
                       shapeText({s.directions, gates * h, f}));
    if (r.dim() != 3 || r.size(0) != s.directions || r.size(1) != gates * h || r.size(2) != h)
        fail(node, "R has shape " + shapeText(r.sizes()) + ", expected " +
                       shapeText({s.directions, gates * h, h}));
    if (const at::Tensor b = optionalInput(in, 3);
        b.defined() && (b.dim() != 2 || b.size(0) != s.directions || b.size(1) != 2 * gates * h))
        fail(node, "B has shape " + shapeText(b.sizes()) + ", expected " +
                       shapeText({s.directions, 2 * gates * h}));
    if (gates != 1 && (node.attrs.has("activations") || node.attrs.has("activation_alpha") ||
                       node.attrs.has("activation_beta")))
        fail(node, "custom activations are not supported (only the defaults)");
    if (const at::Tensor lens = optionalInput(in, 4); lens.defined()) {
        const at::Tensor l = lens.to(at::kLong);
        if (l.numel() != s.x.size(1) || !l.eq(s.x.size(0)).all().item<bool>())
            fail(node, "sequence_lens shorter than the sequence are not supported");
    }
    auto initial = [&](std::size_t i, const char* what) {
        at::Tensor t = optionalInput(in, i);
        if (!t.defined())
            return t;
        if (s.batchFirst && t.dim() == 3)
            t = t.transpose(0, 1);
        if (t.dim() != 3 || t.size(0) != s.directions || t.size(1) != s.x.size(1) ||
            t.size(2) != h)
            fail(node, std::string(what) + " has shape " + shapeText(t.sizes()) +
                           ", expected " + shapeText({s.directions, s.x.size(1), h}));
        return t;
    };
    s.h0 = initial(5, "initial_h");
    s.c0 = gates == 4 ? initial(6, "initial_c") : at::Tensor();
    return s;
}

/// Y [S, dirs, B, H] and the final states [dirs, B, H] back in the node's layout.
std::vector<at::Tensor> rnnOutputs(const RnnSetup& s, std::vector<at::Tensor> ys,
                                   std::vector<at::Tensor> hs, std::vector<at::Tensor> cs)
{
    at::Tensor y = at::stack(ys, 1);
    at::Tensor yh = at::stack(hs, 0);
    at::Tensor yc = cs.empty() ? at::Tensor() : at::stack(cs, 0);
    if (s.batchFirst) {
        y = y.permute({2, 0, 1, 3}).contiguous();  // [B, S, dirs, H]
        yh = yh.transpose(0, 1).contiguous();
        if (yc.defined())
            yc = yc.transpose(0, 1).contiguous();
    }
    std::vector<at::Tensor> out{y, yh};
    if (yc.defined())
        out.push_back(yc);
    return out;
}

/// `t` through `f`, or `t` itself when `f` is empty.
at::Tensor applyPoint(const HiddenQuant& f, const at::Tensor& t) { return f ? f(t) : t; }

std::vector<at::Tensor> runLstm(const Node& node, const std::vector<at::Tensor>& in,
                                const HiddenQuant& hiddenQuant)
{
    const RnnSetup s = rnnSetup(node, in, 4);
    const std::int64_t h = s.hidden;
    const std::int64_t seq = s.x.size(0);
    const std::int64_t batch = s.x.size(1);
    const at::Tensor b = optionalInput(in, 3);
    const at::Tensor p = optionalInput(in, 7);
    if (p.defined() && (p.dim() != 2 || p.size(0) != s.directions || p.size(1) != 3 * h))
        fail(node, "P has shape " + shapeText(p.sizes()) + ", expected " +
                       shapeText({s.directions, 3 * h}));
    const bool clip = node.attrs.has("clip");
    const double clipValue = node.attrs.getFloat("clip", 0.0);
    const bool inputForget = node.attrs.getInt("input_forget", 0) != 0;
    const auto zeros = at::zeros({batch, h}, s.x.options());
    std::vector<at::Tensor> ys;
    std::vector<at::Tensor> hs;
    std::vector<at::Tensor> cs;
    for (std::int64_t d = 0; d < s.directions; ++d) {
        const at::Tensor w = in[1][d];
        const at::Tensor r = in[2][d];
        // Gates in ONNX order i, o, f, c. Input projections for all steps at once; the biases
        // are added as PyTorch's LSTM cell adds them ((x W^T + Wb) + (h R^T + Rb)).
        at::Tensor xw = at::matmul(s.x, w.t());
        at::Tensor rb;
        if (b.defined()) {
            xw = xw + b[d].narrow(0, 0, 4 * h);
            rb = b[d].narrow(0, 4 * h, 4 * h);
        }
        at::Tensor ht = s.h0.defined() ? s.h0[d] : zeros;
        at::Tensor ct = s.c0.defined() ? s.c0[d] : zeros;
        const bool reverse = s.direction == "reverse" || d == 1;
        std::vector<at::Tensor> steps(static_cast<std::size_t>(seq));
        for (std::int64_t k = 0; k < seq; ++k) {
            const std::int64_t t = reverse ? seq - 1 - k : k;
            at::Tensor hr = at::matmul(applyPoint(hiddenQuant, ht), r.t());
            if (rb.defined())
                hr = hr + rb;
            auto g = (xw[t] + hr).chunk(4, 1);
            at::Tensor gi = g[0];
            at::Tensor go = g[1];
            at::Tensor gf = g[2];
            at::Tensor gc = g[3];
            if (p.defined()) {
                gi = gi + p[d].narrow(0, 0, h) * ct;
                gf = gf + p[d].narrow(0, 2 * h, h) * ct;
            }
            if (clip) {
                gi = gi.clamp(-clipValue, clipValue);
                gf = gf.clamp(-clipValue, clipValue);
                gc = gc.clamp(-clipValue, clipValue);
            }
            const at::Tensor i = at::sigmoid(gi);
            const at::Tensor f = inputForget ? 1.0 - i : at::sigmoid(gf);
            ct = f * ct + i * at::tanh(gc);
            if (p.defined())
                go = go + p[d].narrow(0, h, h) * ct;
            if (clip)
                go = go.clamp(-clipValue, clipValue);
            ht = at::sigmoid(go) * at::tanh(ct);
            steps[static_cast<std::size_t>(t)] = ht;
        }
        ys.push_back(seq > 0 ? at::stack(steps, 0) : at::zeros({0, batch, h}, s.x.options()));
        hs.push_back(ht);
        cs.push_back(ct);
    }
    return rnnOutputs(s, std::move(ys), std::move(hs), std::move(cs));
}

std::vector<at::Tensor> runGru(const Node& node, const std::vector<at::Tensor>& in,
                               const HiddenQuant& hiddenQuant)
{
    const RnnSetup s = rnnSetup(node, in, 3);
    const std::int64_t h = s.hidden;
    const std::int64_t seq = s.x.size(0);
    const std::int64_t batch = s.x.size(1);
    const at::Tensor b = optionalInput(in, 3);
    const bool clip = node.attrs.has("clip");
    const double clipValue = node.attrs.getFloat("clip", 0.0);
    const bool linearBeforeReset = node.attrs.getInt("linear_before_reset", 0) != 0;
    const auto zeros = at::zeros({batch, h}, s.x.options());
    std::vector<at::Tensor> ys;
    std::vector<at::Tensor> hs;
    for (std::int64_t d = 0; d < s.directions; ++d) {
        const at::Tensor w = in[1][d];
        const at::Tensor r = in[2][d];
        // Gates in ONNX order z, r, h.
        at::Tensor xw = at::matmul(s.x, w.t());
        at::Tensor rb;
        if (b.defined()) {
            xw = xw + b[d].narrow(0, 0, 3 * h);
            rb = b[d].narrow(0, 3 * h, 3 * h);
        }
        const at::Tensor rzr = r.narrow(0, 0, 2 * h);
        const at::Tensor rh = r.narrow(0, 2 * h, h);
        at::Tensor ht = s.h0.defined() ? s.h0[d] : zeros;
        const bool reverse = s.direction == "reverse" || d == 1;
        std::vector<at::Tensor> steps(static_cast<std::size_t>(seq));
        for (std::int64_t k = 0; k < seq; ++k) {
            const std::int64_t t = reverse ? seq - 1 - k : k;
            const auto xg = xw[t].chunk(3, 1);
            const at::Tensor hq = applyPoint(hiddenQuant, ht);
            at::Tensor hzr = at::matmul(hq, rzr.t());
            if (rb.defined())
                hzr = hzr + rb.narrow(0, 0, 2 * h);
            const auto hg = hzr.chunk(2, 1);
            at::Tensor gz = xg[0] + hg[0];
            at::Tensor gr = xg[1] + hg[1];
            if (clip) {
                gz = gz.clamp(-clipValue, clipValue);
                gr = gr.clamp(-clipValue, clipValue);
            }
            const at::Tensor z = at::sigmoid(gz);
            const at::Tensor rr = at::sigmoid(gr);
            at::Tensor gh;
            if (linearBeforeReset) {
                at::Tensor hh = at::matmul(hq, rh.t());
                if (rb.defined())
                    hh = hh + rb.narrow(0, 2 * h, h);
                gh = xg[2] + rr * hh;
            } else {
                gh = xg[2] + at::matmul(applyPoint(hiddenQuant, rr * ht), rh.t());
                if (rb.defined())
                    gh = gh + rb.narrow(0, 2 * h, h);
            }
            if (clip)
                gh = gh.clamp(-clipValue, clipValue);
            const at::Tensor n = at::tanh(gh);
            // (1 - z) * n + z * h, written as PyTorch's GRU cell computes it.
            ht = n + z * (ht - n);
            steps[static_cast<std::size_t>(t)] = ht;
        }
        ys.push_back(seq > 0 ? at::stack(steps, 0) : at::zeros({0, batch, h}, s.x.options()));
        hs.push_back(ht);
    }
    return rnnOutputs(s, std::move(ys), std::move(hs), {});
}

/// One activation function of ONNX's RNN family, its name compared case-insensitively (as
/// onnxruntime does), with the alpha / beta that were given for it or its defaults.
struct RnnActivation {
    std::string name;  ///< lower case
    double alpha = 0.0;
    double beta = 0.0;
};

/// The activations of `node`, `fallback` per direction when it names none. activation_alpha /
/// beta are consumed in order by the functions that take them: activations [LeakyRelu, Tanh,
/// HardSigmoid] with activation_alpha [0.1, 0.3] give LeakyRelu 0.1 and HardSigmoid 0.3.
std::vector<RnnActivation> rnnActivations(const Node& node, std::int64_t directions,
                                          const std::string& fallback)
{
    auto names = node.attrs.getStrings("activations", {});
    if (names.empty())
        names.assign(static_cast<std::size_t>(directions), fallback);
    if (names.size() != static_cast<std::size_t>(directions))
        fail(node, std::to_string(names.size()) + " activations for " +
                       std::to_string(directions) + " direction(s)");
    const auto alphas = node.attrs.getFloats("activation_alpha", {});
    const auto betas = node.attrs.getFloats("activation_beta", {});
    std::size_t nextAlpha = 0;
    std::size_t nextBeta = 0;
    std::vector<RnnActivation> out;
    for (const auto& given : names) {
        RnnActivation a;
        for (const char c : given)
            a.name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        double alpha = 0.0;
        double beta = 0.0;
        bool takesAlpha = true;
        bool takesBeta = false;
        if (a.name == "leakyrelu")
            alpha = 0.01;
        else if (a.name == "thresholdedrelu" || a.name == "elu")
            alpha = 1.0;
        else if (a.name == "hardsigmoid") {
            alpha = 0.2;
            beta = 0.5;
            takesBeta = true;
        } else if (a.name == "affine" || a.name == "scaledtanh") {
            alpha = 1.0;
            beta = a.name == "affine" ? 0.0 : 1.0;
            takesBeta = true;
        } else if (a.name == "tanh" || a.name == "relu" || a.name == "sigmoid" ||
                 a.name == "softsign" || a.name == "softplus")
            takesAlpha = false;
        else
            fail(node, "activation '" + given + "' is not an ONNX RNN activation");
        a.alpha = takesAlpha && nextAlpha < alphas.size() ? alphas[nextAlpha++] : alpha;
        a.beta = takesBeta && nextBeta < betas.size() ? betas[nextBeta++] : beta;
        out.push_back(std::move(a));
    }
    return out;
}

at::Tensor applyActivation(const RnnActivation& a, const at::Tensor& x)
{
    if (a.name == "tanh")
        return at::tanh(x);
    if (a.name == "relu")
        return at::relu(x);
    if (a.name == "sigmoid")
        return at::sigmoid(x);
    if (a.name == "leakyrelu")
        return at::leaky_relu(x, a.alpha);
    if (a.name == "thresholdedrelu")
        return at::where(x > a.alpha, x, at::zeros_like(x));
    if (a.name == "elu")
        return at::elu(x, a.alpha);
    if (a.name == "hardsigmoid")
        return at::clamp(x * a.alpha + a.beta, 0.0, 1.0);
    if (a.name == "affine")
        return x * a.alpha + a.beta;
    if (a.name == "scaledtanh")
        return at::tanh(x * a.beta) * a.alpha;
    if (a.name == "softsign")
        return x / (1.0 + x.abs());
    return at::where(x > 0, x + at::log1p(at::exp(-x)), at::log1p(at::exp(x)));  // softplus
}

/// ONNX RNN: H_t = f(X_t W^T + Wb + H_{t-1} R^T + Rb), f = activations[direction] (Tanh).
std::vector<at::Tensor> runSimpleRnn(const Node& node, const std::vector<at::Tensor>& in,
                                     const HiddenQuant& hiddenQuant)
{
    const RnnSetup s = rnnSetup(node, in, 1);
    const std::int64_t h = s.hidden;
    const std::int64_t seq = s.x.size(0);
    const std::int64_t batch = s.x.size(1);
    const at::Tensor b = optionalInput(in, 3);
    const bool clip = node.attrs.has("clip");
    const double clipValue = node.attrs.getFloat("clip", 0.0);
    const auto activations = rnnActivations(node, s.directions, "Tanh");
    std::vector<at::Tensor> ys;
    std::vector<at::Tensor> hs;
    const auto zeros = at::zeros({batch, h}, s.x.options());
    for (std::int64_t d = 0; d < s.directions; ++d) {
        const RnnActivation& act = activations[static_cast<std::size_t>(d)];
        const at::Tensor w = in[1][d];
        const at::Tensor r = in[2][d];
        at::Tensor xw = at::matmul(s.x, w.t());
        at::Tensor rb;
        if (b.defined()) {
            xw = xw + b[d].narrow(0, 0, h);
            rb = b[d].narrow(0, h, h);
        }
        at::Tensor ht = s.h0.defined() ? s.h0[d] : zeros;
        const bool reverse = s.direction == "reverse" || d == 1;
        std::vector<at::Tensor> steps(static_cast<std::size_t>(seq));
        for (std::int64_t k = 0; k < seq; ++k) {
            const std::int64_t t = reverse ? seq - 1 - k : k;
            at::Tensor hr = at::matmul(applyPoint(hiddenQuant, ht), r.t());
            if (rb.defined())
                hr = hr + rb;
            at::Tensor g = xw[t] + hr;
            if (clip)
                g = g.clamp(-clipValue, clipValue);
            ht = applyActivation(act, g);
            steps[static_cast<std::size_t>(t)] = ht;
        }
        ys.push_back(seq > 0 ? at::stack(steps, 0) : at::zeros({0, batch, h}, s.x.options()));
        hs.push_back(ht);
    }
    return rnnOutputs(s, std::move(ys), std::move(hs), {});
}

} // namespace

bool isSequenceOp(OpKind op)
{
    return (static_cast<int>(op) >= static_cast<int>(OpKind::LayerNorm) &&
            static_cast<int>(op) <= static_cast<int>(OpKind::GRU)) ||
           op == OpKind::RNN;
}

std::vector<at::Tensor> runSequenceOp(const Node& node, const std::vector<at::Tensor>& in,
                                      const ExecOptions&)
{
    switch (node.op) {
    case OpKind::LayerNorm: {
        if (node.outputs.size() <= 1)
            return {runLayerNorm(node, in, nullptr)};
        std::vector<at::Tensor> extra;
        at::Tensor y = runLayerNorm(node, in, &extra);
        return {y, extra[0], extra[1]};
    }
    case OpKind::RMSNorm: return {runRmsNorm(node, in)};
    case OpKind::Gather: return {runGather(node, in)};
    case OpKind::Unsqueeze: return {runUnsqueeze(node, in)};
    case OpKind::Squeeze: return {runSqueeze(node, in)};
    case OpKind::Slice: return {runSlice(node, in)};
    case OpKind::Split: return runSplit(node, in);
    case OpKind::Cast:
        return {need(node, in, 0).to(scalarTypeOfOnnx(node, node.attrs.getInt("to", 0)))};
    case OpKind::Where:
        return {at::where(need(node, in, 0).to(at::kBool), need(node, in, 1), need(node, in, 2))};
    case OpKind::Expand: {
        const at::Tensor& x = need(node, in, 0);
        const auto shape = intsOf(node, need(node, in, 1), "shape");
        for (const auto d : shape)
            if (d < 0)
                fail(node, "shape holds a negative dimension");
        return {x.expand(at::infer_size(x.sizes(), shape))};
    }
    case OpKind::Equal: return {at::eq(need(node, in, 0), need(node, in, 1))};
    case OpKind::Less: return {at::lt(need(node, in, 0), need(node, in, 1))};
    case OpKind::Greater: return {at::gt(need(node, in, 0), need(node, in, 1))};
    case OpKind::Pow: {
        const at::Tensor& base = need(node, in, 0);
        return {at::pow(base, need(node, in, 1)).to(base.scalar_type())};
    }
    case OpKind::Sqrt: return {at::sqrt(need(node, in, 0))};
    case OpKind::ReduceMean: return {runReduceMean(node, in)};
    case OpKind::Erf: return {at::erf(need(node, in, 0))};
    case OpKind::Neg: return {at::neg(need(node, in, 0))};
    case OpKind::Cos: return {at::cos(need(node, in, 0))};
    case OpKind::Sin: return {at::sin(need(node, in, 0))};
    case OpKind::Range: return {runRange(node, in)};
    case OpKind::Shape: return {runShape(node, need(node, in, 0))};
    case OpKind::RotaryEmbedding: return {runRotary(node, in)};
    case OpKind::LSTM:
    case OpKind::GRU:
    case OpKind::RNN: return runRnn(node, in, {});
    default: break;
    }
    fail(node, "not a sequence op");
}

std::vector<at::Tensor> runRnn(const Node& node, const std::vector<at::Tensor>& inputs,
                               const HiddenQuant& hiddenQuant)
{
    if (node.op == OpKind::LSTM)
        return runLstm(node, inputs, hiddenQuant);
    if (node.op == OpKind::GRU)
        return runGru(node, inputs, hiddenQuant);
    if (node.op == OpKind::RNN)
        return runSimpleRnn(node, inputs, hiddenQuant);
    fail(node, "not an LSTM, GRU or RNN");
}

} // namespace bitlens::exec
