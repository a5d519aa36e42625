// ggml block formats. The quantizers follow ggml's reference quantizers (quantize_row_*_ref) step
// for step in float32 — same operations in the same order, same rounding helpers — because
// "bit-exact with ggml" is only reachable that way; the golden tests compare bytes with ggml
// itself (tests/data/ggml/make_golden.py). Blocks are copied into local structs with memcpy:
// blocks of 18 or 22 bytes leave the fp16 fields of later blocks unaligned.

#include "formats/ggml_quants.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace bitlens::formats {

static_assert(std::endian::native == std::endian::little, "GGUF blocks are little-endian");

namespace {

constexpr int kQK = 32;    // values per block of the legacy types
constexpr int kQKK = 256;  // values per super-block of the k-quants
/// ggml treats a group whose largest magnitude is below this as all zero.
constexpr float kGroupMaxEps = 1e-15f;

struct BlockQ4_0 { std::uint16_t d; std::uint8_t qs[kQK / 2]; };
struct BlockQ4_1 { std::uint16_t d, m; std::uint8_t qs[kQK / 2]; };
struct BlockQ5_0 { std::uint16_t d; std::uint8_t qh[4]; std::uint8_t qs[kQK / 2]; };
struct BlockQ5_1 { std::uint16_t d, m; std::uint8_t qh[4]; std::uint8_t qs[kQK / 2]; };
struct BlockQ8_0 { std::uint16_t d; std::int8_t qs[kQK]; };
struct BlockQ8_1 { std::uint16_t d, s; std::int8_t qs[kQK]; };
struct BlockQ2_K { std::uint8_t scales[kQKK / 16]; std::uint8_t qs[kQKK / 4]; std::uint16_t d, dmin; };
struct BlockQ3_K { std::uint8_t hmask[kQKK / 8]; std::uint8_t qs[kQKK / 4]; std::uint8_t scales[12]; std::uint16_t d; };
struct BlockQ4_K { std::uint16_t d, dmin; std::uint8_t scales[12]; std::uint8_t qs[kQKK / 2]; };
struct BlockQ5_K { std::uint16_t d, dmin; std::uint8_t scales[12]; std::uint8_t qh[kQKK / 8]; std::uint8_t qs[kQKK / 2]; };
struct BlockQ6_K { std::uint8_t ql[kQKK / 2]; std::uint8_t qh[kQKK / 4]; std::int8_t scales[kQKK / 16]; std::uint16_t d; };
struct BlockQ8_K { float d; std::int8_t qs[kQKK]; std::int16_t bsums[kQKK / 16]; };

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

template <typename Block>
Block loadBlock(const std::uint8_t* src, std::int64_t i)
{
    Block b;
    std::memcpy(&b, src + i * static_cast<std::int64_t>(sizeof(Block)), sizeof(Block));
    return b;
}

template <typename Block>
void storeBlock(const Block& b, std::uint8_t* dst, std::int64_t i)
{
    std::memcpy(dst + i * static_cast<std::int64_t>(sizeof(Block)), &b, sizeof(Block));
}

float h2f(std::uint16_t h) { return fp16ToFp32(h); }
std::uint16_t f2h(float f) { return fp32ToFp16(f); }

/// Round to nearest, ties to even, as ggml's nearest_int: adding 1.5 * 2^23 pushes the
/// fraction out of a float's mantissa (the addition itself rounds to even), and the low 22
/// mantissa bits then hold the integer offset by 2^22. Example: 2.5f + 12582912.f =
/// 12582914.f (the tie goes to even), bits & 0x7fffff = 0x400002, minus 0x400000 = 2.
/// Defined for |v| <= 2^22 - 1; the same bit operations run for any input, so out-of-range
/// values give exactly what ggml gives instead of undefined behaviour.
int nearestInt(float v)
{
    const float shifted = v + 12582912.f;
    std::int32_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

// ---------------------------------------------------------------- plain types

void f32ToFloat(const std::uint8_t* src, float* dst, std::int64_t n)
{
    std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
}
void f32FromFloat(const float* src, std::uint8_t* dst, std::int64_t n)
{
    std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
}

void f16ToFloat(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = h2f(h);
    }
}
void f16FromFloat(const float* src, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint16_t h = f2h(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
    }
}

void bf16ToFloat(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
        std::memcpy(dst + i, &bits, 4);
    }
}
void bf16FromFloat(const float* src, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint16_t h = fp32ToBf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
    }
}

template <typename T>
void intToFloat(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, src + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
        dst[i] = static_cast<float>(v);
    }
}

// ---------------------------------------------------------------- 32-value blocks

/// The value of largest magnitude (the first one on a tie) and its magnitude.
std::pair<float, float> signedAbsMax(const float* x, int n)
{
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return {max, amax};
}

std::pair<float, float> minMax(const float* x, int n)
{
    float lo = FLT_MAX;
    float hi = -FLT_MAX;
    for (int j = 0; j < n; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
    }
    return {lo, hi};
}

