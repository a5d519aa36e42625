// ggml block formats: bytes identical to ggml's reference quantizers and floats identical to its
// dequantizers (golden files from ggml itself, tests/data/ggml/make_golden.py), error bounds of
// quantize -> dequantize, exact zeros, NaN/Inf refused, sizes checked.

#include "io/dataset.h"
#include "formats/ggml_quants.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

using namespace bitlens;
using formats::GgmlType;

namespace {

const std::string kDir = std::string(BITLENS_TEST_DATA) + "/ggml/";

std::vector<std::uint8_t> readBytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> goldenInputs()
{
    auto t = io::readNpy(kDir + "inputs.npy");
    EXPECT_TRUE(t.ok());
    at::Tensor f = t->to(at::kFloat).contiguous();
    return {f.data_ptr<float>(), f.data_ptr<float>() + f.numel()};
}

std::uint32_t bitsOf(float v)
{
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
}

bool isBlockType(const formats::GgmlTypeTraits& t) { return t.blockSize > 1; }

} // namespace

TEST(GgmlQuants, TraitsTableIsConsistent)
{
    for (const auto& t : formats::allGgmlTypes()) {
        EXPECT_EQ(formats::ggmlTraits(static_cast<std::uint32_t>(t.type)), &t) << t.name;
        EXPECT_EQ(formats::ggmlTypeFromName(t.name), t.type) << t.name;
        EXPECT_GT(t.blockSize, 0);
        EXPECT_GT(t.typeSize, 0);
        if (t.fromFloatRef)
            EXPECT_NE(t.toFloat, nullptr) << t.name << ": a quantizer needs a dequantizer";
    }
    EXPECT_EQ(formats::ggmlTraits(4u), nullptr);  // ids 4 and 5 were removed from ggml
    EXPECT_EQ(formats::ggmlTraits(1000u), nullptr);
    EXPECT_EQ(formats::ggmlTypeFromName("q4_k"), GgmlType::Q4_K);
    EXPECT_FALSE(formats::ggmlTypeFromName("Q4").has_value());
    EXPECT_EQ(formats::ggmlBytes(GgmlType::Q4_K, 512), 288);
    EXPECT_EQ(formats::ggmlBytes(GgmlType::Q8_0, 64), 68);
    EXPECT_FALSE(formats::ggmlBytes(GgmlType::Q8_0, 33).has_value());
    EXPECT_FALSE(formats::ggmlBytes(GgmlType::F32, std::numeric_limits<std::int64_t>::max()).has_value());
}

// Every type with a quantizer gives exactly ggml's bytes for the golden rows.
TEST(GgmlQuants, QuantizeMatchesGgmlReferenceBitForBit)
{
    const std::vector<float> x = goldenInputs();
    int checked = 0;
    for (const auto& t : formats::allGgmlTypes()) {
        if (!t.fromFloatRef || !isBlockType(t))
            continue;
        const std::string golden = kDir + std::string(t.name) + ".bin";
        ASSERT_TRUE(std::filesystem::exists(golden)) << "no golden file for " << t.name;
        const auto expected = readBytes(golden);
        auto got = formats::ggmlQuantize(x, t.type);
        ASSERT_TRUE(got.ok()) << t.name << ": " << got.error().message;
        ASSERT_EQ(got->size(), expected.size()) << t.name;
        std::size_t firstDiff = expected.size();
        for (std::size_t i = 0; i < expected.size(); ++i)
            if ((*got)[i] != expected[i]) {
                firstDiff = i;
                break;
            }
        EXPECT_EQ(firstDiff, expected.size())
            << t.name << ": first differing byte " << firstDiff << " (block "
            << firstDiff / static_cast<std::size_t>(t.typeSize) << ")";
        ++checked;
    }
    EXPECT_EQ(checked, 12);  // Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K..Q6_K Q8_K
}

