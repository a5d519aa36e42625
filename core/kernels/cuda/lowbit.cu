// CUDA 4-bit weight-only GEMV (kernels/lowbit.h): the same packed layout as the CPU kernels
// (rows of 64-byte chunks of 128 codes: 32-bit word d holds element d + 16 s in bits 4s..4s+3),
// group scales and optional offsets in float32, float32 accumulation. Raw pointers only, no
// ATen: this file builds with nvcc alone (C++17).
//
// One warp per output channel: each lane takes whole chunks (four 128-bit loads of 32 codes
// each), dequantizes each weight once (w = table[u] * s + offset) and multiplies it into up to
// 8 rows of x; the partial sums meet in a warp shuffle reduction. Integer codes (table 0..15) convert with
// one instruction; code tables (NF4, FP4) read a 16-entry table in shared memory.

#include "kernels/lowbit.h"

#include <cuda_runtime.h>

#include <cstdio>

namespace bitlens::kernels {

struct Nibble4DeviceWeight {
    std::int64_t n = 0, k = 0, kPadded = 0, group = 0, groups = 0;
    float table[16] = {};
    bool linearTable = false;  ///< table[i] == i: integer codes
    std::uint8_t* data = nullptr;
    float* scale = nullptr;
    float* offset = nullptr;  ///< null when every offset is 0
};

void Nibble4DeviceDeleter::operator()(Nibble4DeviceWeight* w) const
{
    if (!w)
        return;
    cudaFree(w->data);
    cudaFree(w->scale);
    cudaFree(w->offset);
    delete w;
}

namespace {

constexpr int kWarpsPerBlock = 8;

struct Table16 {
    float v[16];
};

template <int M, bool Linear>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    nibble4GemvKernel(const uint4* __restrict__ data, const float* __restrict__ scale,
                      const float* __restrict__ offset, const float* __restrict__ x,
                      float* __restrict__ y, int n, int kPadded, int group, int groups,
                      Table16 table)
{
    __shared__ float lut[16];
    if (threadIdx.x < 16)
        lut[threadIdx.x] = table.v[threadIdx.x];
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= n)
        return;
    const int chunks = kPadded / 128;
    const uint4* rowData = data + static_cast<long long>(row) * chunks * 4;
    const float* rowScale = scale + static_cast<long long>(row) * groups;
    const float* rowOffset = offset ? offset + static_cast<long long>(row) * groups : nullptr;
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m)
        acc[m] = 0.0f;
    for (int c = lane; c < chunks; c += 32) {
        unsigned words[16];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const uint4 v = __ldg(rowData + c * 4 + q);  // 32 codes per 128-bit load
            words[4 * q] = v.x;
            words[4 * q + 1] = v.y;
            words[4 * q + 2] = v.z;
            words[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            // Elements c * 128 + 16 s + d, d = 0..15: nibble s of word d.
            const int k0 = c * 128 + 16 * s;
            const int g = min(k0 / group, groups - 1);
            const float sc = __ldg(rowScale + g);
            const float o = rowOffset ? __ldg(rowOffset + g) : 0.0f;
            float w[16];
#pragma unroll
            for (int d = 0; d < 16; ++d) {
                const unsigned u = (words[d] >> (4 * s)) & 0xFu;
                w[d] = fmaf(Linear ? static_cast<float>(u) : lut[u], sc, o);
            }
#pragma unroll
            for (int m = 0; m < M; ++m) {
                const float4* xv =
                    reinterpret_cast<const float4*>(x + static_cast<long long>(m) * kPadded + k0);
                float sum = 0.0f;
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float4 v = __ldg(xv + q);
                    sum = fmaf(w[4 * q], v.x, sum);
                    sum = fmaf(w[4 * q + 1], v.y, sum);
                    sum = fmaf(w[4 * q + 2], v.z, sum);
                    sum = fmaf(w[4 * q + 3], v.w, sum);
                }
                acc[m] += sum;
            }
        }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
        float v = acc[m];
#pragma unroll
        for (int offsetLanes = 16; offsetLanes > 0; offsetLanes >>= 1)
            v += __shfl_xor_sync(0xFFFFFFFFu, v, offsetLanes);
        if (lane == 0)
            y[static_cast<long long>(m) * n + row] = v;
    }
}

template <int M>
void launch(const float* x, const Nibble4DeviceWeight& w, float* y, cudaStream_t stream)
{
    const unsigned blocks = static_cast<unsigned>((w.n + kWarpsPerBlock - 1) / kWarpsPerBlock);
    Table16 table;
    for (int i = 0; i < 16; ++i)
        table.v[i] = w.table[i];
    const auto* data = reinterpret_cast<const uint4*>(w.data);
    if (w.linearTable)
        nibble4GemvKernel<M, true><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
            data, w.scale, w.offset, x, y, static_cast<int>(w.n), static_cast<int>(w.kPadded),
            static_cast<int>(w.group), static_cast<int>(w.groups), table);
    else
        nibble4GemvKernel<M, false><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
            data, w.scale, w.offset, x, y, static_cast<int>(w.n), static_cast<int>(w.kPadded),
            static_cast<int>(w.group), static_cast<int>(w.groups), table);
}

