#pragma once
// Small helpers every op file of the executor uses (executor.cpp, cnn_ops.cpp, quant_ops.cpp,
// sequence_ops.cpp): one wording for the errors a node raises and for shapes in messages.

#include "ir/graph.h"

#include <ATen/core/Tensor.h>

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

} // namespace bitlens::exec::detail
