// analysis::throughputWhy: a quantized model slower than float says why, in words.

#include "analysis/quant_report.h"

#include <gtest/gtest.h>

using bitlens::analysis::Throughput;
using bitlens::analysis::throughputWhy;

namespace {

Throughput measured(double floatRate, double quantizedRate)
{
    Throughput t;
    t.floatSamplesPerS = floatRate;
    t.quantizedSamplesPerS = quantizedRate;
    return t;
}

} // namespace

TEST(ThroughputWhy, NothingToSayWhenAsFastOrUnmeasured)
{
    EXPECT_EQ(throughputWhy(measured(100, 150)), "");
    EXPECT_EQ(throughputWhy(measured(100, 100)), "");
    EXPECT_EQ(throughputWhy(measured(0, 0)), "");  // not measured (e.g. CUDA without timing)
}

TEST(ThroughputWhy, NamesSimulatedLayersAndTheirReason)
{
    Throughput t = measured(100, 60);
    t.kernels = {{"fc1", "simulated (fake-quant, float32): NF4 has no CPU kernel at this level"},
                 {"fc2", "simulated (fake-quant, float32): NF4 has no CPU kernel at this level"}};
    EXPECT_EQ(throughputWhy(t),
              "every layer simulated (fake-quant in float32; fc1: NF4 has no CPU kernel at this "
              "level)");
    Throughput bare = measured(100, 60);
    bare.kernels = {{"c1", "simulated (fake-quant, float32)"}, {"c2", "float32 (kept float)"}};
    EXPECT_EQ(throughputWhy(bare), "1 of 2 layers simulated (fake-quant in float32: c1)");
    t.kernels["fc3"] = "bitlens avx2 int8 gemm (u8 x s8 -> s32, fused dequant)";
    EXPECT_EQ(throughputWhy(t).rfind("2 of 3 layers simulated (fake-quant in float32; fc1: ", 0),
              0u)
        << throughputWhy(t);
}

TEST(ThroughputWhy, NamesRealKernelsSlowerThanFloat)
{
    Throughput t = measured(100, 80);
    t.kernels = {{"a", "bitlens avx2 int8 conv"}, {"b", "bitlens avx2 int8 conv"},
                 {"c", "bitlens avx2 int8 conv"}};
    t.notes = {{"a", "real kernel slower than float32 here (0.58 ms vs 0.53 ms per batch)"},
               {"b", "real kernel slower than float32 here (1.00 ms vs 0.90 ms per batch)"},
               {"c", "real kernel slower than float32 here (2.00 ms vs 1.00 ms per batch)"}};
    EXPECT_EQ(throughputWhy(t),
              "real kernel slower than float32 here: a (0.58 ms vs 0.53 ms per batch), b (1.00 "
              "ms vs 0.90 ms per batch) and 1 more");
}

TEST(ThroughputWhy, AllRealAndFastLayersPointOutsideThem)
{
    Throughput t = measured(100, 90);
    t.kernels = {{"a", "bitlens avx512-vnni int8 gemm"}};
    EXPECT_NE(throughputWhy(t).find("the cost is outside the layers"), std::string::npos);
}
