// The memory and hardware planner: parameter counts from config shapes, bytes per part with the
// formula behind each, accelerator counts, a bandwidth bound on decoding and $ per TFLOP.
// No LibTorch (compiled without the PCH, see core/CMakeLists.txt).

#include "analysis/planner.h"

#include "io/file_util.h"
#include "io/json_read.h"
#include "io/process.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

namespace bitlens::analysis {

namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fmt(const char* format, double value)
{
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, value);
    return buffer;
}

/// 176247271424 -> "176.247e9"; small counts stay whole ("134.5e6" for SmolLM2).
std::string countText(double n)
{
    if (n >= 1e9)
        return fmt("%.3fe9", n / 1e9);
    if (n >= 1e6)
        return fmt("%.2fe6", n / 1e6);
    return fmt("%.0f", n);
}

std::string bytesPerValueText(const PlanPrecision& p)
{
    return fmt("%g", p.bitsPerValue / 8.0) + " B (" + p.name + ")";
}

std::string joinNames(const std::vector<std::string>& names)
{
    std::string out;
    for (const auto& n : names)
        out += (out.empty() ? "" : ", ") + n;
    return out;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Precisions. Block formats pay for their scales: bits = code bits + scale bits / block size.
//   nf4 / fp4 (bitsandbytes, block 64, one fp32 absmax): 4 + 32/64 = 4.5
//   nf4 with double quantization (int8 absmax per 64, fp32 per 256 of those): 4 + 8/64 + 32/16384
//   mxfp4 (OCP MX: block 32, one E8M0 scale byte): 4 + 8/32 = 4.25
//   nvfp4 (block 16, one FP8 E4M3 scale; the per-tensor fp32 scale is negligible): 4 + 8/16 = 4.5
//   int4 (GPTQ / AWQ style, group 128, fp16 scale and 4-bit zero): 4 + (16 + 4)/128 = 4.156
//   int8 (per-channel fp32 scale; one per row of 4096+ values): 8 (the 0.008 bits are dropped)
const std::vector<PlanPrecision>& planPrecisions()
{
    static const std::vector<PlanPrecision> kTable = {
        {"fp32", 32.0, "IEEE float32"},
        {"bf16", 16.0, "bfloat16"},
        {"fp16", 16.0, "IEEE float16"},
        {"fp8", 8.0, "FP8 E4M3 / E5M2 (per-tensor scale)"},
        {"int8", 8.0, "int8 codes, per-channel scales (negligible)"},
        {"int4", 4.0 + 20.0 / 128.0, "4-bit codes + fp16 scale and 4-bit zero per group of 128"},
        {"nf4", 4.5, "4-bit NormalFloat codes + one fp32 absmax per block of 64"},
        {"nf4-dq", 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0),
         "nf4 with double quantization: int8 absmax per 64, fp32 per 256 blocks"},
        {"fp4", 4.5, "4-bit E2M1 codes + one fp32 absmax per block of 64 (bitsandbytes)"},
        {"mxfp4", 4.25, "OCP MXFP4: E2M1 codes + one E8M0 scale per block of 32"},
        {"nvfp4", 4.5, "NVFP4: E2M1 codes + one FP8 E4M3 scale per block of 16"},
    };
    return kTable;
}

std::optional<PlanPrecision> findPlanPrecision(const std::string& name)
{
    for (const auto& p : planPrecisions())
        if (p.name == name)
            return p;
    return std::nullopt;
}

std::string planPrecisionNames()
{
    std::vector<std::string> names;
    for (const auto& p : planPrecisions())
        names.push_back(p.name);
    return joinNames(names);
}

