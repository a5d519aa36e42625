// The QuantType traits table and the reference primitives: golden values written by PyTorch
// (tests/data/quant/make_quant_golden.py), and property tests that loop over every type.

#include "quant/quant_type.h"

#include "io/dataset.h"
#include "quant_property_data.h"

#include <ATen/ATen.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <gtest/gtest.h>
#include <cstring>
#include <random>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace bitlens::quant {
namespace {

const std::string kQuantDir = std::string(BITLENS_TEST_DATA) + "/quant/";
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

/// One golden array; a missing or unreadable file fails the test with the reader's message.
at::Tensor golden(const std::string& name)
{
    auto result = io::readNpy(kQuantDir + name + ".npy");
    if (!result)
        throw std::runtime_error(result.error().userMessage());
    return std::move(result).value();
}

/// The seed of the property tests: BITLENS_TEST_SEED or a fixed default, printed either way.
std::uint64_t testSeed()
{
    static const std::uint64_t seed = [] {
        const char* env = std::getenv("BITLENS_TEST_SEED");
        const std::uint64_t value = env ? std::strtoull(env, nullptr, 10) : 20240607u;
        std::cout << "[ seed     ] BITLENS_TEST_SEED=" << value << "\n";
        return value;
    }();
    return seed;
}

/// Exact equality of float32 tensors, bit for bit (so -0 differs from +0).
testing::AssertionResult sameFloatBits(const at::Tensor& got, const at::Tensor& want)
{
    if (got.sizes() != want.sizes())
        return testing::AssertionFailure() << "shape " << got.sizes() << " != " << want.sizes();
    const at::Tensor g = got.to(at::kFloat).contiguous().view(at::kInt).reshape({-1});
    const at::Tensor w = want.to(at::kFloat).contiguous().view(at::kInt).reshape({-1});
    const at::Tensor differ = at::ne(g, w).nonzero();
    if (differ.numel() == 0)
        return testing::AssertionSuccess();
    const std::int64_t i = differ[0].item<std::int64_t>();
    const at::Tensor gf = got.to(at::kFloat).reshape({-1});
    const at::Tensor wf = want.to(at::kFloat).reshape({-1});
    return testing::AssertionFailure()
           << differ.size(0) << " of " << g.numel() << " values differ; first at " << i << ": "
           << gf[i].item<float>() << " != " << wf[i].item<float>();
}

/// Exact equality of integer codes of any integer dtype.
testing::AssertionResult sameCodes(const at::Tensor& got, const at::Tensor& want)
{
    if (got.sizes() != want.sizes())
        return testing::AssertionFailure() << "shape " << got.sizes() << " != " << want.sizes();
    const at::Tensor g = got.to(at::kLong).reshape({-1});
    const at::Tensor w = want.to(at::kLong).reshape({-1});
    const at::Tensor differ = at::ne(g, w).nonzero();
    if (differ.numel() == 0)
        return testing::AssertionSuccess();
    const std::int64_t i = differ[0].item<std::int64_t>();
    return testing::AssertionFailure() << differ.size(0) << " of " << g.numel()
                                       << " codes differ; first at " << i << ": "
                                       << g[i].item<std::int64_t>()
                                       << " != " << w[i].item<std::int64_t>();
}

/// Codes as comparable integers: float8 and half codes by their bit patterns.
at::Tensor codeBits(const at::Tensor& codes)
{
    switch (codes.scalar_type()) {
    case at::kFloat8_e4m3fn:
    case at::kFloat8_e5m2:
        return codes.view(at::kByte).to(at::kLong);
    case at::kHalf:
    case at::kBFloat16:
        return codes.view(at::kShort).to(at::kLong);
    default:
        return codes.to(at::kLong);
    }
}

QParams perTensorParams(QuantType type, float scale, std::int64_t zeroPoint = 0)
{
    QParams qparams;
    qparams.type = type;
    qparams.granularity = Granularity::perTensor();
    qparams.symmetric = zeroPoint == 0;
    qparams.scale = at::scalar_tensor(scale, at::kFloat);
    qparams.zeroPoint = at::scalar_tensor(zeroPoint, at::kLong);
    return qparams;
}

QParams observe(const at::Tensor& x, QuantType type, bool symmetric, const Granularity& g)
{
    const auto [lo, hi] = blockMinMax(x, g);
    return chooseQParams(lo, hi, type, symmetric, g);
}

// ---------------------------------------------------------------------------------------------
// The traits table

TEST(QuantTypeTable, NamesFollowDesignInEnumOrder)
{
    const std::vector<std::string> expected = {"int8",     "uint8",    "int4",     "uint4",
                                               "int2",     "nf4",      "fp4_e2m1", "fp8_e4m3",
                                               "fp8_e5m2", "fp16",     "bf16",
                                               "mxfp4",    "mxfp6_e2m3", "mxfp6_e3m2",
                                               "mxfp8_e4m3", "mxfp8_e5m2", "mxint8", "nvfp4"};
    const auto all = allQuantTypes();
    ASSERT_EQ(all.size(), expected.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        EXPECT_EQ(all[i].name, expected[i]);
        EXPECT_EQ(static_cast<std::size_t>(all[i].type), i);
        EXPECT_EQ(&traits(all[i].type), &all[i]);
        EXPECT_EQ(quantTypeFromName(expected[i]), all[i].type);
    }
    EXPECT_EQ(quantTypeFromName("INT8"), std::nullopt);
    EXPECT_EQ(quantTypeFromName("q4_0"), std::nullopt);
    EXPECT_EQ(quantTypeFromName(""), std::nullopt);
}

TEST(QuantTypeTable, RowsAreConsistent)
{
    for (const QuantTypeTraits& t : allQuantTypes()) {
        SCOPED_TRACE(std::string(t.name));
        EXPECT_GT(t.maxValue, 0.0f);
        switch (t.family) {
        case TypeFamily::Integer: {
            const std::int64_t levels = std::int64_t{1} << t.bits;
            // MXINT8 is symmetric, [-127, 127] (OCP MX: -128 is not used), codes k / 64.
            EXPECT_EQ(t.qmax - t.qmin + 1, isBlockFormat(t) ? levels - 1 : levels);
            EXPECT_EQ(t.qmin, t.isSigned ? -levels / 2 + (isBlockFormat(t) ? 1 : 0) : 0);
            EXPECT_TRUE(t.codes.empty());
            EXPECT_TRUE(t.needsScale);
            break;
        }
        case TypeFamily::CodeTable: {
            ASSERT_EQ(t.codes.size(), std::size_t{1} << t.bits);
            EXPECT_EQ(t.qmin, 0);
            EXPECT_EQ(t.qmax, static_cast<std::int64_t>(t.codes.size()) - 1);
            float largest = 0.0f;
            for (float c : t.codes)
                largest = std::max(largest, std::abs(c));
            EXPECT_EQ(largest, t.maxValue);
            EXPECT_TRUE(t.needsScale);
            break;
        }
        case TypeFamily::Float:
            EXPECT_EQ(t.qmin, 0);
            EXPECT_EQ(t.qmax, 0);
            break;
        }
    }
    // The float formats' ranges are c10's.
    EXPECT_EQ(traits(QuantType::FP8E4M3).maxValue,
              static_cast<float>(std::numeric_limits<c10::Float8_e4m3fn>::max()));
    EXPECT_EQ(traits(QuantType::FP8E5M2).maxValue,
              static_cast<float>(std::numeric_limits<c10::Float8_e5m2>::max()));
    EXPECT_EQ(traits(QuantType::FP16).maxValue,
              static_cast<float>(std::numeric_limits<c10::Half>::max()));
    EXPECT_EQ(traits(QuantType::BF16).maxValue,
              static_cast<float>(std::numeric_limits<c10::BFloat16>::max()));
    EXPECT_FALSE(traits(QuantType::FP16).needsScale);
    EXPECT_FALSE(traits(QuantType::BF16).needsScale);
    EXPECT_TRUE(traits(QuantType::FP8E4M3).needsScale);
}

TEST(QuantTypeTable, Nf4IsTheBitsandbytesTable)
{
    // bitsandbytes/functional.py get_4bit_type("nf4").
    const float expected[16] = {-1.0f,
                                -0.6961928009986877f,
                                -0.5250730514526367f,
                                -0.39491748809814453f,
                                -0.28444138169288635f,
                                -0.18477343022823334f,
                                -0.09105003625154495f,
                                0.0f,
                                0.07958029955625534f,
                                0.16093020141124725f,
                                0.24611230194568634f,
                                0.33791524171829224f,
                                0.44070982933044434f,
                                0.5626170039176941f,
                                0.7229568362236023f,
                                1.0f};
    const auto codes = traits(QuantType::NF4).codes;
    ASSERT_EQ(codes.size(), 16u);
    for (int i = 0; i < 16; ++i)
        EXPECT_EQ(codes[i], expected[i]) << "code " << i;
}

TEST(QuantTypeTable, Fp4IsIndexedByTheE2M1BitPattern)
{
    const auto codes = traits(QuantType::FP4E2M1).codes;
    ASSERT_EQ(codes.size(), 16u);
    for (int bits = 0; bits < 16; ++bits) {
        // Decode seee-style: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0.
        const int exponent = (bits >> 1) & 3;
        const int mantissa = bits & 1;
        const float magnitude = exponent == 0 ? 0.5f * static_cast<float>(mantissa)
                                              : std::ldexp(1.0f + 0.5f * mantissa, exponent - 1);
        const float value = (bits & 8) ? -magnitude : magnitude;
        EXPECT_EQ(codes[bits], value) << "code " << bits;
        EXPECT_EQ(std::signbit(codes[bits]), (bits & 8) != 0) << "code " << bits;
    }
}

TEST(QuantTypeTable, GranularityDescribe)
{
    EXPECT_EQ(Granularity::perTensor().describe(), "per-tensor");
    EXPECT_EQ(Granularity::perChannel(0).describe(), "per-channel(0)");
    EXPECT_EQ(Granularity::perChannel(1).describe(), "per-channel(1)");
    EXPECT_EQ(Granularity::perGroup(1, 64).describe(), "per-group(64)");
    EXPECT_EQ(Granularity::perToken().describe(), "per-token");
}

TEST(QuantTypeTable, QuantizedBytes)
{
    QParams q = observe(at::randn({8, 256}), QuantType::Int4, false, Granularity::perGroup(1, 64));
    // 2048 codes at 4 bits, 32 fp32 scales, 32 one-byte zero points.
    EXPECT_EQ(quantizedBytes(2048, q), 1024 + 32 * 4 + 32);
    q = observe(at::randn({8, 256}), QuantType::Int4, true, Granularity::perGroup(1, 64));
    EXPECT_EQ(quantizedBytes(2048, q), 1024 + 32 * 4);
    q = observe(at::randn({1000}), QuantType::Int8, true, Granularity::perTensor());
    EXPECT_EQ(quantizedBytes(1000, q), 1000 + 4);
    q = observe(at::randn({5}), QuantType::Int2, false, Granularity::perTensor());
    EXPECT_EQ(quantizedBytes(5, q), 2 + 4 + 1);  // 10 bits round up to 2 bytes
    q = observe(at::randn({4, 64}), QuantType::FP8E4M3, true, Granularity::perChannel(0));
    EXPECT_EQ(quantizedBytes(256, q), 256 + 4 * 4);
    q = observe(at::randn({1000}), QuantType::FP16, true, Granularity::perTensor());
    EXPECT_EQ(quantizedBytes(1000, q), 2000);
    q = observe(at::randn({4, 64}), QuantType::NF4, true, Granularity::perGroup(1, 64));
    EXPECT_EQ(quantizedBytes(256, q), 128 + 4 * 4);
}

// ---------------------------------------------------------------------------------------------
// Golden values from PyTorch

struct IntCase {
    const char* name;
    QuantType type;
};

TEST(QuantGolden, PerTensorMatchesFakeQuantizeBitForBit)
{
    const IntCase cases[] = {{"int8_a", QuantType::Int8},   {"int8_b", QuantType::Int8},
                             {"uint8_a", QuantType::UInt8}, {"uint8_b", QuantType::UInt8},
                             {"int4", QuantType::Int4},     {"int4_zp", QuantType::Int4},
                             {"uint4", QuantType::UInt4},   {"int2", QuantType::Int2}};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string prefix = std::string("pt_") + c.name;
        const at::Tensor x = golden(prefix + "_x");
        const at::Tensor params = golden(prefix + "_params");
        const auto scale = static_cast<float>(params[0].item<double>());
        const auto zeroPoint = static_cast<std::int64_t>(params[1].item<double>());
        ASSERT_EQ(traits(c.type).qmin, static_cast<std::int64_t>(params[2].item<double>()));
        ASSERT_EQ(traits(c.type).qmax, static_cast<std::int64_t>(params[3].item<double>()));
        const QParams qp = perTensorParams(c.type, scale, zeroPoint);

        const at::Tensor fq = golden(prefix + "_fq");
        const at::Tensor codes = quantize(x, qp);
        EXPECT_EQ(codes.scalar_type(), traits(c.type).isSigned ? at::kChar : at::kByte);
        EXPECT_TRUE(sameCodes(codes, golden(prefix + "_q")));
        EXPECT_TRUE(sameFloatBits(fakeQuantize(x, qp), fq));
        EXPECT_TRUE(sameFloatBits(dequantize(codes, qp), fq));
    }
}

