// openModel on real model formats made in the test: a Hugging Face folder (config.json +
// model.safetensors + tokenizer), a GGUF llama with its own tokenizer, their corrupt variants,
// and text data cut into token rows for the model (model/model_data.h). Graph outputs are
// checked against transformers' (tests/data/hf/make_tiny.py).

#include "analysis/lm_metrics.h"
#include "exec/executor.h"
#include "io/dataset.h"
#include "io/file_util.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "model/model.h"
#include "model/hf_builders.h"
#include "model/model_data.h"
#include "quant/engine.h"
#include "quant/scheme.h"
#include "text/tokenizer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "temp_dir.h"

using namespace bitlens;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kHf = std::string(BITLENS_TEST_DATA) + "/hf/";
const std::string kText = std::string(BITLENS_TEST_DATA) + "/text/";

struct Golden {
    json config;
    std::map<std::string, at::Tensor> weights;
    std::map<std::string, at::Tensor> ref;
};

Golden loadGolden(const std::string& name)
{
    Golden g;
    std::ifstream in(kHf + name + ".json");
    g.config = json::parse(in);
    auto arrays = io::readNpz(kHf + name + ".npz");
    EXPECT_TRUE(arrays.ok()) << (arrays.ok() ? "" : arrays.error().userMessage());
    if (!arrays.ok())
        return g;
    for (auto& [key, t] : *arrays) {
        if (key.rfind("__", 0) == 0)
            g.ref[key.substr(2)] = t;
        else
            g.weights[key] = t.contiguous();
    }
    return g;
}

void writeText(const std::string& path, const std::string& text)
{
    ASSERT_TRUE(io::writeFileAtomic(path, text.data(), text.size()).ok());
}

/// A Hugging Face folder: config.json, model.safetensors and (optionally) a tokenizer file.
void writeHfFolder(const std::string& dir, const Golden& g, const std::string& tokenizerFile = {})
{
    writeText(dir + "/config.json", g.config.dump(1));
    auto r = io::writeSafetensors(g.weights, {{"format", "pt"}}, dir + "/model.safetensors");
    ASSERT_TRUE(r.ok()) << r.error().userMessage();
    if (!tokenizerFile.empty())
        fs::copy_file(kText + tokenizerFile, fs::path(dir) / fs::path(tokenizerFile).filename());
}

at::Tensor runFirst(const Model& model, const std::vector<at::Tensor>& inputs)
{
    exec::Executor executor(model.graph());
    auto out = executor.run(inputs);
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().userMessage());
    return out.ok() ? out->front() : at::Tensor();
}

double maxAbsDiff(const at::Tensor& a, const at::Tensor& b)
{
    if (!a.defined() || a.sizes() != b.sizes())
        return 1e9;
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

std::shared_ptr<Model> mustOpen(const std::string& path)
{
    auto model = openModel(path);
    EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().userMessage());
    return model.ok() ? *model : nullptr;
}

/// The smollm test vocabulary (600 tokens, 341 merges) as GGUF tokenizer keys.
void setGgufTokenizer(io::GgufWriter& w, const std::string& model = "gpt2")
{
    std::ifstream in(kText + "bpe_smollm.json");
    const json j = json::parse(in);
    std::vector<std::string> tokens(j["model"]["vocab"].size());
    for (const auto& [token, id] : j["model"]["vocab"].items())
        tokens[id.get<std::size_t>()] = token;
    std::vector<std::string> merges;
    for (const auto& m : j["model"]["merges"])
        merges.push_back(m.is_string() ? m.get<std::string>()
                                       : m[0].get<std::string>() + " " + m[1].get<std::string>());
    std::vector<std::int32_t> types(tokens.size(), 1);
    for (const auto& a : j["added_tokens"])
        types[a["id"].get<std::size_t>()] = 3;
    w.set("tokenizer.ggml.model", io::GgufValue::string(model));
    w.set("tokenizer.ggml.pre", io::GgufValue::string("smollm"));
    w.set("tokenizer.ggml.tokens", io::GgufValue::stringArray(tokens));
    w.set("tokenizer.ggml.merges", io::GgufValue::stringArray(merges));
    w.set("tokenizer.ggml.token_type", io::GgufValue::i32Array(types));
    w.set("tokenizer.ggml.bos_token_id", io::GgufValue::u32(1));
    w.set("tokenizer.ggml.eos_token_id", io::GgufValue::u32(2));
    w.set("tokenizer.ggml.padding_token_id", io::GgufValue::u32(2));
    w.set("tokenizer.ggml.add_bos_token", io::GgufValue::boolean(false));
}

