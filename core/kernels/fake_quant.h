#pragma once
// Per-tensor affine fake quantization on raw float buffers: the scalar reference and its CUDA
// twin. Both follow PyTorch's fake_quantize_per_tensor_affine exactly:
//   q = clamp(zeroPoint + nearbyint(x * (1 / scale)), qmin, qmax);  y = (q - zeroPoint) * scale
// nearbyint rounds half to even: with scale 0.5, x = 0.25 -> 0.5 -> 0 and x = 0.75 -> 1.5 -> 2.

#include "jobs/result.h"

#include <cstdint>
#include <string>

namespace bitlens::kernels {

/// Scalar reference: dst[i] = fake-quantized src[i]; src and dst may alias. n elements.
void fakeQuantPerTensorRef(const float* src, float* dst, std::int64_t n, float scale,
                           std::int64_t zeroPoint, std::int64_t qmin, std::int64_t qmax);

/// Number of CUDA devices our own kernels can use (0 without BITLENS_HAVE_CUDA or a GPU).
int cudaDeviceCount();
/// "NVIDIA H200 (139 GiB, sm_90)" for device 0, or empty when there is none.
std::string cudaDeviceName();

/// The CUDA twin on device buffers, launched on `stream` (a cudaStream_t, null = default).
Result<void> fakeQuantPerTensorCuda(const float* src, float* dst, std::int64_t n, float scale,
                                    std::int64_t zeroPoint, std::int64_t qmin, std::int64_t qmax,
                                    void* stream);
/// Convenience for tests and benchmarks: copies host data to the device, runs, copies back.
Result<void> fakeQuantPerTensorCudaHost(const float* src, float* dst, std::int64_t n, float scale,
                                        std::int64_t zeroPoint, std::int64_t qmin,
                                        std::int64_t qmax);

} // namespace bitlens::kernels
