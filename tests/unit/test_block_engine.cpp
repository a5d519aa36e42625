// The block engine (analysis/block_engine.h, issue #38 step 1) on the tiny random llama of
// tests/data/hf: its partition (embedding, one part per decoder block, head), its report equal
// to quant::prepare + analyze's (every layer's weight hash, local / accumulated / weight error
// and histograms, sizes, perplexities and KL divergence, within 1e-6 relative) with float32 and
// with bf16 weights kept in their width (each block widened as it runs), and its refusals.

#include "analysis/block_engine.h"
#include "analysis/quant_report.h"
#include "io/dataset.h"
#include "model/hf_builders.h"
#include "quant/engine.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace bitlens;
using nlohmann::json;

namespace {

const std::string kDir = std::string(BITLENS_TEST_DATA) + "/hf/";

struct Tiny {
    ir::Graph graph;
    at::Tensor windows;
    std::int64_t overlap = 0;
};

/// The tiny llama; with `bf16`, its 2-D weights as bfloat16 tensors (kept in 16 bits, widened
/// on read, as a bf16 safetensors folder opens).
Tiny tiny(bool bf16)
{
    Tiny t;
    std::ifstream in(kDir + "llama.json");
    const json config = json::parse(in);
    auto arrays = io::readNpz(kDir + "llama.npz");
    EXPECT_TRUE(arrays.ok()) << (arrays.ok() ? "" : arrays.error().userMessage());
    if (!arrays.ok())
        return t;
    std::map<std::string, at::Tensor> weights;
    for (auto& [key, v] : *arrays) {
        if (key == "__ppl_windows")
            t.windows = v;
        else if (key == "__ppl_overlap")
            t.overlap = v.item<std::int64_t>();
        else if (key.rfind("__", 0) != 0)
            weights[key] = bf16 && v.dim() == 2 ? v.to(at::kBFloat16) : v;
    }
    auto g = model::buildFromHfConfig(config, weights, "llama");
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().userMessage());
    if (g.ok())
        t.graph = std::move(*g);
    return t;
}

void expectClose(double block, double whole, const std::string& what)
{
    if (block == whole)  // infinities too (a float layer's SQNR)
        return;
    if (std::isnan(whole)) {
        EXPECT_TRUE(std::isnan(block)) << what;
        return;
    }
    EXPECT_NEAR(block, whole, 1e-6 * std::abs(whole) + 1e-12) << what;
}

void expectSameStats(const analysis::ErrorStats& b, const analysis::ErrorStats& w,
                     const std::string& what)
{
    expectClose(b.sqnrDb, w.sqnrDb, what + " sqnr");
    expectClose(b.mse, w.mse, what + " mse");
    expectClose(b.cosine, w.cosine, what + " cosine");
    expectClose(b.maxAbsErr, w.maxAbsErr, what + " max error");
}

void expectSameReport(const Tiny& t, const std::string& spec, bool calibrated = false)
{
    SCOPED_TRACE(spec);
    c10::InferenceMode guard;
    auto scheme = quant::parseScheme(spec);
    ASSERT_TRUE(scheme.ok()) << scheme.error().userMessage();
    io::Dataset eval;
    eval.path = "windows";
    eval.inputs = t.windows;
    // Calibration data for the schemes that read it: random windows of the tiny vocabulary,
    // more than one calibration batch (4 windows), the last one partial.
    io::Dataset calib;
    calib.path = "calib";
    if (calibrated) {
        at::manual_seed(7);
        calib.inputs = at::randint(0, t.windows.max().item<std::int64_t>() + 1,
                                   {10, t.windows.size(1)}, at::kLong);
    }
    analysis::AnalysisOptions options;
    options.sequence.overlap = t.overlap;
    auto model = quant::prepare(t.graph, *scheme, calib.inputs);
    ASSERT_TRUE(model.ok()) << model.error().userMessage();
    auto whole = analysis::analyze(t.graph, *model, t.windows, &eval, options);
    ASSERT_TRUE(whole.ok()) << whole.error().userMessage();
    auto block = analysis::analyzeBlockwise(t.graph, *scheme, t.windows, &eval, options, "tiny",
                                            Progress::none(), CancelToken(),
                                            calibrated ? &calib : nullptr);
    ASSERT_TRUE(block.ok()) << block.error().userMessage();
    if (calibrated) {
        EXPECT_EQ(block->calibSamples, 10);
        EXPECT_EQ(whole->calibSamples, 10);
    }

    EXPECT_EQ(block->engine, "block");
    EXPECT_EQ(whole->engine, "whole");
    ASSERT_EQ(block->layers.size(), whole->layers.size());
    std::size_t hashed = 0;
    for (std::size_t i = 0; i < whole->layers.size(); ++i) {
        const auto& w = whole->layers[i];
        const auto& b = block->layers[i];
        EXPECT_EQ(b.name, w.name);
        EXPECT_EQ(b.config, w.config);
        EXPECT_EQ(b.weightType, w.weightType);
        EXPECT_EQ(b.params, w.params);
        EXPECT_EQ(b.bytesQuantized, w.bytesQuantized);
        EXPECT_EQ(b.weightHash, w.weightHash) << w.name;
        hashed += w.weightHash.empty() ? 0 : 1;
        expectSameStats(b.local, w.local, w.name + " local");
        expectSameStats(b.accumulated, w.accumulated, w.name + " accumulated");
        expectSameStats(b.weight, w.weight, w.name + " weight");
        EXPECT_EQ(b.errorHistogram.counts, w.errorHistogram.counts) << w.name;
        EXPECT_EQ(b.weightHistogram.counts, w.weightHistogram.counts) << w.name;
        EXPECT_EQ(b.actHistogram.counts, w.actHistogram.counts) << w.name;
    }
    EXPECT_GT(hashed, 0u);
    // Any changed code changes the hash: the float weights hash otherwise.
    EXPECT_NE(whole->layers.front().weightHash,
              analysis::weightHash(model->layers.at(whole->layers.front().name).weightFloat));
    EXPECT_EQ(block->sizeFloat, whole->sizeFloat);
    EXPECT_EQ(block->sizeQuantized, whole->sizeQuantized);
    EXPECT_EQ(block->analysisSamples, whole->analysisSamples);
    ASSERT_TRUE(block->divergence && whole->divergence);
    EXPECT_EQ(block->divergence->tokens, whole->divergence->tokens);
    expectClose(block->divergence->pplFloat, whole->divergence->pplFloat, "ppl float");
    expectClose(block->divergence->pplQuantized, whole->divergence->pplQuantized, "ppl quantized");
    expectClose(block->divergence->meanKld, whole->divergence->meanKld, "mean KLD");
    expectClose(block->divergence->maxKld, whole->divergence->maxKld, "max KLD");
    expectClose(block->divergence->sameTop, whole->divergence->sameTop, "same top");
    expectClose(block->divergence->rmsDeltaP, whole->divergence->rmsDeltaP, "rms dp");
    EXPECT_GT(block->divergence->meanKld, 0.0);  // the quantization moved the distributions
}

} // namespace

