// Transformers, LLMs and RNNs: graphs built from Hugging Face / PyTorch weights against the
// outputs of transformers and torch (tests/data/hf/make_tiny.py), the new sequence ops against
// LibTorch, ONNX round trips, the sequence metrics, and the errors a user sees.

#include "analysis/lm_metrics.h"
#include "analysis/quant_report.h"
#include "exec/executor.h"
#include "io/dataset.h"
#include "io/onnx.h"
#include "ir/graph.h"
#include "model/hf_builders.h"
#include "quant/engine.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>

using namespace bitlens;
using ir::OpKind;
using nlohmann::json;

namespace {

const std::string kDir = std::string(BITLENS_TEST_DATA) + "/hf/";

struct Golden {
    json config;
    std::map<std::string, at::Tensor> weights;
    std::map<std::string, at::Tensor> ref;  ///< "__name" arrays without the prefix
};

Golden loadGolden(const std::string& name)
{
    Golden g;
    std::ifstream in(kDir + name + ".json");
    g.config = json::parse(in);
    auto arrays = io::readNpz(kDir + name + ".npz");
    EXPECT_TRUE(arrays.ok()) << (arrays.ok() ? "" : arrays.error().userMessage());
    if (!arrays.ok())
        return g;
    for (auto& [key, t] : *arrays) {
        if (key.rfind("__", 0) == 0)
            g.ref[key.substr(2)] = t;
        else
            g.weights[key] = t;
    }
    return g;
}

std::vector<at::Tensor> run(const ir::Graph& graph, const std::vector<at::Tensor>& inputs)
{
    exec::Executor executor(graph);
    auto out = executor.run(inputs);
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().userMessage());
    return out.ok() ? *out : std::vector<at::Tensor>{};
}

double maxAbsDiff(const at::Tensor& a, const at::Tensor& b)
{
    EXPECT_EQ(a.sizes(), b.sizes());
    if (a.sizes() != b.sizes())
        return 1e9;
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

/// Elements of the graph's own constants (rotary inv_freq, attention scale, mask values): the
/// float initializers that are not model parameters (rotary_local: Gemma 3's sliding layers).
std::int64_t constantElements(const ir::Graph& graph)
{
    std::int64_t n = 0;
    for (const auto& [name, t] : graph.initializers)
        if (t.is_floating_point() &&
            (name.rfind("const.", 0) == 0 || name.rfind("rotary", 0) == 0))
            n += t.numel();
    return n;
}

ir::Graph mustBuild(const Golden& g, const std::string& name)
{
    auto graph = model::buildFromHfConfig(g.config, g.weights, name);
    EXPECT_TRUE(graph.ok()) << (graph.ok() ? "" : graph.error().userMessage());
    return graph.ok() ? std::move(graph).value() : ir::Graph();
}

/// Writes the graph to ONNX bytes and reads it back.
ir::Graph roundTrip(const ir::Graph& graph)
{
    auto bytes = io::writeOnnx(graph);
    EXPECT_TRUE(bytes.ok()) << (bytes.ok() ? "" : bytes.error().userMessage());
    auto back = io::readOnnx(*bytes, "roundtrip.onnx");
    EXPECT_TRUE(back.ok()) << (back.ok() ? "" : back.error().userMessage());
    return back.ok() ? std::move(back).value() : ir::Graph();
}

at::Tensor randn(std::vector<std::int64_t> shape, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return at::randn(shape, gen);
}

} // namespace

// ---- Models against Hugging Face ---------------------------------------------------------------

TEST(HfBuilders, BertMatchesTransformers)
{
    const Golden g = loadGolden("bert");
    const ir::Graph graph = mustBuild(g, "bert");
    EXPECT_EQ(graph.metadata.at("task"), "embedding");
    const auto out = run(graph, {g.ref.at("input_ids"), g.ref.at("attention_mask")});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-5);
    // Sentence embeddings pooled as sentence-transformers does.
    EXPECT_LT(maxAbsDiff(analysis::meanPool(out[0], g.ref.at("attention_mask")),
                         g.ref.at("pooled")),
              1e-5);
    // Every projection is a weight layer the engine quantizes: q, k, v, o, up, down per layer.
    int layers = 0;
    for (const auto& node : graph.nodes)
        layers += quant::isQuantizable(graph, node) ? 1 : 0;
    EXPECT_EQ(layers, 2 * 6);
    EXPECT_EQ(graph.nodes.front().name, "embeddings.word");
}

