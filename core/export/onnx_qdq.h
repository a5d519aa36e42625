#pragma once
// A quantized model as an ONNX QDQ graph: every quantized layer reads its weight through a
// DequantizeLinear of stored integer codes, and its activation input through a
// QuantizeLinear -> DequantizeLinear pair (static schemes, calibrated scale and zero point) or
// DynamicQuantizeLinear -> DequantizeLinear (dynamic int8). onnxruntime fuses these patterns
// into integer kernels or runs them as written; BitLens' executor runs them as written.
//
// Layouts written (W is the layer's float weight, its 2-D view [out, in * kernel] is what
// BitLens quantizes, see quant::weightView):
//  - per-tensor / per-channel weights: codes in W's own layout, DequantizeLinear axis 0
//    (axis rank-1 for MatMul / Gemm transB = 0 weights stored [in, out]);
//  - per-group weights (w4-int4): opset-21 blocked DequantizeLinear (block_size = group) along
//    the input dimension; Conv weights are stored as their 2-D view and reshaped back;
//  - int4 / uint4 codes are ONNX INT4 / UINT4 initializers (two per byte, opset 21).

#include "ir/graph.h"
#include "jobs/progress.h"
#include "jobs/result.h"
#include "quant/engine.h"
#include "quant/scheme.h"

#include <optional>
#include <string>

namespace bitlens::exporting {

/// Why one layer configuration cannot be written as ONNX QDQ, or nullopt when it can.
std::optional<std::string> onnxQdqLimitation(const quant::LayerConfig& config);


/// The QDQ graph of `model` (what exportModel writes). Float layers stay float; the metadata
/// records the scheme ("bitlens.scheme") and the BitLens version.
Result<ir::Graph> buildQdqGraph(const quant::QuantizedModel& model,
                                Progress& progress = Progress::none(),
                                const CancelToken& cancel = CancelToken());

} // namespace bitlens::exporting