/// torch.quantize_per_tensor / per_channel codes against ours: equal when the zero point is 0;
/// otherwise they may differ by one code where PyTorch adds the zero point before rounding.
void expectCloseToTorchQuantize(const at::Tensor& ours, const at::Tensor& torchCodes,
                                bool zeroPointsAreZero)
{
    const at::Tensor diff = ours.to(at::kLong) - torchCodes.to(at::kLong);
    EXPECT_LE(diff.abs().max().item<std::int64_t>(), 1);
    if (zeroPointsAreZero) {
        EXPECT_TRUE(sameCodes(ours, torchCodes));
    }
}

TEST(QuantGolden, PerTensorNearTorchQuantizePerTensor)
{
    for (const IntCase& c : {IntCase{"int8_a", QuantType::Int8}, IntCase{"int8_b", QuantType::Int8},
                             IntCase{"uint8_a", QuantType::UInt8},
                             IntCase{"uint8_b", QuantType::UInt8}}) {
        SCOPED_TRACE(c.name);
        const std::string prefix = std::string("pt_") + c.name;
        const at::Tensor params = golden(prefix + "_params");
        const auto zeroPoint = static_cast<std::int64_t>(params[1].item<double>());
        const QParams qp = perTensorParams(c.type, static_cast<float>(params[0].item<double>()),
                                           zeroPoint);
        expectCloseToTorchQuantize(quantize(golden(prefix + "_x"), qp),
                                   golden(prefix + "_qtorch"), zeroPoint == 0);
    }
}