// ---------------------------------------------------------------------------------------------
// Parameter counts.
//   llama family, per layer: q and o projections 2·h·(heads·hd), k and v 2·h·(kv·hd), two RMSNorm
//   weights 2·h (+ 2·hd for qwen3's q/k norms); dense MLP 3·h·I (gate, up, down); MoE
//   E·3·h·I_e + the router h·E. Plus the embedding V·h, lm_head V·h unless tied, final norm h.
//   bloom, per layer: fused QKV h·3h + 3h, output h·h + h, MLP h·4h + 4h + 4h·h + h, two
//   LayerNorms 4h = 12h² + 13h. Plus the embedding V·h, its LayerNorm 2h, final LayerNorm 2h;
//   lm_head tied.
namespace {

std::int64_t attentionParams(const ModelShape& m)
{
    const std::int64_t q = m.heads * m.headDim;
    const std::int64_t kv = m.kvHeads * m.headDim;
    return 2 * m.hidden * q + 2 * m.hidden * kv;
}

std::int64_t countParams(const ModelShape& m, bool activeOnly)
{
    const std::int64_t h = m.hidden;
    if (m.family == "bloom") {
        const std::int64_t perLayer = 12 * h * h + 13 * h;
        return m.layers * perLayer + m.vocab * h + 4 * h;
    }
    std::int64_t perLayer = attentionParams(m) + 2 * h + (m.qkNorm ? 2 * m.headDim : 0);
    if (m.experts > 0) {
        const std::int64_t experts = activeOnly ? m.expertsPerToken : m.experts;
        perLayer += experts * 3 * h * m.expertIntermediate + h * m.experts;
    } else {
        perLayer += 3 * h * m.intermediate;
    }
    return m.layers * perLayer + m.vocab * h * (m.tiedEmbeddings ? 1 : 2) + h;
}

} // namespace

std::int64_t ModelShape::params() const
{
    return paramsOverride > 0 ? paramsOverride : countParams(*this, false);
}

std::int64_t ModelShape::activeParams() const
{
    return paramsOverride > 0 ? paramsOverride : countParams(*this, true);
}

// ---------------------------------------------------------------------------------------------
// Presets: the fields of each model's config.json on the Hugging Face Hub, and the total the
// model card (safetensors metadata) gives.
const std::vector<ModelShape>& modelPresets()
{
    auto llama = [](std::string name, std::int64_t h, std::int64_t layers, std::int64_t heads,
                    std::int64_t kv, std::int64_t inter, std::int64_t vocab, bool tied,
                    std::int64_t published, std::string source) {
        ModelShape m;
        m.name = std::move(name);
        m.family = "llama";
        m.hidden = h;
        m.layers = layers;
        m.heads = heads;
        m.kvHeads = kv;
        m.headDim = h / heads;
        m.intermediate = inter;
        m.vocab = vocab;
        m.tiedEmbeddings = tied;
        m.publishedParams = published;
        m.source = std::move(source);
        return m;
    };
    static const std::vector<ModelShape> kPresets = [&] {
        std::vector<ModelShape> list;
        ModelShape bloom;
        bloom.name = "bloom-176b";
        bloom.family = "bloom";
        bloom.hidden = 14336;
        bloom.layers = 70;
        bloom.heads = 112;
        bloom.kvHeads = 112;
        bloom.headDim = 128;
        bloom.intermediate = 4 * 14336;
        bloom.vocab = 250880;
        bloom.tiedEmbeddings = true;
        bloom.publishedParams = 176247271424;
        bloom.source = "bigscience/bloom config.json (n_embed 14336, n_layer 70, n_head 112, "
                       "vocab_size 250880)";
        list.push_back(bloom);
        list.push_back(llama("llama-3.1-8b", 4096, 32, 32, 8, 14336, 128256, false, 8030261248,
                             "meta-llama/Llama-3.1-8B config.json"));
        list.push_back(llama("llama-3.1-70b", 8192, 80, 64, 8, 28672, 128256, false,
                             70553706496, "meta-llama/Llama-3.1-70B config.json"));
        list.push_back(llama("llama-3.1-405b", 16384, 126, 128, 8, 53248, 128256, false,
                             405853388800, "meta-llama/Llama-3.1-405B config.json"));
        ModelShape mixtral = llama("mixtral-8x7b", 4096, 32, 32, 8, 0, 32000, false, 46702792704,
                                   "mistralai/Mixtral-8x7B-v0.1 config.json");
        mixtral.experts = 8;
        mixtral.expertsPerToken = 2;
        mixtral.expertIntermediate = 14336;
        list.push_back(mixtral);
        ModelShape qwen8 = llama("qwen3-8b", 4096, 36, 32, 8, 12288, 151936, false, 8190735360,
                                 "Qwen/Qwen3-8B config.json");
        qwen8.qkNorm = true;
        list.push_back(qwen8);
        ModelShape qwen30 = llama("qwen3-30b-a3b", 2048, 48, 32, 4, 0, 151936, false,
                                  30532122624, "Qwen/Qwen3-30B-A3B config.json");
        qwen30.headDim = 128;  // head_dim in the config; not hidden / heads
        qwen30.qkNorm = true;
        qwen30.experts = 128;
        qwen30.expertsPerToken = 8;
        qwen30.expertIntermediate = 768;
        list.push_back(qwen30);
        ModelShape qwen235 = llama("qwen3-235b-a22b", 4096, 94, 64, 4, 0, 151936, false,
                                   235093634560, "Qwen/Qwen3-235B-A22B config.json");
        qwen235.headDim = 128;
        qwen235.qkNorm = true;
        qwen235.experts = 128;
        qwen235.expertsPerToken = 8;
        qwen235.expertIntermediate = 1536;
        list.push_back(qwen235);
        list.push_back(llama("smollm2-135m", 576, 30, 9, 3, 1536, 49152, true, 134515008,
                             "HuggingFaceTB/SmolLM2-135M config.json"));
        return list;
    }();
    return kPresets;
}

