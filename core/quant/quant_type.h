#pragma once
// The quantization vocabulary: one traits table for every QuantType (tests loop over it), the
// granularity of scales as a block size, quantization parameters, and the reference
// quantize / dequantize / fake-quantize primitives every recipe and kernel is checked against.

#include "jobs/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace bitlens::quant {

/// Number formats a tensor can be quantized to.
enum class QuantType {
    Int8,     ///< affine integer [-128, 127]
    UInt8,    ///< affine integer [0, 255]
    Int4,     ///< affine integer [-8, 7]
    UInt4,    ///< affine integer [0, 15]
    Int2,     ///< affine integer [-2, 1]
    NF4,      ///< 4-bit NormalFloat code table (bitsandbytes), absmax-scaled per block
    FP4E2M1,  ///< 4-bit float E2M1 {0, 0.5, 1, 1.5, 2, 3, 4, 6} x sign, absmax-scaled per block
    FP8E4M3,  ///< float8 E4M3FN (max 448, no inf), scaled; casts as torch's float8_e4m3fn
    FP8E5M2,  ///< float8 E5M2 (max 57344), scaled; casts as torch's float8_e5m2
    FP16,     ///< IEEE half, cast (no scale)
    BF16,     ///< bfloat16, cast (no scale)
    // The block formats of accelerators (OCP Microscaling v1.0 and NVIDIA's NVFP4): elements
    // of a small float (or int8) type in blocks along the last dimension (a weight's inputs)
    // sharing one 8-bit scale. Their codes are the element type's; `scale` holds the decoded
    // block scale (MX: 2^(E8M0 - 127); NVFP4: per-tensor scale x E4M3 block scale).
    MXFP4,      ///< MX, E2M1 elements (max 6), 32 per E8M0 scale: 4.25 bits per element
    MXFP6E2M3,  ///< MX, FP6 E2M3 elements (max 7.5): 6.25 bits
    MXFP6E3M2,  ///< MX, FP6 E3M2 elements (max 28): 6.25 bits
    MXFP8E4M3,  ///< MX, float8 E4M3FN elements (max 448): 8.25 bits
    MXFP8E5M2,  ///< MX, float8 E5M2 elements (max 57344): 8.25 bits
    MXINT8,     ///< MX, int8 elements k / 64, k in [-127, 127] (OCP MX INT8): 8.25 bits
    NVFP4,      ///< E2M1 elements, 16 per E4M3 block scale, one float32 scale per tensor: 4.5 bits
};

/// The shared scale of a block format.
enum class BlockScale {
    None,  ///< not a block format: `scale` is float32 (32 bits per scale in storage)
    E8M0,  ///< OCP MX: a power of two 2^(e - 127), e in 0..254 (255 = NaN), 8 bits
    E4M3,  ///< NVFP4: float8 E4M3FN block scale x one float32 scale per tensor
};

/// How an MX block's shared exponent is chosen from the block's absolute maximum amax (torchao's
/// ScaleCalculationMode). Floor: OCP's rule, floor(log2(amax)) - emax, the element type's
/// largest exponent (values up to 2^(emax + 1) - 1 ulp saturate); Rceil: cuBLAS / Transformer
/// Engine's, ceil(log2(amax / max)) (nothing saturates).
enum class MxScaleMode { Floor, Rceil };

/// Which codes an int8 / uint8 tensor may take. Symmetric int8 picks scale = absmax / (steps /
/// 2): absmax 2.54 gives 2.54 / 127.5 = 0.019922 on Full (2.54 -> code 127.5 -> 128, clamped
/// to 127: the largest weight loses half a step), 2.54 / 127 = 0.02 on Narrow (code 127 exact).
enum class CodeRange {
    Full,     ///< the type's own range: int8 [-128, 127], uint8 [0, 255] (PyTorch's observers)
    Narrow,   ///< int8 [-127, 127], symmetric about 0: option wrange=127, as TensorRT and
              ///< onnxruntime's symmetric quantizer (get_qmin_qmax_for_qType)
    Reduced,  ///< 7 bits: int8 [-64, 64], uint8 [0, 127]: option reduce-range, as
              ///< onnxruntime's reduce_range
};
/// "full", "narrow", "reduced".
const char* codeRangeName(CodeRange range);