/// The golden llama as a GGUF file: q/k rows permuted as llama.cpp's converter stores them;
/// `blockType` for every matrix whose rows are a multiple of 32 (the others stay F32).
void writeLlamaGguf(const std::string& path, const Golden& g, formats::GgmlType blockType,
                    const std::string& arch = "llama", bool tokenizer = true)
{
    const json& c = g.config;
    const std::int64_t heads = c["num_attention_heads"];
    const std::int64_t kvHeads = c["num_key_value_heads"];
    auto permute = [](const at::Tensor& w, std::int64_t n) {
        return w.reshape({n, 2, w.size(0) / n / 2, w.size(1)}).transpose(1, 2).reshape(w.sizes())
            .contiguous();
    };
    io::GgufWriter w;
    w.set("general.architecture", io::GgufValue::string(arch));
    w.set(arch + ".embedding_length", io::GgufValue::u32(c["hidden_size"].get<std::uint32_t>()));
    w.set(arch + ".block_count", io::GgufValue::u32(c["num_hidden_layers"].get<std::uint32_t>()));
    w.set(arch + ".attention.head_count", io::GgufValue::u32(static_cast<std::uint32_t>(heads)));
    w.set(arch + ".attention.head_count_kv",
          io::GgufValue::u32(static_cast<std::uint32_t>(kvHeads)));
    w.set(arch + ".rope.freq_base",
          io::GgufValue::f32(c["rope_parameters"]["rope_theta"].get<float>()));
    w.set(arch + ".attention.layer_norm_rms_epsilon",
          io::GgufValue::f32(c["rms_norm_eps"].get<float>()));
    w.set(arch + ".context_length",
          io::GgufValue::u32(c["max_position_embeddings"].get<std::uint32_t>()));
    w.set(arch + ".feed_forward_length",
          io::GgufValue::u32(c["intermediate_size"].get<std::uint32_t>()));
    if (tokenizer)
        setGgufTokenizer(w);
    auto add = [&](const std::string& name, const at::Tensor& t) {
        const bool block = t.dim() == 2 && t.size(1) % 32 == 0;
        auto r = w.addTensor(name, t, block ? blockType : formats::GgmlType::F32);
        ASSERT_TRUE(r.ok()) << name << ": " << r.error().userMessage();
    };
    add("token_embd.weight", g.weights.at("model.embed_tokens.weight"));
    add("output_norm.weight", g.weights.at("model.norm.weight"));
    add("output.weight", g.weights.at("lm_head.weight"));
    for (int i = 0; i < c["num_hidden_layers"].get<int>(); ++i) {
        const std::string l = "model.layers." + std::to_string(i) + ".";
        const std::string b = "blk." + std::to_string(i) + ".";
        add(b + "attn_norm.weight", g.weights.at(l + "input_layernorm.weight"));
        add(b + "attn_q.weight", permute(g.weights.at(l + "self_attn.q_proj.weight"), heads));
        add(b + "attn_k.weight", permute(g.weights.at(l + "self_attn.k_proj.weight"), kvHeads));
        add(b + "attn_v.weight", g.weights.at(l + "self_attn.v_proj.weight"));
        add(b + "attn_output.weight", g.weights.at(l + "self_attn.o_proj.weight"));
        add(b + "ffn_norm.weight", g.weights.at(l + "post_attention_layernorm.weight"));
        add(b + "ffn_gate.weight", g.weights.at(l + "mlp.gate_proj.weight"));
        add(b + "ffn_up.weight", g.weights.at(l + "mlp.up_proj.weight"));
        add(b + "ffn_down.weight", g.weights.at(l + "mlp.down_proj.weight"));
    }
    auto r = w.write(path);
    ASSERT_TRUE(r.ok()) << r.error().userMessage();
}

std::vector<std::uint8_t> readAll(const std::string& path)
{
    auto bytes = io::readFileBytes(path);
    EXPECT_TRUE(bytes.ok());
    return bytes.ok() ? *bytes : std::vector<std::uint8_t>{};
}

void writeBytes(const std::string& path, const std::vector<std::uint8_t>& bytes)
{
    ASSERT_TRUE(io::writeFileAtomic(path, bytes.data(), bytes.size()).ok());
}

/// A safetensors file from a header JSON and data bytes, as written by hand.
std::vector<std::uint8_t> safetensorsBytes(const std::string& header, std::size_t dataBytes)
{
    std::vector<std::uint8_t> out(8);
    std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i)
        out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(n >> (8 * i));
    out.insert(out.end(), header.begin(), header.end());
    out.resize(out.size() + dataBytes, 0);
    return out;
}

} // namespace