// Q4_0: d = max / -8 where max is the signed value of largest magnitude, so that value maps to
// code 0 exactly and the other end has room for +7. Codes: trunc(x / d + 8.5), at most 15.
// Example: max = -4 gives d = 0.5; x = 1.2 -> 1.2 * 2 + 8.5 = 10.9 -> code 10 -> (10-8)*0.5 = 1.
void q4_0FromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const auto [max, amax] = signedAbsMax(x, kQK);
        (void)amax;
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ4_0 b{};
        b.d = f2h(d);
        for (int j = 0; j < kQK / 2; ++j) {
            const auto lo = static_cast<std::uint8_t>(
                std::min<int>(15, static_cast<std::int8_t>(x[j] * id + 8.5f)));
            const auto hi = static_cast<std::uint8_t>(
                std::min<int>(15, static_cast<std::int8_t>(x[j + kQK / 2] * id + 8.5f)));
            b.qs[j] = static_cast<std::uint8_t>(lo | (hi << 4));
        }
        storeBlock(b, dst, i);
    }
}
void q4_0ToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const auto b = loadBlock<BlockQ4_0>(src, i);
        const float d = h2f(b.d);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = static_cast<float>((b.qs[j] & 0x0F) - 8) * d;
            y[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
        }
    }
}

// Q4_1: d = (max - min) / 15 and m = min; codes trunc((x - min) / d + 0.5), at most 15.
void q4_1FromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const auto [lo, hi] = minMax(x, kQK);
        const float d = (hi - lo) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ4_1 b{};
        b.d = f2h(d);
        b.m = f2h(lo);
        for (int j = 0; j < kQK / 2; ++j) {
            const auto a = static_cast<std::uint8_t>(
                std::min<int>(15, static_cast<std::int8_t>((x[j] - lo) * id + 0.5f)));
            const auto c = static_cast<std::uint8_t>(
                std::min<int>(15, static_cast<std::int8_t>((x[j + kQK / 2] - lo) * id + 0.5f)));
            b.qs[j] = static_cast<std::uint8_t>(a | (c << 4));
        }
        storeBlock(b, dst, i);
    }
}
void q4_1ToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const auto b = loadBlock<BlockQ4_1>(src, i);
        const float d = h2f(b.d);
        const float m = h2f(b.m);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = static_cast<float>(b.qs[j] & 0x0F) * d + m;
            y[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
        }
    }
}

/// Q5 codes: the low four bits in nibbles as Q4, the fifth bit of value j in bit j of qh.
void packQ5(const std::uint8_t* codes, std::uint8_t* qs, std::uint8_t* qhBytes)
{
    std::uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
        const std::uint8_t a = codes[j];
        const std::uint8_t c = codes[j + kQK / 2];
        qs[j] = static_cast<std::uint8_t>((a & 0x0F) | ((c & 0x0F) << 4));
        qh |= static_cast<std::uint32_t>((a & 0x10u) >> 4) << j;
        qh |= static_cast<std::uint32_t>((c & 0x10u) >> 4) << (j + kQK / 2);
    }
    std::memcpy(qhBytes, &qh, 4);
}
void unpackQ5(const std::uint8_t* qs, const std::uint8_t* qhBytes, int* codes)
{
    std::uint32_t qh;
    std::memcpy(&qh, qhBytes, 4);
    for (int j = 0; j < kQK / 2; ++j) {
        codes[j] = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10);
        codes[j + kQK / 2] = (qs[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
    }
}

// Q5_0: as Q4_0 with 32 levels: d = max / -16, codes trunc(x / d + 16.5), at most 31.
void q5_0FromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const auto [max, amax] = signedAbsMax(x, kQK);
        (void)amax;
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        std::uint8_t codes[kQK];
        for (int j = 0; j < kQK; ++j)
            codes[j] = static_cast<std::uint8_t>(
                std::min<int>(31, static_cast<std::int8_t>(x[j] * id + 16.5f)));
        BlockQ5_0 b{};
        b.d = f2h(d);
        packQ5(codes, b.qs, b.qh);
        storeBlock(b, dst, i);
    }
}
void q5_0ToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const auto b = loadBlock<BlockQ5_0>(src, i);
        const float d = h2f(b.d);
        int codes[kQK];
        unpackQ5(b.qs, b.qh, codes);
        for (int j = 0; j < kQK; ++j)
            y[j] = static_cast<float>(codes[j] - 16) * d;
    }
}

// Q5_1: as Q4_1 with 32 levels.
void q5_1FromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const auto [lo, hi] = minMax(x, kQK);
        const float d = (hi - lo) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        std::uint8_t codes[kQK];
        for (int j = 0; j < kQK; ++j)
            codes[j] = static_cast<std::uint8_t>(
                std::min<int>(31, static_cast<std::uint8_t>((x[j] - lo) * id + 0.5f)));
        BlockQ5_1 b{};
        b.d = f2h(d);
        b.m = f2h(lo);
        packQ5(codes, b.qs, b.qh);
        storeBlock(b, dst, i);
    }
}
void q5_1ToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const auto b = loadBlock<BlockQ5_1>(src, i);
        const float d = h2f(b.d);
        const float m = h2f(b.m);
        int codes[kQK];
        unpackQ5(b.qs, b.qh, codes);
        for (int j = 0; j < kQK; ++j)
            y[j] = static_cast<float>(codes[j]) * d + m;
    }
}

// Q8_0: d = absmax / 127, codes roundf(x / d): ties away from zero (unlike nearestInt).
void q8_0FromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j)
            amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ8_0 b{};
        b.d = f2h(d);
        for (int j = 0; j < kQK; ++j)
            b.qs[j] = static_cast<std::int8_t>(std::round(x[j] * id));
        storeBlock(b, dst, i);
    }
}
void q8_0ToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const auto b = loadBlock<BlockQ8_0>(src, i);
        const float d = h2f(b.d);
        for (int j = 0; j < kQK; ++j)
            y[j] = static_cast<float>(b.qs[j]) * d;
    }
}

