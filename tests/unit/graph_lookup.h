#pragma once
// The node of a graph by name, for tests that look into a built or quantized graph.

#include "ir/graph.h"

#include <stdexcept>
#include <string>

namespace bitlens::test {

/// The node called `name`; throws std::logic_error (failing the test) when there is none.
inline const ir::Node& nodeNamed(const ir::Graph& graph, const std::string& name)
{
    for (const ir::Node& n : graph.nodes)
        if (n.name == name)
            return n;
    throw std::logic_error("no node '" + name + "' in graph '" + graph.name + "'");
}

} // namespace bitlens::test
