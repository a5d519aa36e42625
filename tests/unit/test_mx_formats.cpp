// The accelerators' block formats (OCP MX: mxfp4, mxfp6 e2m3 / e3m2, mxfp8 e4m3 / e5m2, mxint8;
// NVIDIA's NVFP4) bit for bit against torchao 0.18's reference code (tests/data/mx/
// torchao_mx_reference.py: to_mx / to_dtype, NVFP4Tensor with a per-tensor scale) over 2^21
// values per type and scale mode, edge cases included (all-zero blocks, amax a power of two,
// saturation between 6 and 8 in FLOOR mode, subnormals); and MXINT8 (which torchao lacks)
// against the OCP MX v1.0 rule written out in doubles.

#include "io/dataset.h"
#include "python_oracle.h"
#include "quant_property_data.h"
#include "quant/quant_type.h"
#include "temp_dir.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace bitlens;
using namespace bitlens::quant;

namespace {

std::map<std::string, at::Tensor>& reference()
{
    static std::map<std::string, at::Tensor> arrays;
    static bool tried = false;
    if (tried)
        return arrays;
    tried = true;
    const std::string python = test::venvPython();
    if (python.empty())
        return arrays;
    static test::TempDir dir;
    std::ifstream in(std::string(BITLENS_TEST_DATA) + "/mx/torchao_mx_reference.py");
    std::stringstream code;
    code << in.rdbuf();
    std::string output;
    const int status = test::runPython(python, dir.path(), code.str(),
                                       "'" + dir.path() + "/ref.npz'", output);
    EXPECT_EQ(status, 0) << output;
    if (status != 0)
        return arrays;
    auto read = io::readNpz(dir.path() + "/ref.npz");
    EXPECT_TRUE(read.ok()) << (read.ok() ? "" : read.error().userMessage());
    if (read.ok())
        arrays = std::move(*read);
    return arrays;
}

QParams blockQParams(const at::Tensor& x, QuantType type, MxScaleMode mode)
{
    const Granularity g = Granularity::perGroup(1, traits(type).blockSize);
    auto [lo, hi] = blockMinMax(x, g);
    return chooseQParams(lo, hi, type, true, g, CodeRange::Full, mode);
}

/// Elements whose bit patterns differ.
std::int64_t differing(const at::Tensor& a, const at::Tensor& b)
{
    EXPECT_EQ(a.sizes(), b.sizes());
    if (a.sizes() != b.sizes())
        return -1;
    const auto bits = [](const at::Tensor& t) {
        const at::Tensor c = t.contiguous();
        return c.element_size() == 4 ? c.view(at::kInt).to(at::kLong)
                                     : c.view(at::kByte).to(at::kLong);
    };
    return at::ne(bits(a), bits(b)).sum().item<std::int64_t>();
}

/// The code bytes of `codes` as torchao writes them: one bit pattern per byte.
at::Tensor codeBytes(const at::Tensor& codes) { return codes.contiguous().view(at::kByte); }

struct Case {
    QuantType type;
    const char* key;
};

} // namespace

TEST(MxFormats, TraitsAndBitsPerElement)
{
    const std::pair<QuantType, double> expected[] = {
        {QuantType::MXFP4, 4.25},     {QuantType::MXFP6E2M3, 6.25}, {QuantType::MXFP6E3M2, 6.25},
        {QuantType::MXFP8E4M3, 8.25}, {QuantType::MXFP8E5M2, 8.25}, {QuantType::MXINT8, 8.25},
        {QuantType::NVFP4, 4.5},
    };
    for (const auto& [type, bpw] : expected) {
        const QuantTypeTraits& t = traits(type);
        EXPECT_TRUE(isBlockFormat(t)) << t.name;
        const at::Tensor w = at::randn({64, 4096});
        const QParams q = blockQParams(w, type, MxScaleMode::Floor);
        // NVFP4's float32 tensor scale is 4 bytes on top of its 1 byte per 16 elements.
        const double bytes = static_cast<double>(quantizedBytes(w.numel(), q)) -
                             (t.blockScale == BlockScale::E4M3 ? 4.0 : 0.0);
        EXPECT_DOUBLE_EQ(8.0 * bytes / static_cast<double>(w.numel()), bpw) << t.name;
        EXPECT_EQ(quantTypeFromName(t.name), type);
    }
    EXPECT_FALSE(isBlockFormat(traits(QuantType::FP4E2M1)));
    // A block format needs its own block size along the last dimension.
    const at::Tensor w = at::randn({4, 64});
    auto [lo, hi] = blockMinMax(w, Granularity::perGroup(1, 64));
    EXPECT_THROW(chooseQParams(lo, hi, QuantType::MXFP4, true, Granularity::perGroup(1, 64)),
                 c10::Error);
}