TEST(QuantGolden, PerChannelMatchesFakeQuantizeBitForBit)
{
    const IntCase cases[] = {{"int8_ax0", QuantType::Int8},
                             {"uint8_ax1", QuantType::UInt8},
                             {"int4_ax0", QuantType::Int4},
                             {"uint4_ax1", QuantType::UInt4}};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string prefix = std::string("pc_") + c.name;
        const at::Tensor x = golden(prefix + "_x");
        const at::Tensor params = golden(prefix + "_params");
        ASSERT_EQ(traits(c.type).qmin, params[1].item<std::int64_t>());
        ASSERT_EQ(traits(c.type).qmax, params[2].item<std::int64_t>());
        QParams qp;
        qp.type = c.type;
        qp.granularity = Granularity::perChannel(params[0].item<std::int64_t>());
        qp.symmetric = false;
        qp.scale = golden(prefix + "_scale");
        qp.zeroPoint = golden(prefix + "_zp");

        const at::Tensor fq = golden(prefix + "_fq");
        const at::Tensor codes = quantize(x, qp);
        EXPECT_TRUE(sameCodes(codes, golden(prefix + "_q")));
        EXPECT_TRUE(sameFloatBits(fakeQuantize(x, qp), fq));
        EXPECT_TRUE(sameFloatBits(dequantize(codes, qp), fq));
        if (traits(c.type).bits == 8) {
            expectCloseToTorchQuantize(codes, golden(prefix + "_qtorch"),
                                       at::all(at::eq(qp.zeroPoint, 0)).item<bool>());
        }
    }
}

struct BlockCase {
    const char* name;
    QuantType type;
    bool symmetric;
    Granularity granularity;
};

TEST(QuantGolden, PerGroupAndPerTokenMatchPerChannelOnBlocks)
{
    const BlockCase cases[] = {
        {"int4_g64", QuantType::Int4, false, Granularity::perGroup(1, 64)},
        {"int8_g32", QuantType::Int8, true, Granularity::perGroup(1, 32)},
        {"uint8_g32_ax0", QuantType::UInt8, false, Granularity::perGroup(0, 32)},
        {"int8_tok", QuantType::Int8, true, Granularity::perToken()},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string prefix = std::string("blk_") + c.name;
        const at::Tensor x = golden(prefix + "_x");
        const QParams qp = observe(x, c.type, c.symmetric, c.granularity);
        EXPECT_TRUE(sameFloatBits(qp.scale, golden(prefix + "_scale")));
        EXPECT_TRUE(sameCodes(qp.zeroPoint, golden(prefix + "_zp")));
        const at::Tensor fq = golden(prefix + "_fq");
        EXPECT_TRUE(sameFloatBits(fakeQuantize(x, qp), fq));
        EXPECT_TRUE(sameFloatBits(dequantize(quantize(x, qp), qp), fq));
    }
}

struct ObserverCase {
    const char* name;
    QuantType type;
};

TEST(QuantGolden, ChooseQParamsMatchesMinMaxObservers)
{
    const ObserverCase cases[] = {
        {"int8_sym", QuantType::Int8},          {"int8_aff", QuantType::Int8},
        {"uint8_sym", QuantType::UInt8},        {"uint8_aff", QuantType::UInt8},
        {"int4_sym", QuantType::Int4},          {"int4_aff", QuantType::Int4},
        {"uint4_sym", QuantType::UInt4},        {"uint4_aff", QuantType::UInt4},
        {"int2_sym", QuantType::Int2},          {"int2_aff", QuantType::Int2},
        {"const_uint8_aff", QuantType::UInt8},  {"const_int8_sym", QuantType::Int8},
        {"zeros_int8_sym", QuantType::Int8},    {"zeros_uint8_aff", QuantType::UInt8},
        {"neg_int8_aff", QuantType::Int8},      {"neg_uint8_aff", QuantType::UInt8},
        {"pos_uint8_aff", QuantType::UInt8},    {"pos_int4_sym", QuantType::Int4},
        {"tiny_int8_sym", QuantType::Int8},     {"tiny_uint8_aff", QuantType::UInt8},
        {"tie_uint8_aff", QuantType::UInt8},    {"tie_int8_aff", QuantType::Int8},
        {"ch_int8_sym", QuantType::Int8},       {"ch_int8_aff", QuantType::Int8},
        {"ch_uint8_sym", QuantType::UInt8},     {"ch_uint8_aff_ax1", QuantType::UInt8},
        {"ch_int4_aff", QuantType::Int4},       {"ch_uint4_sym_ax1", QuantType::UInt4},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string prefix = std::string("obs_") + c.name;
        const at::Tensor params = golden(prefix + "_params");
        ASSERT_EQ(traits(c.type).qmin, params[0].item<std::int64_t>());
        ASSERT_EQ(traits(c.type).qmax, params[1].item<std::int64_t>());
        const bool symmetric = params[2].item<std::int64_t>() != 0;
        const std::int64_t axis = params[3].item<std::int64_t>();
        const Granularity g = axis < 0 ? Granularity::perTensor() : Granularity::perChannel(axis);
        const QParams qp = observe(golden(prefix + "_x"), c.type, symmetric, g);
        EXPECT_EQ(qp.symmetric, symmetric);
        EXPECT_TRUE(sameFloatBits(qp.scale, golden(prefix + "_scale")));
        EXPECT_TRUE(sameCodes(qp.zeroPoint, golden(prefix + "_zp")));
    }
    // The worked example of the header: lo / scale = -2.5 rounds half to even.
    const at::Tensor tie = golden("obs_tie_uint8_aff_zp");
    EXPECT_EQ(tie.item<std::int64_t>(), 2);
}

TEST(QuantGolden, Float8CastsAsTorchInRangeAndSaturatesBeyond)
{
    const at::Tensor x = golden("f8_x");
    struct Format {
        QuantType type;
        const char* bits;
        std::uint8_t maxBits;  // the largest finite magnitude's bit pattern
    };
    for (const Format& f : {Format{QuantType::FP8E4M3, "f8_e4m3_bits", 0x7E},
                            Format{QuantType::FP8E5M2, "f8_e5m2_bits", 0x7B}}) {
        const QuantTypeTraits& t = traits(f.type);
        SCOPED_TRACE(std::string(t.name));
        const at::Tensor torchBits = golden(f.bits).to(at::kLong);
        const at::Tensor codes = quantize(x, perTensorParams(f.type, 1.0f));
        ASSERT_EQ(codes.scalar_type(),
                  f.type == QuantType::FP8E4M3 ? at::kFloat8_e4m3fn : at::kFloat8_e5m2);
        const at::Tensor ours = codeBits(codes);
        const at::Tensor nan = at::isnan(x);
        const at::Tensor inRange = at::le(x.abs(), static_cast<double>(t.maxValue));
        EXPECT_TRUE(sameCodes(ours.masked_select(inRange), torchBits.masked_select(inRange)));
        // Beyond the range (Inf included) ours saturates to +-max.
        const at::Tensor beyond = at::logical_and(at::logical_not(inRange), at::logical_not(nan));
        ASSERT_GT(beyond.sum().item<std::int64_t>(), 0);
        const at::Tensor saturated =
            at::where(at::signbit(x), f.maxBits | 0x80, f.maxBits).to(at::kLong);
        EXPECT_TRUE(sameCodes(ours.masked_select(beyond), saturated.masked_select(beyond)));
        EXPECT_TRUE(at::all(at::isnan(dequantize(codes, perTensorParams(f.type, 1.0f))
                                          .masked_select(nan)))
                        .item<bool>());
        // What torch's own cast does there: E4M3FN saturates too; E5M2 gives Inf (0x7C) from
        // 61440 (the tie between 57344 and the Inf pattern) up, and rounds to 57344 below.
        if (f.type == QuantType::FP8E4M3) {
            EXPECT_TRUE(sameCodes(ours.masked_select(beyond), torchBits.masked_select(beyond)));
        } else {
            const at::Tensor overflow = at::ge(x.abs(), 61440.0);
            const at::Tensor inf = at::where(at::signbit(x), 0xFC, 0x7C).to(at::kLong);
            EXPECT_TRUE(sameCodes(torchBits.masked_select(overflow), inf.masked_select(overflow)));
            const at::Tensor rounded = at::logical_and(beyond, at::logical_not(overflow));
            EXPECT_TRUE(
                sameCodes(ours.masked_select(rounded), torchBits.masked_select(rounded)));
        }
    }
}

