// AVX2 (+ FMA, F16C) and AVX-VNNI low-bit kernels (kernels/lowbit.h): what desktops without
// AVX-512 run. Every function here carries its own target attribute (no global -mavx flags), so
// the library still loads on any x86-64; the dispatch (lowbit_dispatch.cpp) calls them only when
// cpuFeatures() has the ISA.
//
// int8 GEMM on AVX2, and why not vpmaddubsw: vpmaddubsw multiplies u8 by s8 and adds pairs into
// int16 with saturation; a pair of u = 255, w = -128 gives 2 * 255 * -128 = -65280, far below
// -32768, so it would clamp. Instead both operands are widened to int16 and vpmaddwd adds pairs
// into int32, which never saturates: |255 * -128 * 2| = 65280. The activation codes u (0..255)
// are widened once per GEMM (an int16 copy of x, M * kPadded * 2 bytes), the weights on the fly
// from the packed AVX-512 layout with vpmovsxbw (shared by all rows of a tile, so no second
// packed copy is needed). 16 bytes = 4 channels x 4 k widen to 16 int16; the activations
// broadcast as [u0 u1 u2 u3] per 64-bit lane, so vpmaddwd gives per channel two partial sums
// (k0 + k1 and k2 + k3) in adjacent int32 lanes, added by one vphaddd after the K loop.
// Worked example, channel 0 with w = [2, -1, 5, 0], u = [200, 3, 1, 9]: lanes 200 * 2 + 3 * -1
// = 397 and 1 * 5 + 9 * 0 = 5, hadd 402. The zero point is taken off at the end as on AVX-512:
// acc = sum u * w - zx * colSum (two's complement, exact).
//
// Weights on 7 bits (|w| <= 64, the `reduce-range` option, what onnxruntime's reduce_range and
// PyTorch's fbgemm rely on for the same reason) make vpmaddubsw exact: a pair is at most
// 2 * 255 * 64 = 32640 <= 32767. Then the bytes go in unwidened, 32 multiply-adds per
// vpmaddubsw, a vpmaddwd with ones takes the int16 pairs to int32, and vpaddd accumulates:
// 3 uops per 32 MACs (2 on the multiply ports) against the widened scheme's 4 per 32, and no
// vpmovsxbw per tile. Same packed layout and result as the VNNI tile; the packer records the
// largest |code| (Int8PackedWeight::maxAbsCode) and the driver picks the tile from it, so the
// choice can never change a result.

#include "kernels/lowbit.h"

#include <ATen/Parallel.h>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#define BITLENS_AVX2 __attribute__((target("avx2,fma,f16c")))
#define BITLENS_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace bitlens::kernels {

namespace {

// --- shared helpers -----------------------------------------------------------------------------

/// Lanes [0, count) set (count clamped to 0..8): the mask of vpmaskmovd / vmaskmovps.
BITLENS_AVX2 __m256i laneMask(std::int64_t count)
{
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<std::int64_t>(count, 0, 8))),
                              lanes);
}

BITLENS_AVX2 float reduceAdd(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

BITLENS_AVX2 float reduceMin(__m256 v)
{
    __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_min_ps(s, _mm_movehl_ps(s, s));
    s = _mm_min_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

BITLENS_AVX2 float reduceMax(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/// Eight int32 (each within int8 / uint8 range as the caller clamped it) to eight bytes at p.
/// vpackssdw and vpacksswb/vpackuswb work per 128-bit lane: [q0..q3 | q4..q7] becomes bytes
/// q0..q3 at 0..3 and q4..q7 at 16..19; vpermd brings dword 4 next to dword 0.
template <bool Unsigned>
BITLENS_AVX2 void storeBytes8(std::uint8_t* p, __m256i q)
{
    const __m256i w16 = _mm256_packs_epi32(q, q);
    const __m256i b8 = Unsigned ? _mm256_packus_epi16(w16, w16) : _mm256_packs_epi16(w16, w16);
    const __m256i packed = _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

// --- int8 GEMM ---------------------------------------------------------------------------------

/// Rows per AVX2 micro-tile: 6 rows x 2 accumulators (8 channels) + 2 widened weight vectors +
/// the broadcast, 15 of the 16 ymm registers. With array accumulators GCC spilled at 6 rows
/// (6.3 ms against 4.95 at 4); with named ones nothing spills and 6 rows take 4.91 ms against
/// 5.10 at 4 (M=128 K=768 N=3072, one thread, float capped at AVX2 6.44 ms).
constexpr int kAvx2Rows = 6;
/// Rows per AVX-VNNI micro-tile: 6 rows x 2 vectors (16 channels) + 2 weights + 1 broadcast.
constexpr int kVnniRows = 6;
/// Rows per vpmaddubsw micro-tile: 4 rows x 2 accumulators + 2 weights + ones + broadcast +
/// the products in flight (5 rows fit too and measured the same within noise; 4 divides
/// kRowsPerTask).
constexpr int kMaddubsRows = 4;
/// Rows a task covers, so that two threads split large M as well as N.
constexpr std::int64_t kRowsPerTask = 48;

struct Int8Out {
    std::int32_t* acc = nullptr;            ///< int32 output, or
    float* y = nullptr;                     ///< float output with the epilogue
    const Int8Epilogue* epilogue = nullptr;
};

/// Channels [n, n + 8) of row m from the raw sum u * w: the zero-point correction, then the
/// int32 store or the float epilogue in the reference's order (scale, bias, residual).
BITLENS_AVX2 void int8Finish(const Int8Activations& x, const Int8PackedWeight& w, std::int64_t m,
                             std::int64_t n, __m256i raw, const Int8Out& out)
{
    const __m256i mask = laneMask(w.n - n);
    const __m256i colSum = _mm256_maskload_epi32(w.colSum.data() + n, mask);
    const std::int32_t zx = x.zeroPoint ? x.zeroPoint[x.zeroPointPerRow ? m : 0] : 0;
    const __m256i acc = _mm256_sub_epi32(raw, _mm256_mullo_epi32(_mm256_set1_epi32(zx), colSum));
    if (!out.y) {
        _mm256_maskstore_epi32(out.acc + m * w.n + n, mask, acc);
        return;
    }
    const Int8Epilogue& e = *out.epilogue;
    const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(e.xScale[e.xScalePerRow ? m : 0]),
                                       _mm256_maskload_ps(e.wScale + n, mask));
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), scale);
    if (e.bias)
        v = _mm256_add_ps(v, _mm256_maskload_ps(e.bias + n, mask));
    if (e.residual)
        v = _mm256_add_ps(v, _mm256_maskload_ps(e.residual + m * e.ldResidual + n, mask));
    _mm256_maskstore_ps(out.y + m * w.n + n, mask, v);
}

/// AVX2 micro-tile: rows [m0, m0 + MR) of the widened activations x16 (kPadded int16 per row),
/// channels [n, n + 8) whose packed bytes start at `group` (stride `width` * 4 per 4 k).
/// Named accumulators (see BITLENS_INT8_ROW below for why not an array).
template <int MR>
BITLENS_AVX2 void int8TileAvx2(const Int8Activations& x, const Int8PackedWeight& w,
                               const std::int16_t* x16, const std::int8_t* group,
                               std::int64_t width, std::int64_t m0, std::int64_t n,
                               const Int8Out& out)
{
    static_assert(MR >= 1 && MR <= 6);
    // Row r: channels 0..3 in cR0 and 4..7 in cR1, two partial sums each.
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const std::int64_t ld = w.kPadded;
    const std::int16_t* xr = x16 + m0 * ld;
    const std::int64_t k4Count = w.kPadded / 4;
    const std::int64_t stride = width * 4;
    const std::int8_t* wp = group;
    for (std::int64_t k4 = 0; k4 < k4Count; ++k4, wp += stride) {
        const __m256i b0 = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(wp)));
        const __m256i b1 =
            _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(wp + 16)));
