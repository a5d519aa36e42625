// AVX-512 low-bit kernels (kernels/lowbit.h): the int8 GEMM on vpdpbusd (AVX512-VNNI), the
// activation quantizer, and the 4-bit weight-only GEMV / GEMM. The quantizers' entry points
// here also pick the AVX2 rows (lowbit_avx2.cpp) below AVX-512. Only the functions marked
// BITLENS_AVX512 use AVX-512; callers check cpuFeatures() first, so the library still runs on
// CPUs without it (the hook then keeps LibTorch's kernels).

#include "kernels/lowbit.h"

#include <ATen/Parallel.h>

// GCC 12 flags the intrinsics' own _mm512_undefined_*() under target attributes.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#define BITLENS_AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))

namespace bitlens::kernels {

namespace {

// --- int8 GEMM -------------------------------------------------------------------------------

/// Rows of activations per micro-tile: 6 rows x 4 vectors = 24 accumulators + 4 weight vectors
/// + 1 broadcast of the 32 zmm registers.
constexpr int kRowsPerTile = 6;
/// Rows a task covers, so that two threads split large M as well as N.
constexpr std::int64_t kRowsPerTask = 8 * kRowsPerTile;

struct Int8Out {
    std::int32_t* acc = nullptr;          ///< int32 output, or
    float* y = nullptr;                   ///< float output with the epilogue
    const Int8Epilogue* epilogue = nullptr;
};

/// One micro-tile: rows [m0, m0 + MR), channels [n0, n0 + 16 NB) of the panel at `panel`.
template <int MR, int NB>
BITLENS_AVX512 void int8Block(const Int8Activations& x, const Int8PackedWeight& w,
                              const std::int8_t* panel, std::int64_t m0, std::int64_t n0,
                              const Int8Out& out)
{
    // The accumulators stay in registers only if every loop over MR and NB is unrolled.
    __m512i accs[MR][NB];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j)
            accs[r][j] = _mm512_setzero_si512();
    const std::uint8_t* xr = x.codes + m0 * x.ldx;
    const std::int64_t k4Count = w.kPadded / 4;
    for (std::int64_t k4 = 0; k4 < k4Count; ++k4) {
        // One 64-byte load per 16 channels: 4 consecutive k of each channel (see lowbit.h).
        const std::int8_t* wp = panel + k4 * NB * 64;
        __m512i b[NB];
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j)
            b[j] = _mm512_load_si512(wp + 64 * j);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            std::int32_t four;
            std::memcpy(&four, xr + r * x.ldx + 4 * k4, 4);
            const __m512i a = _mm512_set1_epi32(four);
#pragma GCC unroll 4
            for (int j = 0; j < NB; ++j)
                accs[r][j] = _mm512_dpbusd_epi32(accs[r][j], a, b[j]);
        }
    }
    // Spill the tile once: the epilogue indexes it with run-time bounds, and indexing the
    // register array itself would make GCC keep every accumulator on the stack.
    alignas(64) std::int32_t tile[MR][NB * 16];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j)
            _mm512_store_si512(&tile[r][16 * j], accs[r][j]);
    for (int j = 0; j < NB; ++j) {
        const std::int64_t n = n0 + 16 * j;
        if (n >= w.n)
            break;
        const __mmask16 mask =
            w.n - n >= 16 ? __mmask16(0xFFFF) : __mmask16((1U << (w.n - n)) - 1U);
        const __m512i colSum = _mm512_maskz_loadu_epi32(mask, w.colSum.data() + n);
        __m512 wScale = _mm512_setzero_ps(), bias = _mm512_setzero_ps();
        if (out.y) {
            wScale = _mm512_maskz_loadu_ps(mask, out.epilogue->wScale + n);
            if (out.epilogue->bias)
                bias = _mm512_maskz_loadu_ps(mask, out.epilogue->bias + n);
        }
        for (int r = 0; r < MR; ++r) {
            const std::int64_t m = m0 + r;
            const std::int32_t zx = x.zeroPoint ? x.zeroPoint[x.zeroPointPerRow ? m : 0] : 0;
            const __m512i acc =
                _mm512_sub_epi32(_mm512_load_si512(&tile[r][16 * j]), _mm512_mullo_epi32(_mm512_set1_epi32(zx), colSum));
            if (!out.y) {
                _mm512_mask_storeu_epi32(out.acc + m * w.n + n, mask, acc);
                continue;
            }
            const Int8Epilogue& e = *out.epilogue;
            const __m512 scale =
                _mm512_mul_ps(_mm512_set1_ps(e.xScale[e.xScalePerRow ? m : 0]), wScale);
            __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
            if (e.bias)
                v = _mm512_add_ps(v, bias);
            if (e.residual)
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, e.residual + m * e.ldResidual + n));
            _mm512_mask_storeu_ps(out.y + m * w.n + n, mask, v);
        }
    }
}

