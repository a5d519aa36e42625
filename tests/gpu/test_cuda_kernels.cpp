// Own CUDA kernels against their scalar references, bit for bit. Skips without a GPU.

#include "exec/device.h"
#include "kernels/fake_quant.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace bitlens;

TEST(CudaKernels, FakeQuantMatchesReferenceBitForBit)
{
    if (kernels::cudaDeviceCount() == 0)
        GTEST_SKIP() << "no CUDA device";
    std::printf("device: %s\n", kernels::cudaDeviceName().c_str());
    for (std::int64_t n : {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 127, 1023, 1 << 20}) {
        at::Generator gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(n));
        const at::Tensor x = at::randn({n}, gen) * 20.0;
        at::Tensor expected = at::empty_like(x);
        at::Tensor got = at::empty_like(x);
        kernels::fakeQuantPerTensorRef(x.data_ptr<float>(), expected.data_ptr<float>(), n, 0.1f, 3,
                                       -128, 127);
        auto r = kernels::fakeQuantPerTensorCudaHost(x.data_ptr<float>(), got.data_ptr<float>(), n,
                                                     0.1f, 3, -128, 127);
        ASSERT_TRUE(r.ok()) << r.error().userMessage();
        ASSERT_TRUE(at::equal(got, expected)) << "n=" << n;
    }
}

TEST(CudaKernels, TorchCudaBackendRunsWhenLinked)
{
    if (!exec::cudaAvailable())
        GTEST_SKIP() << "LibTorch's CUDA backend is not linked or no GPU is visible";
    const at::Tensor x = at::randn({64, 64});
    const at::Tensor y = at::matmul(x.to(at::kCUDA), x.to(at::kCUDA)).to(at::kCPU);
    EXPECT_TRUE(at::allclose(y, at::matmul(x, x), 1e-3, 1e-3));
}