TEST(HfBuilders, LlamaMatchesTransformers)
{
    const Golden g = loadGolden("llama");
    const ir::Graph graph = mustBuild(g, "llama");
    EXPECT_EQ(graph.metadata.at("task"), "lm");
    const auto out = run(graph, {g.ref.at("input_ids")});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-5);
    // q, k, v, o, gate, up, down per layer plus the LM head.
    int layers = 0;
    for (const auto& node : graph.nodes)
        layers += quant::isQuantizable(graph, node) ? 1 : 0;
    EXPECT_EQ(layers, 2 * 7 + 1);
    std::int64_t hfParams = 0;
    for (const auto& [name, t] : g.weights)
        hfParams += t.numel();
    EXPECT_EQ(graph.parameterCount(), hfParams + constantElements(graph));
}

TEST(HfBuilders, Llama3RopeScalingMatchesTransformers)
{
    // Llama 3.1's rope_type "llama3" with a kept, a blended and two stretched frequencies.
    const Golden g = loadGolden("llama3_rope");
    ASSERT_EQ(g.config.at("rope_parameters").at("rope_type"), "llama3");
    const ir::Graph graph = mustBuild(g, "llama3_rope");
    const auto out = run(graph, {g.ref.at("input_ids")});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-5);
    // The same file read as written before transformers 5 (rope_scaling + rope_theta).
    Golden old = g;
    old.config["rope_scaling"] = old.config["rope_parameters"];
    old.config["rope_theta"] = old.config["rope_parameters"]["rope_theta"];
    old.config.erase("rope_parameters");
    const auto outOld = run(mustBuild(old, "llama3_rope"), {g.ref.at("input_ids")});
    ASSERT_EQ(outOld.size(), 1u);
    EXPECT_TRUE(at::equal(outOld[0], out[0]));
    // Unscaled rope gives other logits: the scaling is what the golden tests.
    Golden plain = g;
    plain.config.erase("rope_parameters");
    const auto outPlain = run(mustBuild(plain, "llama3_rope"), {g.ref.at("input_ids")});
    ASSERT_EQ(outPlain.size(), 1u);
    EXPECT_GT(maxAbsDiff(outPlain[0], g.ref.at("output")), 1e-3);
    // Scaling types BitLens does not implement are refused by name.
    Golden yarn = g;
    yarn.config["rope_parameters"]["rope_type"] = "yarn";
    auto refused = model::buildFromHfConfig(yarn.config, yarn.weights, "yarn");
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("rope_type 'yarn' is not supported"),
              std::string::npos)
        << refused.error().message;
}

