// CUDA twin of kernels::fakeQuantPerTensorRef (see kernels/fake_quant.h). No ATen headers here:
// raw pointers and a cudaStream_t only, so this file builds with nvcc alone.

#include "kernels/fake_quant.h"

#include <cuda_runtime.h>

#include <cstdio>

namespace bitlens::kernels {

namespace {

__global__ void fakeQuantPerTensorKernel(const float* __restrict__ src, float* __restrict__ dst,
                                         long long n, float scale, float invScale,
                                         long long zeroPoint, long long qmin, long long qmax)
{
    const long long stride = static_cast<long long>(blockDim.x) * gridDim.x;
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += stride) {
        // __fmul_rn and nearbyintf keep IEEE round-to-nearest-even: no FMA contraction may
        // change the product the CPU reference computes.
        const float r = nearbyintf(__fmul_rn(src[i], invScale));
        long long q = static_cast<long long>(__fadd_rn(static_cast<float>(zeroPoint), r));
        q = q < qmin ? qmin : (q > qmax ? qmax : q);
        dst[i] = __fmul_rn(static_cast<float>(q - zeroPoint), scale);
    }
}

Error cudaError(const char* what, cudaError_t status)
{
    return Error::runtime(std::string(what) + ": " + cudaGetErrorString(status));
}

} // namespace

int cudaDeviceCount()
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky "no device" error
        return 0;
    }
    return count;
}

std::string cudaDeviceName()
{
    if (cudaDeviceCount() == 0)
        return {};
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
        return {};
    char text[256];
    std::snprintf(text, sizeof text, "%s (%.0f GiB, sm_%d%d)", prop.name,
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                  prop.major, prop.minor);
    return text;
}

Result<void> fakeQuantPerTensorCuda(const float* src, float* dst, std::int64_t n, float scale,
                                    std::int64_t zeroPoint, std::int64_t qmin, std::int64_t qmax,
                                    void* stream)
{
    if (n == 0)
        return {};
    const int threads = 256;
    const long long blocks = std::min<long long>((n + threads - 1) / threads, 65535LL * 8);
    fakeQuantPerTensorKernel<<<static_cast<unsigned>(blocks), threads, 0,
                               static_cast<cudaStream_t>(stream)>>>(
        src, dst, n, scale, 1.0f / scale, zeroPoint, qmin, qmax);
    if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess)
        return cudaError("fake-quant kernel launch failed", status);
    return {};
}

Result<void> fakeQuantPerTensorCudaHost(const float* src, float* dst, std::int64_t n, float scale,
                                        std::int64_t zeroPoint, std::int64_t qmin,
                                        std::int64_t qmax)
{
    if (cudaDeviceCount() == 0)
        return Error::runtime("no CUDA device");
    float* buffer = nullptr;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    if (const auto s = cudaMalloc(&buffer, bytes > 0 ? bytes : 4); s != cudaSuccess)
        return cudaError("cudaMalloc", s);
    struct Free {
        float* p;
        ~Free() { cudaFree(p); }
    } freeOnExit{buffer};
    if (const auto s = cudaMemcpy(buffer, src, bytes, cudaMemcpyHostToDevice); s != cudaSuccess)
        return cudaError("cudaMemcpy to device", s);
    if (auto r = fakeQuantPerTensorCuda(buffer, buffer, n, scale, zeroPoint, qmin, qmax, nullptr);
        !r.ok())
        return r;
    if (const auto s = cudaMemcpy(dst, buffer, bytes, cudaMemcpyDeviceToHost); s != cudaSuccess)
        return cudaError("cudaMemcpy to host", s);
    return {};
}

} // namespace bitlens::kernels