#define BITLENS_INT16_ROW(r, lo, hi)                                                             \
    if constexpr (MR > (r)) {                                                                    \
        std::int64_t four;                                                                       \
        std::memcpy(&four, xr + (r) * ld + 4 * k4, 8);                                           \
        const __m256i a = _mm256_set1_epi64x(four);                                              \
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(a, b0));                                     \
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(a, b1));                                     \
    }
        BITLENS_INT16_ROW(0, c00, c01)
        BITLENS_INT16_ROW(1, c10, c11)
        BITLENS_INT16_ROW(2, c20, c21)
        BITLENS_INT16_ROW(3, c30, c31)
        BITLENS_INT16_ROW(4, c40, c41)
        BITLENS_INT16_ROW(5, c50, c51)
#undef BITLENS_INT16_ROW
    }
    const __m256i lo[6] = {c00, c10, c20, c30, c40, c50};
    const __m256i hi[6] = {c01, c11, c21, c31, c41, c51};
    // vphaddd per 128-bit lane: [c0 c1 c4 c5 | c2 c3 c6 c7] -> channel order with vpermd.
    const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (int r = 0; r < MR; ++r) {
        const __m256i sum = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(lo[r], hi[r]), order);
        int8Finish(x, w, m0 + r, n, sum, out);
    }
}

using Int8TileAvx2Fn = void (*)(const Int8Activations&, const Int8PackedWeight&,
                                const std::int16_t*, const std::int8_t*, std::int64_t,
                                std::int64_t, std::int64_t, const Int8Out&);
constexpr std::array<Int8TileAvx2Fn, kAvx2Rows> kInt8TilesAvx2 = {
    &int8TileAvx2<1>, &int8TileAvx2<2>, &int8TileAvx2<3>,
    &int8TileAvx2<4>, &int8TileAvx2<5>, &int8TileAvx2<6>};

/// One row r of a 16-channel tile: broadcast its 4 codes at k4 and add their products with
/// b0 / b1 into the row's two named accumulators (STEP is the per-ISA dot product). The tiles
/// name their accumulators instead of using arrays: with arrays GCC 12 copied each
/// accumulator every iteration (10 vmovdqa per 24 multiply uops in the 4-row vpmaddubsw tile,
/// 25 in the 6-row VNNI one) and spilled some.
#define BITLENS_INT8_ROW(r, lo, hi, STEP)                                                        \
    if constexpr (MR > (r)) {                                                                    \
        std::int32_t four;                                                                       \
        std::memcpy(&four, x0 + (r) * ldx + 4 * k4, 4);                                          \
        const __m256i a = _mm256_set1_epi32(four);                                               \
        lo = STEP(lo, a, b0);                                                                    \
        hi = STEP(hi, a, b1);                                                                    \
    }

/// AVX-VNNI micro-tile: rows [m0, m0 + MR) of the u8 codes, channels [n, n + 16) at `group`.
BITLENS_AVXVNNI inline __m256i dpbusdStep(__m256i acc, __m256i a, __m256i b)
{
    return _mm256_dpbusd_avx_epi32(acc, a, b);
}

template <int MR>
BITLENS_AVXVNNI void int8TileVnni(const Int8Activations& x, const Int8PackedWeight& w,
                                  const std::int8_t* group, std::int64_t width, std::int64_t m0,
                                  std::int64_t n, const Int8Out& out)
{
    static_assert(MR >= 1 && MR <= 6);
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const std::int64_t ldx = x.ldx;
    const std::uint8_t* x0 = x.codes + m0 * ldx;
    const std::int64_t k4Count = w.kPadded / 4;
    const std::int64_t stride = width * 4;
    const std::int8_t* wp = group;
    for (std::int64_t k4 = 0; k4 < k4Count; ++k4, wp += stride) {
        // One 32-byte load per 8 channels: 4 consecutive k of each (the AVX-512 layout).
        const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp));
        const __m256i b1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + 32));
        BITLENS_INT8_ROW(0, c00, c01, dpbusdStep)
        BITLENS_INT8_ROW(1, c10, c11, dpbusdStep)
        BITLENS_INT8_ROW(2, c20, c21, dpbusdStep)
        BITLENS_INT8_ROW(3, c30, c31, dpbusdStep)
        BITLENS_INT8_ROW(4, c40, c41, dpbusdStep)
        BITLENS_INT8_ROW(5, c50, c51, dpbusdStep)
    }
    const __m256i lo[6] = {c00, c10, c20, c30, c40, c50};
    const __m256i hi[6] = {c01, c11, c21, c31, c41, c51};
    for (int r = 0; r < MR; ++r) {
        int8Finish(x, w, m0 + r, n, lo[r], out);
        if (n + 8 < w.n)
            int8Finish(x, w, m0 + r, n + 8, hi[r], out);
    }
}

/// u * w for the 4 k of one broadcast activation word `a` against 8 channels `b`, added to
/// `acc`: vpmaddubsw (int16 pairs, exact for |w| <= 64), vpmaddwd with ones, vpaddd.
BITLENS_AVX2 inline __m256i maddubsStep(__m256i acc, __m256i a, __m256i b)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b),
                                                   _mm256_set1_epi16(1)));
}

