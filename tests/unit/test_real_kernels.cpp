// Real low-bit kernels against the simulated hook: every supported (scheme, op) on CPU over
// random shapes (1, 3, 17, 64 and 100 rows; K and N in 16..300), the exact int32 accumulator of
// the int8 GEMM, the kernel names, layers that stay simulated, keep-float overrides, fallbacks.
//
// Tolerances, and why (y: simulated output; mag = sum_k |x_k| |w_nk|, the size of the terms;
// the unit roundoff of bf16 is 2^-8, of fp16 2^-11):
//  - int8 / FP8: both paths form the same products; the real one sums them exactly (int8) or
//    in float32 (FP8), the simulated one in float32: max |real - sim| <= 1e-4 * max |y|.
//  - fp16: autocast rounds the bias and the output once each (and the product once more where
//    the bias is added separately, Gemm transB = 0): |real - sim| <= 2^-10 * (|y| + |bias|) +
//    1e-5 * mag (float32 accumulation).
//  - bf16: the same, 2^-7 * (|y| + |bias|), plus 2^-8 * mag: the CPU bf16 GEMM (oneDNN,
//    AVX512-BF16, torch 2.13) also rounds partial sums over K to bf16, measured up to
//    1.3e-3 * mag beyond the output rounding at K = 16, 5e-5 at K = 4096.
//  - int4 weight-only (bf16 activations, scales and zeros): x rounds by 2^-8 * mag; each
//    dequantized weight (u - 8) * scale + zero by up to 2^-8 * |w| + 2^-4 * scale (scale and
//    zero round separately, |u - 8| and |zero / scale| <= 8); partial sums as the bf16 GEMM;
//    the output by 2^-8: |real - sim| <= 3 * 2^-8 * mag + 2^-4 * sum_k |x_k| s_nk + 2^-8 * |y|.
//  - int8 weight-only (bf16 activations and scales): |real - sim| <= 2^-7 * mag + 2^-8 * |y|.
// The one-hot tests read every dequantized weight back alone, to well under one quantization
// step, so a single misplaced code, group or zero point fails.

#include "quant/real_kernels.h"

#include "exec/executor.h"
#include "isa_levels.h"
#include "kernels/lowbit.h"
#include "quant/engine.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include "graph_lookup.h"

#include <cmath>
#include <random>

using namespace bitlens;

namespace {

const c10::Device kCpu(c10::kCPU);
const c10::Device kCuda(c10::kCUDA, 0);
const std::vector<std::int64_t> kRows = {1, 3, 17, 64, 100};
constexpr double kBf16Unit = 1.0 / 256.0;   // 2^-8, the unit roundoff of bfloat16
constexpr double kFp16Unit = 1.0 / 2048.0;  // 2^-11

/// The layer shapes BitLens quantizes with a linear kernel, and a convolution.
enum class Op { Linear, GemmTransposed, MatMul2d, MatMul3d, Conv };
const std::vector<Op> kLinearOps = {Op::Linear, Op::GemmTransposed, Op::MatMul2d, Op::MatMul3d};

std::string opName(Op op)
{
    switch (op) {
    case Op::Linear: return "Gemm(transB=1)";
    case Op::GemmTransposed: return "Gemm(transB=0)";
    case Op::MatMul2d: return "MatMul(2-D input)";
    case Op::MatMul3d: return "MatMul(3-D input)";
    case Op::Conv: return "Conv";
    }
    return "?";
}

/// A one-layer graph "layer" with K inputs and N outputs (Conv: K input channels of 5 x 5
/// images, N output channels, 3 x 3 kernel, stride 2, padding 1, groups 1).
ir::Graph oneLayer(Op op, std::int64_t k, std::int64_t n, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    ir::GraphBuilder g("one-layer");
    const double wScale = 1.0 / std::sqrt(static_cast<double>(k));
    const at::Tensor bias = at::randn({n}, gen) * 0.5;
    switch (op) {
    case Op::Linear: {
        auto x = g.input("x", {-1, k});
        g.output(g.linear("layer", x, at::randn({n, k}, gen) * wScale, bias));
        break;
    }
    case Op::GemmTransposed: {
        auto x = g.input("x", {-1, k});
        auto w = g.constant("layer.weight", at::randn({k, n}, gen) * wScale);
        auto b = g.constant("layer.bias", bias);
        ir::Attributes attrs;
        attrs.set("transB", std::int64_t{0});
        g.output(g.node("layer", ir::OpKind::Gemm, {x, w, b}, attrs));
        break;
    }
    case Op::MatMul2d:
    case Op::MatMul3d: {
        auto x = op == Op::MatMul2d ? g.input("x", {-1, k}) : g.input("x", {-1, 3, k});
        auto w = g.constant("layer.weight", at::randn({k, n}, gen) * wScale);
        g.output(g.matmul("layer", x, w));
        break;
    }
    case Op::Conv: {
        auto x = g.input("x", {-1, k, 5, 5});
        g.output(g.conv2d("layer", x, at::randn({n, k, 3, 3}, gen) * wScale / 3.0, bias,
                          {.stride = 2, .padding = 1}));
        break;
    }
    }
    return g.build().value();
}

/// Random inputs for `op` with `rows` rows: normal, off-centre so that asymmetric
/// activations get a non-trivial zero point.
at::Tensor inputs(Op op, std::int64_t rows, std::int64_t k, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    if (op == Op::MatMul3d)
        return at::randn({rows, 3, k}, gen) * 1.5 + 0.3;
    if (op == Op::Conv)
        return at::randn({rows, k, 5, 5}, gen) * 1.5 + 0.3;
    return at::randn({rows, k}, gen) * 1.5 + 0.3;
}

quant::QuantizedModel prepared(const ir::Graph& graph, const std::string& spec,
                               const at::Tensor& calib)
{
    auto scheme = quant::parseScheme(spec);
    EXPECT_TRUE(scheme.ok()) << spec;
    auto model = quant::prepare(graph, *scheme, calib);
    EXPECT_TRUE(model.ok()) << spec << ": " << (model.ok() ? "" : model.error().userMessage());
    return std::move(model).value();
}

using test::nodeNamed;

struct Runs {
    at::Tensor simulated;
    at::Tensor real;
    std::map<std::string, std::string> kernels;
};

/// Runs `model` on `x` with the simulated hook and with the real-kernel hook. The tests below
/// check LibTorch's kernels unless they ask for BitLens's own (KernelSource::Best).
Runs runBoth(const quant::QuantizedModel& model, const at::Tensor& x,
             quant::KernelSource source = quant::KernelSource::LibTorch)
{
    c10::InferenceMode guard;
    Runs r;
    exec::Executor simulated(model.graph);
    simulated.addHook(quant::makeQuantHook(model));
    r.simulated = simulated.run({x}).value().front();
    exec::Executor real(model.graph);
    auto hook = quant::makeRealKernelHook(model, kCpu, source);
    real.addHook(hook);
    auto out = real.run({x});
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().userMessage());
    r.real = out.ok() ? out->front() : at::zeros_like(r.simulated);
    r.kernels = hook->kernelsRun();
    return r;
}

/// sum_k |x_k| |w_nk| for the one layer of `graph` (same layout as its output).
at::Tensor magnitude(const ir::Graph& graph, const at::Tensor& x)
{
    const ir::Node& node = nodeNamed(graph, "layer");
    const at::Tensor w = *graph.initializer(node.inputs[1]);
    std::vector<at::Tensor> in = {x.abs(), w.abs()};
    return exec::runNode(node, in, exec::ExecOptions{})[0];
}

at::Tensor biasOf(const ir::Graph& graph)
{
    const ir::Node& node = nodeNamed(graph, "layer");
    if (node.inputs.size() < 3)
        return at::zeros({});
    at::Tensor b = *graph.initializer(node.inputs[2]);
    return node.op == ir::OpKind::Conv ? b.reshape({-1, 1, 1}) : b;
}

