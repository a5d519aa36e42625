#pragma once
// Own low-bit kernels on raw pointers (no LibTorch types): the fast CPU versions (AVX-512,
// AVX-VNNI and AVX2, core/kernels/cpu), their scalar `_ref` twins (core/kernels/ref) and the CUDA ones
// (core/kernels/cuda). The real-kernel hook (quant/real_kernels.cpp) packs weights with these
// and runs them; tests compare every fast kernel with its twin.
//
// int8 GEMM (W8A8): acc[m, n] = sum_k (x[m, k] - zx[m]) * w[n, k], exact in int32.
//   x: unsigned 8-bit "u" codes. Signed int8 activation codes q are passed as u = q + 128 with
//   zero point zx + 128: (u - (zx + 128)) = (q - zx). The AVX512-VNNI instruction vpdpbusd
//   multiplies unsigned by signed bytes, four at a time, so
//     sum_k (u - zx) * w = sum_k u * w  -  zx * colSum[n],   colSum[n] = sum_k w[n, k],
//   the second term precomputed at packing. Worked example: u = [200, 3], zx = 3, w = [2, -1]:
//   sum u * w = 397, colSum = 1, 397 - 3 * 1 = 394 = (200 - 3) * 2 + 0 * -1. Every term of the
//   true sum is at most 255 * 128, so it stays inside int32 for K <= 65535; the subtraction may
//   wrap in between but the result is exact (two's complement arithmetic).
//   Epilogue to float: y[m, n] = float(acc) * (sx[m] * sw[n]) + bias[n].
//   AVX-VNNI (256-bit VEX vpdpbusd) runs the same sum on the same packed bytes, 8 channels per
//   32-byte load. Plain AVX2 has no exact u8 x s8 multiply-add: vpmaddubsw adds pairs into
//   int16 with saturation, and 2 * 255 * -128 = -65280 is far outside int16. The AVX2 kernel
//   therefore widens the activation codes to int16 once per GEMM and the packed weights on the
//   fly (vpmovsxbw, shared by a tile's rows) and multiplies with vpmaddwd, whose pairs add into
//   int32 (at most 65280 in magnitude): exact, the same integers as every other row, and no
//   second packed copy of the weights (lowbit_avx2.cpp).
//
// Weight-only 4-bit (int4 / uint4 / NF4, group scales): w[n, k] = table[u[n, k]] * s[n, g] +
//   mn[n, g], with u in [0, 15], g = k / group. table = {0, 1, ..., 15} for integer codes
//   (zero point z: mn = -z * s) and bitsandbytes' NF4 values for NF4 (mn = 0). The kernels
//   compute, in float32,
//     y[m, n] = sum_g ( s[n, g] * sum_{k in g} table[u] * x[m, k]  +  mn[n, g] * xsum[m, g] )
//   with xsum[m, g] = sum_{k in g} x[m, k]: one dequantization-free inner loop per group.
//
// Packed layouts (the same for the CPU and CUDA kernels, so one packing serves both):
//  - int8: panels of up to 64 output channels; inside a panel, for each 4 consecutive k, 4 bytes
//    per channel ([kPadded / 4][width][4]): one 64-byte load feeds 16 lanes of vpdpbusd.
//  - 4-bit: rows of kPadded / 2 bytes (kPadded = K rounded up to 128); each 64-byte chunk holds
//    128 consecutive k as 16 little-endian 32-bit words: word d holds element d + 16 s in bits
//    4s..4s+3 (s = 0..7). One 512-bit load then gives eight 16-lane index vectors, one shift
//    each and no byte-to-word expansion; vpermps reads only the low 4 bits of an index. Worked
//    example: element 37 = 5 + 16 * 2 sits in word 5, bits 8..11, i.e. byte 5 * 4 + 1 = 21 of
//    the chunk, low nibble.

#include "kernels/cpu_features.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace bitlens::kernels {

