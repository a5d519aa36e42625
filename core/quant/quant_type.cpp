#include "quant/quant_type.h"

#include "kernels/nf4_codes.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace bitlens::quant {

namespace {

constexpr float kFloatMax = std::numeric_limits<float>::max();
/// torch.finfo(torch.float32).eps: PyTorch's observers never choose a smaller integer scale.
constexpr float kFloatEps = std::numeric_limits<float>::epsilon();
/// Smallest normal float32: the floor of code-table and FP8 scales, so that 1 / scale is finite.
constexpr float kFloatMinNormal = std::numeric_limits<float>::min();

/// bitsandbytes' NF4 table (kernels/nf4_codes.h, shared with the kernels' nf4Table()).
using kernels::kNf4Codes;

/// The decision thresholds of bitsandbytes' dQuantizeNF4 (csrc/kernels.cu), ascending:
/// threshold k separates code k from code k + 1, and `x > threshold` takes the upper code, so a
/// value exactly on a threshold takes the lower one. Example: 0.8614784181118011f (between
/// 0.7229568 and 1.0) gives code 14; the next float up gives code 15.
constexpr std::array<float, 15> kNf4Thresholds = {
    -0.8480964004993439f,  -0.6106329262256622f, -0.4599952697753906f,
    -0.33967943489551544f, -0.23460740596055984f, -0.13791173323988914f,
    -0.045525018125772476f, 0.03979014977812767f, 0.1202552504837513f,
    0.2035212516784668f,   0.2920137718319893f,  0.3893125355243683f,
    0.5016634166240692f,   0.6427869200706482f,  0.8614784181118011f,
};
constexpr std::uint8_t kNf4ZeroCode = 7;

/// FP4 E2M1 values by bit pattern: bit 3 sign, bits 2-1 exponent (bias 1), bit 0 mantissa;
/// exponent 0 is subnormal (0 and 0.5). No Inf, no NaN; max 6.
constexpr std::array<float, 16> kFp4Codes = {
    0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

/// A small float format's values by bit pattern (1 sign, `ebits`, `mbits`; bias 2^(ebits-1) - 1,
/// no Inf or NaN, as OCP MX's FP6): exponent 0 is subnormal, m / 2^mbits * 2^(1 - bias).
/// E2M3: 0, 0.125, ... 0.875, 1, 1.125, ... 7.5; E3M2: 0, 0.0625, ... 0.1875, 0.25, ... 28.
template <int Ebits, int Mbits>
constexpr std::array<float, (1 << (1 + Ebits + Mbits))> smallFloatTable()
{
    constexpr int bias = (1 << (Ebits - 1)) - 1;
    constexpr int half = 1 << (Ebits + Mbits);
    std::array<float, 2 * half> out{};
    for (int code = 0; code < half; ++code) {
        const int e = code >> Mbits;
        const int m = code & ((1 << Mbits) - 1);
        double v = e == 0 ? static_cast<double>(m) / (1 << Mbits)
                          : 1.0 + static_cast<double>(m) / (1 << Mbits);
        for (int k = 0; k < (e == 0 ? bias - 1 : bias - e); ++k)
            v /= 2.0;
        for (int k = 0; k < e - bias; ++k)
            v *= 2.0;
        out[static_cast<std::size_t>(code)] = static_cast<float>(v);
        out[static_cast<std::size_t>(code + half)] = static_cast<float>(-v);
    }
    return out;
}
constexpr auto kFp6E2M3Codes = smallFloatTable<2, 3>();
constexpr auto kFp6E3M2Codes = smallFloatTable<3, 2>();
static_assert(kFp6E2M3Codes[31] == 7.5f && kFp6E2M3Codes[1] == 0.125f && kFp6E2M3Codes[8] == 1.0f);
static_assert(kFp6E3M2Codes[31] == 28.0f && kFp6E3M2Codes[1] == 0.0625f && kFp6E3M2Codes[4] == 0.25f);
static_assert(smallFloatTable<2, 1>()[7] == 6.0f && smallFloatTable<2, 1>()[1] == 0.5f);

constexpr float kBFloat16Max = 3.38953139e38f;  // 0x7F7F

constexpr QuantTypeTraits kTraits[] = {
    {QuantType::Int8, "int8", 8, true, TypeFamily::Integer, -128, 127, {}, 128.0f, true},
    {QuantType::UInt8, "uint8", 8, false, TypeFamily::Integer, 0, 255, {}, 255.0f, true},
    {QuantType::Int4, "int4", 4, true, TypeFamily::Integer, -8, 7, {}, 8.0f, true},
    {QuantType::UInt4, "uint4", 4, false, TypeFamily::Integer, 0, 15, {}, 15.0f, true},
    {QuantType::Int2, "int2", 2, true, TypeFamily::Integer, -2, 1, {}, 2.0f, true},
    {QuantType::NF4, "nf4", 4, true, TypeFamily::CodeTable, 0, 15, kNf4Codes, 1.0f, true},
    {QuantType::FP4E2M1, "fp4_e2m1", 4, true, TypeFamily::CodeTable, 0, 15, kFp4Codes, 6.0f,
     true},
    {QuantType::FP8E4M3, "fp8_e4m3", 8, true, TypeFamily::Float, 0, 0, {}, 448.0f, true},
    {QuantType::FP8E5M2, "fp8_e5m2", 8, true, TypeFamily::Float, 0, 0, {}, 57344.0f, true},
    {QuantType::FP16, "fp16", 16, true, TypeFamily::Float, 0, 0, {}, 65504.0f, false},
    {QuantType::BF16, "bf16", 16, true, TypeFamily::Float, 0, 0, {}, kBFloat16Max, false},
    {QuantType::MXFP4, "mxfp4", 4, true, TypeFamily::CodeTable, 0, 15, kFp4Codes, 6.0f, true, 32,
     BlockScale::E8M0, 2},
    {QuantType::MXFP6E2M3, "mxfp6_e2m3", 6, true, TypeFamily::CodeTable, 0, 63, kFp6E2M3Codes,
     7.5f, true, 32, BlockScale::E8M0, 2},
    {QuantType::MXFP6E3M2, "mxfp6_e3m2", 6, true, TypeFamily::CodeTable, 0, 63, kFp6E3M2Codes,
     28.0f, true, 32, BlockScale::E8M0, 4},
    {QuantType::MXFP8E4M3, "mxfp8_e4m3", 8, true, TypeFamily::Float, 0, 0, {}, 448.0f, true, 32,
     BlockScale::E8M0, 8},
    {QuantType::MXFP8E5M2, "mxfp8_e5m2", 8, true, TypeFamily::Float, 0, 0, {}, 57344.0f, true,
     32, BlockScale::E8M0, 15},
    // Integer codes k in [-127, 127] standing for k / 64: maxValue is the element's 127 / 64.
    {QuantType::MXINT8, "mxint8", 8, true, TypeFamily::Integer, -127, 127, {}, 1.984375f, true,
     32, BlockScale::E8M0, 0},
    {QuantType::NVFP4, "nvfp4", 4, true, TypeFamily::CodeTable, 0, 15, kFp4Codes, 6.0f, true, 16,
     BlockScale::E4M3, 2},
};

constexpr bool tableInEnumOrder()
{
    for (std::size_t i = 0; i < std::size(kTraits); ++i) {
        if (static_cast<std::size_t>(kTraits[i].type) != i)
            return false;
    }
    return true;
}
static_assert(tableInEnumOrder(), "kTraits rows must follow the QuantType enum order");
static_assert(std::size(kTraits) == static_cast<std::size_t>(QuantType::NVFP4) + 1,
              "every QuantType needs a row in kTraits");

std::int64_t normalizeAxis(std::int64_t axis, std::int64_t dims, const char* what)
{
    TORCH_CHECK(dims > 0, what, " needs a tensor with at least one dimension");
    const std::int64_t normalized = axis < 0 ? axis + dims : axis;
    TORCH_CHECK(normalized >= 0 && normalized < dims, what, " axis ", axis,
                " is out of range for a tensor with ", dims, " dimensions");
    return normalized;
}

std::int64_t productExcept(at::IntArrayRef sizes, std::int64_t skip)
{
    std::int64_t n = 1;
    for (std::int64_t d = 0; d < static_cast<std::int64_t>(sizes.size()); ++d) {
        if (d != skip)
            n *= sizes[d];
    }
    return n;
}

/// The shape of the scale for a tensor of `sizes` (see QParams).
std::vector<std::int64_t> scaleShape(at::IntArrayRef sizes, const Granularity& g)
{
    const auto dims = static_cast<std::int64_t>(sizes.size());
    switch (g.kind) {
    case Granularity::Kind::PerTensor:
        return {};
    case Granularity::Kind::PerChannel:
        return {sizes[normalizeAxis(g.axis, dims, "per-channel")]};
    case Granularity::Kind::PerGroup: {
        TORCH_CHECK(g.groupSize > 0, "per-group quantization needs a group size > 0, not ",
                    g.groupSize);
        const std::int64_t axis = normalizeAxis(g.axis, dims, "per-group");
        const std::int64_t blocks = (sizes[axis] + g.groupSize - 1) / g.groupSize;
        return {productExcept(sizes, axis), blocks};
    }
    case Granularity::Kind::PerToken:
        return {dims == 0 ? 1 : productExcept(sizes, dims - 1)};
    }
    return {};
}

/// `x` regrouped so that the last dimension holds the elements of one block and the leading
/// dimensions are the scale's shape: [N] per-tensor (scale []), [C, rest] per-channel,
/// [rows, blocks, groupSize] per-group (a short last group padded with `pad`), [tokens,
/// features] per-token. An elementwise op with scale.unsqueeze(-1) then quantizes every block.
at::Tensor toBlocks(const at::Tensor& x, const Granularity& g, double pad = 0.0)
{
    const auto sizes = x.sizes();
    const auto dims = x.dim();
    switch (g.kind) {
    case Granularity::Kind::PerTensor:
        return x.reshape({x.numel()});
    case Granularity::Kind::PerChannel: {
        const std::int64_t axis = normalizeAxis(g.axis, dims, "per-channel");
        return x.movedim(axis, 0).reshape({sizes[axis], productExcept(sizes, axis)});
    }
    case Granularity::Kind::PerGroup: {
        const std::int64_t axis = normalizeAxis(g.axis, dims, "per-group");
        TORCH_CHECK(g.groupSize > 0, "per-group quantization needs a group size > 0, not ",
                    g.groupSize);
        const std::int64_t length = sizes[axis];
        const std::int64_t rows = productExcept(sizes, axis);
        const std::int64_t blocks = (length + g.groupSize - 1) / g.groupSize;
        at::Tensor rowsView = x.movedim(axis, -1).reshape({rows, length});
        if (blocks * g.groupSize != length)
            rowsView = at::constant_pad_nd(rowsView, {0, blocks * g.groupSize - length}, pad);
        return rowsView.reshape({rows, blocks, g.groupSize});
    }
    case Granularity::Kind::PerToken: {
        const std::int64_t features = dims == 0 ? 1 : sizes[dims - 1];
        const std::int64_t tokens = dims == 0 ? 1 : productExcept(sizes, dims - 1);
        return x.reshape({tokens, features});
    }
    }
    return x;
}

/// Inverse of toBlocks for a tensor of `sizes` (padding dropped), contiguous.
at::Tensor fromBlocks(const at::Tensor& blocks, at::IntArrayRef sizes, const Granularity& g)
{
    const auto dims = static_cast<std::int64_t>(sizes.size());
    switch (g.kind) {
    case Granularity::Kind::PerTensor:
    case Granularity::Kind::PerToken:
        return blocks.reshape(sizes).contiguous();
    case Granularity::Kind::PerChannel: {
        const std::int64_t axis = normalizeAxis(g.axis, dims, "per-channel");
        std::vector<std::int64_t> moved{sizes[axis]};
        for (std::int64_t d = 0; d < dims; ++d) {
            if (d != axis)
                moved.push_back(sizes[d]);
        }
        return blocks.reshape(moved).movedim(0, axis).contiguous();
    }
    case Granularity::Kind::PerGroup: {
        const std::int64_t axis = normalizeAxis(g.axis, dims, "per-group");
        std::vector<std::int64_t> moved;
        for (std::int64_t d = 0; d < dims; ++d) {
            if (d != axis)
                moved.push_back(sizes[d]);
        }
        moved.push_back(sizes[axis]);
        const std::int64_t rows = blocks.size(0);
        return blocks.reshape({rows, blocks.size(1) * blocks.size(2)})
            .narrow(1, 0, sizes[axis])
            .reshape(moved)
            .movedim(-1, axis)
            .contiguous();
    }
    }
    return blocks;
}

/// Scale and zero point of `qparams` checked against `x` and broadcastable over toBlocks(x):
/// shapes [scaleShape..., 1], float32 scale, float32 zero point, on x's device.
struct BlockParams {
    at::Tensor scale;
    at::Tensor zeroPoint;
};

BlockParams blockParams(const at::Tensor& x, const QParams& qparams)
{
    const auto expected = scaleShape(x.sizes(), qparams.granularity);
    const QuantTypeTraits& t = traits(qparams.type);
    BlockParams out;
    if (!t.needsScale) {
        out.scale = at::ones(expected, x.options().dtype(at::kFloat)).unsqueeze(-1);
        out.zeroPoint = at::zeros_like(out.scale);
        return out;
    }
    TORCH_CHECK(qparams.scale.defined(), "quantizing to ", t.name, " needs a scale");
    TORCH_CHECK(qparams.scale.sizes() == at::IntArrayRef(expected), "the ", t.name,
                " scale has shape ", qparams.scale.sizes(), " but ",
                qparams.granularity.describe(), " of a tensor of shape ", x.sizes(),
                " needs ", at::IntArrayRef(expected));
    out.scale = qparams.scale.detach().to(x.device(), at::kFloat).unsqueeze(-1);
    if (qparams.zeroPoint.defined()) {
        TORCH_CHECK(qparams.zeroPoint.sizes() == qparams.scale.sizes(), "the zero point has shape ",
                    qparams.zeroPoint.sizes(), " but the scale has shape ",
                    qparams.scale.sizes());
        out.zeroPoint = qparams.zeroPoint.detach().to(x.device(), at::kFloat).unsqueeze(-1);
    } else {
        out.zeroPoint = at::zeros_like(out.scale);
    }
    return out;
}

at::ScalarType codeType(const QuantTypeTraits& t)
{
    switch (t.type) {
    case QuantType::Int8:
    case QuantType::Int4:
    case QuantType::Int2:
    case QuantType::MXINT8:
        return at::kChar;
    case QuantType::FP8E4M3:
    case QuantType::MXFP8E4M3:
        return at::kFloat8_e4m3fn;
    case QuantType::FP8E5M2:
    case QuantType::MXFP8E5M2:
        return at::kFloat8_e5m2;
    case QuantType::FP16:
        return at::kHalf;
    case QuantType::BF16:
        return at::kBFloat16;
    default:
        return at::kByte;
    }
}

at::Tensor floatTable(std::span<const float> values, const at::Device& device)
{
    return at::tensor(at::ArrayRef<float>(values.data(), values.size()), at::kFloat).to(device);
}

/// Integer codes as float (exact), per block. PyTorch's fake_quantize rule: multiply by the
/// float32 reciprocal, round half to even, then add the zero point and clamp. Example, scale
/// 0.5 (reciprocal 2), zero point 1: x = 0.25 -> 0.5 -> 0 -> code 1; x = 0.75 -> 1.5 -> 2 -> 3.
/// With scale 0.1f the reciprocal matters: 1.55f / 0.1f = 15.499999 would round to 15, but
/// 1.55f * (1 / 0.1f) = 15.5 exactly, which rounds half to even to 16, as PyTorch gives.
at::Tensor integerCodes(const at::Tensor& v, const BlockParams& p, const QuantTypeTraits& t)
{
    const at::Tensor rounded = at::round(v);
    const at::Tensor q = at::clamp(rounded + p.zeroPoint, static_cast<double>(t.qmin),
                                   static_cast<double>(t.qmax));
    // NaN has no integer code: it becomes the code of 0, the zero point.
    return at::where(at::isnan(v), p.zeroPoint.expand_as(q), q);
}

/// NF4 codes per block: bitsandbytes' rule (multiply by the reciprocal of the absmax, then its
/// decision thresholds). bucketize counts the thresholds strictly below v, which is exactly
/// "v > threshold takes the upper code".
at::Tensor nf4Codes(const at::Tensor& scaled)
{
    const at::Tensor v = scaled.contiguous();
    const at::Tensor thresholds = floatTable(kNf4Thresholds, v.device());
    const at::Tensor codes = at::bucketize(v, thresholds, /*out_int32=*/true).to(at::kByte);
    return at::where(at::isnan(v), at::full_like(codes, kNf4ZeroCode), codes);
}

/// FP4 E2M1 codes per block: round to nearest, ties to the even mantissa bit (OCP MX), saturate
/// at 6, keep the sign (so -0.1 gives -0, 0b1000). The magnitude index counts the midpoints
/// below |v|; a midpoint whose lower neighbour has an odd mantissa rounds up (>=), otherwise
/// down (>). Examples: 1.25 (between 1 = 0b010 and 1.5 = 0b011) -> 1; 1.75 -> 2; 5 -> 4;
/// 0.25 -> 0; 0.75 -> 1.
at::Tensor fp4Codes(const at::Tensor& v)
{
    const at::Tensor m = v.abs();
    at::Tensor index = at::zeros(m.sizes(), m.options().dtype(at::kByte));
    for (double mid : {0.25, 1.25, 2.5, 5.0})
        index += at::gt(m, mid).to(at::kByte);
    for (double mid : {0.75, 1.75, 3.5})
        index += at::ge(m, mid).to(at::kByte);
    const at::Tensor codes = at::bitwise_or(index, at::signbit(v).to(at::kByte) * 8);
    return at::where(at::isnan(v), at::zeros_like(codes), codes);
}

/// Codes of a small float format from its value table (by bit pattern, the sign the top bit):
/// round to nearest, ties to the even bit pattern (the even mantissa), saturating at the
/// largest magnitude, the sign kept (-0 too), as torchao's _f32_to_floatx_unpacked. The
/// magnitude index counts the midpoints below |v|: strictly below where the lower neighbour
/// is even (a tie stays), at or below where it is odd (a tie goes up to the even one). E2M3:
/// 1.0625 (between 1 = 8 and 1.125 = 9) -> 8, 1.1875 -> 10. NaN gives code 0.
at::Tensor smallFloatCodes(const at::Tensor& v, std::span<const float> table)
{
    const std::size_t half = table.size() / 2;
    const at::Tensor m = v.abs();
    at::Tensor index = at::zeros(m.sizes(), m.options().dtype(at::kByte));
    for (std::size_t k = 0; k + 1 < half; ++k) {
        const double mid = (static_cast<double>(table[k]) + table[k + 1]) / 2.0;
        index += (k % 2 == 0 ? at::gt(m, mid) : at::ge(m, mid)).to(at::kByte);
    }
    const at::Tensor codes = at::bitwise_or(
        index, at::signbit(v).to(at::kByte) * static_cast<std::int64_t>(half));
    return at::where(at::isnan(v), at::zeros_like(codes), codes);
}

/// Scaled values saturated to the format's range, still float32: the FP8 cast input.
at::Tensor fp8Saturated(const at::Tensor& v, const QuantTypeTraits& t)
{
    const double maxValue = t.maxValue;
    return at::clamp(v, -maxValue, maxValue);
}

/// Float values of codes, before the scale: integer codes as float, code-table lookups,
/// float casts back to float32.
at::Tensor codeValues(const at::Tensor& codes, const QuantTypeTraits& t)
{
    if (t.family == TypeFamily::CodeTable) {
        const at::Tensor table = floatTable(t.codes, codes.device());
        return table.index_select(0, codes.reshape({-1}).to(at::kLong)).reshape(codes.sizes());
    }
    return codes.to(at::kFloat);
}

/// True where x lies inside the clip range (the straight-through estimator passes gradients
/// there). Non-integer types: |x / scale| <= maxValue. NaN is outside.
at::Tensor insideClipRange(const at::Tensor& xb, const BlockParams& p, const QuantTypeTraits& t)
{
    const double limit = t.family == TypeFamily::Integer ? static_cast<double>(t.qmax)
                                                         : static_cast<double>(t.maxValue);
    return at::le((xb / p.scale).abs(), limit);
}

} // namespace

/// 2^(e - 127) for biased E8M0 exponents e (uint8 or int32), float32 exactly (e = 0 is the
/// subnormal 2^-127, e = 255 NaN), as torchao's get_fp_scale.
at::Tensor e8m0Value(const at::Tensor& e)
{
    const at::Tensor ei = e.to(at::kInt);
    const at::Tensor normal = at::bitwise_left_shift(ei, 23).view(at::kFloat);
    const at::Tensor value =
        at::where(at::eq(ei, 0), at::full({}, 0x1p-127f, normal.options()), normal);
    return at::where(at::eq(ei, 255),
                     at::full({}, std::numeric_limits<float>::quiet_NaN(), normal.options()),
                     value);
}

namespace {

/// chooseQParams for the MX and NVFP4 block formats (see the header), on the CPU in float32.
QParams blockFormatQParams(const at::Tensor& lo, const at::Tensor& hi, const QuantTypeTraits& t,
                           const Granularity& granularity, MxScaleMode mode)
{
    TORCH_CHECK(granularity.kind == Granularity::Kind::PerGroup &&
                    granularity.groupSize == t.blockSize,
                std::string(t.name), " quantizes blocks of ", t.blockSize,
                " elements along the last dimension, not ", granularity.describe());
    QParams q;
    q.type = t.type;
    q.granularity = granularity;
    q.symmetric = true;
    q.scaleMode = mode;
    q.zeroPoint = at::zeros(lo.sizes(), at::kLong);
    const at::Tensor absmax = at::maximum(lo.abs(), hi.abs()).contiguous();
    // MXINT8's codes k stand for k / 64: its integer scale is the block scale / 64 (exact).
    const double intScale = t.family == TypeFamily::Integer ? 64.0 : 1.0;
    if (t.blockScale == BlockScale::E8M0) {
        at::Tensor e;
        if (mode == MxScaleMode::Floor) {
            const at::Tensor pow2 =
                at::bitwise_and(at::bitwise_right_shift(absmax.view(at::kInt), 23), 0xFF) - 127;
            e = at::clamp(pow2 - t.emax, -127, 128) + 127;
            // Codes are picked with the scale floored at the smallest normal float32.
            const at::Tensor pick =
                at::clamp(at::bitwise_left_shift(e.to(at::kInt), 23).view(at::kFloat),
                          kFloatMinNormal);
            q.codeScale = pick / intScale;
        } else {
            const at::Tensor descale = absmax / static_cast<double>(t.maxValue);
            e = (at::clamp(at::ceil(at::log2(descale)), -127, 127) + 127).to(at::kInt);
            const at::Tensor multiplier =
                at::where(at::eq(e, 0), at::ones_like(descale),
                          at::exp2(127.0 - e.to(at::kFloat)));
            q.codeMultiplier = multiplier * intScale;
        }
        q.blockScale = e.to(at::kByte);
        q.scale = e8m0Value(e) / intScale;
        return q;
    }
    // NVFP4: one float32 scale for the tensor, an E4M3 scale per block of 16 under it.
    const float amax = absmax.numel() ? absmax.max().item<float>() : 0.0f;
    const at::Tensor tensorScale =
        amax > 0.0f ? at::div(at::full({}, amax, at::kFloat), 448.0 * 6.0)
                    : at::full({}, 1.0f, at::kFloat);
    q.tensorScale = tensorScale.item<float>();
    const at::Tensor block = absmax / 6.0;
    q.blockScale = at::clamp(block / tensorScale, 0x1p-6, 448.0).to(at::kFloat8_e4m3fn);
    const at::Tensor b = q.blockScale.to(at::kFloat);
    q.codeMultiplier = at::reciprocal(tensorScale) / b;
    q.scale = tensorScale * b;
    return q;
}

/// fakeQuantize for integer types: PyTorch's fused fake_quantize_per_channel_affine on the
/// [blocks, elements] view (it carries the straight-through estimator). NaN and +-Inf are
/// undefined behaviour in that kernel (a float cast to int64), so they are replaced first by
/// values that quantize the same: +-Inf by a bound one step beyond the range, NaN by 0 (and
/// put back as NaN afterwards).
at::Tensor fakeQuantizeInteger(const at::Tensor& x, const QParams& qparams,
                               const QuantTypeTraits& t)
{
    const BlockParams p = blockParams(x, qparams);
    const at::Tensor xb = toBlocks(x, qparams.granularity);
    const at::Tensor nan = at::isnan(xb);
    const at::Tensor lo = (static_cast<double>(t.qmin - 1) - p.zeroPoint) * p.scale;
    const at::Tensor hi = (static_cast<double>(t.qmax + 1) - p.zeroPoint) * p.scale;
    const at::Tensor finite = at::clamp(at::where(nan, at::zeros_like(xb), xb), lo, hi);

    const std::int64_t blocks = p.scale.numel();
    const at::Tensor rows = finite.reshape({blocks, xb.numel() / blocks});
    const at::Tensor fq = at::fake_quantize_per_channel_affine(
        rows, p.scale.reshape({blocks}).contiguous(),
        p.zeroPoint.reshape({blocks}).to(at::kInt).contiguous(), 0, t.qmin, t.qmax);
    const at::Tensor out =
        at::where(nan, at::full({}, std::numeric_limits<float>::quiet_NaN(), xb.options()),
                  fq.reshape(xb.sizes()));
    return fromBlocks(out, x.sizes(), qparams.granularity);
}

} // namespace

const QuantTypeTraits& traits(QuantType type)
{
    const auto index = static_cast<std::size_t>(type);
    TORCH_CHECK(index < std::size(kTraits), "unknown QuantType ", index);
    return kTraits[index];
}

std::span<const QuantTypeTraits> allQuantTypes() { return kTraits; }

std::optional<QuantType> quantTypeFromName(std::string_view name)
{
    for (const auto& t : kTraits) {
        if (t.name == name)
            return t.type;
    }
    return std::nullopt;
}

std::string Granularity::describe() const
{
    switch (kind) {
    case Kind::PerTensor:
        return "per-tensor";
    case Kind::PerChannel:
        return "per-channel(" + std::to_string(axis) + ")";
    case Kind::PerGroup:
        return "per-group(" + std::to_string(groupSize) + ")";
    case Kind::PerToken:
        return "per-token";
    }
    return "unknown";
}

const char* codeRangeName(CodeRange range)
{
    switch (range) {
    case CodeRange::Full: return "full";
    case CodeRange::Narrow: return "narrow";
    case CodeRange::Reduced: return "reduced";
    }
    return "?";
}

bool supportsCodeRange(QuantType type, CodeRange range)
{
    switch (range) {
    case CodeRange::Full: return true;
    case CodeRange::Narrow: return type == QuantType::Int8;
    case CodeRange::Reduced: return type == QuantType::Int8 || type == QuantType::UInt8;
    }
    return false;
}

std::pair<std::int64_t, std::int64_t> codeRange(QuantType type, CodeRange range)
{
    const QuantTypeTraits& t = traits(type);
    if (range == CodeRange::Full)
        return {t.qmin, t.qmax};
    TORCH_CHECK(supportsCodeRange(type, range),
                range == CodeRange::Reduced ? "reduce-range applies to int8 and uint8, not "
                                            : "wrange=127 applies to int8, not ",
                std::string(t.name));
    if (range == CodeRange::Narrow)
        return {-127, 127};
    return type == QuantType::Int8 ? std::pair<std::int64_t, std::int64_t>{-64, 64}
                                   : std::pair<std::int64_t, std::int64_t>{0, 127};
}

namespace {

/// The traits of qparams' type with its code range applied.
QuantTypeTraits rangedTraits(QuantType type, CodeRange range)
{
    QuantTypeTraits t = traits(type);
    std::tie(t.qmin, t.qmax) = codeRange(type, range);
    return t;
}

} // namespace

QParams chooseQParams(const at::Tensor& minVal, const at::Tensor& maxVal, QuantType type,
                      bool symmetric, const Granularity& granularity, CodeRange range,
                      MxScaleMode scaleMode)
{
    TORCH_CHECK(minVal.sizes() == maxVal.sizes(), "min has shape ", minVal.sizes(),
                " but max has shape ", maxVal.sizes());
    const QuantTypeTraits t = rangedTraits(type, range);
    const at::Device device = minVal.device();
    // On the CPU in float32, operation by operation as PyTorch's observers compute it (CUDA
    // would divide by a scalar as a multiplication by its reciprocal). NaN bounds count as 0.
    const auto bound = [](const at::Tensor& v) {
        return at::nan_to_num(v.detach().to(at::kCPU, at::kFloat), 0.0, kFloatMax, -kFloatMax);
    };
    const at::Tensor lo = bound(minVal);
    const at::Tensor hi = bound(maxVal);
    if (isBlockFormat(t)) {
        TORCH_CHECK(range == CodeRange::Full, "reduce-range and wrange=127 apply to int8, not ",
                    std::string(t.name));
        QParams q = blockFormatQParams(lo, hi, t, granularity, scaleMode);
        for (at::Tensor* p : {&q.scale, &q.zeroPoint, &q.codeScale, &q.codeMultiplier, &q.blockScale})
            if (p->defined())
                *p = p->to(device);
        return q;
    }

    QParams qparams;
    qparams.type = type;
    qparams.granularity = granularity;
    qparams.symmetric = t.family != TypeFamily::Integer || symmetric;
    qparams.range = range;
    at::Tensor scale;
    at::Tensor zeroPoint = at::zeros(lo.sizes(), at::kLong);

    if (t.family == TypeFamily::Integer) {
        // The range always includes 0, so that 0 is exactly representable.
        const at::Tensor loNeg = at::minimum(lo, at::zeros_like(lo));
        const at::Tensor hiPos = at::maximum(hi, at::zeros_like(hi));
        const double steps = static_cast<double>(t.qmax - t.qmin);
        if (symmetric) {
            // int8: scale = max(|lo|, |hi|) / 127.5; a range of 0 still gets eps.
            scale = at::maximum(-loNeg, hiPos) / (steps / 2.0);
            scale = at::clamp(scale, kFloatEps, kFloatMax);
            if (!t.isSigned) {
                // PyTorch: 128 for quint8's own range, the rounded-down midpoint (7 for
                // [0, 15]) for a customised one.
                const std::int64_t zp =
                    type == QuantType::UInt8 && range == CodeRange::Full ? 128 : (t.qmin + t.qmax) / 2;
                zeroPoint.fill_(zp);
            }
        } else {
            // uint8, [-0.15625, 15.78125]: scale = 15.9375 / 255 = 0.0625, lo / scale = -2.5
            // rounds half to even to -2, so the zero point is 0 - (-2) = 2.
            scale = at::clamp((hiPos - loNeg) / steps, kFloatEps, kFloatMax);
            zeroPoint = (static_cast<double>(t.qmin) - at::round(loNeg / scale))
                            .clamp(static_cast<double>(t.qmin), static_cast<double>(t.qmax))
                            .to(at::kLong);
        }
    } else if (t.needsScale) {
        // NF4: scale = absmax (bitsandbytes); FP4: absmax / 6; FP8: absmax / 448 or / 57344.
        const at::Tensor absmax = at::maximum(lo.abs(), hi.abs());
        scale = at::clamp(absmax / static_cast<double>(t.maxValue), kFloatMinNormal, kFloatMax);
    } else {
        scale = at::ones(lo.sizes(), at::kFloat);
    }
    qparams.scale = scale.to(device);
    qparams.zeroPoint = zeroPoint.to(device);
    return qparams;
}

std::pair<at::Tensor, at::Tensor> blockMinMax(const at::Tensor& x, const Granularity& granularity)
{
    const at::Tensor xf = x.detach().to(at::kFloat);
    const auto shape = scaleShape(xf.sizes(), granularity);
    if (xf.numel() == 0) {
        const at::Tensor zeros = at::zeros(shape, xf.options());
        return {zeros, zeros.clone()};
    }
    const bool padded = granularity.kind == Granularity::Kind::PerGroup &&
                        xf.size(normalizeAxis(granularity.axis, xf.dim(), "per-group")) %
                                granularity.groupSize !=
                            0;
    if (padded) {
        // A short last group is padded with +Inf for the minimum and -Inf for the maximum.
        const double inf = std::numeric_limits<double>::infinity();
        return {at::amin(toBlocks(xf, granularity, inf), -1),
                at::amax(toBlocks(xf, granularity, -inf), -1)};
    }
    auto [mn, mx] = at::aminmax(toBlocks(xf, granularity), -1);
    return {mn.reshape(shape), mx.reshape(shape)};
}

ScalarQParams chooseQParamsScalar(float minVal, float maxVal, QuantType type, bool symmetric,
                                  CodeRange range)
{
    const QuantTypeTraits t = rangedTraits(type, range);
    TORCH_CHECK(t.family == TypeFamily::Integer, "chooseQParamsScalar takes integer types, not ",
                std::string(t.name));
    // As chooseQParams: NaN bounds count as 0, +-Inf as +-FLT_MAX; then the range includes 0.
    const auto bound = [](float v) {
        return std::isnan(v) ? 0.0f : std::clamp(v, -kFloatMax, kFloatMax);
    };
    const float loNeg = std::min(bound(minVal), 0.0f);
    const float hiPos = std::max(bound(maxVal), 0.0f);
    const auto steps = static_cast<float>(t.qmax - t.qmin);
    ScalarQParams q;
    if (symmetric) {
        q.scale = std::clamp(std::max(-loNeg, hiPos) / (steps / 2.0f), kFloatEps, kFloatMax);
        if (!t.isSigned)
            q.zeroPoint = type == QuantType::UInt8 && range == CodeRange::Full ? 128 : (t.qmin + t.qmax) / 2;
    } else {
        q.scale = std::clamp((hiPos - loNeg) / steps, kFloatEps, kFloatMax);
        const float zp = static_cast<float>(t.qmin) - std::nearbyint(loNeg / q.scale);
        q.zeroPoint = static_cast<std::int64_t>(
            std::clamp(zp, static_cast<float>(t.qmin), static_cast<float>(t.qmax)));
    }
    return q;
}

std::span<const float> dynamicMap8Bit()
{
    // create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), with the same ATen
    // operations bitsandbytes runs through torch: for exponent i = 0..6, the 2^i midpoints of
    // linspace(0.1, 1, 2^i + 1) in float32, times 10^(i - 6) (a float32 multiply by the
    // scalar), with both signs; then 0 and 1, sorted. 254 + 2 = 256 values.
    static const std::array<float, 256> map = [] {
        std::vector<float> data;
        for (int i = 0; i < 7; ++i) {
            const at::Tensor b = at::linspace(0.1, 1.0, (std::int64_t{1} << i) + 1,
                                              at::TensorOptions().dtype(at::kFloat));
            const at::Tensor means = (b.slice(0, 0, -1) + b.slice(0, 1)) / 2.0;
            const double power = std::pow(10.0, i - 6);
            for (const at::Tensor& v : {at::mul(means, power), at::mul(means, -power)}) {
                const at::Tensor c = v.contiguous();
                data.insert(data.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
            }
        }
        data.push_back(0.0f);
        data.push_back(1.0f);
        std::sort(data.begin(), data.end());
        std::array<float, 256> out{};
        TORCH_CHECK(data.size() == out.size(), "the dynamic map has ", data.size(), " values");
        std::copy(data.begin(), data.end(), out.begin());
        return out;
    }();
    return map;
}

namespace {

/// Where bitsandbytes' CPU quantize_blockwise switches codes on the dynamic map: bound k - 1
/// is the smallest normalized value it maps to code k or above. Its search is bucketed, and
/// near 0 the buckets are coarser than the map, so it is not "the nearest entry" there (seven
/// entries next to 0 are never chosen; 0 itself becomes 2.125e-5); elsewhere it is the nearest
/// entry, a tie going to the lower one. Measured from bitsandbytes by
/// tests/data/bnb/derive_dynamic_bounds.py; tests/unit/test_bnb_nf4.cpp checks it against the
/// installed bitsandbytes.
constexpr std::array<float, 255> kBnbDynamicBounds = {
#include "quant/bnb_dynamic_bounds.inc"
};

}  // namespace

DoubleQuantizedAbsmax doubleQuantizeAbsmax(const at::Tensor& absmax)
{
    constexpr std::int64_t kBlock = 256;
    constexpr std::uint8_t kZeroEntry = 127;  // dynamicMap8Bit()[127] == 0
    const at::Tensor flat = absmax.detach().to(at::kCPU, at::kFloat).reshape({-1}).contiguous();
    DoubleQuantizedAbsmax out;
    out.offset = flat.mean().item<float>();
    const at::Tensor centred = (flat - out.offset).contiguous();
    const std::int64_t n = centred.numel();
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
    out.codes = at::empty({n}, at::TensorOptions().dtype(at::kByte));
    out.blockMax = at::empty({blocks}, at::TensorOptions().dtype(at::kFloat));
    at::Tensor back = at::empty({n}, at::TensorOptions().dtype(at::kFloat));
    const std::span<const float> map = dynamicMap8Bit();
    const float* c = centred.data_ptr<float>();
    std::uint8_t* q = out.codes.data_ptr<std::uint8_t>();
    float* m = out.blockMax.data_ptr<float>();
    float* y = back.data_ptr<float>();
    for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t begin = b * kBlock;
        const std::int64_t end = std::min(n, begin + kBlock);
        float blockMax = 0.0f;
        for (std::int64_t i = begin; i < end; ++i)
            blockMax = std::fmax(blockMax, std::fabs(c[i]));
        m[b] = blockMax;
        for (std::int64_t i = begin; i < end; ++i) {
            // A block whose values all equal the mean has nothing to scale (bitsandbytes would
            // divide 0 by 0): every value is the offset itself.
            std::uint8_t code = kZeroEntry;
            if (blockMax > 0.0f) {
                const float v = c[i] / blockMax;
                code = static_cast<std::uint8_t>(
                    std::upper_bound(kBnbDynamicBounds.begin(), kBnbDynamicBounds.end(), v) -
                    kBnbDynamicBounds.begin());
            }
            q[i] = code;
            // dequantize_blockwise (map[code] * m in float32), then `absmax += offset`.
            const float scaled = map[code] * blockMax;
            y[i] = scaled + out.offset;
        }
    }
    out.absmax = back.reshape(absmax.sizes()).to(absmax.device());
    return out;
}

at::Tensor quantize(const at::Tensor& input, const QParams& qparams)
{
    const QuantTypeTraits t = rangedTraits(qparams.type, qparams.range);
    const at::Tensor x = input.detach().to(at::kFloat);
    if (!t.needsScale)
        return x.to(codeType(t));  // FP16 / BF16: round to nearest even, overflow to Inf
    if (qparams.codeScale.defined()) {
        QParams picking = qparams;
        picking.scale = qparams.codeScale;
        picking.codeScale = at::Tensor();
        return quantize(input, picking);
    }
    const BlockParams p = blockParams(x, qparams);
    const at::Tensor xb = toBlocks(x, qparams.granularity);
    // The value each code is picked for: x * codeMultiplier where set (NVFP4, MX Rceil), else
    // x * (1 / scale) (integer and code tables, as fake_quantize and bitsandbytes) or x / scale
    // (float8, as torchao). Where the scale is a power of two, the two are the same.
    at::Tensor v;
    if (qparams.codeMultiplier.defined())
        v = xb * qparams.codeMultiplier.detach().to(x.device(), at::kFloat).unsqueeze(-1);
    else
        v = t.family == TypeFamily::Float ? xb / p.scale : xb * at::reciprocal(p.scale);
    at::Tensor codes;
    switch (t.family) {
    case TypeFamily::Integer:
        codes = integerCodes(v, p, t);
        break;
    case TypeFamily::CodeTable:
        codes = t.type == QuantType::NF4 ? nf4Codes(v)
                : t.codes.size() == 16   ? fp4Codes(v)
                                         : smallFloatCodes(v, t.codes);
        break;
    case TypeFamily::Float:
        codes = fp8Saturated(v, t);
        break;
    }
    return fromBlocks(codes, x.sizes(), qparams.granularity).to(codeType(t));
}

at::Tensor dequantize(const at::Tensor& codes, const QParams& qparams)
{
    const QuantTypeTraits& t = traits(qparams.type);
    const at::Tensor values = codeValues(codes.detach(), t);
    if (!t.needsScale)
        return values;
    const BlockParams p = blockParams(values, qparams);
    const at::Tensor vb = toBlocks(values, qparams.granularity);
    // Integer: (q - zp) * scale, exactly as fake_quantize computes it (one rounding).
    const at::Tensor out =
        t.family == TypeFamily::Integer ? (vb - p.zeroPoint) * p.scale : vb * p.scale;
    return fromBlocks(out, values.sizes(), qparams.granularity);
}

at::Tensor fakeQuantize(const at::Tensor& input, const QParams& qparams)
{
    const QuantTypeTraits t = rangedTraits(qparams.type, qparams.range);
    const at::Tensor x = input.to(at::kFloat);
    if (x.numel() == 0)
        return x.clone();
    // MXINT8 picks codes with a scale other than the stored one (codeScale, codeMultiplier):
    // it goes through quantize / dequantize like the float formats.
    if (t.family == TypeFamily::Integer && !isBlockFormat(t))
        return fakeQuantizeInteger(x, qparams, t);

    at::Tensor y = dequantize(quantize(x, qparams), qparams);
    // Code tables and integers have no NaN code; a fake-quantized NaN stays NaN all the same.
    if (t.family != TypeFamily::Float)
        y = at::where(at::isnan(x), x.detach(), y);
    if (!x.requires_grad() || !at::GradMode::is_enabled())
        return y;
    // Straight-through estimator: the value of y, the gradient of x inside the clip range.
    // y - (+0) keeps y bit for bit, -0 included (y + 0 would turn -0 into +0).
    const BlockParams p = blockParams(x, qparams);
    const at::Tensor inside =
        fromBlocks(insideClipRange(toBlocks(x.detach(), qparams.granularity), p, t), x.sizes(),
                   qparams.granularity);
    const at::Tensor passed = at::where(inside, x, at::zeros_like(x));
    return y.detach() - (passed.detach() - passed);
}

at::Tensor packInt4(const at::Tensor& codes)
{
    TORCH_CHECK(codes.scalar_type() == at::kByte || codes.scalar_type() == at::kChar,
                "packInt4 needs uint8 or int8 codes, not ", codes.scalar_type());
    TORCH_CHECK(codes.dim() > 0 && codes.size(-1) % 2 == 0,
                "packInt4 needs an even last dimension, not shape ", codes.sizes());
    // Example: codes {1, 2, 15, 0} -> bytes {0x21, 0x0F}; int8 code -1 is the nibble 0xF.
    const at::Tensor nibbles = at::bitwise_and(codes.to(at::kByte), 0x0F);
    const at::Tensor low = nibbles.slice(-1, 0, c10::nullopt, 2);
    const at::Tensor high = nibbles.slice(-1, 1, c10::nullopt, 2);
    return at::bitwise_or(low, at::bitwise_left_shift(high, 4)).contiguous();
}

at::Tensor unpackInt4(const at::Tensor& packed)
{
    TORCH_CHECK(packed.scalar_type() == at::kByte, "unpackInt4 needs uint8 bytes, not ",
                packed.scalar_type());
    TORCH_CHECK(packed.dim() > 0, "unpackInt4 needs at least one dimension");
    const at::Tensor low = at::bitwise_and(packed, 0x0F);
    const at::Tensor high = at::bitwise_right_shift(packed, 4);
    auto sizes = packed.sizes().vec();
    sizes.back() *= 2;
    return at::stack({low, high}, -1).reshape(sizes);
}

std::int64_t quantizedBytes(std::int64_t elements, const QParams& qparams)
{
    const QuantTypeTraits& t = traits(qparams.type);
    std::int64_t bytes = (elements * t.bits + 7) / 8;
    const std::int64_t scales = qparams.scale.defined() ? qparams.scale.numel() : 1;
    if (isBlockFormat(t)) {
        // One 8-bit scale per block (E8M0 or E4M3); NVFP4 adds its float32 per-tensor scale.
        // MXFP4 [8, 256]: 1024 + 64 = 1088 bytes (4.25 bits per element).
        bytes += scales;
        if (t.blockScale == BlockScale::E4M3)
            bytes += static_cast<std::int64_t>(sizeof(float));
        return bytes;
    }
    if (t.needsScale)
        bytes += scales * static_cast<std::int64_t>(sizeof(float));
    if (t.family == TypeFamily::Integer && !qparams.symmetric)
        bytes += scales;  // one byte per zero point: every integer type here has <= 8 bits
    return bytes;
}

} // namespace bitlens::quant
