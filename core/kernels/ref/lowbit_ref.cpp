// Packing and the scalar `_ref` twins of the low-bit kernels (kernels/lowbit.h). Plain C++ with
// no ISA flags: this file is what every fast kernel is checked against, and the fallback.

#include "kernels/lowbit.h"
#include "kernels/nf4_codes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>
#include <stdexcept>

namespace bitlens::kernels {

namespace {

std::int64_t roundUp(std::int64_t v, std::int64_t multiple)
{
    return (v + multiple - 1) / multiple * multiple;
}

/// The byte of packed panel data that holds w[n, k].
std::size_t int8PackedIndex(const Int8PackedWeight& w, std::int64_t n, std::int64_t k)
{
    const std::int64_t panel = n / kInt8PanelWidth;
    const std::int64_t n0 = panel * kInt8PanelWidth;
    const std::int64_t width = std::min(kInt8PanelWidth, roundUp(w.n, 16) - n0);
    return static_cast<std::size_t>(n0 * w.kPadded + (k / 4) * width * 4 + (n - n0) * 4 + k % 4);
}

/// The 4-bit code of w[n, k] in the packed layout.
std::uint8_t nibbleAt(const Nibble4PackedWeight& w, std::int64_t n, std::int64_t k)
{
    const std::int64_t chunk = k / kNibbleChunk;
    const std::int64_t word = k % 16, shift = (k % kNibbleChunk) / 16;
    const std::uint8_t byte = w.data[static_cast<std::size_t>(n * (w.kPadded / 2) + chunk * 64 +
                                                              word * 4 + shift / 2)];
    return shift % 2 == 0 ? byte & 0x0F : byte >> 4;
}

constexpr float kUint4[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

} // namespace

const float* nf4Table() { return kNf4Codes.data(); }
const float* uint4Table() { return kUint4; }

Int8PackedWeight packInt8Weight(const std::int8_t* w, std::int64_t n, std::int64_t k,
                                std::int64_t ldw)
{
    if (n < 0 || k < 0 || k > kInt8MaxK || ldw < k)
        throw std::invalid_argument("packInt8Weight: bad shape");
    Int8PackedWeight p;
    p.n = n;
    p.k = k;
    p.kPadded = roundUp(k, 4);
    p.data = AlignedArray<std::int8_t>(static_cast<std::size_t>(roundUp(n, 16) * p.kPadded));
    p.colSum = AlignedArray<std::int32_t>(static_cast<std::size_t>(n));
    p.maxAbsCode = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        std::int32_t sum = 0;
        for (std::int64_t j = 0; j < k; ++j) {
            const std::int8_t v = w[i * ldw + j];
            p.data[int8PackedIndex(p, i, j)] = v;
            sum += v;
            p.maxAbsCode = std::max(p.maxAbsCode, std::abs(static_cast<std::int32_t>(v)));
        }
        p.colSum[static_cast<std::size_t>(i)] = sum;
    }
    return p;
}

void int8GemmRef(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc)
{
    for (std::int64_t m = 0; m < x.m; ++m) {
        const std::int32_t zx =
            x.zeroPoint ? x.zeroPoint[x.zeroPointPerRow ? m : 0] : 0;
        for (std::int64_t n = 0; n < w.n; ++n) {
            // Wrapping (unsigned) arithmetic, as vpdpbusd adds; the final value is exact.
            std::uint32_t sum = 0;
            for (std::int64_t k = 0; k < w.kPadded; ++k)
                sum += static_cast<std::uint32_t>(static_cast<std::int32_t>(x.codes[m * x.ldx + k]) *
                                                  w.data[int8PackedIndex(w, n, k)]);
            sum -= static_cast<std::uint32_t>(zx) *
                   static_cast<std::uint32_t>(w.colSum[static_cast<std::size_t>(n)]);
            acc[m * w.n + n] = static_cast<std::int32_t>(sum);
        }
    }
}

void int8GemmRefF32(const Int8Activations& x, const Int8PackedWeight& w,
                    const Int8Epilogue& e, float* y)
{
    AlignedArray<std::int32_t> acc(static_cast<std::size_t>(x.m * w.n));
    int8GemmRef(x, w, acc.data());
    for (std::int64_t m = 0; m < x.m; ++m) {
        const float sx = e.xScale[e.xScalePerRow ? m : 0];
        for (std::int64_t n = 0; n < w.n; ++n) {
            const float scale = sx * e.wScale[n];
            float v = static_cast<float>(acc[static_cast<std::size_t>(m * w.n + n)]) * scale;
            if (e.bias)
                v += e.bias[n];
            if (e.residual)
                v += e.residual[m * e.ldResidual + n];
            y[m * w.n + n] = v;
        }
    }
}

void minMaxF32Ref(const float* x, std::int64_t count, float* lo, float* hi)
{
    float a = std::numeric_limits<float>::infinity(), b = -a;
    for (std::int64_t i = 0; i < count; ++i) {
        if (std::isnan(x[i])) {
            *lo = *hi = x[i];
            return;
        }
        a = std::min(a, x[i]);
        b = std::max(b, x[i]);
    }
    *lo = a;
    *hi = b;
}

void quantizeRowsU8Ref(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx,
                       const float* invScale, const std::int32_t* zeroPoint, bool perRow,
                       std::int32_t qmin, std::int32_t qmax, std::int32_t shift, std::uint8_t* u,
                       std::int64_t ldu)
{
    for (std::int64_t r = 0; r < m; ++r) {
        const float inv = invScale[perRow ? r : 0];
        const std::int32_t zp = zeroPoint[perRow ? r : 0];
        for (std::int64_t j = 0; j < k; ++j) {
            const float v = x[r * ldx + j];
            std::int32_t q = zp;
            if (!std::isnan(v)) {
                // nearbyint: half to even. 0.5 * 2 = 1 -> 1; 2.5 -> 2; -0.5 -> -0.
                float t = std::nearbyint(v * inv) + static_cast<float>(zp);
                t = std::min(std::max(t, static_cast<float>(qmin)), static_cast<float>(qmax));
                q = static_cast<std::int32_t>(t);
            }
            u[r * ldu + j] = static_cast<std::uint8_t>(q + shift);
        }
        for (std::int64_t j = k; j < ldu; ++j)
            u[r * ldu + j] = static_cast<std::uint8_t>(zp + shift);
    }
}

Nibble4PackedWeight packNibble4Weight(const std::uint8_t* u, std::int64_t n, std::int64_t k,
                                      std::int64_t ldu, std::int64_t group, const float* scale,
                                      const float* offset, const float table[16],
                                      std::uint8_t padCode)
{
    if (n < 0 || k < 1 || ldu < k || group < kNibbleGroupMultiple ||
        group % kNibbleGroupMultiple != 0 || padCode > 15)
        throw std::invalid_argument("packNibble4Weight: bad shape or group");
    Nibble4PackedWeight p;
    p.n = n;
    p.k = k;
    p.kPadded = roundUp(k, kNibbleChunk);
    p.group = group;
    p.groups = (k + group - 1) / group;
    std::copy(table, table + 16, p.table);
    const std::int64_t rowBytes = p.kPadded / 2;
    p.data = AlignedArray<std::uint8_t>(static_cast<std::size_t>(n * rowBytes));
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t j = 0; j < p.kPadded; ++j) {
            const std::uint8_t code = j < k ? u[i * ldu + j] & 0x0F : padCode;
            const std::int64_t chunk = j / kNibbleChunk;
            const std::int64_t word = j % 16, shift = (j % kNibbleChunk) / 16;
            std::uint8_t& byte = p.data[static_cast<std::size_t>(i * rowBytes + chunk * 64 +
                                                                  word * 4 + shift / 2)];
            byte = shift % 2 == 0 ? static_cast<std::uint8_t>((byte & 0xF0) | code)
                                  : static_cast<std::uint8_t>((byte & 0x0F) | (code << 4));
        }
    }
    const std::size_t blocks = static_cast<std::size_t>(n * p.groups);
    p.scale = AlignedArray<float>(blocks);
    std::copy(scale, scale + blocks, p.scale.data());
    if (offset && std::any_of(offset, offset + blocks, [](float v) { return v != 0.0f; })) {
        p.offset = AlignedArray<float>(blocks);
        std::copy(offset, offset + blocks, p.offset.data());
    }
    return p;
}