/// A 64-byte aligned array of trivially copyable T, zero-initialised.
template <typename T>
class AlignedArray {
public:
    AlignedArray() = default;
    explicit AlignedArray(std::size_t count) : m_size(count)
    {
        if (count == 0)
            return;
        const std::size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
        void* p = std::aligned_alloc(64, bytes);
        if (!p)
            throw std::bad_alloc();
        std::memset(p, 0, bytes);
        m_data.reset(static_cast<T*>(p));
    }
    T* data() { return m_data.get(); }
    const T* data() const { return m_data.get(); }
    std::size_t size() const { return m_size; }
    T& operator[](std::size_t i) { return m_data.get()[i]; }
    const T& operator[](std::size_t i) const { return m_data.get()[i]; }

private:
    struct Free {
        void operator()(T* p) const { std::free(p); }
    };
    std::unique_ptr<T, Free> m_data;
    std::size_t m_size = 0;
};

// --- int8 GEMM ---------------------------------------------------------------------------------

/// Largest K of the int8 GEMM: 65535 * 255 * 128 < 2^31 keeps every partial sum in int32.
constexpr std::int64_t kInt8MaxK = 65535;
/// Output channels per packed panel of the int8 GEMM.
constexpr std::int64_t kInt8PanelWidth = 64;

/// int8 weights [N, K] packed for the int8 GEMM (layout in the file comment).
struct Int8PackedWeight {
    std::int64_t n = 0;        ///< output channels
    std::int64_t k = 0;        ///< input features
    std::int64_t kPadded = 0;  ///< K rounded up to 4 (zero codes beyond K)
    AlignedArray<std::int8_t> data;     ///< the panels, kPadded * roundUp(N, 16) bytes
    AlignedArray<std::int32_t> colSum;  ///< [N]: sum_k w[n, k]
    /// max |w[n, k]| (0..128), set by packInt8Weight; 128 (the safe bound) until then
    std::int32_t maxAbsCode = 128;
};

/// Largest |weight code| for which vpmaddubsw (u8 x s8, pairs added into int16 with
/// saturation) is exact: 2 * 255 * 64 = 32640 <= 32767. Weights on 7 bits ([-64, 64], the
/// `reduce-range` option, as onnxruntime's reduce_range) meet it.
constexpr std::int32_t kInt8MaddubsMaxAbsCode = 64;
/// True when the AVX2 row runs `w` with vpmaddubsw (exact for these codes) rather than
/// widening to int16: the codes fit kInt8MaddubsMaxAbsCode.
inline bool int8UsesMaddubs(const Int8PackedWeight& w)
{
    return w.maxAbsCode <= kInt8MaddubsMaxAbsCode;
}

/// Packs row-major int8 codes w [N, K] (ldw elements per row). K must be <= kInt8MaxK.
Int8PackedWeight packInt8Weight(const std::int8_t* w, std::int64_t n, std::int64_t k,
                                std::int64_t ldw);

/// How the int32 accumulator becomes float: y = float(acc) * (xScale[m] * wScale[n]) + bias[n]
/// (+ residual[m, n], added last: a transformer's skip connection fused into the GEMM).
struct Int8Epilogue {
    const float* xScale = nullptr;  ///< [M], or one value when xScalePerRow is false
    bool xScalePerRow = false;
    const float* wScale = nullptr;  ///< [N]
    const float* bias = nullptr;    ///< [N] or null
    const float* residual = nullptr;  ///< [M, ldResidual] or null
    std::int64_t ldResidual = 0;
};

/// Activation codes u [M, ldx] (ldx >= kPadded; bytes in [K, kPadded) are read but multiply zero
/// weights) with zero points zx ([M], or one value when zxPerRow is false; null = 0).
struct Int8Activations {
    const std::uint8_t* codes = nullptr;
    std::int64_t m = 0;
    std::int64_t ldx = 0;
    const std::int32_t* zeroPoint = nullptr;
    bool zeroPointPerRow = false;
};

/// acc [M, N] (row-major, int32) with AVX512-VNNI; requires cpuFeatures().avx512Vnni.
/// Multithreaded over N and M with at::parallel_for.
void int8GemmVnni(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc);
/// The same with the float epilogue fused: y [M, N] row-major.
void int8GemmVnniF32(const Int8Activations& x, const Int8PackedWeight& w,
                     const Int8Epilogue& epilogue, float* y);