std::optional<ModelShape> findModelPreset(const std::string& name)
{
    for (const auto& m : modelPresets())
        if (m.name == name)
            return m;
    return std::nullopt;
}

std::string modelPresetNames()
{
    std::vector<std::string> names;
    for (const auto& m : modelPresets())
        names.push_back(m.name);
    return joinNames(names);
}

ModelShape shapeFromParamCount(const std::string& name, std::int64_t params)
{
    ModelShape m;
    m.name = name;
    m.family = "unknown";
    m.paramsOverride = std::max<std::int64_t>(params, 1);
    m.source = "parameter count of the open model (no layer shape)";
    return m;
}

// ---------------------------------------------------------------------------------------------
// config.json
namespace {

/// The first of `keys` in `config` as a positive integer below `limit`; nullopt when none of
/// them is there; BadInput when one is there but is not such a number.
Result<std::optional<std::int64_t>> optionalInt(const json& config, const std::string& path,
                                                std::initializer_list<const char*> keys,
                                                std::int64_t limit)
{
    for (const char* key : keys) {
        auto it = config.find(key);
        if (it == config.end() || it->is_null())
            continue;
        if (!it->is_number_integer() || it->get<std::int64_t>() < 1 ||
            it->get<std::int64_t>() > limit)
            return Error::badInput(path, std::string("\"") + key +
                                             "\" must be a whole number from 1 to " +
                                             std::to_string(limit));
        return std::optional<std::int64_t>(it->get<std::int64_t>());
    }
    return std::optional<std::int64_t>();
}

Result<std::int64_t> requiredInt(const json& config, const std::string& path,
                                 std::initializer_list<const char*> keys, std::int64_t limit)
{
    auto value = optionalInt(config, path, keys, limit);
    if (!value)
        return value.error();
    if (!value->has_value())
        return Error::badInput(path, std::string("missing \"") + *keys.begin() + "\"");
    return **value;
}

} // namespace

