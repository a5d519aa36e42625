// Kernel dispatch (kernels/lowbit.h): each operation's rows, highest ISA level first, the scalar
// reference last. A row is taken when the features in force (cpuFeatures(), capped by
// BITLENS_ISA) have what it needs. Rows are picked by feature, not by level alone: an AVX-512
// CPU without VNNI (Skylake-X) runs the int8 GEMM on its AVX2 row (or AVX-VNNI's where present).

#include "kernels/lowbit.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>

namespace bitlens::kernels {

void minMaxThreaded(const float* x, std::int64_t count, MinMaxRangeFn range, float* lo, float* hi)
{
    // At most 8 parts of at least 16k floats: enough for the threads, few reductions.
    constexpr int kParts = 8;
    float los[kParts], his[kParts];
    bool nans[kParts] = {};
    const std::int64_t part = std::max<std::int64_t>((count + kParts - 1) / kParts, 1 << 14);
    const std::int64_t parts = (count + part - 1) / part;
    for (int i = 0; i < kParts; ++i) {
        los[i] = std::numeric_limits<float>::infinity();
        his[i] = -los[i];
    }
    at::parallel_for(0, parts, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i)
            range(x, i * part, std::min(count, (i + 1) * part), &los[i], &his[i], &nans[i]);
    });
    float a = los[0], b = his[0];
    for (std::int64_t i = 0; i < parts; ++i) {
        if (nans[i]) {
            *lo = *hi = std::numeric_limits<float>::quiet_NaN();
            return;
        }
        a = std::min(a, los[i]);
        b = std::max(b, his[i]);
    }
    *lo = a;
    *hi = b;
}

KernelRow int8GemmKernel()
{
    const CpuFeatures f = cpuFeatures();
    if (f.avx512Vnni)
        return {IsaLevel::Avx512, "avx512-vnni"};
    if (f.avxVnni)
        return {IsaLevel::AvxVnni, "avx-vnni"};
    if (f.avx2)
        return {IsaLevel::Avx2, "avx2"};
    return {IsaLevel::Scalar, "scalar"};
}

void int8Gemm(const Int8Activations& x, const Int8PackedWeight& w, std::int32_t* acc)
{
    switch (int8GemmKernel().level) {
    case IsaLevel::Avx512: int8GemmVnni(x, w, acc); return;
    case IsaLevel::AvxVnni: int8GemmAvxVnni(x, w, acc); return;
    case IsaLevel::Avx2: int8GemmAvx2(x, w, acc); return;
    default: int8GemmRef(x, w, acc); return;
    }
}

void int8GemmF32(const Int8Activations& x, const Int8PackedWeight& w,
                 const Int8Epilogue& epilogue, float* y)
{
    switch (int8GemmKernel().level) {
    case IsaLevel::Avx512: int8GemmVnniF32(x, w, epilogue, y); return;
    case IsaLevel::AvxVnni: int8GemmAvxVnniF32(x, w, epilogue, y); return;
    case IsaLevel::Avx2: int8GemmAvx2F32(x, w, epilogue, y); return;
    default: int8GemmRefF32(x, w, epilogue, y); return;
    }
}

namespace {

/// The row of an operation with AVX-512 (F/BW/VL/DQ) and AVX2 + FMA + F16C kernels.
KernelRow avx512OrAvx2Row()
{
    const CpuFeatures f = cpuFeatures();
    if (f.avx512)
        return {IsaLevel::Avx512, "avx512"};
    if (f.avx2)
        return {IsaLevel::Avx2, "avx2"};
    return {IsaLevel::Scalar, "scalar"};
}

} // namespace

KernelRow nibble4GemmKernel() { return avx512OrAvx2Row(); }

void nibble4Gemm(const float* x, std::int64_t m, std::int64_t ldx, const Nibble4PackedWeight& w,
                 float* y)
{
    switch (nibble4GemmKernel().level) {
    case IsaLevel::Avx512: nibble4GemmAvx512(x, m, ldx, w, y); return;
    case IsaLevel::Avx2: nibble4GemmAvx2(x, m, ldx, w, y); return;
    default: nibble4GemmRef(x, m, ldx, w, y); return;
    }
}

KernelRow nibble4GemvQ8Kernel()
{
    const CpuFeatures f = cpuFeatures();
    if (f.avx512Vnni)
        return {IsaLevel::Avx512, "avx512-vnni"};
    if (f.avxVnni)
        return {IsaLevel::AvxVnni, "avx-vnni"};
    if (f.avx2)
        return {IsaLevel::Avx2, "avx2"};
    return {IsaLevel::Scalar, "scalar"};
}

void nibble4GemvQ8(const float* x, std::int64_t m, std::int64_t ldx,
                   const Nibble4VnniPackedWeight& w, float* y)
{
    switch (nibble4GemvQ8Kernel().level) {
    case IsaLevel::Avx512: nibble4GemvVnni(x, m, ldx, w, y); return;
    case IsaLevel::AvxVnni: nibble4GemvQ8AvxVnni(x, m, ldx, w, y); return;
    case IsaLevel::Avx2: nibble4GemvQ8Avx2(x, m, ldx, w, y); return;
    default: nibble4GemvVnniRef(x, m, ldx, w, y); return;
    }
}

} // namespace bitlens::kernels

namespace bitlens::kernels {

KernelRow float16GemmKernel() { return avx512OrAvx2Row(); }

void float16Gemm(const float* x, std::int64_t m, std::int64_t ldx, const Float16Weight& w,
                 const float* bias, float* y)
{
    switch (float16GemmKernel().level) {
    case IsaLevel::Avx512: float16GemmAvx512(x, m, ldx, w, bias, y); return;
    case IsaLevel::Avx2: float16GemmAvx2(x, m, ldx, w, bias, y); return;
    default: float16GemmRef(x, m, ldx, w, bias, y); return;
    }
}

} // namespace bitlens::kernels

namespace bitlens::kernels {

KernelRow float32GemmKernel() { return avx512OrAvx2Row(); }

void float32Gemm(const float* x, std::int64_t m, std::int64_t ldx, const Float32Weight& w,
                 const float* bias, float* y)
{
    switch (float32GemmKernel().level) {
    case IsaLevel::Avx512: float32GemmAvx512(x, m, ldx, w, bias, y); return;
    case IsaLevel::Avx2: float32GemmAvx2(x, m, ldx, w, bias, y); return;
    default: float32GemmRef(x, m, ldx, w, bias, y); return;
    }
}

} // namespace bitlens::kernels