TEST(QuantGolden, Float8ScaledPerChannelAsTorchao)
{
    for (const auto& [type, tag] :
         {std::pair{QuantType::FP8E4M3, "e4m3"}, std::pair{QuantType::FP8E5M2, "e5m2"}}) {
        SCOPED_TRACE(tag);
        const std::string prefix = std::string("f8s_") + tag;
        const at::Tensor x = golden(prefix + "_x");
        const QParams qp = observe(x, type, true, Granularity::perChannel(0));
        EXPECT_TRUE(sameFloatBits(qp.scale, golden(prefix + "_scale")));
        const at::Tensor codes = quantize(x, qp);
        EXPECT_TRUE(sameCodes(codeBits(codes), golden(prefix + "_bits")));
        EXPECT_TRUE(sameFloatBits(dequantize(codes, qp), golden(prefix + "_deq")));
        EXPECT_TRUE(sameFloatBits(fakeQuantize(x, qp), golden(prefix + "_deq")));
    }
}

TEST(QuantGolden, HalfAndBFloat16CastsAsTorch)
{
    const at::Tensor x = golden("h_x");
    const at::Tensor finite = at::logical_not(at::isnan(x));
    for (const auto& [type, bits] :
         {std::pair{QuantType::FP16, "h_fp16_bits"}, std::pair{QuantType::BF16, "h_bf16_bits"}}) {
        SCOPED_TRACE(bits);
        const QParams qp = observe(x, type, true, Granularity::perTensor());
        EXPECT_TRUE(sameFloatBits(qp.scale, at::ones({}, at::kFloat)));
        const at::Tensor codes = quantize(x, qp);
        const at::Tensor want = golden(bits).to(at::kLong);
        EXPECT_TRUE(sameCodes(codeBits(codes).masked_select(finite), want.masked_select(finite)));
        const at::Tensor back = dequantize(codes, qp);
        EXPECT_TRUE(at::equal(at::isnan(back), at::isnan(x)));
        EXPECT_TRUE(sameFloatBits(fakeQuantize(x, qp).masked_select(finite),
                                  back.masked_select(finite)));
    }
}

TEST(QuantGolden, Fp4RoundsToNearestEvenAndSaturates)
{
    const QParams qp = perTensorParams(QuantType::FP4E2M1, 1.0f);
    EXPECT_TRUE(sameCodes(quantize(golden("fp4_x"), qp), golden("fp4_codes")));

    const at::Tensor x = golden("fp4s_x");
    const QParams scaled = observe(x, QuantType::FP4E2M1, true, Granularity::perChannel(0));
    EXPECT_TRUE(sameFloatBits(scaled.scale, golden("fp4s_scale")));
    const at::Tensor codes = quantize(x, scaled);
    EXPECT_TRUE(sameCodes(codes, golden("fp4s_codes")));
    EXPECT_TRUE(sameFloatBits(dequantize(codes, scaled), golden("fp4s_deq")));
}

TEST(QuantGolden, Nf4MatchesBitsandbytesBlockwise)
{
    const at::Tensor x = golden("nf4s_x");
    const QParams qp = observe(x, QuantType::NF4, true, Granularity::perGroup(1, 64));
    EXPECT_TRUE(sameFloatBits(qp.scale, golden("nf4s_scale")));  // the absmax of every block
    const at::Tensor codes = quantize(x, qp);
    EXPECT_TRUE(sameCodes(codes, golden("nf4s_codes")));
    EXPECT_TRUE(sameFloatBits(dequantize(codes, qp), golden("nf4s_deq")));
    EXPECT_TRUE(sameFloatBits(fakeQuantize(x, qp), golden("nf4s_deq")));
}

// ---------------------------------------------------------------------------------------------
// Code tables: tie rules

TEST(QuantCodeTable, Nf4ThresholdsTakeTheLowerCode)
{
    // bitsandbytes' dQuantizeNF4 thresholds (csrc/kernels.cu): `x > threshold` goes up.
    const float thresholds[15] = {-0.8480964004993439f,  -0.6106329262256622f,
                                  -0.4599952697753906f,  -0.33967943489551544f,
                                  -0.23460740596055984f, -0.13791173323988914f,
                                  -0.045525018125772476f, 0.03979014977812767f,
                                  0.1202552504837513f,   0.2035212516784668f,
                                  0.2920137718319893f,   0.3893125355243683f,
                                  0.5016634166240692f,   0.6427869200706482f,
                                  0.8614784181118011f};
    std::vector<float> values;
    std::vector<std::int64_t> expected;
    for (int k = 0; k < 15; ++k) {
        values.push_back(thresholds[k]);
        expected.push_back(k);
        values.push_back(std::nextafter(thresholds[k], kInf));
        expected.push_back(k + 1);
        values.push_back(std::nextafter(thresholds[k], -kInf));
        expected.push_back(k);
    }
    for (int k = 0; k < 16; ++k) {
        values.push_back(traits(QuantType::NF4).codes[k]);
        expected.push_back(k);
    }
    values.insert(values.end(), {-0.0f, 1.5f, -1.5f, kInf, -kInf});
    expected.insert(expected.end(), {7, 15, 0, 15, 0});
    const QParams qp = perTensorParams(QuantType::NF4, 1.0f);
    EXPECT_TRUE(sameCodes(quantize(at::tensor(values), qp), at::tensor(expected)));
}

TEST(QuantCodeTable, Nf4IsTheNearestCodeAwayFromTies)
{
    const std::uint64_t seed = testSeed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const at::Generator gen = at::detail::createCPUGenerator(seed);
    const at::Tensor x = at::rand({20000}, gen) * 2.0 - 1.0;
    const at::Tensor codes = quantize(x, perTensorParams(QuantType::NF4, 1.0f)).to(at::kLong);
    const auto table = traits(QuantType::NF4).codes;
    const auto* xs = x.data_ptr<float>();
    const auto* cs = codes.data_ptr<std::int64_t>();
    int checked = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
        // Brute force in double: the nearest and second-nearest codes.
        double best = 1e9, second = 1e9;
        std::int64_t bestCode = -1;
        for (std::int64_t k = 0; k < 16; ++k) {
            const double d = std::abs(static_cast<double>(xs[i]) - table[k]);
            if (d < best) {
                second = best;
                best = d;
                bestCode = k;
            } else if (d < second) {
                second = d;
            }
        }
        if (second - best < 1e-6)
            continue;  // a near-tie: the thresholds decide, tested above
        ++checked;
        ASSERT_EQ(cs[i], bestCode) << "x = " << xs[i];
    }
    EXPECT_GT(checked, 19000);
}

