// The low-bit kernels against their scalar `_ref` twins (kernels/lowbit.h), at every ISA level
// this CPU supports (each dispatching entry point runs the row of that level), over sizes
// that straddle the vector widths (8 and 16 int32 / float lanes, 4-byte VNNI groups, 6-row
// tiles, 64-channel panels, 32-element nibble chunks). int8: exact; float: tight tolerance. The twins
// themselves are checked against LibTorch (an int64 matmul, a float64 matmul of the dequantized
// weights) and against quant::quantize().

#include "isa_levels.h"
#include "kernels/lowbit.h"
#include "quant/quant_type.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace bitlens;
using namespace bitlens::kernels;
using bitlens::testing::AtIsaLevel;

namespace {

const std::vector<std::int64_t> kSizes = {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 131};

at::Generator seeded(std::uint64_t seed) { return at::detail::createCPUGenerator(seed); }

/// Activation codes [M, kPadded] (padding bytes random: the kernels must ignore them).
at::Tensor randomCodes(std::int64_t m, std::int64_t kPadded, std::uint64_t seed)
{
    return at::randint(0, 256, {m, kPadded}, seeded(seed), at::kByte);
}

/// sum_k (x[m, k] - zx[m]) * w[n, k] in int64 via LibTorch.
at::Tensor int8Expected(const at::Tensor& u, std::int64_t k, const at::Tensor& zx,
                        const at::Tensor& w)
{
    const at::Tensor x = u.narrow(1, 0, k).to(at::kLong) - zx.reshape({-1, 1});
    return at::matmul(x.to(at::kDouble), w.to(at::kDouble).t()).to(at::kLong);
}

} // namespace

TEST(Int8GemmRef, MatchesAnInt64MatmulOverEverySizeMix)
{
    std::uint64_t seed = 1;
    for (std::int64_t m : {1, 6, 7}) {
        for (std::int64_t k : {1, 3, 4, 5, 17, 64}) {
            for (std::int64_t n : {1, 16, 17, 65}) {
                SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(k) + " N " +
                             std::to_string(n));
                const at::Tensor w = at::randint(-128, 128, {n, k}, seeded(seed++), at::kChar);
                const Int8PackedWeight p = packInt8Weight(w.data_ptr<std::int8_t>(), n, k, k);
                const at::Tensor u = randomCodes(m, p.kPadded, seed++);
                const at::Tensor zx = at::randint(0, 256, {m}, seeded(seed++), at::kInt);
                at::Tensor acc = at::empty({m, n}, at::kInt);
                int8GemmRef({u.data_ptr<std::uint8_t>(), m, p.kPadded, zx.data_ptr<std::int32_t>(),
                             true},
                            p, acc.data_ptr<std::int32_t>());
                ASSERT_TRUE(at::equal(acc.to(at::kLong), int8Expected(u, k, zx.to(at::kLong), w)));
            }
        }
    }
}

class Int8GemmAtIsa : public AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(Int8GemmAtIsa);

TEST_P(Int8GemmAtIsa, EqualsTheReferenceExactlyAndTheEpilogueToARounding)
{
    SCOPED_TRACE(std::string("int8 GEMM row ") + int8GemmKernel().name);
    std::mt19937 rng(7);
    std::uint64_t seed = 100;
    for (std::int64_t m : kSizes) {
        for (std::int64_t k : {1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 128, 131}) {
            const std::int64_t n = kSizes[rng() % kSizes.size()];
            SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(k) + " N " +
                         std::to_string(n));
            const at::Tensor w = at::randint(-128, 128, {n, k}, seeded(seed++), at::kChar);
            const Int8PackedWeight p = packInt8Weight(w.data_ptr<std::int8_t>(), n, k, k);
            const at::Tensor u = randomCodes(m, p.kPadded + 4, seed++);
            const at::Tensor zx = at::randint(0, 256, {m}, seeded(seed++), at::kInt);
            for (bool perRow : {true, false}) {
                const Int8Activations x{u.data_ptr<std::uint8_t>(), m, p.kPadded + 4,
                                        zx.data_ptr<std::int32_t>(), perRow};
                at::Tensor got = at::empty({m, n}, at::kInt);
                at::Tensor want = at::empty({m, n}, at::kInt);
                int8Gemm(x, p, got.data_ptr<std::int32_t>());
                int8GemmRef(x, p, want.data_ptr<std::int32_t>());
                ASSERT_TRUE(at::equal(got, want)) << "per-row zero points " << perRow;

                const at::Tensor xs = at::rand({m}, seeded(seed++)) * 0.1 + 0.01;
                const at::Tensor ws = at::rand({n}, seeded(seed++)) * 0.1 + 0.01;
                const at::Tensor bias = at::randn({n}, seeded(seed++));
                const Int8Epilogue e{xs.data_ptr<float>(), perRow, ws.data_ptr<float>(),
                                     bias.data_ptr<float>()};
                at::Tensor yGot = at::empty({m, n});
                at::Tensor yWant = at::empty({m, n});
                int8GemmF32(x, p, e, yGot.data_ptr<float>());
                int8GemmRefF32(x, p, e, yWant.data_ptr<float>());
                // Same operations in the same order: at most a last-bit difference.
                ASSERT_TRUE(at::allclose(yGot, yWant, 1e-6, 1e-6))
                    << (yGot - yWant).abs().max().item<float>();
                // The residual (a skip connection) added last, read with its own stride.
                const at::Tensor residual = at::randn({m, n + 3}, seeded(seed++));
                Int8Epilogue er = e;
                er.residual = residual.data_ptr<float>();
                er.ldResidual = n + 3;
                at::Tensor rGot = at::empty({m, n});
                at::Tensor rWant = at::empty({m, n});
                int8GemmF32(x, p, er, rGot.data_ptr<float>());
                int8GemmRefF32(x, p, er, rWant.data_ptr<float>());
                ASSERT_TRUE(at::allclose(rGot, rWant, 1e-6, 1e-6));
                ASSERT_TRUE(at::allclose(rWant, yWant + residual.narrow(1, 0, n), 1e-6, 1e-6));
            }
        }
    }
}

