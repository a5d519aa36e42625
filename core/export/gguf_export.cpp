#include "export/gguf_export.h"

#include "exec/executor.h"
#include "export/consumer.h"
#include "export/verify_runs.h"
#include "io/file_util.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "model/model.h"
#include "formats/ggml_quants.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

namespace bitlens::exporting {

namespace {

using formats::GgmlType;

std::string fmt(double value)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", value);
    return buf;
}


/// LLAMA_FTYPE of a file whose projections are mostly `type`.
std::uint32_t fileType(const std::optional<GgmlType>& type)
{
    if (!type)
        return 0;  // ALL_F32
    if (*type == GgmlType::MXFP4)
        return 38;  // MOSTLY_MXFP4_MOE (llama.cpp's only MXFP4 file type)
    switch (*type) {
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q4_1: return 3;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q4_K: return 14;  // Q4_K_S: every projection Q4_K
    case GgmlType::Q6_K: return 18;
    default: return 0;
    }
}

/// The graph's hyper-parameter `key` (written by the llama builder).
struct Hparams {
    const ir::Graph& g;
    const std::string& path;

    std::string text(const std::string& key) const
    {
        auto it = g.metadata.find(key);
        if (it == g.metadata.end())
            throw Error::unsupported(path, "the model carries no '" + key +
                                               "' (GGUF export writes llama graphs BitLens "
                                               "built from a Hugging Face or GGUF llama)");
        return it->second;
    }
    std::int64_t integer(const std::string& key) const { return std::stoll(text(key)); }
    double number(const std::string& key) const { return std::stod(text(key)); }
};

/// hf rows (h, s, j) -> llama.cpp's interleaved rope layout (h, j, s), hd = 2 * (hd / 2).
at::Tensor permuteForRope(const at::Tensor& rows, std::int64_t heads)
{
    const std::int64_t out = rows.size(0);
    const std::int64_t in = rows.size(1);
    const std::int64_t hd = out / heads;
    return rows.reshape({heads, 2, hd / 2, in}).transpose(1, 2).reshape({out, in}).contiguous();
}

/// Round trip of `values` through `type` (rows along the last dimension) equals them exactly.
bool exactIn(const at::Tensor& values, GgmlType type)
{
    if (values.size(-1) % formats::ggmlTraits(type).blockSize != 0)
        return false;
    // In chunks of rows, stopping at the first that differs: a 16-bit embedding of a large
    // vocabulary (128256 x 4096 is 2.1 GB in float32) is never widened whole, and its file
    // pages are given back chunk by chunk.
    const at::Tensor all = values.dim() == 1 ? values.reshape({1, -1}) : values;
    constexpr std::int64_t kChunk = 1024;
    for (std::int64_t r = 0; r < all.size(0); r += kChunk) {
        const at::Tensor narrow = all.slice(0, r, std::min(all.size(0), r + kChunk));
        const at::Tensor rows = narrow.to(at::kCPU, at::kFloat).contiguous();
        if (narrow.is_non_overlapping_and_dense())
            io::MappedFile::releasePages(narrow.data_ptr(), narrow.nbytes());
        auto bytes = formats::ggmlQuantize(
            std::span<const float>(rows.data_ptr<float>(), static_cast<std::size_t>(rows.numel())),
            type);
        if (!bytes)
            return false;
        at::Tensor back = at::empty_like(rows);
        if (!formats::ggmlDequantize(*bytes, type,
                                   std::span<float>(back.data_ptr<float>(),
                                                    static_cast<std::size_t>(back.numel()))))
            return false;
        if (!at::equal(back, rows))
            return false;
    }
    return true;
}

/// Copies the source GGUF's tokenizer.* keys, or converts a byte-level BPE tokenizer.json;
/// says what it did in `notes`.
void writeTokenizer(io::GgufWriter& writer, const ExportSource& source,
                    std::vector<std::string>& notes, std::int64_t vocabRows)
{
    const std::string& tp = source.tokenizerPath;
    if (tp.empty()) {
        notes.push_back("no tokenizer written: the model was opened without one");
        return;
    }
    const std::string ext = std::filesystem::path(tp).extension().string();
    if (ext == ".gguf") {
        auto src = io::GgufFile::open(tp);
        if (!src) {
            notes.push_back("no tokenizer written: " + src.error().describe());
            return;
        }
        int copied = 0;
        for (const auto& [key, value] : src->metadata())
            if (key.rfind("tokenizer.", 0) == 0) {
                writer.set(key, value);
                ++copied;
            }
        notes.push_back("tokenizer: " + std::to_string(copied) + " tokenizer.* keys copied from " +
                        tp);
        return;
    }
    if (std::filesystem::path(tp).filename() != "tokenizer.json") {
        notes.push_back("no tokenizer written: " + tp + " is not a byte-level BPE tokenizer.json");
        return;
    }
    auto bytes = io::readFileBytes(tp);
    if (!bytes) {
        notes.push_back("no tokenizer written: " + bytes.error().describe());
        return;
    }
    const nlohmann::json j = nlohmann::json::parse(bytes->begin(), bytes->end(), nullptr, false);
    const bool bpe = !j.is_discarded() && j.is_object() && j.contains("model") &&
                     j["model"].is_object() && j["model"].value("type", "") == "BPE" &&
                     j["model"].contains("vocab") && j["model"]["vocab"].is_object() &&
                     j["model"].contains("merges") && j["model"]["merges"].is_array() &&
                     j.contains("pre_tokenizer") && j["pre_tokenizer"].is_object() &&
                     j["pre_tokenizer"].dump().find("ByteLevel") != std::string::npos;
    if (!bpe) {
        notes.push_back("no tokenizer written: " + tp +
                        " is not a byte-level BPE tokenizer (only those convert)");
        return;
    }
    std::map<std::int64_t, std::pair<std::string, std::int32_t>> byId;  // id -> (text, type)
    for (const auto& [text, id] : j["model"]["vocab"].items())
        if (id.is_number_integer())
            byId[id.get<std::int64_t>()] = {text, 1};
    if (j.contains("added_tokens") && j["added_tokens"].is_array())
        for (const auto& t : j["added_tokens"])
            if (t.is_object() && t.contains("id") && t["id"].is_number_integer() &&
                t.contains("content") && t["content"].is_string())
                byId[t["id"].get<std::int64_t>()] = {t["content"].get<std::string>(),
                                                      t.value("special", false) ? 3 : 4};
    if (byId.empty() || byId.begin()->first != 0 ||
        byId.rbegin()->first != static_cast<std::int64_t>(byId.size()) - 1) {
        notes.push_back("no tokenizer written: the token ids of " + tp + " are not 0..n-1");
        return;
    }
    std::vector<std::string> tokens;
    std::vector<std::int32_t> types;
    std::map<std::string, std::int64_t> idOf;
    for (const auto& [id, t] : byId) {
        tokens.push_back(t.first);
        types.push_back(t.second);
        idOf.emplace(t.first, id);
    }
    std::vector<std::string> merges;
    for (const auto& m : j["model"]["merges"]) {
        if (m.is_string())
            merges.push_back(m.get<std::string>());
        else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
            merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    }
    // llama.cpp takes its vocabulary size from the token list and checks it against
    // token_embd's rows: a model whose embedding has more rows than its tokenizer has tokens
    // (Qwen2's 151936 rows for 151665 tokens) gets "[PAD<id>]" tokens of type UNUSED, as
    // llama.cpp's convert_hf_to_gguf pads them; more tokens than rows cannot load at all.
    const std::size_t real = tokens.size();
    if (vocabRows > 0 && static_cast<std::int64_t>(tokens.size()) > vocabRows) {
        notes.push_back("no tokenizer written: " + tp + " has " + std::to_string(tokens.size()) +
                        " tokens for an embedding of " + std::to_string(vocabRows) + " rows");
        return;
    }
    for (auto id = static_cast<std::int64_t>(tokens.size()); id < vocabRows; ++id) {
        tokens.push_back("[PAD" + std::to_string(id) + "]");
        types.push_back(5);  // UNUSED
    }
    writer.set("tokenizer.ggml.model", io::GgufValue::string("gpt2"));
    writer.set("tokenizer.ggml.tokens", io::GgufValue::stringArray(tokens));
    writer.set("tokenizer.ggml.token_type", io::GgufValue::i32Array(types));
    writer.set("tokenizer.ggml.merges", io::GgufValue::stringArray(merges));
    // bos / eos ids from config.json beside the tokenizer (as the HF model declares them).
    const auto config = std::filesystem::path(tp).parent_path() / "config.json";
    if (auto cb = io::readFileBytes(config.string())) {
        const nlohmann::json c = nlohmann::json::parse(cb->begin(), cb->end(), nullptr, false);
        for (const char* key : {"bos_token_id", "eos_token_id"})
            if (!c.is_discarded() && c.is_object() && c.contains(key) &&
                c[key].is_number_integer() && c[key].get<std::int64_t>() >= 0 &&
                c[key].get<std::int64_t>() < static_cast<std::int64_t>(tokens.size()))
                writer.set(std::string("tokenizer.ggml.") + (key[0] == 'b' ? "bos" : "eos") +
                               "_token_id",
                           io::GgufValue::u32(static_cast<std::uint32_t>(c[key].get<std::int64_t>())));
    }
    notes.push_back("tokenizer: byte-level BPE converted from " + tp + " (" +
                    std::to_string(real) + " tokens" +
                    (tokens.size() > real ? " padded to the embedding's " +
                                                std::to_string(tokens.size()) + " with [PAD<id>]"
                                          : std::string()) +
                    ", " + std::to_string(merges.size()) +
                    " merges; no tokenizer.ggml.pre, llama.cpp uses its default pre-tokenizer)");
}

/// One planned tensor of the file.
struct Planned {
    std::string name;
    const ir::Node* node = nullptr;
    std::size_t input = 1;
    std::int64_t permuteHeads = 0;  ///< attn_q / attn_k: heads to permute for
};

} // namespace