using Int8BlockFn = void (*)(const Int8Activations&, const Int8PackedWeight&, const std::int8_t*,
                             std::int64_t, std::int64_t, const Int8Out&);

template <int MR>
constexpr std::array<Int8BlockFn, 4> blocksFor()
{
    return {&int8Block<MR, 1>, &int8Block<MR, 2>, &int8Block<MR, 3>, &int8Block<MR, 4>};
}

/// [rows - 1][vectors - 1] -> micro-kernel.
constexpr std::array<std::array<Int8BlockFn, 4>, kRowsPerTile> kInt8Blocks = {
    blocksFor<1>(), blocksFor<2>(), blocksFor<3>(), blocksFor<4>(), blocksFor<5>(), blocksFor<6>()};

void int8GemmAvx512(const Int8Activations& x, const Int8PackedWeight& w, const Int8Out& out)
{
    if (!cpuFeatures().avx512Vnni)
        throw std::runtime_error("int8GemmVnni: this CPU has no AVX512-VNNI");
    if (x.ldx < w.kPadded)
        throw std::invalid_argument("int8GemmVnni: activation rows shorter than the packed K");
    const std::int64_t nPadded = (w.n + 15) / 16 * 16;
    const std::int64_t panels = (nPadded + kInt8PanelWidth - 1) / kInt8PanelWidth;
    const std::int64_t rowTasks = (x.m + kRowsPerTask - 1) / kRowsPerTask;
    if (x.m == 0 || w.n == 0)
        return;
    // Task t covers panel t / rowTasks and row block t % rowTasks: each thread gets a contiguous
    // run of panels and reuses one panel (in L2) for all its row blocks.
    at::parallel_for(0, panels * rowTasks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) {
            const std::int64_t panel = t / rowTasks;
            const std::int64_t n0 = panel * kInt8PanelWidth;
            const std::int64_t width = std::min(kInt8PanelWidth, nPadded - n0);
            const std::int8_t* panelData = w.data.data() + n0 * w.kPadded;
            const std::int64_t mEnd = std::min(x.m, (t % rowTasks + 1) * kRowsPerTask);
            for (std::int64_t m0 = (t % rowTasks) * kRowsPerTask; m0 < mEnd; m0 += kRowsPerTile) {
                const std::int64_t rows = std::min<std::int64_t>(kRowsPerTile, mEnd - m0);
                kInt8Blocks[static_cast<std::size_t>(rows - 1)]
                           [static_cast<std::size_t>(width / 16 - 1)](x, w, panelData, m0, n0,
                                                                      out);
            }
        }
    });
}

// --- activation quantizer --------------------------------------------------------------------

/// Rows [begin, end) of quantizeRowsU8.
BITLENS_AVX512 void quantizeRowsAvx512(const float* x, std::int64_t begin, std::int64_t end,
                                       std::int64_t k, std::int64_t ldx, const float* invScale,
                                       const std::int32_t* zeroPoint, bool perRow,
                                       std::int32_t qmin, std::int32_t qmax, std::int32_t shift,
                                       std::uint8_t* u, std::int64_t ldu)
{
    for (std::int64_t r = begin; r < end; ++r) {
        const std::int32_t zp = zeroPoint[perRow ? r : 0];
        const __m512 inv = _mm512_set1_ps(invScale[perRow ? r : 0]);
        const __m512 zpf = _mm512_set1_ps(static_cast<float>(zp));
        const __m512 lo = _mm512_set1_ps(static_cast<float>(qmin));
        const __m512 hi = _mm512_set1_ps(static_cast<float>(qmax));
        const __m512i sh = _mm512_set1_epi32(shift);
        const float* src = x + r * ldx;
        std::uint8_t* dst = u + r * ldu;
        for (std::int64_t j = 0; j < k; j += 16) {
            const __mmask16 mask =
                k - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1U << (k - j)) - 1U);
            const __m512 v = _mm512_maskz_loadu_ps(mask, src + j);
            // Same steps as quantize(): x * (1 / scale), half to even, + zp, clamp.
            __m512 t = _mm512_roundscale_ps(_mm512_mul_ps(v, inv),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            t = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(t, zpf), lo), hi);
            t = _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), zpf);
            const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(t), sh);
            _mm_mask_storeu_epi8(dst + j, mask, _mm512_cvtepi32_epi8(q));
        }
        for (std::int64_t j = k; j < ldu; ++j)
            dst[j] = static_cast<std::uint8_t>(zp + shift);
    }
}