/// Draws K and N in 16..300 (K a multiple of `kMultiple`).
std::pair<std::int64_t, std::int64_t> drawShape(std::mt19937& rng, std::int64_t kMultiple = 1)
{
    std::uniform_int_distribution<std::int64_t> dist(16, 300);
    const std::int64_t k = std::max<std::int64_t>(dist(rng) / kMultiple, 1) * kMultiple;
    return {k, dist(rng)};
}

/// Runs `spec` on every op and row count with random shapes, and checks each real output
/// against the simulated one with `check`.
template <typename Check>
void forEachCase(const std::string& spec, const std::vector<Op>& ops, std::uint64_t seed,
                 const std::string& kernelPrefix, Check check,
                 quant::KernelSource source = quant::KernelSource::LibTorch)
{
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    for (Op op : ops) {
        for (std::int64_t rows : kRows) {
            const auto [k, n] = drawShape(rng);
            const std::uint64_t caseSeed = rng();
            SCOPED_TRACE(spec + " " + opName(op) + " rows " + std::to_string(rows) + " K " +
                         std::to_string(k) + " N " + std::to_string(n) + " seed " +
                         std::to_string(caseSeed));
            const ir::Graph graph = oneLayer(op, k, n, caseSeed);
            const auto model = prepared(graph, spec, inputs(op, 200, k, caseSeed + 1));
            const at::Tensor x = inputs(op, rows, k, caseSeed + 2);
            const Runs r = runBoth(model, x, source);
            ASSERT_EQ(r.kernels.count("layer"), 1u);
            EXPECT_EQ(r.kernels.at("layer").rfind(kernelPrefix, 0), 0u) << r.kernels.at("layer");
            ASSERT_EQ(r.real.sizes(), r.simulated.sizes());
            ASSERT_EQ(r.real.scalar_type(), at::kFloat);
            check(graph, model, x, r);
        }
    }
}

/// max |real - sim| <= 1e-4 * max |sim|.
void expectFloatRounding(const ir::Graph&, const quant::QuantizedModel&, const at::Tensor&,
                         const Runs& r)
{
    const double diff = (r.real - r.simulated).abs().max().item<double>();
    const double scale = r.simulated.abs().max().item<double>();
    EXPECT_LE(diff, 1e-4 * scale) << "max |y| " << scale;
}

/// Elementwise |real - sim| <= bound; reports the worst element.
void expectWithin(const Runs& r, const at::Tensor& bound)
{
    const at::Tensor excess = (r.real - r.simulated).abs() - bound;
    const double worst = excess.max().item<double>();
    EXPECT_LE(worst, 0.0) << "worst element exceeds its bound by " << worst << "; max diff "
                          << (r.real - r.simulated).abs().max().item<double>();
}

/// The per-weight scale s_nk of a weight-only layer, [N, K] as weightView.
at::Tensor scalePerWeight(const quant::LayerQuant& lq, std::int64_t n, std::int64_t k)
{
    at::Tensor s = lq.weight.scale.to(at::kFloat);
    if (s.dim() == 0)
        return s.expand({n, k});
    if (lq.weightGranularity.kind != quant::Granularity::Kind::PerGroup)
        return s.reshape({n, 1}).expand({n, k});
    return s.repeat_interleave(lq.weightGranularity.groupSize, 1).slice(1, 0, k);
}

/// sum_k |x_k| s_nk, shaped like the layer's output.
at::Tensor scaleMagnitude(const ir::Graph& graph, const quant::QuantizedModel& model,
                          const at::Tensor& x)
{
    const ir::Node& node = nodeNamed(graph, "layer");
    const auto& lq = model.layers.at("layer");
    const at::Tensor view = quant::weightView(node, lq.weightFloat);
    const at::Tensor s = scalePerWeight(lq, view.size(0), view.size(1));
    const at::Tensor x2d = x.reshape({-1, view.size(1)}).abs();
    std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end() - 1);
    shape.push_back(view.size(0));
    return at::matmul(x2d, s.t()).reshape(shape);
}

} // namespace

// --- the int8 GEMM: exact -----------------------------------------------------------------------

TEST(RealKernelInt8, AccumulatorEqualsInt64MatmulOfTheCodes)
{
    const std::uint64_t seed = 20240601;
    SCOPED_TRACE("seed " + std::to_string(seed));
    at::Generator gen = at::detail::createCPUGenerator(seed);
    for (std::int64_t m : {1, 2, 3, 16, 17, 64, 100}) {
        for (auto [k, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{
                 {1, 1}, {7, 5}, {16, 16}, {17, 33}, {63, 127}, {300, 257}}) {
            SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(k) + " N " +
                         std::to_string(n));
            const at::Tensor w = at::randint(-128, 128, {n, k}, gen, at::kChar);
            const at::Tensor xu = at::randint(0, 256, {m, k}, gen, at::kByte);
            const at::Tensor xs = at::randint(-128, 128, {m, k}, gen, at::kChar);
            const at::Tensor wRef = w.to(at::kLong).t();
            // uint8, per-tensor zero point, including 0 and 255.
            for (std::int64_t zp : {0, 3, 128, 255}) {
                const at::Tensor z = at::full({}, zp, at::kLong);
                const at::Tensor acc = quant::int8MatmulAccumulate(xu, z, w);
                ASSERT_EQ(acc.scalar_type(), at::kInt);
                EXPECT_TRUE(at::equal(acc.to(at::kLong), at::matmul(xu.to(at::kLong) - zp, wRef)))
                    << "uint8 zp " << zp;
            }
            // uint8 and int8 per-token zero points; no zero point (0).
            const at::Tensor zu = at::randint(0, 256, {m}, gen, at::kLong);
            EXPECT_TRUE(at::equal(quant::int8MatmulAccumulate(xu, zu, w).to(at::kLong),
                                  at::matmul(xu.to(at::kLong) - zu.unsqueeze(1), wRef)));
            const at::Tensor zs = at::randint(-128, 128, {m}, gen, at::kLong);
            EXPECT_TRUE(at::equal(quant::int8MatmulAccumulate(xs, zs, w).to(at::kLong),
                                  at::matmul(xs.to(at::kLong) - zs.unsqueeze(1), wRef)));
            EXPECT_TRUE(at::equal(quant::int8MatmulAccumulate(xs, at::Tensor(), w).to(at::kLong),
                                  at::matmul(xs.to(at::kLong), wRef)));
            EXPECT_TRUE(at::equal(quant::int8MatmulAccumulate(xu, at::Tensor(), w).to(at::kLong),
                                  at::matmul(xu.to(at::kLong), wRef)));
        }
    }
}

TEST(RealKernelInt8, AccumulatorHoldsTheExtremesAtTheLargestK)
{
    // K = 65535 with codes at the ends of their ranges: |acc| reaches 255 * 128 * 65535 =
    // 2139095040, just under 2^31.
    const std::int64_t k = 65535;
    const at::Tensor w = at::full({8, k}, -128, at::kChar);
    for (auto [code, zp] : std::vector<std::pair<std::int64_t, std::int64_t>>{{255, 0}, {0, 255}}) {
        const at::Tensor x = at::full({17, k}, code, at::kByte);
        const at::Tensor acc = quant::int8MatmulAccumulate(x, at::full({}, zp, at::kLong), w);
        EXPECT_EQ(acc[0][0].item<std::int64_t>(), (code - zp) * -128 * k);
        EXPECT_EQ(acc[16][7].item<std::int64_t>(), (code - zp) * -128 * k);
    }
}

// --- every supported scheme against the simulated hook ---------------------------------------

