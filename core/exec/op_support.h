#pragma once
// Small helpers every op file of the executor uses (executor.cpp, cnn_ops.cpp, index_ops.cpp,
// quant_ops.cpp, sequence_ops.cpp): one wording for the errors a node raises and for shapes in
// messages, optional inputs and axes read one way (issue #40: they were defined four times).

#include "ir/graph.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace bitlens::exec::detail {

/// "[2, 3, 28, 28]".
inline std::string shapeText(at::IntArrayRef sizes)
{
    std::ostringstream out;
    out << '[';
    for (std::size_t i = 0; i < sizes.size(); ++i)
        out << (i ? ", " : "") << sizes[i];
    out << ']';
    return out.str();
}

/// Throws "node 'conv1' (Conv): <why>", which the executor turns into its error.
[[noreturn]] inline void fail(const ir::Node& node, const std::string& why)
{
    throw std::runtime_error("node '" + node.name + "' (" +
                             std::string(ir::opKindName(node.op)) + "): " + why);
}

/// Input i of `node`, or fail() naming it when it is absent.
inline const at::Tensor& need(const ir::Node& node, const std::vector<at::Tensor>& in,
                              std::size_t i)
{
    if (i >= in.size() || !in[i].defined())
        fail(node, "input " + std::to_string(i) + " is missing");
    return in[i];
}

/// Input i of `node` when it is given: an undefined tensor when it is absent (past the end, or
/// an empty name, which the executor passes as an undefined tensor).
inline at::Tensor optionalInput(const std::vector<at::Tensor>& in, std::size_t i)
{
    return i < in.size() && in[i].defined() ? in[i] : at::Tensor();
}

/// optionalInput, with a tensor of no elements also taken as absent: Resize's scales / sizes
/// and Clip's bounds, which exporters give as an empty tensor to leave one out.
inline at::Tensor optionalNonEmptyInput(const std::vector<at::Tensor>& in, std::size_t i)
{
    const at::Tensor t = optionalInput(in, i);
    return t.defined() && t.numel() > 0 ? t : at::Tensor();
}

/// Input i when given, else nullptr (for inputs read in place, a zero point).
inline const at::Tensor* optionalInputPtr(const std::vector<at::Tensor>& in, std::size_t i)
{
    return i < in.size() && in[i].defined() ? &in[i] : nullptr;
}

/// An ONNX axis of a rank-`rank` value made non-negative; fail() naming the node when it is out
/// of range (a scalar, rank 0, takes axis 0).
inline std::int64_t normAxis(const ir::Node& node, std::int64_t axis, std::int64_t rank)
{
    if (axis < -rank || axis >= std::max<std::int64_t>(rank, 1))
        fail(node, "axis " + std::to_string(axis) + " is out of range for rank " +
                       std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
}

} // namespace bitlens::exec::detail
