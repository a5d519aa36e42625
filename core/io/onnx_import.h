#pragma once
// Import-time conversion of ONNX nodes to the one form the executor runs: the opset-13
// definitions (later ones where a file is newer). Files of opsets 7-12 are rewritten node by
// node: attributes that later became inputs (Clip min/max, Pad pads/value, Slice starts/ends/
// axes, Split split, Squeeze/Unsqueeze axes, ReduceSum axes, Upsample scales) become int64 or
// float initializers, Upsample and opset-10 Resize become Resize with their coordinate rules,
// Softmax/LogSoftmax before 13 (which flatten to 2-D at `axis`) become Flatten + Softmax +
// Reshape, and BatchNormalization's old spatial = 0 form becomes elementwise ops.

#include "ir/graph.h"
#include "jobs/result.h"

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace bitlens::io::onnx_import {

/// The oldest default-domain opset BitLens reads.
inline constexpr std::int64_t kOldestOpset = 7;
/// The newest: the newest the pinned onnx package (1.23) defines and onnxruntime (1.32) runs.
/// A file claiming a later opset may use op definitions BitLens does not know; it is refused.
inline constexpr std::int64_t kNewestOpset = 28;
/// The opset whose definitions the internal form follows (files at least this new keep theirs).
inline constexpr std::int64_t kInternalOpset = 13;

/// Value names in use in one graph, so values the import adds do not collide.
class ValueNames {
public:
    /// Marks `name` as taken.
    void add(const std::string& name) { m_names.insert(name); }
    /// `base`, or `base_<n>` for the first n that is free; the name returned is taken.
    std::string fresh(const std::string& base);

private:
    std::set<std::string> m_names;
};

/// Appends `node`, read from a file whose default-domain opset is `opset`, to `graph` in the
/// internal form: as it is, rewritten, or as several nodes plus initializers. `opType` is the
/// file's spelling (Upsample arrives as OpKind::Resize). Errors name `path`, the node and its
/// opset.
Result<void> appendImported(ir::Node node, std::string_view opType, std::int64_t opset,
                            ir::Graph& graph, ValueNames& names, const std::string& path);

} // namespace bitlens::io::onnx_import