/// min / max of x[begin, end); `nan` set when a NaN was seen. Four independent accumulators
/// per result: one chain would wait on vminps' latency every 16 floats.
BITLENS_AVX512 void minMaxAvx512(const float* x, std::int64_t begin, std::int64_t end, float* lo,
                                 float* hi, bool* nan)
{
    constexpr int kChains = 4;
    __m512 a[kChains], b[kChains];
    for (int c = 0; c < kChains; ++c) {
        a[c] = _mm512_set1_ps(std::numeric_limits<float>::infinity());
        b[c] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    }
    __mmask16 unordered = 0;
    std::int64_t i = begin;
    for (; i + 16 * kChains <= end; i += 16 * kChains) {
#pragma GCC unroll 4
        for (int c = 0; c < kChains; ++c) {
            const __m512 v = _mm512_loadu_ps(x + i + 16 * c);
            unordered |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            a[c] = _mm512_min_ps(a[c], v);
            b[c] = _mm512_max_ps(b[c], v);
        }
    }
    for (; i < end; i += 16) {
        const __mmask16 mask =
            end - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1U << (end - i)) - 1U);
        const __m512 v = _mm512_mask_loadu_ps(a[0], mask, x + i);  // masked lanes: a for min
        unordered |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        a[0] = _mm512_min_ps(a[0], v);
        b[0] = _mm512_max_ps(b[0], _mm512_mask_blend_ps(mask, b[0], v));
    }
    for (int c = 1; c < kChains; ++c) {
        a[0] = _mm512_min_ps(a[0], a[c]);
        b[0] = _mm512_max_ps(b[0], b[c]);
    }
    *lo = _mm512_reduce_min_ps(a[0]);
    *hi = _mm512_reduce_max_ps(b[0]);
    *nan = unordered != 0;
}

// --- 4-bit weight-only -----------------------------------------------------------------------

/// Rows of x handled together (one dequantized weight vector feeds MR FMAs).
constexpr int kNibbleRows = 8;

BITLENS_AVX512 float dotAvx512(const float* a, const float* b, std::int64_t n)
{
    __m512 acc = _mm512_setzero_ps();
    for (std::int64_t i = 0; i < n; i += 16) {
        const __mmask16 mask = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1U << (n - i)) - 1U);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i), _mm512_maskz_loadu_ps(mask, b + i),
                              acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/// Output channels [n, n + NR) for rows [0, MR) of x. The 16-entry table is multiplied by the
/// group's scale when the group changes (vmulps), so one vpermps yields table[u] * s for 16
/// weights, straight into the FMAs: no partial sums per group. NR rows of weights advance
/// together (more independent loads and FMA chains in flight).
template <int MR, int NR>
BITLENS_AVX512 void nibbleTile(const float* x, std::int64_t ldx, const Nibble4PackedWeight& w,
                               std::int64_t n, __m512 (&acc)[NR][MR])
{
    const __m512 table = _mm512_loadu_ps(w.table);
    const std::int64_t rowBytes = w.kPadded / 2;
    const std::uint8_t* rows[NR];
    const float* scales[NR];
    __m512 scaled[NR];
#pragma GCC unroll 4
    for (int i = 0; i < NR; ++i) {
        rows[i] = w.data.data() + (n + i) * rowBytes;
        scales[i] = w.scale.data() + (n + i) * w.groups;
        scaled[i] = _mm512_mul_ps(table, _mm512_set1_ps(scales[i][0]));
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r)
            acc[i][r] = _mm512_setzero_ps();
    }
    // The group advances at most once per 32 elements (groups are multiples of 32): compare
    // with its end instead of dividing (an integer division per 32 weights costs more than
    // the arithmetic).
    std::int64_t group = 0;
    std::int64_t groupEnd = w.groups > 1 ? w.group : w.kPadded;
    for (std::int64_t k = 0; k < w.kPadded; k += kNibbleChunk) {
        __m512i words[NR];
#pragma GCC unroll 4
        for (int i = 0; i < NR; ++i)
            words[i] = _mm512_load_si512(rows[i] + k / 2);  // 128 codes (see lowbit.h)
#pragma GCC unroll 4
        for (int half = 0; half < 4; ++half) {
            // Elements k + 32 half .. + 31 (nibbles 2 half and 2 half + 1) share one group.
            if (k + 32 * half >= groupEnd) {
                ++group;
                groupEnd = group + 1 < w.groups ? groupEnd + w.group : w.kPadded;
#pragma GCC unroll 4
                for (int i = 0; i < NR; ++i)
                    scaled[i] = _mm512_mul_ps(table, _mm512_set1_ps(scales[i][group]));
            }
#pragma GCC unroll 2
            for (int s = 2 * half; s < 2 * half + 2; ++s) {
#pragma GCC unroll 4
                for (int i = 0; i < NR; ++i) {
                    // vpermps reads the low 4 bits of each index: nibble s needs a shift only.
                    const __m512i index = s == 0 ? words[i] : _mm512_srli_epi32(words[i], 4 * s);
                    const __m512 wv = _mm512_permutexvar_ps(index, scaled[i]);
#pragma GCC unroll 8
                    for (int r = 0; r < MR; ++r)
                        acc[i][r] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + r * ldx + k + 16 * s),
                                                    acc[i][r]);
                }
            }
        }
    }
}