std::string errorText(const char* what, cudaError_t status)
{
    return std::string(what) + ": " + cudaGetErrorString(status);
}

/// CUDA devices visible (0 also when the runtime finds no driver). Kept here rather than using
/// fake_quant.cu's: that object needs core's Error, which a static link may have passed by.
int visibleDevices()
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

template <typename T>
cudaError_t upload(T** dst, const T* src, std::size_t count)
{
    if (count == 0)
        return cudaSuccess;
    if (const cudaError_t s = cudaMalloc(reinterpret_cast<void**>(dst), count * sizeof(T));
        s != cudaSuccess)
        return s;
    return cudaMemcpy(*dst, src, count * sizeof(T), cudaMemcpyHostToDevice);
}

} // namespace

Nibble4DevicePtr uploadNibble4Weight(const Nibble4PackedWeight& w, std::string& error)
{
    if (visibleDevices() == 0) {
        error = "no CUDA device";
        return nullptr;
    }
    if (w.kPadded > (1LL << 30) || w.n > (1LL << 30)) {
        error = "weight too large for the CUDA 4-bit kernel";
        return nullptr;
    }
    Nibble4DevicePtr d(new Nibble4DeviceWeight);
    d->n = w.n;
    d->k = w.k;
    d->kPadded = w.kPadded;
    d->group = w.group;
    d->groups = w.groups;
    d->linearTable = true;
    for (int i = 0; i < 16; ++i) {
        d->table[i] = w.table[i];
        d->linearTable = d->linearTable && w.table[i] == static_cast<float>(i);
    }
    cudaError_t s = upload(&d->data, w.data.data(), w.data.size());
    if (s == cudaSuccess)
        s = upload(&d->scale, w.scale.data(), w.scale.size());
    if (s == cudaSuccess)
        s = upload(&d->offset, w.offset.data(), w.offset.size());
    if (s != cudaSuccess) {
        error = errorText("uploading 4-bit weights", s);
        return nullptr;
    }
    return d;
}

std::string nibble4GemvCuda(const float* x, std::int64_t m, const Nibble4DeviceWeight& w,
                            float* y, void* stream)
{
    const auto st = static_cast<cudaStream_t>(stream);
    switch (m) {
    case 1: launch<1>(x, w, y, st); break;
    case 2: launch<2>(x, w, y, st); break;
    case 3: launch<3>(x, w, y, st); break;
    case 4: launch<4>(x, w, y, st); break;
    case 5: launch<5>(x, w, y, st); break;
    case 6: launch<6>(x, w, y, st); break;
    case 7: launch<7>(x, w, y, st); break;
    case 8: launch<8>(x, w, y, st); break;
    default: return "nibble4GemvCuda: M must be 1..8, got " + std::to_string(m);
    }
    if (const cudaError_t s = cudaGetLastError(); s != cudaSuccess)
        return errorText("4-bit GEMV launch failed", s);
    return {};
}

std::string nibble4GemvCudaHost(const float* x, std::int64_t m, const Nibble4DeviceWeight& w,
                                float* y, int repeats, double* msPerRun)
{
    if (m < 1 || m > kNibble4CudaMaxRows)
        return "nibble4GemvCudaHost: M must be 1..8";
    float* dx = nullptr;
    float* dy = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    struct Cleanup {
        float*& a;
        float*& b;
        cudaEvent_t& e0;
        cudaEvent_t& e1;
        ~Cleanup()
        {
            cudaFree(a);
            cudaFree(b);
            if (e0)
                cudaEventDestroy(e0);
            if (e1)
                cudaEventDestroy(e1);
        }
    } cleanup{dx, dy, start, stop};
    const std::size_t xCount = static_cast<std::size_t>(m * w.kPadded);
    const std::size_t yCount = static_cast<std::size_t>(m * w.n);
    if (const auto s = upload(&dx, x, xCount); s != cudaSuccess)
        return errorText("copying x to the device", s);
    if (const auto s = cudaMalloc(reinterpret_cast<void**>(&dy), yCount * sizeof(float));
        s != cudaSuccess)
        return errorText("cudaMalloc", s);
    if (auto e = nibble4GemvCuda(dx, m, w, dy, nullptr); !e.empty())
        return e;  // also the warm-up
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    for (int i = 0; i < repeats; ++i)
        if (auto e = nibble4GemvCuda(dx, m, w, dy, nullptr); !e.empty())
            return e;
    cudaEventRecord(stop);
    if (const auto s = cudaEventSynchronize(stop); s != cudaSuccess)
        return errorText("4-bit GEMV", s);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    if (msPerRun)
        *msPerRun = repeats > 0 ? ms / repeats : 0.0;
    if (const auto s = cudaMemcpy(y, dy, yCount * sizeof(float), cudaMemcpyDeviceToHost);
        s != cudaSuccess)
        return errorText("copying y to the host", s);
    return {};
}

} // namespace bitlens::kernels