TEST(RealKernelInt8, W8A8SchemesMatchTheSimulatedOutputToFloatRounding)
{
    const std::string kernel = "at::_int_mm (int8 x int8 -> int32)";
    std::uint64_t seed = 100;
    for (const char* spec :
         {"dynamic-int8", "dynamic-int8:act-per=token", "static-int8", "static-int8:per=tensor",
          "smoothquant-int8", "dynamic-int8:act=int8,act-sym=false",
          "static-int8:act=int8,act-sym=true", "static-int8:act-sym=true"}) {
        forEachCase(spec, kLinearOps, seed++, kernel, expectFloatRounding);
    }
}

TEST(RealKernelInt8, LlmInt8WithAndWithoutOutlierColumns)
{
    const std::string kernel = "at::_int_mm (int8 x int8 -> int32) + float32 GEMM";
    for (bool outliers : {false, true}) {
        std::mt19937 rng(outliers ? 7u : 8u);
        for (Op op : kLinearOps) {
            for (std::int64_t rows : kRows) {
                const auto [k, n] = drawShape(rng);
                const std::uint64_t caseSeed = rng();
                SCOPED_TRACE(opName(op) + " rows " + std::to_string(rows) + " K " +
                             std::to_string(k) + " N " + std::to_string(n) + " seed " +
                             std::to_string(caseSeed) + (outliers ? " with" : " without") +
                             " outliers");
                const ir::Graph graph = oneLayer(op, k, n, caseSeed);
                const auto model = prepared(graph, "llm-int8", at::Tensor());
                at::Tensor x = inputs(op, rows, k, caseSeed + 2).clamp(-5.0, 5.0);
                if (outliers) {
                    x.select(-1, 1).mul_(10.0).add_(7.0);  // max |x| of columns 1 and K-1 > 6
                    x.select(-1, k - 1).mul_(20.0);
                }
                const Runs r = runBoth(model, x);
                EXPECT_EQ(r.kernels.at("layer").rfind(kernel, 0), 0u) << r.kernels.at("layer");
                expectFloatRounding(graph, model, x, r);
            }
        }
    }
}

TEST(RealKernelFp8, E4M3MatchesTheSimulatedOutputToFloatRounding)
{
    forEachCase("fp8-e4m3", kLinearOps, 200,
                "at::_scaled_mm (float8_e4m3fn x float8_e4m3fn -> float32)",
                expectFloatRounding);
}

TEST(RealKernelHalf, Bf16AndFp16MatchAutocastRounding)
{
    std::uint64_t seed = 300;
    for (const char* spec : {"bf16", "fp16"}) {
        const bool bf16 = std::string(spec) == "bf16";
        std::vector<Op> ops = kLinearOps;
        ops.push_back(Op::Conv);
        forEachCase(spec, ops, seed++, "at::",
                    [&](const ir::Graph& graph, const quant::QuantizedModel&, const at::Tensor& x,
                        const Runs& r) {
                        const at::Tensor bound =
                            (bf16 ? 2 * kBf16Unit : 2 * kFp16Unit) *
                                (r.simulated.abs() + biasOf(graph).abs()) +
                            (bf16 ? kBf16Unit : 1e-5) * magnitude(graph, x);
                        expectWithin(r, bound);
                    });
    }
}

TEST(RealKernelInt4, WeightOnlyInt4MatchesWithinBf16Tolerance)
{
    std::uint64_t seed = 400;
    for (const char* spec :
         {"w4-int4:group=32", "w4-int4", "w4-int4:group=128", "w4-int4:group=256",
          "w4-int4:group=96", "w4-int4:per=channel", "w4-int4:sym=true", "w4-int4:weight=uint4",
          "w4-int4:weight=int2"}) {
        forEachCase(spec, kLinearOps, seed++, "at::_weight_int4pack_mm_for_cpu (bfloat16 x int4",
                    [&](const ir::Graph& graph, const quant::QuantizedModel& model,
                        const at::Tensor& x, const Runs& r) {
                        const at::Tensor bound = 3 * kBf16Unit * magnitude(graph, x) +
                                                 (1.0 / 16.0) * scaleMagnitude(graph, model, x) +
                                                 kBf16Unit * r.simulated.abs();
                        expectWithin(r, bound);
                    });
    }
}

TEST(RealKernelInt4, MatchesTheKernelsOwnDequantizedWeightsTightly)
{
    // The same product in float32 from what the kernel is given (bf16 activations, bf16 scale
    // and zero per group, codes u = q + 8): only the kernel's own rounding remains, the output
    // (2^-8 relative) and its bf16 partial sums (measured under 8.5e-4 * mag; 2^-9 allowed). A
    // wrong group mapping or zero convention would be off by whole quantization steps.
    const std::uint64_t seed = 410;
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (std::int64_t group : {32, 64, 128}) {
        const std::int64_t k = 4 * group + (group == 64 ? 17 : 0), n = 40;
        const ir::Graph graph =
            oneLayer(Op::Linear, k, n, seed + static_cast<std::uint64_t>(group));
        const auto model = prepared(graph, "w4-int4:group=" + std::to_string(group), at::Tensor());
        const auto& lq = model.layers.at("layer");
        const at::Tensor x = inputs(Op::Linear, 33, k, seed);
        const Runs r = runBoth(model, x);

        const at::Tensor q = quant::quantize(lq.weightFloat, lq.weight).to(at::kFloat);  // [N, K]
        const at::Tensor s = scalePerWeight(lq, n, k);
        const at::Tensor z = lq.weight.zeroPoint.to(at::kFloat)
                                 .repeat_interleave(group, 1)
                                 .slice(1, 0, k);
        const auto bf16 = [](const at::Tensor& t) { return t.to(at::kBFloat16).to(at::kFloat); };
        const at::Tensor wKernel = q * bf16(s) + bf16(-z * s);  // (u - 8) * scale + zero
        const at::Tensor xb = bf16(x);
        const at::Tensor ref = at::matmul(xb, wKernel.t()) + *graph.initializer("layer.bias");
        const at::Tensor bound = kBf16Unit * ref.abs() +
                                 (kBf16Unit / 2) * at::matmul(xb.abs(), wKernel.abs().t());
        const at::Tensor excess = (r.real - ref).abs() - bound;
        EXPECT_LE(excess.max().item<double>(), 0.0) << "group " << group;
    }
}

TEST(RealKernelInt4, OneHotRowsReadEveryDequantizedWeightBack)
{
    // Row k of the identity picks column k of the weights: the real output is then each
    // dequantized weight as the kernel sees it, (u - 8) * bf16(s) + bf16(zero) rounded to bf16,
    // and the simulated one (q - z) * s. They differ by the bf16 roundings only:
    // |real - sim| <= 2^-4 * s_nk + 2^-8 * |w_nk|, under 0.13 of a quantization step s_nk
    // (|w| <= 15 s), so a single misplaced code, group or zero point fails. int8 weight-only
    // (w = bf16(q * bf16(s))): 2^-7 * |w|, under one step.
    std::mt19937 rng(420);
    for (const char* spec :
         {"w4-int4:group=32", "w4-int4", "w4-int4:group=128", "w4-int4:group=256",
          "w4-int4:group=96", "w4-int4:per=channel", "w4-int4:sym=true", "w4-int4:weight=uint4",
          "w4-int4:weight=int2", "w4-int4:weight=int8,sym=true,per=channel",
          "w4-int4:weight=int8,sym=true,per=tensor"}) {
        for (Op op : {Op::Linear, Op::GemmTransposed, Op::MatMul2d}) {
            const auto [k, n] = drawShape(rng);
            const std::uint64_t caseSeed = rng();
            SCOPED_TRACE(std::string(spec) + " " + opName(op) + " K " + std::to_string(k) +
                         " N " + std::to_string(n) + " seed " + std::to_string(caseSeed));
            const ir::Graph graph = oneLayer(op, k, n, caseSeed);
            const auto model = prepared(graph, spec, at::Tensor());
            const auto& lq = model.layers.at("layer");
            const Runs r = runBoth(model, at::eye(k));
            EXPECT_NE(r.kernels.at("layer").find("pack_mm"), std::string::npos)
                << r.kernels.at("layer");
            const at::Tensor view = quant::weightView(nodeNamed(graph, "layer"), lq.weightFq);
            const bool int8 = lq.config.weightType == quant::QuantType::Int8;
            const at::Tensor bound =
                int8 ? 2 * kBf16Unit * view.abs().t()
                     : (1.0 / 16.0) * scalePerWeight(lq, n, k).t() + kBf16Unit * view.abs().t();
            expectWithin(r, bound);
        }
    }
}