template <int MR, int NR>
BITLENS_AVX512 void nibbleStore(const Nibble4PackedWeight& w, const float* xsum, std::int64_t n,
                                __m512 (&acc)[NR][MR], float* y, std::int64_t ldy)
{
    for (int i = 0; i < NR; ++i)
        for (int r = 0; r < MR; ++r) {
            float v = _mm512_reduce_add_ps(acc[i][r]);
            if (xsum)
                v += dotAvx512(w.offset.data() + (n + i) * w.groups, xsum + r * w.groups,
                               w.groups);
            y[r * ldy + n + i] = v;
        }
}

/// Output channels [n0, n1) for rows [0, MR) of x; xsum [MR, groups] (null without offsets).
template <int MR>
BITLENS_AVX512 void nibbleRows(const float* x, std::int64_t ldx, const Nibble4PackedWeight& w,
                               const float* xsum, std::int64_t n0, std::int64_t n1, float* y,
                               std::int64_t ldy)
{
    // Weight rows per step: 4 at batch 1 (the GEMV), fewer as rows of x use up registers.
    constexpr int kRowsTogether = MR == 1 ? 4 : (MR == 2 ? 2 : 1);
    std::int64_t n = n0;
    for (; n + kRowsTogether <= n1; n += kRowsTogether) {
        __m512 acc[kRowsTogether][MR];
        nibbleTile<MR, kRowsTogether>(x, ldx, w, n, acc);
        nibbleStore<MR, kRowsTogether>(w, xsum, n, acc, y, ldy);
    }
    for (; n < n1; ++n) {
        __m512 acc[1][MR];
        nibbleTile<MR, 1>(x, ldx, w, n, acc);
        nibbleStore<MR, 1>(w, xsum, n, acc, y, ldy);
    }
}

using NibbleRowsFn = void (*)(const float*, std::int64_t, const Nibble4PackedWeight&,
                              const float*, std::int64_t, std::int64_t, float*, std::int64_t);
constexpr std::array<NibbleRowsFn, kNibbleRows> kNibbleRowsFns = {
    &nibbleRows<1>, &nibbleRows<2>, &nibbleRows<3>, &nibbleRows<4>,
    &nibbleRows<5>, &nibbleRows<6>, &nibbleRows<7>, &nibbleRows<8>};

// --- int4 GEMV on VNNI ------------------------------------------------------------------------

/// Panels of 16 channels advanced together: 2 vpdpbusd chains each, 2 NP in flight.
constexpr int kVnniPanels = 4;

BITLENS_AVX512 void quantizeGroupsAvx512(const float* x, std::int64_t k, std::int64_t kPadded,
                                         std::int64_t group, std::int8_t* q, float* d,
                                         float* xsum)
{
    const std::int64_t groups = (k + group - 1) / group;
    std::memset(q, 0, static_cast<std::size_t>(kPadded));
    const __m512 absMask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t begin = g * group, end = std::min(k, begin + group);
        // The sum in k order, as the twin does (a vector sum would round differently).
        float sum = 0.0f;
        for (std::int64_t j = begin; j < end; ++j)
            sum += x[j];
        xsum[g] = sum;
        if (!std::isfinite(sum)) {
            d[g] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        __m512 amaxV = _mm512_setzero_ps();
        for (std::int64_t j = begin; j < end; j += 16) {
            const __mmask16 mask =
                end - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1U << (end - j)) - 1U);
            amaxV = _mm512_max_ps(amaxV, _mm512_and_ps(_mm512_maskz_loadu_ps(mask, x + j), absMask));
        }
        const float amax = _mm512_reduce_max_ps(amaxV);
        d[g] = amax / 127.0f;
        if (amax == 0.0f)
            continue;
        const __m512 inv = _mm512_set1_ps(127.0f / amax);
        const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
        for (std::int64_t j = begin; j < end; j += 16) {
            const __mmask16 mask =
                end - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1U << (end - j)) - 1U);
            __m512 t = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + j), inv),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            t = _mm512_min_ps(_mm512_max_ps(t, lo), hi);
            _mm_mask_storeu_epi8(q + j, mask, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(t)));
        }
    }
}