AlignedArray<float> nibble4GroupSums(const float* x, std::int64_t m, std::int64_t ldx,
                                     const Nibble4PackedWeight& w)
{
    AlignedArray<float> xsum;
    if (!w.offset.size())
        return xsum;
    xsum = AlignedArray<float>(static_cast<std::size_t>(m * w.groups));
    for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t g = 0; g < w.groups; ++g) {
            float s = 0.0f;
            const std::int64_t end = g + 1 == w.groups ? w.kPadded : (g + 1) * w.group;
            for (std::int64_t k = g * w.group; k < end; ++k)
                s += x[r * ldx + k];
            xsum[static_cast<std::size_t>(r * w.groups + g)] = s;
        }
    return xsum;
}

void nibble4GemmRef(const float* x, std::int64_t m, std::int64_t ldx,
                    const Nibble4PackedWeight& w, float* y)
{
    for (std::int64_t r = 0; r < m; ++r) {
        for (std::int64_t n = 0; n < w.n; ++n) {
            double sum = 0.0;
            for (std::int64_t k = 0; k < w.kPadded; ++k) {
                const std::size_t b = static_cast<std::size_t>(
                    n * w.groups + std::min(k / w.group, w.groups - 1));
                const double weight =
                    static_cast<double>(w.table[nibbleAt(w, n, k)]) * w.scale[b] +
                    (w.offset.size() ? static_cast<double>(w.offset[b]) : 0.0);
                sum += weight * x[r * ldx + k];
            }
            y[r * w.n + n] = static_cast<float>(sum);
        }
    }
}