TEST(HfBuilders, LlamaShapedFamiliesMatchTransformers)
{
    // Mistral (sliding window 5 under a 12-token input), Qwen2 (random q/k/v biases), Qwen3
    // (per-head q/k RMSNorm, head_dim 16 != hidden / heads), Phi-3 (fused qkv_proj and
    // gate_up_proj, read as row views), Gemma 2 (scaled embeddings, (1 + w) sandwich norms,
    // tanh GeGLU, soft-capped scores and logits, a window on layer 0 only): logits as
    // transformers gives them; Gemma 3 (q / k norms, per-layer-type rope) too.
    for (const std::string name : {"mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"}) {
        SCOPED_TRACE(name);
        const Golden g = loadGolden(name);
        const ir::Graph graph = mustBuild(g, name);
        EXPECT_EQ(graph.metadata.at("model_type"), name == "gemma3" ? "gemma3_text" : name);
        EXPECT_EQ(graph.metadata.at("task"), "lm");
        const auto out = run(graph, {g.ref.at("input_ids")});
        ASSERT_EQ(out.size(), 1u);
        const double scale = g.ref.at("output").abs().max().item<double>();
        EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-4 * scale);
        std::int64_t hfParams = 0;
        for (const auto& [w, t] : g.weights)
            hfParams += t.numel();
        // Gemma's (1 + w) norms take the place of the norm weights, one for one.
        EXPECT_EQ(graph.parameterCount(), hfParams + constantElements(graph));
        int layers = 0;
        for (const auto& node : graph.nodes)
            layers += quant::isQuantizable(graph, node) ? 1 : 0;
        EXPECT_EQ(layers, 2 * 7 + 1);
    }
    // What each family adds is what the golden tests: without it the logits differ.
    auto without = [](const std::string& name, const std::function<void(Golden&)>& change) {
        Golden g = loadGolden(name);
        change(g);
        auto graph = model::buildFromHfConfig(g.config, g.weights, name);
        EXPECT_TRUE(graph.ok()) << (graph.ok() ? "" : graph.error().userMessage());
        if (!graph.ok())
            return 0.0;
        const auto out = run(*graph, {g.ref.at("input_ids")});
        return out.empty() ? 0.0 : maxAbsDiff(out[0], g.ref.at("output"));
    };
    EXPECT_GT(without("mistral", [](Golden& g) { g.config["sliding_window"] = nullptr; }), 1e-3);
    EXPECT_GT(without("qwen2",
                      [](Golden& g) {
                          for (auto& [w, t] : g.weights)
                              if (w.ends_with("_proj.bias"))
                                  t = at::zeros_like(t);
                      }),
              1e-3);
    EXPECT_GT(without("qwen3",
                      [](Golden& g) {
                          for (auto& [w, t] : g.weights)
                              if (w.ends_with("q_norm.weight") || w.ends_with("k_norm.weight"))
                                  t = at::ones_like(t);
                      }),
              1e-3);
    // Phi-3's q, k, v, gate and up are views into its fused tensors, not copies.
    {
        const Golden g = loadGolden("phi3");
        const ir::Graph graph = mustBuild(g, "phi3");
        const at::Tensor& fused = g.weights.at("model.layers.0.self_attn.qkv_proj.weight");
        const at::Tensor& k = graph.initializers.at("model.layers.0.self_attn.k_proj.weight");
        EXPECT_TRUE(k.storage().is_alias_of(fused.storage()));
        EXPECT_TRUE(at::equal(k.t(), fused.narrow(0, 32, 16)));
    }
    EXPECT_GT(without("gemma2", [](Golden& g) { g.config["final_logit_softcapping"] = nullptr; }),
              1e-3);
    EXPECT_GT(without("gemma2", [](Golden& g) { g.config["attn_logit_softcapping"] = nullptr; }),
              1e-3);
    EXPECT_GT(without("gemma2",
                      [](Golden& g) {
                          g.config["layer_types"] = {"full_attention", "full_attention"};
                      }),
              1e-3);
    // Gemma 3: the full layer's own rope (theta 1e6, linear x2) and the q / k norms matter.
    EXPECT_GT(without("gemma3",
                      [](Golden& g) {
                          g.config["rope_parameters"]["full_attention"] =
                              g.config["rope_parameters"]["sliding_attention"];
                      }),
              1e-3);
    EXPECT_GT(without("gemma3",
                      [](Golden& g) {
                          for (auto& [w, t] : g.weights)
                              if (w.ends_with("q_norm.weight") || w.ends_with("k_norm.weight"))
                                  t = at::zeros_like(t);  // Gemma norms scale by 1 + w
                      }),
              1e-3);
    // Qwen's per-layer sliding windows are refused by name, not run as full attention.
    Golden windowed = loadGolden("qwen2");
    windowed.config["use_sliding_window"] = true;
    auto refused = model::buildFromHfConfig(windowed.config, windowed.weights, "qwen2");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::Unsupported);
    EXPECT_NE(refused.error().message.find("use_sliding_window"), std::string::npos);
}

TEST(HfBuilders, TiedLlamaSharesTheEmbeddingWithTheHead)
{
    const Golden g = loadGolden("llama_tied");
    ASSERT_EQ(g.weights.count("lm_head.weight"), 0u);
    const ir::Graph graph = mustBuild(g, "llama_tied");
    const auto out = run(graph, {g.ref.at("input_ids")});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-5);
    // One tensor for both: parameters counted once.
    std::int64_t hfParams = 0;
    for (const auto& [name, t] : g.weights)
        hfParams += t.numel();
    EXPECT_EQ(graph.parameterCount(), hfParams + constantElements(graph));
    EXPECT_EQ(graph.initializer("lm_head.weight")->data_ptr(),
              graph.initializer("model.embed_tokens.weight")->data_ptr());
}

TEST(HfBuilders, Gpt2MatchesTransformers)
{
    const Golden g = loadGolden("gpt2");
    const ir::Graph graph = mustBuild(g, "gpt2");
    const auto out = run(graph, {g.ref.at("input_ids")});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-5);
}