TEST(MxFormats, BitForBitTorchao)
{
    BITLENS_PYTHON_OR_SKIP(python);
    auto& ref = reference();
    ASSERT_TRUE(ref.count("x")) << "torchao's reference did not run (scripts/bootstrap installs "
                                   "torchao into the venv)";
    const at::Tensor x = ref.at("x");
    ASSERT_EQ(x.numel(), std::int64_t{1} << 21);
    const Case cases[] = {{QuantType::MXFP4, "mxfp4"},
                          {QuantType::MXFP6E2M3, "mxfp6_e2m3"},
                          {QuantType::MXFP6E3M2, "mxfp6_e3m2"},
                          {QuantType::MXFP8E4M3, "mxfp8_e4m3"},
                          {QuantType::MXFP8E5M2, "mxfp8_e5m2"}};
    for (const Case& c : cases) {
        for (const auto& [mode, modeName] :
             {std::pair{MxScaleMode::Floor, "floor"}, std::pair{MxScaleMode::Rceil, "rceil"}}) {
            const std::string key = std::string(c.key) + "_" + modeName;
            SCOPED_TRACE(key);
            const QParams q = blockQParams(x, c.type, mode);
            EXPECT_EQ(differing(q.blockScale, ref.at(key + "_scale")), 0);
            const at::Tensor codes = quantize(x, q);
            EXPECT_EQ(differing(codeBytes(codes), ref.at(key + "_codes")), 0);
            EXPECT_EQ(differing(dequantize(codes, q), ref.at(key + "_deq")), 0);
            // fakeQuantize is dequantize(quantize()).
            EXPECT_EQ(differing(fakeQuantize(x, q), ref.at(key + "_deq")), 0);
        }
    }
    const at::Tensor xnv = ref.at("xnv");
    const QParams q = blockQParams(xnv, QuantType::NVFP4, MxScaleMode::Floor);
    EXPECT_EQ(q.tensorScale, ref.at("nvfp4_tensor_scale").item<float>());
    EXPECT_EQ(differing(q.blockScale, ref.at("nvfp4_scale")), 0);
    const at::Tensor codes = quantize(xnv, q);
    EXPECT_EQ(differing(codeBytes(codes), ref.at("nvfp4_codes")), 0);
    EXPECT_EQ(differing(dequantize(codes, q), ref.at("nvfp4_deq")), 0);
}

TEST(MxFormats, FloorSaturatesBetweenSixAndEight)
{
    // amax 7.9: floor(log2 7.9) - 2 = 0, scale 1: 7.9 saturates to 6 (RCEIL: scale 2, 7.9 -> 8).
    const at::Tensor x = at::linspace(-7.9, 7.9, 32).reshape({1, 32});
    const QParams floor = blockQParams(x, QuantType::MXFP4, MxScaleMode::Floor);
    EXPECT_EQ(floor.blockScale.item<int>(), 127);
    EXPECT_EQ(dequantize(quantize(x, floor), floor)[0][31].item<float>(), 6.0f);
    const QParams rceil = blockQParams(x, QuantType::MXFP4, MxScaleMode::Rceil);
    EXPECT_EQ(rceil.blockScale.item<int>(), 128);
    EXPECT_EQ(dequantize(quantize(x, rceil), rceil)[0][31].item<float>(), 8.0f);
}