// Q8_1: Q8_0 plus s = d * (sum of the codes), which dot products with Q4_1/Q5_1 use.
void q8_1FromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j)
            amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        BlockQ8_1 b{};
        b.d = f2h(d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) {
            b.qs[j] = static_cast<std::int8_t>(std::round(x[j] * id));
            sum += b.qs[j];
        }
        b.s = f2h(static_cast<float>(sum) * d);
        storeBlock(b, dst, i);
    }
}
void q8_1ToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const auto b = loadBlock<BlockQ8_1>(src, i);
        const float d = h2f(b.d);
        for (int j = 0; j < kQK; ++j)
            y[j] = static_cast<float>(b.qs[j]) * d;
    }
}

// ---------------------------------------------------------------- k-quant helpers

/// Symmetric codes for one group (ggml's make_qx_quants with weights x^2, "rmse_type 1"):
/// start from scale max / -nmax, then try 18 nearby scales and keep the one that minimises the
/// x^2-weighted squared error (solved in closed form for the scale given the codes). Writes
/// codes + nmax (0 .. 2 * nmax - 1) into L and returns the scale (negative when the value of
/// largest magnitude is positive: its code is -nmax).
float symmetricGroupCodes(int n, int nmax, const float* x, std::int8_t* L)
{
    float max = 0.0f;
    float amax = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        std::fill(L, L + n, std::int8_t{0});
        return 0.0f;
    }
    auto codeOf = [nmax](float v) { return std::max(-nmax, std::min(nmax - 1, nearestInt(v))); };
    float iscale = static_cast<float>(-nmax) / max;
    float sumlx = 0.0f;
    float suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = codeOf(iscale * x[i]);
        L[i] = static_cast<std::int8_t>(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0)
            continue;
        iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
        sumlx = 0.0f;
        suml2 = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = codeOf(iscale * x[i]);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * static_cast<float>(l);
            suml2 += w * static_cast<float>(l) * static_cast<float>(l);
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = static_cast<std::int8_t>(nmax + codeOf(iscale * x[i]));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/// Signed 3-bit codes with iterative refinement (ggml's make_q3_quants, do_rmse on): start from
/// max / -nmax, then up to five sweeps move single codes when that lowers the x^2-weighted
/// error. Writes codes + nmax into L; returns the scale.
float q3GroupCodes(int n, int nmax, const float* x, std::int8_t* L)
{
    float max = 0.0f;
    float amax = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        std::fill(L, L + n, std::int8_t{0});
        return 0.0f;
    }
    const float iscale = static_cast<float>(-nmax) / max;
    float sumlx = 0.0f;
    float suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = std::max(-nmax, std::min(nmax - 1, nearestInt(iscale * x[i])));
        L[i] = static_cast<std::int8_t>(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    for (int sweep = 0; sweep < 5; ++sweep) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
            if (slx > 0.0f) {
                float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
                int candidate = nearestInt(x[i] * sl2 / slx);
                candidate = std::max(-nmax, std::min(nmax - 1, candidate));
                if (candidate != L[i]) {
                    slx += w * x[i] * static_cast<float>(candidate);
                    sl2 += w * static_cast<float>(candidate) * static_cast<float>(candidate);
                    if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = static_cast<std::int8_t>(candidate);
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (changed == 0)
            break;
    }
    for (int i = 0; i < n; ++i)
        L[i] = static_cast<std::int8_t>(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/// Asymmetric codes 0..nmax for one group with scale and min (ggml's make_qkx2_quants): the
/// min is clamped to <= 0, the first guess spans [min, max], then nstep + 1 candidate scales
/// (nmax + rmin + rdelta * k levels over the range) are tried; for each, scale and min are the
/// weighted least-squares fit to the rounded codes (min clamped to <= 0 again) and the fit with
/// the lowest weighted error (absolute when useMad, else squared) wins. Returns the scale and
/// stores -min (>= 0) in theMin.
float asymmetricGroupCodes(int n, int nmax, const float* x, const float* weights,
                           std::uint8_t* L, float* theMin, float rmin, float rdelta, int nstep,
                           bool useMad)
{
    std::uint8_t laux[32];
    float min = x[0];
    float max = x[0];
    float sumW = weights[0];
    float sumX = sumW * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        const float w = weights[i];
        sumW += w;
        sumX += w * x[i];
    }
    if (min > 0.0f)
        min = 0.0f;
    if (max == min) {
        std::fill(L, L + n, std::uint8_t{0});
        *theMin = -min;
        return 0.0f;
    }
    auto errorOf = [useMad](float diff) { return useMad ? std::fabs(diff) : diff * diff; };
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1.0f / iscale;
    float bestError = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = nearestInt(iscale * (x[i] - min));
        L[i] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
        const float diff = scale * static_cast<float>(L[i]) + min - x[i];
        bestError += weights[i] * errorOf(diff);
    }
    if (nstep < 1) {
        *theMin = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
        float sumL = 0.0f;
        float sumL2 = 0.0f;
        float sumXL = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = std::max(0, std::min(nmax, nearestInt(iscale * (x[i] - min))));
            laux[i] = static_cast<std::uint8_t>(l);
            const float w = weights[i];
            const float fl = static_cast<float>(l);
            sumL += w * fl;
            sumL2 += w * fl * fl;
            sumXL += w * fl * x[i];
        }
        const float D = sumW * sumL2 - sumL * sumL;
        if (D > 0.0f) {
            float thisScale = (sumW * sumXL - sumX * sumL) / D;
            float thisMin = (sumL2 * sumX - sumL * sumXL) / D;
            if (thisMin > 0.0f) {
                thisMin = 0.0f;
                thisScale = sumXL / sumL2;
            }
            float error = 0.0f;
            for (int i = 0; i < n; ++i) {
                const float diff = thisScale * static_cast<float>(laux[i]) + thisMin - x[i];
                error += weights[i] * errorOf(diff);
            }
            if (error < bestError) {
                std::copy(laux, laux + n, L);
                bestError = error;
                scale = thisScale;
                min = thisMin;
            }
        }
    }
    *theMin = -min;
    return scale;
}

/// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K super-block. Bytes 0-3 hold the
/// scales of sub-blocks 0-3 (low 6 bits), bytes 4-7 their mins; sub-blocks 4-7 keep their low
/// four bits in bytes 8-11 (scale low nibble, min high nibble) and their top two bits in the
/// spare top bits of bytes 0-3 (scales) and 4-7 (mins).
void scaleMinK4(int j, const std::uint8_t* q, std::uint8_t* d, std::uint8_t* m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void packScaleMinK4(int j, std::uint8_t ls, std::uint8_t lm, std::uint8_t* scales)
{
    if (j < 4) {
        scales[j] = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        scales[j - 4] = static_cast<std::uint8_t>(scales[j - 4] | ((ls >> 4) << 6));
        scales[j] = static_cast<std::uint8_t>(scales[j] | ((lm >> 4) << 6));
    }
}

/// Q4_K / Q5_K super-block: eight sub-blocks of 32 with their own scale and min, which are
/// themselves quantized to 6 bits against the super-block's fp16 d and dmin; the codes are then
/// recomputed against the stored scales. Sub-blocks whose stored scale is 0 keep their codes
/// from the first pass, as ggml does.
void quantizeK4Superblock(const float* x, int nmax, float rmin, float rdelta, int nstep,
                          std::uint16_t* dOut, std::uint16_t* dminOut, std::uint8_t* scalesOut,
                          std::uint8_t* L)
{
    float weights[32];
    float mins[kQKK / 32];
    float scales[kQKK / 32];
    float maxScale = 0.0f;
    float maxMin = 0.0f;
    for (int j = 0; j < kQKK / 32; ++j) {
        const float* xs = x + 32 * j;
        float sumX2 = 0.0f;
        for (int l = 0; l < 32; ++l)
            sumX2 += xs[l] * xs[l];
        const float avX = std::sqrt(sumX2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = avX + std::fabs(xs[l]);
        scales[j] = asymmetricGroupCodes(32, nmax, xs, weights, L + 32 * j, &mins[j], rmin,
                                         rdelta, nstep, false);
        maxScale = std::max(maxScale, scales[j]);
        maxMin = std::max(maxMin, mins[j]);
    }
    const float invScale = maxScale > 0.0f ? 63.f / maxScale : 0.0f;
    const float invMin = maxMin > 0.0f ? 63.f / maxMin : 0.0f;
    std::fill(scalesOut, scalesOut + 12, std::uint8_t{0});
    for (int j = 0; j < kQKK / 32; ++j) {
        const auto ls = static_cast<std::uint8_t>(
            std::min<int>(63, static_cast<std::uint8_t>(nearestInt(invScale * scales[j]))));
        const auto lm = static_cast<std::uint8_t>(
            std::min<int>(63, static_cast<std::uint8_t>(nearestInt(invMin * mins[j]))));
        packScaleMinK4(j, ls, lm, scalesOut);
    }
    *dOut = f2h(maxScale / 63.f);
    *dminOut = f2h(maxMin / 63.f);
    for (int j = 0; j < kQKK / 32; ++j) {
        std::uint8_t sc;
        std::uint8_t m;
        scaleMinK4(j, scalesOut, &sc, &m);
        const float d = h2f(*dOut) * static_cast<float>(sc);
        if (d == 0.0f)
            continue;
        const float dm = h2f(*dminOut) * static_cast<float>(m);
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearestInt((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
        }
    }
}

// ---------------------------------------------------------------- Q2_K

void q2_KFromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    const float q4scale = 15.f;
    for (std::int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
        std::uint8_t L[kQKK];
        float weights[16];
        float mins[kQKK / 16];
        float scales[kQKK / 16];
        float maxScale = 0.0f;
        float maxMin = 0.0f;
        for (int j = 0; j < kQKK / 16; ++j) {
            for (int l = 0; l < 16; ++l)
                weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = asymmetricGroupCodes(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j],
                                             -0.5f, 0.1f, 15, true);
            maxScale = std::max(maxScale, scales[j]);
            maxMin = std::max(maxMin, mins[j]);
        }
        BlockQ2_K b{};
        if (maxScale > 0.0f) {
            const float iscale = q4scale / maxScale;
            for (int j = 0; j < kQKK / 16; ++j)
                b.scales[j] = static_cast<std::uint8_t>(nearestInt(iscale * scales[j]));
            b.d = f2h(maxScale / q4scale);
        } else {
            b.d = f2h(0.0f);
        }
        if (maxMin > 0.0f) {
            const float iscale = q4scale / maxMin;
            for (int j = 0; j < kQKK / 16; ++j)
                b.scales[j] = static_cast<std::uint8_t>(b.scales[j] |
                                                        (nearestInt(iscale * mins[j]) << 4));
            b.dmin = f2h(maxMin / q4scale);
        } else {
            b.dmin = f2h(0.0f);
        }
        for (int j = 0; j < kQKK / 16; ++j) {
            const float d = h2f(b.d) * static_cast<float>(b.scales[j] & 0xF);
            if (d == 0.0f)
                continue;
            const float dm = h2f(b.dmin) * static_cast<float>(b.scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearestInt((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = static_cast<std::uint8_t>(std::max(0, std::min(3, l)));
            }
        }
        // Four 2-bit codes per byte: byte l of each 32-byte chunk holds values l, l+32, l+64,
        // l+96 of its 128-value half, lowest bits first.
        for (int j = 0; j < kQKK; j += 128)
            for (int l = 0; l < 32; ++l)
                b.qs[j / 4 + l] = static_cast<std::uint8_t>(
                    L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        storeBlock(b, dst, i);
    }
}
void q2_KToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i) {
        const auto b = loadBlock<BlockQ2_K>(src, i);
        const float d = h2f(b.d);
        const float min = h2f(b.dmin);
        const std::uint8_t* q = b.qs;
        int is = 0;
        for (int half = 0; half < kQKK; half += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part) {
                    const std::uint8_t sc = b.scales[is++];
                    const float dl = d * static_cast<float>(sc & 0xF);
                    const float ml = min * static_cast<float>(sc >> 4);
                    for (int l = 0; l < 16; ++l)
                        *y++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
                }
            }
            q += 32;
        }
    }
}