Result<ModelShape> readHfConfigShape(const std::string& path)
{
    auto bytes = io::readFileBytes(path);
    if (!bytes)
        return bytes.error();
    json config = json::parse(bytes->begin(), bytes->end(), nullptr, false);
    if (config.is_discarded())
        return Error::badInput(path, "not valid JSON");
    if (!config.is_object())
        return Error::badInput(path, "not a JSON object (a config.json holds one)");
    // Multimodal configs (Llama 4, Qwen2.5-VL, Gemma 3) keep the language model's shape in
    // "text_config"; its vision tower is not planned.
    if (!config.contains("hidden_size") && !config.contains("n_embed") &&
        config.contains("text_config") && config["text_config"].is_object()) {
        json text = config["text_config"];
        if (!text.contains("model_type") && config.contains("model_type"))
            text["model_type"] = config["model_type"];
        config = std::move(text);
    }
    // A dense model may say "num_experts": 0.
    for (const char* key : {"num_local_experts", "num_experts"})
        if (auto it = config.find(key); it != config.end() && it->is_number_integer() &&
                                        it->get<std::int64_t>() == 0)
            config.erase(key);
    auto modelType = io::readingJson(path, [&]() -> Result<std::string> {
        return io::jsonString(config, "model_type", "");
    });
    if (!modelType)
        return modelType.error();
    const std::string type = *modelType;
    constexpr std::int64_t kDim = 1 << 20;     // widths and vocabularies
    constexpr std::int64_t kCount = 1 << 14;   // layers, heads, experts
    ModelShape m;
    m.name = path;
    m.source = path;
    m.family = type == "bloom" ? "bloom" : "llama";
    static const char* const kDecoders[] = {"llama", "mistral", "mixtral", "qwen2", "qwen3",
                                            "qwen3_moe", "bloom"};
    if (std::find(std::begin(kDecoders), std::end(kDecoders), type) == std::end(kDecoders))
        m.source = path + " (model_type '" + type + "' read as a llama-style decoder)";
    auto hidden = requiredInt(config, path, {"hidden_size", "n_embed"}, kDim);
    if (!hidden)
        return hidden.error();
    auto layers = requiredInt(config, path, {"num_hidden_layers", "n_layer"}, kCount);
    if (!layers)
        return layers.error();
    auto heads = requiredInt(config, path, {"num_attention_heads", "n_head"}, kCount);
    if (!heads)
        return heads.error();
    auto vocab = requiredInt(config, path, {"vocab_size"}, kDim);
    if (!vocab)
        return vocab.error();
    m.hidden = *hidden;
    m.layers = *layers;
    m.heads = *heads;
    m.vocab = *vocab;
    if (m.family == "bloom") {
        if (m.hidden % m.heads != 0)
            return Error::badInput(path, "n_embed is not a multiple of n_head");
        m.kvHeads = m.heads;
        m.headDim = m.hidden / m.heads;
        m.intermediate = 4 * m.hidden;
        m.tiedEmbeddings = true;
        return m;
    }
    auto kv = optionalInt(config, path, {"num_key_value_heads"}, kCount);
    if (!kv)
        return kv.error();
    m.kvHeads = kv->value_or(m.heads);
    auto headDim = optionalInt(config, path, {"head_dim"}, kDim);
    if (!headDim)
        return headDim.error();
    if (!headDim->has_value() && m.hidden % m.heads != 0)
        return Error::badInput(path, "hidden_size is not a multiple of num_attention_heads "
                                     "and there is no head_dim");
    m.headDim = headDim->value_or(m.hidden / m.heads);
    if (m.heads % m.kvHeads != 0)
        return Error::badInput(path, "num_attention_heads is not a multiple of "
                                     "num_key_value_heads");
    m.qkNorm = type == "qwen3" || type == "qwen3_moe";
    auto tied = config.find("tie_word_embeddings");
    m.tiedEmbeddings = tied != config.end() && tied->is_boolean() && tied->get<bool>();
    auto experts = optionalInt(config, path, {"num_local_experts", "num_experts"}, kCount);
    if (!experts)
        return experts.error();
    if (experts->has_value() && **experts > 1) {
        m.experts = **experts;
        auto perToken = requiredInt(config, path, {"num_experts_per_tok"}, m.experts);
        if (!perToken)
            return perToken.error();
        m.expertsPerToken = *perToken;
        auto inter = requiredInt(config, path, {"moe_intermediate_size", "intermediate_size"},
                                 kDim);
        if (!inter)
            return inter.error();
        m.expertIntermediate = *inter;
    } else {
        auto inter = requiredInt(config, path, {"intermediate_size"}, kDim);
        if (!inter)
            return inter.error();
        m.intermediate = *inter;
    }
    return m;
}

Result<ModelShape> shapeForModelFile(const std::string& path, std::int64_t params)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path p(path);
    const fs::path config = fs::is_directory(p, ec) ? p / "config.json"
                                                    : p.parent_path() / "config.json";
    if (fs::is_regular_file(config, ec)) {
        auto shape = readHfConfigShape(config.string());
        if (!shape)
            return shape;
        shape->name = path;
        // The shape must describe the file: an encoder's config (BERT) read as a decoder, or a
        // config that does not match its weights, would plan the wrong model. 5 % leaves room
        // for tensors a count from the shape leaves out (rotary buffers, biases).
        const double counted = static_cast<double>(shape->params());
        if (params > 0 && std::abs(counted - static_cast<double>(params)) >
                              0.05 * static_cast<double>(params)) {
            ModelShape byCount = shapeFromParamCount(path, params);
            byCount.source = "parameter count of the model; " + config.string() + " (" +
                             shape->family + " reading) counts " + countText(counted) +
                             ", so its shape is not used";
            return byCount;
        }
        return shape;
    }
    if (params <= 0)
        return Error::badInput(path, "no config.json beside it and no parameter count");
    return shapeFromParamCount(path, params);
}