TEST(OpenModel, HuggingFaceFolderAndFileMatchTransformers)
{
    test::TempDir dir;
    const Golden g = loadGolden("llama");
    writeHfFolder(dir.path(), g);
    for (const std::string& path : {dir.path(), dir.file("model.safetensors")}) {
        SCOPED_TRACE(path);
        auto model = mustOpen(path);
        ASSERT_TRUE(model);
        const ModelSummary& s = model->summary();
        EXPECT_EQ(s.format, "safetensors");
        EXPECT_EQ(s.architecture, "llama");
        EXPECT_EQ(s.task, "lm");
        EXPECT_EQ(s.metric, "perplexity");
        EXPECT_TRUE(s.note.empty());
        EXPECT_TRUE(s.tokenizerPath.empty());
        EXPECT_FALSE(model->tokenizer());
        // The layer table lists the transformer's projections with their shapes (1 token).
        bool found = false;
        for (const auto& layer : s.layers)
            if (layer.name == "layer.1.mlp.down_proj") {
                found = true;
                EXPECT_EQ(layer.op, "MatMul");
                EXPECT_EQ(layer.params, 48 * 32);
                EXPECT_EQ(layer.outputShape, (std::vector<std::int64_t>{1, 1, 32}));
            }
        EXPECT_TRUE(found);
        EXPECT_LT(maxAbsDiff(runFirst(*model, {g.ref.at("input_ids")}), g.ref.at("output")), 1e-5);
    }
}

TEST(OpenModel, SafetensorsWeightsStayMapped)
{
    test::TempDir dir;
    const Golden g = loadGolden("bert");
    writeHfFolder(dir.path(), g);
    auto model = mustOpen(dir.path());
    ASSERT_TRUE(model);
    EXPECT_EQ(model->summary().architecture, "bert");
    EXPECT_EQ(model->summary().metric, "embedding_cosine");
    // float32 parameters are views into the mapped file, not copies: their data lies inside
    // the mapping of model.safetensors that /proc/self/maps lists.
    const at::Tensor* w = model->graph().initializer("encoder.layer.0.attention.self.query.weight");
    ASSERT_TRUE(w);
    const auto address = reinterpret_cast<std::uintptr_t>(w->data_ptr());
    const std::string file = fs::canonical(dir.file("model.safetensors")).string();
    std::ifstream maps("/proc/self/maps");
    bool inside = false;
    for (std::string line; std::getline(maps, line);) {
        if (line.size() < file.size() || line.compare(line.size() - file.size(), file.size(), file))
            continue;
        const auto dash = line.find('-');
        const auto lo = std::stoull(line.substr(0, dash), nullptr, 16);
        const auto hi = std::stoull(line.substr(dash + 1, line.find(' ') - dash - 1), nullptr, 16);
        inside = inside || (address >= lo && address < hi);
    }
    EXPECT_TRUE(inside) << "the weight was copied out of the mapping";
    const at::Tensor out = runFirst(*model, {g.ref.at("input_ids"), g.ref.at("attention_mask")});
    EXPECT_LT(maxAbsDiff(out, g.ref.at("output")), 1e-4);
}

namespace {

/// Whether `address` lies in a mapping of `file` listed in /proc/self/maps.
bool insideMapping(const void* address, const std::string& file)
{
    const auto a = reinterpret_cast<std::uintptr_t>(address);
    const std::string canonical = fs::canonical(file).string();
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        if (line.size() < canonical.size() ||
            line.compare(line.size() - canonical.size(), canonical.size(), canonical))
            continue;
        const auto dash = line.find('-');
        const auto lo = std::stoull(line.substr(0, dash), nullptr, 16);
        const auto hi = std::stoull(line.substr(dash + 1, line.find(' ') - dash - 1), nullptr, 16);
        if (a >= lo && a < hi)
            return true;
    }
    return false;
}

Golden withWeights(const Golden& g, at::ScalarType type)
{
    Golden out = g;
    for (auto& [name, t] : out.weights)
        t = t.to(type).contiguous();
    return out;
}

quant::QuantizedModel mustPrepare(const ir::Graph& graph, const std::string& preset)
{
    auto scheme = quant::parseScheme(preset);
    EXPECT_TRUE(scheme.ok());
    Progress progress;
    auto prepared = quant::prepare(graph, *scheme, at::Tensor(), progress, CancelToken());
    EXPECT_TRUE(prepared.ok()) << (prepared.ok() ? "" : prepared.error().userMessage());
    return prepared.ok() ? std::move(prepared).value() : quant::QuantizedModel();
}

} // namespace