// ---------------------------------------------------------------- Q3_K

/// The signed 6-bit scale of sub-block j of a Q3_K block: low nibble in byte j (j < 8) or the
/// high nibble of byte j - 8, top two bits in byte 8 + j % 4 at bit 2 * (j / 4); minus 32.
int q3Scale(const std::uint8_t* scales, int j)
{
    const int low = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
    const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

void q3_KFromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
        std::int8_t L[kQKK];
        float scales[kQKK / 16];
        float maxScale = 0.0f;
        float amax = 0.0f;
        for (int j = 0; j < kQKK / 16; ++j) {
            scales[j] = q3GroupCodes(16, 4, x + 16 * j, L + 16 * j);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                maxScale = scales[j];
            }
        }
        BlockQ3_K b{};
        if (maxScale != 0.0f) {
            const float iscale = -32.f / maxScale;
            for (int j = 0; j < kQKK / 16; ++j) {
                // ggml narrows to int8 before clamping; the value is within [-32, 32] here.
                auto l8 = static_cast<std::int8_t>(nearestInt(iscale * scales[j]));
                int l = std::max<int>(-32, std::min<int>(31, l8)) + 32;
                if (j < 8)
                    b.scales[j] = static_cast<std::uint8_t>(l & 0xF);
                else
                    b.scales[j - 8] = static_cast<std::uint8_t>(b.scales[j - 8] | ((l & 0xF) << 4));
                l >>= 4;
                b.scales[j % 4 + 8] =
                    static_cast<std::uint8_t>(b.scales[j % 4 + 8] | (l << (2 * (j / 4))));
            }
            b.d = f2h(1 / iscale);
        } else {
            b.d = f2h(0.0f);
        }
        for (int j = 0; j < kQKK / 16; ++j) {
            const float d = h2f(b.d) * static_cast<float>(q3Scale(b.scales, j));
            if (d == 0.0f)
                continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearestInt(x[16 * j + ii] / d);
                L[16 * j + ii] = static_cast<std::int8_t>(std::max(-4, std::min(3, l)) + 4);
            }
        }
        // The third bit of value j goes to hmask[j % 32] at bit j / 32.
        for (int j = 0; j < kQKK; ++j) {
            if (L[j] > 3) {
                b.hmask[j % 32] = static_cast<std::uint8_t>(b.hmask[j % 32] | (1 << (j / 32)));
                L[j] = static_cast<std::int8_t>(L[j] - 4);
            }
        }
        for (int j = 0; j < kQKK; j += 128)
            for (int l = 0; l < 32; ++l)
                b.qs[j / 4 + l] = static_cast<std::uint8_t>(
                    L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        storeBlock(b, dst, i);
    }
}
void q3_KToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i) {
        const auto b = loadBlock<BlockQ3_K>(src, i);
        const float dAll = h2f(b.d);
        const std::uint8_t* q = b.qs;
        int is = 0;
        int bit = 0;
        for (int half = 0; half < kQKK; half += 128) {
            for (int shift = 0; shift < 8; shift += 2, ++bit) {
                for (int part = 0; part < 2; ++part) {
                    const float dl = dAll * static_cast<float>(q3Scale(b.scales, is++));
                    for (int l = 0; l < 16; ++l) {
                        const int k = l + 16 * part;
                        const int low = (q[k] >> shift) & 3;
                        const int high = (b.hmask[k] >> bit) & 1 ? 0 : 4;
                        *y++ = dl * static_cast<float>(low - high);
                    }
                }
            }
            q += 32;
        }
    }
}

// ---------------------------------------------------------------- Q4_K / Q5_K