/// AVX2 micro-tile for 7-bit weights (int8UsesMaddubs): rows [m0, m0 + MR) of the u8 codes,
/// channels [n, n + 16) at `group`, the VNNI tile's layout and order.
template <int MR>
BITLENS_AVX2 void int8TileMaddubs(const Int8Activations& x, const Int8PackedWeight& w,
                                  const std::int8_t* group, std::int64_t width, std::int64_t m0,
                                  std::int64_t n, const Int8Out& out)
{
    static_assert(MR >= 1 && MR <= 4);
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00;
    const std::int64_t ldx = x.ldx;
    const std::uint8_t* x0 = x.codes + m0 * ldx;
    const std::int64_t k4Count = w.kPadded / 4;
    const std::int64_t stride = width * 4;
    const std::int8_t* wp = group;
    for (std::int64_t k4 = 0; k4 < k4Count; ++k4, wp += stride) {
        const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp));
        const __m256i b1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + 32));
        BITLENS_INT8_ROW(0, c00, c01, maddubsStep)
        BITLENS_INT8_ROW(1, c10, c11, maddubsStep)
        BITLENS_INT8_ROW(2, c20, c21, maddubsStep)
        BITLENS_INT8_ROW(3, c30, c31, maddubsStep)
    }
    const __m256i lo[4] = {c00, c10, c20, c30};
    const __m256i hi[4] = {c01, c11, c21, c31};
    for (int r = 0; r < MR; ++r) {
        int8Finish(x, w, m0 + r, n, lo[r], out);
        if (n + 8 < w.n)
            int8Finish(x, w, m0 + r, n + 8, hi[r], out);
    }
}

#undef BITLENS_INT8_ROW

using Int8TileVnniFn = void (*)(const Int8Activations&, const Int8PackedWeight&,
                                const std::int8_t*, std::int64_t, std::int64_t, std::int64_t,
                                const Int8Out&);
constexpr std::array<Int8TileVnniFn, kVnniRows> kInt8TilesVnni = {
    &int8TileVnni<1>, &int8TileVnni<2>, &int8TileVnni<3>,
    &int8TileVnni<4>, &int8TileVnni<5>, &int8TileVnni<6>};
constexpr std::array<Int8TileVnniFn, kMaddubsRows> kInt8TilesMaddubs = {
    &int8TileMaddubs<1>, &int8TileMaddubs<2>, &int8TileMaddubs<3>, &int8TileMaddubs<4>};

/// Rows [begin, end) of the codes widened to int16 (kPadded per row).
BITLENS_AVX2 void widenCodes(const Int8Activations& x, std::int64_t kPadded, std::int64_t begin,
                             std::int64_t end, std::int16_t* x16)
{
    for (std::int64_t m = begin; m < end; ++m) {
        const std::uint8_t* src = x.codes + m * x.ldx;
        std::int16_t* dst = x16 + m * kPadded;
        std::int64_t k = 0;
        for (; k + 16 <= kPadded; k += 16)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k),
                                _mm256_cvtepu8_epi16(
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k))));
        for (; k < kPadded; ++k)
            dst[k] = src[k];
    }
}

/// The task split of the AVX-512 GEMM: task t covers panel t / rowTasks and row block
/// t % rowTasks, so each thread reuses one panel (in L2) for all its row blocks.
void int8GemmDriver(const Int8Activations& x, const Int8PackedWeight& w, const Int8Out& out,
                    bool vnni, const char* name)
{
    if (!(vnni ? cpuFeatures().avxVnni : cpuFeatures().avx2))
        throw std::runtime_error(std::string(name) + ": this CPU lacks the ISA");
    if (x.ldx < w.kPadded)
        throw std::invalid_argument(std::string(name) +
                                    ": activation rows shorter than the packed K");
    if (x.m == 0 || w.n == 0)
        return;
    // 7-bit weights take the vpmaddubsw tile (exact for them), the others the widening one.
    const bool maddubs = !vnni && int8UsesMaddubs(w);
    AlignedArray<std::int16_t> x16;
    if (!vnni && !maddubs) {
        x16 = AlignedArray<std::int16_t>(static_cast<std::size_t>(x.m * w.kPadded));
        at::parallel_for(0, x.m, 16, [&](std::int64_t begin, std::int64_t end) {
            widenCodes(x, w.kPadded, begin, end, x16.data());
        });
    }
    const std::int64_t nPadded = (w.n + 15) / 16 * 16;
    const std::int64_t panels = (nPadded + kInt8PanelWidth - 1) / kInt8PanelWidth;
    const std::int64_t rowTasks = (x.m + kRowsPerTask - 1) / kRowsPerTask;
    const int tileRows = vnni ? kVnniRows : maddubs ? kMaddubsRows : kAvx2Rows;
    const std::int64_t channelsPerTile = vnni || maddubs ? 16 : 8;
    at::parallel_for(0, panels * rowTasks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) {
            const std::int64_t n0 = (t / rowTasks) * kInt8PanelWidth;
            const std::int64_t width = std::min(kInt8PanelWidth, nPadded - n0);
            const std::int8_t* panelData = w.data.data() + n0 * w.kPadded;
            const std::int64_t mEnd = std::min(x.m, (t % rowTasks + 1) * kRowsPerTask);
            for (std::int64_t m0 = (t % rowTasks) * kRowsPerTask; m0 < mEnd; m0 += tileRows) {
                const auto rows = static_cast<std::size_t>(std::min<std::int64_t>(tileRows, mEnd - m0));
                for (std::int64_t c = 0; c < width && n0 + c < w.n; c += channelsPerTile) {
                    // Channel c of the panel starts at byte 4 c of each 4-k row of the panel.
                    const std::int8_t* group = panelData + 4 * c;
                    if (vnni)
                        kInt8TilesVnni[rows - 1](x, w, group, width, m0, n0 + c, out);
                    else if (maddubs)
                        kInt8TilesMaddubs[rows - 1](x, w, group, width, m0, n0 + c, out);
                    else
                        kInt8TilesAvx2[rows - 1](x, w, x16.data(), group, width, m0, n0 + c, out);
                }
            }
        }
    });
}

// --- activation quantizer and min / max ---------------------------------------------------------

/// The reference's steps for one element (tails): nearbyint is half to even.
std::uint8_t quantizeOne(float v, float inv, std::int32_t zp, std::int32_t qmin, std::int32_t qmax,
                         std::int32_t shift)
{
    std::int32_t q = zp;
    if (!std::isnan(v)) {
        float t = std::nearbyint(v * inv) + static_cast<float>(zp);
        t = std::min(std::max(t, static_cast<float>(qmin)), static_cast<float>(qmax));
        q = static_cast<std::int32_t>(t);
    }
    return static_cast<std::uint8_t>(q + shift);
}