/// Channels of NP panels starting at `panel`, for one row of quantized activations.
template <int NP>
BITLENS_AVX512 void nibbleVnniPanels(const Nibble4VnniPackedWeight& w, std::int64_t panel,
                                     const std::int8_t* q, const float* d, const float* xsum,
                                     float* y)
{
    const std::int64_t panelBytes = w.kPadded / 8 * 64;
    const std::uint8_t* data[NP];
    const float* scale[NP];
    const float* offset[NP];
    __m512 acc[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
        data[p] = w.data.data() + (panel + p) * panelBytes;
        scale[p] = w.scale.data() + (panel + p) * w.groups * kNibbleVnniPanel;
        offset[p] = w.offset.size() ? w.offset.data() + (panel + p) * w.groups * kNibbleVnniPanel
                                    : nullptr;
        acc[p] = _mm512_setzero_ps();
    }
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (std::int64_t g = 0; g < w.groups; ++g) {
        const std::int64_t begin = g * w.group, end = std::min(w.kPadded, begin + w.group);
        __m512i dotLo[NP], dotHi[NP];
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p)
            dotLo[p] = dotHi[p] = _mm512_setzero_si512();
        for (std::int64_t j = begin; j < end; j += 8) {
            std::int32_t a, b;
            std::memcpy(&a, q + j, 4);
            std::memcpy(&b, q + j + 4, 4);
            const __m512i qa = _mm512_set1_epi32(a), qb = _mm512_set1_epi32(b);
#pragma GCC unroll 4
            for (int p = 0; p < NP; ++p) {
                const __m512i v = _mm512_load_si512(data[p] + j * 8);
                dotLo[p] = _mm512_dpbusd_epi32(dotLo[p], _mm512_and_si512(v, low), qa);
                dotHi[p] = _mm512_dpbusd_epi32(dotHi[p], _mm512_and_si512(_mm512_srli_epi16(v, 4), low),
                                               qb);
            }
        }
        const __m512 dg = _mm512_set1_ps(d[g]);
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) {
            const __m512 sd = _mm512_mul_ps(_mm512_load_ps(scale[p] + g * kNibbleVnniPanel), dg);
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(dotLo[p], dotHi[p])), sd,
                                     acc[p]);
            if (offset[p])
                acc[p] = _mm512_fmadd_ps(_mm512_load_ps(offset[p] + g * kNibbleVnniPanel),
                                         _mm512_set1_ps(xsum[g]), acc[p]);
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
        const std::int64_t n = (panel + p) * kNibbleVnniPanel;
        const __mmask16 mask =
            w.n - n >= 16 ? __mmask16(0xFFFF) : __mmask16((1U << (w.n - n)) - 1U);
        _mm512_mask_storeu_ps(y + n, mask, acc[p]);
    }
}

} // namespace

void int8GemmVnni(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc)
{
    Int8Out out;
    out.acc = acc;
    int8GemmAvx512(x, w, out);
}

void int8GemmVnniF32(const Int8Activations& x, const Int8PackedWeight& w,
                     const Int8Epilogue& epilogue, float* y)
{
    Int8Out out;
    out.y = y;
    out.epilogue = &epilogue;
    int8GemmAvx512(x, w, out);
}

void quantizeRowsU8(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx,
                    const float* invScale, const std::int32_t* zeroPoint, bool perRow,
                    std::int32_t qmin, std::int32_t qmax, std::int32_t shift, std::uint8_t* u,
                    std::int64_t ldu)
{
    if (cpuFeatures().avx512)
        at::parallel_for(0, m, 16, [&](std::int64_t begin, std::int64_t end) {
            quantizeRowsAvx512(x, begin, end, k, ldx, invScale, zeroPoint, perRow, qmin, qmax,
                               shift, u, ldu);
        });
    else if (cpuFeatures().avx2)
        quantizeRowsU8Avx2(x, m, k, ldx, invScale, zeroPoint, perRow, qmin, qmax, shift, u, ldu);
    else
        quantizeRowsU8Ref(x, m, k, ldx, invScale, zeroPoint, perRow, qmin, qmax, shift, u, ldu);
}