TEST(MxFormats, MxInt8FollowsTheOcpRule)
{
    // OCP MX v1.0 INT8: shared exponent floor(log2 amax) (emax 0), elements k / 64 with k =
    // round half to even of x / 2^e * 64, clamped to [-127, 127]; value k / 64 * 2^e.
    at::Tensor x = at::randn({256, 96}) * at::pow(2.0, at::randint(-20, 20, {256, 1}));
    x[0].zero_();
    x[1] = at::linspace(-2, 2, 96);  // amax 2: 2 / 2 * 64 = 64
    x[2] = at::linspace(-1.999, 1.999, 96);  // saturates at 127 / 64
    const QParams q = blockQParams(x, QuantType::MXINT8, MxScaleMode::Floor);
    const at::Tensor codes = quantize(x, q);
    const at::Tensor back = dequantize(codes, q);
    EXPECT_EQ(codes.scalar_type(), at::kChar);
    const at::Tensor xc = x.contiguous();
    const float* xs = xc.data_ptr<float>();
    const at::Tensor cc = codes.contiguous();
    const std::int8_t* cs = cc.data_ptr<std::int8_t>();
    const at::Tensor bc = back.contiguous();
    const float* bs = bc.data_ptr<float>();
    std::int64_t bad = 0;
    for (std::int64_t r = 0; r < 256; ++r)
        for (std::int64_t b = 0; b < 3; ++b) {
            double amax = 0.0;
            for (int i = 0; i < 32; ++i)
                amax = std::max(amax, std::fabs(static_cast<double>(xs[r * 96 + b * 32 + i])));
            const int e = amax > 0 ? std::max(-127, static_cast<int>(std::floor(std::log2(amax))))
                                   : -127;
            for (int i = 0; i < 32; ++i) {
                const std::int64_t at = r * 96 + b * 32 + i;
                const double k = std::clamp(std::nearbyint(xs[at] / std::ldexp(1.0, e) * 64.0),
                                            -127.0, 127.0);
                bad += cs[at] != static_cast<std::int8_t>(k);
                bad += bs[at] != static_cast<float>(k / 64.0 * std::ldexp(1.0, e));
            }
        }
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(codes[1][95].item<int>(), 64);
    EXPECT_EQ(codes[2][95].item<int>(), 127);
}

TEST(MxFormats, AllZeroTensorsAndShortBlocks)
{
    // NVFP4 of an all-zero tensor: torchao divides 0 by 0 (NaN); BitLens gives zeros.
    const at::Tensor zeros = at::zeros({4, 32});
    for (QuantType type : {QuantType::NVFP4, QuantType::MXFP4, QuantType::MXINT8}) {
        const QParams q = blockQParams(zeros, type, MxScaleMode::Floor);
        const at::Tensor back = dequantize(quantize(zeros, q), q);
        EXPECT_TRUE(at::equal(back, zeros)) << traits(type).name;
        EXPECT_TRUE(at::all(q.scale > 0).item<bool>()) << traits(type).name;
    }
    // 40 inputs: a block of 32 and one of 8; each keeps its own scale.
    const at::Tensor x = at::cat({at::full({1, 32}, 100.0f), at::full({1, 8}, 0.5f)}, 1);
    const QParams q = blockQParams(x, QuantType::MXFP4, MxScaleMode::Floor);
    ASSERT_EQ(q.blockScale.sizes(), (at::IntArrayRef{1, 2}));
    const at::Tensor back = dequantize(quantize(x, q), q);
    EXPECT_EQ(back[0][35].item<float>(), 0.5f);
    EXPECT_EQ(back[0][0].item<float>(), 96.0f);  // 100 / 16 = 6.25 -> 6, x 16
}

namespace {

/// Every block format, for the property tests below.
std::vector<QuantType> blockFormats()
{
    std::vector<QuantType> types;
    for (const QuantTypeTraits& t : allQuantTypes())
        if (isBlockFormat(t))
            types.push_back(t.type);
    return types;
}

/// The per-block scale repeated over its block's elements.
at::Tensor perElement(const at::Tensor& blockValues, std::int64_t blockSize, std::int64_t cols)
{
    return blockValues.repeat_interleave(blockSize, 1).narrow(1, 0, cols);
}

} // namespace