BITLENS_AVX2 void quantizeRowsAvx2Range(const float* x, std::int64_t begin, std::int64_t end,
                                        std::int64_t k, std::int64_t ldx, const float* invScale,
                                        const std::int32_t* zeroPoint, bool perRow,
                                        std::int32_t qmin, std::int32_t qmax, std::int32_t shift,
                                        std::uint8_t* u, std::int64_t ldu)
{
    for (std::int64_t r = begin; r < end; ++r) {
        const std::int32_t zp = zeroPoint[perRow ? r : 0];
        const float invS = invScale[perRow ? r : 0];
        const __m256 inv = _mm256_set1_ps(invS);
        const __m256 zpf = _mm256_set1_ps(static_cast<float>(zp));
        const __m256 lo = _mm256_set1_ps(static_cast<float>(qmin));
        const __m256 hi = _mm256_set1_ps(static_cast<float>(qmax));
        const __m256i sh = _mm256_set1_epi32(shift);
        const float* src = x + r * ldx;
        std::uint8_t* dst = u + r * ldu;
        std::int64_t j = 0;
        for (; j + 8 <= k; j += 8) {
            const __m256 v = _mm256_loadu_ps(src + j);
            // x * (1 / scale), half to even, + zp, clamp; NaN takes the code of 0 (zp).
            __m256 t = _mm256_round_ps(_mm256_mul_ps(v, inv),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            t = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(t, zpf), lo), hi);
            t = _mm256_blendv_ps(t, zpf, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            // q + shift is a byte (0..255) for every valid qmin / qmax / shift.
            storeBytes8<true>(dst + j, _mm256_add_epi32(_mm256_cvtps_epi32(t), sh));
        }
        for (; j < k; ++j)
            dst[j] = quantizeOne(src[j], invS, zp, qmin, qmax, shift);
        for (j = k; j < ldu; ++j)
            dst[j] = static_cast<std::uint8_t>(zp + shift);
    }
}

/// min / max of x[begin, end); `nan` set when a NaN was seen. Four chains per result, so
/// vminps' latency does not serialise the loop.
BITLENS_AVX2 void minMaxAvx2Range(const float* x, std::int64_t begin, std::int64_t end, float* lo,
                                  float* hi, bool* nan)
{
    constexpr int kChains = 4;
    __m256 a[kChains], b[kChains], unordered = _mm256_setzero_ps();
    for (int c = 0; c < kChains; ++c) {
        a[c] = _mm256_set1_ps(std::numeric_limits<float>::infinity());
        b[c] = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    }
    std::int64_t i = begin;
    for (; i + 8 * kChains <= end; i += 8 * kChains) {
#pragma GCC unroll 4
        for (int c = 0; c < kChains; ++c) {
            const __m256 v = _mm256_loadu_ps(x + i + 8 * c);
            unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            a[c] = _mm256_min_ps(a[c], v);
            b[c] = _mm256_max_ps(b[c], v);
        }
    }
    for (; i + 8 <= end; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        a[0] = _mm256_min_ps(a[0], v);
        b[0] = _mm256_max_ps(b[0], v);
    }
    for (int c = 1; c < kChains; ++c) {
        a[0] = _mm256_min_ps(a[0], a[c]);
        b[0] = _mm256_max_ps(b[0], b[c]);
    }
    float mn = reduceMin(a[0]), mx = reduceMax(b[0]);
    bool seen = _mm256_movemask_ps(unordered) != 0;
    for (; i < end; ++i) {
        seen = seen || std::isnan(x[i]);
        mn = std::min(mn, x[i]);
        mx = std::max(mx, x[i]);
    }
    *lo = mn;
    *hi = mx;
    *nan = seen;
}

// --- 4-bit weight-only, float activations -------------------------------------------------------

/// Rows of x handled together (one dequantized weight vector feeds MR FMAs).
constexpr int kNibbleRowsAvx2 = 4;

/// 8 weights table[u] * s from 8 packed words: nibble `s` of each word is the code. vpermps
/// reads an index's low 3 bits, so the two halves of the scaled table are looked up separately
/// and vblendvps picks by the code's bit 3, shifted into the sign bit. Worked example, code 11
/// = 0b1011 in nibble 2 (bits 8..11): word >> 8 has low bits 011 -> entry 3 of each half, and
/// word << 20 puts bit 11 in bit 31 -> the high half, entry 8 + 3 = 11.
template <int S>
BITLENS_AVX2 __m256 lookup16(__m256i words, __m256 t0, __m256 t1)
{
    const __m256i index = S == 0 ? words : _mm256_srli_epi32(words, 4 * S);
    const __m256i select = S == 7 ? words : _mm256_slli_epi32(words, 28 - 4 * S);
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(t0, index),
                            _mm256_permutevar8x32_ps(t1, index), _mm256_castsi256_ps(select));
}

/// Output channels [n, n + NR) for rows [0, MR) of x: the AVX-512 nibbleTile on 8 lanes. The
/// 64-byte chunk's words 0..7 hold elements d + 16 s (d < 8), words 8..15 elements 8 + d + 16 s.
template <int MR, int NR>
BITLENS_AVX2 void nibbleTileAvx2(const float* x, std::int64_t ldx, const Nibble4PackedWeight& w,
                                 std::int64_t n, float* out)
{
    const __m256 table0 = _mm256_loadu_ps(w.table), table1 = _mm256_loadu_ps(w.table + 8);
    const std::int64_t rowBytes = w.kPadded / 2;
    const std::uint8_t* rows[NR];
    const float* scales[NR];
    __m256 t0[NR], t1[NR];
    __m256 acc[NR][MR][2];  // two chains per output: the chunk's low and high words
#pragma GCC unroll 4
    for (int i = 0; i < NR; ++i) {
        rows[i] = w.data.data() + (n + i) * rowBytes;
        scales[i] = w.scale.data() + (n + i) * w.groups;
        t0[i] = _mm256_mul_ps(table0, _mm256_set1_ps(scales[i][0]));
        t1[i] = _mm256_mul_ps(table1, _mm256_set1_ps(scales[i][0]));
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r)
            acc[i][r][0] = acc[i][r][1] = _mm256_setzero_ps();
        // The next tile's scales (its rows follow these NR rows in memory).
        for (std::int64_t g = 0; g < w.groups; g += 16)
            _mm_prefetch(reinterpret_cast<const char*>(scales[i] + NR * w.groups + g), _MM_HINT_T0);
    }
    std::int64_t group = 0;
    std::int64_t groupEnd = w.groups > 1 ? w.group : w.kPadded;
    for (std::int64_t k = 0; k < w.kPadded; k += kNibbleChunk) {
        __m256i lo[NR], hi[NR];
#pragma GCC unroll 4
        for (int i = 0; i < NR; ++i) {
            // Software prefetch of the same chunk of the next tile's row, NR rows on. Measured
            // on a Sapphire Rapids VM at batch 1: without it every row stream ran at ~1.8 GB/s
            // (as if the hardware prefetchers never engaged) and the dequantization idled.
            _mm_prefetch(reinterpret_cast<const char*>(rows[i] + NR * rowBytes + k / 2), _MM_HINT_T0);
            lo[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(rows[i] + k / 2));
            hi[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(rows[i] + k / 2 + 32));
        }
        const auto step = [&]<int S>() BITLENS_AVX2 {
            // Elements k + 32 h .. + 31 (nibbles 2 h and 2 h + 1) share one group (groups are
            // multiples of 32).
            if (S % 2 == 0 && k + 16 * S >= groupEnd) {
                ++group;
                groupEnd = group + 1 < w.groups ? groupEnd + w.group : w.kPadded;
#pragma GCC unroll 4
                for (int i = 0; i < NR; ++i) {
                    const __m256 s = _mm256_set1_ps(scales[i][group]);
                    t0[i] = _mm256_mul_ps(table0, s);
                    t1[i] = _mm256_mul_ps(table1, s);
                }
            }
#pragma GCC unroll 4
            for (int i = 0; i < NR; ++i) {
                const __m256 wLo = lookup16<S>(lo[i], t0[i], t1[i]);
                const __m256 wHi = lookup16<S>(hi[i], t0[i], t1[i]);
#pragma GCC unroll 4
                for (int r = 0; r < MR; ++r) {
                    const float* xp = x + r * ldx + k + 16 * S;
                    acc[i][r][0] = _mm256_fmadd_ps(wLo, _mm256_loadu_ps(xp), acc[i][r][0]);
                    acc[i][r][1] = _mm256_fmadd_ps(wHi, _mm256_loadu_ps(xp + 8), acc[i][r][1]);
                }
            }
        };
        step.template operator()<0>();
        step.template operator()<1>();
        step.template operator()<2>();
        step.template operator()<3>();
        step.template operator()<4>();
        step.template operator()<5>();
        step.template operator()<6>();
        step.template operator()<7>();
    }
    for (int i = 0; i < NR; ++i)
        for (int r = 0; r < MR; ++r)
            out[i * MR + r] = reduceAdd(_mm256_add_ps(acc[i][r][0], acc[i][r][1]));
}