/// A Hugging Face llama golden as llama.cpp's converter names and lays out its tensors: q/k
/// rows of each head reordered for interleaved rope (w.reshape(heads, 2, hd/2, in).swapaxes(1,
/// 2)), and its hyper-parameters as GGUF keys.
static std::pair<std::map<std::string, at::Tensor>, json> ggufLlama(const Golden& g)
{
    const json& c = g.config;
    const std::int64_t heads = c["num_attention_heads"];
    const std::int64_t kvHeads = c["num_key_value_heads"];
    auto permute = [](const at::Tensor& w, std::int64_t n) {
        return w.reshape({n, 2, w.size(0) / n / 2, w.size(1)}).transpose(1, 2).reshape(w.sizes())
            .contiguous();
    };
    std::map<std::string, at::Tensor> gguf;
    gguf["token_embd.weight"] = g.weights.at("model.embed_tokens.weight");
    gguf["output_norm.weight"] = g.weights.at("model.norm.weight");
    gguf["output.weight"] = g.weights.at("lm_head.weight");
    for (int i = 0; i < c["num_hidden_layers"].get<int>(); ++i) {
        const std::string l = "model.layers." + std::to_string(i) + ".";
        const std::string b = "blk." + std::to_string(i) + ".";
        gguf[b + "attn_norm.weight"] = g.weights.at(l + "input_layernorm.weight");
        gguf[b + "attn_q.weight"] = permute(g.weights.at(l + "self_attn.q_proj.weight"), heads);
        gguf[b + "attn_k.weight"] = permute(g.weights.at(l + "self_attn.k_proj.weight"), kvHeads);
        gguf[b + "attn_v.weight"] = g.weights.at(l + "self_attn.v_proj.weight");
        gguf[b + "attn_output.weight"] = g.weights.at(l + "self_attn.o_proj.weight");
        gguf[b + "ffn_norm.weight"] = g.weights.at(l + "post_attention_layernorm.weight");
        gguf[b + "ffn_gate.weight"] = g.weights.at(l + "mlp.gate_proj.weight");
        gguf[b + "ffn_up.weight"] = g.weights.at(l + "mlp.up_proj.weight");
        gguf[b + "ffn_down.weight"] = g.weights.at(l + "mlp.down_proj.weight");
    }
    const json hparams = {{"llama.embedding_length", c["hidden_size"]},
                          {"llama.block_count", c["num_hidden_layers"]},
                          {"llama.attention.head_count", heads},
                          {"llama.attention.head_count_kv", kvHeads},
                          {"llama.rope.freq_base", c["rope_parameters"]["rope_theta"]},
                          {"llama.attention.layer_norm_rms_epsilon", c["rms_norm_eps"]},
                          {"llama.context_length", c["max_position_embeddings"]},
                          {"llama.feed_forward_length", c["intermediate_size"]}};
    return {gguf, hparams};
}

TEST(HfBuilders, GgufNamedLlamaMatchesTransformers)
{
    const Golden g = loadGolden("llama");
    auto [gguf, hparams] = ggufLlama(g);
    auto graph = model::buildLlamaFromGguf(hparams, gguf, "tiny.gguf");
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    const auto out = run(*graph, {g.ref.at("input_ids")});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-5);

    // The permutation matters: a file whose q rows were not permuted gives other logits.
    gguf["blk.0.attn_q.weight"] = g.weights.at("model.layers.0.self_attn.q_proj.weight");
    auto wrong = model::buildLlamaFromGguf(hparams, gguf, "tiny.gguf");
    ASSERT_TRUE(wrong.ok());
    EXPECT_GT(maxAbsDiff(run(*wrong, {g.ref.at("input_ids")})[0], g.ref.at("output")), 1e-2);

    // Errors name the GGUF tensor.
    gguf.erase("blk.1.ffn_up.weight");
    auto missing = model::buildLlamaFromGguf(hparams, gguf, "tiny.gguf");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::BadInput);
    EXPECT_NE(missing.error().message.find("'blk.1.ffn_up.weight' is missing"), std::string::npos)
        << missing.error().message;
}

