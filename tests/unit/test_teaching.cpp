// The numbers behind the GUI's Teach tab (analysis/teaching.h): code points of every weight
// type, the grid of the 3..7-bit integer views, histograms for drawing, the FP8 value sets, and
// the error of quantizing a tensor with one setting (seeded data; the seed is fixed).

#include "analysis/teaching.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace bitlens::analysis {
namespace {

std::vector<float> gaussian(std::size_t n, unsigned seed = 17)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = normal(rng);
    return v;
}

TEST(TeachingCodePoints, IntegerTypesFollowTheSymmetricAndAsymmetricRules)
{
    // int4 symmetric on [-1, 0.5]: k / 7 for k in -7..7, so 15 values from -1 to 1.
    const std::vector<double> sym = codePoints("int4", true, -1.0, 0.5);
    ASSERT_EQ(sym.size(), 15U);
    EXPECT_DOUBLE_EQ(sym.front(), -1.0);
    EXPECT_DOUBLE_EQ(sym.back(), 1.0);
    EXPECT_DOUBLE_EQ(sym[7], 0.0);
    // Asymmetric: 15 steps from lo to hi, 16 values.
    const std::vector<double> asym = codePoints("int4", false, -1.0, 0.5);
    ASSERT_EQ(asym.size(), 16U);
    EXPECT_DOUBLE_EQ(asym.front(), -1.0);
    EXPECT_DOUBLE_EQ(asym.back(), 0.5);
    EXPECT_EQ(codePoints("int8", true, -2.0, 2.0).size(), 255U);
    EXPECT_EQ(codePoints("int2", true, -2.0, 2.0).size(), 3U);
}

TEST(TeachingCodePoints, CodeBooksAreScaledToTheLargestMagnitude)
{
    const std::vector<double> nf4 = codePoints("nf4", true, -0.5, 2.0);
    ASSERT_EQ(nf4.size(), 16U);
    EXPECT_DOUBLE_EQ(nf4.front(), -2.0);
    EXPECT_DOUBLE_EQ(nf4.back(), 2.0);
    // FP4 E2M1: ±{0.5, 1, 1.5, 2, 3, 4, 6} and one 0, scaled so 6 -> 3.
    const std::vector<double> fp4 = codePoints("fp4_e2m1", true, -3.0, 1.0);
    ASSERT_EQ(fp4.size(), 15U);
    EXPECT_DOUBLE_EQ(fp4.back(), 3.0);
    EXPECT_DOUBLE_EQ(fp4[8], 0.25);
    // E4M3 at scale 1: 126 positive values, their negatives and 0.
    const std::vector<double> e4m3 = codePoints("fp8_e4m3", true, -448.0, 1.0);
    EXPECT_EQ(e4m3.size(), 253U);
    EXPECT_DOUBLE_EQ(e4m3.back(), 448.0);
    EXPECT_TRUE(std::is_sorted(e4m3.begin(), e4m3.end()));
}

TEST(TeachingCodePoints, NoGridForFloatTypesOrBadRanges)
{
    EXPECT_TRUE(codePoints("bf16", true, -1.0, 1.0).empty());
    EXPECT_TRUE(codePoints("int8", true, 0.0, 0.0).empty());
    EXPECT_TRUE(codePoints("int8", true, 1.0, -1.0).empty());
    EXPECT_TRUE(codePoints("int8", true, -std::numeric_limits<double>::infinity(), 1.0).empty());
}

TEST(TeachingCodePoints, FiveBitsUseTheSymmetricRuleOnTheClipRange)
{
    TeachingSettings s;
    s.format = "int5";
    s.bits = 5;
    // 5 bits: k * clip / 15 for k in -15..15.
    const std::vector<double> grid = teachingCodePoints(s, 0.6);
    ASSERT_EQ(grid.size(), 31U);
    EXPECT_DOUBLE_EQ(grid.front(), -0.6);
    EXPECT_DOUBLE_EQ(grid[16], 0.04);
    s.format = "int8";
    s.bits = 8;
    EXPECT_EQ(teachingCodePoints(s, 1.0), codePoints("int8", true, -1.0, 1.0));
    s.format = "nf4";
    EXPECT_EQ(teachingCodePoints(s, 1.0).size(), 16U);
}

