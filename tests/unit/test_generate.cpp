// Generation with a KV cache (model/generate.h): every cached step's logits against the
// full-window logits of the same graph, for each family hf_builders makes (tests/data/hf,
// made by make_tiny.py), float and quantized with real kernels; the sampler; stop tokens.

#include "model/generate.h"

#include "exec/executor.h"
#include "io/dataset.h"
#include "ir/graph.h"
#include "kernels/cpu_features.h"
#include "model/hf_builders.h"
#include "quant/engine.h"
#include "quant/real_kernels.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>

using namespace bitlens;
using nlohmann::json;

namespace {

const std::string kDir = std::string(BITLENS_TEST_DATA) + "/hf/";

ir::Graph tinyGraph(const std::string& name)
{
    std::ifstream in(kDir + name + ".json");
    const json config = json::parse(in);
    auto arrays = io::readNpz(kDir + name + ".npz");
    EXPECT_TRUE(arrays.ok()) << (arrays.ok() ? "" : arrays.error().userMessage());
    std::map<std::string, at::Tensor> weights;
    if (arrays.ok())
        for (auto& [key, t] : *arrays)
            if (key.rfind("__", 0) != 0)
                weights[key] = t;
    auto graph = model::buildFromHfConfig(config, weights, name);
    EXPECT_TRUE(graph.ok()) << (graph.ok() ? "" : graph.error().userMessage());
    return graph.ok() ? std::move(graph).value() : ir::Graph();
}

/// Token ids [1, n] spread over the vocabulary (seeded).
std::vector<std::int32_t> someIds(std::int64_t vocab, std::int64_t n, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const at::Tensor t = at::randint(vocab, {n}, gen, at::TensorOptions().dtype(at::kLong));
    std::vector<std::int32_t> ids;
    for (std::int64_t i = 0; i < n; ++i)
        ids.push_back(static_cast<std::int32_t>(t[i].item<std::int64_t>()));
    return ids;
}

/// Logits [n, vocab] of one full-window run of `ids`.
at::Tensor fullWindow(const ir::Graph& graph, const std::vector<std::int32_t>& ids,
                      const std::shared_ptr<exec::NodeHook>& hook = nullptr)
{
    exec::Executor executor(graph);
    if (hook)
        executor.addHook(hook);
    std::vector<std::int64_t> wide(ids.begin(), ids.end());
    auto out = executor.run(
        {at::tensor(wide, at::TensorOptions().dtype(at::kLong)).reshape({1, -1})});
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().userMessage());
    return out.ok() ? (*out)[0].select(0, 0).to(at::kFloat).contiguous() : at::Tensor();
}

at::Tensor row(const std::vector<float>& v) { return at::tensor(v); }

/// max |a - b| / max |b|.
double relative(const at::Tensor& a, const at::Tensor& b)
{
    return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

/// Prefill `prefill` positions (logits of each checked), then one position at a time: every
/// step's logits against the full window's row, within `tolerance` relative.
void expectStepsMatch(model::Decoder& decoder, const at::Tensor& full,
                      const std::vector<std::int32_t>& ids, std::size_t prefill, double tolerance)
{
    decoder.reset();
    auto first = decoder.append(std::span(ids.data(), prefill), /*allPositions=*/true);
    ASSERT_TRUE(first.ok()) << first.error().userMessage();
    const auto vocab = full.size(1);
    EXPECT_LE(relative(row(*first).reshape({-1, vocab}),
                       full.narrow(0, 0, static_cast<std::int64_t>(prefill))),
              tolerance);
    for (std::size_t t = prefill; t < ids.size(); ++t) {
        auto step = decoder.append(std::span(ids.data() + t, 1));
        ASSERT_TRUE(step.ok()) << step.error().userMessage();
        EXPECT_LE(relative(row(*step), full[static_cast<std::int64_t>(t)]), tolerance)
            << "position " << t;
        EXPECT_EQ(decoder.position(), static_cast<std::int64_t>(t + 1));
    }
}

} // namespace

TEST(Generate, CachedStepsEqualTheFullWindowForEveryFamily)
{
    // Mistral's window (5) and Gemma 2's windowed layer are shorter than the 12 positions, so
    // the cache's mask must drop the old keys as the full window's does.
    for (const std::string name :
         {"llama", "llama_tied", "llama3_rope", "mistral", "qwen2", "qwen3", "phi3", "gemma2",
          "gemma3", "gpt2"}) {
        SCOPED_TRACE(name);
        const ir::Graph graph = tinyGraph(name);
        auto decoder = model::Decoder::create(graph, {}, name);
        ASSERT_TRUE(decoder.ok()) << decoder.error().userMessage();
        const auto ids = someIds((*decoder)->vocabSize(), 12, 7);
        const at::Tensor full = fullWindow(graph, ids);
        expectStepsMatch(**decoder, full, ids, 4, 1e-5);
        // A prompt of one token, then eleven steps.
        expectStepsMatch(**decoder, full, ids, 1, 1e-5);
    }
}

