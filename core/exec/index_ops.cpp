#include "exec/index_ops.h"
#include "exec/op_support.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <string>

namespace bitlens::exec {

using ir::Node;
using ir::OpKind;

namespace {

using detail::fail;
using detail::normAxis;
using detail::need;
using detail::optionalInput;
using detail::shapeText;

/// The one integer a scalar or one-element tensor holds (TopK's K, CumSum's axis, Trilu's k).
std::int64_t scalarOf(const Node& node, const at::Tensor& t, const char* what)
{
    if (t.is_floating_point() || t.numel() != 1)
        fail(node, std::string(what) + " must be one integer, got " +
                       std::string(c10::toString(t.scalar_type())) + " " + shapeText(t.sizes()));
    return t.to(at::kCPU).to(at::kLong).reshape({-1})[0].item<std::int64_t>();
}

/// Indices as int64 with negative ones counted from the end of a dimension of `size`; fails
/// on any outside [-size, size).
at::Tensor wrapIndices(const Node& node, const at::Tensor& indices, const at::Tensor& sizes)
{
    if (indices.is_floating_point() || indices.scalar_type() == at::kBool)
        fail(node, "indices must be integers, got " +
                       std::string(c10::toString(indices.scalar_type())));
    at::Tensor idx = indices.to(at::kLong);
    const at::Tensor limit = sizes.to(idx.device());
    idx = at::where(idx < 0, idx + limit, idx);
    if (idx.numel() > 0 && (idx.lt(0).any().item<bool>() || idx.ge(limit).any().item<bool>()))
        fail(node, "an index is out of range for the data");
    return idx;
}

std::int64_t product(at::IntArrayRef sizes, std::size_t begin, std::size_t end)
{
    std::int64_t n = 1;
    for (std::size_t i = begin; i < end; ++i)
        n *= sizes[i];
    return n;
}

at::Tensor runArgExtreme(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const std::int64_t axis = normAxis(node, node.attrs.getInt("axis", 0), x.dim());
    const bool keep = node.attrs.getInt("keepdims", 1) != 0;
    const bool last = node.attrs.getInt("select_last_index", 0) != 0;
    const bool isMax = node.op == OpKind::ArgMax;
    if (x.dim() > 0 && x.size(axis) == 0)
        fail(node, "cannot take the arg" + std::string(isMax ? "max" : "min") +
                       " of an empty axis");
    // at::argmax / argmin return the first extreme; the last one is the first of the reversed
    // axis: [1, 3, 3] -> reversed index 0 -> 2.
    const at::Tensor src = last ? x.flip({axis}) : x;
    at::Tensor idx = isMax ? at::argmax(src, axis, keep) : at::argmin(src, axis, keep);
    if (last)
        idx = (x.dim() > 0 ? x.size(axis) : 1) - 1 - idx;
    return idx;
}

std::vector<at::Tensor> runTopK(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const std::int64_t k = scalarOf(node, need(node, in, 1), "K");
    const std::int64_t axis = normAxis(node, node.attrs.getInt("axis", -1), x.dim());
    const bool largest = node.attrs.getInt("largest", 1) != 0;
    const std::int64_t size = x.dim() > 0 ? x.size(axis) : 1;
    if (k < 0 || k > size)
        fail(node, "K = " + std::to_string(k) + " is outside [0, " + std::to_string(size) +
                       "] for input " + shapeText(x.sizes()));
    // A stable sort keeps equal values in index order, which is ONNX's tie rule (the lower
    // index first). Unsorted output (sorted = 0) may come in any order; sorted is one of them.
    const auto [values, indices] = at::sort(x, /*stable=*/true, axis, /*descending=*/largest);
    return {values.narrow(axis, 0, k).contiguous(), indices.narrow(axis, 0, k).contiguous()};
}

at::Tensor runCumSum(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const std::int64_t axis = normAxis(node, scalarOf(node, need(node, in, 1), "axis"), x.dim());
    const bool exclusive = node.attrs.getInt("exclusive", 0) != 0;
    const bool reverse = node.attrs.getInt("reverse", 0) != 0;
    at::Tensor y = reverse ? x.flip({axis}) : x;
    y = at::cumsum(y, axis, x.scalar_type());
    if (exclusive && y.size(axis) > 0) {
        // Each sum without its own element: [1, 2, 3] -> [0, 1, 3] (shifted, not subtracted,
        // so float sums are the ones onnxruntime adds).
        std::vector<std::int64_t> one(x.sizes().begin(), x.sizes().end());
        one[static_cast<std::size_t>(axis)] = 1;
        y = at::cat({at::zeros(one, y.options()), y.narrow(axis, 0, y.size(axis) - 1)}, axis);
    }
    return reverse ? y.flip({axis}) : y;
}

at::Tensor runGatherElements(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& data = need(node, in, 0);
    const at::Tensor& indices = need(node, in, 1);
    if (data.dim() != indices.dim() || data.dim() == 0)
        fail(node, "data " + shapeText(data.sizes()) + " and indices " +
                       shapeText(indices.sizes()) + " must have the same rank, at least 1");
    const std::int64_t axis = normAxis(node, node.attrs.getInt("axis", 0), data.dim());
    const at::Tensor size =
        at::scalar_tensor(data.size(axis), at::TensorOptions().dtype(at::kLong));
    return at::gather(data, axis, wrapIndices(node, indices, size));
}

/// The rows of data, flattened over its first `b + k` dimensions, that the last axis of
/// `indices` [B..., I..., k] addresses: row-major linear indices, shape [prod(B...) * M].
at::Tensor linearRows(const Node& node, const at::Tensor& data, const at::Tensor& indices,
                      std::int64_t b)
{
    const std::int64_t k = indices.size(-1);
    const auto dataSizes = data.sizes();
    const auto bu = static_cast<std::size_t>(b);
    const auto ku = static_cast<std::size_t>(k);
    std::vector<std::int64_t> limits(dataSizes.begin() + b, dataSizes.begin() + b + k);
    const at::Tensor idx = wrapIndices(
        node, indices, at::tensor(limits, at::TensorOptions().dtype(at::kLong)));
    const std::int64_t batch = product(dataSizes, 0, bu);
    const std::int64_t rows = product(dataSizes, bu, bu + ku);
    // Strides of the k addressed dimensions: [4, 5] -> [5, 1].
    std::vector<std::int64_t> strides(ku, 1);
    for (std::size_t j = ku; j-- > 1;)
        strides[j - 1] = strides[j] * limits[j];
    const at::Tensor lin =
        (idx.reshape({batch, -1, k}) *
         at::tensor(strides, at::TensorOptions().dtype(at::kLong)).to(idx.device()))
            .sum(-1);
    const at::Tensor base =
        at::arange(batch, at::TensorOptions().dtype(at::kLong).device(idx.device()))
            .reshape({batch, 1}) *
        rows;
    return (lin + base).reshape({-1});
}

at::Tensor runGatherND(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& data = need(node, in, 0);
    const at::Tensor& indices = need(node, in, 1);
    const std::int64_t b = node.attrs.getInt("batch_dims", 0);
    if (indices.dim() < 1 || b < 0 || b >= std::min(data.dim(), indices.dim()))
        fail(node, "batch_dims = " + std::to_string(b) + " does not fit data " +
                       shapeText(data.sizes()) + " and indices " + shapeText(indices.sizes()));
    const std::int64_t k = indices.size(-1);
    if (k < 1 || k > data.dim() - b)
        fail(node, "indices " + shapeText(indices.sizes()) + " address " + std::to_string(k) +
                       " dimensions of data " + shapeText(data.sizes()) + " after " +
                       std::to_string(b) + " batch dimensions");
    for (std::int64_t d = 0; d < b; ++d)
        if (data.size(d) != indices.size(d))
            fail(node, "batch dimension " + std::to_string(d) + " differs: data " +
                           shapeText(data.sizes()) + ", indices " + shapeText(indices.sizes()));
    std::vector<std::int64_t> flat{-1};
    std::vector<std::int64_t> outShape(indices.sizes().begin(), indices.sizes().end() - 1);
    for (std::int64_t d = b + k; d < data.dim(); ++d) {
        flat.push_back(data.size(d));
        outShape.push_back(data.size(d));
    }
    const at::Tensor rows = data.reshape(flat);
    return rows.index_select(0, linearRows(node, data, indices, b)).reshape(outShape);
}

at::Tensor runScatterND(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& data = need(node, in, 0);
    const at::Tensor& indices = need(node, in, 1);
    const at::Tensor& updates = need(node, in, 2);
    if (indices.dim() < 1 || indices.size(-1) < 1 || indices.size(-1) > data.dim())
        fail(node, "indices " + shapeText(indices.sizes()) + " do not address data " +
                       shapeText(data.sizes()));
    const std::int64_t k = indices.size(-1);
    std::vector<std::int64_t> want(indices.sizes().begin(), indices.sizes().end() - 1);
    std::vector<std::int64_t> rowShape{-1};
    for (std::int64_t d = k; d < data.dim(); ++d) {
        want.push_back(data.size(d));
        rowShape.push_back(data.size(d));
    }
    if (updates.sizes().vec() != want)
        fail(node, "updates has shape " + shapeText(updates.sizes()) + ", expected " +
                       shapeText(want));
    at::Tensor out = data.clone(at::MemoryFormat::Contiguous);
    at::Tensor rows = out.view(rowShape);
    const at::Tensor lin = linearRows(node, data, indices, 0);
    const at::Tensor src = updates.reshape(rowShape).to(data.scalar_type());
    const std::string reduction = node.attrs.getString("reduction", "none");
    if (reduction == "none")
        rows.index_copy_(0, lin, src);
    else if (reduction == "add")
        rows.index_add_(0, lin, src);
    else if (reduction == "mul")
        rows.index_reduce_(0, lin, src, "prod", /*include_self=*/true);
    else if (reduction == "max")
        rows.index_reduce_(0, lin, src, "amax", /*include_self=*/true);
    else if (reduction == "min")
        rows.index_reduce_(0, lin, src, "amin", /*include_self=*/true);
    else
        fail(node, "reduction '" + reduction + "' is not none, add, mul, max or min");
    return out;
}

at::Tensor runEinsum(const Node& node, const std::vector<at::Tensor>& in)
{
    std::string equation = node.attrs.getString("equation", "");
    equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
    if (equation.empty())
        fail(node, "has no equation");
    std::vector<at::Tensor> operands;
    for (std::size_t i = 0; i < in.size(); ++i)
        operands.push_back(need(node, in, i));
    const std::string lhs = equation.substr(0, equation.find("->"));
    const auto terms = std::count(lhs.begin(), lhs.end(), ',') + 1;
    if (terms != static_cast<std::ptrdiff_t>(operands.size()))
        fail(node, "equation '" + equation + "' has " + std::to_string(terms) + " operands, the " +
                       "node " + std::to_string(operands.size()) + " inputs");
    return at::einsum(equation, operands);
}

} // namespace

bool isIndexOp(OpKind op)
{
    return static_cast<int>(op) >= static_cast<int>(OpKind::ArgMax) &&
           static_cast<int>(op) <= static_cast<int>(OpKind::Einsum);
}

std::vector<at::Tensor> runIndexOp(const Node& node, const std::vector<at::Tensor>& in)
{
    switch (node.op) {
    case OpKind::ArgMax:
    case OpKind::ArgMin: return {runArgExtreme(node, in)};
    case OpKind::TopK: return runTopK(node, in);
    case OpKind::CumSum: return {runCumSum(node, in)};
    case OpKind::Trilu: {
        const at::Tensor& x = need(node, in, 0);
        const at::Tensor kt = optionalInput(in, 1);
        const std::int64_t k = kt.defined() ? scalarOf(node, kt, "k") : 0;
        if (x.dim() < 2)
            fail(node, "input " + shapeText(x.sizes()) + " has rank below 2");
        return {node.attrs.getInt("upper", 1) != 0 ? at::triu(x, k) : at::tril(x, k)};
    }
    case OpKind::GatherElements: return {runGatherElements(node, in)};
    case OpKind::GatherND: return {runGatherND(node, in)};
    case OpKind::ScatterND: return {runScatterND(node, in)};
    case OpKind::NonZero: {
        // at::nonzero lists [count, rank] row-major; ONNX wants its transpose.
        const at::Tensor& x = need(node, in, 0);
        return {at::nonzero(x).t().contiguous()};
    }
    case OpKind::Einsum: return {runEinsum(node, in)};
    default: break;
    }
    fail(node, "not an index op");
}

} // namespace bitlens::exec
