// The scalar fake-quant reference against LibTorch's fake_quantize_per_tensor_affine, bit for bit.

#include "kernels/fake_quant.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace bitlens;

TEST(FakeQuantRef, MatchesAtenBitForBit)
{
    struct Case {
        float scale;
        std::int64_t zeroPoint, qmin, qmax;
    };
    const Case cases[] = {{0.1f, 0, -128, 127}, {0.5f, 3, 0, 255}, {0.0173f, -7, -8, 7},
                          {1.0f / 3.0f, 0, 0, 15}};
    for (std::int64_t n : {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 127, 1023}) {
        for (const auto& c : cases) {
            at::Generator gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(n));
            const at::Tensor x = at::randn({n}, gen) * 20.0;
            const at::Tensor expected =
                at::fake_quantize_per_tensor_affine(x, c.scale, c.zeroPoint, c.qmin, c.qmax);
            at::Tensor got = at::empty_like(x);
            kernels::fakeQuantPerTensorRef(x.data_ptr<float>(), got.data_ptr<float>(), n, c.scale,
                                           c.zeroPoint, c.qmin, c.qmax);
            ASSERT_TRUE(at::equal(got, expected)) << "n=" << n << " scale=" << c.scale;
        }
    }
}

TEST(FakeQuantRef, RoundsHalfToEven)
{
    // 0.25 / 0.5 = 0.5 -> 0 and 0.75 / 0.5 = 1.5 -> 2: ties go to the even neighbour.
    const float src[] = {0.25f, 0.75f, -0.25f, -0.75f, 1.25f};
    float dst[5];
    kernels::fakeQuantPerTensorRef(src, dst, 5, 0.5f, 0, -128, 127);
    EXPECT_EQ(dst[0], 0.0f);
    EXPECT_EQ(dst[1], 1.0f);
    EXPECT_EQ(dst[2], 0.0f);
    EXPECT_EQ(dst[3], -1.0f);
    EXPECT_EQ(dst[4], 1.0f);
}