/// Output channels [n0, n1) for rows [0, MR) of x; xsum [MR, groups] (null without offsets).
template <int MR>
BITLENS_AVX2 void nibbleRowsAvx2(const float* x, std::int64_t ldx, const Nibble4PackedWeight& w,
                                 const float* xsum, std::int64_t n0, std::int64_t n1, float* y,
                                 std::int64_t ldy)
{
    // Weight rows per step: 2 at batch 1 (more independent loads in flight), 1 otherwise.
    constexpr int kTogether = MR == 1 ? 2 : 1;
    const auto finish = [&](std::int64_t n, int count, const float* sums) {
        for (int i = 0; i < count; ++i)
            for (int r = 0; r < MR; ++r) {
                float v = sums[i * MR + r];
                if (xsum) {
                    const float* o = w.offset.data() + (n + i) * w.groups;
                    const float* xs = xsum + r * w.groups;
                    float extra = 0.0f;
                    for (std::int64_t g = 0; g < w.groups; ++g)
                        extra += o[g] * xs[g];
                    v += extra;
                }
                y[r * ldy + n + i] = v;
            }
    };
    float sums[kTogether * MR];
    std::int64_t n = n0;
    for (; n + kTogether <= n1; n += kTogether) {
        nibbleTileAvx2<MR, kTogether>(x, ldx, w, n, sums);
        finish(n, kTogether, sums);
    }
    for (; n < n1; ++n) {
        nibbleTileAvx2<MR, 1>(x, ldx, w, n, sums);
        finish(n, 1, sums);
    }
}

using NibbleRowsAvx2Fn = void (*)(const float*, std::int64_t, const Nibble4PackedWeight&,
                                  const float*, std::int64_t, std::int64_t, float*, std::int64_t);
constexpr std::array<NibbleRowsAvx2Fn, kNibbleRowsAvx2> kNibbleRowsAvx2Fns = {
    &nibbleRowsAvx2<1>, &nibbleRowsAvx2<2>, &nibbleRowsAvx2<3>, &nibbleRowsAvx2<4>};

// --- int4 x int8 GEMV -----------------------------------------------------------------------------

/// Panels of 16 channels advanced together (each two 8-channel halves).
constexpr int kQ8Panels = 2;

/// Group-wise int8 quantization of one row, the reference's operations: the sum in k order
/// (a vector sum would round differently), max |x| (exact in any order), then
/// clamp(round_half_even(x * (127 / amax)), +-127).
BITLENS_AVX2 void quantizeGroupsAvx2Row(const float* x, std::int64_t k, std::int64_t kPadded,
                                        std::int64_t group, std::int8_t* q, float* d, float* xsum)
{
    const std::int64_t groups = (k + group - 1) / group;
    std::memset(q, 0, static_cast<std::size_t>(kPadded));
    const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t begin = g * group, end = std::min(k, begin + group);
        float sum = 0.0f;
        for (std::int64_t j = begin; j < end; ++j)
            sum += x[j];
        xsum[g] = sum;
        if (!std::isfinite(sum)) {
            d[g] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        // A finite sum means every x of the group is finite: no NaN reaches the max.
        __m256 amaxV = _mm256_setzero_ps();
        std::int64_t j = begin;
        for (; j + 8 <= end; j += 8)
            amaxV = _mm256_max_ps(amaxV, _mm256_and_ps(_mm256_loadu_ps(x + j), absMask));
        float amax = reduceMax(amaxV);
        for (; j < end; ++j)
            amax = std::max(amax, std::fabs(x[j]));
        d[g] = amax / 127.0f;
        if (amax == 0.0f)
            continue;
        const float invS = 127.0f / amax;
        const __m256 inv = _mm256_set1_ps(invS);
        const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
        for (j = begin; j + 8 <= end; j += 8) {
            __m256 t = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), inv),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);
            storeBytes8<false>(reinterpret_cast<std::uint8_t*>(q + j), _mm256_cvtps_epi32(t));
        }
        for (; j < end; ++j)
            q[j] = static_cast<std::int8_t>(std::clamp(std::nearbyint(x[j] * invS), -127.0f, 127.0f));
    }
}

/// Sum over 32 k (4 chunks) of code * q for the 8 channels whose 32 bytes per chunk start at
/// `data`, AVX2: vpmaddubsw (u8 code <= 15 times s8 |q| <= 127: a pair is at most 3810, far from
/// int16 saturation) and int16 adds of the 8 pairs (at most 30480), then one vpmaddwd by 1.
inline __attribute__((always_inline)) BITLENS_AVX2 __m256i dot32Avx2(const std::uint8_t* data,
                                                                     const std::int8_t* q)
{
    const __m256i low = _mm256_set1_epi8(0x0F);
    __m256i sum16 = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
        std::int32_t a, b;
        std::memcpy(&a, q + 8 * c, 4);
        std::memcpy(&b, q + 8 * c + 4, 4);
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(data + 64 * c));
        sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(_mm256_and_si256(v, low),
                                                             _mm256_set1_epi32(a)));
        sum16 = _mm256_add_epi16(
            sum16, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low),
                                        _mm256_set1_epi32(b)));
    }
    return _mm256_madd_epi16(sum16, _mm256_set1_epi16(1));
}