std::optional<std::string> ggufLimitation(const quant::LayerConfig& c)
{
    if (c.keepFloat || c.ggmlType)
        return std::nullopt;
    // ggml's MXFP4 holds OCP MXFP4 weights as they are (E2M1 codes, E8M0 block exponents).
    if (c.weightType == quant::QuantType::MXFP4 && c.actMode == quant::ActMode::Float)
        return std::nullopt;
    return "GGUF holds ggml block types only; quantize with a gguf-* preset (gguf-f16, "
           "gguf-q8_0, gguf-q4_0, gguf-q4_1, gguf-q4_k, gguf-q6_k), whose error is the file's, "
           "or with mxfp4-w (ggml's MXFP4) (layers may be overridden to float)";
}


Result<GgufSummary> writeGguf(const quant::QuantizedModel& model, const std::string& path,
                              const ExportSource& source, Progress& progress,
                              const CancelToken& cancel)
{
    if (auto r = checkExportable(model.scheme, ExportFormat::Gguf); !r) {
        Error e = r.error();
        e.path = path;
        return e;
    }
    const ir::Graph& g = model.graph;
    auto type = g.metadata.find("model_type");
    if (type == g.metadata.end() || type->second != "llama")
        return Error::unsupported(path, "GGUF export writes llama-family models only; this "
                                        "model is " +
                                            (type == g.metadata.end()
                                                 ? std::string("not a built language model")
                                                 : "'" + type->second + "'"));
    try {
        c10::InferenceMode guard;
        const Hparams h{g, path};
        const std::int64_t hidden = h.integer("llama.embedding_length");
        const std::int64_t blocks = h.integer("llama.block_count");
        const std::int64_t heads = h.integer("llama.attention.head_count");
        const std::int64_t kvHeads = h.integer("llama.attention.head_count_kv");
        const std::int64_t headDim = h.integer("llama.rope.dimension_count");
        if (headDim * heads != hidden)
            return Error::unsupported(path, "head size " + std::to_string(headDim) + " x " +
                                                std::to_string(heads) +
                                                " heads is not the embedding width " +
                                                std::to_string(hidden) +
                                                " (llama.cpp's llama derives it from them)");
        std::map<std::string, const ir::Node*> byName;
        for (const auto& node : g.nodes) {
            byName[node.name] = &node;
            if (node.op == ir::OpKind::Add && node.name.ends_with(".bias"))
                return Error::unsupported(path, "layer '" + node.name +
                                                    "': llama projections with biases are not "
                                                    "written to GGUF");
        }
        auto node = [&](const std::string& name) -> const ir::Node* {
            auto it = byName.find(name);
            if (it == byName.end())
                throw Error::unsupported(path, "the graph has no layer '" + name +
                                                   "' (not a BitLens llama graph)");
            return it->second;
        };
        auto initOf = [&](const ir::Node* n, std::size_t i) -> const at::Tensor& {
            const at::Tensor* t = n->inputs.size() > i ? g.initializer(n->inputs[i]) : nullptr;
            if (!t)
                throw Error::unsupported(path, "layer '" + n->name + "' reads no constant weight");
            return *t;
        };

        std::vector<Planned> plan;
        plan.push_back({"token_embd.weight", node("embed_tokens"), 0, 0});
        for (std::int64_t i = 0; i < blocks; ++i) {
            const std::string l = "layer." + std::to_string(i);
            const std::string b = "blk." + std::to_string(i) + ".";
            plan.push_back({b + "attn_norm.weight", node(l + ".input_norm"), 1, 0});
            plan.push_back({b + "attn_q.weight", node(l + ".attn.q_proj"), 1, heads});
            plan.push_back({b + "attn_k.weight", node(l + ".attn.k_proj"), 1, kvHeads});
            plan.push_back({b + "attn_v.weight", node(l + ".attn.v_proj"), 1, 0});
            plan.push_back({b + "attn_output.weight", node(l + ".attn.o_proj"), 1, 0});
            plan.push_back({b + "ffn_norm.weight", node(l + ".post_attention_norm"), 1, 0});
            plan.push_back({b + "ffn_gate.weight", node(l + ".mlp.gate_proj"), 1, 0});
            plan.push_back({b + "ffn_up.weight", node(l + ".mlp.up_proj"), 1, 0});
            plan.push_back({b + "ffn_down.weight", node(l + ".mlp.down_proj"), 1, 0});
        }
        plan.push_back({"output_norm.weight", node("norm"), 1, 0});
        plan.push_back({"output.weight", node("lm_head"), 1, 0});

        GgufSummary summary;
        io::GgufWriter writer;
        const bool mxfp4 = !model.scheme.config.ggmlType &&
                           model.scheme.config.weightType == quant::QuantType::MXFP4;
        const std::optional<GgmlType> mainType =
            mxfp4 ? std::optional<GgmlType>(GgmlType::MXFP4) : model.scheme.config.ggmlType;
        const at::Tensor& embed = initOf(plan.front().node, 0);
        std::string name = std::filesystem::path(source.modelPath).stem().string();
        if (std::filesystem::path(source.modelPath).extension() == ".gguf")
            if (auto src = io::GgufFile::open(source.modelPath))
                if (auto n = src->getString("general.name"))
                    name = *n;
        if (name.empty())
            name = g.name;
        writer.set("general.architecture", io::GgufValue::string("llama"));
        writer.set("general.name", io::GgufValue::string(name));
        writer.set("general.file_type", io::GgufValue::u32(fileType(mainType)));
        writer.set("general.quantization_version", io::GgufValue::u32(2));
        auto u32 = [&](const std::string& key, std::int64_t v) {
            writer.set(key, io::GgufValue::u32(static_cast<std::uint32_t>(v)));
        };
        u32("llama.context_length", h.integer("context_length"));
        u32("llama.embedding_length", hidden);
        u32("llama.block_count", blocks);
        u32("llama.feed_forward_length", h.integer("llama.feed_forward_length"));
        u32("llama.attention.head_count", heads);
        u32("llama.attention.head_count_kv", kvHeads);
        writer.set("llama.rope.freq_base",
                   io::GgufValue::f32(static_cast<float>(h.number("llama.rope.freq_base"))));
        writer.set("llama.attention.layer_norm_rms_epsilon",
                   io::GgufValue::f32(static_cast<float>(
                       h.number("llama.attention.layer_norm_rms_epsilon"))));
        u32("llama.rope.dimension_count", headDim);
        u32("llama.vocab_size", embed.size(0));
        writeTokenizer(writer, source, summary.notes, embed.size(0));

        // Every weight tensor is deferred: the writer produces, encodes and drops one at a
        // time as it writes (GgufWriter::addDeferredTensor), so the export holds one tensor's
        // float32 rows and bytes, never the whole quantized model. The rows come from the
        // prepared layer (weightFloat) when the model was prepared, else from the graph's own
        // weight, widened as it is read and its file pages given back (a model exported
        // without quant::prepare: workspace exportRun's streaming path for gguf-* schemes).
        const std::size_t total = plan.size();
        auto produceRows = [&g, &model, &progress, &cancel, total](
                               std::size_t k, const Planned& p,
                               bool fromLayer) -> io::GgufWriter::Producer {
            return [&g, &model, &progress, &cancel, total, k, p, fromLayer]()
                       -> Result<at::Tensor> {
                if (cancel.cancelled())
                    return Error::cancelled();
                progress.report(0.9 * static_cast<double>(k) / static_cast<double>(total),
                                "quantizing " + p.name);
                const std::string& input = p.node->inputs[p.input];
                const at::Tensor& w = *g.initializer(input);
                at::Tensor rows;
                try {
                    if (fromLayer) {
                        rows = quant::weightView(*p.node, model.layers.at(p.node->name).weightFloat);
                    } else if (p.node->op == ir::OpKind::Gather) {
                        rows = g.readAs(input, w);
                    } else {
                        rows = quant::weightView(*p.node, g.readAs(input, w));
                    }
                } catch (const std::runtime_error& e) {
                    // A 16-bit weight holding NaN or infinity, found as it widens.
                    return Error::badInput({}, e.what());
                }
                rows = rows.to(at::kCPU, at::kFloat).contiguous();
                // A transposed view (a MatMul weight) covers the same pages as its storage.
                if (g.widenOnRead.count(input) && w.is_non_overlapping_and_dense())
                    io::MappedFile::releasePages(w.data_ptr(), w.nbytes());
                if (p.permuteHeads > 0)
                    rows = permuteForRope(rows, p.permuteHeads);
                return rows;
            };
        };
        // The [out, in] shape a layer's weight has as rows, without reading it.
        auto rowShape = [](const ir::Node& node, const at::Tensor& w) {
            const at::Tensor meta =
                at::empty(w.sizes(), at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
            const at::Tensor view = quant::weightView(node, meta);
            return std::vector<std::int64_t>(view.sizes().begin(), view.sizes().end());
        };
        for (std::size_t k = 0; k < plan.size(); ++k) {
            if (cancel.cancelled())
                return Error::cancelled();
            const Planned& p = plan[k];
            const at::Tensor& w = initOf(p.node, p.input);
            if (p.name == "token_embd.weight") {
                // Not quantized in-app (a Gather): the smallest type that holds it exactly.
                progress.report(0.0, "choosing the type of " + p.name);
                std::vector<GgmlType> candidates;
                if (mainType && *mainType != GgmlType::MXFP4)
                    candidates.push_back(quant::ggmlTypeForRow(*mainType, w.size(1)));
                candidates.insert(candidates.end(), {GgmlType::Q8_0, GgmlType::F16,
                                                     GgmlType::BF16});
                GgmlType chosen = GgmlType::F32;
                for (GgmlType t : candidates)
                    if (exactIn(w, t)) {
                        chosen = t;
                        break;
                    }
                summary.tokenEmbeddingType = std::string(formats::ggmlTraits(chosen).name);
                summary.notes.push_back(
                    "token_embd.weight: " + summary.tokenEmbeddingType +
                    " (BitLens runs the embedding unquantized; this is the smallest of the "
                    "scheme's type, Q8_0, F16, BF16 and F32 that holds it bit for bit)");
                if (auto r = writer.addDeferredTensor(p.name, {w.size(0), w.size(1)}, chosen,
                                                      produceRows(k, p, false));
                    !r)
                    return r.error();
                continue;
            }
            if (p.node->op == ir::OpKind::RMSNorm) {
                if (auto r = writer.addTensor(p.name, w.to(at::kFloat), GgmlType::F32); !r)
                    return r.error();
                continue;
            }
            // The layer's configuration: the prepared layer's, else the plan's.
            auto lq = model.layers.find(p.node->name);
            const quant::LayerConfig* config = nullptr;
            if (lq != model.layers.end())
                config = &lq->second.config;
            else if (auto c = model.plan.layers.find(p.node->name); c != model.plan.layers.end())
                config = &c->second;
            const bool quantized = config && !config->keepFloat;
            const bool prepared = lq != model.layers.end();
            if (quantized && config->weightType == quant::QuantType::MXFP4 && !config->ggmlType) {
                if (!prepared)
                    return Error::unsupported(path, p.name + ": MXFP4 is written from the "
                                                             "prepared layer's codes");
                // BitLens's own codes and exponents, rows permuted for rope as the weights are.
                const quant::LayerQuant& l = lq->second;
                const at::Tensor view = quant::weightView(*p.node, quant::codeSource(l));
                at::Tensor codes = quant::quantize(view.to(at::kCPU, at::kFloat), l.weight)
                                       .to(at::kByte);
                at::Tensor exps = l.weight.blockScale.to(at::kCPU, at::kByte).reshape(
                    {codes.size(0), -1});
                if (p.permuteHeads > 0) {
                    codes = permuteForRope(codes, p.permuteHeads);
                    exps = permuteForRope(exps, p.permuteHeads);
                }
                if (codes.size(1) % 32 != 0)
                    return Error::unsupported(path, p.name + ": rows of " +
                                                        std::to_string(codes.size(1)) +
                                                        " values are not whole MXFP4 blocks of 32");
                codes = codes.contiguous();
                exps = exps.contiguous();
                auto bytes = formats::packMxfp4(
                    {codes.const_data_ptr<std::uint8_t>(), static_cast<std::size_t>(codes.numel())},
                    {exps.const_data_ptr<std::uint8_t>(), static_cast<std::size_t>(exps.numel())});
                if (!bytes)
                    return bytes.error();
                ++summary.quantizedLayers;
                if (auto r = writer.addRawTensor(p.name, {codes.size(1), codes.size(0)},
                                                 GgmlType::MXFP4, std::move(*bytes));
                    !r)
                    return r.error();
                continue;
            }
            const std::vector<std::int64_t> shape = rowShape(*p.node, w);  // [out, in]
            GgmlType t = GgmlType::F32;
            if (quantized) {
                if (!config->ggmlType)
                    return Error::unsupported(path, p.name + ": layer '" + p.node->name +
                                                        "' is not quantized to a ggml type");
                t = quant::ggmlTypeForRow(*config->ggmlType, shape[1]);
                ++summary.quantizedLayers;
                const std::string note = prepared
                                             ? lq->second.note
                                             : quant::ggmlFallbackNote(*config->ggmlType,
                                                                       shape[1]);
                if (!note.empty())
                    summary.notes.push_back(p.node->name + " (" + p.name + "): " + note);
            } else {
                ++summary.floatLayers;
            }
            if (auto r = writer.addDeferredTensor(p.name, shape, t,
                                                  produceRows(k, p, quantized && prepared));
                !r) {
                Error e = r.error();
                e.message = p.name + ": " + e.message;
                if (e.path.empty())
                    e.path = path;
                return e;
            }
        }
        summary.tensors = static_cast<std::int64_t>(plan.size());
        // Scaled rope (Llama 3.1's rope_scaling, or a source GGUF's own factors): llama.cpp
        // divides each rotary frequency by rope_freqs.weight, as its converter writes it.
        if (const at::Tensor* inv = g.initializer("rotary.inv_freq")) {
            const double theta = h.number("llama.rope.freq_base");
            const at::Tensor plain = at::reciprocal(at::pow(
                theta, at::arange(0, headDim, 2, at::TensorOptions().dtype(at::kLong))
                               .to(at::kFloat) /
                           static_cast<double>(headDim)));
            const at::Tensor used = inv->to(at::kCPU, at::kFloat).reshape({-1});
            if (used.numel() == plain.numel() && !at::equal(plain, used)) {
                // A reader divides by the factor (plain / factor), which cannot give every
                // float32 frequency back exactly: verification allows for that rounding.
                const at::Tensor factors = (plain / used).contiguous();
                if (auto r = writer.addTensor("rope_freqs.weight", factors, GgmlType::F32);
                    !r)
                    return r.error();
                ++summary.tensors;
                summary.notes.push_back("rope_freqs.weight: the model's scaled rotary "
                                        "frequencies, as llama.cpp reads Llama 3.1's");
            }
        }
        // The last chance to stop: after this the temporary file is renamed into place whole.
        if (cancel.cancelled())
            return Error::cancelled();
        progress.report(0.0, "writing " + path);
        if (auto r = writer.write(path); !r) {
            Error e = r.error();
            if (e.path.empty())
                e.path = path;
            return e;
        }
        progress.report(1.0, "exported");
        return summary;
    } catch (const Error& e) {
        return e;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("GGUF export failed: ") + e.what_without_backtrace(),
                              path);
    } catch (const std::exception& e) {
        return Error::runtime(std::string("GGUF export failed: ") + e.what(), path);
    }
}