TEST(RealKernelInt8WeightOnly, MatchesWithinBf16Tolerance)
{
    forEachCase("w4-int4:weight=int8,sym=true,per=channel", kLinearOps, 500,
                "at::_weight_int8pack_mm (bfloat16 x int8)",
                [&](const ir::Graph& graph, const quant::QuantizedModel&, const at::Tensor& x,
                    const Runs& r) {
                    expectWithin(r, 2 * kBf16Unit * magnitude(graph, x) +
                                        kBf16Unit * r.simulated.abs());
                });
}

// --- names, and what stays simulated ------------------------------------------------------------

TEST(RealKernelFor, NamesTheKernelOrNothing)
{
    struct Expect {
        std::string spec;
        Op op;
        c10::Device device;
        std::optional<std::string> kernel;
    };
    const std::optional<std::string> none;
    const std::string int8 = "at::_int_mm (int8 x int8 -> int32)";
    const std::vector<Expect> table = {
        {"dynamic-int8", Op::Linear, kCpu, int8},
        {"dynamic-int8", Op::MatMul2d, kCuda, int8},
        {"static-int8", Op::GemmTransposed, kCpu, int8},
        {"smoothquant-int8", Op::Linear, kCpu, int8},
        {"llm-int8", Op::Linear, kCpu,
         int8 + " + float32 GEMM of the fp16 outlier columns (LLM.int8)"},
        {"fp8-e4m3", Op::Linear, kCuda,
         "at::_scaled_mm (float8_e4m3fn x float8_e4m3fn -> float32)"},
        {"fp8-e5m2", Op::Linear, kCuda, none},  // E5M2 x E5M2: no kernel
        {"bf16", Op::Linear, kCpu, "at::linear (bfloat16)"},
        {"fp16", Op::MatMul3d, kCpu, "at::matmul (float16)"},
        {"bf16", Op::Conv, kCuda, "at::convolution (bfloat16)"},
        {"fp16", Op::GemmTransposed, kCpu, "at::matmul (float16)"},
        {"w4-int4", Op::Linear, kCpu,
         "at::_weight_int4pack_mm_for_cpu (bfloat16 x int4, group 64)"},
        {"w4-int4:group=256", Op::MatMul2d, kCuda,
         "at::_weight_int4pack_mm (bfloat16 x int4, group 256)"},
        {"w4-int4:group=96", Op::Linear, kCpu,
         "at::_weight_int4pack_mm_for_cpu (bfloat16 x int4, group 32)"},
        {"w4-int4:group=16", Op::Linear, kCpu, none},  // below the kernels' smallest group
        {"w4-int4:weight=int8,sym=true,per=channel", Op::Linear, kCpu,
         "at::_weight_int8pack_mm (bfloat16 x int8)"},
        {"w4-int4:weight=int8,sym=true,per=channel", Op::Linear, kCuda, none},
        {"w4-int4:weight=int8,per=channel", Op::Linear, kCpu, none},  // asymmetric int8
        {"dynamic-int8:sym=false", Op::Linear, kCpu, none},
        {"dynamic-int8:group=64", Op::Linear, kCpu, none},  // per-group int8 weights
        {"w4-nf4", Op::Linear, kCpu, none},
        {"w4-fp4", Op::Linear, kCpu, none},
        {"static-w4a8", Op::Linear, kCpu, none},
        {"static-int8", Op::Conv, kCpu, none},
        {"dynamic-int8", Op::Conv, kCuda, none},
        {"w4-int4", Op::Conv, kCpu, none},
        {"fp8-e4m3", Op::Conv, kCuda, none},
        {"dynamic-int8", Op::Linear, c10::Device(c10::kMeta), none},
    };
    for (const auto& e : table) {
        SCOPED_TRACE(e.spec + " " + opName(e.op) + " on " + e.device.str());
        const ir::Graph graph = oneLayer(e.op, 64, 24, 600);
        const auto model = prepared(graph, e.spec, inputs(e.op, 50, 64, 601));
        EXPECT_EQ(quant::realKernelFor(nodeNamed(model.graph, "layer"), model.layers.at("layer"),
                                       e.device, quant::KernelSource::LibTorch),
                  e.kernel);
    }
}

/// conv -> relu -> flatten -> fc1 -> relu -> fc2, as the demo models.
ir::Graph convNet(std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    ir::GraphBuilder g("net");
    auto x = g.input("x", {-1, 1, 8, 8});
    x = g.conv2d("conv", x, at::randn({8, 1, 3, 3}, gen) * 0.5, at::randn({8}, gen) * 0.1,
                 {.stride = 1, .padding = 1});
    x = g.unary("relu", ir::OpKind::Relu, x);
    x = g.maxPool("pool", x, 2, 2);
    x = g.flatten("flat", x);
    x = g.linear("fc1", x, at::randn({32, 128}, gen) * 0.1, at::randn({32}, gen) * 0.1);
    x = g.unary("fc1.relu", ir::OpKind::Relu, x);
    x = g.linear("fc2", x, at::randn({10, 32}, gen) * 0.2, at::zeros({10}));
    g.output(x);
    return g.build().value();
}

TEST(RealKernelHook, StaticInt8ConvStaysSimulatedAndEqualsTheSimulatedOutputExactly)
{
    const ir::Graph graph = convNet(700);
    at::Generator gen = at::detail::createCPUGenerator(701);
    const auto model = prepared(graph, "static-int8", at::rand({200, 1, 8, 8}, gen));
    const ir::Node& conv = nodeNamed(model.graph, "conv");
    EXPECT_FALSE(quant::realKernelFor(conv, model.layers.at("conv"), kCpu,
                                      quant::KernelSource::LibTorch)
                     .has_value());

    c10::InferenceMode guard;
    const at::Tensor x = at::rand({17, 1, 8, 8}, gen);
    exec::Executor simulated(model.graph);
    simulated.addHook(quant::makeQuantHook(model));
    const auto sim = simulated.runAll({x}).value();
    exec::Executor real(model.graph);
    auto hook = quant::makeRealKernelHook(model, kCpu, quant::KernelSource::LibTorch);
    real.addHook(hook);
    const auto out = real.runAll({x}).value();
    EXPECT_TRUE(at::equal(out.at(conv.outputs[0]), sim.at(conv.outputs[0])));
    const auto& ran = hook->kernelsRun();
    EXPECT_EQ(ran.at("conv"), "simulated (fake-quant, float32)");
    EXPECT_EQ(ran.at("fc1"), "at::_int_mm (int8 x int8 -> int32)");
    EXPECT_EQ(ran.at("fc2"), "at::_int_mm (int8 x int8 -> int32)");
    EXPECT_EQ(hook->plannedKernels().count("conv"), 0u);
    const at::Tensor y = out.at(model.graph.outputs[0].name);
    const at::Tensor ySim = sim.at(model.graph.outputs[0].name);
    EXPECT_LE((y - ySim).abs().max().item<double>(), 1e-4 * ySim.abs().max().item<double>());
}