TEST(Generate, CachedStepsWithRealKernelsEqualTheirFullWindow)
{
    // The quantized model's real kernels run on the decode path (one row) as on the window:
    // the int4 / NF4 GEMV rows, int8 weight-only, and per-token dynamic int8 (a per-tensor
    // dynamic range would depend on the rows run together, by design).
    // Every ISA level this CPU has (BITLENS_ISA only caps it): at scalar the NF4 row has no
    // own kernel and runs simulated, by design; above it every scheme runs a real kernel.
    const ir::Graph graph = tinyGraph("llama");
    for (const kernels::IsaLevel level : kernels::supportedIsaLevels())
    for (const std::string spec : {"w4-int4:group=32", "w4-nf4:group=32",
                                   "w4-int4:weight=int8,sym=true,per=channel",
                                   "dynamic-int8:act-per=token"}) {
        const kernels::ScopedIsaLevel isa(level);
        SCOPED_TRACE(spec + " at " + kernels::isaName(level));
        auto scheme = quant::parseScheme(spec);
        ASSERT_TRUE(scheme.ok()) << scheme.error().userMessage();
        auto q = quant::prepare(graph, *scheme, at::Tensor());
        ASSERT_TRUE(q.ok()) << q.error().userMessage();
        auto hook = quant::makeRealKernelHook(*q, c10::Device(c10::kCPU));
        auto decoder = model::Decoder::create(q->graph, {hook}, "llama");
        ASSERT_TRUE(decoder.ok()) << decoder.error().userMessage();
        const auto ids = someIds((*decoder)->vocabSize(), 10, 3);
        const at::Tensor full =
            fullWindow(q->graph, ids, quant::makeRealKernelHook(*q, c10::Device(c10::kCPU)));
        expectStepsMatch(**decoder, full, ids, 3, 1e-5);
        int real = 0;
        for (const auto& [layer, kernel] : hook->kernelsRun())
            real += kernel.starts_with("simulated") || kernel.starts_with("float32") ? 0 : 1;
        if (level != kernels::IsaLevel::Scalar)
            EXPECT_GT(real, 0) << "no layer ran a real kernel";
    }
}

TEST(Generate, GreedyGenerationIsTheArgmaxOfTheFullWindow)
{
    const ir::Graph graph = tinyGraph("qwen3");
    auto decoder = model::Decoder::create(graph, {}, "qwen3");
    ASSERT_TRUE(decoder.ok());
    const std::vector<std::int32_t> prompt = someIds((*decoder)->vocabSize(), 5, 11);
    model::GenerateOptions options;
    options.maxTokens = 8;
    options.keepLogits = true;
    auto g = model::generate(**decoder, prompt, options);
    ASSERT_TRUE(g.ok()) << g.error().userMessage();
    ASSERT_EQ(g->ids.size(), 8u);
    EXPECT_EQ(g->stopReason, "max_tokens");
    EXPECT_EQ(g->promptTokens, 5);
    EXPECT_EQ(g->decodeSteps, 7);
    EXPECT_GT(g->prefillTokensPerS(), 0.0);
    EXPECT_GT(g->decodeTokensPerS(), 0.0);
    std::vector<std::int32_t> all = prompt;
    all.insert(all.end(), g->ids.begin(), g->ids.end() - 1);
    const at::Tensor full = fullWindow(graph, all);
    for (std::size_t i = 0; i < g->ids.size(); ++i) {
        const auto at = static_cast<std::int64_t>(prompt.size() + i - 1);
        EXPECT_EQ(full[at].argmax().item<std::int64_t>(), g->ids[i]) << "token " << i;
        EXPECT_LE(relative(row(g->logits[i]), full[at]), 1e-5);
    }
    // A stop id ends the generation and is its last id.
    options.stopIds = {g->ids[2]};
    auto stopped = model::generate(**decoder, prompt, options);
    ASSERT_TRUE(stopped.ok());
    const auto firstStop =
        std::find(g->ids.begin(), g->ids.end(), g->ids[2]) - g->ids.begin() + 1;
    EXPECT_EQ(static_cast<std::int64_t>(stopped->ids.size()), firstStop);
    EXPECT_EQ(stopped->stopReason, "stop_token");
}