TEST(Int8PackedWeight, RecordsTheLargestCodeMagnitude)
{
    // The AVX2 row's choice of tile rests on it: 64 is the last code vpmaddubsw is exact for.
    for (std::int8_t extreme : {std::int8_t{64}, std::int8_t{-64}, std::int8_t{65},
                                std::int8_t{-65}, std::int8_t{-128}, std::int8_t{0}}) {
        at::Tensor w = at::randint(-20, 21, {5, 9}, seeded(3), at::kChar);
        w[4][8] = extreme;
        const Int8PackedWeight p = packInt8Weight(w.data_ptr<std::int8_t>(), 5, 9, 9);
        EXPECT_EQ(p.maxAbsCode, std::max<std::int32_t>(20, std::abs(int{extreme})));
        EXPECT_EQ(int8UsesMaddubs(p), std::abs(int{extreme}) <= 64);
    }
    EXPECT_FALSE(int8UsesMaddubs(Int8PackedWeight{}));  // unpacked: the safe path
}

TEST_P(Int8GemmAtIsa, SevenBitWeightsEqualTheReference)
{
    // Weights in [-64, 64] (reduce-range) run the vpmaddubsw tile on the AVX2 row.
    SCOPED_TRACE(std::string("int8 GEMM row ") + int8GemmKernel().name);
    std::mt19937 rng(11);
    std::uint64_t seed = 500;
    for (std::int64_t m : kSizes) {
        for (std::int64_t k : {1, 4, 9, 16, 17, 64, 65, 131}) {
            const std::int64_t n = kSizes[rng() % kSizes.size()];
            SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(k) + " N " +
                         std::to_string(n));
            const at::Tensor w = at::randint(-64, 65, {n, k}, seeded(seed++), at::kChar);
            const Int8PackedWeight p = packInt8Weight(w.data_ptr<std::int8_t>(), n, k, k);
            ASSERT_TRUE(int8UsesMaddubs(p));
            const at::Tensor u = randomCodes(m, p.kPadded, seed++);
            const at::Tensor zx = at::randint(0, 256, {m}, seeded(seed++), at::kInt);
            const Int8Activations x{u.data_ptr<std::uint8_t>(), m, p.kPadded,
                                    zx.data_ptr<std::int32_t>(), true};
            at::Tensor got = at::empty({m, n}, at::kInt);
            at::Tensor want = at::empty({m, n}, at::kInt);
            int8Gemm(x, p, got.data_ptr<std::int32_t>());
            int8GemmRef(x, p, want.data_ptr<std::int32_t>());
            ASSERT_TRUE(at::equal(got, want));
            ASSERT_TRUE(at::equal(want.to(at::kLong), int8Expected(u, k, zx.to(at::kLong), w)));
            const at::Tensor xs = at::rand({m}, seeded(seed++)) * 0.1 + 0.01;
            const at::Tensor ws = at::rand({n}, seeded(seed++)) * 0.1 + 0.01;
            const Int8Epilogue e{xs.data_ptr<float>(), true, ws.data_ptr<float>(), nullptr};
            at::Tensor yGot = at::empty({m, n});
            at::Tensor yWant = at::empty({m, n});
            int8GemmF32(x, p, e, yGot.data_ptr<float>());
            int8GemmRefF32(x, p, e, yWant.data_ptr<float>());
            ASSERT_TRUE(at::allclose(yGot, yWant, 1e-6, 1e-6));
        }
    }
}

TEST_P(Int8GemmAtIsa, SevenBitExtremesDoNotSaturate)
{
    // The worst pairs for vpmaddubsw: 2 * 255 * 64 = 32640 and 2 * 255 * -64 = -32640, one
    // step from int16's limits; a 65 would clamp (2 * 255 * 65 = 33150), so it must not take
    // this tile (checked by the test above through maxAbsCode).
    SCOPED_TRACE(std::string("int8 GEMM row ") + int8GemmKernel().name);
    for (std::int8_t v : {std::int8_t{64}, std::int8_t{-64}}) {
        const std::int64_t k = 4096, m = 5, n = 19;
        const at::Tensor w = at::full({n, k}, v, at::kChar);
        const Int8PackedWeight p = packInt8Weight(w.data_ptr<std::int8_t>(), n, k, k);
        const at::Tensor u = at::full({m, p.kPadded}, 255, at::kByte);
        const std::int32_t zx = 0;
        at::Tensor got = at::empty({m, n}, at::kInt);
        int8Gemm({u.data_ptr<std::uint8_t>(), m, p.kPadded, &zx, false}, p,
                 got.data_ptr<std::int32_t>());
        EXPECT_TRUE(at::equal(got, at::full({m, n}, 255 * int{v} * k, at::kInt)));
    }
}

TEST_P(Int8GemmAtIsa, ExtremeCodesAtTheLargestKStayExact)
{
    SCOPED_TRACE(std::string("int8 GEMM row ") + int8GemmKernel().name);
    // Every product 255 * -128 over K = 65535: the int32 sum is -2,139,029,760, near -2^31.
    const std::int64_t k = kInt8MaxK, m = 2, n = 17;
    const at::Tensor w = at::full({n, k}, -128, at::kChar);
    const Int8PackedWeight p = packInt8Weight(w.data_ptr<std::int8_t>(), n, k, k);
    const at::Tensor u = at::full({m, p.kPadded}, 255, at::kByte);
    const std::int32_t zx = 0;
    at::Tensor got = at::empty({m, n}, at::kInt);
    int8Gemm({u.data_ptr<std::uint8_t>(), m, p.kPadded, &zx, false}, p,
             got.data_ptr<std::int32_t>());
    EXPECT_EQ(got[1][16].item<std::int64_t>(), 255LL * -128 * k);
    // With zero point 255 every term is 0.
    const std::int32_t zx255 = 255;
    int8Gemm({u.data_ptr<std::uint8_t>(), m, p.kPadded, &zx255, false}, p,
             got.data_ptr<std::int32_t>());
    EXPECT_EQ(got.abs().max().item<std::int64_t>(), 0);
}

class QuantizeRowsAtIsa : public AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(QuantizeRowsAtIsa);