TEST(OpenModel, Bf16WeightsStayMappedInTheirWidthAndRunAsFloat32)
{
    // A bf16 folder (what today's LLMs ship) against the same values stored as float32.
    const Golden g = loadGolden("llama");
    test::TempDir dir16("bf16");
    test::TempDir dir32("f32");
    writeHfFolder(dir16.path(), withWeights(g, at::kBFloat16));
    Golden wide = withWeights(withWeights(g, at::kBFloat16), at::kFloat);
    writeHfFolder(dir32.path(), wide);
    auto m16 = mustOpen(dir16.path());
    auto m32 = mustOpen(dir32.path());
    ASSERT_TRUE(m16 && m32);
    // Every weight of the file is a bf16 view into the mapping, read as float32 by the graph.
    const ir::Graph& graph = m16->graph();
    int mapped = 0;
    for (const auto& [name, t] : graph.initializers) {
        if (name.rfind("const.", 0) == 0 || name.rfind("rotary.", 0) == 0 || !t.is_floating_point())
            continue;
        SCOPED_TRACE(name);
        EXPECT_EQ(t.scalar_type(), at::kBFloat16);
        EXPECT_EQ(graph.widenOnRead.count(name), 1u);
        EXPECT_TRUE(insideMapping(t.data_ptr(), dir16.file("model.safetensors")));
        ++mapped;
    }
    EXPECT_EQ(mapped, static_cast<int>(g.weights.size()));
    // The summary counts the same parameters at (nearly) half the bytes: the graph's own
    // constants (rotary frequencies, shape vectors) stay as they are.
    EXPECT_EQ(m16->summary().params, m32->summary().params);
    EXPECT_LT(m16->summary().bytes, m32->summary().bytes * 6 / 10);
    EXPECT_GT(m16->summary().bytes, m32->summary().bytes * 4 / 10);
    // Widened per node, the logits are those of the float32 file bit for bit, whether the
    // executor keeps the widened copies or drops each after its node.
    const at::Tensor out32 = runFirst(*m32, {g.ref.at("input_ids")});
    const at::Tensor out16 = runFirst(*m16, {g.ref.at("input_ids")});
    EXPECT_TRUE(at::equal(out16, out32));
    exec::ExecOptions noCache;
    noCache.widenCacheBytes = 0;
    exec::Executor dropping(graph, noCache);
    auto outDropping = dropping.run({g.ref.at("input_ids")});
    ASSERT_TRUE(outDropping.ok());
    EXPECT_TRUE(at::equal(outDropping->front(), out32));
    EXPECT_LT(maxAbsDiff(out16, g.ref.at("output")), 0.05);  // bf16 weights vs float32 ones
    // Quantizing reads the same float32 values: the same codes, the same model size.
    const auto q16 = mustPrepare(graph, "w4-int4");
    const auto q32 = mustPrepare(m32->graph(), "w4-int4");
    ASSERT_EQ(q16.layers.size(), q32.layers.size());
    for (const auto& [name, lq] : q32.layers) {
        SCOPED_TRACE(name);
        ASSERT_EQ(q16.layers.count(name), 1u);
        const at::Tensor& fq16 = q16.layers.at(name).weightFq;
        ASSERT_EQ(fq16.defined(), lq.weightFq.defined());  // kept-float layers have none
        if (lq.weightFq.defined())
            EXPECT_TRUE(at::equal(fq16, lq.weightFq));
        if (lq.weightFloat.defined())
            EXPECT_TRUE(at::equal(q16.layers.at(name).weightFloat, lq.weightFloat));
    }
    EXPECT_EQ(q16.bytesFloat, q32.bytesFloat);
    EXPECT_EQ(q16.bytesQuantized, q32.bytesQuantized);
    EXPECT_TRUE(q16.graph.widenOnRead.empty());
}