TEST(TeachingHistogram, CountsEveryFiniteValueOnce)
{
    std::vector<float> v = gaussian(5000);
    v.push_back(std::numeric_limits<float>::quiet_NaN());
    v.push_back(std::numeric_limits<float>::infinity());
    const ValueHistogram h = valueHistogram(v, 120);
    ASSERT_EQ(h.counts.size(), 120U);
    double total = 0.0;
    for (const double c : h.counts)
        total += c;
    EXPECT_DOUBLE_EQ(total, 5000.0);
    EXPECT_EQ(h.size, v.size());
    EXPECT_LT(h.lo, 0.0);
    EXPECT_GT(h.hi, 0.0);
    EXPECT_DOUBLE_EQ(h.absMax, std::max(std::abs(h.lo), std::abs(h.hi)));
}

TEST(TeachingHistogram, OneValueWidensToHalfEachSideAndNoValueIsEmpty)
{
    const ValueHistogram h = valueHistogram({2.0f, 2.0f, 2.0f}, 10);
    EXPECT_DOUBLE_EQ(h.lo, 1.5);
    EXPECT_DOUBLE_EQ(h.hi, 2.5);
    EXPECT_DOUBLE_EQ(h.absMax, 2.5);
    EXPECT_DOUBLE_EQ(h.counts[5], 3.0);
    EXPECT_TRUE(valueHistogram({}, 10).counts.empty());
    EXPECT_TRUE(valueHistogram({std::numeric_limits<float>::quiet_NaN()}, 10).counts.empty());
}

TEST(TeachingFloat8, ValueSetsAreThoseOfTheFormats)
{
    // E4M3FN: 7 subnormals + 15 exponents x 8 mantissas - the NaN pattern = 126, max 448,
    // smallest 2^-9. E5M2: 3 subnormals + 30 x 4 = 123, max 57344.
    const std::vector<double> e4m3 = float8PositiveValues("fp8_e4m3");
    ASSERT_EQ(e4m3.size(), 126U);
    EXPECT_DOUBLE_EQ(e4m3.back(), 448.0);
    EXPECT_DOUBLE_EQ(e4m3.front(), std::ldexp(1.0, -9));
    const std::vector<double> e5m2 = float8PositiveValues("fp8_e5m2");
    ASSERT_EQ(e5m2.size(), 123U);
    EXPECT_DOUBLE_EQ(e5m2.back(), 57344.0);
    EXPECT_TRUE(float8PositiveValues("int8").empty());
}

TEST(TeachingQuantError, MoreBitsLessError)
{
    const std::vector<float> w = gaussian(4096);
    double previous = -1.0;
    for (const int bits : {2, 3, 4, 5, 6, 7, 8}) {
        TeachingSettings s;
        s.format = "int" + std::to_string(bits);
        s.bits = bits;
        const QuantErrorStats stats = quantizationError(w, s);
        ASSERT_TRUE(stats.valid) << bits;
        EXPECT_GT(stats.sqnrDb, previous) << bits;
        previous = stats.sqnrDb;
    }
    // About 6 dB a bit: int8 of a Gaussian with max|w| clipping is well above 30 dB.
    EXPECT_GT(previous, 30.0);
}

TEST(TeachingQuantError, Int8ErrorIsWithinHalfAStep)
{
    const std::vector<float> w = gaussian(2048, 3);
    float absMax = 0.0f;
    for (const float x : w)
        absMax = std::max(absMax, std::abs(x));
    TeachingSettings s;
    const QuantErrorStats stats = quantizationError(w, s);
    ASSERT_TRUE(stats.valid);
    // Per-tensor symmetric int8: step max|w| / 127.5, so no error beyond half of max|w| / 127.
    EXPECT_LE(stats.maxAbsError, absMax / 127.0 / 2.0 + 1e-6);
    EXPECT_GT(stats.mse, 0.0);
}

