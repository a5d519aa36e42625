#pragma once
// The ONNX quantization operators the executor runs: QuantizeLinear, DequantizeLinear (opset
// 21: per-tensor, per-axis and blocked) and DynamicQuantizeLinear, with onnxruntime's numerics
// (division by the scale, round half to even, saturation). Int4 / UInt4 codes live one per
// int8 / uint8 element (ir::DType::Int4 / UInt4).

#include "ir/graph.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace bitlens::exec {

/// How x is divided by the scale before rounding. ONNX and onnxruntime compute x / scale;
/// torch.fake_quantize (and BitLens' simulation) x * (1 / scale). The two quotients differ by
/// an ulp at most, which changes the code only for values within an ulp of a .5 tie.
enum class QuantizeRounding {
    Divide,      ///< round(x / scale): the ONNX operator (what the executor runs)
    Reciprocal,  ///< round(x * (1 / scale)): the in-app rule, for verifying exports
};

/// QuantizeLinear(x, y_scale[, y_zero_point]); throws std::runtime_error naming the node.
at::Tensor runQuantizeLinear(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                             QuantizeRounding rounding = QuantizeRounding::Divide);
/// DequantizeLinear(x, x_scale[, x_zero_point]) -> float32 (or the scale's float type).
at::Tensor runDequantizeLinear(const ir::Node& node, const std::vector<at::Tensor>& inputs);
/// DynamicQuantizeLinear(x) -> {y uint8, y_scale float32 [], y_zero_point uint8 []}.
std::vector<at::Tensor> runDynamicQuantizeLinear(const ir::Node& node,
                                                 const std::vector<at::Tensor>& inputs,
                                                 QuantizeRounding rounding =
                                                     QuantizeRounding::Divide);

} // namespace bitlens::exec