TEST(OpenModel, WidenedGraphKeepsATiedEmbeddingOneTensor)
{
    const Golden g = withWeights(loadGolden("llama_tied"), at::kBFloat16);
    test::TempDir dir;
    writeHfFolder(dir.path(), g);
    auto model = mustOpen(dir.path());
    ASSERT_TRUE(model);
    auto wide = ir::widened(model->graph());
    ASSERT_TRUE(wide.ok());
    const at::Tensor& embed = wide->initializers.at("model.embed_tokens.weight");
    const at::Tensor& head = wide->initializers.at("lm_head.weight");
    EXPECT_EQ(embed.scalar_type(), at::kFloat);
    EXPECT_TRUE(embed.storage().is_alias_of(head.storage()));
    EXPECT_TRUE(at::equal(head, embed.t()));
    EXPECT_TRUE(at::equal(embed, model->graph().initializers.at("model.embed_tokens.weight")
                                     .to(at::kFloat)));
}

TEST(OpenModel, NanInA16BitWeightIsNamedWhenTheWeightIsRead)
{
    Golden g = withWeights(loadGolden("llama"), at::kHalf);
    const std::string bad = "model.layers.1.mlp.down_proj.weight";
    ASSERT_EQ(g.weights.count(bad), 1u);
    g.weights[bad].view({-1})[5] = std::numeric_limits<float>::quiet_NaN();
    // A small model is traced at open, which reads every weight: refused there, by name.
    test::TempDir dir;
    writeHfFolder(dir.path(), g);
    auto opened = openModel(dir.path());
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.error().path, dir.path());
    EXPECT_NE(opened.error().message.find("'" + bad + "' holds NaN or infinite values"),
              std::string::npos)
        << opened.error().message;
    // Building the graph reads no 16-bit weight (a large model is not traced): the check is
    // the first read's, when the executor widens the weight or a pass quantizes it.
    auto graph = model::buildFromHfConfig(g.config, g.weights, "nan.safetensors");
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    exec::Executor executor(*graph);
    auto out = executor.run({g.ref.at("input_ids")});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.error().message.find("its weight tensor '" + bad +
                                       "' holds NaN or infinite values"),
              std::string::npos)
        << out.error().message;
    auto scheme = quant::parseScheme("w4-int4");
    ASSERT_TRUE(scheme.ok());
    Progress progress;
    auto prepared = quant::prepare(*graph, *scheme, at::Tensor(), progress, CancelToken());
    ASSERT_FALSE(prepared.ok());
    EXPECT_EQ(prepared.error().code, ErrorCode::BadInput);
    EXPECT_NE(prepared.error().message.find(bad), std::string::npos)
        << prepared.error().message;
}

TEST(OpenModel, ShapeInferenceCoversTheLanguageModelsItSkipsTracingFor)
{
    // Models past 1 GiB of weights are summarized from ir::inferShapes alone when it derives
    // every node's output; the builders' graphs must be such graphs, with the traced shapes.
    for (const std::string name : {"llama", "llama_tied", "llama3_rope", "gpt2", "bert"}) {
        SCOPED_TRACE(name);
        const Golden g = withWeights(loadGolden(name), at::kBFloat16);
        test::TempDir dir;
        writeHfFolder(dir.path(), g);
        auto model = mustOpen(dir.path());
        ASSERT_TRUE(model);
        auto inferred = ir::inferShapes(model->graph());
        auto traced = exec::traceShapes(model->graph());
        ASSERT_TRUE(inferred.ok() && traced.ok());
        for (const auto& node : model->graph().nodes)
            for (const auto& out : node.outputs) {
                if (out.empty())
                    continue;
                ASSERT_EQ(inferred->count(out), 1u) << node.name << " -> " << out;
                EXPECT_EQ(inferred->at(out), traced->at(out)) << out;
            }
    }
}

