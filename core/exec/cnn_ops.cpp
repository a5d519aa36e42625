#include "exec/cnn_ops.h"
#include "exec/op_support.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace bitlens::exec {

using ir::Node;
using ir::OpKind;

namespace {

using detail::fail;
using detail::normAxis;
using detail::need;
using detail::optionalNonEmptyInput;
using detail::shapeText;

/// An optional input; omitted (empty name) and zero-element tensors both count as absent,
/// because opset 11 Resize passes an empty `scales` when it gives `sizes`.
std::vector<std::int64_t> intsOf(const Node& node, const at::Tensor& t, const char* what)
{
    if (t.is_floating_point() || t.dim() > 1)
        fail(node, std::string(what) + " must be a 1-D integer tensor, got " +
                       std::string(c10::toString(t.scalar_type())) + " " + shapeText(t.sizes()));
    const at::Tensor c = t.to(at::kCPU).to(at::kLong).contiguous().reshape({-1});
    return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

std::vector<float> floatsOf(const at::Tensor& t)
{
    const at::Tensor c = t.to(at::kCPU).to(at::kFloat).contiguous().reshape({-1});
    return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

/// Axes from input `index` or the "axes" attribute, normalized; all axes when neither is set.
std::vector<std::int64_t> reduceAxes(const Node& node, const std::vector<at::Tensor>& in,
                                     std::size_t index, std::int64_t rank, bool& noop)
{
    std::vector<std::int64_t> axes;
    const at::Tensor t = index < in.size() ? in[index] : at::Tensor();
    if (t.defined())
        axes = intsOf(node, t, "axes");
    else
        axes = node.attrs.getInts("axes", {});
    noop = false;
    if (axes.empty()) {
        if (node.attrs.getInt("noop_with_empty_axes", 0) != 0) {
            noop = true;
            return {};
        }
        for (std::int64_t d = 0; d < rank; ++d)
            axes.push_back(d);
    }
    for (auto& a : axes)
        a = normAxis(node, a, rank);
    return axes;
}

at::Tensor runReduce(const Node& node, const std::vector<at::Tensor>& in)
{
    at::Tensor x = need(node, in, 0);
    bool keep = node.attrs.getInt("keepdims", 1) != 0;
    bool noop = false;
    auto dims = reduceAxes(node, in, 1, x.dim(), noop);
    if (noop) {
        // Nothing is reduced, but the elementwise part still applies (onnxruntime's reading):
        // ReduceL2 of [-3] with empty axes is [3], ReduceSumSquare [9].
        if (node.op == OpKind::ReduceL1 || node.op == OpKind::ReduceL2)
            return x.abs();
        if (node.op == OpKind::ReduceSumSquare)
            return x * x;
        return x;
    }
    if (x.dim() == 0) {
        if (node.op == OpKind::ReduceSum || node.op == OpKind::ReduceMax ||
            node.op == OpKind::ReduceMin)
            return x;
        // A scalar reduces over its one element: L1 still takes |x|, SumSquare x^2.
        x = x.reshape({1});
        dims = {0};
        keep = false;
    }
    switch (node.op) {
    case OpKind::ReduceSum: return x.sum(dims, keep).to(x.scalar_type());
    case OpKind::ReduceMax: return at::amax(x, dims, keep);
    case OpKind::ReduceMin: return at::amin(x, dims, keep);
    case OpKind::ReduceProd: {
        // at::prod takes one dimension: reduce the highest first so the others keep their index.
        std::sort(dims.begin(), dims.end(), std::greater<>());
        dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
        at::Tensor y = x;
        for (const std::int64_t d : dims)
            y = y.prod(d, keep);
        return y.to(x.scalar_type());
    }
    case OpKind::ReduceL1: return x.abs().sum(dims, keep).to(x.scalar_type());
    case OpKind::ReduceL2: {
        const at::Tensor sq = (x * x).sum(dims, keep);
        // Integer inputs: ONNX keeps the type, the root truncated as onnxruntime's cast does.
        return x.is_floating_point() ? sq.sqrt() : sq.to(at::kDouble).sqrt().to(x.scalar_type());
    }
    case OpKind::ReduceSumSquare: return (x * x).sum(dims, keep).to(x.scalar_type());
    case OpKind::ReduceLogSumExp: return at::logsumexp(x, dims, keep);
    default: fail(node, "not a reduction");
    }
}

/// GroupNormalization-21: statistics over each group of C / num_groups channels, then the
/// per-channel scale and bias; stash_type 1 computes 16-bit inputs in float32.
at::Tensor runGroupNorm(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const at::Tensor& scale = need(node, in, 1);
    const at::Tensor& bias = need(node, in, 2);
    const std::int64_t groups = node.attrs.getInt("num_groups", 0);
    if (x.dim() < 2 || groups < 1 || x.size(1) % groups != 0)
        fail(node, "input " + shapeText(x.sizes()) + " does not split into num_groups = " +
                       std::to_string(groups) + " groups of channels");
    if (scale.numel() != x.size(1) || bias.numel() != x.size(1))
        fail(node, "scale " + shapeText(scale.sizes()) + " and bias " + shapeText(bias.sizes()) +
                       " must hold one value per channel of input " + shapeText(x.sizes()));
    const double eps = node.attrs.getFloat("epsilon", 1e-5);
    const bool stash = node.attrs.getInt("stash_type", 1) == 1 && x.scalar_type() != at::kDouble;
    const at::Tensor xs = stash ? x.to(at::kFloat) : x;
    const at::Tensor y = at::group_norm(xs, groups, scale.reshape({-1}).to(xs.scalar_type()),
                                        bias.reshape({-1}).to(xs.scalar_type()), eps, false);
    return y.to(x.scalar_type());
}

const at::Tensor& needBool(const Node& node, const std::vector<at::Tensor>& in, std::size_t i)
{
    const at::Tensor& t = need(node, in, i);
    if (t.scalar_type() != at::kBool)
        fail(node, "input " + std::to_string(i) + " is " +
                       std::string(c10::toString(t.scalar_type())) + ", expected bool");
    return t;
}

/// ONNX Resize, nearest and linear, computed one resized axis at a time (both are separable):
/// source coordinates follow coordinate_transformation_mode as onnxruntime evaluates them, in
/// float32, so indices and weights match it.
at::Tensor runResize(const Node& node, const std::vector<at::Tensor>& in)
{
    at::Tensor x = need(node, in, 0);
    const std::int64_t rank = x.dim();
    const std::string mode = node.attrs.getString("mode", "nearest");
    const std::string coord = node.attrs.getString("coordinate_transformation_mode", "half_pixel");
    const std::string nearestMode = node.attrs.getString("nearest_mode", "round_prefer_floor");
    if (mode != "nearest" && mode != "linear" && mode != "cubic")
        fail(node, "mode '" + mode + "' is not supported (nearest, linear and cubic are)");
    if (coord == "tf_crop_and_resize")
        fail(node, "coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
    if (node.attrs.getInt("antialias", 0) != 0)
        fail(node, "antialias is not supported");
    if (node.attrs.getString("keep_aspect_ratio_policy", "stretch") != "stretch")
        fail(node, "keep_aspect_ratio_policy other than 'stretch' is not supported");

    std::vector<std::int64_t> axes = node.attrs.getInts("axes", {});
    if (axes.empty())
        for (std::int64_t d = 0; d < rank; ++d)
            axes.push_back(d);
    for (auto& a : axes)
        a = normAxis(node, a, rank);
    std::vector<float> scales(static_cast<std::size_t>(rank), 1.0f);
    std::vector<std::int64_t> outSizes(x.sizes().begin(), x.sizes().end());
    const at::Tensor scaleTensor = optionalNonEmptyInput(in, 2);
    const at::Tensor sizeTensor = optionalNonEmptyInput(in, 3);
    if (scaleTensor.defined()) {
        const auto given = floatsOf(scaleTensor);
        if (given.size() != axes.size())
            fail(node, "scales has " + std::to_string(given.size()) + " values for " +
                           std::to_string(axes.size()) + " axes");
        for (std::size_t i = 0; i < axes.size(); ++i) {
            const auto a = static_cast<std::size_t>(axes[i]);
            if (!(given[i] > 0.0f))
                fail(node, "scales must be positive");
            scales[a] = given[i];
            outSizes[a] = static_cast<std::int64_t>(std::floor(
                static_cast<float>(x.size(static_cast<std::int64_t>(a))) * given[i]));
        }
    } else if (sizeTensor.defined()) {
        const auto given = intsOf(node, sizeTensor, "sizes");
        if (given.size() != axes.size())
            fail(node, "sizes has " + std::to_string(given.size()) + " values for " +
                           std::to_string(axes.size()) + " axes");
        for (std::size_t i = 0; i < axes.size(); ++i) {
            const auto a = static_cast<std::size_t>(axes[i]);
            outSizes[a] = given[i];
            scales[a] = static_cast<float>(given[i]) /
                        static_cast<float>(x.size(static_cast<std::int64_t>(a)));
        }
    } else {
        fail(node, "neither scales nor sizes is given");
    }

    for (std::int64_t d = 0; d < rank; ++d) {
        const std::int64_t inSize = x.size(d);
        const std::int64_t outSize = outSizes[static_cast<std::size_t>(d)];
        const float scale = scales[static_cast<std::size_t>(d)];
        if (outSize == inSize && scale == 1.0f)
            continue;
        if (outSize <= 0 || inSize <= 0)
            fail(node, "resizes dimension " + std::to_string(d) + " from " +
                           std::to_string(inSize) + " to " + std::to_string(outSize));
        // Each output element is a weighted sum of `taps` input elements along this axis:
        // 1 (nearest), 2 (linear) or 4 (cubic).
        const std::size_t taps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
        const auto outCount = static_cast<std::size_t>(outSize);
        std::vector<std::vector<std::int64_t>> index(taps, std::vector<std::int64_t>(outCount));
        std::vector<std::vector<float>> weight(taps, std::vector<float>(outCount, 1.0f));
        const float inF = static_cast<float>(inSize);
        const float outF = static_cast<float>(outSize);
        for (std::int64_t o = 0; o < outSize; ++o) {
            const float xo = static_cast<float>(o);
            float src = 0.0f;
            if (coord == "half_pixel")
                src = (xo + 0.5f) / scale - 0.5f;
            else if (coord == "pytorch_half_pixel")
                src = outSize > 1 ? (xo + 0.5f) / scale - 0.5f : 0.0f;
            else if (coord == "align_corners")
                src = outSize == 1 ? 0.0f : xo * (inF - 1.0f) / (outF - 1.0f);
            else if (coord == "asymmetric")
                src = xo / scale;
            else if (coord == "tf_half_pixel_for_nn")
                src = (xo + 0.5f) / scale;
            else if (coord == "half_pixel_symmetric") {
                const float adjustment = outF / (scale * inF);
                const float offset = inF / 2.0f * (1.0f - adjustment);
                src = offset + (xo + 0.5f) / scale - 0.5f;
            } else
                fail(node, "coordinate_transformation_mode '" + coord + "' is not supported");
            const auto k = static_cast<std::size_t>(o);
            if (mode == "nearest") {
                float r = 0.0f;
                if (nearestMode == "round_prefer_floor")
                    r = src == std::floor(src) + 0.5f ? std::floor(src) : std::round(src);
                else if (nearestMode == "round_prefer_ceil")
                    r = std::round(src);
                else if (nearestMode == "floor")
                    r = std::floor(src);
                else if (nearestMode == "ceil")
                    r = std::ceil(src);
                else
                    fail(node, "nearest_mode '" + nearestMode + "' is not supported");
                // Clamped as a float first: converting an out-of-range float is undefined.
                index[0][k] = static_cast<std::int64_t>(std::clamp(r, 0.0f, inF - 1.0f));
            } else if (mode == "linear") {
                // Clamp into the input, as onnxruntime does before weighting.
                src = std::clamp(src, 0.0f, inF - 1.0f);
                index[0][k] = std::min<std::int64_t>(static_cast<std::int64_t>(src), inSize - 1);
                index[1][k] = std::min<std::int64_t>(index[0][k] + 1, inSize - 1);
                weight[1][k] = src - static_cast<float>(index[0][k]);
                weight[0][k] = 1.0f - weight[1][k];
            } else {
                // Cubic convolution (Keys) with coefficient a over the 4 nearest inputs; taps
                // outside the input repeat the edge, or with exclude_outside get weight 0 and
                // the rest are renormalized.
                const float a = static_cast<float>(node.attrs.getFloat("cubic_coeff_a", -0.75));
                const bool exclude = node.attrs.getInt("exclude_outside", 0) != 0;
                // Beyond 2 past either edge every tap is outside; clamping there keeps the
                // float-to-integer conversion defined.
                const float base = std::floor(std::clamp(src, -3.0f, inF + 2.0f));
                const float t = std::clamp(src - base, 0.0f, 1.0f);
                const float dist[4] = {t + 1.0f, t, 1.0f - t, 2.0f - t};
                float total = 0.0f;
                for (std::size_t j = 0; j < 4; ++j) {
                    const float u = dist[j];
                    float c = u <= 1.0f ? ((a + 2.0f) * u - (a + 3.0f)) * u * u + 1.0f
                                        : ((a * u - 5.0f * a) * u + 8.0f * a) * u - 4.0f * a;
                    const auto pos =
                        static_cast<std::int64_t>(base) - 1 + static_cast<std::int64_t>(j);
                    if (exclude && (pos < 0 || pos >= inSize))
                        c = 0.0f;
                    index[j][k] = std::clamp<std::int64_t>(pos, 0, inSize - 1);
                    weight[j][k] = c;
                    total += c;
                }
                if (exclude && total != 0.0f)
                    for (std::size_t j = 0; j < 4; ++j)
                        weight[j][k] /= total;
            }
        }
        const auto longOpts = at::TensorOptions().dtype(at::kLong);
        std::vector<std::int64_t> view(static_cast<std::size_t>(rank), 1);
        view[static_cast<std::size_t>(d)] = outSize;
        at::Tensor sum;
        for (std::size_t j = 0; j < taps; ++j) {
            const at::Tensor picked =
                x.index_select(d, at::tensor(index[j], longOpts).to(x.device()));
            if (taps == 1) {
                sum = picked;
                break;
            }
            const at::Tensor w = at::tensor(weight[j], at::TensorOptions().dtype(at::kFloat))
                                     .to(x.device())
                                     .to(x.scalar_type())
                                     .reshape(view);
            sum = j == 0 ? picked * w : sum + picked * w;
        }
        x = sum;
    }
    return x;
}

/// ONNX ConvTranspose: the full transposed convolution, then output_padding (zeros at the end)
/// and pads (cropped from each side), then the bias. Cropping after the fact takes asymmetric
/// pads and any output_padding, which LibTorch's own arguments do not.
at::Tensor runConvTranspose(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const at::Tensor& w = need(node, in, 1);
    const at::Tensor bias = in.size() > 2 ? in[2] : at::Tensor();
    if (w.dim() < 3 || w.dim() > 5 || x.dim() != w.dim())
        fail(node, "input " + shapeText(x.sizes()) + " and weight " + shapeText(w.sizes()) +
                       " must both be 1-D to 3-D convolutions");
    const auto spatial = static_cast<std::size_t>(w.dim() - 2);
    const std::int64_t groups = node.attrs.getInt("group", 1);
    if (groups < 1 || x.size(1) != w.size(0))
        fail(node, "input has " + std::to_string(x.size(1)) + " channels, weight " +
                       shapeText(w.sizes()) + " expects " + std::to_string(w.size(0)));
    auto ints = [&](const char* name, std::int64_t fallback, std::size_t count) {
        auto v = node.attrs.getInts(name, std::vector<std::int64_t>(count, fallback));
        if (v.size() != count)
            fail(node, std::string(name) + " has " + std::to_string(v.size()) +
                           " values, expected " + std::to_string(count));
        return v;
    };
    const auto strides = ints("strides", 1, spatial);
    const auto dilations = ints("dilations", 1, spatial);
    const auto outputPadding = ints("output_padding", 0, spatial);
    auto pads = ints("pads", 0, 2 * spatial);
    const std::string autoPad = node.attrs.getString("auto_pad", "NOTSET");
    std::vector<std::int64_t> outputShape = node.attrs.getInts("output_shape", {});
    if (!outputShape.empty() && outputShape.size() != spatial) {
        if (outputShape.size() != spatial + 2)
            fail(node, "output_shape has " + std::to_string(outputShape.size()) + " values");
        outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
    }
    if (outputShape.empty() && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER"))
        for (std::size_t d = 0; d < spatial; ++d)
            outputShape.push_back(x.size(static_cast<std::int64_t>(d + 2)) * strides[d]);
    else if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
             autoPad != "SAME_LOWER")
        fail(node, "auto_pad '" + autoPad + "' is not supported");
    if (autoPad == "VALID")
        std::fill(pads.begin(), pads.end(), 0);

    at::Tensor y = at::convolution(x, w, std::nullopt, strides,
                                   std::vector<std::int64_t>(spatial, 0), dilations, true,
                                   std::vector<std::int64_t>(spatial, 0), groups);
    std::vector<std::int64_t> extend;  // constant_pad_nd order: last dimension first
    bool anyExtend = false;
    for (std::size_t d = spatial; d-- > 0;) {
        extend.push_back(0);
        extend.push_back(outputPadding[d]);
        anyExtend = anyExtend || outputPadding[d] != 0;
    }
    if (anyExtend)
        y = at::constant_pad_nd(y, extend, 0.0);
    for (std::size_t d = 0; d < spatial; ++d) {
        const auto dim = static_cast<std::int64_t>(d + 2);
        const std::int64_t full = y.size(dim);
        std::int64_t begin = pads[d];
        std::int64_t end = pads[d + spatial];
        if (!outputShape.empty()) {
            const std::int64_t total = full - outputShape[d];
            if (total < 0)
                fail(node, "output_shape " + std::to_string(outputShape[d]) +
                               " is larger than the full output " + std::to_string(full));
            // ONNX: SAME_UPPER puts the extra padding at the end, otherwise at the start.
            begin = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
            end = total - begin;
        }
        if (begin < 0 || end < 0 || begin + end >= full)
            fail(node, "pads crop the whole output");
        y = y.narrow(dim, begin, full - begin - end);
    }
    if (bias.defined()) {
        std::vector<std::int64_t> view(static_cast<std::size_t>(y.dim()), 1);
        view[1] = bias.numel();
        y = y + bias.reshape(view);
    }
    return y.contiguous();
}

/// Source index for output position `i` (may lie outside [0, n)) of a reflect / edge / wrap pad.
std::int64_t padSource(std::int64_t i, std::int64_t n, const std::string& mode)
{
    if (mode == "edge")
        return std::clamp<std::int64_t>(i, 0, n - 1);
    if (mode == "wrap")
        return ((i % n) + n) % n;
    if (n == 1)
        return 0;
    const std::int64_t period = 2 * (n - 1);
    std::int64_t j = ((i % period) + period) % period;
    return j >= n ? period - j : j;
}

at::Tensor runPad(const Node& node, const std::vector<at::Tensor>& in)
{
    at::Tensor x = need(node, in, 0);
    const std::int64_t rank = x.dim();
    const auto pads = intsOf(node, need(node, in, 1), "pads");
    const std::string mode = node.attrs.getString("mode", "constant");
    std::vector<std::int64_t> axes;
    if (in.size() > 3 && in[3].defined())
        axes = intsOf(node, in[3], "axes");
    else
        for (std::int64_t d = 0; d < rank; ++d)
            axes.push_back(d);
    if (pads.size() != 2 * axes.size())
        fail(node, "pads has " + std::to_string(pads.size()) + " values for " +
                       std::to_string(axes.size()) + " axes of input " + shapeText(x.sizes()));
    std::vector<std::int64_t> begins(static_cast<std::size_t>(rank), 0);
    std::vector<std::int64_t> ends(static_cast<std::size_t>(rank), 0);
    for (std::size_t i = 0; i < axes.size(); ++i) {
        const auto a = static_cast<std::size_t>(normAxis(node, axes[i], rank));
        begins[a] = pads[i];
        ends[a] = pads[i + axes.size()];
    }
    if (mode == "constant") {
        double value = 0.0;
        if (in.size() > 2 && in[2].defined() && in[2].numel() > 0)
            value = in[2].to(at::kCPU).to(at::kDouble).reshape({-1})[0].item<double>();
        std::vector<std::int64_t> arg;  // last dimension first
        for (std::int64_t d = rank; d-- > 0;) {
            arg.push_back(begins[static_cast<std::size_t>(d)]);
            arg.push_back(ends[static_cast<std::size_t>(d)]);
        }
        return at::constant_pad_nd(x, arg, value);
    }
    if (mode != "reflect" && mode != "edge" && mode != "wrap")
        fail(node, "mode '" + mode + "' is not supported");
    for (std::int64_t d = 0; d < rank; ++d) {
        std::int64_t b = begins[static_cast<std::size_t>(d)];
        std::int64_t e = ends[static_cast<std::size_t>(d)];
        // Negative pads crop first.
        if (b < 0 || e < 0) {
            const std::int64_t cb = std::max<std::int64_t>(-b, 0);
            const std::int64_t ce = std::max<std::int64_t>(-e, 0);
            if (cb + ce > x.size(d))
                fail(node, "pads crop more than dimension " + std::to_string(d) + " holds");
            x = x.narrow(d, cb, x.size(d) - cb - ce);
            b = std::max<std::int64_t>(b, 0);
            e = std::max<std::int64_t>(e, 0);
        }
        if (b == 0 && e == 0)
            continue;
        const std::int64_t n = x.size(d);
        if (n == 0)
            fail(node, "cannot " + mode + "-pad an empty dimension");
        std::vector<std::int64_t> index;
        for (std::int64_t i = -b; i < n + e; ++i)
            index.push_back(padSource(i, n, mode));
        x = x.index_select(d, at::tensor(index, at::TensorOptions().dtype(at::kLong))
                                  .to(x.device()));
    }
    return x;
}

at::Tensor runDepthToSpace(const Node& node, const at::Tensor& x, bool toSpace)
{
    const std::int64_t b = node.attrs.getInt("blocksize", 0);
    if (b < 1 || x.dim() != 4)
        fail(node, "needs blocksize >= 1 and a 4-D input, got " + std::to_string(b) + " and " +
                       shapeText(x.sizes()));
    const std::int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    if (!toSpace) {
        if (h % b != 0 || w % b != 0)
            fail(node, "input " + shapeText(x.sizes()) + " is not divisible by the block");
        return x.reshape({n, c, h / b, b, w / b, b})
            .permute({0, 3, 5, 1, 2, 4})
            .reshape({n, c * b * b, h / b, w / b});
    }
    if (c % (b * b) != 0)
        fail(node, "input " + shapeText(x.sizes()) + " has channels not divisible by blocksize^2");
    if (node.attrs.getString("mode", "DCR") == "CRD")
        return x.reshape({n, c / (b * b), b, b, h, w})
            .permute({0, 1, 4, 2, 5, 3})
            .reshape({n, c / (b * b), h * b, w * b});
    return x.reshape({n, b, b, c / (b * b), h, w})
        .permute({0, 3, 4, 1, 5, 2})
        .reshape({n, c / (b * b), h * b, w * b});
}

at::Tensor runVariadic(const Node& node, const std::vector<at::Tensor>& in)
{
    if (in.empty())
        fail(node, "no inputs");
    at::Tensor y = need(node, in, 0);
    for (std::size_t i = 1; i < in.size(); ++i) {
        const at::Tensor& t = need(node, in, i);
        switch (node.op) {
        case OpKind::Min: y = at::minimum(y, t); break;
        case OpKind::Max: y = at::maximum(y, t); break;
        default: y = y + t; break;
        }
    }
    if (node.op == OpKind::Mean)
        y = y / static_cast<double>(in.size());
    // A single input still comes out as a new value, not an alias.
    return in.size() == 1 ? y.clone() : y;
}

} // namespace

bool isCnnOp(OpKind op)
{
    return static_cast<int>(op) >= static_cast<int>(OpKind::Clip) &&
           static_cast<int>(op) <= static_cast<int>(OpKind::ReduceSumSquare);
}

std::vector<at::Tensor> runCnnOp(const Node& node, const std::vector<at::Tensor>& in)
{
    switch (node.op) {
    case OpKind::Clip: {
        const at::Tensor& x = need(node, in, 0);
        const at::Tensor lo = optionalNonEmptyInput(in, 1);
        const at::Tensor hi = optionalNonEmptyInput(in, 2);
        if (!lo.defined() && !hi.defined())
            return {x.clone()};
        return {at::clamp(x, lo.defined() ? std::optional<at::Tensor>(lo.to(x.scalar_type()))
                                          : std::nullopt,
                          hi.defined() ? std::optional<at::Tensor>(hi.to(x.scalar_type()))
                                       : std::nullopt)};
    }
    case OpKind::HardSigmoid: {
        const at::Tensor& x = need(node, in, 0);
        const double alpha = node.attrs.getFloat("alpha", 0.2);
        const double beta = node.attrs.getFloat("beta", 0.5);
        return {at::clamp(x * alpha + beta, 0.0, 1.0)};
    }
    case OpKind::HardSwish: {
        // ONNX defines it as x * HardSigmoid(x; alpha = 1/6, beta = 0.5).
        const at::Tensor& x = need(node, in, 0);
        return {x * at::clamp(x * (1.0 / 6.0) + 0.5, 0.0, 1.0)};
    }
    case OpKind::LeakyRelu:
        return {at::leaky_relu(need(node, in, 0), node.attrs.getFloat("alpha", 0.01))};
    case OpKind::PRelu: {
        const at::Tensor& x = need(node, in, 0);
        const at::Tensor& slope = need(node, in, 1);
        return {at::where(x < 0, x * slope, x)};
    }
    case OpKind::Elu: return {at::elu(need(node, in, 0), node.attrs.getFloat("alpha", 1.0))};
    case OpKind::Selu:
        return {at::elu(need(node, in, 0),
                        node.attrs.getFloat("alpha", 1.67326319217681884765625),
                        node.attrs.getFloat("gamma", 1.05070102214813232421875), 1.0)};
    case OpKind::Softplus: {
        // Stable for large |x|: x + log1p(exp(-x)) above 0, log1p(exp(x)) below.
        const at::Tensor& x = need(node, in, 0);
        return {at::where(x > 0, x + at::log1p(at::exp(-x)), at::log1p(at::exp(x)))};
    }
    case OpKind::Resize: return {runResize(node, in)};
    case OpKind::ConvTranspose: return {runConvTranspose(node, in)};
    case OpKind::Pad: return {runPad(node, in)};
    case OpKind::Abs: return {at::abs(need(node, in, 0))};
    case OpKind::Exp: return {at::exp(need(node, in, 0))};
    case OpKind::Log: return {at::log(need(node, in, 0))};
    case OpKind::Reciprocal: return {at::reciprocal(need(node, in, 0))};
    case OpKind::Floor: return {at::floor(need(node, in, 0))};
    case OpKind::Ceil: return {at::ceil(need(node, in, 0))};
    case OpKind::Min:
    case OpKind::Max:
    case OpKind::Sum:
    case OpKind::Mean: return {runVariadic(node, in)};
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: return {runReduce(node, in)};
    case OpKind::InstanceNorm: {
        const at::Tensor& x = need(node, in, 0);
        const at::Tensor& scale = need(node, in, 1);
        const at::Tensor& bias = need(node, in, 2);
        if (x.dim() < 3 || x.size(1) != scale.numel() || x.size(1) != bias.numel())
            fail(node, "input " + shapeText(x.sizes()) + " does not match scale " +
                           shapeText(scale.sizes()));
        return {at::instance_norm(x, scale, bias, {}, {}, true, 0.0,
                                  node.attrs.getFloat("epsilon", 1e-5), false)};
    }
    case OpKind::Tile: {
        const at::Tensor& x = need(node, in, 0);
        const auto repeats = intsOf(node, need(node, in, 1), "repeats");
        if (static_cast<std::int64_t>(repeats.size()) != x.dim())
            fail(node, "repeats has " + std::to_string(repeats.size()) + " values for rank " +
                           std::to_string(x.dim()));
        return {x.repeat(repeats)};
    }
    case OpKind::DepthToSpace: return {runDepthToSpace(node, need(node, in, 0), true)};
    case OpKind::SpaceToDepth: return {runDepthToSpace(node, need(node, in, 0), false)};
    case OpKind::GlobalMaxPool: {
        const at::Tensor& x = need(node, in, 0);
        if (x.dim() < 3)
            fail(node, "input has shape " + shapeText(x.sizes()) + ", expected [N, C, ...]");
        std::vector<std::int64_t> dims;
        for (std::int64_t d = 2; d < x.dim(); ++d)
            dims.push_back(d);
        return {at::amax(x, dims, /*keepdim=*/true)};
    }
    case OpKind::LogSoftmax: {
        const at::Tensor& x = need(node, in, 0);
        return {at::log_softmax(x, normAxis(node, node.attrs.getInt("axis", -1), x.dim()))};
    }
    case OpKind::LRN: {
        // y = x / (bias + alpha / size * sum of x^2 over channels [c - floor((size - 1) / 2),
        // c + ceil((size - 1) / 2)])^beta, the window cut at the edges.
        const at::Tensor& x = need(node, in, 0);
        const std::int64_t size = node.attrs.getInt("size", 0);
        if (size < 1 || x.dim() < 3)
            fail(node, "needs size >= 1 and an [N, C, ...] input, got " + std::to_string(size) +
                           " and " + shapeText(x.sizes()));
        const double alpha = node.attrs.getFloat("alpha", 1e-4);
        const double beta = node.attrs.getFloat("beta", 0.75);
        const double bias = node.attrs.getFloat("bias", 1.0);
        std::vector<std::int64_t> pad(static_cast<std::size_t>(2 * (x.dim() - 1)), 0);
        // constant_pad_nd lists the last dimension first: channel padding goes last.
        pad[pad.size() - 2] = (size - 1) / 2;
        pad[pad.size() - 1] = size - 1 - (size - 1) / 2;
        const at::Tensor sums = at::constant_pad_nd(x * x, pad, 0.0).unfold(1, size, 1).sum(-1);
        return {x / at::pow(sums * (alpha / static_cast<double>(size)) + bias, beta)};
    }
    case OpKind::Mish: {
        // x * tanh(softplus(x)), softplus in the stable form of the Softplus op above.
        const at::Tensor& x = need(node, in, 0);
        return {x * at::tanh(at::where(x > 0, x + at::log1p(at::exp(-x)), at::log1p(at::exp(x))))};
    }
    case OpKind::GroupNorm: return {runGroupNorm(node, in)};
    case OpKind::Round: {
        // at::round rounds half to even, as ONNX does: 2.5 -> 2, -1.5 -> -2.
        const at::Tensor& x = need(node, in, 0);
        return {x.is_floating_point() ? at::round(x) : x.clone()};
    }
    case OpKind::Mod: {
        const at::Tensor& a = need(node, in, 0);
        const at::Tensor& b = need(node, in, 1);
        if (node.attrs.getInt("fmod", 0) != 0)
            return {at::fmod(a, b)};
        if (a.is_floating_point() || b.is_floating_point())
            fail(node, "fmod = 0 on floating-point inputs (ONNX requires fmod = 1 for them)");
        return {at::remainder(a, b)};
    }
    case OpKind::Not: return {at::logical_not(needBool(node, in, 0))};
    case OpKind::And: return {at::logical_and(needBool(node, in, 0), needBool(node, in, 1))};
    case OpKind::Or: return {at::logical_or(needBool(node, in, 0), needBool(node, in, 1))};
    case OpKind::Xor: return {at::logical_xor(needBool(node, in, 0), needBool(node, in, 1))};
    case OpKind::ReduceProd:
    case OpKind::ReduceL1:
    case OpKind::ReduceL2:
    case OpKind::ReduceLogSumExp:
    case OpKind::ReduceSumSquare: return {runReduce(node, in)};
    default: break;
    }
    fail(node, "not a CNN op");
}

} // namespace bitlens::exec
