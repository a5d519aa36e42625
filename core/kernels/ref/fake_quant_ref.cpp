#include "kernels/fake_quant.h"

#include <algorithm>
#include <cmath>

namespace bitlens::kernels {

void fakeQuantPerTensorRef(const float* src, float* dst, std::int64_t n, float scale,
                           std::int64_t zeroPoint, std::int64_t qmin, std::int64_t qmax)
{
    // PyTorch multiplies by the float reciprocal rather than dividing; keep that, or results
    // differ in the last bit for scales whose reciprocal is inexact (0.1f, say).
    const float invScale = 1.0f / scale;
    for (std::int64_t i = 0; i < n; ++i) {
        const auto q = static_cast<std::int64_t>(static_cast<float>(zeroPoint) +
                                                 std::nearbyint(src[i] * invScale));
        const std::int64_t clamped = std::min(std::max(q, qmin), qmax);
        dst[i] = static_cast<float>(clamped - zeroPoint) * scale;
    }
}

#ifndef BITLENS_HAVE_CUDA
int cudaDeviceCount() { return 0; }
std::string cudaDeviceName() { return {}; }

Result<void> fakeQuantPerTensorCuda(const float*, float*, std::int64_t, float, std::int64_t,
                                    std::int64_t, std::int64_t, void*)
{
    return Error::runtime("this build has no CUDA kernels (configured with BITLENS_CUDA=OFF)");
}

Result<void> fakeQuantPerTensorCudaHost(const float*, float*, std::int64_t, float, std::int64_t,
                                        std::int64_t, std::int64_t)
{
    return Error::runtime("this build has no CUDA kernels (configured with BITLENS_CUDA=OFF)");
}
#endif

} // namespace bitlens::kernels