TEST_P(QuantizeRowsAtIsa, MatchesQuantizeBitForBitIncludingTiesNanAndInf)
{
    std::uint64_t seed = 200;
    for (std::int64_t m : {1, 5}) {
        for (std::int64_t k : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100}) {
            at::Tensor x = at::randn({m, k}, seeded(seed++)) * 3.0;
            // Ties at scale 0.5: 0.25 -> 0.5 -> 0 and 0.75 -> 1.5 -> 2 (half to even).
            x[0][0] = 0.25f;
            if (k > 3) {
                x[0][1] = 0.75f;
                x[0][2] = std::numeric_limits<float>::quiet_NaN();
                x[0][3] = std::numeric_limits<float>::infinity();
            }
            for (const auto type : {quant::QuantType::UInt8, quant::QuantType::Int8}) {
                const bool perRow = m > 1;
                const auto g = perRow ? quant::Granularity::perToken()
                                      : quant::Granularity::perTensor();
                auto [lo, hi] = quant::blockMinMax(x.nan_to_num(0, 0, 0), g);
                quant::QParams qp = quant::chooseQParams(lo, hi, type, false, g);
                if (!perRow) {
                    qp.scale = at::full({}, 0.5f);
                    qp.zeroPoint = at::full({}, type == quant::QuantType::UInt8 ? 7 : -3, at::kLong);
                }
                const at::Tensor want = quant::quantize(x, qp).to(at::kInt);
                const at::Tensor inv = at::reciprocal(qp.scale.reshape({-1})).contiguous();
                const at::Tensor zp = qp.zeroPoint.reshape({-1}).to(at::kInt).contiguous();
                const auto& t = quant::traits(type);
                const std::int32_t shift = type == quant::QuantType::Int8 ? 128 : 0;
                const std::int64_t ldu = k + 3;
                for (bool fast : {false, true}) {
                    at::Tensor u = at::empty({m, ldu}, at::kByte);
                    (fast ? quantizeRowsU8 : quantizeRowsU8Ref)(
                        x.data_ptr<float>(), m, k, k, inv.data_ptr<float>(),
                        zp.data_ptr<std::int32_t>(), perRow, static_cast<std::int32_t>(t.qmin),
                        static_cast<std::int32_t>(t.qmax), shift, u.data_ptr<std::uint8_t>(), ldu);
                    const at::Tensor q = u.narrow(1, 0, k).to(at::kInt) - shift;
                    ASSERT_TRUE(at::equal(q, want)) << "K " << k << (fast ? " fast" : " ref");
                    // Padding holds the code of 0.
                    ASSERT_TRUE(at::equal(u.narrow(1, k, 3).to(at::kInt) - shift,
                                          zp.reshape({-1, 1}).expand({m, 3})));
                }
            }
        }
    }
}

namespace {

struct Nibble4Case {
    std::int64_t m, k, n, group;
    bool nf4;
    bool offsets;
};

/// Packs random codes; returns the packed weights and the dequantized float64 matrix [N, Kp].
std::pair<Nibble4PackedWeight, at::Tensor> randomNibble4(const Nibble4Case& c, std::uint64_t seed)
{
    const at::Tensor u = at::randint(0, 16, {c.n, c.k}, seeded(seed), at::kByte);
    const std::int64_t kPadded = (c.k + kNibbleChunk - 1) / kNibbleChunk * kNibbleChunk;
    const std::int64_t groups = (c.k + c.group - 1) / c.group;
    const at::Tensor s = at::rand({c.n, groups}, seeded(seed + 1)) * 0.2 + 0.01;
    const at::Tensor o = at::randn({c.n, groups}, seeded(seed + 2));
    const float* table = c.nf4 ? nf4Table() : uint4Table();
    const std::uint8_t pad = c.nf4 ? 7 : 0;
    Nibble4PackedWeight p =
        packNibble4Weight(u.data_ptr<std::uint8_t>(), c.n, c.k, c.k, c.group, s.data_ptr<float>(),
                          c.offsets ? o.data_ptr<float>() : nullptr, table, pad);
    // Dequantized by hand: table[u] * s + o per group; padding contributes nothing since x is 0.
    const at::Tensor values = at::from_blob(const_cast<float*>(table), {16}).to(at::kDouble);
    at::Tensor wq = at::zeros({c.n, kPadded}, at::kDouble);
    wq.narrow(1, 0, c.k).copy_(values.index_select(0, u.to(at::kLong).reshape({-1})).reshape(
        {c.n, c.k}));
    const at::Tensor index =
        at::arange(kPadded, at::kLong).div(c.group, "floor").clamp_max(groups - 1);
    wq = wq * s.to(at::kDouble).index_select(1, index);
    if (c.offsets)
        wq = wq + o.to(at::kDouble).index_select(1, index);
    return {std::move(p), wq};
}

} // namespace

TEST(Nibble4GemmRef, MatchesAFloat64MatmulOfTheDequantizedWeights)
{
    std::uint64_t seed = 300;
    for (const Nibble4Case c : {Nibble4Case{1, 32, 5, 32, false, true},
                                Nibble4Case{3, 100, 17, 64, false, true},
                                Nibble4Case{2, 200, 9, 96, true, false}}) {
        auto [p, wq] = randomNibble4(c, seed);
        at::Tensor x = at::zeros({c.m, p.kPadded});
        x.narrow(1, 0, c.k).normal_(0, 1, seeded(seed + 3));
        at::Tensor y = at::empty({c.m, c.n});
        nibble4GemmRef(x.data_ptr<float>(), c.m, p.kPadded, p, y.data_ptr<float>());
        const at::Tensor want = at::matmul(x.to(at::kDouble), wq.t()).to(at::kFloat);
        EXPECT_TRUE(at::allclose(y, want, 1e-6, 1e-6)) << (y - want).abs().max().item<float>();
        seed += 10;
    }
}

class Nibble4GemmAtIsa : public AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(Nibble4GemmAtIsa);