/// acc [M, N] with AVX2 (requires cpuFeatures().avx2): u and w widened to int16, vpmaddwd into
/// int32 (exact: vpmaddubsw would saturate, see lowbit_avx2.cpp); for weights on 7 bits
/// (int8UsesMaddubs) vpmaddubsw + vpmaddwd, which is exact there and about twice as fast.
/// Threaded like int8GemmVnni.
void int8GemmAvx2(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc);
/// int8GemmAvx2 with the float epilogue fused.
void int8GemmAvx2F32(const Int8Activations& x, const Int8PackedWeight& w,
                     const Int8Epilogue& epilogue, float* y);
/// acc [M, N] with the 256-bit VEX vpdpbusd (requires cpuFeatures().avxVnni), 8 channels per load.
void int8GemmAvxVnni(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc);
/// int8GemmAvxVnni with the float epilogue fused.
void int8GemmAvxVnniF32(const Int8Activations& x, const Int8PackedWeight& w,
                        const Int8Epilogue& epilogue, float* y);
/// Scalar twin of int8GemmVnni, reading the same packed weights.
void int8GemmRef(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc);
/// Scalar twin of int8GemmVnniF32 (float arithmetic in the same order).
void int8GemmRefF32(const Int8Activations& x, const Int8PackedWeight& w,
                    const Int8Epilogue& epilogue, float* y);

/// Quantizes float rows x [M, K] to u8 codes [M, ldu] exactly as quant::quantize() does for
/// integer types: q = clamp(round_half_even(x * invScale[m]) + zeroPoint[m], qmin, qmax), NaN
/// gives the code of 0 (zeroPoint), then stores u = q + shift (shift 128 for int8 codes, 0 for
/// uint8). Bytes [K, ldu) are set to `shift + zeroPoint` (their weights are zero anyway).
/// invScale / zeroPoint: [M], or one value when perRow is false. AVX-512 or AVX2 when present.
void quantizeRowsU8(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx,
                    const float* invScale, const std::int32_t* zeroPoint, bool perRow,
                    std::int32_t qmin, std::int32_t qmax, std::int32_t shift, std::uint8_t* u,
                    std::int64_t ldu);
/// min and max of x [count] (for dynamic activation scales); NaN anywhere gives NaN for both,
/// as at::aminmax does. AVX-512 or AVX2 when present, threaded.
void minMaxF32(const float* x, std::int64_t count, float* lo, float* hi);
/// AVX2 row of quantizeRowsU8 (requires cpuFeatures().avx2), bit-identical to the twin.
void quantizeRowsU8Avx2(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx,
                        const float* invScale, const std::int32_t* zeroPoint, bool perRow,
                        std::int32_t qmin, std::int32_t qmax, std::int32_t shift, std::uint8_t* u,
                        std::int64_t ldu);
/// AVX2 row of minMaxF32 (requires cpuFeatures().avx2), threaded.
void minMaxF32Avx2(const float* x, std::int64_t count, float* lo, float* hi);
/// One part of minMaxF32: min and max of x[begin, end), and whether it holds a NaN.
using MinMaxRangeFn = void (*)(const float* x, std::int64_t begin, std::int64_t end, float* lo,
                               float* hi, bool* nan);
/// minMaxF32's threaded driver, shared by its vector rows: up to 8 parts of >= 16k floats,
/// each reduced by `range`, then combined (NaN anywhere gives NaN for both).
void minMaxThreaded(const float* x, std::int64_t count, MinMaxRangeFn range, float* lo,
                    float* hi);
/// Scalar twin of minMaxF32.
void minMaxF32Ref(const float* x, std::int64_t count, float* lo, float* hi);
/// Scalar twin of quantizeRowsU8.
void quantizeRowsU8Ref(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx,
                       const float* invScale, const std::int32_t* zeroPoint, bool perRow,
                       std::int32_t qmin, std::int32_t qmax, std::int32_t shift, std::uint8_t* u,
                       std::int64_t ldu);

// --- 4-bit weight-only GEMV / GEMM -------------------------------------------------------------

/// Elements per 64-byte chunk of the 4-bit layout; K is padded to a multiple of it.
constexpr std::int64_t kNibbleChunk = 128;
/// Scale groups of the 4-bit kernels are whole multiples of this many elements.
constexpr std::int64_t kNibbleGroupMultiple = 32;