TEST(HfBuilders, GgufLlama31RopeFreqsMatchTransformers)
{
    // A Llama 3.1 GGUF carries its rope scaling as rope_freqs.weight: one factor per rotary
    // frequency that llama.cpp divides the frequency by. The factors as llama.cpp's converter
    // (convert_hf_to_gguf.py, LlamaModel) derives them from rope_scaling: 1 where the
    // wavelength is short, `factor` where long, 1 / ((1 - smooth) / factor + smooth) between.
    const Golden g = loadGolden("llama3_rope");
    auto [gguf, hparams] = ggufLlama(g);
    const json& r = g.config["rope_parameters"];
    const double theta = r["rope_theta"], factor = r["factor"], low = r["low_freq_factor"],
                 high = r["high_freq_factor"], old = r["original_max_position_embeddings"];
    const std::int64_t hd = g.config["head_dim"];
    std::vector<float> factors;
    for (std::int64_t i = 0; i < hd; i += 2) {
        const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / static_cast<double>(hd));
        const double wavelen = 2.0 * M_PI / freq;
        if (wavelen < old / high)
            factors.push_back(1.0f);
        else if (wavelen > old / low)
            factors.push_back(static_cast<float>(factor));
        else {
            const double smooth = (old / wavelen - low) / (high - low);
            factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
        }
    }
    gguf["rope_freqs.weight"] = at::tensor(factors);
    auto graph = model::buildLlamaFromGguf(hparams, gguf, "llama31.gguf");
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    const auto out = run(*graph, {g.ref.at("input_ids")});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")),
              1e-4 * g.ref.at("output").abs().max().item<float>());
    // Without the factors the logits differ: they are what the golden's scaling needs.
    gguf.erase("rope_freqs.weight");
    auto plain = model::buildLlamaFromGguf(hparams, gguf, "llama31.gguf");
    ASSERT_TRUE(plain.ok());
    EXPECT_GT(maxAbsDiff(run(*plain, {g.ref.at("input_ids")})[0], g.ref.at("output")), 1e-3);
    // A factor table of the wrong size is bad input naming the tensor.
    gguf["rope_freqs.weight"] = at::ones({hd});
    auto wrong = model::buildLlamaFromGguf(hparams, gguf, "llama31.gguf");
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.error().code, ErrorCode::BadInput);
    EXPECT_NE(wrong.error().message.find("rope_freqs.weight"), std::string::npos);
}

TEST(HfBuilders, GraphsSurviveOnnxRoundTrip)
{
    for (const char* name : {"bert", "llama", "gpt2"}) {
        SCOPED_TRACE(name);
        const Golden g = loadGolden(name);
        const ir::Graph graph = mustBuild(g, name);
        const ir::Graph back = roundTrip(graph);
        std::vector<at::Tensor> inputs{g.ref.at("input_ids")};
        if (std::string(name) == "bert")
            inputs.push_back(g.ref.at("attention_mask"));
        const auto out = run(back, inputs);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-5);
        EXPECT_EQ(back.metadata.at("task"), graph.metadata.at("task"));
    }
}

// ---- RNNs ---------------------------------------------------------------------------------------

TEST(HfBuilders, TorchLstmAndGruStacksMatchPyTorch)
{
    for (const char* name : {"lstm", "gru"}) {
        SCOPED_TRACE(name);
        const Golden g = loadGolden(name);
        auto graph = model::buildRnnFromTorch(g.config, g.weights, name);
        ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
        EXPECT_EQ(graph->metadata.at("task"), "sequence");
        auto out = run(*graph, {g.ref.at("input")});
        const bool lstm = std::string(name) == "lstm";
        ASSERT_EQ(out.size(), lstm ? 3u : 2u);
        EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-5);
        EXPECT_LT(maxAbsDiff(out[1], g.ref.at("h_n")), 1e-5);
        if (lstm)
            EXPECT_LT(maxAbsDiff(out[2], g.ref.at("c_n")), 1e-5);
        // The ONNX writer and reader keep LSTM / GRU and their attributes.
        out = run(roundTrip(*graph), {g.ref.at("input")});
        ASSERT_FALSE(out.empty());
        EXPECT_LT(maxAbsDiff(out[0], g.ref.at("output")), 1e-5);
    }
}

TEST(HfBuilders, OnnxLstmExportedByTorchRuns)
{
    auto graph = io::readOnnxFile(kDir + "lstm_onnx.onnx");
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    auto ref = io::readNpz(kDir + "lstm_onnx.npz");
    ASSERT_TRUE(ref.ok());
    const auto out = run(*graph, {ref->at("input")});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_LT(maxAbsDiff(out[0], ref->at("output")), 1e-5);
    EXPECT_LT(maxAbsDiff(out[1], ref->at("h_n")), 1e-5);
    EXPECT_LT(maxAbsDiff(out[2], ref->at("c_n")), 1e-5);
}