TEST(RealKernelHook, KeepFloatOverridesStayFloat)
{
    const ir::Graph graph = convNet(710);
    auto scheme = quant::parseScheme("dynamic-int8").value();
    scheme.overrides["fc2"] = std::nullopt;
    scheme.overrides["conv"] = std::nullopt;
    const auto model = quant::prepare(graph, scheme, at::Tensor()).value();
    EXPECT_FALSE(quant::realKernelFor(nodeNamed(model.graph, "fc2"), model.layers.at("fc2"), kCpu)
                     .has_value());

    c10::InferenceMode guard;
    at::Generator gen = at::detail::createCPUGenerator(711);
    const at::Tensor x = at::rand({64, 1, 8, 8}, gen);
    exec::Executor simulated(model.graph);
    simulated.addHook(quant::makeQuantHook(model));
    const auto sim = simulated.runAll({x}).value();
    exec::Executor real(model.graph);
    auto hook = quant::makeRealKernelHook(model, kCpu, quant::KernelSource::LibTorch);
    real.addHook(hook);
    const auto out = real.runAll({x}).value();
    // The float conv runs as the float executor runs it: bit for bit.
    exec::Executor floatRun(model.graph);
    const auto ref = floatRun.runAll({x}).value();
    EXPECT_TRUE(at::equal(out.at("conv"), ref.at("conv")));
    const auto& ran = hook->kernelsRun();
    EXPECT_EQ(ran.at("conv"), "float32 (kept float)");
    EXPECT_EQ(ran.at("fc1"), "at::_int_mm (int8 x int8 -> int32)");
    EXPECT_EQ(ran.at("fc2"), "float32 (kept float)");
    const at::Tensor y = out.at(model.graph.outputs[0].name);
    const at::Tensor ySim = sim.at(model.graph.outputs[0].name);
    EXPECT_LE((y - ySim).abs().max().item<double>(), 1e-4 * ySim.abs().max().item<double>());
}

TEST(RealKernelHook, InputsThatNeedGradientsFallBackToTheSimulatedPathAndSayWhy)
{
    const ir::Graph graph = oneLayer(Op::Linear, 48, 20, 720);
    auto model = prepared(graph, "dynamic-int8", at::Tensor());
    // prepare() works in inference mode; autograd may not save its tensors for backward.
    auto& lq = model.layers.at("layer");
    lq.weightFq = lq.weightFq.clone();
    at::Generator gen = at::detail::createCPUGenerator(721);
    const at::Tensor x = at::randn({5, 48}, gen).requires_grad_(true);
    exec::Executor simulated(model.graph);
    simulated.addHook(quant::makeQuantHook(model));
    exec::Executor real(model.graph);
    auto hook = quant::makeRealKernelHook(model, kCpu);
    real.addHook(hook);
    // forward(), unlike run(), keeps autograd on (training loops use it).
    const at::Tensor y = real.forward({x}).front();
    EXPECT_TRUE(at::equal(y, simulated.forward({x}).front()));
    EXPECT_EQ(hook->kernelsRun().at("layer"),
              "simulated (fake-quant, float32): the input needs gradients, which the low-bit "
              "kernels do not have");
    y.sum().backward();
    EXPECT_TRUE(x.grad().defined());
}

TEST(RealKernelHook, AnInputThatDoesNotFitIsReportedAsTheExecutorReportsIt)
{
    const ir::Graph graph = oneLayer(Op::Linear, 48, 20, 730);
    const auto model = prepared(graph, "dynamic-int8", at::Tensor());
    c10::InferenceMode guard;
    exec::Executor simulated(model.graph);
    simulated.addHook(quant::makeQuantHook(model));
    exec::Executor real(model.graph);
    real.addHook(quant::makeRealKernelHook(model, kCpu));
    const at::Tensor x = at::randn({5, 47});
    auto a = simulated.run({x});
    auto b = real.run({x});
    ASSERT_FALSE(a.ok());
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().code, a.error().code);
    EXPECT_EQ(b.error().message, a.error().message);
}

// --- BitLens's own CPU kernels (KernelSource::Best) ----------------------------------------------

namespace {

// The own-kernel tests run at every ISA level this CPU has (isa_levels.h). Where a level has a
// vector row of a kernel the engine must run it and name it; where only the scalar twin is
// left the engine must not pick it for speed (it keeps LibTorch's kernel and says so).

const std::string kIntMm = "at::_int_mm (int8 x int8 -> int32)";

/// The int8 kernel the engine should run at the level in force.
std::string ownInt8()
{
    const kernels::KernelRow row = kernels::int8GemmKernel();
    return row.isReference() ? kIntMm
                             : std::string("bitlens ") + row.name +
                                   " int8 gemm (u8 x s8 -> s32, fused dequant)";
}

/// "bitlens <row> " for the float-activation 4-bit kernel at the level in force, or "" (none).
std::string own4BitPrefix()
{
    const kernels::KernelRow row = kernels::nibble4GemmKernel();
    return row.isReference() ? std::string() : std::string("bitlens ") + row.name + " ";
}

/// "bitlens <row> " for the int8-activation int4 kernel at the level in force, or "" (none).
std::string ownQ8Prefix()
{
    if (own4BitPrefix().empty())
        return {};
    const kernels::KernelRow row = kernels::nibble4GemvQ8Kernel();
    return row.isReference() ? std::string() : std::string("bitlens ") + row.name + " ";
}

/// What runs a plain 2-D W8A8 Conv at the level in force: the own int8 conv, or (scalar row
/// only) the simulated path with its reason.
std::string ownInt8ConvOrWhy()
{
    const kernels::KernelRow row = kernels::int8GemmKernel();
    return row.isReference()
               ? std::string("simulated (fake-quant, float32): no vector int8 row at ISA level "
                             "scalar (the scalar row is slower than float32)")
               : std::string("bitlens ") + row.name +
                     " int8 conv (im2col u8 x s8 -> s32, fused dequant)";
}

/// One Conv "layer": C -> N channels, k x k kernel, on H x W inputs.
struct ConvCase {
    std::int64_t c, n, h, w, k;
    ir::Conv2dOptions options;
};

ir::Graph oneConv(const ConvCase& cc, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    ir::GraphBuilder g("one-conv");
    auto x = g.input("x", {-1, cc.c, cc.h, cc.w});
    const std::int64_t fanIn = cc.c / cc.options.groups * cc.k * cc.k;
    const at::Tensor w = at::randn({cc.n, cc.c / cc.options.groups, cc.k, cc.k}, gen) /
                         std::sqrt(static_cast<double>(fanIn));
    g.output(g.conv2d("layer", x, w, at::randn({cc.n}, gen) * 0.5, cc.options));
    return g.build().value();
}

class OwnKernelInt8 : public bitlens::testing::AtIsaLevel {};
class OwnKernelConv : public bitlens::testing::AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(OwnKernelConv);
class OwnKernel4Bit : public bitlens::testing::AtIsaLevel {};
class OwnKernels : public bitlens::testing::AtIsaLevel {};
BITLENS_AT_EVERY_ISA_LEVEL(OwnKernelInt8);
BITLENS_AT_EVERY_ISA_LEVEL(OwnKernel4Bit);
BITLENS_AT_EVERY_ISA_LEVEL(OwnKernels);

} // namespace