void minMaxF32(const float* x, std::int64_t count, float* lo, float* hi)
{
    if (!cpuFeatures().avx512) {
        if (cpuFeatures().avx2)
            minMaxF32Avx2(x, count, lo, hi);
        else
            minMaxF32Ref(x, count, lo, hi);
        return;
    }
    minMaxThreaded(x, count, &minMaxAvx512, lo, hi);
}

void nibble4GemmAvx512(const float* x, std::int64_t m, std::int64_t ldx,
                       const Nibble4PackedWeight& w, float* y)
{
    if (!cpuFeatures().avx512)
        throw std::runtime_error("nibble4GemmAvx512: this CPU has no AVX-512");
    if (ldx < w.kPadded)
        throw std::invalid_argument("nibble4GemmAvx512: activation rows shorter than padded K");
    const AlignedArray<float> xsum = nibble4GroupSums(x, m, ldx, w);
    // 32 output channels per task at least: enough work to amortise a task.
    at::parallel_for(0, w.n, 32, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t m0 = 0; m0 < m; m0 += kNibbleRows) {
            const std::int64_t rows = std::min<std::int64_t>(kNibbleRows, m - m0);
            kNibbleRowsFns[static_cast<std::size_t>(rows - 1)](
                x + m0 * ldx, ldx, w, xsum.size() ? xsum.data() + m0 * w.groups : nullptr,
                begin, end, y + m0 * w.n, w.n);
        }
    });
}

} // namespace bitlens::kernels

namespace bitlens::kernels {

void quantizeGroupsQ8(const float* x, std::int64_t k, std::int64_t kPadded, std::int64_t group,
                      std::int8_t* q, float* d, float* xsum)
{
    if (cpuFeatures().avx512)
        quantizeGroupsAvx512(x, k, kPadded, group, q, d, xsum);
    else if (cpuFeatures().avx2)
        quantizeGroupsQ8Avx2(x, k, kPadded, group, q, d, xsum);
    else
        quantizeGroupsQ8Ref(x, k, kPadded, group, q, d, xsum);
}

void nibble4GemvVnni(const float* x, std::int64_t m, std::int64_t ldx,
                     const Nibble4VnniPackedWeight& w, float* y)
{
    if (!cpuFeatures().avx512Vnni)
        throw std::runtime_error("nibble4GemvVnni: this CPU has no AVX512-VNNI");
    if (ldx < w.k)
        throw std::invalid_argument("nibble4GemvVnni: activation rows shorter than K");
    if (m == 0 || w.n == 0)
        return;
    // Each row quantized once (cheap next to reading the weights), then all rows per block of
    // panels, so a block's weights are read from memory once and from L2 for later rows.
    AlignedArray<std::int8_t> q(static_cast<std::size_t>(m * w.kPadded));
    AlignedArray<float> d(static_cast<std::size_t>(m * w.groups)),
        xsum(static_cast<std::size_t>(m * w.groups));
    for (std::int64_t r = 0; r < m; ++r)
        quantizeGroupsAvx512(x + r * ldx, w.k, w.kPadded, w.group, q.data() + r * w.kPadded,
                             d.data() + r * w.groups, xsum.data() + r * w.groups);
    const std::int64_t panels = (w.n + kNibbleVnniPanel - 1) / kNibbleVnniPanel;
    const std::int64_t blocks = (panels + kVnniPanels - 1) / kVnniPanels;
    at::parallel_for(0, blocks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t b = begin; b < end; ++b) {
            const std::int64_t p0 = b * kVnniPanels;
            const std::int64_t count = std::min<std::int64_t>(kVnniPanels, panels - p0);
            for (std::int64_t r = 0; r < m; ++r) {
                const std::int8_t* qr = q.data() + r * w.kPadded;
                const float* dr = d.data() + r * w.groups;
                const float* sr = xsum.data() + r * w.groups;
                float* yr = y + r * w.n;
                switch (count) {
                case 4: nibbleVnniPanels<4>(w, p0, qr, dr, sr, yr); break;
                case 3: nibbleVnniPanels<3>(w, p0, qr, dr, sr, yr); break;
                case 2: nibbleVnniPanels<2>(w, p0, qr, dr, sr, yr); break;
                default: nibbleVnniPanels<1>(w, p0, qr, dr, sr, yr); break;
                }
            }
        }
    });
}

} // namespace bitlens::kernels