// ---- Errors -------------------------------------------------------------------------------------

TEST(HfBuilders, BadConfigsAndWeightsNameTheProblem)
{
    Golden g = loadGolden("llama");
    json config = g.config;
    config["model_type"] = "mamba";
    auto r = model::buildFromHfConfig(config, g.weights, "m/config.json");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_NE(r.error().message.find("model_type 'mamba'"), std::string::npos);

    auto weights = g.weights;
    weights.erase("model.layers.1.mlp.down_proj.weight");
    r = model::buildFromHfConfig(g.config, weights, "m/model.safetensors");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    EXPECT_EQ(r.error().path, "m/model.safetensors");
    EXPECT_EQ(r.error().message, "tensor 'model.layers.1.mlp.down_proj.weight' is missing");

    weights = g.weights;
    weights["model.layers.0.self_attn.k_proj.weight"] = at::zeros({32, 32});
    r = model::buildFromHfConfig(g.config, weights, "m");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "tensor 'model.layers.0.self_attn.k_proj.weight' has shape [32, 32], expected "
              "[16, 32]");

    weights = g.weights;
    weights["model.norm.weight"] = at::full({32}, std::nan(""));
    r = model::buildFromHfConfig(g.config, weights, "m");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("NaN"), std::string::npos);

    config = g.config;
    config["num_key_value_heads"] = 3;
    r = model::buildFromHfConfig(config, g.weights, "m");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);

    config = g.config;
    config.erase("hidden_size");
    r = model::buildFromHfConfig(config, g.weights, "m");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "config.json: \"hidden_size\" is missing");

    r = model::buildFromHfConfig(json::array(), g.weights, "m");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
}

TEST(HfBuilders, TokenIdOutsideTheVocabularyNamesTheNode)
{
    const Golden g = loadGolden("llama");
    const ir::Graph graph = mustBuild(g, "llama");
    exec::Executor executor(graph);
    auto out = executor.run({at::full({1, 4}, 64, at::TensorOptions().dtype(at::kLong))});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.error().message.find("node 'embed_tokens' (Gather): index 64 is out of range"),
              std::string::npos)
        << out.error().message;
}

// ---- Metrics ------------------------------------------------------------------------------------

TEST(LmMetrics, PerplexityMatchesTransformersSlidingWindow)
{
    const Golden g = loadGolden("llama");
    const ir::Graph graph = mustBuild(g, "llama");
    analysis::SequenceMetricOptions options;
    options.overlap = g.ref.at("ppl_overlap").item<std::int64_t>();
    options.batchSize = 3;  // windows split across batches: the first-window rule must hold
    auto ppl = analysis::evaluatePerplexity(graph, g.ref.at("ppl_windows"), options);
    ASSERT_TRUE(ppl.ok()) << ppl.error().userMessage();
    EXPECT_EQ(ppl->name, "perplexity");
    EXPECT_FALSE(ppl->higherIsBetter);
    EXPECT_EQ(ppl->samples, g.ref.at("ppl_tokens").item<std::int64_t>());
    EXPECT_NEAR(ppl->value, g.ref.at("ppl").item<double>(), 1e-4 * ppl->value);

    // Without the overlap rule every target counts, which is a different number.
    options.overlap = 0;
    auto all = analysis::evaluatePerplexity(graph, g.ref.at("ppl_windows"), options);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->samples, 4 * 15);
    EXPECT_GT(std::abs(all->value - ppl->value), 1e-3);
}

TEST(LmMetrics, MetricFollowsTheTaskThroughAnalysis)
{
    const Golden g = loadGolden("llama");
    const ir::Graph graph = mustBuild(g, "llama");
    io::Dataset data;
    data.path = "windows.npy";
    data.inputs = g.ref.at("ppl_windows").to(at::kFloat);  // as loadDataset hands them over
    auto scheme = quant::parseScheme("w4-int4:group=16");
    ASSERT_TRUE(scheme.ok());
    auto prepared = quant::prepare(graph, *scheme, at::Tensor());
    ASSERT_TRUE(prepared.ok()) << prepared.error().userMessage();
    EXPECT_EQ(prepared->layers.size(), 15u);
    analysis::AnalysisOptions options;
    auto report = analysis::analyze(graph, *prepared, data.inputs, &data, options);
    ASSERT_TRUE(report.ok()) << report.error().userMessage();
    ASSERT_TRUE(report->metricFloat && report->metricQuantized);
    EXPECT_EQ(report->metricFloat->name, "perplexity");
    // Non-overlapping windows here: every target of every window counts.
    EXPECT_EQ(report->metricFloat->samples, 4 * 15);
    EXPECT_NE(report->metricQuantized->value, report->metricFloat->value);
    EXPECT_EQ(report->layers.size(), 15u);
    for (const auto& layer : report->layers)
        EXPECT_TRUE(std::isfinite(layer.accumulated.sqnrDb)) << layer.name;
}