// Every dequantizer gives exactly ggml's floats for ggml's bytes.
TEST(GgmlQuants, DequantizeMatchesGgmlBitForBit)
{
    int checked = 0;
    for (const auto& t : formats::allGgmlTypes()) {
        const std::string golden = kDir + std::string(t.name) + "_deq.npy";
        if (!std::filesystem::exists(golden))
            continue;
        auto expected = io::readNpy(golden);
        ASSERT_TRUE(expected.ok());
        const at::Tensor e = expected->contiguous();
        const auto bytes = readBytes(kDir + std::string(t.name) + ".bin");
        std::vector<float> got(static_cast<std::size_t>(e.numel()));
        ASSERT_TRUE(formats::ggmlDequantize(bytes, t.type, got).ok()) << t.name;
        const float* want = e.data_ptr<float>();
        for (std::size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(bitsOf(got[i]), bitsOf(want[i])) << t.name << " value " << i;
        ++checked;
    }
    EXPECT_EQ(checked, 11);
}

TEST(GgmlQuants, Q8_1StoresScaledCodeSum)
{
    const std::vector<float> x = goldenInputs();
    auto bytes = formats::ggmlQuantize(std::span(x).first(32), GgmlType::Q8_1);
    ASSERT_TRUE(bytes.ok());
    std::uint16_t d;
    std::uint16_t s;
    std::memcpy(&d, bytes->data(), 2);
    std::memcpy(&s, bytes->data() + 2, 2);
    int sum = 0;
    for (int j = 0; j < 32; ++j)
        sum += static_cast<std::int8_t>((*bytes)[4 + j]);
    EXPECT_EQ(s, formats::fp32ToFp16(static_cast<float>(sum) * formats::fp16ToFp32(d)));
}

// Property (seeded): dequantize(quantize(x)) stays within half a step of x for the round-to-
// nearest 32-value types (plus the fp16 rounding of the stored scale and min), and within a
// relative RMS error for the k-quants, whose scales are searched.
TEST(GgmlQuants, RoundTripErrorIsBounded)
{
    const std::uint32_t seed = 12345;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(256 * 16);
    for (float& v : x)
        v = normal(rng) * (rng() % 4 == 0 ? 10.0f : 1.0f);
    struct Bound {
        GgmlType type;
        double relRms;  // k-quants: RMS error / RMS of x
    };
    const Bound bounds[] = {{GgmlType::Q2_K, 0.45}, {GgmlType::Q3_K, 0.25}, {GgmlType::Q4_K, 0.12},
                            {GgmlType::Q5_K, 0.06}, {GgmlType::Q6_K, 0.03}, {GgmlType::Q8_K, 0.02}};
    for (const auto& t : formats::allGgmlTypes()) {
        if (!t.fromFloatRef)
            continue;
        auto q = formats::ggmlQuantize(x, t.type);
        ASSERT_TRUE(q.ok()) << t.name;
        std::vector<float> y(x.size());
        ASSERT_TRUE(formats::ggmlDequantize(*q, t.type, y).ok());
        if (t.type == GgmlType::F32) {
            EXPECT_EQ(x, y);
            continue;
        }
        if (t.blockSize == 1) {  // F16, BF16: one rounding
            const double rel = t.type == GgmlType::F16 ? 1.0 / 2048 : 1.0 / 256;
            for (std::size_t i = 0; i < x.size(); ++i)
                EXPECT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i]) * rel) << t.name << " seed " << seed;
            continue;
        }
        if (t.blockSize == 32) {
            for (std::size_t b = 0; b < x.size() / 32; ++b) {
                float lo = x[b * 32];
                float hi = x[b * 32];
                float amax = 0.0f;
                for (int j = 0; j < 32; ++j) {
                    lo = std::min(lo, x[b * 32 + j]);
                    hi = std::max(hi, x[b * 32 + j]);
                    amax = std::max(amax, std::fabs(x[b * 32 + j]));
                }
                // Step: Q8 amax/127; Q4_0/Q5_0 use max/-8 (/-16), whose far end may lose a whole
                // step; Q4_1/Q5_1 (max - min)/15 (/31).
                double bound = 0;
                switch (t.type) {
                case GgmlType::Q8_0:
                case GgmlType::Q8_1: bound = amax / 127 * 0.5; break;
                case GgmlType::Q4_0: bound = amax / 8; break;
                case GgmlType::Q5_0: bound = amax / 16; break;
                case GgmlType::Q4_1: bound = (hi - lo) / 15 * 0.5; break;
                case GgmlType::Q5_1: bound = (hi - lo) / 31 * 0.5; break;
                default: FAIL() << t.name;
                }
                // fp16 rounding of d (relative 2^-11, times up to 31 steps) and of m.
                bound += amax / 256 + std::fabs(lo) / 1024 + 1e-6;
                for (int j = 0; j < 32; ++j)
                    ASSERT_LE(std::fabs(y[b * 32 + j] - x[b * 32 + j]), bound)
                        << t.name << " block " << b << " seed " << seed;
            }
            continue;
        }
        double err = 0;
        double ref = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            err += (y[i] - x[i]) * (y[i] - x[i]);
            ref += x[i] * x[i];
        }
        const double rel = std::sqrt(err / ref);
        bool found = false;
        for (const Bound& b : bounds)
            if (b.type == t.type) {
                EXPECT_LT(rel, b.relRms) << t.name << " seed " << seed;
                found = true;
            }
        EXPECT_TRUE(found) << "no bound for " << t.name;
    }
}

