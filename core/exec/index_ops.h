#pragma once
// The index, gather and scatter operators of detector, segmenter and transformer exports:
// ArgMax / ArgMin, TopK, CumSum, Trilu, GatherElements, GatherND, ScatterND, NonZero and
// Einsum, each under its ONNX definition (opset 11+ forms; older files are converted on
// import). Integer outputs (indices, coordinates) are int64 as ONNX defines them.

#include "ir/graph.h"

#include <vector>

namespace bitlens::exec {

/// Whether runIndexOp computes `op` (OpKind::ArgMax through OpKind::Einsum).
bool isIndexOp(ir::OpKind op);
/// Computes one of the ops isIndexOp accepts; throws std::runtime_error naming the node on bad
/// shapes, attributes or out-of-range indices.
std::vector<at::Tensor> runIndexOp(const ir::Node& node, const std::vector<at::Tensor>& inputs);

} // namespace bitlens::exec