TEST(TeachingQuantError, GroupsAndClippingChangeTheError)
{
    const std::vector<float> w = gaussian(4096, 5);
    TeachingSettings s;
    s.format = "int4";
    s.bits = 4;
    const double perTensor = quantizationError(w, s).sqnrDb;
    s.groupSize = 32;
    const double grouped = quantizationError(w, s).sqnrDb;
    EXPECT_GT(grouped, perTensor);  // each group's max is smaller: finer steps
    s.groupSize = 0;
    s.clipFraction = 0.05;  // clips almost everything: far worse
    EXPECT_LT(quantizationError(w, s).sqnrDb, perTensor);
}

TEST(TeachingQuantError, EmptyOrUnknownIsInvalid)
{
    TeachingSettings s;
    EXPECT_FALSE(quantizationError({}, s).valid);
    s.format = "no-such-format";
    EXPECT_FALSE(quantizationError(gaussian(16), s).valid);
    s.format = "nf4";
    EXPECT_TRUE(quantizationError(gaussian(256), s).valid);
}

// ---- block formats (MX, NVFP4) -----------------------------------------------------------

/// 64 values: block 0 (of 32) with max |w| 0.41, block 1 with 0.2.
std::vector<float> twoBlocks()
{
    std::vector<float> v = gaussian(64, 5);
    for (float& x : v)
        x = std::clamp(x * 0.05f, -0.15f, 0.15f);
    v[3] = -0.41f;
    v[40] = 0.2f;
    return v;
}

TEST(TeachingBlocks, MxScaleIsAPowerOfTwoAndTheGridMovesByOctaves)
{
    const std::vector<float> v = twoBlocks();
    const BlockView b0 = blockView(v, "mxfp4", 0);
    ASSERT_TRUE(b0.valid);
    EXPECT_EQ(b0.blocks, 2);
    EXPECT_EQ(b0.blockSize, 32);
    EXPECT_EQ(b0.values.size(), 32u);
    EXPECT_FLOAT_EQ(b0.amax, 0.41f);
    // OCP's FLOOR rule: floor(log2 0.41) - emax(E2M1) = -2 - 2 = -4, stored as 127 - 4.
    EXPECT_EQ(b0.scaleByte, 123);
    EXPECT_DOUBLE_EQ(b0.scale, 0.0625);
    EXPECT_DOUBLE_EQ(b0.elementMax, 6.0);
    ASSERT_EQ(b0.grid.size(), 15u);  // ±{0.5, 1, 1.5, 2, 3, 4, 6} and 0
    EXPECT_DOUBLE_EQ(b0.grid.back(), 0.375);
    // 0.41 / 0.0625 = 6.56 is past E2M1's 6: it saturates to the largest code.
    EXPECT_DOUBLE_EQ(b0.quantized[3], -0.375);
    const BlockView b1 = blockView(v, "mxfp4", 1);
    ASSERT_TRUE(b1.valid);
    EXPECT_EQ(b1.scaleByte, 122);  // floor(log2 0.2) - 2 = -5: one octave down
    EXPECT_DOUBLE_EQ(b1.scale, b0.scale / 2.0);
    EXPECT_DOUBLE_EQ(b1.quantized[40 - 32], 0.1875);  // 0.2 / 2^-5 = 6.4 -> 6
    for (std::size_t i = 0; i < b0.values.size(); ++i) {
        const auto nearest = std::min_element(b0.grid.begin(), b0.grid.end(),
                                              [&](double a, double c) {
                                                  return std::abs(a - b0.quantized[i]) <
                                                         std::abs(c - b0.quantized[i]);
                                              });
        EXPECT_DOUBLE_EQ(*nearest, b0.quantized[i]) << i;  // every value lands on the grid
    }
    const std::vector<double> scales = blockScales(v, "mxfp4");
    ASSERT_EQ(scales.size(), 2u);
    EXPECT_DOUBLE_EQ(scales[0], b0.scale);
    EXPECT_DOUBLE_EQ(scales[1], b1.scale);
}