/// 4-bit weights [N, K] with group scales, packed (layout in the file comment).
struct Nibble4PackedWeight {
    std::int64_t n = 0;
    std::int64_t k = 0;
    std::int64_t kPadded = 0;    ///< K rounded up to kNibbleChunk
    std::int64_t group = 0;      ///< elements per scale group, a multiple of 32
    std::int64_t groups = 0;     ///< ceil(K / group); the last group may be shorter (padding
                                 ///< beyond K reads the last group's scale; x is 0 there)
    float table[16] = {};        ///< value of each code
    AlignedArray<std::uint8_t> data;  ///< [N, kPadded / 2]
    AlignedArray<float> scale;        ///< [N, groups]
    AlignedArray<float> offset;       ///< [N, groups] (mn), or empty when every offset is 0
};

/// Packs codes u [N, K] (uint8 values 0..15, ldu elements per row) with scale / offset [N, G],
/// G = ceil(K / group) (offset may be null: all 0), for groups of `group` elements (a multiple
/// of 32). K is padded with the code `padCode`: any code, since the kernels require x to be 0
/// in the padding.
Nibble4PackedWeight packNibble4Weight(const std::uint8_t* u, std::int64_t n, std::int64_t k,
                                      std::int64_t ldu, std::int64_t group, const float* scale,
                                      const float* offset, const float table[16],
                                      std::uint8_t padCode);

/// y [M, N] = x [M, K] (row-major, ldx >= kPadded, elements in [K, kPadded) must be 0) times
/// the dequantized weights transposed, as the file comment says. AVX-512 (requires
/// cpuFeatures().avx512); rows of x are taken eight at a time. Multithreaded over N.
void nibble4GemmAvx512(const float* x, std::int64_t m, std::int64_t ldx,
                       const Nibble4PackedWeight& w, float* y);
/// The same on AVX2 + FMA (requires cpuFeatures().avx2): two vpermps on the halves of the
/// 16-entry table and a blend on the code's bit 3; rows of x four at a time.
void nibble4GemmAvx2(const float* x, std::int64_t m, std::int64_t ldx,
                     const Nibble4PackedWeight& w, float* y);
/// xsum [M, groups] = the float sum of each row's elements per scale group (in k order; the
/// last group runs to kPadded), the term the offsets multiply; empty when `w` has no offsets.
/// Shared by every row of the float-activation 4-bit GEMM.
AlignedArray<float> nibble4GroupSums(const float* x, std::int64_t m, std::int64_t ldx,
                                     const Nibble4PackedWeight& w);
/// Scalar twin (double accumulation: the exact value of the same formula, to check the fast
/// kernels' float rounding against).
void nibble4GemmRef(const float* x, std::int64_t m, std::int64_t ldx,
                    const Nibble4PackedWeight& w, float* y);

// --- int4 GEMV on VNNI (int8 activations per group) ---------------------------------------------
//
// For integer 4-bit codes (table = {0..15}: int4 / uint4 with a zero point in the offset) the
// activation row is quantized once per weight group to int8 and the inner products run on
// vpdpbusd (u8 nibble x s8 activation -> s32), as llama.cpp's Q4 x Q8 dot does. This changes
// the numerics: it is its own kernel (with a `_ref` twin, equal bit for bit), not a faster
// nibble4GemmAvx512. Per row of x and group g (elements [g * group, min(K, (g + 1) * group))):
//   amax = max |x_k|, d_g = amax / 127, q_k = clamp(round_half_even(x_k * (127 / amax)), +-127)
//   (q = 0, d = 0 for an all-zero group), xsum_g = sum_k x_k (float, in k order). Then
//   y[m, n] = sum_g ( float(sum_k u[n, k] q_k) * (s[n, g] * d_g) + mn[n, g] * xsum_g ),
//   accumulated over g in order with fused multiply-adds, starting from 0.
// Error against the float-activation result (nibble4GemmRef, exact up to float rounding):
//   |x_k - d_g q_k| <= d_g / 2, so
//   |y - y_exact| <= sum_g |s[n, g]| (d_g / 2) sum_{k in g} u[n, k]   (+ float32 rounding).
// Relative to the output it is about 1 / 254 of the group's largest |x| per weight, which
// averages out over K: tests/unit/test_lowbit_kernels.cpp checks the bound.
// A non-finite x in a group makes its d_g NaN, so that row's outputs are NaN.
// Packed layout: panels of 16 output channels; per panel, for each 8 consecutive k one 64-byte
// chunk whose byte 4 r + t holds channel r's element 8 j + t in its low nibble and 8 j + 4 + t
// in its high nibble (t = 0..3). One load and two masks give two vpdpbusd operands, each
// lane r summing 4 products of channel r. Scales and offsets are [panel][group][16].