Nibble4VnniPackedWeight packNibble4Vnni(const std::uint8_t* u, std::int64_t n, std::int64_t k,
                                        std::int64_t ldu, std::int64_t group, const float* scale,
                                        const float* offset)
{
    if (n < 0 || k < 1 || ldu < k || group < kNibbleGroupMultiple ||
        group % kNibbleGroupMultiple != 0 || group > kNibbleVnniMaxGroup)
        throw std::invalid_argument("packNibble4Vnni: bad shape or group");
    Nibble4VnniPackedWeight p;
    p.n = n;
    p.k = k;
    p.kPadded = roundUp(k, kNibbleVnniKMultiple);
    p.group = group;
    p.groups = (k + group - 1) / group;
    const std::int64_t panels = (n + kNibbleVnniPanel - 1) / kNibbleVnniPanel;
    const std::int64_t panelBytes = p.kPadded / 8 * 64;
    p.data = AlignedArray<std::uint8_t>(static_cast<std::size_t>(panels * panelBytes));
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t r = i % kNibbleVnniPanel;
        std::uint8_t* panel = p.data.data() + (i / kNibbleVnniPanel) * panelBytes;
        for (std::int64_t j = 0; j < k; ++j) {
            const std::uint8_t code = u[i * ldu + j] & 0x0F;
            std::uint8_t& byte = panel[(j / 8) * 64 + 4 * r + j % 4];
            byte = j % 8 < 4 ? static_cast<std::uint8_t>((byte & 0xF0) | code)
                             : static_cast<std::uint8_t>((byte & 0x0F) | (code << 4));
        }
    }
    const std::size_t blocks = static_cast<std::size_t>(panels * p.groups * kNibbleVnniPanel);
    p.scale = AlignedArray<float>(blocks);
    const bool hasOffset =
        offset && std::any_of(offset, offset + n * p.groups, [](float v) { return v != 0.0f; });
    if (hasOffset)
        p.offset = AlignedArray<float>(blocks);
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t g = 0; g < p.groups; ++g) {
            const std::size_t to = static_cast<std::size_t>(
                ((i / kNibbleVnniPanel) * p.groups + g) * kNibbleVnniPanel + i % kNibbleVnniPanel);
            p.scale[to] = scale[i * p.groups + g];
            if (hasOffset)
                p.offset[to] = offset[i * p.groups + g];
        }
    return p;
}

void quantizeGroupsQ8Ref(const float* x, std::int64_t k, std::int64_t kPadded,
                         std::int64_t group, std::int8_t* q, float* d, float* xsum)
{
    const std::int64_t groups = (k + group - 1) / group;
    std::fill(q, q + kPadded, std::int8_t{0});
    for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t begin = g * group, end = std::min(k, begin + group);
        float sum = 0.0f, amax = 0.0f;
        for (std::int64_t j = begin; j < end; ++j) {
            sum += x[j];
            amax = std::max(amax, std::fabs(x[j]));
        }
        xsum[g] = sum;
        if (!std::isfinite(sum)) {
            d[g] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        d[g] = amax / 127.0f;
        if (amax == 0.0f)
            continue;
        const float inv = 127.0f / amax;
        for (std::int64_t j = begin; j < end; ++j)
            q[j] = static_cast<std::int8_t>(
                std::clamp(std::nearbyint(x[j] * inv), -127.0f, 127.0f));
    }
}