/// How a format maps reals to codes.
enum class TypeFamily {
    Integer,    ///< q = clamp(round_half_even(x * (1 / scale)) + zeroPoint, qmin, qmax)
    CodeTable,  ///< q = the code whose value is nearest to x * (1 / scale) (NF4, FP4)
    Float,      ///< q = float cast of x / scale (FP8, saturating), or of x itself (FP16, BF16)
};

/// One row of the traits table.
struct QuantTypeTraits {
    QuantType type;
    std::string_view name;      ///< "int8", "nf4", "fp8_e4m3", ... (DESIGN.md spelling)
    int bits;                   ///< storage bits per element
    bool isSigned;
    TypeFamily family;
    std::int64_t qmin;          ///< Integer: smallest code; others: 0
    std::int64_t qmax;          ///< Integer: largest code; CodeTable: codes - 1; Float: 0
    /// CodeTable: the value of each code, indexed by code (16 entries). NF4: bitsandbytes'
    /// table, ascending in [-1, 1] (code 7 is 0). FP4: indexed by the E2M1 bit pattern (bit 3
    /// sign, bits 2-1 exponent, bit 0 mantissa): {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, ..., -6}.
    std::span<const float> codes;
    float maxValue;             ///< largest finite magnitude the unscaled format represents
    bool needsScale;            ///< false for FP16/BF16 (plain casts)
    /// Block formats: elements per shared scale along the last dimension (MX 32, NVFP4 16).
    std::int64_t blockSize = 0;
    BlockScale blockScale = BlockScale::None;
    /// MX: the largest power of two of the element type (E2M1 2, E2M3 2, E3M2 4, E4M3 8,
    /// E5M2 15, INT8 0): the shared exponent is floor(log2(amax)) - emax.
    int emax = 0;
};

/// True for the MX and NVFP4 block formats.
inline bool isBlockFormat(const QuantTypeTraits& t) { return t.blockScale != BlockScale::None; }

/// The traits of one type.
const QuantTypeTraits& traits(QuantType type);
/// Every type, in enum order.
std::span<const QuantTypeTraits> allQuantTypes();
/// The type called `name` (as in traits().name), or nullopt.
std::optional<QuantType> quantTypeFromName(std::string_view name);

/// Which elements share a scale. Per-group blocks run along `axis` (the input dimension of a
/// weight [out, in] is axis 1), the last one shorter when the axis is not a multiple of the
/// group size; per-token is per-row of the flattened [tokens, features] tensor.
struct Granularity {
    enum class Kind { PerTensor, PerChannel, PerGroup, PerToken };
    Kind kind = Kind::PerTensor;
    std::int64_t axis = 0;       ///< PerChannel: the channel axis; PerGroup: the grouped axis
    std::int64_t groupSize = 0;  ///< PerGroup: elements per block (32..256 in presets)

    static Granularity perTensor() { return {}; }
    static Granularity perChannel(std::int64_t axis) { return {Kind::PerChannel, axis, 0}; }
    static Granularity perGroup(std::int64_t axis, std::int64_t size)
    {
        return {Kind::PerGroup, axis, size};
    }
    static Granularity perToken() { return {Kind::PerToken, -1, 0}; }
    /// "per-tensor", "per-channel(0)", "per-group(64)", "per-token".
    std::string describe() const;

    bool operator==(const Granularity&) const = default;
};