TEST(OpenModel, BertFolderCarriesItsTokenizerAndTextBecomesPaddedLines)
{
    test::TempDir dir;
    const Golden g = loadGolden("bert");
    writeHfFolder(dir.path(), g, "wp_vocab.txt");
    fs::rename(dir.file("wp_vocab.txt"), dir.file("vocab.txt"));
    auto model = mustOpen(dir.path());
    ASSERT_TRUE(model);
    ASSERT_TRUE(model->tokenizer());
    EXPECT_EQ(model->tokenizer()->kind(), "wordpiece");
    EXPECT_EQ(model->summary().tokenizerPath, dir.file("vocab.txt"));

    writeText(dir.file("lines.txt"), "In the beginning\n\nGod created the heaven and the earth.\n"
                                     "And the earth was without form\n");
    auto data = loadModelData(*model, dir.file("lines.txt"), "test");
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    EXPECT_EQ(data->kind, "text");
    ASSERT_EQ(data->inputs.dim(), 2);
    EXPECT_EQ(data->inputs.size(0), 3);  // the empty line is skipped
    // Each row is the tokenizer's encoding, padded only up to the longest line.
    std::int64_t longest = 0;
    const std::vector<std::string> lines = {"In the beginning",
                                            "God created the heaven and the earth.",
                                            "And the earth was without form"};
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const auto ids = model->tokenizer()->encode(lines[i]).ids;
        longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(ids.size()));
        for (std::size_t k = 0; k < ids.size(); ++k)
            EXPECT_EQ(data->inputs[static_cast<std::int64_t>(i)][static_cast<std::int64_t>(k)]
                          .item<std::int64_t>(),
                      ids[k]);
    }
    EXPECT_EQ(data->inputs.size(1), longest);
    ModelDataOptions two;
    two.limit = 2;
    auto limited = loadModelData(*model, dir.file("lines.txt"), "test", two);
    ASSERT_TRUE(limited.ok());
    EXPECT_EQ(limited->inputs.size(0), 2);

    // A line longer than the model's 24 positions is cut to them (default length), and an
    // explicit longer length is refused.
    std::string longLine;
    for (int i = 0; i < 40; ++i)
        longLine += "the earth ";
    writeText(dir.file("long.txt"), longLine + "\n");
    auto cut = loadModelData(*model, dir.file("long.txt"), "test");
    ASSERT_TRUE(cut.ok()) << cut.error().userMessage();
    EXPECT_EQ(cut->inputs.size(1), 24);
    EXPECT_EQ(cut->inputs[0][23].item<std::int64_t>(), *model->tokenizer()->tokenId("[SEP]"));
    ModelDataOptions tooLong;
    tooLong.seqLen = 64;
    auto refused = loadModelData(*model, dir.file("long.txt"), "test", tooLong);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::Usage);
}

TEST(OpenModel, GgufLlamaMatchesTransformersAndCarriesItsTokenizer)
{
    test::TempDir dir;
    const Golden g = loadGolden("llama");
    writeLlamaGguf(dir.file("tiny.gguf"), g, formats::GgmlType::F32);
    auto model = mustOpen(dir.file("tiny.gguf"));
    ASSERT_TRUE(model);
    const ModelSummary& s = model->summary();
    EXPECT_EQ(s.format, "gguf");
    EXPECT_EQ(s.architecture, "llama");
    EXPECT_EQ(s.task, "lm");
    EXPECT_TRUE(s.note.empty()) << s.note;  // all F32: the float baseline is the model
    EXPECT_LT(maxAbsDiff(runFirst(*model, {g.ref.at("input_ids")}), g.ref.at("output")), 1e-5);

    // The GGUF vocabulary tokenizes as the tokenizer.json it came from.
    ASSERT_TRUE(model->tokenizer());
    EXPECT_EQ(s.tokenizerPath, dir.file("tiny.gguf"));
    auto reference = text::loadTokenizer(kText + "bpe_smollm.json");
    ASSERT_TRUE(reference.ok());
    auto fromPath = text::loadTokenizer(dir.file("tiny.gguf"));
    ASSERT_TRUE(fromPath.ok()) << fromPath.error().userMessage();
    for (const std::string text : {"In the beginning God created 1234 heavens.",
                                   "<|im_start|>user\nHello there<|im_end|>", "  spaces\t\ttabs"}) {
        EXPECT_EQ(model->tokenizer()->encode(text).ids, (*reference)->encode(text).ids) << text;
        EXPECT_EQ((*fromPath)->encode(text).ids, (*reference)->encode(text).ids) << text;
    }
    EXPECT_EQ(model->tokenizer()->padId(), 2);
    EXPECT_EQ(model->tokenizer()->bosId(), std::optional<std::int32_t>(1));
}

TEST(OpenModel, QuantizedGgufNotesItsFloatBaseline)
{
    test::TempDir dir;
    const Golden g = loadGolden("llama");
    writeLlamaGguf(dir.file("q4.gguf"), g, formats::GgmlType::Q4_1);
    auto model = mustOpen(dir.file("q4.gguf"));
    ASSERT_TRUE(model);
    const std::string& note = model->note();
    EXPECT_NE(note.find("float baseline = dequantized Q4_1 weights"), std::string::npos) << note;
    EXPECT_NE(note.find("F32"), std::string::npos) << note;
    // Dequantized 4-bit weights: close to the original model, not equal to it.
    const double diff = maxAbsDiff(runFirst(*model, {g.ref.at("input_ids")}), g.ref.at("output"));
    EXPECT_GT(diff, 1e-4);
    EXPECT_LT(diff, 1.0);
}