TEST(QuantCodeTable, Fp4TiesGoToTheEvenMantissa)
{
    const QParams qp = perTensorParams(QuantType::FP4E2M1, 1.0f);
    const at::Tensor x = at::tensor(std::vector<float>{0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f,
                                                       5.0f, -1.25f, -0.1f, -0.0f, 0.0f, 7.0f,
                                                       -kInf});
    // 0, 1, 1, 2, 2, 4, 4, -1, -0, -0, 0, 6, -6
    const at::Tensor expected =
        at::tensor(std::vector<std::int64_t>{0, 2, 2, 4, 4, 6, 6, 10, 8, 8, 0, 7, 15});
    const at::Tensor codes = quantize(x, qp);
    EXPECT_TRUE(sameCodes(codes, expected));
    EXPECT_TRUE(sameFloatBits(
        dequantize(codes, qp),
        at::tensor(std::vector<float>{0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, -1.0f, -0.0f,
                                      -0.0f, 0.0f, 6.0f, -6.0f})));
}

// ---------------------------------------------------------------------------------------------
// Properties, for every type in the table

/// The largest gap between neighbouring values of a code table, in unscaled units.
float largestCodeGap(const QuantTypeTraits& t)
{
    std::vector<float> sorted(t.codes.begin(), t.codes.end());
    std::sort(sorted.begin(), sorted.end());
    float gap = 0.0f;
    for (std::size_t i = 1; i < sorted.size(); ++i)
        gap = std::max(gap, sorted[i] - sorted[i - 1]);
    return gap;
}

/// Scale broadcast to x's shape, for bounds.
at::Tensor scaleLike(const at::Tensor& x, const QParams& qp)
{
    const auto& g = qp.granularity;
    switch (g.kind) {
    case Granularity::Kind::PerTensor:
        return qp.scale.expand(x.sizes());
    case Granularity::Kind::PerChannel: {
        std::vector<std::int64_t> shape(x.dim(), 1);
        shape[g.axis] = x.size(g.axis);
        return qp.scale.reshape(shape).expand(x.sizes());
    }
    case Granularity::Kind::PerGroup: {
        // Only [rows, cols] tensors here: repeat every block's scale groupSize times.
        const at::Tensor s = qp.scale.repeat_interleave(g.groupSize, 1);
        const std::int64_t length = x.size(g.axis);
        const at::Tensor rowsFirst = s.narrow(1, 0, length);
        return g.axis == 1 ? rowsFirst : rowsFirst.t();
    }
    case Granularity::Kind::PerToken:
        return qp.scale.reshape({-1, 1}).expand({qp.scale.numel(), x.size(-1)}).reshape(x.sizes());
    }
    return {};
}

at::Tensor zeroPointLike(const at::Tensor& x, const QParams& qp)
{
    QParams asScale = qp;
    asScale.scale = qp.zeroPoint.to(at::kFloat);
    return scaleLike(x, asScale);
}

std::vector<Granularity> weightGranularities()
{
    return {Granularity::perTensor(),      Granularity::perChannel(0),
            Granularity::perChannel(1),    Granularity::perGroup(1, 32),
            Granularity::perGroup(1, 64),  Granularity::perGroup(1, 128),
            Granularity::perGroup(1, 256), Granularity::perGroup(0, 3),
            Granularity::perToken()};
}

std::vector<std::int64_t> expectedScaleShape(const Granularity& g)
{
    switch (g.kind) {
    case Granularity::Kind::PerTensor:
        return {};
    case Granularity::Kind::PerChannel:
        return {g.axis == 0 ? 8 : 256};
    case Granularity::Kind::PerGroup:
        return g.axis == 1 ? std::vector<std::int64_t>{8, 256 / g.groupSize}
                           : std::vector<std::int64_t>{256, (8 + g.groupSize - 1) / g.groupSize};
    case Granularity::Kind::PerToken:
        return {8};
    }
    return {};
}

TEST(QuantProperty, EveryTypeAndGranularity)
{
    const std::uint64_t seed = testSeed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const at::Tensor x = test::propertyWeight(seed);
    for (const QuantTypeTraits& t : allQuantTypes()) {
        if (isBlockFormat(t))
            continue;  // one granularity of their own: MxFormats.PropertiesOfEveryBlockFormat
        for (const Granularity& g : weightGranularities()) {
            for (bool symmetric : {true, false}) {
                if (!symmetric && t.family != TypeFamily::Integer)
                    continue;
                SCOPED_TRACE(std::string(t.name) + " " + g.describe() +
                             (symmetric ? " symmetric" : " asymmetric"));
                const QParams qp = observe(x, t.type, symmetric, g);
                ASSERT_EQ(qp.scale.sizes(), at::IntArrayRef(expectedScaleShape(g)));
                ASSERT_EQ(qp.zeroPoint.sizes(), qp.scale.sizes());
                ASSERT_EQ(qp.scale.scalar_type(), at::kFloat);
                ASSERT_EQ(qp.zeroPoint.scalar_type(), at::kLong);
                EXPECT_TRUE(at::all(at::gt(qp.scale, 0)).item<bool>());
                EXPECT_TRUE(at::all(at::isfinite(qp.scale)).item<bool>());

                const at::Tensor codes = quantize(x, qp);
                ASSERT_EQ(codes.sizes(), x.sizes());
                const at::Tensor deq = dequantize(codes, qp);
                ASSERT_EQ(deq.scalar_type(), at::kFloat);
                EXPECT_TRUE(sameFloatBits(fakeQuantize(x, qp), deq));

                // q(deq(q(x))) == q(x)
                EXPECT_TRUE(sameCodes(codeBits(quantize(deq, qp)), codeBits(codes)));

                // 0 maps exactly to 0 (column 0 and the -0 at [2, 5]).
                EXPECT_TRUE(at::all(at::eq(deq.select(1, 0), 0)).item<bool>());
                EXPECT_EQ(deq[2][5].item<float>(), 0.0f);

                // The error bound of the format, plus the float32 rounding of x / scale and of
                // the dequantized product (two ulps of |x|).
                const at::Tensor err = (deq - x).abs();
                const at::Tensor s = scaleLike(x, qp);
                const at::Tensor ulps = x.abs() * (2 * std::numeric_limits<float>::epsilon());
                if (t.family == TypeFamily::Integer) {
                    const at::Tensor zp = zeroPointLike(x, qp);
                    const at::Tensor lo = (static_cast<double>(t.qmin) - zp) * s;
                    const at::Tensor hi = (static_cast<double>(t.qmax) - zp) * s;
                    const at::Tensor inside = at::logical_and(at::ge(x, lo), at::le(x, hi));
                    const at::Tensor bound = s * 0.5 + ulps;
                    const at::Tensor bad = at::logical_and(at::gt(err, bound), inside);
                    EXPECT_FALSE(at::any(bad).item<bool>())
                        << "x = " << x.masked_select(bad)[0].item<float>()
                        << " deq = " << deq.masked_select(bad)[0].item<float>()
                        << " scale = " << s.masked_select(bad)[0].item<float>();
                    // Outside the range values clip to the nearest end.
                    const at::Tensor clipped = at::where(at::lt(x, lo), lo, hi);
                    EXPECT_TRUE(at::all(at::logical_or(inside, at::eq(deq, clipped)))
                                    .item<bool>());
                } else if (t.family == TypeFamily::CodeTable) {
                    const at::Tensor bound = s * (largestCodeGap(t) / 2.0) + ulps;
                    EXPECT_TRUE(at::all(at::le(err, bound)).item<bool>())
                        << "largest error " << (err / s).max().item<float>() << " x scale";
                } else {
                    const test::FloatFormat f = test::floatFormat(t.type);
                    const at::Tensor bound =
                        at::maximum(x.abs() * std::ldexp(1.0, -(f.mantissaBits + 1)),
                                    s * (f.minSubnormal / 2.0)) +
                        ulps;
                    EXPECT_TRUE(at::all(at::le(err, bound)).item<bool>());
                }
            }
        }
    }
}

