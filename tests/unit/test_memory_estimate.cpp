// Memory checked before it is spent (analysis/memory_estimate.h): the live-activation peak of a
// graph as the executor frees values, the parts of the eval and quantize estimates (16-bit
// weights widened, quantized copies), and the refusal naming both figures.

#include "analysis/memory_estimate.h"
#include "ir/graph.h"
#include "jobs/result.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

using namespace bitlens;

namespace {

/// x [N, 16] -> fc1 (16 -> 64) -> relu -> fc2 (64 -> 8); weights in `type`, 16-bit ones marked
/// widenOnRead as the Hugging Face reader marks them.
ir::Graph mlp(at::ScalarType type)
{
    ir::GraphBuilder b("mlp");
    std::string x = b.input("x", {-1, 16});
    x = b.linear("fc1", x, at::ones({64, 16}), at::zeros({64}));
    x = b.unary("relu", ir::OpKind::Relu, x);
    x = b.linear("fc2", x, at::ones({8, 64}), at::zeros({8}));
    b.output(x);
    auto built = b.build();
    EXPECT_TRUE(built.ok());
    ir::Graph g = built.ok() ? std::move(built).value() : ir::Graph();
    for (auto& [name, t] : g.initializers) {
        t = t.to(type);
        if (type != at::kFloat)
            g.widenOnRead.insert(name);
    }
    return g;
}

struct EnvOverride {
    explicit EnvOverride(const char* value) { ::setenv("BITLENS_MEMORY_AVAILABLE", value, 1); }
    ~EnvOverride() { ::unsetenv("BITLENS_MEMORY_AVAILABLE"); }
};

} // namespace

TEST(MemoryEstimate, PeakActivationsFollowTheExecutorsLiveValues)
{
    const ir::Graph g = mlp(at::kFloat);
    // Batch 10: x (640 B) and fc1's output (2560 B) are live together, x is freed after fc1,
    // and relu's output (2560 B) joins fc1's before that is freed: the peak is 5120 B.
    const std::int64_t peak = analysis::peakActivationBytes(g, {10, 1});
    EXPECT_EQ(peak, 10 * 4 * (64 + 64));
    EXPECT_EQ(analysis::peakActivationBytes(g, {20, 1}), 2 * peak);
}

TEST(MemoryEstimate, SixteenBitWeightsCountTheirFloat32CopiesAndQuantizedOnes)
{
    const ir::Graph g16 = mlp(at::kBFloat16);
    const ir::Graph g32 = mlp(at::kFloat);
    const std::int64_t weights = 64 * 16 + 64 + 8 * 64 + 8;
    auto scheme = quant::parseScheme("w4-int4");
    ASSERT_TRUE(scheme.ok());
    const auto q16 = analysis::estimateQuantize(g16, *scheme, {4, 1});
    EXPECT_EQ(q16.mapped, 2 * weights);
    EXPECT_EQ(q16.widened, 4 * weights);  // every 16-bit weight becomes float32
    EXPECT_EQ(q16.quantized, 4 * (64 * 16 + 8 * 64));  // fc1 and fc2's weights, not biases
    // Analysis keeps each layer's input and output of the float run (x, fc1, relu, fc2: all
    // four values here, 4 * 4 * (16 + 64 + 64 + 8) B) while the quantized run peaks the same.
    std::int64_t kept = 0;
    const std::set<std::string> keep{"x", "fc1", "relu", "fc2"};
    const std::int64_t peakKeeping = analysis::peakActivationBytes(g16, {4, 1}, &keep, &kept);
    EXPECT_EQ(kept, 4 * 4 * (64 + 64 + 8));  // outputs counted as computed; x is an input
    EXPECT_EQ(peakKeeping, 4 * 4 * (16 + 64 + 64 + 8));
    // The runs (with the temporary of the largest value, [4, 64]) or, after them, both runs'
    // kept values beside the report of fc1 (quantized: 2 x its output, 8 x its weight for the float64 comparison, and the
    // weight shown), whichever is larger.
    const std::int64_t layerFc1 = 2 * 4 * 4 * 64 + 8 * 4 * 64 * 16 + 4 * 64 * 16;
    EXPECT_EQ(q16.activations, std::max(peakKeeping + kept + 4 * 4 * 64, 2 * kept + layerFc1));
    // What the process holds now is counted, less freed heap the run takes again.
    EXPECT_GT(q16.held, 0);
    EXPECT_LE(q16.reusable, q16.held);
    const std::int64_t grows = std::max<std::int64_t>(
        0, q16.widened + q16.quantized + q16.activations - q16.reusable);
    EXPECT_EQ(q16.fragmentation, grows * 2 / 5);  // a run this small is served from the heap
    EXPECT_EQ(q16.total(), q16.held + grows + q16.fragmentation);
    EXPECT_GE(q16.total(), q16.held);
    // float32 weights run from the mapping: nothing to widen.
    const auto q32 = analysis::estimateQuantize(g32, *scheme, {4, 1});
    EXPECT_EQ(q32.widened, 0);
    EXPECT_EQ(q32.quantized, q16.quantized);
    const auto e16 = analysis::estimateEval(g16, {4, 1});
    EXPECT_EQ(e16.quantized, 0);
    EXPECT_EQ(e16.widened, 4 * weights);  // within the executor's widen cache
    // One metric batch (here the batch itself) at its peak, with the temporary of its largest
    // value ([4, 64] float).
    EXPECT_EQ(e16.activations, analysis::peakActivationBytes(g16, {4, 1}) + 4 * 4 * 64);
    analysis::WorkShape metric{4, 1, 8};
    EXPECT_EQ(analysis::estimateEval(g16, metric).activations,
              analysis::peakActivationBytes(g16, {8, 1}) + 8 * 4 * 64);
    EXPECT_EQ(analysis::estimateEval(g32, {4, 1}).widened, 0);
}