TEST_P(Nibble4GemmAtIsa, MatchesTheReferenceToFloatRounding)
{
    SCOPED_TRACE(std::string("4-bit GEMM row ") + nibble4GemmKernel().name);
    std::mt19937 rng(11);
    std::uint64_t seed = 400;
    for (std::int64_t k : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 131, 1023}) {
        for (std::int64_t group : {32, 64, 128}) {
            for (bool nf4 : {false, true}) {
                const Nibble4Case c{static_cast<std::int64_t>(rng() % 11) + 1, k,
                                    kSizes[rng() % kSizes.size()], group, nf4, !nf4};
                SCOPED_TRACE("M " + std::to_string(c.m) + " K " + std::to_string(k) + " N " +
                             std::to_string(c.n) + " group " + std::to_string(group) +
                             (nf4 ? " nf4" : " int4"));
                auto [p, wq] = randomNibble4(c, seed);
                seed += 10;
                at::Tensor x = at::zeros({c.m, p.kPadded + 5});
                x.narrow(1, 0, k).normal_(0, 1, seeded(seed));
                at::Tensor got = at::empty({c.m, c.n});
                at::Tensor want = at::empty({c.m, c.n});
                nibble4Gemm(x.data_ptr<float>(), c.m, p.kPadded + 5, p, got.data_ptr<float>());
                nibble4GemmRef(x.data_ptr<float>(), c.m, p.kPadded + 5, p, want.data_ptr<float>());
                // float32 sums of K terms: within K * 2^-24 of the sum of magnitudes.
                const at::Tensor magnitude = at::matmul(x.abs().narrow(1, 0, p.kPadded).to(at::kDouble),
                                                        wq.abs().t());
                const at::Tensor bound = magnitude * (static_cast<double>(p.kPadded) * 6e-8) + 1e-6;
                ASSERT_TRUE(((got - want).abs().to(at::kDouble) <= bound).all().item<bool>())
                    << (got - want).abs().max().item<float>();
            }
        }
    }
}

TEST(Nibble4Pack, RejectsGroupsThatAreNotWholeChunks)
{
    const std::uint8_t u[64] = {};
    const float s[4] = {1, 1, 1, 1};
    EXPECT_THROW(packNibble4Weight(u, 1, 64, 64, 16, s, nullptr, uint4Table(), 0),
                 std::invalid_argument);
    EXPECT_THROW(packNibble4Weight(u, 1, 64, 64, 48, s, nullptr, uint4Table(), 0),
                 std::invalid_argument);
    EXPECT_NO_THROW(packNibble4Weight(u, 1, 64, 64, 32, s, nullptr, uint4Table(), 0));
}

TEST(Nibble4Pack, PutsElementDPlus16SInNibbleSOfWordD)
{
    std::uint8_t u[128] = {};
    u[0] = 3;
    u[16] = 9;   // word 0, nibble 1: byte 0, high
    u[37] = 12;  // 37 = 5 + 16 * 2: word 5, nibble 2: byte 21, low
    u[127] = 7;  // 127 = 15 + 16 * 7: word 15, nibble 7: byte 63, high
    const float s[1] = {1};
    const Nibble4PackedWeight p =
        packNibble4Weight(u, 1, 128, 128, 128, s, nullptr, uint4Table(), 0);
    EXPECT_EQ(p.data[0], 0x93);
    EXPECT_EQ(p.data[21], 0x0C);
    EXPECT_EQ(p.data[63], 0x70);
    EXPECT_EQ(p.kPadded, 128);
    // K = 33 pads to one chunk of 128, with ceil(33 / 32) = 2 scale groups.
    const float s2[2] = {1, 2};
    const Nibble4PackedWeight q =
        packNibble4Weight(u, 1, 33, 128, 32, s2, nullptr, uint4Table(), 0);
    EXPECT_EQ(q.kPadded, 128);
    EXPECT_EQ(q.groups, 2);
}

// --- int4 GEMV on VNNI with int8 activations per group ------------------------------------------

namespace {

struct VnniCase {
    at::Tensor u, s, o;  // codes [N, K], scales / offsets [N, G]
    Nibble4VnniPackedWeight packed;
    Nibble4PackedWeight floatPacked;  // the same weights for the float-activation kernel
};

VnniCase randomVnni(std::int64_t n, std::int64_t k, std::int64_t group, bool offsets,
                    std::uint64_t seed)
{
    VnniCase c;
    c.u = at::randint(0, 16, {n, k}, seeded(seed), at::kByte);
    const std::int64_t groups = (k + group - 1) / group;
    c.s = at::rand({n, groups}, seeded(seed + 1)) * 0.2 + 0.01;
    c.o = at::randn({n, groups}, seeded(seed + 2));
    const float* o = offsets ? c.o.data_ptr<float>() : nullptr;
    c.packed = packNibble4Vnni(c.u.data_ptr<std::uint8_t>(), n, k, k, group,
                               c.s.data_ptr<float>(), o);
    c.floatPacked = packNibble4Weight(c.u.data_ptr<std::uint8_t>(), n, k, k, group,
                                      c.s.data_ptr<float>(), o, uint4Table(), 0);
    return c;
}

} // namespace

class QuantizeGroupsAtIsa : public AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(QuantizeGroupsAtIsa);

TEST_P(QuantizeGroupsAtIsa, RoundsEachGroupToItsOwnScaleAndTheFastPathIsBitIdentical)
{
    std::uint64_t seed = 700;
    for (std::int64_t k : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65, 100, 127, 257}) {
        for (std::int64_t group : {32, 64}) {
            SCOPED_TRACE("K " + std::to_string(k) + " group " + std::to_string(group));
            at::Tensor x = at::randn({k}, seeded(seed++)) * 3;
            if (k > 40)
                x.narrow(0, 32, 8).zero_();  // zeros inside a group
            if (k >= 64 && group == 32)
                x.narrow(0, 32, 32).zero_();  // a whole group of zeros: d = 0, q = 0
            const std::int64_t kPadded = (k + 31) / 32 * 32, groups = (k + group - 1) / group;
            std::vector<std::int8_t> q1(kPadded, 99), q2(kPadded, 99);
            std::vector<float> d1(groups), d2(groups), s1(groups), s2(groups);
            quantizeGroupsQ8Ref(x.data_ptr<float>(), k, kPadded, group, q1.data(), d1.data(),
                                s1.data());
            quantizeGroupsQ8(x.data_ptr<float>(), k, kPadded, group, q2.data(), d2.data(),
                             s2.data());
            ASSERT_EQ(q1, q2);
            ASSERT_EQ(0, std::memcmp(d1.data(), d2.data(), groups * sizeof(float)));
            ASSERT_EQ(0, std::memcmp(s1.data(), s2.data(), groups * sizeof(float)));
            for (std::int64_t j = 0; j < kPadded; ++j) {
                if (j >= k) {
                    ASSERT_EQ(q1[j], 0);
                    continue;
                }
                const float d = d1[static_cast<std::size_t>(j / group)];
                const float xj = x[j].item<float>();
                // Half a step of the group's grid (plus float rounding of x * inv).
                ASSERT_LE(std::fabs(xj - d * q1[j]), d * 0.5f * (1 + 1e-5f) + 1e-30f) << j;
                ASSERT_LE(std::abs(q1[j]), 127);
            }
        }
    }
    // A NaN or inf in a group: that group's d is NaN, the others are untouched.
    std::vector<float> x(64, 1.0f);
    x[40] = std::numeric_limits<float>::infinity();
    std::vector<std::int8_t> q(64);
    float d[2], s[2];
    quantizeGroupsQ8(x.data(), 64, 64, 32, q.data(), d, s);
    EXPECT_FLOAT_EQ(d[0], 1.0f / 127.0f);
    EXPECT_EQ(q[0], 127);
    EXPECT_TRUE(std::isnan(d[1]));
}