TEST(LmMetrics, LlmPresetsKeepTheTiedHeadFloatAndSaySo)
{
    const Golden g = loadGolden("llama_tied");
    const ir::Graph graph = mustBuild(g, "llama_tied");
    for (const std::string spec : {"w4-nf4:group=16", "llm-int8"}) {
        auto prepared = quant::prepare(graph, quant::parseScheme(spec).value(), at::Tensor());
        ASSERT_TRUE(prepared.ok()) << prepared.error().userMessage();
        const auto& head = prepared->layers.at("lm_head");
        EXPECT_TRUE(head.config.keepFloat) << spec;
        EXPECT_NE(head.note.find("head=quantize"), std::string::npos) << head.note;
        EXPECT_FALSE(prepared->layers.at("layer.0.mlp.down_proj").config.keepFloat) << spec;
    }
    auto all = quant::prepare(graph, quant::parseScheme("w4-nf4:group=16,head=quantize").value(),
                              at::Tensor());
    ASSERT_TRUE(all.ok()) << all.error().userMessage();
    EXPECT_FALSE(all->layers.at("lm_head").config.keepFloat);
    EXPECT_TRUE(all->layers.at("lm_head").note.empty());
}

TEST(LmMetrics, EmbeddingCosineAndOutputAgreement)
{
    const Golden g = loadGolden("bert");
    const ir::Graph graph = mustBuild(g, "bert");
    io::Dataset data;
    data.path = "sentences.npy";
    data.inputs = g.ref.at("input_ids");
    auto floatMetric = analysis::evaluateMetric(graph, data);
    ASSERT_TRUE(floatMetric.ok()) << floatMetric.error().userMessage();
    EXPECT_EQ(floatMetric->name, "embedding_cosine");
    EXPECT_DOUBLE_EQ(floatMetric->value, 1.0);
    auto scheme = quant::parseScheme("dynamic-int8");
    ASSERT_TRUE(scheme.ok());
    auto prepared = quant::prepare(graph, *scheme, at::Tensor());
    ASSERT_TRUE(prepared.ok());
    auto q = analysis::evaluateMetric(graph, data, c10::Device(c10::kCPU), 256,
                                      quant::makeQuantHook(*prepared));
    ASSERT_TRUE(q.ok()) << q.error().userMessage();
    EXPECT_LT(q->value, 1.0);
    EXPECT_GT(q->value, 0.99);

    // The LSTM: agreement of the arg-max over the output features, float vs int8.
    const Golden l = loadGolden("lstm");
    auto rnn = model::buildRnnFromTorch(l.config, l.weights, "lstm");
    ASSERT_TRUE(rnn.ok());
    io::Dataset seq;
    seq.path = "seq.npy";
    seq.inputs = randn({16, 9, 5}, 3);
    auto agree = analysis::evaluateMetric(*rnn, seq);
    ASSERT_TRUE(agree.ok());
    EXPECT_EQ(agree->name, "output_agreement");
    EXPECT_DOUBLE_EQ(agree->value, 1.0);
}

// ---- Single ops ---------------------------------------------------------------------------------

namespace {
ir::Graph oneNode(OpKind op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                  std::map<std::string, at::Tensor> consts, ir::Attributes attrs = {})
{
    ir::Graph g;
    g.inputs.push_back({"x", ir::DType::Float32, {}});
    for (auto& [name, t] : consts)
        g.initializers[name] = t;
    ir::Node n;
    n.name = "op";
    n.op = op;
    n.inputs = std::move(inputs);
    n.outputs = outputs;
    n.attrs = std::move(attrs);
    g.nodes.push_back(n);
    for (const auto& o : outputs)
        g.outputs.push_back({o, ir::DType::Float32, {}});
    return g;
}

at::Tensor i64(std::vector<std::int64_t> v)
{
    return at::tensor(v, at::TensorOptions().dtype(at::kLong)).clone();
}
} // namespace