void q4_KFromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
        std::uint8_t L[kQKK];
        BlockQ4_K b{};
        quantizeK4Superblock(x, 15, -1.f, 0.1f, 20, &b.d, &b.dmin, b.scales, L);
        // Each 32-byte chunk holds 64 values: the first 32 in low nibbles, the next 32 high.
        for (int j = 0; j < kQKK; j += 64)
            for (int l = 0; l < 32; ++l)
                b.qs[j / 2 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
        storeBlock(b, dst, i);
    }
}
void q4_KToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i) {
        const auto b = loadBlock<BlockQ4_K>(src, i);
        const float d = h2f(b.d);
        const float min = h2f(b.dmin);
        for (int j = 0; j < kQKK / 64; ++j) {
            std::uint8_t sc;
            std::uint8_t m;
            scaleMinK4(2 * j, b.scales, &sc, &m);
            const float d1 = d * static_cast<float>(sc);
            const float m1 = min * static_cast<float>(m);
            scaleMinK4(2 * j + 1, b.scales, &sc, &m);
            const float d2 = d * static_cast<float>(sc);
            const float m2 = min * static_cast<float>(m);
            const std::uint8_t* q = b.qs + 32 * j;
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        }
    }
}

void q5_KFromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
        std::uint8_t L[kQKK];
        BlockQ5_K b{};
        quantizeK4Superblock(x, 31, -0.5f, 0.1f, 15, &b.d, &b.dmin, b.scales, L);
        // As Q4_K for the low four bits; the fifth bit of chunk c's values goes to qh at bit
        // 2c (first 32 values) and 2c + 1 (next 32).
        for (int c = 0; c < kQKK / 64; ++c) {
            for (int l = 0; l < 32; ++l) {
                int l1 = L[64 * c + l];
                int l2 = L[64 * c + l + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    b.qh[l] = static_cast<std::uint8_t>(b.qh[l] | (1 << (2 * c)));
                }
                if (l2 > 15) {
                    l2 -= 16;
                    b.qh[l] = static_cast<std::uint8_t>(b.qh[l] | (2 << (2 * c)));
                }
                b.qs[32 * c + l] = static_cast<std::uint8_t>(l1 | (l2 << 4));
            }
        }
        storeBlock(b, dst, i);
    }
}
void q5_KToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i) {
        const auto b = loadBlock<BlockQ5_K>(src, i);
        const float d = h2f(b.d);
        const float min = h2f(b.dmin);
        for (int c = 0; c < kQKK / 64; ++c) {
            std::uint8_t sc;
            std::uint8_t m;
            scaleMinK4(2 * c, b.scales, &sc, &m);
            const float d1 = d * static_cast<float>(sc);
            const float m1 = min * static_cast<float>(m);
            scaleMinK4(2 * c + 1, b.scales, &sc, &m);
            const float d2 = d * static_cast<float>(sc);
            const float m2 = min * static_cast<float>(m);
            const std::uint8_t* ql = b.qs + 32 * c;
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((b.qh[l] >> (2 * c)) & 1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((b.qh[l] >> (2 * c + 1)) & 1 ? 16 : 0)) - m2;
        }
    }
}

// ---------------------------------------------------------------- Q6_K

void q6_KFromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
        std::int8_t L[kQKK];
        float scales[kQKK / 16];
        float maxScale = 0.0f;
        float maxAbsScale = 0.0f;
        for (int ib = 0; ib < kQKK / 16; ++ib) {
            scales[ib] = symmetricGroupCodes(16, 32, x + 16 * ib, L + 16 * ib);
            const float absScale = std::fabs(scales[ib]);
            if (absScale > maxAbsScale) {
                maxAbsScale = absScale;
                maxScale = scales[ib];
            }
        }
        BlockQ6_K b{};
        if (maxAbsScale < kGroupMaxEps) {
            storeBlock(b, dst, i);  // all zero, d = +0
            continue;
        }
        const float iscale = -128.f / maxScale;
        b.d = f2h(1 / iscale);
        for (int ib = 0; ib < kQKK / 16; ++ib)
            b.scales[ib] = static_cast<std::int8_t>(std::min(127, nearestInt(iscale * scales[ib])));
        for (int j = 0; j < kQKK / 16; ++j) {
            const float d = h2f(b.d) * static_cast<float>(b.scales[j]);
            if (d == 0.0f)
                continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearestInt(x[16 * j + ii] / d);
                L[16 * j + ii] = static_cast<std::int8_t>(std::max(-32, std::min(31, l)) + 32);
            }
        }
        // Per 128 values: ql[l] holds values l (low nibble) and l+64 (high), ql[l+32] values
        // l+32 and l+96; qh[l] holds the top two bits of l, l+32, l+64, l+96 (lowest first).
        for (int half = 0; half < 2; ++half) {
            const std::int8_t* Lh = L + 128 * half;
            std::uint8_t* ql = b.ql + 64 * half;
            std::uint8_t* qh = b.qh + 32 * half;
            for (int l = 0; l < 32; ++l) {
                const int q1 = Lh[l] & 0xF;
                const int q2 = Lh[l + 32] & 0xF;
                const int q3 = Lh[l + 64] & 0xF;
                const int q4 = Lh[l + 96] & 0xF;
                ql[l] = static_cast<std::uint8_t>(q1 | (q3 << 4));
                ql[l + 32] = static_cast<std::uint8_t>(q2 | (q4 << 4));
                qh[l] = static_cast<std::uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                                  ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
        storeBlock(b, dst, i);
    }
}
void q6_KToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i) {
        const auto b = loadBlock<BlockQ6_K>(src, i);
        const float d = h2f(b.d);
        for (int half = 0; half < 2; ++half) {
            const std::uint8_t* ql = b.ql + 64 * half;
            const std::uint8_t* qh = b.qh + 32 * half;
            const std::int8_t* sc = b.scales + 8 * half;
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
                y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
            y += 128;
        }
    }
}