/// Elements K is padded to for the VNNI 4-bit layout.
constexpr std::int64_t kNibbleVnniKMultiple = 32;
/// Output channels per panel of the VNNI 4-bit layout.
constexpr std::int64_t kNibbleVnniPanel = 16;
/// Largest group of the VNNI 4-bit kernel: a group's int32 sum of u * q is at most
/// 15 * 127 * group, under 2^31 up to 2^20 elements.
constexpr std::int64_t kNibbleVnniMaxGroup = std::int64_t{1} << 20;

/// Integer 4-bit weights [N, K] packed for nibble4GemvVnni (layout above).
struct Nibble4VnniPackedWeight {
    std::int64_t n = 0;
    std::int64_t k = 0;
    std::int64_t kPadded = 0;  ///< K rounded up to kNibbleVnniKMultiple
    std::int64_t group = 0;    ///< a multiple of 32
    std::int64_t groups = 0;   ///< ceil(K / group)
    AlignedArray<std::uint8_t> data;  ///< [ceil(N / 16)][kPadded / 8][64]
    AlignedArray<float> scale;        ///< [ceil(N / 16)][groups][16] (0 beyond N)
    AlignedArray<float> offset;       ///< the same shape, or empty when every offset is 0
};

/// Packs codes u [N, K] (values 0..15, weight = u * scale + offset) with scale / offset [N, G]
/// (offset may be null) for groups of `group` elements (a multiple of 32, at most
/// kNibbleVnniMaxGroup).
Nibble4VnniPackedWeight packNibble4Vnni(const std::uint8_t* u, std::int64_t n, std::int64_t k,
                                        std::int64_t ldu, std::int64_t group, const float* scale,
                                        const float* offset);

/// One row of activations quantized per group as described above: q [kPadded] (0 beyond K),
/// d [groups], xsum [groups]. AVX-512 or AVX2 when present (bit-identical to the scalar twin).
void quantizeGroupsQ8(const float* x, std::int64_t k, std::int64_t kPadded, std::int64_t group,
                      std::int8_t* q, float* d, float* xsum);
/// AVX2 row of quantizeGroupsQ8 (requires cpuFeatures().avx2), bit-identical to the twin.
void quantizeGroupsQ8Avx2(const float* x, std::int64_t k, std::int64_t kPadded,
                          std::int64_t group, std::int8_t* q, float* d, float* xsum);
/// Scalar twin of quantizeGroupsQ8.
void quantizeGroupsQ8Ref(const float* x, std::int64_t k, std::int64_t kPadded,
                         std::int64_t group, std::int8_t* q, float* d, float* xsum);

/// y [M, N] = the formula above for x [M, ldx] (ldx >= K; elements beyond K are not read).
/// AVX512-VNNI (requires cpuFeatures().avx512Vnni); threads over panels of output channels.
void nibble4GemvVnni(const float* x, std::int64_t m, std::int64_t ldx,
                     const Nibble4VnniPackedWeight& w, float* y);
/// nibble4GemvVnni on AVX2 (requires cpuFeatures().avx2): vpmaddubsw, exact since a code is at
/// most 15 and |q| at most 127 (a pair <= 3810); the same float steps, equal bit for bit.
void nibble4GemvQ8Avx2(const float* x, std::int64_t m, std::int64_t ldx,
                       const Nibble4VnniPackedWeight& w, float* y);
/// nibble4GemvVnni on AVX-VNNI (requires cpuFeatures().avxVnni), equal bit for bit.
void nibble4GemvQ8AvxVnni(const float* x, std::int64_t m, std::int64_t ldx,
                          const Nibble4VnniPackedWeight& w, float* y);
/// Scalar twin: the same float operations in the same order (equal bit for bit).
void nibble4GemvVnniRef(const float* x, std::int64_t m, std::int64_t ldx,
                        const Nibble4VnniPackedWeight& w, float* y);