TEST(BlockEngine, PartitionsTheDecoderStack)
{
    const Tiny t = tiny(false);
    auto p = analysis::partitionBlocks(t.graph);
    ASSERT_TRUE(p.ok()) << p.error().userMessage();
    ASSERT_EQ(p->blocks, 2);
    ASSERT_EQ(p->parts.size(), 4u);
    EXPECT_EQ(t.graph.nodes[p->parts[0].front()].name, "embed_tokens");
    for (std::size_t b = 1; b <= 2; ++b)
        for (const std::size_t i : p->parts[b])
            EXPECT_EQ(t.graph.nodes[i].name.rfind("layer." + std::to_string(b - 1) + ".", 0), 0u)
                << t.graph.nodes[i].name;
    bool head = false;
    for (const std::size_t i : p->parts[3])
        head = head || t.graph.nodes[i].name == "lm_head";
    EXPECT_TRUE(head);
    std::size_t total = 0;
    for (const auto& part : p->parts)
        total += part.size();
    EXPECT_EQ(total, t.graph.nodes.size());
}

TEST(BlockEngine, ReportEqualsTheWholeEngine)
{
    const Tiny t = tiny(false);
    ASSERT_TRUE(t.windows.defined());
    for (const char* spec : {"w4-int4", "w4-nf4", "gguf-q8_0", "dynamic-int8",
                             "w4-int4:head=quantize"})
        expectSameReport(t, spec);
}

TEST(BlockEngine, ReportEqualsTheWholeEngineWithBf16Weights)
{
    const Tiny t = tiny(true);
    ASSERT_TRUE(t.windows.defined());
    ASSERT_FALSE(t.graph.widenOnRead.empty());  // the weights stay 16-bit until a block runs
    expectSameReport(t, "w4-int4");
}

// Issue #38 step 2: each block calibrated on the float model's inputs to it gives prepare's
// codes (GPTQ's and AWQ's Hessians, static ranges, SmoothQuant's channel maxima).
TEST(BlockEngine, CalibratedSchemesEqualTheWholeEngine)
{
    const Tiny t = tiny(false);
    ASSERT_TRUE(t.windows.defined());
    for (const char* spec : {"w4-int4:method=gptq", "w4-int4:method=awq", "static-int8",
                             "smoothquant-int8", "w4-int4:method=gptq,act-order=true"})
        expectSameReport(t, spec, true);
}

TEST(BlockEngine, CalibratedSchemesWithBf16Weights)
{
    const Tiny t = tiny(true);
    expectSameReport(t, "w4-int4:method=gptq", true);
}

TEST(BlockEngine, RefusesWhatItDoesNotRunYet)
{
    const Tiny t = tiny(false);
    // A scheme that reads calibration data, without any: a usage error before any part runs.
    for (const char* spec : {"static-int8", "w4-int4:method=gptq", "smoothquant-int8"}) {
        auto scheme = quant::parseScheme(spec);
        ASSERT_TRUE(scheme.ok()) << scheme.error().userMessage();
        EXPECT_TRUE(analysis::blockEngineUnsupported(t.graph, *scheme).empty()) << spec;
        io::Dataset eval;
        eval.inputs = t.windows;
        auto r = analysis::analyzeBlockwise(t.graph, *scheme, t.windows, &eval, {}, "tiny");
        ASSERT_FALSE(r.ok()) << spec;
        EXPECT_EQ(r.error().code, ErrorCode::Usage) << spec;
        EXPECT_NE(r.error().message.find("--calib"), std::string::npos) << r.error().message;
    }
    // Quantization-aware training trains the whole model.
    {
        auto scheme = quant::parseScheme("qat-int8");
        ASSERT_TRUE(scheme.ok() && scheme->qat) << "qat-int8";
        EXPECT_FALSE(analysis::blockEngineUnsupported(t.graph, *scheme).empty());
    }
    // A node outside the stack between two blocks.
    Tiny broken = tiny(false);
    auto p = analysis::partitionBlocks(broken.graph);
    ASSERT_TRUE(p.ok());
    broken.graph.nodes[p->parts[1].back()].name = "between";
    auto r = analysis::partitionBlocks(broken.graph, "tiny");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("layer.1."), std::string::npos) << r.error().message;
}