TEST_P(OwnKernelInt8, W8A8SchemesMatchTheSimulatedOutputToFloatRounding)
{
    const std::string kOwnInt8 = ownInt8();
    std::uint64_t seed = 800;
    for (const char* spec :
         {"dynamic-int8", "dynamic-int8:act-per=token", "static-int8", "static-int8:per=tensor",
          "smoothquant-int8", "dynamic-int8:act=int8,act-sym=false",
          "static-int8:act=int8,act-sym=true", "static-int8:act-sym=true", "llm-int8"}) {
        // The op only changes the weight view, which RealKernelInt8 covers on every op.
        forEachCase(spec, {Op::Linear, Op::MatMul3d}, seed++, kOwnInt8, expectFloatRounding,
                    quant::KernelSource::Best);
    }
}

TEST_P(OwnKernelInt8, ReduceRangeRunsSevenBitCodesAndNamesVpmaddubswOnAvx2)
{
    // reduce-range: weight codes in [-64, 64]; the AVX2 row multiplies them with vpmaddubsw
    // (exact for them) and says so; the other rows run them as any int8 codes.
    const kernels::KernelRow row = kernels::int8GemmKernel();
    const std::string prefix =
        row.isReference() ? kIntMm
        : row.level == kernels::IsaLevel::Avx2
            ? std::string("bitlens avx2 int8 gemm (u8 x s8 -> s32 with vpmaddubsw, 7-bit weights")
            : ownInt8();
    std::uint64_t seed = 830;
    for (const char* spec : {"dynamic-int8:reduce-range=true", "static-int8:reduce-range=true",
                             "smoothquant-int8:reduce-range=true"})
        forEachCase(spec, {Op::Linear, Op::MatMul3d}, seed++, prefix, expectFloatRounding,
                    quant::KernelSource::Best);
    // The codes really are on 7 bits, and differ from the 8-bit scheme's.
    const ir::Graph graph = oneLayer(Op::Linear, 96, 40, 840);
    const auto reduced = prepared(graph, "static-int8:reduce-range=true", inputs(Op::Linear, 50, 96, 841));
    const auto full = prepared(graph, "static-int8", inputs(Op::Linear, 50, 96, 841));
    const quant::LayerQuant& lq = reduced.layers.at("layer");
    EXPECT_EQ(lq.weight.range, quant::CodeRange::Reduced);
    const at::Tensor w = graph.initializers.at(graph.nodes[0].inputs[1]);
    const at::Tensor codes = quant::quantize(w, lq.weight);
    EXPECT_EQ(codes.abs().max().item<std::int64_t>(), 64);
    EXPECT_EQ(full.layers.at("layer").weight.range, quant::CodeRange::Full);
}

TEST_P(OwnKernelInt8, Wrange127RunsNarrowCodesOnTheInt8Kernels)
{
    // wrange=127: weight codes in [-127, 127] (never -128) run on the same int8 kernels (the
    // kernels take any s8 code: VNNI and the widening AVX2 tile accumulate in int32; vpmaddubsw
    // is chosen only for codes within +-64) and match the simulated output at every ISA level.
    const std::string kOwnInt8 = ownInt8();
    std::uint64_t seed = 850;
    for (const char* spec : {"dynamic-int8:wrange=127", "static-int8:wrange=127",
                             "static-int8:wrange=127,per=tensor", "smoothquant-int8:wrange=127"})
        forEachCase(spec, {Op::Linear, Op::MatMul3d}, seed++, kOwnInt8,
                    expectFloatRounding, quant::KernelSource::Best);
    const ir::Graph graph = oneLayer(Op::Linear, 96, 40, 860);
    const auto narrow = prepared(graph, "static-int8:wrange=127", inputs(Op::Linear, 50, 96, 861));
    const quant::LayerQuant& lq = narrow.layers.at("layer");
    EXPECT_EQ(lq.weight.range, quant::CodeRange::Narrow);
    const at::Tensor w = graph.initializers.at(graph.nodes[0].inputs[1]);
    const at::Tensor codes = quant::quantize(w, lq.weight);
    EXPECT_GE(codes.min().item<std::int64_t>(), -127);
    EXPECT_EQ(codes.abs().amax(1).min().item<std::int64_t>(), 127);  // each row's extreme
}

TEST_P(OwnKernelInt8, EqualsLibTorchsIntMmPathToFloatRounding)
{
    // Both compute the same exact int32 accumulator from the same codes; only the float
    // scaling (fused here, separate ops there) may round differently.
    const std::string kOwnInt8 = ownInt8();
    for (const char* spec : {"dynamic-int8", "static-int8:act=int8,act-sym=true"}) {
        const ir::Graph graph = oneLayer(Op::Linear, 200, 70, 810);
        const auto model = prepared(graph, spec, inputs(Op::Linear, 100, 200, 811));
        const at::Tensor x = inputs(Op::Linear, 33, 200, 812);
        const Runs own = runBoth(model, x, quant::KernelSource::Best);
        const Runs torch = runBoth(model, x, quant::KernelSource::LibTorch);
        EXPECT_EQ(own.kernels.at("layer"), kOwnInt8);
        EXPECT_TRUE(at::allclose(own.real, torch.real, 1e-5, 1e-5)) << spec;
    }
}

namespace {

/// `spec` on a one-Linear graph gets no real kernel on the CPU at the level in force.
void expectSimulatedOnCpu(const char* spec, std::uint64_t seed)
{
    const ir::Graph graph = oneLayer(Op::Linear, 64, 24, seed);
    const auto model = prepared(graph, spec, at::Tensor());
    EXPECT_EQ(quant::realKernelFor(nodeNamed(model.graph, "layer"), model.layers.at("layer"),
                                   kCpu),
              std::nullopt)
        << spec;
}

} // namespace

TEST_P(OwnKernel4Bit, WeightOnlySchemesMatchTheSimulatedOutputToFloatRounding)
{
    std::uint64_t seed = 900;
    const std::string prefix = own4BitPrefix();
    for (const char* spec : {"w4-nf4", "w4-nf4:group=128", "w4-fp4"}) {
        if (prefix.empty()) {
            // No vector row at this level: NF4 / FP4 stay simulated, and the engine says so.
            expectSimulatedOnCpu(spec, seed++);
            continue;
        }
        forEachCase(spec, kLinearOps, seed++, prefix, expectFloatRounding,
                    quant::KernelSource::Best);
    }
}

namespace {

/// The VNNI int4 kernel's bound (kernels/lowbit.h), loosened to what the test can compute:
/// |real - sim| <= sum_k |s_nk| (max |x| / 254) * 15 + float rounding.
void expectWithinInt8ActivationBound(const ir::Graph& graph, const quant::QuantizedModel& model,
                                     const at::Tensor& x, const Runs& r)
{
    const ir::Node& node = nodeNamed(graph, "layer");
    const auto& lq = model.layers.at("layer");
    const at::Tensor view = quant::weightView(node, lq.weightFloat);
    const at::Tensor s = scalePerWeight(lq, view.size(0), view.size(1)).abs().sum(1);
    const double xmax = x.abs().max().item<double>();
    const at::Tensor bound = s * (15.0 * xmax / 254.0) +
                             1e-4 * r.simulated.abs().max().item<double>();
    expectWithin(r, bound);
    // Not float rounding any more: the activation rounding shows.
    EXPECT_GT((r.real - r.simulated).abs().max().item<double>(),
              1e-6 * r.simulated.abs().max().item<double>());
}

} // namespace