TEST(OpenModel, LanguageModelTextBecomesWholeWindows)
{
    test::TempDir dir;
    const Golden g = loadGolden("llama");
    writeLlamaGguf(dir.file("tiny.gguf"), g, formats::GgmlType::F32);
    auto model = mustOpen(dir.file("tiny.gguf"));
    ASSERT_TRUE(model);
    std::string text;
    for (int i = 0; i < 40; ++i)
        text += "In the beginning God created the heaven and the earth " + std::to_string(i) +
                ".\n";
    writeText(dir.file("stream.txt"), text);
    const auto ids = model->tokenizer()->encode(text, {.addSpecialTokens = false}).ids;
    ASSERT_GT(ids.size(), 100u);

    ModelDataOptions options;
    options.seqLen = 16;
    options.limit = 3;
    auto data = loadModelData(*model, dir.file("stream.txt"), "test", options);
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    ASSERT_EQ(data->inputs.sizes(), (at::IntArrayRef{3, 16}));
    for (std::int64_t k = 0; k < 48; ++k)
        EXPECT_EQ(data->inputs[k / 16][k % 16].item<std::int64_t>(), ids[static_cast<std::size_t>(k)]);

    // --tokens: enough windows to cover the budget.
    options.limit = 0;
    options.maxTokens = 40;
    auto budget = loadModelData(*model, dir.file("stream.txt"), "test", options);
    ASSERT_TRUE(budget.ok());
    EXPECT_EQ(budget->inputs.size(0), 3);

    // All of the text: the last, partial window is dropped (its padding would be scored).
    options.maxTokens = 0;
    options.limit = 1000;
    auto all = loadModelData(*model, dir.file("stream.txt"), "test", options);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->inputs.size(0), static_cast<std::int64_t>(ids.size()) / 16);

    // Windows longer than the model's context (64) are refused.
    options.seqLen = 128;
    auto tooLong = loadModelData(*model, dir.file("stream.txt"), "test", options);
    ASSERT_FALSE(tooLong.ok());
    EXPECT_EQ(tooLong.error().code, ErrorCode::Usage);
    EXPECT_NE(tooLong.error().message.find("context of 64"), std::string::npos);
}

TEST(OpenModel, TextNeedsATokenizer)
{
    test::TempDir dir;
    const Golden g = loadGolden("llama");
    writeHfFolder(dir.path(), g);
    writeText(dir.file("a.txt"), "some text\n");
    auto model = mustOpen(dir.path());
    ASSERT_TRUE(model);
    auto data = loadModelData(*model, dir.file("a.txt"), "test");
    ASSERT_FALSE(data.ok());
    EXPECT_EQ(data.error().code, ErrorCode::Unsupported);
    EXPECT_NE(data.error().message.find("has no tokenizer"), std::string::npos);
}

TEST(OpenModel, UnknownArchitecturesAreUnsupportedAndNamed)
{
    test::TempDir dir;
    Golden g = loadGolden("llama");
    g.config["model_type"] = "t5";
    writeHfFolder(dir.path(), g);
    auto hf = openModel(dir.path());
    ASSERT_FALSE(hf.ok());
    EXPECT_EQ(hf.error().code, ErrorCode::Unsupported);
    EXPECT_NE(hf.error().userMessage().find("model_type 't5'"), std::string::npos)
        << hf.error().userMessage();

    writeLlamaGguf(dir.file("m.gguf"), loadGolden("llama"), formats::GgmlType::F32, "mamba");
    auto gguf = openModel(dir.file("m.gguf"));
    ASSERT_FALSE(gguf.ok());
    EXPECT_EQ(gguf.error().code, ErrorCode::Unsupported);
    EXPECT_NE(gguf.error().userMessage().find("architecture 'mamba'"), std::string::npos);
    EXPECT_NE(gguf.error().userMessage().find("m.gguf"), std::string::npos);

    // A SentencePiece vocabulary is named as what it is.
    io::GgufWriter w;
    setGgufTokenizer(w, "llama");
    ASSERT_TRUE(w.write(dir.file("spm.gguf")).ok());
    auto spm = text::loadTokenizer(dir.file("spm.gguf"));
    ASSERT_FALSE(spm.ok());
    EXPECT_EQ(spm.error().code, ErrorCode::Unsupported);
    EXPECT_NE(spm.error().message.find("'llama'"), std::string::npos);
}