TEST(QuantProperty, MonotoneWithinEveryBlock)
{
    const std::uint64_t seed = testSeed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    // Rows sorted ascending: every block of a per-channel(0), per-token or per-group(1, 64)
    // granularity then holds an ascending run.
    const at::Tensor x = std::get<0>(at::sort(test::propertyWeight(seed + 1), 1));
    for (const QuantTypeTraits& t : allQuantTypes()) {
        if (isBlockFormat(t))
            continue;  // one granularity of their own: MxFormats.PropertiesOfEveryBlockFormat
        for (const Granularity& g : {Granularity::perTensor(), Granularity::perChannel(0),
                                     Granularity::perGroup(1, 64), Granularity::perToken()}) {
            for (bool symmetric : {true, false}) {
                SCOPED_TRACE(std::string(t.name) + " " + g.describe());
                const QParams qp = observe(x, t.type, symmetric, g);
                const at::Tensor deq = fakeQuantize(x, qp);
                const at::Tensor blocks = g.kind == Granularity::Kind::PerGroup
                                              ? deq.reshape({8, 4, 64})
                                              : deq.reshape({8, 1, 256});
                const at::Tensor steps = blocks.diff(1, -1);
                EXPECT_TRUE(at::all(at::ge(steps, 0)).item<bool>())
                    << "smallest step " << steps.min().item<float>();
            }
        }
    }
}

TEST(QuantProperty, ZeroRangeGivesAValidScale)
{
    for (const QuantTypeTraits& t : allQuantTypes()) {
        if (isBlockFormat(t))
            continue;  // one granularity of their own: MxFormats.PropertiesOfEveryBlockFormat
        for (bool symmetric : {true, false}) {
            SCOPED_TRACE(std::string(t.name) + (symmetric ? " symmetric" : " asymmetric"));
            const at::Tensor zeros = at::zeros({4, 64});
            const QParams qp = observe(zeros, t.type, symmetric, Granularity::perChannel(0));
            EXPECT_TRUE(at::all(at::gt(qp.scale, 0)).item<bool>());
            EXPECT_TRUE(at::all(at::isfinite(qp.scale)).item<bool>());
            if (t.family == TypeFamily::Integer) {
                EXPECT_TRUE(sameFloatBits(
                    qp.scale, at::full({4}, std::numeric_limits<float>::epsilon())));
            }
            EXPECT_TRUE(at::all(at::eq(fakeQuantize(zeros, qp), 0)).item<bool>());

            // A constant tensor comes back within one step of the format (integer types: one
            // scale, as a symmetric range may clip its top, int2's at 1 * absmax / 1.5).
            const at::Tensor constant = at::full({4, 64}, 2.5f);
            const QParams qc = observe(constant, t.type, symmetric, Granularity::perChannel(0));
            const at::Tensor back = fakeQuantize(constant, qc);
            const float scale = qc.scale[0].item<float>();
            const double step = t.family == TypeFamily::Integer     ? scale
                                : t.family == TypeFamily::CodeTable ? largestCodeGap(t) * scale
                                                                    : 2.5 * 0.125;
            EXPECT_LE((back - constant).abs().max().item<float>(), step)
                << back[0][0].item<float>();
        }
        // NaN and Inf bounds still give a finite positive scale.
        const at::Tensor lo = at::tensor(std::vector<float>{kNaN, -kInf, -1.0f});
        const at::Tensor hi = at::tensor(std::vector<float>{kNaN, kInf, 1.0f});
        const QParams qp = chooseQParams(lo, hi, t.type, true, Granularity::perChannel(0));
        EXPECT_TRUE(at::all(at::logical_and(at::gt(qp.scale, 0), at::isfinite(qp.scale)))
                        .item<bool>())
            << t.name;
    }
}

TEST(QuantProperty, NonFiniteInputs)
{
    const at::Tensor x = at::tensor(std::vector<float>{kNaN, kInf, -kInf, 0.5f, -0.5f});
    for (const QuantTypeTraits& t : allQuantTypes()) {
        if (isBlockFormat(t))
            continue;  // one granularity of their own: MxFormats.PropertiesOfEveryBlockFormat
        for (bool symmetric : {true, false}) {
            SCOPED_TRACE(std::string(t.name) + (symmetric ? " symmetric" : " asymmetric"));
            const QParams qp = chooseQParams(at::scalar_tensor(-1.0f), at::scalar_tensor(1.0f),
                                             t.type, symmetric, Granularity::perTensor());
            const at::Tensor codes = quantize(x, qp);
            const at::Tensor deq = dequantize(codes, qp);
            const at::Tensor fq = fakeQuantize(x, qp);
            // fakeQuantize keeps NaN for every type.
            EXPECT_TRUE(std::isnan(fq[0].item<float>()));
            // +-Inf: the ends of the range (FP16 / BF16 keep Inf).
            const at::Tensor ends = dequantize(
                quantize(at::tensor(std::vector<float>{3e38f, -3e38f}), qp), qp);
            if (t.needsScale) {
                EXPECT_EQ(deq[1].item<float>(), ends[0].item<float>());
                EXPECT_EQ(deq[2].item<float>(), ends[1].item<float>());
                EXPECT_TRUE(std::isfinite(deq[1].item<float>()));
            } else {
                EXPECT_EQ(deq[1].item<float>(), kInf);
                EXPECT_EQ(deq[2].item<float>(), -kInf);
            }
            EXPECT_TRUE(sameFloatBits(fq.slice(0, 1), deq.slice(0, 1)));
            if (t.family == TypeFamily::Float) {
                EXPECT_TRUE(std::isnan(deq[0].item<float>()));  // float formats keep NaN
            } else {
                EXPECT_EQ(deq[0].item<float>(), 0.0f);  // no NaN code: the code of 0
                if (t.family == TypeFamily::Integer) {
                    EXPECT_EQ(codes[0].item<std::int64_t>(), qp.zeroPoint.item<std::int64_t>());
                }
            }
        }
    }
}