TEST_P(OwnKernel4Bit, IntegerCodesRunOnTheQ8KernelWithinItsActivationRoundingBound)
{
    std::uint64_t seed = 950;
    const std::string prefix = ownQ8Prefix();
    for (const char* spec :
         {"w4-int4:group=32", "w4-int4", "w4-int4:group=128", "w4-int4:group=96",
          "w4-int4:per=channel", "w4-int4:sym=true", "w4-int4:weight=uint4",
          "w4-int4:weight=int2"}) {
        if (prefix.empty()) {
            // No own int4 row at this level: LibTorch's int4 kernel (or the float-activation
            // own kernel), never the scalar twin.
            const ir::Graph graph = oneLayer(Op::Linear, 64, 24, seed++);
            const auto model = prepared(graph, spec, at::Tensor());
            const auto kernel = quant::realKernelFor(nodeNamed(model.graph, "layer"),
                                                     model.layers.at("layer"), kCpu);
            if (kernel)
                EXPECT_EQ(kernel->find("scalar"), std::string::npos) << *kernel;
            continue;
        }
        forEachCase(spec, kLinearOps, seed++, prefix, expectWithinInt8ActivationBound,
                    quant::KernelSource::Best);
    }
}

TEST_P(OwnKernel4Bit, OneHotRowsReadEveryDequantizedWeightBack)
{
    // Row k of the identity picks column k: the real output is each weight as the kernel
    // dequantizes it, table[u] * s + offset, against the simulated (q - z) * s or table[q] * s.
    // float32 rounding only: far under a quantization step, so one misplaced code, group or
    // zero point fails. Needs an own 4-bit row: at a level without one, the test above checks
    // that the engine does not claim one.
    if (own4BitPrefix().empty())
        return;
    std::mt19937 rng(920);
    for (const char* spec : {"w4-int4:group=32", "w4-int4", "w4-int4:group=96",
                             "w4-int4:per=channel", "w4-int4:weight=uint4", "w4-int4:weight=int2",
                             "w4-nf4", "w4-fp4:group=32"}) {
        for (Op op : {Op::Linear, Op::GemmTransposed, Op::MatMul2d}) {
            const auto [k, n] = drawShape(rng);
            const std::uint64_t caseSeed = rng();
            SCOPED_TRACE(std::string(spec) + " " + opName(op) + " K " + std::to_string(k) +
                         " N " + std::to_string(n) + " seed " + std::to_string(caseSeed));
            const ir::Graph graph = oneLayer(op, k, n, caseSeed);
            const auto model = prepared(graph, spec, at::Tensor());
            const auto& lq = model.layers.at("layer");
            const Runs r = runBoth(model, at::eye(k), quant::KernelSource::Best);
            const bool integer =
                std::string(spec).rfind("w4-int4", 0) == 0 && !ownQ8Prefix().empty();
            // One-hot rows are exact in int8 (q = 127, d = 1 / 127): float rounding here too.
            EXPECT_EQ(r.kernels.at("layer").rfind(integer ? ownQ8Prefix() : own4BitPrefix(), 0),
                      0u)
                << r.kernels.at("layer");
            expectWithin(r, 1e-5 * scalePerWeight(lq, n, k).t());
        }
    }
}

TEST_P(OwnKernel4Bit, SixteenBitWeightsRunOnTheFloat16GemmToFloatRounding)
{
    // Weight-only fp16 / bf16 (float32 activations): the 16-bit codes are the simulated
    // weights exactly, so only the order of the float32 sums differs.
    const kernels::KernelRow row = kernels::float16GemmKernel();
    std::uint64_t seed = 980;
    for (const auto& [spec, type] : {std::pair<const char*, const char*>{"gguf-f16", "fp16"},
                                     {"w4-int4:weight=bf16", "bf16"},
                                     {"w4-int4:weight=fp16,per=channel", "fp16"}}) {
        if (row.isReference()) {
            // The scalar twin is never picked for speed: the layer stays simulated.
            expectSimulatedOnCpu(spec, seed++);
            continue;
        }
        const std::string kernel = std::string("bitlens ") + row.name + " " + type +
                                   " weight-only gemm (float32 x " + type + " -> float32)";
        forEachCase(spec, kLinearOps, seed++, kernel, expectFloatRounding,
                    quant::KernelSource::Best);
    }
}

TEST_P(OwnKernels, NamesTheKernelPerSchemeAndLeaveCudaToLibTorch)
{
    const std::string kOwnInt8 = ownInt8();
    const std::string q8 = ownQ8Prefix(), f4 = own4BitPrefix();
    const std::optional<std::string> none;
    // Without own 4-bit rows, int4 goes to LibTorch's int4 kernel (group 64 divides K = 64;
    // per-channel is one group of K) and NF4 / FP4 stay simulated.
    const auto int4 = [&](const std::string& group, const std::string& libtorchGroup) {
        if (!q8.empty())
            return std::optional<std::string>(
                q8 + "int4 gemv " + group + " (float32 -> int8 per group x int4 -> float32)");
        if (!f4.empty())
            return std::optional<std::string>(f4 + "int4 gemv " + group +
                                              " (float32 x int4 -> float32)");
        return std::optional<std::string>("at::_weight_int4pack_mm_for_cpu (bfloat16 x int4, "
                                          "group " + libtorchGroup + ")");
    };
    const auto code4 = [&](const std::string& type, const std::string& group) {
        return f4.empty() ? none
                          : std::optional<std::string>(f4 + type + " gemv " + group +
                                                       " (float32 x " + type + " -> float32)");
    };
    std::vector<std::tuple<std::string, c10::Device, std::optional<std::string>>> table = {
        {"dynamic-int8", kCpu, kOwnInt8},
        {"static-int8", kCpu, kOwnInt8},
        {"llm-int8", kCpu, kOwnInt8 + " + float32 GEMM of the fp16 outlier columns (LLM.int8)"},
        {"dynamic-int8", kCuda, "at::_int_mm (int8 x int8 -> int32)"},
        {"w4-int4", kCpu, int4("g64", "64")},
        {"w4-int4:per=channel", kCpu, int4("per-channel", "64")},
        {"w4-nf4", kCpu, code4("nf4", "g64")},
        {"w4-fp4:group=128", kCpu, code4("fp4_e2m1", "g128")},
        {"w4-nf4", kCuda, none},
        // at::_scaled_mm is a reference loop on the CPU (~1000x slower than float32): simulated.
        {"fp8-e4m3", kCpu, none},
        // LibTorch's 16-bit CPU kernels are slower than float32: simulated there, not on CUDA.
        {"bf16", kCpu, none},
        {"fp16", kCpu, none},
        {"bf16", kCuda, "at::linear (bfloat16)"},
    };
    if (!f4.empty()) {
        table.push_back({"w4-int4:group=16", kCpu, none});  // not whole 32-element chunks
        table.push_back({"w4-int4:group=48", kCpu, none});  // no kernel has a group dividing 48
    }
    for (const auto& [spec, device, kernel] : table) {
        SCOPED_TRACE(spec + " on " + device.str());
        const ir::Graph graph = oneLayer(Op::Linear, 64, 24, 930);
        const auto model = prepared(graph, spec, inputs(Op::Linear, 50, 64, 931));
        EXPECT_EQ(quant::realKernelFor(nodeNamed(model.graph, "layer"), model.layers.at("layer"),
                                       device),
                  kernel);
    }
}

TEST_P(OwnKernels, SimulatedLayersSayWhyWhereTheBestKernelWasAsked)
{
    // FP8 on the CPU: LibTorch's _scaled_mm exists but is a reference loop, so the best choice
    // is the simulated path, and the report says so; other schemes without a CPU kernel name
    // their configuration.
    const ir::Graph graph = oneLayer(Op::Linear, 64, 24, 990);
    for (const auto& [spec, expected] :
         std::vector<std::pair<std::string, std::string>>{
             {"fp8-e4m3", "simulated (fake-quant, float32): at::_scaled_mm on the CPU is a "
                          "reference loop"},
             {"static-w4a8", "simulated (fake-quant, float32): no real CPU kernel for int4"},
             {"fp16", "simulated (fake-quant, float32): LibTorch's float16 CPU kernels are "
                      "slower than float32"},
             {"bf16", "simulated (fake-quant, float32): LibTorch's bfloat16 CPU kernels are "
                      "slower than float32"}}) {
        SCOPED_TRACE(spec);
        const auto model = prepared(graph, spec, inputs(Op::Linear, 50, 64, 991));
        c10::InferenceMode guard;
        exec::Executor real(model.graph);
        auto hook = quant::makeRealKernelHook(model, kCpu, quant::KernelSource::Best);
        real.addHook(hook);
        ASSERT_TRUE(real.runAll({inputs(Op::Linear, 8, 64, 992)}).ok());
        const std::string ran = hook->kernelsRun().at("layer");
        EXPECT_EQ(ran.rfind(expected, 0), 0u) << ran;
    }
}