// --- 16-bit float weight-only GEMM (lowbit.h) ------------------------------------------------

#define BITLENS_AVX512F16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

namespace bitlens::kernels {

namespace {

/// Rows of x per pass over a weight row: 4 rows x 2 accumulators + 2 weight vectors.
constexpr int kFloat16Rows512 = 4;

/// Sixteen 16-bit floats at p widened to float32 (exact).
template <Float16Kind Kind>
BITLENS_AVX512F16 __m512 widen16(const std::uint16_t* p)
{
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (Kind == Float16Kind::Fp16)
        return _mm512_cvtph_ps(h);
    else
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/// y[r, n] for r < MR and n in [n0, n1): two 16-lane accumulators per row over 32 k at a time;
/// the K tail (under 16) through a masked load.
template <Float16Kind Kind, int MR>
BITLENS_AVX512F16 void float16RowsAvx512(const float* x, std::int64_t ldx, const Float16Weight& w,
                                         const float* bias, std::int64_t n0, std::int64_t n1,
                                         float* y)
{
    const std::int64_t tail = w.k % 16;
    const __mmask16 tailMask = static_cast<__mmask16>((1u << tail) - 1u);
    const std::int64_t kMain = w.k - tail;
    for (std::int64_t n = n0; n < n1; ++n) {
        const std::uint16_t* wr = w.bits + n * w.ldw;
        __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r)
            acc0[r] = acc1[r] = _mm512_setzero_ps();
        std::int64_t k = 0;
        for (; k + 32 <= kMain; k += 32) {
            // 1 KiB ahead of the weight stream, as in the AVX2 row (lowbit_avx2.cpp).
            _mm_prefetch(reinterpret_cast<const char*>(wr + k) + 1024, _MM_HINT_T0);
            const __m512 w0 = widen16<Kind>(wr + k);
            const __m512 w1 = widen16<Kind>(wr + k + 16);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r) {
                acc0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + r * ldx + k), acc0[r]);
                acc1[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + r * ldx + k + 16), acc1[r]);
            }
        }
        if (k < kMain) {
            const __m512 w0 = widen16<Kind>(wr + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r)
                acc0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + r * ldx + k), acc0[r]);
            k += 16;
        }
        if (tail) {
            // Masked lanes load as zero from both operands, so they add nothing.
            const __m256i h = _mm256_maskz_loadu_epi16(tailMask, wr + k);
            const __m512 wt = Kind == Float16Kind::Fp16
                                  ? _mm512_cvtph_ps(h)
                                  : _mm512_castsi512_ps(
                                        _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r)
                acc1[r] = _mm512_fmadd_ps(wt, _mm512_maskz_loadu_ps(tailMask, x + r * ldx + k),
                                          acc1[r]);
        }
        for (int r = 0; r < MR; ++r) {
            const float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
            y[r * w.n + n] = bias ? sum + bias[n] : sum;
        }
    }
}

template <Float16Kind Kind>
void float16DriverAvx512(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                         const float* bias, float* y)
{
    using RowsFn = void (*)(const float*, std::int64_t, const Float16Weight&, const float*,
                            std::int64_t, std::int64_t, float*);
    constexpr std::array<RowsFn, kFloat16Rows512> rowsFns = {
        &float16RowsAvx512<Kind, 1>, &float16RowsAvx512<Kind, 2>, &float16RowsAvx512<Kind, 3>,
        &float16RowsAvx512<Kind, 4>};
    // About 128 KiB of weights per task, so the later row groups read them from L2.
    const std::int64_t block =
        std::clamp<std::int64_t>((128 * 1024) / std::max<std::int64_t>(2 * w.k, 1), 8, 512);
    const std::int64_t blocks = (w.n + block - 1) / block;
    at::parallel_for(0, blocks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t b = begin; b < end; ++b) {
            const std::int64_t n0 = b * block, n1 = std::min(w.n, n0 + block);
            for (std::int64_t m0 = 0; m0 < m; m0 += kFloat16Rows512) {
                const auto rows =
                    static_cast<std::size_t>(std::min<std::int64_t>(kFloat16Rows512, m - m0));
                rowsFns[rows - 1](x + m0 * ldx, ldx, w, bias, n0, n1, y + m0 * w.n);
            }
        }
    });
}

} // namespace