TEST(Generate, SamplerFollowsTemperatureTopKTopPAndItsSeed)
{
    const std::vector<float> logits = {1.0f, 3.0f, 2.5f, -1.0f, 3.0f, 0.0f};
    model::Sampler greedy({});
    EXPECT_EQ(greedy.next(logits), 1);  // the first of two maxima, as argmax
    auto draw = [&](model::SamplingOptions o, int n) {
        model::Sampler s(o);
        std::vector<std::int32_t> ids;
        for (int i = 0; i < n; ++i)
            ids.push_back(s.next(logits));
        return ids;
    };
    model::SamplingOptions o;
    o.temperature = 1.0;
    o.seed = 42;
    const auto a = draw(o, 400);
    EXPECT_EQ(a, draw(o, 400));  // one seed, one stream
    o.seed = 43;
    EXPECT_NE(a, draw(o, 400));
    EXPECT_EQ(std::set<std::int32_t>(a.begin(), a.end()).size(), 6u);  // every token reachable
    // Frequencies follow softmax(logits) (seeded, 400 draws: within 0.08 of each).
    at::Tensor p = at::softmax(at::tensor(logits), 0);
    for (std::int32_t id = 0; id < 6; ++id)
        EXPECT_NEAR(std::count(a.begin(), a.end(), id) / 400.0, p[id].item<double>(), 0.08)
            << "seed 42, id " << id;
    o.topK = 2;
    const auto k = draw(o, 200);
    EXPECT_EQ(std::set<std::int32_t>(k.begin(), k.end()), (std::set<std::int32_t>{1, 4}));
    o.topK = 0;
    o.topP = 0.5;  // 1 and 4 hold 0.36 each: the head reaching 0.5 is both
    const auto pp = draw(o, 200);
    EXPECT_EQ(std::set<std::int32_t>(pp.begin(), pp.end()), (std::set<std::int32_t>{1, 4}));
    o.topP = 0.2;
    const auto one = draw(o, 50);
    EXPECT_EQ(std::set<std::int32_t>(one.begin(), one.end()), (std::set<std::int32_t>{1}));
    // A low temperature sharpens towards the maxima.
    o.topP = 1.0;
    o.temperature = 0.05;
    const auto cold = draw(o, 200);
    EXPECT_EQ(std::set<std::int32_t>(cold.begin(), cold.end()), (std::set<std::int32_t>{1, 4}));
}

TEST(Generate, KlDivergenceOfLogitRows)
{
    const std::vector<float> p = {2.0f, 0.5f, -1.0f};
    EXPECT_DOUBLE_EQ(model::klDivergence(p, p), 0.0);
    const std::vector<float> shifted = {12.0f, 10.5f, 9.0f};  // the same distribution
    EXPECT_NEAR(model::klDivergence(p, shifted), 0.0, 1e-12);
    const std::vector<float> q = {0.0f, 0.0f, 0.0f};
    const at::Tensor lp = at::log_softmax(at::tensor(p).to(at::kDouble), 0);
    const double expected = (lp.exp() * (lp - std::log(1.0 / 3.0))).sum().item<double>();
    EXPECT_NEAR(model::klDivergence(p, q), expected, 1e-12);
}

TEST(Generate, RefusesWhatItCannotDecode)
{
    const ir::Graph bert = tinyGraph("bert");
    auto refused = model::Decoder::create(bert, {}, "bert.safetensors");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::Unsupported);
    EXPECT_EQ(refused.error().userMessage(),
              "error: bert.safetensors: generation needs a language model (this model's task is "
              "'embedding')");
    const ir::Graph graph = tinyGraph("llama");
    auto decoder = model::Decoder::create(graph, {}, "llama");
    ASSERT_TRUE(decoder.ok());
    const std::vector<std::int32_t> outside = {1, 64};
    auto bad = (*decoder)->append(outside);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message, "token id 64 is outside the vocabulary (0..63)");
    EXPECT_EQ((*decoder)->position(), 0);  // the cache is as it was
    // The context (max_position_embeddings 64) bounds prompt and generation together.
    const auto ids = someIds(64, 63, 1);
    model::GenerateOptions options;
    options.maxTokens = 10;
    auto g = model::generate(**decoder, ids, options);
    ASSERT_TRUE(g.ok()) << g.error().userMessage();
    // The prompt pass (positions 0..62) gives a token; its pass (position 63) gives the last.
    EXPECT_EQ(g->ids.size(), 2u);
    EXPECT_EQ(g->stopReason, "context_length");
    const auto tooLong = someIds(64, 65, 1);
    auto over = model::generate(**decoder, tooLong, options);
    ASSERT_FALSE(over.ok());
    EXPECT_EQ(over.error().message, "65 positions exceed the model's context length 64");
}