// ---------------------------------------------------------------- Q8_K

// Q8_K: d = max / -127 in float32 (not fp16), codes nearestInt(x / d) capped at 127, plus the
// sum of every 16 codes. The intermediate type of k-quant dot products.
void q8_KFromFloat(const float* x, std::uint8_t* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
        float max = 0.0f;
        float amax = 0.0f;
        for (int j = 0; j < kQKK; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        BlockQ8_K b{};
        if (amax == 0.0f) {
            storeBlock(b, dst, i);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < kQKK; ++j)
            b.qs[j] = static_cast<std::int8_t>(std::min(127, nearestInt(iscale * x[j])));
        for (int j = 0; j < kQKK / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii)
                sum += b.qs[16 * j + ii];
            b.bsums[j] = static_cast<std::int16_t>(sum);
        }
        b.d = 1 / iscale;
        storeBlock(b, dst, i);
    }
}
void q8_KToFloat(const std::uint8_t* src, float* y, std::int64_t n)
{
    for (std::int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
        const auto b = loadBlock<BlockQ8_K>(src, i);
        for (int j = 0; j < kQKK; ++j)
            y[j] = b.d * static_cast<float>(b.qs[j]);
    }
}

/// ggml's MXFP4 (block_mxfp4): per 32 values one E8M0 exponent byte e, then 16 bytes whose low
/// nibbles are values 0..15 and high nibbles 16..31, each an E2M1 bit pattern. ggml stores the
/// element table doubled (kvalues_mxfp4 = 0, 1, 2, 3, 4, 6, 8, 12, ...) and multiplies by
/// GGML_E8M0_TO_FP32_HALF(e) = 2^(e - 128), so a value is E2M1 x 2^(e - 127), OCP's rule.
constexpr float kMxfp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/// GGML_E8M0_TO_FP32_HALF: 2^(e - 128) in float32, e = 0 and 1 the subnormals 2^-128, 2^-127.
float e8m0Half(std::uint8_t e)
{
    const std::uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<std::uint32_t>(e - 1) << 23);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

void mxfp4ToFloat(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t b = 0; b < n / 32; ++b, src += 17, dst += 32) {
        const float d = e8m0Half(src[0]);
        for (int j = 0; j < 16; ++j) {
            dst[j] = kMxfp4Doubled[src[1 + j] & 0x0F] * d;
            dst[j + 16] = kMxfp4Doubled[src[1 + j] >> 4] * d;
        }
    }
}

using T = GgmlType;

constexpr GgmlTypeTraits kTraits[] = {
    {T::F32, "F32", 1, 4, f32ToFloat, f32FromFloat},
    {T::F16, "F16", 1, 2, f16ToFloat, f16FromFloat},
    {T::Q4_0, "Q4_0", 32, 18, q4_0ToFloat, q4_0FromFloat},
    {T::Q4_1, "Q4_1", 32, 20, q4_1ToFloat, q4_1FromFloat},
    {T::Q5_0, "Q5_0", 32, 22, q5_0ToFloat, q5_0FromFloat},
    {T::Q5_1, "Q5_1", 32, 24, q5_1ToFloat, q5_1FromFloat},
    {T::Q8_0, "Q8_0", 32, 34, q8_0ToFloat, q8_0FromFloat},
    {T::Q8_1, "Q8_1", 32, 36, q8_1ToFloat, q8_1FromFloat},
    {T::Q2_K, "Q2_K", 256, 84, q2_KToFloat, q2_KFromFloat},
    {T::Q3_K, "Q3_K", 256, 110, q3_KToFloat, q3_KFromFloat},
    {T::Q4_K, "Q4_K", 256, 144, q4_KToFloat, q4_KFromFloat},
    {T::Q5_K, "Q5_K", 256, 176, q5_KToFloat, q5_KFromFloat},
    {T::Q6_K, "Q6_K", 256, 210, q6_KToFloat, q6_KFromFloat},
    {T::Q8_K, "Q8_K", 256, 292, q8_KToFloat, q8_KFromFloat},
    {T::IQ2_XXS, "IQ2_XXS", 256, 66, nullptr, nullptr},
    {T::IQ2_XS, "IQ2_XS", 256, 74, nullptr, nullptr},
    {T::IQ3_XXS, "IQ3_XXS", 256, 98, nullptr, nullptr},
    {T::IQ1_S, "IQ1_S", 256, 50, nullptr, nullptr},
    {T::IQ4_NL, "IQ4_NL", 32, 18, nullptr, nullptr},
    {T::IQ3_S, "IQ3_S", 256, 110, nullptr, nullptr},
    {T::IQ2_S, "IQ2_S", 256, 82, nullptr, nullptr},
    {T::IQ4_XS, "IQ4_XS", 256, 136, nullptr, nullptr},
    {T::I8, "I8", 1, 1, intToFloat<std::int8_t>, nullptr},
    {T::I16, "I16", 1, 2, intToFloat<std::int16_t>, nullptr},
    {T::I32, "I32", 1, 4, intToFloat<std::int32_t>, nullptr},
    {T::I64, "I64", 1, 8, intToFloat<std::int64_t>, nullptr},
    {T::F64, "F64", 1, 8, intToFloat<double>, nullptr},
    {T::IQ1_M, "IQ1_M", 256, 56, nullptr, nullptr},
    {T::BF16, "BF16", 1, 2, bf16ToFloat, bf16FromFloat},
    {T::TQ1_0, "TQ1_0", 256, 54, nullptr, nullptr},
    {T::TQ2_0, "TQ2_0", 256, 66, nullptr, nullptr},
    {T::MXFP4, "MXFP4", 32, 17, mxfp4ToFloat, nullptr},
};