TEST(SequenceOps, SliceGatherSplitFollowOnnx)
{
    const at::Tensor x = at::arange(24, at::TensorOptions().dtype(at::kFloat)).reshape({2, 3, 4});
    // Negative step, clamped ends (INT64_MIN / MAX as exporters write them).
    auto g = oneNode(OpKind::Slice, {"x", "s", "e", "a", "st"}, {"y"},
                     {{"s", i64({-1, 0})},
                      {"e", i64({std::numeric_limits<std::int64_t>::min(),
                                 std::numeric_limits<std::int64_t>::max()})},
                      {"a", i64({2, 1})},
                      {"st", i64({-2, 2})}});
    auto y = run(g, {x});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(at::equal(y[0], x.index_select(2, i64({3, 1})).slice(1, 0, 3, 2)));

    ir::Attributes axis1;
    axis1.set("axis", std::int64_t{1});
    g = oneNode(OpKind::Gather, {"x", "i"}, {"y"}, {{"i", i64({-1, 0})}}, axis1);
    y = run(g, {x});
    EXPECT_TRUE(at::equal(y[0], x.index_select(1, i64({2, 0}))));

    ir::Attributes axis2;
    axis2.set("axis", std::int64_t{2});
    g = oneNode(OpKind::Split, {"x", "sp"}, {"a", "b"}, {{"sp", i64({1, 3})}}, axis2);
    y = run(g, {x});
    ASSERT_EQ(y.size(), 2u);
    EXPECT_TRUE(at::equal(y[1], x.slice(2, 1, 4)));
    g = oneNode(OpKind::Split, {"x", "sp"}, {"a", "b"}, {{"sp", i64({1, 2})}}, axis2);
    exec::Executor bad(g);
    auto r = bad.run({x});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("split sizes add up to 3, dimension 2 has 4"),
              std::string::npos)
        << r.error().message;
}

TEST(SequenceOps, RotaryEmbeddingInterleavedAndPartial)
{
    // [B=1, heads=2, S=3, hd=6], rotary over the first 4 channels, interleaved pairs.
    const at::Tensor x = randn({1, 2, 3, 6}, 5);
    const at::Tensor angles = randn({3, 2}, 6);
    ir::Attributes a;
    a.set("interleaved", std::int64_t{1});
    a.set("rotary_embedding_dim", std::int64_t{4});
    auto g = oneNode(OpKind::RotaryEmbedding, {"x", "cos", "sin", "pos"}, {"y"},
                     {{"cos", angles.cos()}, {"sin", angles.sin()}, {"pos", i64({2, 0, 1})
                                                                         .reshape({1, 3})}},
                     a);
    const auto y = run(g, {x});
    ASSERT_EQ(y.size(), 1u);
    // Pair (2j, 2j+1) at position s rotates by angle[pos[s], j]; channels 4, 5 pass through.
    at::Tensor expected = x.clone();
    const std::int64_t pos[3] = {2, 0, 1};
    for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 3; ++s)
            for (int j = 0; j < 2; ++j) {
                const double th = angles[pos[s]][j].item<double>();
                const double x1 = x[0][h][s][2 * j].item<double>();
                const double x2 = x[0][h][s][2 * j + 1].item<double>();
                expected[0][h][s][2 * j] = x1 * std::cos(th) - x2 * std::sin(th);
                expected[0][h][s][2 * j + 1] = x1 * std::sin(th) + x2 * std::cos(th);
            }
    EXPECT_LT(maxAbsDiff(y[0], expected), 1e-5);
}

TEST(SequenceOps, NormsMatchLibTorch)
{
    const at::Tensor x = randn({2, 5, 8}, 7);
    const at::Tensor w = randn({8}, 8);
    const at::Tensor b = randn({8}, 9);
    ir::Attributes a;
    a.set("epsilon", 1e-6);
    auto g = oneNode(OpKind::LayerNorm, {"x", "w", "b"}, {"y"}, {{"w", w}, {"b", b}}, a);
    EXPECT_TRUE(at::equal(run(g, {x})[0], at::layer_norm(x, {8}, w, b, 1e-6)));
    g = oneNode(OpKind::RMSNorm, {"x", "w"}, {"y"}, {{"w", w}}, a);
    const at::Tensor rms = w * (x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-6));
    EXPECT_TRUE(at::equal(run(g, {x})[0], rms));
}
