// The CUDA 4-bit GEMV against the scalar reference (kernels/lowbit.h): same packed weights,
// float32 results within float rounding. Skips without a GPU.

#include "kernels/fake_quant.h"
#include "kernels/lowbit.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace bitlens;
using namespace bitlens::kernels;

TEST(CudaNibble4Gemv, MatchesTheReferenceForInt4AndNf4OverEveryBatchSize)
{
    if (cudaDeviceCount() == 0)
        GTEST_SKIP() << "no CUDA device";
    std::uint64_t seed = 1;
    for (std::int64_t k : {32, 33, 100, 4096}) {
        for (std::int64_t n : {1, 7, 8, 9, 300}) {
            for (std::int64_t group : {32, 64, 128}) {
                for (bool nf4 : {false, true}) {
                    SCOPED_TRACE("K " + std::to_string(k) + " N " + std::to_string(n) +
                                 " group " + std::to_string(group) + (nf4 ? " nf4" : " int4"));
                    at::Generator gen = at::detail::createCPUGenerator(seed++);
                    const at::Tensor u = at::randint(0, 16, {n, k}, gen, at::kByte);
                    const std::int64_t kPadded =
                        (k + kNibbleChunk - 1) / kNibbleChunk * kNibbleChunk;
                    const std::int64_t groups = (k + group - 1) / group;
                    const at::Tensor s = at::rand({n, groups}, gen) * 0.2 + 0.01;
                    const at::Tensor o = at::randn({n, groups}, gen);
                    const Nibble4PackedWeight w = packNibble4Weight(
                        u.data_ptr<std::uint8_t>(), n, k, k, group, s.data_ptr<float>(),
                        nf4 ? nullptr : o.data_ptr<float>(), nf4 ? nf4Table() : uint4Table(), 0);
                    std::string error;
                    const Nibble4DevicePtr dw = uploadNibble4Weight(w, error);
                    ASSERT_TRUE(dw) << error;
                    for (std::int64_t m = 1; m <= kNibble4CudaMaxRows; ++m) {
                        at::Tensor x = at::zeros({m, kPadded});
                        x.narrow(1, 0, k).normal_(0, 1, gen);
                        at::Tensor got = at::empty({m, n});
                        at::Tensor want = at::empty({m, n});
                        double ms = 0;
                        const std::string e = nibble4GemvCudaHost(
                            x.data_ptr<float>(), m, *dw, got.data_ptr<float>(), 1, &ms);
                        ASSERT_TRUE(e.empty()) << e;
                        nibble4GemmRef(x.data_ptr<float>(), m, kPadded, w, want.data_ptr<float>());
                        // float32 sums of K terms: well within 1e-5 relative of their size.
                        const double scale = want.abs().max().item<double>() + 1.0;
                        ASSERT_LE((got - want).abs().max().item<double>(), 1e-5 * scale * k / 32)
                            << "M " << m;
                    }
                }
            }
        }
    }
}

TEST(CudaNibble4Gemv, RejectsBatchesAboveEightRows)
{
    if (cudaDeviceCount() == 0)
        GTEST_SKIP() << "no CUDA device";
    const std::uint8_t u[128] = {};
    const float s[1] = {1};
    const Nibble4PackedWeight w =
        packNibble4Weight(u, 1, 128, 128, 128, s, nullptr, uint4Table(), 0);
    std::string error;
    const Nibble4DevicePtr dw = uploadNibble4Weight(w, error);
    ASSERT_TRUE(dw) << error;
    float x[9 * 128] = {}, y[9] = {};
    EXPECT_NE(nibble4GemvCudaHost(x, 9, *dw, y, 1, nullptr), "");
}