bool isPlainFloat(GgmlType type)
{
    return type == T::F32 || type == T::F16 || type == T::BF16;
}

} // namespace

std::uint16_t fp32ToFp16(float value) { return c10::detail::fp16_ieee_from_fp32_value(value); }

float fp16ToFp32(std::uint16_t bits) { return c10::detail::fp16_ieee_to_fp32_value(bits); }

std::uint16_t fp32ToBf16(float value)
{
    std::uint32_t u;
    std::memcpy(&u, &value, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep sign and payload top, force quiet
        return static_cast<std::uint16_t>((u >> 16) | 64);
    // Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate.
    // 0x3f808000 (1.00390625, exactly halfway) -> 0x3f80 (even); 0x3f818000 -> 0x3f82.
    return static_cast<std::uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

std::span<const GgmlTypeTraits> allGgmlTypes() { return kTraits; }

const GgmlTypeTraits* ggmlTraits(std::uint32_t id)
{
    for (const GgmlTypeTraits& t : kTraits)
        if (static_cast<std::uint32_t>(t.type) == id)
            return &t;
    return nullptr;
}

const GgmlTypeTraits& ggmlTraits(GgmlType type)
{
    return *ggmlTraits(static_cast<std::uint32_t>(type));
}

std::optional<GgmlType> ggmlTypeFromName(std::string_view name)
{
    for (const GgmlTypeTraits& t : kTraits) {
        if (t.name.size() != name.size())
            continue;
        bool same = true;
        for (std::size_t i = 0; i < name.size() && same; ++i)
            same = std::toupper(static_cast<unsigned char>(name[i])) == t.name[i];
        if (same)
            return t.type;
    }
    return std::nullopt;
}

std::optional<std::int64_t> ggmlBytes(GgmlType type, std::int64_t n)
{
    const GgmlTypeTraits& t = ggmlTraits(type);
    if (n < 0 || n % t.blockSize != 0)
        return std::nullopt;
    const std::int64_t blocks = n / t.blockSize;
    if (blocks > std::numeric_limits<std::int64_t>::max() / t.typeSize)
        return std::nullopt;
    return blocks * t.typeSize;
}

Result<std::vector<std::uint8_t>> ggmlQuantize(std::span<const float> src, GgmlType type)
{
    const GgmlTypeTraits& t = ggmlTraits(type);
    if (!t.fromFloatRef)
        return Error::unsupported({}, "BitLens has no quantizer for ggml type " + std::string(t.name));
    const auto n = static_cast<std::int64_t>(src.size());
    const auto bytes = ggmlBytes(type, n);
    if (!bytes)
        return Error::usage(std::to_string(n) + " values are not a whole number of " +
                            std::string(t.name) + " blocks of " + std::to_string(t.blockSize));
    if (!isPlainFloat(type)) {
        for (std::int64_t i = 0; i < n; ++i)
            if (!std::isfinite(src[static_cast<std::size_t>(i)]))
                return Error::badInput({}, "value " + std::to_string(i) + " is " +
                                               (std::isnan(src[static_cast<std::size_t>(i)]) ? "NaN" : "infinite") +
                                               ": " + std::string(t.name) + " blocks cannot hold it");
    }
    std::vector<std::uint8_t> out(static_cast<std::size_t>(*bytes));
    if (n > 0)
        t.fromFloatRef(src.data(), out.data(), n);
    return out;
}

Result<void> ggmlDequantize(std::span<const std::uint8_t> src, GgmlType type, std::span<float> dst)
{
    const GgmlTypeTraits& t = ggmlTraits(type);
    if (!t.toFloat)
        return Error::unsupported({}, "BitLens cannot dequantize ggml type " + std::string(t.name));
    const auto n = static_cast<std::int64_t>(dst.size());
    const auto bytes = ggmlBytes(type, n);
    if (!bytes || static_cast<std::uint64_t>(*bytes) != src.size())
        return Error::usage(std::to_string(src.size()) + " bytes do not hold " + std::to_string(n) +
                            " values of " + std::string(t.name));
    if (n > 0)
        t.toFloat(src.data(), dst.data(), n);
    return {};
}

Result<std::vector<std::uint8_t>> packMxfp4(std::span<const std::uint8_t> codes,
                                            std::span<const std::uint8_t> exponents)
{
    if (codes.size() % 32 != 0 || exponents.size() != codes.size() / 32)
        return Error::usage("MXFP4 packs 32 codes per exponent: " + std::to_string(codes.size()) +
                            " codes, " + std::to_string(exponents.size()) + " exponents");
    std::vector<std::uint8_t> out(exponents.size() * 17);
    for (std::size_t b = 0; b < exponents.size(); ++b) {
        std::uint8_t* block = out.data() + 17 * b;
        const std::uint8_t* c = codes.data() + 32 * b;
        block[0] = exponents[b];
        for (int j = 0; j < 16; ++j) {
            if ((c[j] | c[j + 16]) > 15)
                return Error::usage("an E2M1 code is a 4-bit pattern, not " +
                                    std::to_string(std::max(c[j], c[j + 16])));
            block[1 + j] = static_cast<std::uint8_t>(c[j] | (c[j + 16] << 4));
        }
    }
    return out;
}

} // namespace bitlens::formats