namespace {


} // namespace

Result<VerifyResult> verifyGguf(const std::string& path, const quant::QuantizedModel& model,
                                const io::Dataset& data, const VerifyOptions& options,
                                Progress& progress, const CancelToken& cancel)
{
    if (!data.inputs.defined() || data.size() == 0)
        return Error::usage("verification needs samples (--eval DATA)");
    progress.report(0.0, "reopening " + path);
    auto opened = openModel(path);
    if (!opened)
        return opened.error();
    const ir::Graph& file = (*opened)->graph();
    try {
        c10::InferenceMode guard;
        VerifyResult result;
        std::map<std::string, const ir::Node*> fileNodes;
        for (const auto& n : file.nodes)
            fileNodes[n.name] = &n;
        std::int64_t otherChecked = 0;
        std::int64_t otherMismatches = 0;
        bool ropeRounded = false;
        for (const auto& node : model.graph.nodes) {
            auto fn = fileNodes.find(node.name);
            auto lq = model.layers.find(node.name);
            const bool quantized = lq != model.layers.end() && !lq->second.config.keepFloat;
            for (std::size_t i = 0; i < node.inputs.size(); ++i) {
                const at::Tensor* mine = model.graph.initializer(node.inputs[i]);
                if (!mine)
                    continue;
                const at::Tensor* theirs =
                    fn != fileNodes.end() && fn->second->inputs.size() > i
                        ? file.initializer(fn->second->inputs[i])
                        : nullptr;
                const at::Tensor expected = quantized && i == 1 ? lq->second.weightFq : *mine;
                bool same = theirs && theirs->sizes() == expected.sizes() &&
                            theirs->scalar_type() == expected.scalar_type() &&
                            at::equal(theirs->to(at::kCPU), expected.to(at::kCPU));
                // Scaled rotary frequencies travel as rope_freqs.weight factors, which the
                // reader divides by: equal within float32 rounding, not bit for bit.
                if (!same && theirs && node.inputs[i] == "rotary.inv_freq" &&
                    theirs->sizes() == expected.sizes() &&
                    at::allclose(theirs->to(at::kCPU, at::kFloat),
                                 expected.to(at::kCPU, at::kFloat), 1e-6, 0.0)) {
                    same = true;
                    ropeRounded = true;
                }
                if (quantized && i == 1) {
                    ++result.weightsChecked;
                    result.weightsMismatched += same ? 0 : 1;
                } else {
                    ++otherChecked;
                    otherMismatches += same ? 0 : 1;
                }
            }
        }

        exec::Executor appExec(model.graph, exec::ExecOptions{options.device});
        appExec.addHook(quant::makeQuantHook(model));
        exec::Executor fileExec(file, exec::ExecOptions{options.device});
        // Language-model logits are [batch, sequence, vocab]: small batches keep them in memory.
        if (auto r = detail::compareRuns(appExec, fileExec, data,
                                         detail::verifyBatch(model.graph, data, options), path,
                                         result, progress, cancel);
            !r)
            return r.error();
        const std::int64_t n = result.samples;
        // The consumer: llama.cpp runs the file on the first windows where llama-cpp-python is
        // installed (exporting::checkWithConsumer).
        auto consumer = checkWithConsumer(ExportFormat::Gguf, path, file, appExec, data,
                                          detail::verifyBatch(model.graph, data, options),
                                          cancel);
        if (!consumer)
            return consumer.error();
        result.consumer = std::move(*consumer);
        result.sameRoundingTolerance =
            options.device.is_cpu() && !ropeRounded ? 0.0
                                                    : 1e-5 * std::max(result.outputAbsMax, 1e-6);
        result.ok = result.weightsMismatched == 0 && otherMismatches == 0 &&
                    result.maxAbsDiff <= result.sameRoundingTolerance &&
                    (!result.consumer || result.consumer->ok);
        result.message =
            "gguf file vs in-app model on " + std::to_string(n) + " samples: " +
            std::to_string(result.weightsChecked - result.weightsMismatched) + "/" +
            std::to_string(result.weightsChecked) + " quantized weights identical, " +
            std::to_string(otherMismatches) + "/" + std::to_string(otherChecked) +
            " other tensors differ; max |diff| " + fmt(result.maxAbsDiff) +
            " running the model from the file (" +
            (result.sameRoundingTolerance == 0.0 ? std::string("must be 0")
                                                 : "tolerance " + fmt(result.sameRoundingTolerance)) +
            "; outputs up to " + fmt(result.outputAbsMax) + ")" +
            (ropeRounded ? "; the rotary frequencies, stored as rope_freqs.weight factors, "
                           "read back within float32 rounding"
                         : "") +
            detail::figuresText(result) + consumerText(result.consumer);
        return result;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("verification failed: ") + e.what_without_backtrace(),
                              path);
    } catch (const std::exception& e) {
        return Error::runtime(std::string("verification failed: ") + e.what(), path);
    }
}

} // namespace bitlens::exporting