// ---------------------------------------------------------------------------------------------
// Accelerators
Result<std::string> defaultAcceleratorsPath()
{
    if (std::string found = io::findDataFile("hardware/accelerators.json"); !found.empty())
        return found;
    std::string looked;
    for (const auto& c : io::dataFileCandidates("hardware/accelerators.json"))
        looked += (looked.empty() ? "" : ", ") + c;
    return Error::badInput("accelerators.json",
                           "not found (looked in: " + looked + "); give one with --cards FILE");
}

Result<std::vector<Accelerator>> loadAccelerators(const std::string& path)
{
    auto bytes = io::readFileBytes(path);
    if (!bytes)
        return bytes.error();
    json doc = json::parse(bytes->begin(), bytes->end(), nullptr, false);
    if (doc.is_discarded())
        return Error::badInput(path, "not valid JSON");
    if (!doc.is_object() || !doc.contains("cards") || !doc["cards"].is_array())
        return Error::badInput(path, "expected an object with a \"cards\" array");
    std::vector<Accelerator> cards;
    for (std::size_t i = 0; i < doc["cards"].size(); ++i) {
        const json& c = doc["cards"][i];
        const std::string where = "card " + std::to_string(i);
        if (!c.is_object() || !c.contains("id") || !c["id"].is_string() ||
            c["id"].get<std::string>().empty())
            return Error::badInput(path, where + ": needs a string \"id\"");
        Accelerator a;
        a.id = c["id"].get<std::string>();
        a.name = c.value("name", a.id);
        auto number = [&](const char* key, bool required, double* out) -> Result<void> {
            auto it = c.find(key);
            if (it == c.end() || it->is_null()) {
                if (required)
                    return Error::badInput(path, "card '" + a.id + "': missing \"" + key + "\"");
                return {};
            }
            if (!it->is_number() || it->get<double>() < 0 || !std::isfinite(it->get<double>()) ||
                (required && it->get<double>() <= 0))
                return Error::badInput(path, "card '" + a.id + "': \"" + key +
                                                 "\" must be a positive number");
            *out = it->get<double>();
            return {};
        };
        for (auto [key, required, out] :
             {std::tuple{"memory_gib", true, &a.memoryGib},
              std::tuple{"memory_bandwidth_gbps", true, &a.bandwidthGBs},
              std::tuple{"bf16_tflops", true, &a.bf16Tflops},
              std::tuple{"fp8_tflops", false, &a.fp8Tflops},
              std::tuple{"fp4_tflops", false, &a.fp4Tflops}}) {
            auto ok = number(key, required, out);
            if (!ok)
                return ok.error();
        }
        double price = -1;
        auto priced = number("price_usd", false, &price);
        if (!priced)
            return priced.error();
        if (price >= 0)
            a.priceUsd = price;
        a.nativeFp8 = c.value("native_fp8", a.fp8Tflops > 0);
        a.nativeFp4 = c.value("native_fp4", a.fp4Tflops > 0);
        if (auto s = c.find("source"); s != c.end() && s->is_object())
            for (const auto& [figure, text] : s->items())
                if (text.is_string())
                    a.sources.emplace_back(figure, text.get<std::string>());
        if (findAccelerator(cards, a.id))
            return Error::badInput(path, "card '" + a.id + "' is listed twice");
        cards.push_back(std::move(a));
    }
    if (cards.empty())
        return Error::badInput(path, "\"cards\" is empty");
    return cards;
}