/// The same on AVX-VNNI: vpdpbusd adds the 4 products of a lane straight into int32, here
/// into the caller's two accumulators (two chains per half: vpdpbusd's latency is 5 cycles).
inline __attribute__((always_inline)) BITLENS_AVXVNNI void dot32Vnni(const std::uint8_t* data,
                                                                     const std::int8_t* q,
                                                                     __m256i& sumA, __m256i& sumB)
{
    const __m256i low = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
        std::int32_t a, b;
        std::memcpy(&a, q + 8 * c, 4);
        std::memcpy(&b, q + 8 * c + 4, 4);
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(data + 64 * c));
        sumA = _mm256_dpbusd_avx_epi32(sumA, _mm256_and_si256(v, low), _mm256_set1_epi32(a));
        sumB = _mm256_dpbusd_avx_epi32(sumB, _mm256_and_si256(_mm256_srli_epi16(v, 4), low),
                                       _mm256_set1_epi32(b));
    }
}

/// Software prefetch of the 4 lines (32 k of a 16-channel panel) at p, once per panel (by its
/// even half): the same reason as in nibbleTileAvx2.
inline __attribute__((always_inline)) void prefetchPanels(const std::uint8_t* p, int half)
{
    if (half % 2 != 0)
        return;
    for (int c = 0; c < 4; ++c)
        _mm_prefetch(reinterpret_cast<const char*>(p + 64 * c), _MM_HINT_T0);
}

/// The int32 dots of one group, k in [begin, end) (whole steps of 32: groups and kPadded are
/// multiples of 32), for the H 8-channel halves at data[h] (stride 8 bytes per k).
template <int H>
BITLENS_AVX2 void groupDotsAvx2(const std::uint8_t* const (&data)[H], const std::int8_t* q,
                                std::int64_t begin, std::int64_t end, std::int64_t ahead,
                                __m256i (&dot)[H])
{
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
        dot[h] = _mm256_setzero_si256();
    for (std::int64_t j = begin; j < end; j += 32)
#pragma GCC unroll 4
        for (int h = 0; h < H; ++h) {
            prefetchPanels(data[h] + j * 8 + ahead, h);
            dot[h] = _mm256_add_epi32(dot[h], dot32Avx2(data[h] + j * 8, q + j));
        }
}

/// groupDotsAvx2 on AVX-VNNI. A separate function (called once per group) because an AVX2
/// function cannot inline AVX-VNNI code, and giving the float part below the avxvnni target
/// would let the compiler use VNNI instructions in the AVX2 row too.
template <int H>
BITLENS_AVXVNNI void groupDotsVnni(const std::uint8_t* const (&data)[H], const std::int8_t* q,
                                   std::int64_t begin, std::int64_t end, std::int64_t ahead,
                                   __m256i (&dot)[H])
{
    __m256i other[H];
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
        dot[h] = other[h] = _mm256_setzero_si256();
    for (std::int64_t j = begin; j < end; j += 32)
#pragma GCC unroll 4
        for (int h = 0; h < H; ++h) {
            prefetchPanels(data[h] + j * 8 + ahead, h);
            dot32Vnni(data[h] + j * 8, q + j, dot[h], other[h]);
        }
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
        dot[h] = _mm256_add_epi32(dot[h], other[h]);
}

/// Channels of NP panels starting at `panel` for one row of quantized activations; per group
/// the reference's float steps: acc = fma(float(dot), s * d, acc), then fma(mn, xsum, acc).
template <int NP, bool Vnni>
BITLENS_AVX2 void nibbleQ8Panels(const Nibble4VnniPackedWeight& w, std::int64_t panel,
                                 const std::int8_t* q, const float* d, const float* xsum, float* y)
{
    constexpr int kHalves = 2 * NP;
    const std::int64_t panelBytes = w.kPadded / 8 * 64;
    const bool hasOffset = w.offset.size() != 0;
    const std::uint8_t* data[kHalves];
    __m256 acc[kHalves];
#pragma GCC unroll 4
    for (int h = 0; h < kHalves; ++h) {
        data[h] = w.data.data() + (panel + h / 2) * panelBytes + 32 * (h % 2);
        acc[h] = _mm256_setzero_ps();
    }
    for (std::int64_t g = 0; g < w.groups; ++g) {
        const std::int64_t begin = g * w.group, end = std::min(w.kPadded, begin + w.group);
        __m256i dot[kHalves];
        if constexpr (Vnni)
            groupDotsVnni<kHalves>(data, q, begin, end, NP * panelBytes, dot);
        else
            groupDotsAvx2<kHalves>(data, q, begin, end, NP * panelBytes, dot);
        const __m256 dg = _mm256_set1_ps(d[g]);
#pragma GCC unroll 4
        for (int h = 0; h < kHalves; ++h) {
            const std::size_t at = static_cast<std::size_t>(
                ((panel + h / 2) * w.groups + g) * kNibbleVnniPanel + 8 * (h % 2));
            const __m256 sd = _mm256_mul_ps(_mm256_load_ps(w.scale.data() + at), dg);
            acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h]), sd, acc[h]);
            if (hasOffset)
                acc[h] = _mm256_fmadd_ps(_mm256_load_ps(w.offset.data() + at),
                                         _mm256_set1_ps(xsum[g]), acc[h]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < kHalves; ++h) {
        const std::int64_t n = (panel + h / 2) * kNibbleVnniPanel + 8 * (h % 2);
        _mm256_maskstore_ps(y + n, laneMask(w.n - n), acc[h]);
    }
}

