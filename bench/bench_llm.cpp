// Language models in BitLens' executor (`make bench`): one forward pass over token windows of
// a random-initialised Llama the size of SmolLM2-135M (hidden 576, 30 layers, 9 heads, 3 K/V
// heads, intermediate 1536, vocab 49152) built by model::buildFromHfConfig, and of a tiny one.
// Counters: seconds per window, tokens per second, and the share of time per op kind (where the
// time goes), measured with a per-node timer on extra runs after the timed loop.

#include "exec/executor.h"
#include "model/hf_builders.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <optional>

namespace {

using namespace bitlens;
using nlohmann::json;

json llamaConfig(std::int64_t hidden, std::int64_t layers, std::int64_t heads, std::int64_t kv,
                 std::int64_t inter, std::int64_t vocab)
{
    return {{"model_type", "llama"},       {"hidden_size", hidden},
            {"num_hidden_layers", layers}, {"num_attention_heads", heads},
            {"num_key_value_heads", kv},   {"intermediate_size", inter},
            {"vocab_size", vocab},         {"max_position_embeddings", 8192},
            {"rms_norm_eps", 1e-5},        {"rope_theta", 100000.0},
            {"tie_word_embeddings", true}};
}

/// Random weights with HF names and shapes for a config, scaled like an initialiser would.
std::map<std::string, at::Tensor> randomLlamaWeights(const json& c)
{
    const std::int64_t h = c["hidden_size"];
    const std::int64_t heads = c["num_attention_heads"];
    const std::int64_t kv = c["num_key_value_heads"];
    const std::int64_t hd = h / heads;
    const std::int64_t inter = c["intermediate_size"];
    const std::int64_t vocab = c["vocab_size"];
    std::map<std::string, at::Tensor> w;
    auto r = [](std::vector<std::int64_t> shape) { return at::randn(shape) * 0.02; };
    w["model.embed_tokens.weight"] = r({vocab, h});
    w["model.norm.weight"] = at::ones({h});
    for (std::int64_t i = 0; i < c["num_hidden_layers"].get<std::int64_t>(); ++i) {
        const std::string l = "model.layers." + std::to_string(i) + ".";
        w[l + "input_layernorm.weight"] = at::ones({h});
        w[l + "post_attention_layernorm.weight"] = at::ones({h});
        w[l + "self_attn.q_proj.weight"] = r({heads * hd, h});
        w[l + "self_attn.k_proj.weight"] = r({kv * hd, h});
        w[l + "self_attn.v_proj.weight"] = r({kv * hd, h});
        w[l + "self_attn.o_proj.weight"] = r({h, heads * hd});
        w[l + "mlp.gate_proj.weight"] = r({inter, h});
        w[l + "mlp.up_proj.weight"] = r({inter, h});
        w[l + "mlp.down_proj.weight"] = r({h, inter});
    }
    return w;
}

const ir::Graph& smolLm2Sized()
{
    static const ir::Graph graph = [] {
        const json c = llamaConfig(576, 30, 9, 3, 1536, 49152);
        auto g = model::buildFromHfConfig(c, randomLlamaWeights(c), "smollm2-sized");
        return g ? std::move(g).value() : ir::Graph();
    }();
    return graph;
}

const ir::Graph& tinyLlama()
{
    static const ir::Graph graph = [] {
        const json c = llamaConfig(32, 2, 4, 2, 48, 64);
        auto g = model::buildFromHfConfig(c, randomLlamaWeights(c), "tiny");
        return g ? std::move(g).value() : ir::Graph();
    }();
    return graph;
}

/// Accumulates wall time per op kind.
class OpTimer : public exec::NodeHook {
public:
    using Clock = std::chrono::steady_clock;
    void beforeNode(const ir::Node&, std::vector<at::Tensor>&) override { m_start = Clock::now(); }
    void afterNode(const ir::Node& node, std::vector<at::Tensor>&) override
    {
        m_seconds[std::string(ir::opKindName(node.op))] +=
            std::chrono::duration<double>(Clock::now() - m_start).count();
    }
    std::map<std::string, double> m_seconds;

private:
    Clock::time_point m_start;
};

void runWindows(benchmark::State& state, const ir::Graph& graph, std::int64_t vocab)
{
    if (graph.nodes.empty()) {
        state.SkipWithError("graph did not build");
        return;
    }
    c10::InferenceMode guard;
    const std::int64_t batch = state.range(0);
    const std::int64_t seq = state.range(1);
    at::set_num_threads(static_cast<int>(state.range(2)));
    exec::Executor executor(graph);
    const at::Tensor ids = at::randint(vocab, {batch, seq}, at::TensorOptions().dtype(at::kLong));
    for (auto _ : state) {
        auto out = executor.forward({ids});
        benchmark::DoNotOptimize(out.front().data_ptr());
    }
    state.counters["s_per_window"] = benchmark::Counter(
        static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate |
                                        benchmark::Counter::kInvert);
    state.counters["tokens_per_s"] = benchmark::Counter(
        static_cast<double>(batch * seq), benchmark::Counter::kIsIterationInvariantRate);
    // Where the time goes: share per op kind over two timed runs.
    auto timer = std::make_shared<OpTimer>();
    executor.addHook(timer);
    for (int i = 0; i < 2; ++i)
        (void)executor.forward({ids});
    double total = 0.0;
    for (const auto& [op, s] : timer->m_seconds)
        total += s;
    for (const auto& [op, s] : timer->m_seconds)
        if (s / total >= 0.01)
            state.counters["share_" + op] = s / total;
}

void BM_SmolLm2SizedWindow(benchmark::State& state) { runWindows(state, smolLm2Sized(), 49152); }
// batch, window tokens, threads
BENCHMARK(BM_SmolLm2SizedWindow)
    ->Args({1, 512, 2})
    ->Args({1, 512, 1})
    ->Args({4, 512, 2})
    ->Args({1, 128, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(5.0);

void BM_TinyLlamaWindow(benchmark::State& state) { runWindows(state, tinyLlama(), 64); }
BENCHMARK(BM_TinyLlamaWindow)->Args({1, 512, 2})->Args({8, 64, 2})->UseRealTime();

} // namespace