TEST(Nibble4VnniPack, PutsElement8JPlusTLowAnd8JPlus4PlusTHigh)
{
    std::vector<std::uint8_t> u(17 * 40, 0);
    u[0 * 40 + 0] = 3;    // row 0, k 0: chunk 0, byte 0, low
    u[0 * 40 + 5] = 9;    // row 0, k 5 = 4 + 1: chunk 0, byte 1, high
    u[2 * 40 + 11] = 12;  // row 2, k 11 = 8 + 3: chunk 1, byte 64 + 8 + 3, low
    u[16 * 40 + 39] = 7;  // row 16 (panel 1), k 39 = 32 + 4 + 3: chunk 4, byte 3, high
    std::vector<float> s(17 * 2, 1.0f);
    s[16 * 2 + 1] = 5.0f;
    const Nibble4VnniPackedWeight p =
        packNibble4Vnni(u.data(), 17, 40, 40, 32, s.data(), nullptr);
    EXPECT_EQ(p.kPadded, 64);
    EXPECT_EQ(p.groups, 2);
    EXPECT_EQ(p.data[0], 0x03);
    EXPECT_EQ(p.data[1], 0x90);
    EXPECT_EQ(p.data[64 + 11], 0x0C);
    const std::size_t panelBytes = 64 / 8 * 64;
    EXPECT_EQ(p.data[panelBytes + 4 * 64 + 3], 0x70);
    EXPECT_EQ(p.scale[(1 * 2 + 1) * 16 + 0], 5.0f);  // panel 1, group 1, lane 0
    EXPECT_EQ(p.scale[(1 * 2 + 1) * 16 + 1], 0.0f);  // beyond N
    EXPECT_EQ(p.offset.size(), 0u);
    EXPECT_THROW(packNibble4Vnni(u.data(), 1, 40, 40, 48, s.data(), nullptr),
                 std::invalid_argument);
    // A group whose int32 sums could overflow is refused before anything is allocated.
    EXPECT_THROW(packNibble4Vnni(u.data(), 1, 40, 40, kNibbleVnniMaxGroup + 32, s.data(), nullptr),
                 std::invalid_argument);
}

TEST(Nibble4GemvVnniRef, StaysWithinTheDocumentedBoundOfTheFloatActivationResult)
{
    std::uint64_t seed = 800;
    for (std::int64_t k : {1, 33, 100, 256, 1000}) {
        for (std::int64_t group : {32, 128}) {
            for (bool offsets : {false, true}) {
                SCOPED_TRACE("K " + std::to_string(k) + " group " + std::to_string(group) +
                             (offsets ? " offsets" : ""));
                const std::int64_t m = 2, n = 19;
                VnniCase c = randomVnni(n, k, group, offsets, seed);
                seed += 10;
                const std::int64_t ld = c.floatPacked.kPadded;
                at::Tensor x = at::zeros({m, ld});
                x.narrow(1, 0, k).normal_(0, 1, seeded(seed++));
                at::Tensor got = at::empty({m, n}), exact = at::empty({m, n});
                nibble4GemvVnniRef(x.data_ptr<float>(), m, ld, c.packed, got.data_ptr<float>());
                nibble4GemmRef(x.data_ptr<float>(), m, ld, c.floatPacked, exact.data_ptr<float>());
                // bound[m, n] = sum_g |s| d_g / 2 sum_{k in g} u  + float rounding slack.
                const std::int64_t groups = c.packed.groups;
                const at::Tensor xa = x.narrow(1, 0, k).abs();
                at::Tensor amax = at::zeros({m, groups}, at::kDouble);
                at::Tensor usum = at::zeros({n, groups}, at::kDouble);
                for (std::int64_t g = 0; g < groups; ++g) {
                    const std::int64_t b = g * group, len = std::min(k, b + group) - b;
                    amax.select(1, g).copy_(xa.narrow(1, b, len).amax(1));
                    usum.select(1, g).copy_(c.u.narrow(1, b, len).to(at::kDouble).sum(1));
                }
                const at::Tensor bound =
                    at::matmul(amax / 127.0 / 2.0, (c.s.to(at::kDouble).abs() * usum).t());
                const at::Tensor index = at::arange(k, at::kLong).div(group, "floor");
                at::Tensor wabs = c.u.to(at::kDouble) * c.s.to(at::kDouble).index_select(1, index);
                if (offsets)
                    wabs = wabs + c.o.to(at::kDouble).abs().index_select(1, index);
                const at::Tensor magnitude = at::matmul(xa.to(at::kDouble), wabs.t());
                const at::Tensor slack = bound * 1e-3 + magnitude * 1e-5 + 1e-6;
                const at::Tensor err = (got.to(at::kDouble) - exact.to(at::kDouble)).abs();
                ASSERT_TRUE((err <= bound + slack).all().item<bool>())
                    << (err - bound).max().item<double>();
                // And the check is not vacuous: the rounding errors, which the worst-case
                // bound adds up coherently, reach a few percent of it (random signs: ~1/sqrt K).
                if (k >= 256)
                    EXPECT_GT((err / (bound + 1e-30)).max().item<double>(), 0.01);
            }
        }
    }
}

class Nibble4GemvQ8AtIsa : public AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(Nibble4GemvQ8AtIsa);