void nibble4GemvQ8Driver(const float* x, std::int64_t m, std::int64_t ldx,
                         const Nibble4VnniPackedWeight& w, float* y, bool vnni, const char* name)
{
    if (!(vnni ? cpuFeatures().avxVnni : cpuFeatures().avx2))
        throw std::runtime_error(std::string(name) + ": this CPU lacks the ISA");
    if (ldx < w.k)
        throw std::invalid_argument(std::string(name) + ": activation rows shorter than K");
    if (m == 0 || w.n == 0)
        return;
    AlignedArray<std::int8_t> q(static_cast<std::size_t>(m * w.kPadded));
    AlignedArray<float> d(static_cast<std::size_t>(m * w.groups)),
        xsum(static_cast<std::size_t>(m * w.groups));
    for (std::int64_t r = 0; r < m; ++r)
        quantizeGroupsAvx2Row(x + r * ldx, w.k, w.kPadded, w.group, q.data() + r * w.kPadded,
                              d.data() + r * w.groups, xsum.data() + r * w.groups);
    const std::int64_t panels = (w.n + kNibbleVnniPanel - 1) / kNibbleVnniPanel;
    const std::int64_t blocks = (panels + kQ8Panels - 1) / kQ8Panels;
    at::parallel_for(0, blocks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t b = begin; b < end; ++b) {
            const std::int64_t p0 = b * kQ8Panels;
            const bool both = panels - p0 >= 2;
            for (std::int64_t r = 0; r < m; ++r) {
                const std::int8_t* qr = q.data() + r * w.kPadded;
                const float* dr = d.data() + r * w.groups;
                const float* sr = xsum.data() + r * w.groups;
                float* yr = y + r * w.n;
                if (vnni)
                    (both ? nibbleQ8Panels<2, true> : nibbleQ8Panels<1, true>)(w, p0, qr, dr, sr, yr);
                else
                    (both ? nibbleQ8Panels<2, false> : nibbleQ8Panels<1, false>)(w, p0, qr, dr, sr,
                                                                                 yr);
            }
        }
    });
}

} // namespace

void int8GemmAvx2(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc)
{
    Int8Out out;
    out.acc = acc;
    int8GemmDriver(x, w, out, false, "int8GemmAvx2");
}

void int8GemmAvx2F32(const Int8Activations& x, const Int8PackedWeight& w,
                     const Int8Epilogue& epilogue, float* y)
{
    Int8Out out;
    out.y = y;
    out.epilogue = &epilogue;
    int8GemmDriver(x, w, out, false, "int8GemmAvx2F32");
}

void int8GemmAvxVnni(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc)
{
    Int8Out out;
    out.acc = acc;
    int8GemmDriver(x, w, out, true, "int8GemmAvxVnni");
}

void int8GemmAvxVnniF32(const Int8Activations& x, const Int8PackedWeight& w,
                        const Int8Epilogue& epilogue, float* y)
{
    Int8Out out;
    out.y = y;
    out.epilogue = &epilogue;
    int8GemmDriver(x, w, out, true, "int8GemmAvxVnniF32");
}

void quantizeRowsU8Avx2(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx,
                        const float* invScale, const std::int32_t* zeroPoint, bool perRow,
                        std::int32_t qmin, std::int32_t qmax, std::int32_t shift, std::uint8_t* u,
                        std::int64_t ldu)
{
    if (!cpuFeatures().avx2)
        throw std::runtime_error("quantizeRowsU8Avx2: this CPU has no AVX2");
    at::parallel_for(0, m, 16, [&](std::int64_t begin, std::int64_t end) {
        quantizeRowsAvx2Range(x, begin, end, k, ldx, invScale, zeroPoint, perRow, qmin, qmax,
                              shift, u, ldu);
    });
}

void minMaxF32Avx2(const float* x, std::int64_t count, float* lo, float* hi)
{
    if (!cpuFeatures().avx2)
        throw std::runtime_error("minMaxF32Avx2: this CPU has no AVX2");
    minMaxThreaded(x, count, &minMaxAvx2Range, lo, hi);
}

void quantizeGroupsQ8Avx2(const float* x, std::int64_t k, std::int64_t kPadded,
                          std::int64_t group, std::int8_t* q, float* d, float* xsum)
{
    if (!cpuFeatures().avx2)
        throw std::runtime_error("quantizeGroupsQ8Avx2: this CPU has no AVX2");
    quantizeGroupsAvx2Row(x, k, kPadded, group, q, d, xsum);
}

void nibble4GemmAvx2(const float* x, std::int64_t m, std::int64_t ldx,
                     const Nibble4PackedWeight& w, float* y)
{
    if (!cpuFeatures().avx2)
        throw std::runtime_error("nibble4GemmAvx2: this CPU has no AVX2");
    if (ldx < w.kPadded)
        throw std::invalid_argument("nibble4GemmAvx2: activation rows shorter than padded K");
    const AlignedArray<float> xsum = nibble4GroupSums(x, m, ldx, w);
    at::parallel_for(0, w.n, 32, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t m0 = 0; m0 < m; m0 += kNibbleRowsAvx2) {
            const std::int64_t rows = std::min<std::int64_t>(kNibbleRowsAvx2, m - m0);
            kNibbleRowsAvx2Fns[static_cast<std::size_t>(rows - 1)](
                x + m0 * ldx, ldx, w, xsum.size() ? xsum.data() + m0 * w.groups : nullptr,
                begin, end, y + m0 * w.n, w.n);
        }
    });
}

void nibble4GemvQ8Avx2(const float* x, std::int64_t m, std::int64_t ldx,
                       const Nibble4VnniPackedWeight& w, float* y)
{
    nibble4GemvQ8Driver(x, m, ldx, w, y, false, "nibble4GemvQ8Avx2");
}

void nibble4GemvQ8AvxVnni(const float* x, std::int64_t m, std::int64_t ldx,
                          const Nibble4VnniPackedWeight& w, float* y)
{
    nibble4GemvQ8Driver(x, m, ldx, w, y, true, "nibble4GemvQ8AvxVnni");
}

} // namespace bitlens::kernels

// --- 16-bit float weight-only GEMM (lowbit.h) ------------------------------------------------