TEST_P(OwnKernels, ConvNetRunsItsLinearLayersOnTheInt8Gemm)
{
    const std::string kOwnInt8 = ownInt8();
    const ir::Graph graph = convNet(940);
    at::Generator gen = at::detail::createCPUGenerator(941);
    const auto model = prepared(graph, "static-int8", at::rand({200, 1, 8, 8}, gen));
    c10::InferenceMode guard;
    const at::Tensor x = at::rand({17, 1, 8, 8}, gen);
    exec::Executor simulated(model.graph);
    simulated.addHook(quant::makeQuantHook(model));
    const at::Tensor ySim = simulated.run({x}).value().front();
    exec::Executor real(model.graph);
    auto hook = quant::makeRealKernelHook(model, kCpu);
    real.addHook(hook);
    const at::Tensor y = real.run({x}).value().front();
    EXPECT_EQ(hook->kernelsRun().at("fc1"), kOwnInt8);
    EXPECT_EQ(hook->kernelsRun().at("fc2"), kOwnInt8);
    EXPECT_EQ(hook->kernelsRun().at("conv"), ownInt8ConvOrWhy());
    EXPECT_LE((y - ySim).abs().max().item<double>(), 1e-4 * ySim.abs().max().item<double>());
}

// --- BitLens's int8 convolution ----------------------------------------------------------------

TEST_P(OwnKernelConv, MatchesTheSimulatedOutputToFloatRounding)
{
    const std::string expected = ownInt8ConvOrWhy();
    // Odd H / W, stride 2, padding 1, K = 1 and 3, dilation, C not a multiple of 4 (K padded).
    const std::vector<ConvCase> cases = {
        {3, 8, 7, 9, 3, {.stride = 2, .padding = 1}},
        {5, 20, 11, 6, 1, {}},
        {4, 17, 9, 9, 3, {.stride = 1, .padding = 1, .dilation = 2}},
        {16, 70, 5, 7, 3, {.stride = 2, .padding = 1}},
        {1, 32, 13, 13, 3, {.stride = 1, .padding = 1}},
        {7, 9, 6, 5, 1, {.stride = 2, .padding = 1}},
    };
    std::uint64_t seed = 1000;
    for (const char* spec : {"static-int8", "dynamic-int8", "static-int8:per=tensor",
                             "static-int8:act=int8,act-sym=true", "dynamic-int8:act=int8"}) {
        for (const ConvCase& cc : cases) {
            for (std::int64_t rows : {1, 3}) {
                SCOPED_TRACE(std::string(spec) + " C " + std::to_string(cc.c) + " N " +
                             std::to_string(cc.n) + " H " + std::to_string(cc.h) + " W " +
                             std::to_string(cc.w) + " k " + std::to_string(cc.k) + " stride " +
                             std::to_string(cc.options.stride) + " pad " +
                             std::to_string(cc.options.padding) + " rows " +
                             std::to_string(rows));
                ++seed;
                at::Generator gen = at::detail::createCPUGenerator(seed);
                const ir::Graph graph = oneConv(cc, seed);
                const auto model =
                    prepared(graph, spec, at::randn({64, cc.c, cc.h, cc.w}, gen) * 1.5 + 0.3);
                const at::Tensor x = at::randn({rows, cc.c, cc.h, cc.w}, gen) * 1.5 + 0.3;
                const Runs r = runBoth(model, x, quant::KernelSource::Best);
                EXPECT_EQ(r.kernels.at("layer"), expected);
                ASSERT_EQ(r.real.sizes(), r.simulated.sizes());
                expectFloatRounding(graph, model, x, r);
            }
        }
    }
}

TEST_P(OwnKernelConv, ChannelsLastOutputFeedsTheNextConvThroughReluAndPooling)
{
    // conv -> relu -> pool -> conv -> flatten -> fc: the first conv's output is channels-last
    // memory, which the second conv quantizes without a transpose; values must not change.
    at::Generator gen = at::detail::createCPUGenerator(1100);
    ir::GraphBuilder g("two-convs");
    auto x = g.input("x", {-1, 2, 11, 11});
    x = g.conv2d("conv1", x, at::randn({6, 2, 3, 3}, gen) * 0.3, at::randn({6}, gen) * 0.1,
                 {.stride = 1, .padding = 1});
    x = g.unary("relu1", ir::OpKind::Relu, x);
    x = g.maxPool("pool1", x, 2, 2);
    x = g.conv2d("conv2", x, at::randn({10, 6, 3, 3}, gen) * 0.2, at::randn({10}, gen) * 0.1,
                 {.stride = 2, .padding = 1});
    x = g.flatten("flat", x);
    x = g.linear("fc", x, at::randn({4, 90}, gen) * 0.1, at::zeros({4}));
    g.output(x);
    const ir::Graph graph = g.build().value();
    const auto model = prepared(graph, "static-int8", at::rand({100, 2, 11, 11}, gen));
    c10::InferenceMode guard;
    const at::Tensor in = at::rand({5, 2, 11, 11}, gen);
    exec::Executor simulated(model.graph);
    simulated.addHook(quant::makeQuantHook(model));
    const auto sim = simulated.runAll({in}).value();
    exec::Executor real(model.graph);
    auto hook = quant::makeRealKernelHook(model, kCpu);
    real.addHook(hook);
    const auto out = real.runAll({in}).value();
    EXPECT_EQ(hook->kernelsRun().at("conv1"), ownInt8ConvOrWhy());
    EXPECT_EQ(hook->kernelsRun().at("conv2"), ownInt8ConvOrWhy());
    for (const char* layer : {"conv1", "conv2", "fc"}) {
        SCOPED_TRACE(layer);
        const std::string value = nodeNamed(model.graph, layer).outputs[0];
        const at::Tensor a = out.at(value), b = sim.at(value);
        ASSERT_EQ(a.sizes(), b.sizes());
        EXPECT_LE((a - b).abs().max().item<double>(), 1e-4 * b.abs().max().item<double>());
    }
}

TEST_P(OwnKernelConv, GroupedAndDepthwiseConvsStaySimulatedAndSayWhy)
{
    for (std::int64_t groups : {2, 8}) {
        SCOPED_TRACE("group " + std::to_string(groups));
        const ConvCase cc{8, 8, 7, 7, 3, {.stride = 1, .padding = 1, .groups = groups}};
        at::Generator gen = at::detail::createCPUGenerator(1200);
        const ir::Graph graph = oneConv(cc, 1201);
        const auto model = prepared(graph, "static-int8", at::randn({32, 8, 7, 7}, gen));
        EXPECT_FALSE(quant::realKernelFor(nodeNamed(model.graph, "layer"),
                                          model.layers.at("layer"), kCpu)
                         .has_value());
        const Runs r = runBoth(model, at::randn({2, 8, 7, 7}, gen), quant::KernelSource::Best);
        EXPECT_EQ(r.kernels.at("layer"), "simulated (fake-quant, float32): grouped / depthwise "
                                         "conv (group " + std::to_string(groups) +
                                             ") has no int8 conv kernel");
        EXPECT_TRUE(at::equal(r.real, r.simulated));
    }
}
