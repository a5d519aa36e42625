#pragma once
// The CNN operators beyond the zoo's own (what MobileNet-, YOLO- and U-Net-style exports use):
// clipping and the hard activations, Resize, ConvTranspose, Pad, elementwise unary and variadic
// ops, the other reductions, Instance- and GroupNormalization, LRN, Tile, DepthToSpace /
// SpaceToDepth, Mish, Round and the logical ops. Each follows its ONNX opset-13+ definition;
// older files are converted to that form on import.

#include "exec/executor.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace bitlens::exec {

/// Whether runCnnOp computes `op` (OpKind::Clip through OpKind::ReduceSumSquare).
bool isCnnOp(ir::OpKind op);
/// Computes one of the ops isCnnOp accepts; throws std::runtime_error naming the node.
std::vector<at::Tensor> runCnnOp(const ir::Node& node, const std::vector<at::Tensor>& inputs);

} // namespace bitlens::exec