TEST(QuantProperty, StraightThroughGradient)
{
    const at::Tensor base = at::linspace(-3.0, 3.0, 600).reshape({3, 200});
    for (const QuantTypeTraits& t : allQuantTypes()) {
        if (isBlockFormat(t))
            continue;  // one granularity of their own: MxFormats.PropertiesOfEveryBlockFormat
        for (const Granularity& g : {Granularity::perTensor(), Granularity::perGroup(1, 64)}) {
            SCOPED_TRACE(std::string(t.name) + " " + g.describe());
            // The clip range comes from [-1, 1]; |x| up to 3 reaches past it.
            const at::Tensor ref = at::linspace(-1.0, 1.0, 600).reshape({3, 200});
            const QParams qp = observe(ref, t.type, false, g);
            at::Tensor x = base.clone();
            if (t.type == QuantType::FP16)
                x = x * 1e5;  // beyond 65504
            else if (t.type == QuantType::BF16)
                x = x * 1.2e38;  // beyond 3.39e38, up to float32's Inf
            x.index_put_({0, 7}, kNaN);
            x.set_requires_grad(true);
            const at::Tensor y = fakeQuantize(x, qp);
            EXPECT_TRUE(y.requires_grad());
            at::where(at::isnan(y), at::zeros_like(y), y).sum().backward();
            const at::Tensor grad = x.grad();
            ASSERT_TRUE(grad.defined());

            const at::Tensor xd = x.detach();
            const at::Tensor s = scaleLike(xd, qp);
            at::Tensor inside;
            if (t.family == TypeFamily::Integer) {
                const at::Tensor q = at::round(xd * at::reciprocal(s)) + zeroPointLike(xd, qp);
                inside = at::logical_and(at::ge(q, static_cast<double>(t.qmin)),
                                         at::le(q, static_cast<double>(t.qmax)));
            } else {
                inside = at::le((xd / s).abs(), static_cast<double>(t.maxValue));
            }
            EXPECT_TRUE(at::equal(grad, inside.to(at::kFloat)));
            EXPECT_GT(inside.sum().item<std::int64_t>(), 0);
            EXPECT_GT(at::logical_not(inside).sum().item<std::int64_t>(), 1);
            EXPECT_EQ(grad[0][7].item<float>(), 0.0f);  // NaN passes no gradient

            // The same values as without autograd.
            EXPECT_TRUE(sameFloatBits(y.detach().masked_select(at::logical_not(at::isnan(xd))),
                                      fakeQuantize(xd, qp).masked_select(
                                          at::logical_not(at::isnan(xd)))));
        }
    }
}

TEST(QuantProperty, PartialLastGroup)
{
    // 100 columns in groups of 64: the second group holds 36 values, padding ignored.
    const at::Tensor x = at::rand({3, 100}) + 1.0;  // all in [1, 2)
    const auto [lo, hi] = blockMinMax(x, Granularity::perGroup(1, 64));
    ASSERT_EQ(lo.sizes(), at::IntArrayRef({3, 2}));
    EXPECT_TRUE(at::all(at::ge(lo, 1.0)).item<bool>());
    EXPECT_TRUE(sameFloatBits(hi.select(1, 1), std::get<0>(x.slice(1, 64).max(1))));
    const QParams qp = observe(x, QuantType::Int4, false, Granularity::perGroup(1, 64));
    const at::Tensor deq = dequantize(quantize(x, qp), qp);
    ASSERT_EQ(deq.sizes(), x.sizes());
    EXPECT_TRUE(sameFloatBits(fakeQuantize(x, qp), deq));
}

TEST(QuantProperty, MismatchedScaleShapeIsRejected)
{
    const at::Tensor x = at::randn({4, 64});
    QParams qp = observe(x, QuantType::Int8, true, Granularity::perChannel(0));
    qp.granularity = Granularity::perChannel(1);
    EXPECT_THROW(quantize(x, qp), c10::Error);
    EXPECT_THROW(fakeQuantize(x, qp), c10::Error);
    qp.granularity = Granularity::perChannel(2);
    EXPECT_THROW(quantize(x, qp), c10::Error);
    qp.granularity = Granularity::perGroup(1, 0);
    EXPECT_THROW(quantize(x, qp), c10::Error);
}

// ---------------------------------------------------------------------------------------------
// 4-bit packing

TEST(QuantPack, LowNibbleFirst)
{
    const at::Tensor codes = at::tensor(std::vector<std::int64_t>{1, 2, 15, 0}).to(at::kByte);
    const at::Tensor packed = packInt4(codes);
    ASSERT_EQ(packed.scalar_type(), at::kByte);
    EXPECT_TRUE(sameCodes(packed, at::tensor(std::vector<std::int64_t>{0x21, 0x0F})));
    EXPECT_TRUE(sameCodes(unpackInt4(packed), codes));

    // int4 codes are two's-complement nibbles: -1 -> 0xF, -8 -> 0x8.
    const at::Tensor signedCodes =
        at::tensor(std::vector<std::int64_t>{-1, 7, -8, 0}).to(at::kChar);
    const at::Tensor packedSigned = packInt4(signedCodes);
    EXPECT_TRUE(sameCodes(packedSigned, at::tensor(std::vector<std::int64_t>{0x7F, 0x08})));
    const at::Tensor nibbles = unpackInt4(packedSigned).to(at::kInt);
    EXPECT_TRUE(sameCodes(at::bitwise_xor(nibbles, 8) - 8, signedCodes));
}

TEST(QuantPack, RoundTripsEveryShape)
{
    const std::uint64_t seed = testSeed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const at::Generator gen = at::detail::createCPUGenerator(seed);
    for (const auto& shape : {std::vector<std::int64_t>{2}, std::vector<std::int64_t>{3, 64},
                              std::vector<std::int64_t>{2, 3, 34}}) {
        const at::Tensor codes = at::randint(0, 16, shape, gen, at::kByte);
        const at::Tensor packed = packInt4(codes);
        auto half = shape;
        half.back() /= 2;
        EXPECT_EQ(packed.sizes(), at::IntArrayRef(half));
        EXPECT_TRUE(sameCodes(unpackInt4(packed), codes));
    }
    // NF4 codes through the packer.
    const at::Tensor x = at::randn({4, 128}, gen);
    const QParams qp = observe(x, QuantType::NF4, true, Granularity::perGroup(1, 64));
    const at::Tensor codes = quantize(x, qp);
    EXPECT_TRUE(sameCodes(unpackInt4(packInt4(codes)), codes));

    EXPECT_THROW(packInt4(at::zeros({3}, at::kByte)), c10::Error);
    EXPECT_THROW(packInt4(at::zeros({4}, at::kFloat)), c10::Error);
}

} // namespace
TEST(QuantReduceRange, Int8OnSevenBitsAsOnnxruntimeAndTorch)
{
    // onnxruntime's reduce_range for int8 is [-64, 64]: symmetric scale = absmax * 2 / 128.
    EXPECT_EQ(codeRange(QuantType::Int8, CodeRange::Reduced), (std::pair<std::int64_t, std::int64_t>{-64, 64}));
    EXPECT_EQ(codeRange(QuantType::UInt8, CodeRange::Reduced), (std::pair<std::int64_t, std::int64_t>{0, 127}));
    EXPECT_EQ(codeRange(QuantType::Int8, CodeRange::Full), (std::pair<std::int64_t, std::int64_t>{-128, 127}));
    EXPECT_FALSE(supportsCodeRange(QuantType::Int4, CodeRange::Reduced));

    const at::Tensor w = at::randn({6, 40}, at::detail::createCPUGenerator(5)) * 0.3;
    const auto [lo, hi] = blockMinMax(w, Granularity::perChannel(0));
    const QParams qp = chooseQParams(lo, hi, QuantType::Int8, true, Granularity::perChannel(0),
                                     CodeRange::Reduced);
    EXPECT_EQ(qp.range, CodeRange::Reduced);
    const at::Tensor absmax = at::maximum(lo.abs(), hi.abs());
    EXPECT_TRUE(at::equal(qp.scale, absmax / 64.0));  // float32, as ORT computes it
    EXPECT_TRUE(at::equal(qp.zeroPoint, at::zeros({6}, at::kLong)));

    const at::Tensor codes = quantize(w, qp);
    EXPECT_EQ(codes.min().item<std::int64_t>(), -64);
    EXPECT_EQ(codes.max().item<std::int64_t>(), 64);  // the absmax of a row maps to +-64
    // Bit for bit PyTorch's fake quantization with quant_min -64, quant_max 64.
    const at::Tensor torchFq = at::fake_quantize_per_channel_affine(
        w, qp.scale, qp.zeroPoint.to(at::kInt), 0, -64, 64);
    EXPECT_TRUE(at::equal(fakeQuantize(w, qp), torchFq));
    EXPECT_TRUE(at::equal(dequantize(codes, qp), torchFq));
    // Beyond the range clamps at +-64, not at +-127.
    const at::Tensor big = at::full({6, 40}, 1e3f);
    EXPECT_EQ(quantize(big, qp).max().item<std::int64_t>(), 64);
    // Without the option the same weights use the full range.
    const QParams wide = chooseQParams(lo, hi, QuantType::Int8, true, Granularity::perChannel(0));
    EXPECT_EQ(wide.range, CodeRange::Full);
    EXPECT_GT(quantize(w, wide).abs().max().item<std::int64_t>(), 64);
}