/// Scale and zero point of a quantized tensor. Shapes: scalar for per-tensor, [C] for
/// per-channel, [rows, blocks] for per-group (rows = all dims but the grouped axis, flattened),
/// [tokens] for per-token. zeroPoint is int64: all zeros for non-integer types and symmetric
/// signed ones; symmetric uint8 has 128 and uint4 7 (as PyTorch's observers).
struct QParams {
    QuantType type = QuantType::Int8;
    Granularity granularity;
    bool symmetric = true;
    /// The codes allowed. Reduced: int8 codes on 7 bits, [-64, 64], as onnxruntime's quantizer
    /// does with reduce_range (UInt8: [0, 127]). CPUs without VNNI multiply u8 x s8 with
    /// vpmaddubsw, which adds pairs into int16 with saturation; 7-bit codes keep every pair in
    /// range (2 * 255 * 64 = 32640). Narrow: int8 [-127, 127] (wrange=127).
    CodeRange range = CodeRange::Full;
    at::Tensor scale;      ///< float32, > 0 everywhere (a zero range still gets a valid scale)
    at::Tensor zeroPoint;  ///< int64; the real 0 is exactly representable
    /// The scale the codes are picked with, where it is not `scale` (undefined: `scale`).
    /// NF4 double quantization (bitsandbytes' compress_statistics) picks the 4-bit codes with
    /// the float32 absmax and dequantizes them with the double-quantized absmax in `scale`,
    /// which may even be <= 0 for a block far below the mean (bitsandbytes does not guard it).
    at::Tensor codeScale;
    /// Block formats: the scale as stored. MX: uint8 biased E8M0 exponents; NVFP4: float8
    /// E4M3FN block scales (before the per-tensor scale). Shaped as `scale`.
    at::Tensor blockScale;
    /// NVFP4: the float32 per-tensor scale (tensor amax / (6 x 448); its reciprocal is
    /// compressed-tensors' global_scale). 0 for the other types.
    float tensorScale = 0.0f;
    /// Where set, codes are picked from x * codeMultiplier (shaped as `scale`) instead of
    /// x / scale: torchao's NVFP4 multiplies by (1 / tensorScale) / blockScale and MX RCEIL by
    /// 2^(127 - e) (1 where e = 0), which are not always the reciprocal of the stored scale.
    at::Tensor codeMultiplier;
    MxScaleMode scaleMode = MxScaleMode::Floor;  ///< MX types: how `blockScale` was chosen
};

/// bitsandbytes' double quantization of NF4 block absmax values (`quantize_4bit(...,
/// compress_statistics=True)`), step by step in float32 as its CPU code runs them:
///  1. offset = mean of the absmax values (ATen's mean, which torch.mean is);
///  2. c = absmax - offset, split into blocks of 256 (the last one shorter);
///  3. per block: m = max |c|; each c / m (a division) gets the code bitsandbytes' CPU
///     quantize_blockwise gives it on the signed 8-bit dynamic map (the nearest entry, a tie
///     going to the lower one, except near 0 where its bucketed search is coarser: see
///     kBnbDynamicBounds in quant_type.cpp);
///  4. the absmax the 4-bit codes are dequantized with is map[code] * m + offset.
/// Worked example: absmax {1, 2, 3, 6}: offset 3, c {-2, -1, 0, 3}, m 3, c / m {-0.667,
/// -0.333, 0, 1} -> codes {23, 47, 131, 255} -> {0.9914, 2.0039, 3.0001, 6} (bitsandbytes
/// gives the same; 0 becomes entry 131 = 2.125e-5).
/// A block of 256 values that all equal the mean keeps them exactly (code of entry 0).
struct DoubleQuantizedAbsmax {
    at::Tensor codes;      ///< uint8, one per absmax value (flattened)
    at::Tensor blockMax;   ///< float32, one per block of 256 (m above)
    float offset = 0.0f;   ///< the mean that was subtracted
    at::Tensor absmax;     ///< float32, the dequantized absmax values, shaped as the input
};
DoubleQuantizedAbsmax doubleQuantizeAbsmax(const at::Tensor& absmax);
/// bitsandbytes' signed 8-bit dynamic map (create_dynamic_map(signed=True, 7, 8)): 256 values
/// ascending in [-0.993, 1], entry 127 is 0.
std::span<const float> dynamicMap8Bit();