TEST(OpenModel, MissingPiecesAreNamed)
{
    test::TempDir dir;
    // A folder without config.json, and weights without one beside them.
    auto empty = openModel(dir.path());
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(empty.error().code, ErrorCode::BadInput);
    EXPECT_NE(empty.error().message.find("without config.json"), std::string::npos);
    const Golden g = loadGolden("llama");
    ASSERT_TRUE(io::writeSafetensors(g.weights, {}, dir.file("w.safetensors")).ok());
    auto noConfig = openModel(dir.file("w.safetensors"));
    ASSERT_FALSE(noConfig.ok());
    EXPECT_EQ(noConfig.error().code, ErrorCode::Unsupported);
    EXPECT_NE(noConfig.error().message.find("no config.json"), std::string::npos);
    // A tensor the architecture needs is missing: the error names it.
    Golden partial = g;
    partial.weights.erase("model.layers.1.mlp.up_proj.weight");
    test::TempDir dir2("partial");
    writeHfFolder(dir2.path(), partial);
    auto missing = openModel(dir2.path());
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::BadInput);
    EXPECT_NE(missing.error().message.find("model.layers.1.mlp.up_proj.weight"),
              std::string::npos)
        << missing.error().message;
}

/// Every defect must come back as an error naming the file: never a crash, never a model.
TEST(OpenModel, CorruptFilesAreRefusedWithTheFileAndReason)
{
    test::TempDir dir;
    const Golden g = loadGolden("llama");
    writeHfFolder(dir.path(), g);
    writeLlamaGguf(dir.file("ok.gguf"), g, formats::GgmlType::Q4_1);
    const auto st = readAll(dir.file("model.safetensors"));
    const auto gguf = readAll(dir.file("ok.gguf"));
    ASSERT_GT(st.size(), 1000u);
    ASSERT_GT(gguf.size(), 1000u);

    struct Case {
        std::string what;
        std::string file;  ///< written into the folder (config.json beside it)
        std::vector<std::uint8_t> bytes;
        ErrorCode code;
    };
    std::vector<Case> cases;
    for (const std::size_t keep : {std::size_t{4}, std::size_t{100}, st.size() / 2, st.size() - 1})
        cases.push_back({"safetensors cut to " + std::to_string(keep) + " bytes",
                         "model.safetensors",
                         std::vector<std::uint8_t>(st.begin(), st.begin() + static_cast<long>(keep)),
                         ErrorCode::BadInput});
    cases.push_back({"data_offsets past the end", "model.safetensors",
                     safetensorsBytes(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                      8),
                     ErrorCode::BadInput});
    cases.push_back({"dims that overflow", "model.safetensors",
                     safetensorsBytes(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,)"
                                      R"(4294967296],"data_offsets":[0,16]}})",
                                      16),
                     ErrorCode::BadInput});
    cases.push_back({"header length past the end", "model.safetensors",
                     [] {
                         auto b = safetensorsBytes("{}", 0);
                         b[5] = 0x7f;
                         return b;
                     }(),
                     ErrorCode::BadInput});
    cases.push_back({"unknown dtype", "model.safetensors",
                     safetensorsBytes(R"({"w":{"dtype":"Q7","shape":[2],"data_offsets":[0,2]}})",
                                      2),
                     ErrorCode::BadInput});
    for (const std::size_t keep : {std::size_t{3}, std::size_t{24}, gguf.size() / 3, gguf.size() - 1})
        cases.push_back({"gguf cut to " + std::to_string(keep) + " bytes", "bad.gguf",
                         std::vector<std::uint8_t>(gguf.begin(), gguf.begin() + static_cast<long>(keep)),
                         ErrorCode::BadInput});
    {
        auto lying = gguf;
        lying[8] = 0xff;  // tensor count low byte: far more tensors than the file holds
        lying[12] = 0x10;
        cases.push_back({"gguf tensor count that lies", "bad.gguf", lying, ErrorCode::BadInput});
    }

    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        test::TempDir caseDir("case");
        writeText(caseDir.file("config.json"), g.config.dump());
        writeBytes(caseDir.file(c.file), c.bytes);
        const std::string path = caseDir.file(c.file);
        auto model = openModel(path);
        ASSERT_FALSE(model.ok());
        const Error& e = model.error();
        EXPECT_TRUE(e.code == ErrorCode::BadInput || e.code == ErrorCode::Unsupported)
            << e.userMessage();
        if (c.code == ErrorCode::BadInput && c.what != "unknown dtype")
            EXPECT_EQ(e.code, ErrorCode::BadInput) << e.userMessage();
        EXPECT_NE(e.userMessage().find(c.file), std::string::npos) << e.userMessage();
        EXPECT_GT(e.message.size(), 10u);
    }
}