// The properties test_quant_type.cpp's QuantProperty checks for the per-tensor / channel /
// group types, for the block formats at their one granularity (blocks of 32 or 16 along the
// last dimension), in both MX scale modes.
TEST(MxFormats, PropertiesOfEveryBlockFormat)
{
    ASSERT_EQ(blockFormats().size(), 7u);
    const at::Tensor x = test::propertyWeight(20261203);
    const at::Tensor sorted = std::get<0>(at::sort(test::propertyWeight(7), 1));
    for (QuantType type : blockFormats()) {
        const QuantTypeTraits& t = traits(type);
        for (MxScaleMode mode : {MxScaleMode::Floor, MxScaleMode::Rceil}) {
            SCOPED_TRACE(std::string(t.name) + (mode == MxScaleMode::Floor ? " floor" : " rceil"));
            const QParams qp = blockQParams(x, type, mode);
            ASSERT_EQ(qp.scale.sizes(), (at::IntArrayRef{8, 256 / t.blockSize}));
            EXPECT_TRUE(at::all(at::gt(qp.scale, 0)).item<bool>());
            EXPECT_TRUE(at::all(at::isfinite(qp.scale)).item<bool>());

            const at::Tensor codes = quantize(x, qp);
            ASSERT_EQ(codes.sizes(), x.sizes());
            const at::Tensor deq = dequantize(codes, qp);
            EXPECT_EQ(differing(fakeQuantize(x, qp), deq), 0);
            // q(deq(q(x))) == q(x): dequantized values are on the grid of their block.
            EXPECT_EQ(differing(quantize(deq, qp), codes), 0);
            // 0 maps to 0.
            EXPECT_TRUE(at::all(at::eq(deq.select(1, 0), 0)).item<bool>());
            EXPECT_EQ(deq[2][5].item<float>(), 0.0f);

            // Inside the block's range the error is within half a step of the element format
            // (relative for the float elements, absolute for MXINT8's k / 64), plus two ulps.
            const at::Tensor s = perElement(qp.scale, t.blockSize, 256);
            const at::Tensor err = (deq - x).abs();
            const at::Tensor ulps = x.abs() * (2 * std::numeric_limits<float>::epsilon());
            // The top of the grid in units of `scale`: MXINT8's scale is the block's / 64.
            const double limit = t.family == TypeFamily::Integer ? static_cast<double>(t.qmax)
                                                                 : static_cast<double>(t.maxValue);
            const at::Tensor inside = at::le((x / s).abs(), limit);
            at::Tensor bound;
            if (t.family == TypeFamily::Integer) {
                bound = s * 0.5 + ulps;
            } else {
                const test::FloatFormat f = test::floatFormat(type);
                bound = at::maximum(x.abs() * std::ldexp(1.0, -(f.mantissaBits + 1)),
                                    s * (f.minSubnormal / 2.0)) +
                        ulps;
            }
            const at::Tensor bad = at::logical_and(at::gt(err, bound), inside);
            EXPECT_FALSE(at::any(bad).item<bool>())
                << "x = " << x.masked_select(bad)[0].item<float>()
                << " deq = " << deq.masked_select(bad)[0].item<float>();
            // Most elements are inside (the block max is, by construction, save FLOOR's
            // saturation between 6 and 8 of FP4's grid); outside ones saturate at the top code.
            EXPECT_GT(inside.to(at::kFloat).mean().item<float>(), 0.9f);
            const at::Tensor top = s * limit;
            EXPECT_TRUE(at::all(at::logical_or(inside, at::eq(deq.abs(), top))).item<bool>());

            // Monotone within every block of a sorted row.
            const QParams qs = blockQParams(sorted, type, mode);
            const at::Tensor blocks = fakeQuantize(sorted, qs).reshape({8, -1, t.blockSize});
            EXPECT_TRUE(at::all(at::ge(blocks.diff(1, -1), 0)).item<bool>());

            // Straight-through gradient: 1 inside the clip range, 0 outside and at NaN.
            at::Tensor xg = (x * 3.0).clone();
            xg.index_put_({0, 7}, std::numeric_limits<float>::quiet_NaN());
            xg.set_requires_grad(true);
            const at::Tensor y = fakeQuantize(xg, qp);
            EXPECT_TRUE(y.requires_grad());
            at::where(at::isnan(y), at::zeros_like(y), y).sum().backward();
            const at::Tensor xd = xg.detach();
            const at::Tensor in = at::le((xd / s).abs(), limit);
            EXPECT_TRUE(at::equal(xg.grad(), in.to(at::kFloat)));
            EXPECT_GT(at::logical_not(in).sum().item<std::int64_t>(), 1);
            EXPECT_EQ(xg.grad()[0][7].item<float>(), 0.0f);
            // A NaN stays NaN and leaves the other blocks of its row alone.
            EXPECT_TRUE(std::isnan(y[0][7].item<float>()));
        }
    }
}