/// Chooses scale / zero point from a clip range per block (minVal/maxVal shaped like the
/// scale). Integer types: symmetric uses max(|lo|, |hi|) / ((qmax - qmin) / 2), asymmetric
/// (hi - lo) / (qmax - qmin) with zeroPoint = clamp(qmin - round(lo / scale)), as PyTorch's
/// MinMaxObserver / PerChannelMinMaxObserver do, in float32, bit for bit: the range is first
/// widened to include 0, the scale is at least float32 eps (a zero range gives 1.19e-7), and the
/// symmetric zero point is 0 for signed types, 128 for uint8 and 7 for uint4 (PyTorch's
/// rounded-down midpoint of a customised range). CodeTable / FP8: scale = absmax / maxValue,
/// at least the smallest normal float32 (NF4: the absmax itself, as bitsandbytes stores it);
/// these are always symmetric. FP16 / BF16: scale 1. NaN bounds count as 0, +-Inf as +-FLT_MAX.
///
/// Block formats (MX, NVFP4) need per-group granularity with the type's block size; their
/// scales follow torchao 0.18's reference code (mx_formats/mx_tensor.py to_mx,
/// nvfp4_tensor.py nvfp4_quantize with a per-tensor scale) bit for bit:
///  - MX Floor: e = clamp(exponent bits of amax - 127 - emax, -127, 128) + 127; the codes are
///    picked with x / max(2^(e - 127), 2^-126), dequantized with 2^(e - 127) (so an all-zero
///    block has e = 0). MXINT8 (not in torchao; OCP MX v1.0): emax 0, codes
///    round_half_even(x / (2^(e - 127) / 64)) clamped to [-127, 127].
///  - MX Rceil: e = clamp(ceil(log2(amax / max)), -127, 127) + 127; codes from x * 2^(127 - e)
///    (x * 1 where e = 0, as torchao), clamped to +-max; dequantized with 2^(e - 127).
///  - NVFP4: t = tensor amax / 2688; block b = E4M3(clamp(block amax / 6 / t, 2^-6, 448));
///    codes from x * ((1 / t) / b) clamped to +-6; dequantized with t * b. An all-zero tensor
///    (torchao: 0 / 0 = NaN everywhere) gets t = 0 and b = 2^-6: every code and value 0.
QParams chooseQParams(const at::Tensor& minVal, const at::Tensor& maxVal, QuantType type,
                      bool symmetric, const Granularity& granularity,
                      CodeRange range = CodeRange::Full,
                      MxScaleMode scaleMode = MxScaleMode::Floor);

/// chooseQParams for one per-tensor integer range, in scalars and bit for bit the same (the
/// same float32 operations in the same order): what the real int8 kernels compute for a dynamic
/// activation range without a dozen small tensor operations per layer. Integer types only.
struct ScalarQParams {
    float scale = 1.0f;
    std::int64_t zeroPoint = 0;
};
ScalarQParams chooseQParamsScalar(float minVal, float maxVal, QuantType type, bool symmetric,
                                  CodeRange range = CodeRange::Full);

/// The codes a QParams allows: the type's [qmin, qmax] (Full), [-127, 127] for Int8 (Narrow),
/// or [-64, 64] for Int8 and [0, 127] for UInt8 (Reduced, onnxruntime's reduced ranges). So
/// symmetric reduced int8 has scale = absmax / 64, as onnxruntime computes it, and narrow int8
/// absmax / 127. Throws for a range the type does not take (supportsCodeRange).
std::pair<std::int64_t, std::int64_t> codeRange(QuantType type, CodeRange range);
/// True for the types `range` applies to: every type takes Full, Int8 Narrow, Int8 and UInt8
/// Reduced.
bool supportsCodeRange(QuantType type, CodeRange range);

/// Min and max of `x` per block of `granularity`, shaped as the scale will be.
std::pair<at::Tensor, at::Tensor> blockMinMax(const at::Tensor& x, const Granularity& granularity);