TEST(QuantWrange, NarrowInt8MatchesTorchObserverAndFakeQuantBitForBit)
{
    // Goldens from tests/data/quant/make_wrange_golden.py (PyTorch 2.13, onnxruntime 1.32).
    EXPECT_EQ(codeRange(QuantType::Int8, CodeRange::Narrow),
              (std::pair<std::int64_t, std::int64_t>{-127, 127}));
    EXPECT_FALSE(supportsCodeRange(QuantType::UInt8, CodeRange::Narrow));
    EXPECT_FALSE(supportsCodeRange(QuantType::Int4, CodeRange::Narrow));
    const at::Tensor w = golden("wrange_w");
    const Granularity g = Granularity::perChannel(0);
    const auto [lo, hi] = blockMinMax(w, g);
    const QParams qp = chooseQParams(lo, hi, QuantType::Int8, true, g, CodeRange::Narrow);
    EXPECT_EQ(qp.range, CodeRange::Narrow);
    // scale = max|w| / 127 per row, as PerChannelMinMaxObserver(quant_min=-127, quant_max=127).
    EXPECT_TRUE(sameFloatBits(qp.scale, golden("wrange_ch_scale")));
    EXPECT_TRUE(sameCodes(qp.zeroPoint, golden("wrange_ch_zp")));
    EXPECT_TRUE(sameFloatBits(fakeQuantize(w, qp), golden("wrange_ch_fq")));
    const at::Tensor codes = quantize(w, qp);
    EXPECT_TRUE(sameCodes(codes, golden("wrange_ch_q")));
    EXPECT_EQ(codes.min().item<std::int64_t>(), -127);  // row 3's extreme, never -128
    EXPECT_EQ(codes.max().item<std::int64_t>(), 127);
    // Beyond the range clamps at -127 / 127, as torch's fake quantization with quant_min -127.
    EXPECT_TRUE(sameFloatBits(fakeQuantize(w * 1.5, qp), golden("wrange_big_fq")));
    EXPECT_EQ(quantize(w * 1.5, qp).min().item<std::int64_t>(), -127);
    // The default range picks absmax / 127.5 (the golden of the default observer): not the same.
    const QParams full = chooseQParams(lo, hi, QuantType::Int8, true, g);
    EXPECT_TRUE(sameFloatBits(full.scale, golden("wrange_full_ch_scale")));
    EXPECT_FALSE(at::equal(full.scale, qp.scale));
    // Per tensor too.
    const auto [tlo, thi] = blockMinMax(w, Granularity::perTensor());
    const QParams t =
        chooseQParams(tlo, thi, QuantType::Int8, true, Granularity::perTensor(), CodeRange::Narrow);
    // torch keeps a per-tensor scale as shape [1]; BitLens as a 0-d tensor.
    EXPECT_TRUE(sameFloatBits(t.scale.reshape({1}), golden("wrange_t_scale")));
    EXPECT_TRUE(sameCodes(t.zeroPoint.reshape({1}), golden("wrange_t_zp")));
    EXPECT_TRUE(sameFloatBits(fakeQuantize(w, t), golden("wrange_t_fq")));
}

TEST(QuantWrange, NarrowInt8MatchesOnnxruntimeSymmetricQuantizer)
{
    // onnxruntime's quantize_data(row, INT8, symmetric=True): qmin -127, scale 2 * absmax / 254
    // (the same float32 as absmax / 127), codes rint(x / scale). Its all-zero row gets scale 1
    // where PyTorch's observer (and BitLens) give float32 eps; every code is 0 either way.
    const at::Tensor w = golden("wrange_w");
    const Granularity g = Granularity::perChannel(0);
    const auto [lo, hi] = blockMinMax(w, g);
    const QParams qp = chooseQParams(lo, hi, QuantType::Int8, true, g, CodeRange::Narrow);
    const at::Tensor ortScale = golden("wrange_ort_scale");
    for (std::int64_t row = 0; row < w.size(0); ++row) {
        SCOPED_TRACE(row);
        const at::Tensor want = hi[row].item<float>() == 0.0f && lo[row].item<float>() == 0.0f
                                    ? at::full({}, std::numeric_limits<float>::epsilon())
                                    : ortScale[row];
        EXPECT_TRUE(sameFloatBits(qp.scale[row], want));
    }
    EXPECT_TRUE(sameCodes(quantize(w, qp), golden("wrange_ort_q")));
}

TEST(QuantScalar, PerTensorQParamsEqualChooseQParamsBitForBit)
{
    std::mt19937 rng(21);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    std::vector<std::pair<float, float>> ranges = {
        {0.0f, 0.0f}, {-1.0f, 1.0f}, {-0.15625f, 15.78125f}, {0.3f, 0.9f}, {-7.0f, -2.0f},
        {std::numeric_limits<float>::quiet_NaN(), 1.0f}, {-std::numeric_limits<float>::infinity(), 2.0f},
        {-1.0f, std::numeric_limits<float>::infinity()}, {-1e-30f, 1e-30f}, {-3e38f, 3e38f}};
    for (int i = 0; i < 2000; ++i) {
        const float e = std::pow(10.0f, 6.0f * unit(rng));
        ranges.emplace_back(std::min(0.0f, unit(rng)) * e, std::max(0.0f, unit(rng)) * e);
        ranges.emplace_back(unit(rng) * e, unit(rng) * e + e);
    }
    for (QuantType type : {QuantType::Int8, QuantType::UInt8, QuantType::Int4, QuantType::UInt4}) {
        for (bool symmetric : {false, true}) {
            for (CodeRange reduce : {CodeRange::Full, CodeRange::Narrow, CodeRange::Reduced}) {
                if (!supportsCodeRange(type, reduce))
                    continue;
                for (const auto& [lo, hi] : ranges) {
                    const QParams want = chooseQParams(at::full({}, lo), at::full({}, hi), type,
                                                       symmetric, Granularity::perTensor(), reduce);
                    const ScalarQParams got = chooseQParamsScalar(lo, hi, type, symmetric, reduce);
                    const float ws = want.scale.item<float>();
                    ASSERT_EQ(std::memcmp(&ws, &got.scale, sizeof(float)), 0)
                        << traits(type).name << " sym " << symmetric << " range " << codeRangeName(reduce)
                        << " [" << lo << ", " << hi << "]: " << ws << " vs " << got.scale;
                    ASSERT_EQ(want.zeroPoint.item<std::int64_t>(), got.zeroPoint)
                        << traits(type).name << " [" << lo << ", " << hi << "]";
                }
            }
        }
    }
}

} // namespace bitlens::quant