void nibble4GemvVnniRef(const float* x, std::int64_t m, std::int64_t ldx,
                        const Nibble4VnniPackedWeight& w, float* y)
{
    std::vector<std::int8_t> q(static_cast<std::size_t>(w.kPadded));
    std::vector<float> d(static_cast<std::size_t>(w.groups)), xsum(d.size());
    const std::int64_t panelBytes = w.kPadded / 8 * 64;
    for (std::int64_t r = 0; r < m; ++r) {
        quantizeGroupsQ8Ref(x + r * ldx, w.k, w.kPadded, w.group, q.data(), d.data(),
                            xsum.data());
        for (std::int64_t n = 0; n < w.n; ++n) {
            const std::int64_t panel = n / kNibbleVnniPanel, lane = n % kNibbleVnniPanel;
            const std::uint8_t* data = w.data.data() + panel * panelBytes;
            float acc = 0.0f;
            for (std::int64_t g = 0; g < w.groups; ++g) {
                std::int32_t dot = 0;
                const std::int64_t end = std::min(w.kPadded, (g + 1) * w.group);
                for (std::int64_t j = g * w.group; j < end; ++j) {
                    const std::uint8_t byte = data[(j / 8) * 64 + 4 * lane + j % 4];
                    const std::int32_t code = j % 8 < 4 ? byte & 0x0F : byte >> 4;
                    dot += code * q[static_cast<std::size_t>(j)];
                }
                const std::size_t b =
                    static_cast<std::size_t>((panel * w.groups + g) * kNibbleVnniPanel + lane);
                const float sd = w.scale[b] * d[static_cast<std::size_t>(g)];
                acc = std::fma(static_cast<float>(dot), sd, acc);
                if (w.offset.size())
                    acc = std::fma(w.offset[b], xsum[static_cast<std::size_t>(g)], acc);
            }
            y[r * w.n + n] = acc;
        }
    }
}

#ifndef BITLENS_HAVE_CUDA
// Without CUDA no device weights are ever made; these keep the API linkable.
void Nibble4DeviceDeleter::operator()(Nibble4DeviceWeight*) const {}

Nibble4DevicePtr uploadNibble4Weight(const Nibble4PackedWeight&, std::string& error)
{
    error = "this build has no CUDA kernels (configured with BITLENS_CUDA=OFF)";
    return nullptr;
}

std::string nibble4GemvCuda(const float*, std::int64_t, const Nibble4DeviceWeight&, float*, void*)
{
    return "this build has no CUDA kernels (configured with BITLENS_CUDA=OFF)";
}

std::string nibble4GemvCudaHost(const float*, std::int64_t, const Nibble4DeviceWeight&, float*,
                                int, double*)
{
    return "this build has no CUDA kernels (configured with BITLENS_CUDA=OFF)";
}
#endif

} // namespace bitlens::kernels

namespace bitlens::kernels {

// --- 16-bit float weight-only GEMM ------------------------------------------------------------

float fp16BitsToFloat(std::uint16_t bits)
{
    // binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Normal numbers move to float's
    // exponent bias 127 (+112); subnormals are mantissa * 2^-24, exact in float.
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
    const std::uint32_t mantissa = bits & 0x3FFu;
    std::uint32_t out;
    if (exponent == 0) {
        const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        std::memcpy(&out, &magnitude, 4);
        out |= sign;
    } else if (exponent == 0x1F) {
        out = sign | 0x7F800000u | (mantissa << 13);
    } else {
        out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float f;
    std::memcpy(&f, &out, 4);
    return f;
}

float bf16BitsToFloat(std::uint16_t bits)
{
    const std::uint32_t out = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &out, 4);
    return f;
}

void float16GemmRef(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                    const float* bias, float* y)
{
    if (ldx < w.k || w.ldw < w.k)
        throw std::invalid_argument("float16GemmRef: rows shorter than K");
    const auto widen = w.kind == Float16Kind::Fp16 ? &fp16BitsToFloat : &bf16BitsToFloat;
    for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t n = 0; n < w.n; ++n) {
            const std::uint16_t* wr = w.bits + n * w.ldw;
            const float* xr = x + r * ldx;
            float sum = 0.0F;
            for (std::int64_t k = 0; k < w.k; ++k)
                sum += widen(wr[k]) * xr[k];
            y[r * w.n + n] = bias ? sum + bias[n] : sum;
        }
}

void float32GemmRef(const float* x, std::int64_t m, std::int64_t ldx, const Float32Weight& w,
                    const float* bias, float* y)
{
    if (ldx < w.k || w.ldw < w.k)
        throw std::invalid_argument("float32GemmRef: rows shorter than K");
    for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t n = 0; n < w.n; ++n) {
            const float* wr = w.data + n * w.ldw;
            const float* xr = x + r * ldx;
            float sum = 0.0F;
            for (std::int64_t k = 0; k < w.k; ++k)
                sum += wr[k] * xr[k];
            y[r * w.n + n] = bias ? sum + bias[n] : sum;
        }
}

} // namespace bitlens::kernels