void float16GemmAvx512(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                       const float* bias, float* y)
{
    if (!cpuFeatures().avx512)
        throw std::runtime_error("float16GemmAvx512: this CPU lacks the ISA");
    if (ldx < w.k || w.ldw < w.k)
        throw std::invalid_argument("float16GemmAvx512: rows shorter than K");
    if (m == 0 || w.n == 0)
        return;
    if (w.kind == Float16Kind::Fp16)
        float16DriverAvx512<Float16Kind::Fp16>(x, m, ldx, w, bias, y);
    else
        float16DriverAvx512<Float16Kind::Bf16>(x, m, ldx, w, bias, y);
}

} // namespace bitlens::kernels

// --- float32 GEMV (lowbit.h) ---------------------------------------------------------------------

namespace bitlens::kernels {

namespace {

/// y[r, n] for r < MR and n in [n0, n1): two 16-lane accumulators per row over 32 k at a time;
/// the K tail (under 16) through a masked load.
template <int MR>
BITLENS_AVX512F16 void float32RowsAvx512(const float* x, std::int64_t ldx, const Float32Weight& w,
                                         const float* bias, std::int64_t n0, std::int64_t n1,
                                         float* y)
{
    const std::int64_t tail = w.k % 16;
    const __mmask16 tailMask = static_cast<__mmask16>((1u << tail) - 1u);
    const std::int64_t kMain = w.k - tail;
    for (std::int64_t n = n0; n < n1; ++n) {
        const float* wr = w.data + n * w.ldw;
        __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r)
            acc0[r] = acc1[r] = _mm512_setzero_ps();
        std::int64_t k = 0;
        for (; k + 32 <= kMain; k += 32) {
            // 2 KiB ahead of the weight stream (the 16-bit row's 1 KiB in float32's bytes).
            _mm_prefetch(reinterpret_cast<const char*>(wr + k) + 2048, _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(wr + k) + 2048 + 64, _MM_HINT_T0);
            const __m512 w0 = _mm512_loadu_ps(wr + k);
            const __m512 w1 = _mm512_loadu_ps(wr + k + 16);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r) {
                acc0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + r * ldx + k), acc0[r]);
                acc1[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + r * ldx + k + 16), acc1[r]);
            }
        }
        if (k < kMain) {
            const __m512 w0 = _mm512_loadu_ps(wr + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r)
                acc0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + r * ldx + k), acc0[r]);
            k += 16;
        }
        if (tail) {
            // Masked lanes load as zero from both operands, so they add nothing.
            const __m512 wt = _mm512_maskz_loadu_ps(tailMask, wr + k);
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r)
                acc1[r] = _mm512_fmadd_ps(wt, _mm512_maskz_loadu_ps(tailMask, x + r * ldx + k),
                                          acc1[r]);
        }
        for (int r = 0; r < MR; ++r) {
            const float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
            y[r * w.n + n] = bias ? sum + bias[n] : sum;
        }
    }
}

} // namespace

void float32GemmAvx512(const float* x, std::int64_t m, std::int64_t ldx, const Float32Weight& w,
                       const float* bias, float* y)
{
    if (!cpuFeatures().avx512)
        throw std::runtime_error("float32GemmAvx512: this CPU lacks the ISA");
    if (ldx < w.k || w.ldw < w.k)
        throw std::invalid_argument("float32GemmAvx512: rows shorter than K");
    if (m == 0 || w.n == 0)
        return;
    using RowsFn = void (*)(const float*, std::int64_t, const Float32Weight&, const float*,
                            std::int64_t, std::int64_t, float*);
    constexpr std::array<RowsFn, kFloat16Rows512> rowsFns = {
        &float32RowsAvx512<1>, &float32RowsAvx512<2>, &float32RowsAvx512<3>,
        &float32RowsAvx512<4>};
    // About 128 KiB of weights per task, so the later row groups read them from L2.
    const std::int64_t block =
        std::clamp<std::int64_t>((128 * 1024) / std::max<std::int64_t>(4 * w.k, 1), 8, 512);
    const std::int64_t blocks = (w.n + block - 1) / block;
    at::parallel_for(0, blocks, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t b = begin; b < end; ++b) {
            const std::int64_t n0 = b * block, n1 = std::min(w.n, n0 + block);
            for (std::int64_t m0 = 0; m0 < m; m0 += kFloat16Rows512) {
                const auto rows =
                    static_cast<std::size_t>(std::min<std::int64_t>(kFloat16Rows512, m - m0));
                rowsFns[rows - 1](x + m0 * ldx, ldx, w, bias, n0, n1, y + m0 * w.n);
            }
        }
    });
}

} // namespace bitlens::kernels