TEST_P(Nibble4GemvQ8AtIsa, EqualsTheReferenceBitForBit)
{
    SCOPED_TRACE(std::string("4-bit x int8 GEMV row ") + nibble4GemvQ8Kernel().name);
    std::mt19937 rng(21);
    std::uint64_t seed = 900;
    for (std::int64_t k : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 131, 1023}) {
        for (std::int64_t group : {32, 64, 128}) {
            for (bool offsets : {false, true}) {
                const std::int64_t m = static_cast<std::int64_t>(rng() % 4) + 1;
                const std::int64_t n = kSizes[rng() % kSizes.size()];
                SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(k) + " N " +
                             std::to_string(n) + " group " + std::to_string(group));
                VnniCase c = randomVnni(n, k, group, offsets, seed);
                seed += 10;
                at::Tensor x = at::randn({m, k + 3}, seeded(seed++));
                at::Tensor got = at::empty({m, n}), want = at::empty({m, n});
                nibble4GemvQ8(x.data_ptr<float>(), m, k + 3, c.packed, got.data_ptr<float>());
                nibble4GemvVnniRef(x.data_ptr<float>(), m, k + 3, c.packed,
                                   want.data_ptr<float>());
                ASSERT_TRUE(at::equal(got, want)) << (got - want).abs().max().item<float>();
            }
        }
    }
    // A NaN in x makes that row NaN and leaves the other rows alone.
    VnniCase c = randomVnni(20, 64, 32, true, 1);
    at::Tensor x = at::randn({2, 64}, seeded(2));
    x[1][40] = std::numeric_limits<float>::quiet_NaN();
    at::Tensor y = at::empty({2, 20});
    nibble4GemvQ8(x.data_ptr<float>(), 2, 64, c.packed, y.data_ptr<float>());
    EXPECT_TRUE(y[0].isfinite().all().item<bool>());
    EXPECT_TRUE(y[1].isnan().all().item<bool>());
}

class MinMaxAtIsa : public AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(MinMaxAtIsa);

TEST_P(MinMaxAtIsa, MatchesAminmaxOverSizesAroundTheVectorWidthAndThreadSplits)
{
    std::uint64_t seed = 1000;
    for (std::int64_t count : {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 16383, 16384, 16385, 100001,
                               300000}) {
        SCOPED_TRACE("count " + std::to_string(count));
        const at::Tensor x = at::randn({count}, seeded(seed++)) * 5 + 1;
        float lo = 0, hi = 0, loRef = 0, hiRef = 0;
        minMaxF32(x.data_ptr<float>(), count, &lo, &hi);
        minMaxF32Ref(x.data_ptr<float>(), count, &loRef, &hiRef);
        EXPECT_EQ(lo, loRef);
        EXPECT_EQ(hi, hiRef);
        if (count == 0) {
            EXPECT_EQ(lo, std::numeric_limits<float>::infinity());
            continue;
        }
        const auto [a, b] = at::aminmax(x);
        EXPECT_EQ(lo, a.item<float>());
        EXPECT_EQ(hi, b.item<float>());
    }
    // NaN anywhere (here in the second thread's half and in a tail) gives NaN, like aminmax.
    for (std::int64_t where : {5, 200000, 299999}) {
        at::Tensor x = at::randn({300000}, seeded(seed++));
        x[where] = std::numeric_limits<float>::quiet_NaN();
        float lo = 0, hi = 0;
        minMaxF32(x.data_ptr<float>(), 300000, &lo, &hi);
        EXPECT_TRUE(std::isnan(lo) && std::isnan(hi)) << where;
        minMaxF32Ref(x.data_ptr<float>(), 300000, &lo, &hi);
        EXPECT_TRUE(std::isnan(lo) && std::isnan(hi)) << where;
    }
}

// --- the ISA levels themselves -----------------------------------------------------------------

class DispatchAtIsa : public AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(DispatchAtIsa);

TEST_P(DispatchAtIsa, EveryRowNeedsNoMoreThanTheLevelInForceAndTheFeaturesFollowIt)
{
    const IsaLevel level = GetParam();
    EXPECT_EQ(isaLevel(), level);
    for (const KernelRow row : {int8GemmKernel(), nibble4GemmKernel(), nibble4GemvQ8Kernel()}) {
        EXPECT_LE(static_cast<int>(row.level), static_cast<int>(level)) << row.name;
        EXPECT_EQ(row.isReference(), row.level == IsaLevel::Scalar);
    }
    const CpuFeatures f = cpuFeatures(), hw = hardwareFeatures();
    EXPECT_EQ(f.avx512, level >= IsaLevel::Avx512 && hw.avx512);
    EXPECT_EQ(f.avx512Vnni, level >= IsaLevel::Avx512 && hw.avx512Vnni);
    EXPECT_EQ(f.avxVnni, level >= IsaLevel::AvxVnni && hw.avxVnni);
    EXPECT_EQ(f.avx2, level >= IsaLevel::Avx2 && hw.avx2);
    // The hardware's own rows are taken at its own level: an AVX512-VNNI machine runs its VNNI
    // GEMM, never the scalar twin, unless the level is lowered.
    if (level == IsaLevel::Avx512 && hw.avx512Vnni) {
        EXPECT_STREQ(int8GemmKernel().name, "avx512-vnni");
        EXPECT_STREQ(nibble4GemvQ8Kernel().name, "avx512-vnni");
    }
    if (level == IsaLevel::Avx512 && hw.avx512)
        EXPECT_STREQ(nibble4GemmKernel().name, "avx512");
    // An AVX-512 CPU without VNNI (Skylake-X) runs the int8 kernels on the 256-bit rows.
    if (level == IsaLevel::Avx512 && hw.avx512 && !hw.avx512Vnni) {
        EXPECT_STREQ(int8GemmKernel().name, hw.avxVnni ? "avx-vnni" : "avx2");
        EXPECT_STREQ(nibble4GemvQ8Kernel().name, hw.avxVnni ? "avx-vnni" : "avx2");
    }
    // The AVX2 rows are what an AVX2 desktop runs: proven to be taken (and so tested above)
    // when the level is lowered to avx2 on any AVX2 machine, this one included.
    if (level == IsaLevel::Avx2 && hw.avx2) {
        EXPECT_STREQ(int8GemmKernel().name, "avx2");
        EXPECT_STREQ(nibble4GemmKernel().name, "avx2");
        EXPECT_STREQ(nibble4GemvQ8Kernel().name, "avx2");
    }
    if (level == IsaLevel::AvxVnni && hw.avxVnni) {
        EXPECT_STREQ(int8GemmKernel().name, "avx-vnni");
        EXPECT_STREQ(nibble4GemmKernel().name, "avx2");
        EXPECT_STREQ(nibble4GemvQ8Kernel().name, "avx-vnni");
    }
    if (level == IsaLevel::Scalar) {
        EXPECT_STREQ(int8GemmKernel().name, "scalar");
        EXPECT_STREQ(nibble4GemmKernel().name, "scalar");
        EXPECT_STREQ(nibble4GemvQ8Kernel().name, "scalar");
    }
}