// --- 16-bit float weight-only GEMM --------------------------------------------------------------
//
// Weights kept as IEEE binary16 (fp16) or bfloat16 bits, float32 activations, float32
// accumulation: half the bytes a float32 weight reads, and a batch-1 GEMV is bound by the bytes
// it reads. Widening is exact either way. fp16 goes through F16C's vcvtph2ps (every half is a
// float). bfloat16 is the top 16 bits of a float32, so zero-extending to 32 bits and shifting
// left by 16 gives the float: bf16 0x3FC0 -> float bits 0x3FC00000 = 1.5; bf16 0xC120 ->
// 0xC1200000 = -10.0. The rows differ only in the order of the float additions (8 or 16 lanes
// summed at the end), so they agree to float rounding, not bit for bit.

/// The 16-bit storage of a Float16Weight.
enum class Float16Kind { Fp16, Bf16 };

/// Weights w [N, K] as 16-bit floats, row-major with `ldw` elements per row (not owned: a
/// tensor's storage or a mapped file).
struct Float16Weight {
    const std::uint16_t* bits = nullptr;
    std::int64_t n = 0;
    std::int64_t k = 0;
    std::int64_t ldw = 0;
    Float16Kind kind = Float16Kind::Bf16;
};

/// The float an fp16 bit pattern holds (exact; subnormals, infinities and NaN included).
float fp16BitsToFloat(std::uint16_t bits);
/// The float a bfloat16 bit pattern holds (exact).
float bf16BitsToFloat(std::uint16_t bits);

/// y [M, N] (row-major, N per row) = x [M, ldx] (first K read) times w^T, plus bias [N] when not
/// null. AVX-512 (requires cpuFeatures().avx512); threads over blocks of output channels, rows
/// in groups of 4 so one read of a weight row serves four activation rows.
void float16GemmAvx512(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                       const float* bias, float* y);
/// The same on AVX2 + FMA + F16C (requires cpuFeatures().avx2).
void float16GemmAvx2(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                     const float* bias, float* y);
/// Scalar twin: each dot product summed in index order in float32.
void float16GemmRef(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                    const float* bias, float* y);

// --- float32 GEMV (batch-1 decode) -------------------------------------------------------------
//
// The float32 model's projections at one to a few activation rows (a decode step): each
// weight row read once from memory, dotted with every activation row. LibTorch's GEMV on this
// CPU runs MKL's generic (non-AVX-512) path on AMD (bench/RESULTS.md, "Decode tokens/s"), at a
// third of memory speed. The rows differ from each other and from LibTorch only in the order
// of the float additions (16 or 8 lanes summed at the end), so they agree to float rounding.

/// Weights w [N, K] as float32, row-major with `ldw` elements per row (not owned: a tensor's
/// storage or a mapped file).
struct Float32Weight {
    const float* data = nullptr;
    std::int64_t n = 0;
    std::int64_t k = 0;
    std::int64_t ldw = 0;
};

/// y [M, N] (row-major, N per row) = x [M, ldx] (first K read) times w^T, plus bias [N] when not
/// null. AVX-512 (requires cpuFeatures().avx512); threads over blocks of output channels, rows
/// in groups of 4 so one read of a weight row serves four activation rows.
void float32GemmAvx512(const float* x, std::int64_t m, std::int64_t ldx, const Float32Weight& w,
                       const float* bias, float* y);
/// The same on AVX2 + FMA (requires cpuFeatures().avx2).
void float32GemmAvx2(const float* x, std::int64_t m, std::int64_t ldx, const Float32Weight& w,
                     const float* bias, float* y);
/// Scalar twin: each dot product summed in index order in float32.
void float32GemmRef(const float* x, std::int64_t m, std::int64_t ldx, const Float32Weight& w,
                    const float* bias, float* y);

// --- dispatch: the fastest kernel the ISA level in force allows ---------------------------------
//
// Each operation has rows, one per ISA level that has a kernel for it, and the scalar `_ref`
// twin as the last row. The functions below run the highest row the level in force
// (kernels/cpu_features.h, BITLENS_ISA) allows; the *Kernel() functions say which one that is,
// so the engine and the reports can name it.

