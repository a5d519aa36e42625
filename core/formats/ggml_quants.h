#pragma once
// ggml's tensor types (the element types of GGUF files): one traits table with the block size,
// the bytes per block, a dequantizer and, where BitLens has one, a reference quantizer that
// gives the same bytes as ggml's quantize_row_*_ref. Tests loop over the table.
//
// A block type stores `blockSize` consecutive values of a row in `typeSize` bytes: fp16 scales
// first or last as ggml lays them out, then the packed codes. Rows are quantized along ne[0],
// the fastest-varying dimension (the last torch dimension). Everything here is torch-free.

#include "jobs/result.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace bitlens::formats {

/// ggml type ids, as stored in GGUF tensor infos.
enum class GgmlType : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
};

/// Converts `n` values (a multiple of the block size) from blocks to float32.
using GgmlToFloat = void (*)(const std::uint8_t* src, float* dst, std::int64_t n);
/// Quantizes `n` float32 values (a multiple of the block size) into blocks.
using GgmlFromFloat = void (*)(const float* src, std::uint8_t* dst, std::int64_t n);

/// One row of the traits table.
struct GgmlTypeTraits {
    GgmlType type;
    std::string_view name;        ///< ggml's spelling: "F32", "Q4_0", "Q4_K", "BF16", ...
    std::int64_t blockSize;       ///< values per block (1 for plain types, 32, 256)
    std::int64_t typeSize;        ///< bytes per block
    GgmlToFloat toFloat;          ///< nullptr: BitLens cannot dequantize this type (IQ*, TQ*)
    GgmlFromFloat fromFloatRef;   ///< nullptr: no reference quantizer in BitLens
};

/// Every known type, in id order (those without a dequantizer included, for their sizes).
std::span<const GgmlTypeTraits> allGgmlTypes();
/// The traits of a type id read from a file, or nullptr for an id ggml does not define.
const GgmlTypeTraits* ggmlTraits(std::uint32_t id);
/// The traits of a known type.
const GgmlTypeTraits& ggmlTraits(GgmlType type);
/// The type called `name` (case-insensitive: "q4_k", "Q8_0", "bf16"), or nullopt.
std::optional<GgmlType> ggmlTypeFromName(std::string_view name);

/// Bytes of `n` values of `type`, or nullopt when n is not a multiple of the block size or the
/// byte count overflows int64.
std::optional<std::int64_t> ggmlBytes(GgmlType type, std::int64_t n);

/// Quantizes `src` (a multiple of the block size) with the reference quantizer. Errors: Usage
/// for a size that is not a multiple of the block size, Unsupported for a type without a
/// quantizer, BadInput (no path) for NaN or Inf in a block type (F32/F16/BF16 keep them).
Result<std::vector<std::uint8_t>> ggmlQuantize(std::span<const float> src, GgmlType type);
/// Dequantizes `src` (exactly ggmlBytes(type, dst.size()) bytes) into `dst`. Errors: Usage for
/// a size mismatch, Unsupported for a type without a dequantizer.
Result<void> ggmlDequantize(std::span<const std::uint8_t> src, GgmlType type, std::span<float> dst);

/// float32 -> IEEE half bits, round to nearest even (ggml's GGML_FP32_TO_FP16).
std::uint16_t fp32ToFp16(float value);
/// IEEE half bits -> float32 (exact).
float fp16ToFp32(std::uint16_t bits);
/// float32 -> bfloat16 bits as ggml rounds: to nearest even, NaN made quiet.
std::uint16_t fp32ToBf16(float value);

/// MXFP4 blocks (ggml's block_mxfp4) from E2M1 codes (4-bit patterns, sign in bit 3; a multiple
/// of 32, row-major) and one E8M0 exponent byte per 32 codes: BitLens's own mxfp4 codes, written
/// as they are (ggml's quantizer rounds ties differently: 0.75 to 0.5, where OCP / torchao round
/// to the even 1.0). Usage error on sizes that do not match or a code above 15.
Result<std::vector<std::uint8_t>> packMxfp4(std::span<const std::uint8_t> codes,
                                            std::span<const std::uint8_t> exponents);

} // namespace bitlens::formats