TEST(TeachingBlocks, NvFp4HasTwoLevelsOfScale)
{
    const std::vector<float> v = twoBlocks();
    for (std::int64_t block = 0; block < 4; ++block) {
        const BlockView b = blockView(v, "nvfp4", block);
        ASSERT_TRUE(b.valid) << block;
        EXPECT_EQ(b.blocks, 4);
        EXPECT_EQ(b.blockSize, 16);
        // One float32 scale for the vector, amax / (6 * 448); an E4M3 scale per block of 16.
        EXPECT_FLOAT_EQ(b.tensorScale, 0.41f / 2688.0f);
        EXPECT_FLOAT_EQ(b.scale, static_cast<float>(b.e4m3 * b.tensorScale));
        EXPECT_GT(b.scaleByte, 0);
        EXPECT_LT(b.scaleByte, 0x7F);
        // E4M3 rounds amax / 6 / tensorScale to 3 mantissa bits: the largest code lands within
        // 1/16 of the block's max |w|, not within an octave as MX's does.
        EXPECT_NEAR(6.0 * b.scale / b.amax, 1.0, 1.0 / 16.0) << block;
    }
    EXPECT_FALSE(blockView(v, "nvfp4", 4).valid);
    EXPECT_FALSE(blockView(v, "int8", 0).valid);
    EXPECT_FALSE(blockView({}, "mxfp4", 0).valid);
}

TEST(TeachingBlocks, EveryBlockFormatHasAGridAndItsNamesComeFromTheTable)
{
    const std::vector<std::string> names = blockFormatNames();
    EXPECT_EQ(names, (std::vector<std::string>{"mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3",
                                               "mxfp8_e5m2", "mxint8", "nvfp4"}));
    const std::vector<float> v = twoBlocks();
    for (const std::string& name : names) {
        SCOPED_TRACE(name);
        EXPECT_TRUE(isBlockFormatName(name));
        EXPECT_EQ(blockSizeOf(name), name == "nvfp4" ? 16 : 32);
        const BlockView b = blockView(v, name, 0);
        ASSERT_TRUE(b.valid);
        EXPECT_TRUE(std::is_sorted(b.grid.begin(), b.grid.end()));
        EXPECT_DOUBLE_EQ(b.grid.back(), b.elementMax * b.scale);
        EXPECT_GT(b.sqnrDb, 0.0);
    }
    EXPECT_FALSE(isBlockFormatName("fp4_e2m1"));
    EXPECT_EQ(blockSizeOf("int8"), 0);
}

TEST(TeachingBlocks, CodePointsOfTheBlockHoldingTheMaximum)
{
    // MXFP4, max|w| 1: scale 2^-2, so E2M1's 6 and 4... become 1.5 and 1; 1.5 is past the
    // range: 13 values ±{0.125 ... 1}.
    const std::vector<double> mx = codePoints("mxfp4", true, -1.0, 1.0);
    ASSERT_EQ(mx.size(), 13u);
    EXPECT_DOUBLE_EQ(mx.back(), 1.0);
    EXPECT_DOUBLE_EQ(mx[7], 0.125);
    // NVFP4: the E4M3 scale is 448 under the tensor scale, so the grid is E2M1 x max|w| / 6.
    const std::vector<double> nv = codePoints("nvfp4", true, -1.0, 1.0);
    ASSERT_EQ(nv.size(), 15u);
    EXPECT_NEAR(nv.back(), 1.0, 1e-6);
    EXPECT_NEAR(nv[8], 0.5 / 6.0, 1e-7);
}

TEST(TeachingQuantError, BlockFormatsQuantizeInTheirOwnBlocks)
{
    const std::vector<float> v = gaussian(4096);
    TeachingSettings s;
    s.format = "mxfp4";
    const QuantErrorStats perTensor = quantizationError(v, s);
    s.groupSize = 128;  // ignored: the block is the group
    const QuantErrorStats grouped = quantizationError(v, s);
    ASSERT_TRUE(perTensor.valid);
    EXPECT_DOUBLE_EQ(perTensor.sqnrDb, grouped.sqnrDb);
    // NVFP4's finer block scales beat MXFP4's (as published).
    s.format = "nvfp4";
    const QuantErrorStats nv = quantizationError(v, s);
    ASSERT_TRUE(nv.valid);
    EXPECT_GT(nv.sqnrDb, perTensor.sqnrDb);
    // Clipping a block format clips its scale's amax: at half the range it loses.
    s.clipFraction = 0.5;
    EXPECT_LT(quantizationError(v, s).sqnrDb, nv.sqnrDb);
}

} // namespace
} // namespace bitlens::analysis