/// The implementation of an operation that runs at the ISA level in force.
struct KernelRow {
    IsaLevel level = IsaLevel::Scalar;  ///< the lowest level the row needs
    const char* name = "scalar";        ///< e.g. "avx512-vnni", "avx2", "scalar"
    /// True for the scalar reference: exact, but too slow to beat LibTorch's float kernels.
    bool isReference() const { return level == IsaLevel::Scalar; }
};

/// The int8 GEMM's row now: "avx512-vnni", "avx-vnni", "avx2" or "scalar" (an AVX-512 CPU
/// without VNNI takes the AVX-VNNI or AVX2 row).
KernelRow int8GemmKernel();
/// int8GemmVnni or whichever row int8GemmKernel() names (the same integers, exactly).
void int8Gemm(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc);
/// int8GemmVnniF32 or whichever row int8GemmKernel() names.
void int8GemmF32(const Int8Activations& x, const Int8PackedWeight& w,
                 const Int8Epilogue& epilogue, float* y);
/// The float-activation 4-bit GEMM's row now: "avx512", "avx2" or "scalar".
KernelRow nibble4GemmKernel();
/// nibble4GemmAvx512 or whichever row nibble4GemmKernel() names.
void nibble4Gemm(const float* x, std::int64_t m, std::int64_t ldx, const Nibble4PackedWeight& w,
                 float* y);
/// The int8-activation 4-bit GEMV's row now: "avx512-vnni", "avx-vnni", "avx2" or "scalar".
KernelRow nibble4GemvQ8Kernel();
/// nibble4GemvVnni or whichever row nibble4GemvQ8Kernel() names (equal bit for bit).
void nibble4GemvQ8(const float* x, std::int64_t m, std::int64_t ldx,
                   const Nibble4VnniPackedWeight& w, float* y);

/// The 16-bit weight-only GEMM's row now: "avx512", "avx2" or "scalar".
KernelRow float16GemmKernel();
/// float16GemmAvx512 or whichever row float16GemmKernel() names.
void float16Gemm(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                 const float* bias, float* y);

/// The float32 GEMV's row now: "avx512", "avx2" or "scalar" (scalar: callers keep LibTorch's
/// float op, which the reference does not beat).
KernelRow float32GemmKernel();
/// float32GemmAvx512 or whichever row float32GemmKernel() names.
void float32Gemm(const float* x, std::int64_t m, std::int64_t ldx, const Float32Weight& w,
                 const float* bias, float* y);

/// bitsandbytes' NF4 code values (code 7 is 0).
const float* nf4Table();
/// {0, 1, ..., 15}: integer codes.
const float* uint4Table();

// --- CUDA twins (core/kernels/cuda/lowbit.cu) ----------------------------------------------------

/// The 4-bit weights of `w` on the GPU (device memory, owned).
struct Nibble4DeviceWeight;
struct Nibble4DeviceDeleter {
    void operator()(Nibble4DeviceWeight* w) const;
};
using Nibble4DevicePtr = std::unique_ptr<Nibble4DeviceWeight, Nibble4DeviceDeleter>;

/// Copies packed weights to device 0; returns null with `error` set on failure (or no CUDA).
Nibble4DevicePtr uploadNibble4Weight(const Nibble4PackedWeight& w, std::string& error);
/// Largest M of the CUDA 4-bit GEMV.
constexpr std::int64_t kNibble4CudaMaxRows = 8;
/// y [M, N] = x [M, kPadded] times the weights on the device (device pointers, row-major,
/// contiguous), M in 1..kNibble4CudaMaxRows, on `stream` (a cudaStream_t; null = default).
/// Returns an empty string or the CUDA error.
std::string nibble4GemvCuda(const float* x, std::int64_t m, const Nibble4DeviceWeight& w,
                            float* y, void* stream);
/// Host convenience for tests and benchmarks: copies x in, runs `repeats` times, copies y out,
/// and returns the mean milliseconds of one run in `msPerRun` (CUDA events). Empty string or
/// the error.
std::string nibble4GemvCudaHost(const float* x, std::int64_t m, const Nibble4DeviceWeight& w,
                                float* y, int repeats, double* msPerRun);

} // namespace bitlens::kernels