TEST(MemoryEstimate, ViewsOfOneStorageWidenOnce)
{
    // Phi-3's q / k / v are row views of one qkv_proj: widening copies that storage once.
    ir::Graph g = mlp(at::kBFloat16);
    g.initializers["fc2.bias"] = g.initializers.at("fc1.bias").narrow(0, 0, 8);
    auto scheme = quant::parseScheme("w4-int4");
    ASSERT_TRUE(scheme.ok());
    const auto q = analysis::estimateQuantize(g, *scheme, {4, 1});
    EXPECT_EQ(q.widened, 4 * (64 * 16 + 64 + 8 * 64));
    EXPECT_EQ(q.quantized, 4 * (64 * 16 + 8 * 64));
}

TEST(MemoryEstimate, CompareCountsTheSchemeBeforeBesideTheNext)
{
    // workspace::compare keeps the last scheme's prepared model while the next is prepared.
    const ir::Graph g = mlp(at::kBFloat16);
    auto w4 = quant::parseScheme("w4-int4");
    ASSERT_TRUE(w4.ok());
    const auto one = analysis::estimateQuantize(g, *w4, {4, 1});
    const auto both = analysis::estimateCompare(g, {*w4, *w4}, {4, 1});
    EXPECT_EQ(both.action, "compare");
    EXPECT_EQ(both.quantized, 2 * one.quantized);
    EXPECT_EQ(both.widened, one.widened);
    EXPECT_EQ(both.activations, one.activations);
}

TEST(MemoryEstimate, AnActionThatCannotFitIsRefusedWithBothFigures)
{
    auto scheme = quant::parseScheme("w4-int4");
    ASSERT_TRUE(scheme.ok());
    const auto estimate = analysis::estimateQuantize(mlp(at::kBFloat16), *scheme, {4, 1});
    {
        EnvOverride small("1000");
        ASSERT_EQ(analysis::availableMemory(), 1000);
        auto refused = analysis::checkMemory(estimate, "/models/mlp");
        ASSERT_FALSE(refused.ok());
        EXPECT_EQ(refused.error().code, ErrorCode::Runtime);
        EXPECT_EQ(refused.error().path, "/models/mlp");
        EXPECT_EQ(exitCode(refused.error().code), 5);
        const std::string& m = refused.error().message;
        EXPECT_EQ(m.rfind("quantize needs ~", 0), 0u) << m;
        EXPECT_NE(m.find("float32 weights"), std::string::npos) << m;
        EXPECT_NE(m.find(", 0 MB available"), std::string::npos) << m;
    }
    {
        EnvOverride large("2G");
        EXPECT_EQ(analysis::availableMemory(), 2'000'000'000);
        // The override is the whole budget: what the process holds is not added to it.
        EXPECT_EQ(analysis::memoryBudget(estimate), 2'000'000'000);
        EXPECT_TRUE(analysis::checkMemory(estimate, "/models/mlp").ok());
    }
    // Without the override the machine's own figure is used, and it is positive.
    const auto own = analysis::availableMemory();
    ASSERT_TRUE(own.has_value());
    EXPECT_GT(*own, 0);
    EXPECT_EQ(analysis::formatGigabytes(21'349'000'000), "21.3 GB");
    EXPECT_EQ(analysis::formatGigabytes(512'000'000), "512 MB");
}

TEST(MemoryEstimate, AnOverrideThatIsNotASizeIsRefusedAndAHugeOneIsCapped)
{
    // Issue #49: these were passed over without a word (1e30 overflowed to a negative size).
    for (const char* bad : {"abc", "-1", "nanG", "inf", "12Q", "1e", "G"}) {
        EnvOverride env(bad);
        auto refused = analysis::checkMemoryOverride();
        ASSERT_FALSE(refused.ok()) << bad;
        EXPECT_EQ(refused.error().code, ErrorCode::Usage) << bad;
        EXPECT_EQ(refused.error().message.rfind("BITLENS_MEMORY_AVAILABLE='" + std::string(bad) +
                                                    "' is not a size",
                                                0),
                  0u)
            << refused.error().message;
        // What the GUI sees: the machine's own figure, never the malformed one.
        const auto own = analysis::availableMemory();
        ASSERT_TRUE(own.has_value()) << bad;
        EXPECT_GT(*own, 0) << bad;
    }
    for (const auto& [text, bytes] :
         {std::pair{"1e30", std::int64_t{1'000'000'000'000'000'000}},
          std::pair{"1e300T", std::int64_t{1'000'000'000'000'000'000}},
          std::pair{"1.5T", std::int64_t{1'500'000'000'000}}, std::pair{"0", std::int64_t{0}},
          std::pair{"512MB", std::int64_t{512'000'000}}}) {
        EnvOverride env(text);
        EXPECT_TRUE(analysis::checkMemoryOverride().ok()) << text;
        EXPECT_EQ(analysis::availableMemory(), bytes) << text;
    }
    EXPECT_TRUE(analysis::checkMemoryOverride().ok());  // unset
}
