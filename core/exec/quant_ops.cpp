#include "exec/quant_ops.h"
#include "exec/op_support.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace bitlens::exec {

using ir::Node;

namespace {

using detail::fail;
using detail::need;
using detail::optionalInputPtr;
using detail::shapeText;

/// The element type a quantized tensor holds, with its integer code range.
struct CodeType {
    ir::DType dtype = ir::DType::UInt8;
    at::ScalarType scalar = at::kByte;  ///< how the codes are held in memory
    bool isFloat8 = false;
    double qmin = 0.0;
    double qmax = 255.0;
    double floatMax = 0.0;              ///< float8: largest finite value
};

std::optional<CodeType> codeType(ir::DType dtype)
{
    switch (dtype) {
    case ir::DType::UInt8: return CodeType{dtype, at::kByte, false, 0.0, 255.0, 0.0};
    case ir::DType::Int8: return CodeType{dtype, at::kChar, false, -128.0, 127.0, 0.0};
    case ir::DType::UInt4: return CodeType{dtype, at::kByte, false, 0.0, 15.0, 0.0};
    case ir::DType::Int4: return CodeType{dtype, at::kChar, false, -8.0, 7.0, 0.0};
    case ir::DType::Int32:
        return CodeType{dtype, at::kInt, false, static_cast<double>(INT32_MIN),
                        static_cast<double>(INT32_MAX), 0.0};
    case ir::DType::Float8E4M3FN: return CodeType{dtype, at::kFloat8_e4m3fn, true, 0, 0, 448.0};
    case ir::DType::Float8E5M2: return CodeType{dtype, at::kFloat8_e5m2, true, 0, 0, 57344.0};
    default: return std::nullopt;
    }
}

/// The type of an in-memory code tensor (int4 is indistinguishable from int8 here: callers
/// that know better pass output_dtype).
std::optional<ir::DType> dtypeOfCodes(const at::Tensor& t)
{
    switch (t.scalar_type()) {
    case at::kByte: return ir::DType::UInt8;
    case at::kChar: return ir::DType::Int8;
    case at::kInt: return ir::DType::Int32;
    case at::kFloat8_e4m3fn: return ir::DType::Float8E4M3FN;
    case at::kFloat8_e5m2: return ir::DType::Float8E5M2;
    default: return std::nullopt;
    }
}

std::int64_t normalizedAxis(const Node& node, std::int64_t rank)
{
    const std::int64_t axis = node.attrs.getInt("axis", 1);
    if (rank == 0)
        return 0;
    if (axis < -rank || axis >= rank)
        fail(node, "axis " + std::to_string(axis) + " is out of range for rank " +
                       std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
}

/// `param` (a scale or zero point) broadcast against `x`: a scalar (or one element) is
/// per-tensor; a 1-D tensor of x.size(axis) is per-axis; with block_size B > 0 a tensor of x's
/// rank whose `axis` dimension is ceil(x.size(axis) / B) is blocked (each element covers B
/// consecutive elements along the axis, the last block possibly shorter).
at::Tensor broadcastParam(const Node& node, const at::Tensor& param, const at::Tensor& x,
                          const char* what)
{
    const std::int64_t rank = x.dim();
    const std::int64_t blockSize = node.attrs.getInt("block_size", 0);
    if (blockSize < 0)
        fail(node, "block_size " + std::to_string(blockSize) + " is negative");
    if (blockSize > 0) {
        const std::int64_t axis = normalizedAxis(node, rank);
        const std::int64_t length = rank == 0 ? 1 : x.size(axis);
        const std::int64_t blocks = (length + blockSize - 1) / blockSize;
        bool fits = param.dim() == rank && rank > 0;
        for (std::int64_t d = 0; fits && d < rank; ++d)
            fits = param.size(d) == (d == axis ? blocks : x.size(d));
        if (!fits)
            fail(node, std::string(what) + " has shape " + shapeText(param.sizes()) +
                           "; blocks of " + std::to_string(blockSize) + " along axis " +
                           std::to_string(axis) + " of an input " + shapeText(x.sizes()) +
                           " need " + std::to_string(blocks) + " in that dimension and the " +
                           "input's size in the others");
        return param.repeat_interleave(blockSize, axis).narrow(axis, 0, length);
    }
    if (param.numel() == 1 && param.dim() <= 1)
        return param.reshape({});
    if (param.dim() == 1 && rank > 0) {
        const std::int64_t axis = normalizedAxis(node, rank);
        if (param.size(0) == x.size(axis)) {
            std::vector<std::int64_t> shape(static_cast<std::size_t>(rank), 1);
            shape[static_cast<std::size_t>(axis)] = -1;
            return param.reshape(shape);
        }
    }
    fail(node, std::string(what) + " has shape " + shapeText(param.sizes()) +
                   ", which is neither a scalar nor one value per element of axis " +
                   std::to_string(node.attrs.getInt("axis", 1)) + " of an input " +
                   shapeText(x.sizes()));
}

void checkScale(const Node& node, const at::Tensor& scale)
{
    if (!scale.is_floating_point())
        fail(node, "the scale must be a float tensor, not " +
                       std::string(c10::toString(scale.scalar_type())));
}

void checkZeroPointShape(const Node& node, const at::Tensor* zp, const at::Tensor& scale)
{
    if (zp && zp->sizes() != scale.sizes())
        fail(node, "the zero point has shape " + shapeText(zp->sizes()) +
                       " but the scale has shape " + shapeText(scale.sizes()));
}

} // namespace

at::Tensor runQuantizeLinear(const Node& node, const std::vector<at::Tensor>& in,
                             QuantizeRounding rounding)
{
    const at::Tensor& x = need(node, in, 0);
    const at::Tensor& scale = need(node, in, 1);
    const at::Tensor* zp = optionalInputPtr(in, 2);
    checkScale(node, scale);
    checkZeroPointShape(node, zp, scale);

    // The output type: output_dtype (opset 21) when set, else the zero point's, else uint8.
    std::optional<ir::DType> outType;
    if (const std::int64_t code = node.attrs.getInt("output_dtype", 0); code != 0)
        outType = static_cast<ir::DType>(code);
    else if (zp)
        outType = dtypeOfCodes(*zp);
    else
        outType = ir::DType::UInt8;
    const auto type = outType ? codeType(*outType) : std::nullopt;
    if (!type || type->dtype == ir::DType::Int32)
        fail(node, "quantizing to " +
                       (outType ? std::string(ir::dtypeName(*outType))
                                : std::string(c10::toString(zp->scalar_type()))) +
                       " is not supported (int8, uint8, int4, uint4, float8_e4m3fn, "
                       "float8_e5m2 are)");
    if (zp && zp->scalar_type() != type->scalar)
        fail(node, "the zero point is " + std::string(c10::toString(zp->scalar_type())) +
                       " but output_dtype asks for " + std::string(ir::dtypeName(type->dtype)));

    const at::Tensor xf = x.to(at::kFloat);
    const at::Tensor s = broadcastParam(node, scale.to(at::kFloat), xf, "the scale");
    at::Tensor z = zp ? broadcastParam(node, zp->to(at::kFloat), xf, "the zero point")
                      : at::zeros({}, xf.options());
    // x / scale in float32, as onnxruntime and the ONNX reference compute it (BitLens' own
    // fake quantization multiplies by the reciprocal instead; see quant_type.h). Float8 codes
    // are x / scale in both.
    const at::Tensor scaled = rounding == QuantizeRounding::Reciprocal && !type->isFloat8
                                  ? xf * at::reciprocal(s)
                                  : xf / s;
    if (type->isFloat8) {
        at::Tensor v = scaled + z;
        // saturate = 1 (default): out-of-range values and +-Inf become +-max; NaN stays NaN.
        // saturate = 0: the plain cast (E4M3FN has no Inf: overflow gives NaN).
        if (node.attrs.getInt("saturate", 1) != 0)
            v = at::clamp(v, -type->floatMax, type->floatMax);
        return v.to(type->scalar);
    }
    // Round half to even (at::round), add the zero point, saturate. NaN has no integer code:
    // it becomes the zero point (onnxruntime leaves it undefined).
    const at::Tensor q = at::clamp(at::round(scaled) + z, type->qmin, type->qmax);
    return at::where(at::isnan(scaled), z.expand_as(q), q).to(type->scalar);
}

at::Tensor runDequantizeLinear(const Node& node, const std::vector<at::Tensor>& in)
{
    const at::Tensor& x = need(node, in, 0);
    const at::Tensor& scale = need(node, in, 1);
    const at::Tensor* zp = optionalInputPtr(in, 2);
    checkScale(node, scale);
    checkZeroPointShape(node, zp, scale);
    const auto inType = dtypeOfCodes(x);
    if (!inType)
        fail(node, "dequantizing " + std::string(c10::toString(x.scalar_type())) +
                       " is not supported (int8, uint8, int4, uint4, int32, float8 are)");
    if (zp && zp->scalar_type() != x.scalar_type())
        fail(node, "the zero point is " + std::string(c10::toString(zp->scalar_type())) +
                       " but the input is " + std::string(c10::toString(x.scalar_type())));
    const at::Tensor s = broadcastParam(node, scale.to(at::kFloat), x, "the scale");
    at::Tensor y;
    if (x.scalar_type() == at::kFloat8_e4m3fn || x.scalar_type() == at::kFloat8_e5m2) {
        y = x.to(at::kFloat) * s;  // float8 zero points are 0 by definition
    } else {
        // (x - zero_point) in integers, then one float32 multiplication: exact codes times the
        // scale, rounded once (onnxruntime: float(int32(x) - zp) * scale).
        at::Tensor diff = x.to(at::kLong);
        if (zp)
            diff = diff - broadcastParam(node, zp->to(at::kLong), x, "the zero point");
        y = diff.to(at::kFloat) * s;
    }
    const std::int64_t outCode = node.attrs.getInt("output_dtype", 0);
    if (outCode == static_cast<std::int64_t>(ir::DType::Float16))
        return y.to(at::kHalf);
    if (outCode == static_cast<std::int64_t>(ir::DType::BFloat16))
        return y.to(at::kBFloat16);
    return outCode == 0 && scale.scalar_type() != at::kFloat ? y.to(scale.scalar_type()) : y;
}

std::vector<at::Tensor> runDynamicQuantizeLinear(const Node& node,
                                                 const std::vector<at::Tensor>& in,
                                                 QuantizeRounding rounding)
{
    const at::Tensor x = need(node, in, 0).to(at::kFloat);
    // onnxruntime's rule (core/util/qmath.h), in float32 on the CPU: the range widened to
    // include 0; scale = (max - min) / 255, or 1 when the range is empty (the ONNX reference
    // uses 1 / 255 there; either way every code is the zero point 0); zero point =
    // round_half_even(clamp(0 - min / scale, 0, 255)). Example: x in [-1, 3] gives scale
    // 4 / 255 and zero point round(63.75) = 64.
    float lo = 0.0f;
    float hi = 0.0f;
    if (x.numel() > 0) {
        const auto [mn, mx] = at::aminmax(x);
        lo = std::min(mn.item<float>(), 0.0f);
        hi = std::max(mx.item<float>(), 0.0f);
    }
    if (std::isnan(lo) || std::isnan(hi))
        fail(node, "the input holds NaN, which has no quantization range");
    const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    const float initialZp = 0.0f - lo / scale;
    const float zpFloat = std::nearbyint(std::max(0.0f, std::min(255.0f, initialZp)));
    const at::Tensor scaled = rounding == QuantizeRounding::Reciprocal
                                  ? x * at::scalar_tensor(1.0f / scale, x.options())
                                  : x / at::scalar_tensor(scale, x.options());
    const at::Tensor q = at::clamp(at::round(scaled) + static_cast<double>(zpFloat), 0.0, 255.0);
    return {q.to(at::kByte), at::scalar_tensor(scale, x.options()),
            at::scalar_tensor(static_cast<std::int64_t>(zpFloat),
                              x.options().dtype(at::kByte))};
}

} // namespace bitlens::exec