const Accelerator* findAccelerator(const std::vector<Accelerator>& cards, const std::string& id)
{
    for (const auto& c : cards)
        if (c.id == id)
            return &c;
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// The plan
const char* planUseName(PlanUse use)
{
    switch (use) {
    case PlanUse::Inference: return "inference";
    case PlanUse::FineTune: return "finetune";
    case PlanUse::Lora: return "lora";
    case PlanUse::Qlora: return "qlora";
    }
    return "inference";
}

std::optional<PlanUse> parsePlanUse(const std::string& name)
{
    for (PlanUse use : {PlanUse::Inference, PlanUse::FineTune, PlanUse::Lora, PlanUse::Qlora})
        if (name == planUseName(use))
            return use;
    return std::nullopt;
}

std::string planBytesText(double bytes)
{
    if (bytes >= kGiB)
        return fmt("%.1f GiB", bytes / kGiB);
    if (bytes >= 1024.0 * 1024.0)
        return fmt("%.1f MiB", bytes / (1024.0 * 1024.0));
    if (bytes >= 1024.0)
        return fmt("%.1f KiB", bytes / 1024.0);
    return fmt("%.0f B", bytes);
}

namespace {

/// Values one token keeps per layer for the backward pass (no dropout masks, no attention
/// scores: flash attention recomputes them). Attention: the QKV input h, Q (heads·hd), K and V
/// (2·kv·hd), the attention output (heads·hd). MLP: its input h and 2·I (GeLU: fc1 output and
/// GeLU output) or 4·I (SwiGLU: gate, up, silu(gate), the product). Two norm inputs 2h. MoE:
/// I = k·I_expert (each token runs k experts). Bloom: 5h + 9h + 2h = 16h, Korthikanti et al.
/// 2022's 34 bytes·h per token at 16 bits less its two bytes of dropout masks.
double valuesPerTokenLayer(const ModelShape& m)
{
    const double h = static_cast<double>(m.hidden);
    const double q = static_cast<double>(m.heads * m.headDim);
    const double kv = static_cast<double>(m.kvHeads * m.headDim);
    const double attention = h + 2 * q + 2 * kv;
    double mlp = 0;
    if (m.family == "bloom")
        mlp = h + 2.0 * static_cast<double>(m.intermediate);
    else if (m.experts > 0)
        mlp = h + 4.0 * static_cast<double>(m.expertsPerToken * m.expertIntermediate);
    else
        mlp = h + 4.0 * static_cast<double>(m.intermediate);
    return attention + mlp + 2 * h;
}

/// LoRA adapter parameters: rank r on every linear layer of attention and MLP (PEFT's
/// "all-linear"; MoE: every expert's three): r·(in + out) per matrix.
double loraParams(const ModelShape& m, std::int64_t rank)
{
    const double h = static_cast<double>(m.hidden);
    const double q = static_cast<double>(m.heads * m.headDim);
    const double kv = static_cast<double>(m.kvHeads * m.headDim);
    const double r = static_cast<double>(rank);
    double perLayer = r * ((h + q) + 2 * (h + kv) + (q + h));
    if (m.family == "bloom")
        perLayer = r * ((h + 3 * h) + (h + h) + 2 * (h + static_cast<double>(m.intermediate)));
    else if (m.experts > 0)
        perLayer += r * static_cast<double>(m.experts) * 3 *
                    (h + static_cast<double>(m.expertIntermediate));
    else
        perLayer += r * 3 * (h + static_cast<double>(m.intermediate));
    return perLayer * static_cast<double>(m.layers);
}

int nextPowerOfTwo(int n)
{
    int p = 1;
    while (p < n && p < (1 << 30))
        p <<= 1;
    return p;
}

} // namespace

Result<Plan> computePlan(const PlanRequest& r)
{
    if (r.batch < 1 || r.context < 1)
        return Error::usage("--batch and --context must be at least 1");
    if (r.card.memoryGib <= 0 || r.card.bandwidthGBs <= 0)
        return Error::usage("the accelerator has no memory size or bandwidth");
    const ModelShape& m = r.model;
    const bool training = r.use != PlanUse::Inference;
    const double wBits = r.weights.bitsPerValue;
    if (r.use == PlanUse::FineTune && wBits < 16)
        return Error::usage("full fine-tuning trains fp32, bf16 or fp16 weights (mixed "
                            "precision); with " + r.weights.name +
                            " base weights use --use lora or qlora");
    if (r.use == PlanUse::Qlora && wBits > 5)
        return Error::usage("qlora keeps the frozen base weights in a 4-bit format (nf4, "
                            "nf4-dq, fp4, int4, mxfp4, nvfp4), not " + r.weights.name +
                            "; use --use lora for " + r.weights.name + " weights");
    Plan plan;
    plan.params = m.params();
    plan.activeParams = m.activeParams();
    const double P = static_cast<double>(plan.params);
    const std::string pText = countText(P) + " params";
    const double b = static_cast<double>(r.batch);
    const double s = static_cast<double>(r.context);
    const std::string bs = fmt("%.0f", b) + " seq x " + fmt("%.0f", s) + " tokens";

    plan.parts.push_back({"weights", training && r.use != PlanUse::FineTune
                                         ? "Weights (frozen)" : "Weights",
                          P * wBits / 8.0, pText + " x " + bytesPerValueText(r.weights)});

    const double actBytes = r.activations.bitsPerValue / 8.0;
    const double kvBytes = r.kvCache.bitsPerValue / 8.0;
    if (!m.hasShape()) {
        plan.notes.push_back("no layer shape (parameter count only): KV cache and activations "
                             "are left out; plan a preset or a config.json for them");
    } else if (!training) {
        const double kv = 2.0 * m.layers * m.kvHeads * m.headDim * s * b * kvBytes;
        plan.parts.push_back(
            {"kv_cache", "KV cache", kv,
             "2 (K,V) x " + std::to_string(m.layers) + " layers x " +
                 std::to_string(m.kvHeads) + " kv heads x " + std::to_string(m.headDim) +
                 " head dim x " + bs + " x " + bytesPerValueText(r.kvCache)});
        const double values = valuesPerTokenLayer(m);
        const double act = b * s * values * actBytes + b * static_cast<double>(m.vocab) * 4.0;
        plan.parts.push_back(
            {"activations", "Activations", act,
             "one layer's working set at prefill: " + bs + " x " + fmt("%.0f", values) +
                 " values x " + bytesPerValueText(r.activations) + " + last-token logits " +
                 fmt("%.0f", b) + " x " + std::to_string(m.vocab) + " x 4 B"});
    } else {
        const double values = valuesPerTokenLayer(m);
        const double logits = b * s * static_cast<double>(m.vocab) * 4.0;
        const std::string logitsText = " + fp32 logits " + bs + " x " + std::to_string(m.vocab) +
                                       " x 4 B";
        if (r.checkpointing) {
            const double act = static_cast<double>(m.layers) * b * s * m.hidden * actBytes +
                               b * s * values * actBytes + logits;
            plan.parts.push_back(
                {"activations", "Activations (checkpointed)", act,
                 "layer inputs " + std::to_string(m.layers) + " layers x " + bs + " x " +
                     std::to_string(m.hidden) + " x " + bytesPerValueText(r.activations) +
                     " + one layer recomputed (" + fmt("%.0f", values) + " values/token)" +
                     logitsText});
        } else {
            const double act =
                static_cast<double>(m.layers) * b * s * values * actBytes + logits;
            plan.parts.push_back(
                {"activations", "Activations", act,
                 std::to_string(m.layers) + " layers x " + bs + " x " + fmt("%.0f", values) +
                     " values/token/layer x " + bytesPerValueText(r.activations) +
                     logitsText});
        }
    }

    if (r.use == PlanUse::FineTune) {
        const double gBytes = wBits / 8.0;
        plan.parts.push_back({"gradients", "Gradients", P * gBytes,
                              pText + " x " + fmt("%g", gBytes) + " B (" + r.weights.name +
                                  ", as the weights)"});
        if (wBits < 32)
            plan.parts.push_back({"master_weights", "Master weights (fp32)", P * 4.0,
                                  pText + " x 4 B (fp32 copy the optimizer updates)"});
        plan.parts.push_back({"optimizer_states", "Optimizer states (Adam m, v)", P * 8.0,
                              "Adam m and v in fp32: 2 x " + pText + " x 4 B"});
    } else if (r.use == PlanUse::Lora || r.use == PlanUse::Qlora) {
        if (!m.hasShape())
            return Error::usage("LoRA adapters need the model's layer shape; plan a preset or "
                                "a config.json");
        const double A = loraParams(m, r.loraRank);
        const std::string aText = countText(A) + " adapter params (rank " +
                                  std::to_string(r.loraRank) + ", all linear layers)";
        plan.parts.push_back({"lora_adapters", "LoRA adapters (fp32)", A * 4.0, aText + " x 4 B"});
        plan.parts.push_back({"gradients", "Gradients (adapters)", A * 4.0, aText + " x 4 B"});
        plan.parts.push_back({"optimizer_states", "Optimizer states (Adam m, v)", A * 8.0,
                              "Adam m and v in fp32: 2 x " + countText(A) + " x 4 B"});
    }

    // Training reads best as the per-parameter states first (weights, gradients, master copy,
    // optimizer: the 16 bytes/param of mixed-precision Adam), then what the batch adds.
    if (training)
        std::stable_partition(plan.parts.begin(), plan.parts.end(),
                              [](const PlanPart& p) { return p.key != "activations"; });
    for (const auto& part : plan.parts)
        plan.totalBytes += part.bytes;
    const double cardBytes = r.card.memoryGib * kGiB;
    plan.minGpus = std::max(1, static_cast<int>(std::ceil(plan.totalBytes / cardBytes - 1e-9)));
    plan.tensorParallel = nextPowerOfTwo(plan.minGpus);
    plan.gpuLine = std::to_string(plan.tensorParallel) + " x " + r.card.name +
                   " (tensor parallel " + std::to_string(plan.tensorParallel) +
                   ", a power of two; the minimum that holds " + planBytesText(plan.totalBytes) +
                   " is " + std::to_string(plan.minGpus) + " x " + fmt("%g", r.card.memoryGib) +
                   " GiB)";

    if (!training) {
        double kv = 0;
        for (const auto& part : plan.parts)
            if (part.key == "kv_cache")
                kv = part.bytes;
        plan.bytesPerDecodeStep = static_cast<double>(plan.activeParams) * wBits / 8.0 + kv;
        auto rate = [&](int gpus) {
            return gpus * r.card.bandwidthGBs * 1e9 / plan.bytesPerDecodeStep;
        };
        plan.decodeTokensPerSecMin = rate(plan.minGpus);
        plan.decodeTokensPerSecTp = rate(plan.tensorParallel);
        plan.decodeHow =
            "each step reads the " + std::string(m.experts > 0 ? "active " : "") + "weights (" +
            countText(static_cast<double>(plan.activeParams)) + " x " +
            bytesPerValueText(r.weights) + ") + the KV cache = " +
            planBytesText(plan.bytesPerDecodeStep) + "; at " + fmt("%g", r.card.bandwidthGBs) +
            " GB/s per card: <= " + fmt("%.1f", plan.decodeTokensPerSecTp) + " tokens/s per " +
            "sequence on " + std::to_string(plan.tensorParallel) +
            (plan.minGpus != plan.tensorParallel
                 ? " (" + fmt("%.1f", plan.decodeTokensPerSecMin) + " on " +
                       std::to_string(plan.minGpus) + ")"
                 : std::string()) +
            (r.batch > 1 ? ", x" + fmt("%.0f", b) + " tokens per step for the batch"
                               : std::string());
    }

    std::string price;
    if (!r.card.priceUsd) {
        price = "no price (set price_usd in the cards file)";
    } else {
        const double usd = *r.card.priceUsd;
        if (r.card.fp8Tflops > 0)
            plan.usdPerFp8Tflop = usd / r.card.fp8Tflops;
        if (r.card.fp4Tflops > 0)
            plan.usdPerFp4Tflop = usd / r.card.fp4Tflops;
        price = "$" + fmt("%.0f", usd) + " per card: " +
                (plan.usdPerFp8Tflop ? "$" + fmt("%.2f", *plan.usdPerFp8Tflop) + " per dense FP8 TFLOP"
                                     : std::string("no FP8")) +
                ", " +
                (plan.usdPerFp4Tflop ? "$" + fmt("%.2f", *plan.usdPerFp4Tflop) + " per dense FP4 TFLOP"
                                     : std::string("no FP4")) +
                "; " + std::to_string(plan.tensorParallel) +
                (plan.tensorParallel == 1 ? " card: $" : " cards: $") +
                fmt("%.0f", usd * plan.tensorParallel);
    }
    plan.priceLine = price;
    plan.notes.push_back("memory only: no room is kept for the CUDA context, NCCL buffers or "
                         "fragmentation (about 1-3 GiB per card in practice)");
    if (training)
        plan.notes.push_back("activations without dropout masks or attention scores (flash "
                             "attention); whole model on every card's share (no pipeline "
                             "bubbles, no ZeRO offload)");
    return plan;
}

} // namespace bitlens::analysis