namespace bitlens::kernels {

namespace {

/// Rows of x per pass over a weight row: 4 rows x 2 accumulators + 2 weight vectors.
constexpr int kFloat16Rows = 4;

/// Output channels per task: about 128 KiB of weights, so the rows of a group after the first
/// read them from L2.
std::int64_t float16BlockChannels(std::int64_t k)
{
    return std::clamp<std::int64_t>((128 * 1024) / std::max<std::int64_t>(2 * k, 1), 8, 512);
}

/// Eight 16-bit floats at p widened to float32 (exact).
template <Float16Kind Kind>
BITLENS_AVX2 __m256 widen8(const std::uint16_t* p)
{
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (Kind == Float16Kind::Fp16)
        return _mm256_cvtph_ps(h);
    else
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/// y[m0 + r, n] for r < MR and n in [n0, n1): two 8-lane accumulators per row over 16 k at a
/// time, the K tail (under 8) in scalar float.
template <Float16Kind Kind, int MR>
BITLENS_AVX2 void float16RowsAvx2(const float* x, std::int64_t ldx, const Float16Weight& w,
                                  const float* bias, std::int64_t n0, std::int64_t n1, float* y)
{
    for (std::int64_t n = n0; n < n1; ++n) {
        const std::uint16_t* wr = w.bits + n * w.ldw;
        __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r)
            acc0[r] = acc1[r] = _mm256_setzero_ps();
        std::int64_t k = 0;
        for (; k + 16 <= w.k; k += 16) {
            // This VM's hardware prefetchers leave a lone weight stream at ~2 GB/s (see the
            // 4-bit GEMV, bench/RESULTS.md); fetching 1 KiB ahead keeps it at memory speed.
            _mm_prefetch(reinterpret_cast<const char*>(wr + k) + 1024, _MM_HINT_T0);
            const __m256 w0 = widen8<Kind>(wr + k);
            const __m256 w1 = widen8<Kind>(wr + k + 8);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r) {
                acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * ldx + k), acc0[r]);
                acc1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + r * ldx + k + 8), acc1[r]);
            }
        }
        if (k + 8 <= w.k) {
            const __m256 w0 = widen8<Kind>(wr + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r)
                acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * ldx + k), acc0[r]);
            k += 8;
        }
        for (int r = 0; r < MR; ++r) {
            float sum = reduceAdd(_mm256_add_ps(acc0[r], acc1[r]));
            for (std::int64_t t = k; t < w.k; ++t)
                sum += (Kind == Float16Kind::Fp16 ? fp16BitsToFloat(wr[t]) : bf16BitsToFloat(wr[t])) *
                       x[r * ldx + t];
            y[r * w.n + n] = bias ? sum + bias[n] : sum;
        }
    }
}

template <Float16Kind Kind>
void float16DriverAvx2(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                       const float* bias, float* y)
{
    using RowsFn = void (*)(const float*, std::int64_t, const Float16Weight&, const float*,
                            std::int64_t, std::int64_t, float*);
    constexpr std::array<RowsFn, kFloat16Rows> rowsFns = {
        &float16RowsAvx2<Kind, 1>, &float16RowsAvx2<Kind, 2>, &float16RowsAvx2<Kind, 3>,
        &float16RowsAvx2<Kind, 4>};
    const std::int64_t block = float16BlockChannels(w.k);
    const std::int64_t blocks = (w.n + block - 1) / block;
    at::parallel_for(0, blocks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t b = begin; b < end; ++b) {
            const std::int64_t n0 = b * block, n1 = std::min(w.n, n0 + block);
            for (std::int64_t m0 = 0; m0 < m; m0 += kFloat16Rows) {
                const auto rows = static_cast<std::size_t>(std::min<std::int64_t>(kFloat16Rows, m - m0));
                rowsFns[rows - 1](x + m0 * ldx, ldx, w, bias, n0, n1, y + m0 * w.n);
            }
        }
    });
}

} // namespace

void float16GemmAvx2(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                     const float* bias, float* y)
{
    if (!cpuFeatures().avx2)
        throw std::runtime_error("float16GemmAvx2: this CPU lacks the ISA");
    if (ldx < w.k || w.ldw < w.k)
        throw std::invalid_argument("float16GemmAvx2: rows shorter than K");
    if (m == 0 || w.n == 0)
        return;
    if (w.kind == Float16Kind::Fp16)
        float16DriverAvx2<Float16Kind::Fp16>(x, m, ldx, w, bias, y);
    else
        float16DriverAvx2<Float16Kind::Bf16>(x, m, ldx, w, bias, y);
}

} // namespace bitlens::kernels

// --- float32 GEMV (lowbit.h) ---------------------------------------------------------------------

namespace bitlens::kernels {

namespace {

/// y[r, n] for r < MR and n in [n0, n1): two 8-lane accumulators per row over 16 k at a time,
/// the K tail (under 8) in scalar float.
template <int MR>
BITLENS_AVX2 void float32RowsAvx2(const float* x, std::int64_t ldx, const Float32Weight& w,
                                  const float* bias, std::int64_t n0, std::int64_t n1, float* y)
{
    for (std::int64_t n = n0; n < n1; ++n) {
        const float* wr = w.data + n * w.ldw;
        __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r)
            acc0[r] = acc1[r] = _mm256_setzero_ps();
        std::int64_t k = 0;
        for (; k + 16 <= w.k; k += 16) {
            // 2 KiB ahead of the weight stream, as the 16-bit row (same reason, float32 bytes).
            _mm_prefetch(reinterpret_cast<const char*>(wr + k) + 2048, _MM_HINT_T0);
            const __m256 w0 = _mm256_loadu_ps(wr + k);
            const __m256 w1 = _mm256_loadu_ps(wr + k + 8);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r) {
                acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * ldx + k), acc0[r]);
                acc1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + r * ldx + k + 8), acc1[r]);
            }
        }
        if (k + 8 <= w.k) {
            const __m256 w0 = _mm256_loadu_ps(wr + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r)
                acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * ldx + k), acc0[r]);
            k += 8;
        }
        for (int r = 0; r < MR; ++r) {
            float sum = reduceAdd(_mm256_add_ps(acc0[r], acc1[r]));
            for (std::int64_t t = k; t < w.k; ++t)
                sum += wr[t] * x[r * ldx + t];
            y[r * w.n + n] = bias ? sum + bias[n] : sum;
        }
    }
}

} // namespace

void float32GemmAvx2(const float* x, std::int64_t m, std::int64_t ldx, const Float32Weight& w,
                     const float* bias, float* y)
{
    if (!cpuFeatures().avx2)
        throw std::runtime_error("float32GemmAvx2: this CPU lacks the ISA");
    if (ldx < w.k || w.ldw < w.k)
        throw std::invalid_argument("float32GemmAvx2: rows shorter than K");
    if (m == 0 || w.n == 0)
        return;
    using RowsFn = void (*)(const float*, std::int64_t, const Float32Weight&, const float*,
                            std::int64_t, std::int64_t, float*);
    constexpr std::array<RowsFn, kFloat16Rows> rowsFns = {
        &float32RowsAvx2<1>, &float32RowsAvx2<2>, &float32RowsAvx2<3>, &float32RowsAvx2<4>};
    // About 128 KiB of weights per task, so the later row groups read them from L2.
    const std::int64_t block =
        std::clamp<std::int64_t>((128 * 1024) / std::max<std::int64_t>(4 * w.k, 1), 8, 512);
    const std::int64_t blocks = (w.n + block - 1) / block;
    at::parallel_for(0, blocks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t b = begin; b < end; ++b) {
            const std::int64_t n0 = b * block, n1 = std::min(w.n, n0 + block);
            for (std::int64_t m0 = 0; m0 < m; m0 += kFloat16Rows) {
                const auto rows =
                    static_cast<std::size_t>(std::min<std::int64_t>(kFloat16Rows, m - m0));
                rowsFns[rows - 1](x + m0 * ldx, ldx, w, bias, n0, n1, y + m0 * w.n);
            }
        }
    });
}

} // namespace bitlens::kernels