TEST(IsaLevels, NamesParseBackAndTheListRisesToTheHardware)
{
    const std::vector<IsaLevel> levels = supportedIsaLevels();
    ASSERT_FALSE(levels.empty());
    EXPECT_EQ(levels.front(), IsaLevel::Scalar);
    EXPECT_EQ(levels.back(), hardwareIsaLevel());
    for (std::size_t i = 1; i < levels.size(); ++i)
        EXPECT_LT(static_cast<int>(levels[i - 1]), static_cast<int>(levels[i]));
    for (IsaLevel l : {IsaLevel::Scalar, IsaLevel::Avx2, IsaLevel::AvxVnni, IsaLevel::Avx512})
        EXPECT_EQ(parseIsaLevel(isaName(l)), l);
    EXPECT_EQ(parseIsaLevel("AVX2"), IsaLevel::Avx2);
    EXPECT_EQ(parseIsaLevel("avxvnni"), IsaLevel::AvxVnni);
    EXPECT_FALSE(parseIsaLevel("sse9").has_value());
    // A level above the hardware is capped at it.
    {
        ScopedIsaLevel top(IsaLevel::Avx512);
        EXPECT_EQ(isaLevel(), hardwareIsaLevel());
    }
    // cpuid's flags agree with the composite features.
    bool avx2 = false, avx512f = false;
    for (const CpuFlag& flag : cpuFlags()) {
        if (std::string(flag.name) == "avx2")
            avx2 = flag.present;
        if (std::string(flag.name) == "avx512f")
            avx512f = flag.present;
    }
    if (hardwareFeatures().avx512)
        EXPECT_TRUE(avx512f);
    if (hardwareFeatures().avx2)
        EXPECT_TRUE(avx2);
}

// --- 16-bit float weight-only GEMM ---------------------------------------------------------------

TEST(Float16Widen, EveryBitPatternMatchesLibTorch)
{
    at::Tensor bits = at::arange(65536, at::kInt).to(at::kShort);  // wraps to the 16-bit patterns
    const at::Tensor half = at::empty({65536}, at::kHalf);
    const at::Tensor brain = at::empty({65536}, at::kBFloat16);
    std::memcpy(half.data_ptr(), bits.data_ptr(), 2 * 65536);
    std::memcpy(brain.data_ptr(), bits.data_ptr(), 2 * 65536);
    const at::Tensor wantHalf = half.to(at::kFloat), wantBrain = brain.to(at::kFloat);
    const auto* u = static_cast<const std::uint16_t*>(bits.data_ptr());
    for (int i = 0; i < 65536; ++i) {
        const float h = fp16BitsToFloat(u[i]), b = bf16BitsToFloat(u[i]);
        const float wh = wantHalf.data_ptr<float>()[i], wb = wantBrain.data_ptr<float>()[i];
        ASSERT_TRUE(std::isnan(wh) ? std::isnan(h) : std::memcmp(&h, &wh, 4) == 0)
            << "fp16 0x" << std::hex << u[i] << ": " << h << " vs " << wh;
        ASSERT_TRUE(std::isnan(wb) ? std::isnan(b) : std::memcmp(&b, &wb, 4) == 0)
            << "bf16 0x" << std::hex << u[i];
    }
}

namespace {

/// Random weights [N, ldw] of `kind` (elements past K are NaN: the kernels must not read them).
at::Tensor randomFloat16(std::int64_t n, std::int64_t k, std::int64_t ldw, Float16Kind kind,
                         std::uint64_t seed)
{
    const at::ScalarType type = kind == Float16Kind::Fp16 ? at::kHalf : at::kBFloat16;
    at::Tensor w = at::full({n, ldw}, std::numeric_limits<float>::quiet_NaN()).to(type);
    w.narrow(1, 0, k).copy_(at::randn({n, k}, seeded(seed)).to(type));
    return w;
}

Float16Weight viewOf(const at::Tensor& w, std::int64_t k, Float16Kind kind)
{
    return {static_cast<const std::uint16_t*>(w.data_ptr()), w.size(0), k, w.size(1), kind};
}

} // namespace

TEST(Float16GemmRef, MatchesAFloat64MatmulOfTheWidenedWeights)
{
    std::uint64_t seed = 700;
    for (Float16Kind kind : {Float16Kind::Fp16, Float16Kind::Bf16})
        for (std::int64_t k : {1, 17, 300}) {
            const std::int64_t m = 3, n = 5;
            const at::Tensor w = randomFloat16(n, k, k + 3, kind, seed++);
            const at::Tensor x = at::randn({m, k}, seeded(seed++));
            const at::Tensor bias = at::randn({n}, seeded(seed++));
            at::Tensor y = at::empty({m, n});
            float16GemmRef(x.data_ptr<float>(), m, k, viewOf(w, k, kind), bias.data_ptr<float>(),
                           y.data_ptr<float>());
            const at::Tensor want =
                at::matmul(x.to(at::kDouble), w.narrow(1, 0, k).to(at::kDouble).t()) +
                bias.to(at::kDouble);
            EXPECT_TRUE(at::allclose(y.to(at::kDouble), want, 1e-5, 1e-5))
                << (y - want).abs().max().item<double>();
        }
}

class Float16GemmAtIsa : public AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(Float16GemmAtIsa);