TEST(GgmlQuants, ZerosStayExactlyZero)
{
    const std::vector<float> zeros(512, 0.0f);
    for (const auto& t : formats::allGgmlTypes()) {
        if (!t.fromFloatRef)
            continue;
        auto q = formats::ggmlQuantize(zeros, t.type);
        ASSERT_TRUE(q.ok()) << t.name;
        std::vector<float> y(zeros.size(), 1.0f);
        ASSERT_TRUE(formats::ggmlDequantize(*q, t.type, y).ok());
        for (float v : y)
            ASSERT_EQ(v, 0.0f) << t.name;
    }
}

TEST(GgmlQuants, BlockTypesRefuseNaNAndInfinity)
{
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
        std::vector<float> x(256, 0.5f);
        x[77] = bad;
        for (const auto& t : formats::allGgmlTypes()) {
            if (!t.fromFloatRef)
                continue;
            auto q = formats::ggmlQuantize(x, t.type);
            if (t.blockSize == 1) {
                EXPECT_TRUE(q.ok()) << t.name << " holds NaN and Inf";
                continue;
            }
            ASSERT_FALSE(q.ok()) << t.name;
            EXPECT_EQ(q.error().code, ErrorCode::BadInput);
            EXPECT_NE(q.error().message.find("value 77 is"), std::string::npos) << q.error().message;
        }
    }
}

TEST(GgmlQuants, SizesAndTypesAreChecked)
{
    const std::vector<float> x(33, 1.0f);
    auto q = formats::ggmlQuantize(x, GgmlType::Q4_0);
    ASSERT_FALSE(q.ok());
    EXPECT_EQ(q.error().code, ErrorCode::Usage);
    EXPECT_EQ(q.error().message, "33 values are not a whole number of Q4_0 blocks of 32");
    auto iq = formats::ggmlQuantize(std::vector<float>(256, 1.0f), GgmlType::IQ2_XXS);
    ASSERT_FALSE(iq.ok());
    EXPECT_EQ(iq.error().code, ErrorCode::Unsupported);
    std::vector<float> y(32);
    const std::vector<std::uint8_t> shortBlock(17);
    EXPECT_EQ(formats::ggmlDequantize(shortBlock, GgmlType::Q4_0, y).error().code, ErrorCode::Usage);
    const std::vector<std::uint8_t> iqBlock(66);
    std::vector<float> y256(256);
    EXPECT_EQ(formats::ggmlDequantize(iqBlock, GgmlType::IQ2_XXS, y256).error().code,
              ErrorCode::Unsupported);
}