/// Quantizes to codes: int8/uint8 tensors for integer and code-table types (one code per
/// element, unpacked), float8 tensors for FP8, half/bfloat16 for FP16/BF16. `x` is read as
/// float32. Every rule rounds to nearest:
///  - Integer: as torch.fake_quantize_*: multiply by the float32 reciprocal of the scale, round
///    half to even, then add the zero point and clamp (scale 0.5, zero point 1: 0.25 -> 0.5 ->
///    0 -> code 1; 0.75 -> 1.5 -> 2 -> code 3). The deprecated torch.quantize_per_tensor
///    rounds x * (1 / scale) + zp computed in one FMA, quantize_per_channel rounds
///    float32(x * (1 / scale)) + zp: adding the zero point before rounding, they can differ
///    from this (and from fake_quantize) by one code on or right next to a tie when zp != 0.
///  - NF4: x * (1 / scale) against bitsandbytes' thresholds; a tie takes the lower code.
///  - FP4: x * (1 / scale), ties to the even mantissa (1.25 -> 1, 1.75 -> 2), saturating at 6.
///  - FP8: x / scale clamped to +-maxValue (saturating, as torchao and Transformer Engine do;
///    torch's own cast saturates for E4M3FN but gives Inf for E5M2 at 61440 and above), then
///    cast as torch casts (round to nearest even, subnormals kept).
///  - FP16 / BF16: torch's casts (round to nearest even; beyond the range gives Inf).
/// NaN: float formats keep it; integer and code-table formats have none and give the code of
/// 0. +-Inf give the largest / smallest code (FP8: +-maxValue; FP16 / BF16: +-Inf).
at::Tensor quantize(const at::Tensor& x, const QParams& qparams);
/// 2^(e - 127) for biased E8M0 exponents e (uint8 or int32), float32 exactly (e = 0 is the
/// subnormal 2^-127, e = 255 NaN), as torchao's get_fp_scale: the value of an MX block scale.
at::Tensor e8m0Value(const at::Tensor& e);
/// Codes back to float32 with the shape of `codes`: (q - zeroPoint) * scale (integer, one
/// rounding, as fake_quantize), codes[q] * scale (code tables), float(q) * scale (FP8).
at::Tensor dequantize(const at::Tensor& codes, const QParams& qparams);
/// dequantize(quantize(x)) in one step, float32 out, except that NaN stays NaN for every type.
/// Gradients pass straight through inside the clip range and are zero outside it (the
/// straight-through estimator), for QAT: integer types use torch's fused
/// fake_quantize_per_channel_affine (inside: qmin <= round(x / scale) + zeroPoint <= qmax),
/// the others |x / scale| <= maxValue.
at::Tensor fakeQuantize(const at::Tensor& x, const QParams& qparams);

/// Packs 4-bit codes (uint8 tensor, values 0..15, last dim even) two per byte, element 2k in
/// the low nibble and 2k+1 in the high nibble: the order of ONNX INT4/UINT4 and of OCP MX FP4
/// (torch.float4_e2m1fn_x2). bitsandbytes stores element 2k in the high nibble instead, and
/// torch._convert_weight_to_int4pack_for_cpu takes unpacked int32 codes. int8 codes (int4)
/// are accepted and stored as two's-complement nibbles (-1 -> 0xF).
at::Tensor packInt4(const at::Tensor& codes);
/// Inverse of packInt4: uint8 codes 0..15 (sign-extend int4 codes with (c ^ 8) - 8).
at::Tensor unpackInt4(const at::Tensor& packed);

/// Storage bytes of a tensor of `elements` values quantized with `qparams`: the codes packed at
/// their bit width, ceil(elements * bits / 8); 4 bytes per scale (none for FP16 / BF16); 1 byte
/// per zero point for asymmetric integer types (symmetric ones are implied by the type).
/// Example: int4 per-group(64) asymmetric, [8, 256]: 1024 + 32 * 4 + 32 = 1184 bytes.
std::int64_t quantizedBytes(std::int64_t elements, const QParams& qparams);

} // namespace bitlens::quant