TEST_P(Float16GemmAtIsa, MatchesTheReferenceToFloatRounding)
{
    SCOPED_TRACE(std::string("16-bit GEMM row ") + float16GemmKernel().name);
    std::mt19937 rng(23);
    std::uint64_t seed = 800;
    for (std::int64_t k : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 127, 1023}) {
        for (Float16Kind kind : {Float16Kind::Fp16, Float16Kind::Bf16}) {
            const std::int64_t m = static_cast<std::int64_t>(rng() % 9) + 1;
            const std::int64_t n = kSizes[rng() % kSizes.size()];
            const bool withBias = rng() % 2 == 0;
            SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(k) + " N " +
                         std::to_string(n) + (kind == Float16Kind::Fp16 ? " fp16" : " bf16") +
                         (withBias ? " bias" : ""));
            const at::Tensor w = randomFloat16(n, k, k + 5, kind, seed++);
            // x rows are longer than K and the extra elements are NaN: never read.
            at::Tensor x = at::full({m, k + 3}, std::numeric_limits<float>::quiet_NaN());
            x.narrow(1, 0, k).normal_(0, 1, seeded(seed++));
            const at::Tensor bias = at::randn({n}, seeded(seed++));
            at::Tensor got = at::empty({m, n}), want = at::empty({m, n});
            const Float16Weight view = viewOf(w, k, kind);
            const float* b = withBias ? bias.data_ptr<float>() : nullptr;
            float16Gemm(x.data_ptr<float>(), m, k + 3, view, b, got.data_ptr<float>());
            float16GemmRef(x.data_ptr<float>(), m, k + 3, view, b, want.data_ptr<float>());
            // float32 sums of K terms in another order: within K * 2^-24 of the magnitudes.
            const at::Tensor magnitude =
                at::matmul(x.narrow(1, 0, k).abs().to(at::kDouble),
                           w.narrow(1, 0, k).to(at::kDouble).abs().t());
            const at::Tensor bound = magnitude * (static_cast<double>(k) * 6e-8) + 1e-6;
            ASSERT_TRUE(((got - want).abs().to(at::kDouble) <= bound).all().item<bool>())
                << (got - want).abs().max().item<float>();
        }
    }
}

TEST_P(Float16GemmAtIsa, NamesTheRowOfTheLevelInForce)
{
    const std::string name = float16GemmKernel().name;
    switch (GetParam()) {
    case IsaLevel::Scalar: EXPECT_EQ(name, "scalar"); break;
    case IsaLevel::Avx2:
    case IsaLevel::AvxVnni: EXPECT_EQ(name, "avx2"); break;
    case IsaLevel::Avx512: EXPECT_EQ(name, "avx512"); break;
    }
}

namespace {

/// Random weights [N, ldw] (elements past K are NaN: the kernels must not read them).
at::Tensor randomFloat32(std::int64_t n, std::int64_t k, std::int64_t ldw, std::uint64_t seed)
{
    at::Tensor w = at::full({n, ldw}, std::numeric_limits<float>::quiet_NaN());
    w.narrow(1, 0, k).copy_(at::randn({n, k}, seeded(seed)));
    return w;
}

} // namespace

TEST(Float32GemmRef, MatchesAFloat64Matmul)
{
    std::uint64_t seed = 900;
    for (std::int64_t k : {1, 17, 300}) {
        const std::int64_t m = 3, n = 5;
        const at::Tensor w = randomFloat32(n, k, k + 3, seed++);
        const at::Tensor x = at::randn({m, k}, seeded(seed++));
        const at::Tensor bias = at::randn({n}, seeded(seed++));
        at::Tensor y = at::empty({m, n});
        float32GemmRef(x.data_ptr<float>(), m, k, {w.data_ptr<float>(), n, k, k + 3},
                       bias.data_ptr<float>(), y.data_ptr<float>());
        const at::Tensor want =
            at::matmul(x.to(at::kDouble), w.narrow(1, 0, k).to(at::kDouble).t()) +
            bias.to(at::kDouble);
        EXPECT_TRUE(at::allclose(y.to(at::kDouble), want, 1e-5, 1e-5))
            << (y - want).abs().max().item<double>();
    }
}

class Float32GemmAtIsa : public AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(Float32GemmAtIsa);

TEST_P(Float32GemmAtIsa, MatchesTheReferenceToFloatRounding)
{
    SCOPED_TRACE(std::string("float32 GEMV row ") + float32GemmKernel().name);
    std::mt19937 rng(29);
    std::uint64_t seed = 1000;
    for (std::int64_t k : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 127, 1023}) {
        const std::int64_t m = static_cast<std::int64_t>(rng() % 9) + 1;
        const std::int64_t n = kSizes[rng() % kSizes.size()];
        const bool withBias = rng() % 2 == 0;
        SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(k) + " N " +
                     std::to_string(n) + (withBias ? " bias" : ""));
        const at::Tensor w = randomFloat32(n, k, k + 5, seed++);
        // x rows are longer than K and the extra elements are NaN: never read.
        at::Tensor x = at::full({m, k + 3}, std::numeric_limits<float>::quiet_NaN());
        x.narrow(1, 0, k).normal_(0, 1, seeded(seed++));
        const at::Tensor bias = at::randn({n}, seeded(seed++));
        at::Tensor got = at::empty({m, n}), want = at::empty({m, n});
        const Float32Weight view{w.data_ptr<float>(), n, k, k + 5};
        const float* b = withBias ? bias.data_ptr<float>() : nullptr;
        float32Gemm(x.data_ptr<float>(), m, k + 3, view, b, got.data_ptr<float>());
        float32GemmRef(x.data_ptr<float>(), m, k + 3, view, b, want.data_ptr<float>());
        // float32 sums of K terms in another order: within K * 2^-24 of the magnitudes.
        const at::Tensor magnitude = at::matmul(x.narrow(1, 0, k).abs().to(at::kDouble),
                                                w.narrow(1, 0, k).to(at::kDouble).abs().t());
        const at::Tensor bound = magnitude * (static_cast<double>(k) * 6e-8) + 1e-6;
        ASSERT_TRUE(((got - want).abs().to(at::kDouble) <= bound).all().item<bool>())
            << (got - want).abs().max().item<float>();
    }
}

TEST_P(Float32GemmAtIsa, NamesTheRowOfTheLevelInForce)
{
    const std::string name = float32GemmKernel().name;
    switch (GetParam()) {
    case IsaLevel::Scalar: EXPECT_EQ(name, "scalar"); break;
    case IsaLevel::Avx2:
    case IsaLevel::AvxVnni: EXPECT_EQ(name, "avx2"); break;
    case IsaLevel::Avx512: EXPECT_EQ(name, "avx512"); break;
    }
}