// Quantizing rows one at a time gives the same bytes as quantizing them together, for counts of
// blocks that straddle the parallel chunking of the GGUF writer.
TEST(GgmlQuants, BlocksAreIndependent)
{
    std::mt19937 rng(99);
    std::uniform_real_distribution<float> uni(-2.0f, 3.0f);
    for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
        const auto& t = formats::ggmlTraits(type);
        for (int blocks : {1, 2, 3, 5, 7, 8, 15, 16, 17}) {
            std::vector<float> x(static_cast<std::size_t>(blocks * t.blockSize));
            for (float& v : x)
                v = uni(rng);
            auto all = formats::ggmlQuantize(x, type);
            ASSERT_TRUE(all.ok());
            for (int b = 0; b < blocks; ++b) {
                auto one = formats::ggmlQuantize(
                    std::span<const float>(x).subspan(static_cast<std::size_t>(b * t.blockSize),
                                                      static_cast<std::size_t>(t.blockSize)),
                    type);
                ASSERT_TRUE(std::equal(one->begin(), one->end(), all->begin() + b * t.typeSize))
                    << t.name << " block " << b << " of " << blocks;
            }
        }
    }
}

TEST(GgmlQuants, HalfAndBFloat16RoundToNearestEven)
{
    // 1 + 2^-11 is halfway between two halves: even mantissa wins (1.0); 1 + 3 * 2^-11 -> up.
    EXPECT_EQ(formats::fp32ToFp16(1.0f + 0x1p-11f), 0x3c00);
    EXPECT_EQ(formats::fp32ToFp16(1.0f + 3 * 0x1p-11f), 0x3c02);
    EXPECT_EQ(formats::fp16ToFp32(0x7bff), 65504.0f);
    // 1.00390625 (0x3f808000) is halfway: stays 0x3f80; 0x3f818000 rounds up to 0x3f82.
    float a;
    float b;
    std::uint32_t ua = 0x3f808000;
    std::uint32_t ub = 0x3f818000;
    std::memcpy(&a, &ua, 4);
    std::memcpy(&b, &ub, 4);
    EXPECT_EQ(formats::fp32ToBf16(a), 0x3f80);
    EXPECT_EQ(formats::fp32ToBf16(b), 0x3f82);
    EXPECT_EQ(formats::fp32ToBf16(std::nanf("")) & 0x7fc0, 0x7fc0);
}

// MXFP4: ggml's doubled table times GGML_E8M0_TO_FP32_HALF is OCP's E2M1 x 2^(e - 127) for
// random exponents, both subnormal ones (0 and 1) and every code, through packMxfp4's layout.
// (gguf-py's dequantizer and llama.cpp read the exported files in e2e.test_export_gguf and
// e2e.test_export_llamacpp.)
TEST(GgmlQuants, Mxfp4DequantizesAsOcpSaysThroughGgmlsLayout)
{
    std::mt19937 rng(5);
    const int blocks = 64;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(blocks * 32));
    std::vector<std::uint8_t> exps(static_cast<std::size_t>(blocks));
    for (auto& c : codes)
        c = static_cast<std::uint8_t>(rng() % 16);
    for (int b = 0; b < blocks; ++b)
        exps[static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(b < 2 ? b : 100 + rng() % 60);
    auto bytes = formats::packMxfp4(codes, exps);
    ASSERT_TRUE(bytes.ok()) << bytes.error().message;
    ASSERT_EQ(bytes->size(), static_cast<std::size_t>(blocks * 17));
    std::vector<float> got(codes.size());
    ASSERT_TRUE(formats::ggmlDequantize(*bytes, GgmlType::MXFP4, got).ok());
    // E2M1 by bit pattern times 2^(e - 127), e = 0 the subnormal 2^-127.
    const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (std::size_t i = 0; i < codes.size(); ++i)
        ASSERT_EQ(got[i], e2m1[codes[i]] * std::ldexp(1.0f, exps[i / 32] - 127)) << i;
    EXPECT_FALSE(formats::packMxfp4(std::span(codes).first(31), exps).ok());
    codes[3] = 16;
    EXPECT_FALSE(formats::packMxfp4(codes, exps).ok());
}
