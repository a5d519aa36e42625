#include "quant/scheme.h"

#include "io/file_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

namespace bitlens::quant {

using formats::GgmlType;

namespace {

using nlohmann::json;

LayerConfig weightOnly(QuantType type, std::int64_t group)
{
    LayerConfig c;
    c.weightType = type;
    c.weightGranularity = Granularity::perGroup(1, group);
    c.weightSymmetric = type != QuantType::Int4;  // int4 weight-only is asymmetric (as torchao)
    c.actMode = ActMode::Float;
    return c;
}

/// The block-format presets: name -> (type, weight-only). "mxfp4", "mxfp4-w", ...
std::optional<std::pair<QuantType, bool>> blockFormatPreset(const std::string& preset)
{
    // The preset of a block format is its type name with '-' for '_' ("mxfp6_e2m3" ->
    // "mxfp6-e2m3"), and "-w" after it for weight-only.
    for (const QuantTypeTraits& t : allQuantTypes()) {
        if (!isBlockFormat(t))
            continue;
        std::string name(t.name);
        std::replace(name.begin(), name.end(), '_', '-');
        if (preset == name)
            return std::pair{t.type, false};
        if (preset == name + "-w")
            return std::pair{t.type, true};
    }
    return std::nullopt;
}

/// The defaults of each preset, before options.
Result<Scheme> presetDefaults(const std::string& preset)
{
    Scheme s;
    s.preset = preset;
    LayerConfig& c = s.config;
    if (preset == "dynamic-int8") {
        c.actMode = ActMode::Dynamic;
        c.actType = QuantType::UInt8;
    } else if (preset == "static-int8" || preset == "static-w4a8" || preset == "qat-int8" ||
               preset == "qat-w4a8") {
        c.actMode = ActMode::Static;
        c.actType = QuantType::UInt8;
        if (preset == "static-w4a8" || preset == "qat-w4a8")
            c.weightType = QuantType::Int4;
        s.foldBatchNorm = true;
        // QAT: the static recipe, trained through fake quantization (core/train/qat.h).
        if (preset.rfind("qat-", 0) == 0)
            s.qat = QatOptions{};
    } else if (preset == "w4-int4") {
        c = weightOnly(QuantType::Int4, 64);
    } else if (preset == "w4-nf4") {
        c = weightOnly(QuantType::NF4, 64);
        c.doubleQuant = true;
    } else if (preset == "w4-fp4") {
        c = weightOnly(QuantType::FP4E2M1, 64);
    } else if (preset == "fp8-e4m3" || preset == "fp8-e5m2") {
        const QuantType t = preset == "fp8-e4m3" ? QuantType::FP8E4M3 : QuantType::FP8E5M2;
        c.weightType = t;
        c.weightGranularity = Granularity::perTensor();
        c.actMode = ActMode::Dynamic;
        c.actType = t;
        c.actSymmetric = true;
    } else if (auto mx = blockFormatPreset(preset)) {
        // OCP MX and NVFP4: weights in blocks of the format's size along their inputs; the
        // plain names quantize the inputs too (dynamic, the same blocks along the features, as
        // the accelerators' matrix units take them), "-w" keeps them float.
        const std::int64_t block = traits(mx->first).blockSize;
        c.weightType = mx->first;
        c.weightGranularity = Granularity::perGroup(1, block);
        c.weightSymmetric = true;
        if (!mx->second) {
            c.actMode = ActMode::Dynamic;
            c.actType = mx->first;
            c.actSymmetric = true;
            c.actGranularity = Granularity::perGroup(-1, block);
        }
    } else if (preset == "llm-int8") {
        c.actMode = ActMode::Dynamic;
        c.actType = QuantType::Int8;
        c.actSymmetric = true;
        c.actGranularity = Granularity::perToken();
        c.outlierThreshold = 6.0;
    } else if (preset == "smoothquant-int8") {
        c.actMode = ActMode::Static;
        c.actType = QuantType::Int8;
        c.actSymmetric = true;
        c.smoothAlpha = 0.5;
        s.foldBatchNorm = true;
    } else if (preset == "fp16" || preset == "bf16") {
        const QuantType t = preset == "fp16" ? QuantType::FP16 : QuantType::BF16;
        c.weightType = t;
        c.weightGranularity = Granularity::perTensor();
        c.actMode = ActMode::Cast;
        c.actType = t;
    } else if (preset.rfind("gguf-", 0) == 0 && formats::ggmlTypeFromName(preset.substr(5)) &&
               std::find(presetNames().begin(), presetNames().end(), preset) !=
                   presetNames().end()) {
        // Weight-only, ggml's block round trip: what a GGUF file of this type holds.
        const GgmlType t = *formats::ggmlTypeFromName(preset.substr(5));
        const std::int64_t block = formats::ggmlTraits(t).blockSize;
        c.actMode = ActMode::Float;
        c.ggmlType = t;
        c.weightSymmetric = t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q6_K;
        c.weightType = t == GgmlType::F16    ? QuantType::FP16
                       : t == GgmlType::Q8_0 ? QuantType::Int8
                       : t == GgmlType::Q6_K ? QuantType::Int8
                       : c.weightSymmetric   ? QuantType::Int4
                                             : QuantType::UInt4;
        c.weightGranularity =
            block > 1 ? Granularity::perGroup(1, block) : Granularity::perTensor();
    } else {
        std::string names;
        for (const auto& p : presetNames())
            names += (names.empty() ? "" : ", ") + p;
        return Error::usage("unknown scheme '" + preset + "' (presets: " + names + ")");
    }
    return s;
}

Result<bool> parseBool(const std::string& key, const std::string& value)
{
    if (value == "true" || value == "1" || value == "yes")
        return true;
    if (value == "false" || value == "0" || value == "no")
        return false;
    return Error::usage("option " + key + " takes true or false, not '" + value + "'");
}

Result<double> parseNumber(const std::string& key, const std::string& value)
{
    try {
        std::size_t used = 0;
        const double v = std::stod(value, &used);
        if (used == value.size())
            return v;
    } catch (const std::exception&) {
    }
    return Error::usage("option " + key + " takes a number, not '" + value + "'");
}

/// The options of the qat-* presets (QatOptions).
Result<void> applyQatOption(QatOptions& q, const std::string& key, const std::string& value)
{
    const auto wholeNumber = [&](double lo, double hi) -> Result<std::int64_t> {
        auto n = parseNumber(key, value);
        if (!n)
            return n.error();
        if (*n < lo || *n > hi || *n != static_cast<double>(static_cast<std::int64_t>(*n)))
            return Error::usage("option " + key + " takes a whole number from " +
                                std::to_string(static_cast<std::int64_t>(lo)) + " to " +
                                std::to_string(static_cast<std::int64_t>(hi)) + ", not '" +
                                value + "'");
        return static_cast<std::int64_t>(*n);
    };
    const auto positive = [&](double hi) -> Result<double> {
        auto n = parseNumber(key, value);
        if (!n)
            return n.error();
        if (!(*n > 0.0) || *n > hi)
            return Error::usage("option " + key + " takes a number above 0 and at most " +
                                std::to_string(hi) + ", not '" + value + "'");
        return *n;
    };
    if (key == "epochs" || key == "samples" || key == "batch" || key == "freeze-bn" ||
        key == "eval-every" || key == "holdout" || key == "seed") {
        const double hi = key == "epochs" ? 1000.0 : key == "batch" ? 65536.0 : 1e12;
        const double lo = key == "epochs" || key == "batch" ? 1.0 : key == "freeze-bn" ? -1.0 : 0.0;
        auto n = wholeNumber(lo, hi);
        if (!n)
            return n.error();
        if (key == "epochs")
            q.epochs = static_cast<int>(*n);
        else if (key == "samples")
            q.samples = *n;
        else if (key == "batch")
            q.batchSize = *n;
        else if (key == "freeze-bn")
            q.freezeBnStep = *n;
        else if (key == "eval-every")
            q.evalEvery = *n;
        else if (key == "holdout")
            q.holdout = *n;
        else
            q.seed = static_cast<std::uint64_t>(*n);
    } else if (key == "lr" || key == "temperature" || key == "ema") {
        auto n = positive(key == "lr" ? 10.0 : key == "ema" ? 1.0 : 100.0);
        if (!n)
            return n.error();
        (key == "lr" ? q.lr : key == "ema" ? q.emaMomentum : q.temperature) = *n;
    } else if (key == "momentum" || key == "warmup") {
        auto n = parseNumber(key, value);
        if (!n)
            return n.error();
        if (*n < 0.0 || *n >= 1.0)
            return Error::usage("option " + key + " takes a number from 0 to below 1, not '" +
                                value + "'");
        (key == "momentum" ? q.momentum : q.warmup) = *n;
    } else if (key == "optimizer") {
        if (value == "adam")
            q.optimizer = QatOptions::Optimizer::Adam;
        else if (value == "sgd")
            q.optimizer = QatOptions::Optimizer::Sgd;
        else
            return Error::usage("option optimizer takes adam or sgd, not '" + value + "'");
    } else if (key == "act-range") {
        if (value == "fixed")
            q.actRange = QatOptions::ActRange::Fixed;
        else if (value == "ema")
            q.actRange = QatOptions::ActRange::Ema;
        else if (value == "learned")
            q.actRange = QatOptions::ActRange::Learned;
        else
            return Error::usage("option act-range takes fixed, ema or learned, not '" + value +
                                "'");
    } else if (key == "keep-best") {
        auto b = parseBool(key, value);
        if (!b)
            return b.error();
        q.keepBest = *b;
    } else if (key == "lsq" || key == "distill") {
        auto b = parseBool(key, value);
        if (!b)
            return b.error();
        if (key == "lsq") {
            q.lsq = *b;
            if (*b)
                q.actRange = QatOptions::ActRange::Learned;
            else if (q.actRange == QatOptions::ActRange::Learned)
                q.actRange = QatOptions::ActRange::Fixed;
        } else {
            q.distill = *b ? 1 : -1;
        }
    } else {
        return Error::usage("unknown option '" + key + "' (options: observer, per, group, sym, "
                            "weight, act, calib, epochs, samples, batch, lr, optimizer, momentum, "
                            "warmup, lsq, act-range, ema, distill, temperature, freeze-bn, "
                            "eval-every, holdout, keep-best, seed)");
    }
    return {};
}

Result<void> applyOption(Scheme& s, const std::string& key, const std::string& value)
{
    LayerConfig& c = s.config;
    if (c.ggmlType)
        return Error::usage("scheme " + s.preset + " takes no options: the ggml type fixes the "
                            "block size and the rounding (option '" + key + "')");
    if (key == "observer") {
        c.observer = value;
    } else if (key == "per") {
        if (value == "tensor")
            c.weightGranularity = Granularity::perTensor();
        else if (value == "channel")
            c.weightGranularity = Granularity::perChannel(0);
        else
            return Error::usage("option per takes tensor or channel, not '" + value + "'");
    } else if (key == "act-per") {
        if (value == "tensor")
            c.actGranularity = Granularity::perTensor();
        else if (value == "token")
            c.actGranularity = Granularity::perToken();
        else
            return Error::usage("option act-per takes tensor or token, not '" + value + "'");
    } else if (key == "group") {
        auto n = parseNumber(key, value);
        if (!n)
            return n.error();
        if (*n < 2 || *n > 4096 || *n != static_cast<double>(static_cast<std::int64_t>(*n)))
            return Error::usage("option group takes a whole number from 2 to 4096, not '" +
                                value + "'");
        c.weightGranularity = Granularity::perGroup(1, static_cast<std::int64_t>(*n));
    } else if (key == "scale") {
        if (value == "floor")
            c.mxScale = MxScaleMode::Floor;
        else if (value == "rceil")
            c.mxScale = MxScaleMode::Rceil;
        else
            return Error::usage("option scale takes floor or rceil (how an MX block's shared "
                                "exponent is chosen), not '" + value + "'");
    } else if (key == "method") {
        if (value == "rtn")
            c.method = LayerConfig::Method::Rtn;
        else if (value == "gptq")
            c.method = LayerConfig::Method::Gptq;
        else if (value == "awq")
            c.method = LayerConfig::Method::Awq;
        else
            return Error::usage("option method takes rtn, gptq or awq, not '" + value + "'");
    } else if (key == "awq-clip") {
        auto b = parseBool(key, value);
        if (!b)
            return b.error();
        c.awqClip = *b;
    } else if (key == "damp") {
        auto n = parseNumber(key, value);
        if (!n)
            return n.error();
        if (!(*n > 0.0 && *n < 1.0))
            return Error::usage("option damp takes a fraction between 0 and 1, not '" + value +
                                "'");
        c.gptqDamp = *n;
    } else if (key == "act-order") {
        auto b = parseBool(key, value);
        if (!b)
            return b.error();
        c.gptqActOrder = *b;
    } else if (key == "sym" || key == "act-sym" || key == "double-quant" || key == "fold-bn" ||
               key == "reduce-range") {
        auto b = parseBool(key, value);
        if (!b)
            return b.error();
        if (key == "sym")
            c.weightSymmetric = *b;
        else if (key == "act-sym")
            c.actSymmetric = *b;
        else if (key == "double-quant")
            c.doubleQuant = *b;
        else if (key == "reduce-range")
            c.reduceRange = *b;
        else
            s.foldBatchNorm = *b;
    } else if (key == "wrange") {
        if (value == "127")
            c.weightRange = 127;
        else if (value == "128")
            c.weightRange = 128;
        else
            return Error::usage("option wrange takes 127 (int8 weights in [-127, 127], as "
                                "TensorRT and onnxruntime's symmetric quantizer) or 128 "
                                "([-128, 127], PyTorch's observers), not '" + value + "'");
    } else if (key == "weight" || key == "act") {
        const auto t = quantTypeFromName(value);
        if (!t) {
            std::string names;
            for (const QuantTypeTraits& tt : allQuantTypes())
                names += (names.empty() ? "" : ", ") + std::string(tt.name);
            return Error::usage("option " + key + " takes a type name (" + names + "), not '" +
                                value + "'");
        }
        if (key == "weight")
            c.weightType = *t;
        else
            c.actType = *t;
    } else if (key == "threshold" || key == "alpha" || key == "calib") {
        auto n = parseNumber(key, value);
        if (!n)
            return n.error();
        if (key == "threshold")
            c.outlierThreshold = *n;
        else if (key == "alpha") {
            if (*n < 0.0 || *n > 1.0)
                return Error::usage("option alpha takes a number from 0 to 1, not '" + value + "'");
            c.smoothAlpha = *n;
        } else {
            if (*n < 1)
                return Error::usage("option calib takes a positive sample count");
            s.calibSamples = static_cast<std::int64_t>(*n);
        }
    } else if (s.qat) {
        return applyQatOption(*s.qat, key, value);
    } else {
        return Error::usage("unknown option '" + key + "' (options: observer, per, act-per, "
                            "group, sym, act-sym, weight, act, double-quant, fold-bn, "
                            "reduce-range, wrange, method, damp, act-order, threshold, alpha, "
                            "calib, scale, head)");
    }
    return {};
}

/// The name under which overrides (and head=) address a language model's output head.
constexpr const char* kLmHead = "lm_head";

/// Presets that keep a language model's output head float32 by default, as transformers does
/// when it loads a model in 8-bit or 4-bit with bitsandbytes (lm_head is never converted).
bool keepsLmHeadFloat(const std::string& preset)
{
    // The MX / NVFP4 presets too, as llm-compressor's recipes for them ignore lm_head.
    return preset == "w4-int4" || preset == "w4-nf4" || preset == "w4-fp4" ||
           preset == "llm-int8" || blockFormatPreset(preset).has_value();
}

/// True for the output head of a language model: the quantizable node called lm_head, or in a
/// graph whose task is "lm", one whose output is a graph output (the logits).
bool isLmHead(const ir::Graph& graph, const ir::Node& node)
{
    if (node.name == kLmHead)
        return true;
    auto task = graph.metadata.find("task");
    if (task == graph.metadata.end() || task->second != "lm")
        return false;
    for (const auto& out : node.outputs)
        for (const auto& g : graph.outputs)
            if (!out.empty() && out == g.name)
                return true;
    return false;
}

/// True when a GPTQ-only option differs from its default.
bool hasGptqOptions(const LayerConfig& c)
{
    const LayerConfig d;
    return c.gptqDamp != d.gptqDamp || c.gptqActOrder != d.gptqActOrder;
}

/// The block formats' constraints on a parsed scheme: a block-format weight is grouped by the
/// format's own block along its inputs (and group= / per= may not say otherwise); a
/// block-format activation is dynamic, in the same blocks along the features; scale= belongs to
/// the MX types; GPTQ and QAT keep to the formats they were written for.
Result<void> checkBlockFormats(Scheme& scheme)
{
    LayerConfig& c = scheme.config;
    const QuantTypeTraits& w = traits(c.weightType);
    const bool actBlocks = c.actMode != ActMode::Float && isBlockFormat(traits(c.actType));
    if (isBlockFormat(w) && !c.keepFloat) {
        if (c.weightGranularity != Granularity::perGroup(1, w.blockSize))
            return Error::usage(std::string(w.name) + " weights are quantized in blocks of " +
                                std::to_string(w.blockSize) + " along their inputs; scheme " +
                                scheme.spec + " asks for " + c.weightGranularity.describe());
        if (c.method != LayerConfig::Method::Rtn)
            return Error::usage(std::string("option method=") +
                                (c.method == LayerConfig::Method::Gptq ? "gptq" : "awq") +
                                " does not combine with " +
                                std::string(w.name) + " weights (a block format); scheme " +
                                scheme.preset);
        if (scheme.qat)
            return Error::usage("the qat-* presets train int8 / int4 weights, not " +
                                std::string(w.name));
    }
    if (actBlocks) {
        if (c.actMode != ActMode::Dynamic)
            return Error::usage(std::string(traits(c.actType).name) + " activations are " +
                                "quantized per block at run time (dynamic); scheme " + scheme.spec +
                                " asks for static ones");
        c.actGranularity = Granularity::perGroup(-1, traits(c.actType).blockSize);
        c.actSymmetric = true;
    }
    const bool mx = (isBlockFormat(w) && w.blockScale == BlockScale::E8M0) ||
                    (actBlocks && traits(c.actType).blockScale == BlockScale::E8M0);
    if (c.mxScale != MxScaleMode::Floor && !mx)
        return Error::usage("option scale (floor or rceil) applies to the MX types; scheme " +
                            scheme.spec + " has none");
    return {};
}

/// Parses "PRESET[:key=value,key=value]"; a value may itself contain ':' (percentile:99.99).
/// head=float|quantize is kept apart and applied last, as an override of lm_head.
Result<Scheme> parseInline(const std::string& spec)
{
    const auto colon = spec.find(':');
    auto scheme = presetDefaults(spec.substr(0, colon));
    if (!scheme)
        return scheme.error();
    scheme->spec = spec;
    if (colon == std::string::npos)
        return scheme;
    std::stringstream options(spec.substr(colon + 1));
    std::string item;
    std::string head;
    bool doubleQuantAsked = false;
    while (std::getline(options, item, ',')) {
        if (item.empty())
            continue;
        if (item.rfind("double-quant=", 0) == 0)
            doubleQuantAsked = true;
        const auto eq = item.find('=');
        if (eq == std::string::npos)
            return Error::usage("scheme option '" + item + "' needs the form key=value");
        if (item.substr(0, eq) == "head") {
            head = item.substr(eq + 1);
            if (head != "float" && head != "quantize")
                return Error::usage("option head takes float or quantize, not '" + head + "'");
            continue;
        }
        if (auto r = applyOption(*scheme, item.substr(0, eq), item.substr(eq + 1)); !r)
            return r.error();
    }
    if (scheme->config.reduceRange) {
        if (scheme->config.weightType != QuantType::Int8)
            return Error::usage("option reduce-range applies to int8 weights (7-bit codes "
                                "[-64, 64]); scheme " + scheme->preset + " stores its weights as " +
                                std::string(traits(scheme->config.weightType).name));
        if (scheme->qat)
            return Error::usage("option reduce-range is not offered for the qat-* presets "
                                "(training fixes the code range)");
    }
    if (scheme->config.weightRange == 127) {
        if (scheme->config.weightType != QuantType::Int8)
            return Error::usage("option wrange=127 applies to int8 weights (codes [-127, 127]); "
                                "scheme " + scheme->preset + " stores its weights as " +
                                std::string(traits(scheme->config.weightType).name));
        if (scheme->config.reduceRange)
            return Error::usage("options wrange=127 and reduce-range=true ask for two weight "
                                "ranges; reduce-range alone keeps the codes in [-64, 64]");
        if (scheme->qat)
            return Error::usage("option wrange=127 is not offered for the qat-* presets "
                                "(training fixes the code range)");
    }
    // w4-nf4:weight=int4 leaves the preset's NF4 double quantization behind; asking for it on
    // another type is an error. GPTQ picks codes with the float32 scales, so it drops the
    // preset's double quantization too.
    const bool byMethod = scheme->config.method != LayerConfig::Method::Rtn;  // GPTQ or AWQ
    const char* methodName = scheme->config.method == LayerConfig::Method::Awq ? "awq" : "gptq";
    if (scheme->config.doubleQuant && !doubleQuantAsked &&
        (scheme->config.weightType != QuantType::NF4 || byMethod))
        scheme->config.doubleQuant = false;
    if (byMethod) {
        const LayerConfig& c = scheme->config;
        std::string refusal;
        if (c.doubleQuant)
            refusal = std::string("double quantization (") +
                      (methodName[0] == 'a' ? "AWQ" : "GPTQ") +
                      " rounds with the float32 absmax)";
        else if (traits(c.weightType).family == TypeFamily::Float)
            refusal = std::string(traits(c.weightType).name) + " weights (a cast, no grid)";
        else if (scheme->qat)
            refusal = "the qat-* presets (training does the rounding)";
        else if (c.smoothAlpha > 0.0 || c.outlierThreshold > 0.0)
            refusal = "SmoothQuant / LLM.int8() (their own treatment of the inputs)";
        if (!refusal.empty())
            return Error::usage(std::string("option method=") + methodName +
                                " does not combine with " + refusal + "; scheme " +
                                scheme->preset);
    }
    if (scheme->config.method != LayerConfig::Method::Gptq && hasGptqOptions(scheme->config))
        return Error::usage("options damp and act-order belong to method=gptq");
    if (scheme->config.method != LayerConfig::Method::Awq && !scheme->config.awqClip)
        return Error::usage("option awq-clip belongs to method=awq");
    if (auto r = checkBlockFormats(*scheme); !r)
        return r.error();
    if (scheme->config.doubleQuant && scheme->config.weightType != QuantType::NF4)
        return Error::usage("option double-quant applies to NF4 weights (bitsandbytes' "
                            "compress_statistics); scheme " + scheme->preset + " stores its "
                            "weights as " + std::string(traits(scheme->config.weightType).name));
    // The head's own configuration is the scheme's final one (options may follow head=).
    if (head == "float")
        scheme->overrides[kLmHead] = std::nullopt;
    else if (head == "quantize")
        scheme->overrides[kLmHead] = scheme->config;
    return scheme;
}

Result<Scheme> parseJsonFile(const std::string& path)
{
    auto bytes = io::readFileBytes(path);
    if (!bytes)
        return bytes.error();
    const json j = json::parse(bytes->begin(), bytes->end(), nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return Error::badInput(path, "is not a JSON object");
    if (!j.contains("preset") || !j["preset"].is_string())
        return Error::badInput(path, "needs a \"preset\" string (e.g. \"static-int8\")");
    std::string inlineSpec = j["preset"].get<std::string>();
    if (j.contains("options")) {
        if (!j["options"].is_object())
            return Error::badInput(path, "\"options\" must be an object");
        std::string opts;
        for (const auto& [key, value] : j["options"].items())
            opts += (opts.empty() ? "" : ",") + key + "=" +
                    (value.is_string() ? value.get<std::string>() : value.dump());
        if (!opts.empty())
            inlineSpec += ":" + opts;
    }
    auto scheme = parseInline(inlineSpec);
    if (!scheme) {
        Error e = scheme.error();
        e.path = path;
        return e;
    }
    scheme->spec = path;
    if (j.contains("overrides")) {
        if (!j["overrides"].is_object())
            return Error::badInput(path, "\"overrides\" must be an object of layer: scheme");
        for (const auto& [layer, value] : j["overrides"].items()) {
            if (!value.is_string())
                return Error::badInput(path, "override of '" + layer + "' must be a string");
            if (auto applied = applyOverride(*scheme, layer, value.get<std::string>());
                !applied) {
                Error e = applied.error();
                e.path = path;
                return e;
            }
        }
    }
    return scheme;
}

std::string actModeName(ActMode mode)
{
    switch (mode) {
    case ActMode::Float: return "float";
    case ActMode::Static: return "static";
    case ActMode::Dynamic: return "dynamic";
    case ActMode::Cast: return "cast";
    }
    return "?";
}

json configToJson(const LayerConfig& c)
{
    json j = {{"weight_type", std::string(traits(c.weightType).name)},
              {"weight_granularity", c.weightGranularity.describe()},
              {"weight_symmetric", c.weightSymmetric},
              {"act_mode", actModeName(c.actMode)}};
    if (c.actMode != ActMode::Float) {
        j["act_type"] = std::string(traits(c.actType).name);
        j["act_granularity"] = c.actGranularity.describe();
        j["act_symmetric"] = c.actSymmetric;
    }
    if (c.actMode == ActMode::Static)
        j["observer"] = c.observer;
    if (c.doubleQuant && c.weightType == QuantType::NF4)
        j["double_quant"] = true;
    if (c.method == LayerConfig::Method::Gptq) {
        j["method"] = "gptq";
        j["damp"] = c.gptqDamp;
        j["act_order"] = c.gptqActOrder;
    } else if (c.method == LayerConfig::Method::Awq) {
        j["method"] = "awq";
        j["awq_clip"] = c.awqClip;
    }
    if (c.reduceRange)
        j["reduce_range"] = true;
    // The int8 weight code range, always named where the weights are int8 (an importer of
    // the report need not know the default): "full" [-128, 127], "narrow" [-127, 127] or
    // "reduced" [-64, 64]; with the codes themselves.
    if (c.weightType == QuantType::Int8 && !c.ggmlType) {
        const auto [qmin, qmax] = codeRange(c.weightType, c.weightCodeRange());
        j["weight_range"] = c.weightRange;
        j["weight_codes"] = {qmin, qmax};
    }
    if (c.outlierThreshold > 0)
        j["outlier_threshold"] = c.outlierThreshold;
    if (c.smoothAlpha > 0)
        j["smooth_alpha"] = c.smoothAlpha;
    if (c.ggmlType)
        j["ggml_type"] = std::string(formats::ggmlTraits(*c.ggmlType).name);
    return j;
}

} // namespace

CodeRange LayerConfig::weightCodeRange() const
{
    if (reduceRange && supportsCodeRange(weightType, CodeRange::Reduced))
        return CodeRange::Reduced;
    if (weightRange == 127 && supportsCodeRange(weightType, CodeRange::Narrow))
        return CodeRange::Narrow;
    return CodeRange::Full;
}

std::string LayerConfig::describe() const
{
    if (keepFloat)
        return "float";
    if (ggmlType)
        return "ggml " + std::string(formats::ggmlTraits(*ggmlType).name) +
               (formats::ggmlTraits(*ggmlType).blockSize > 1
                    ? " (block " + std::to_string(formats::ggmlTraits(*ggmlType).blockSize) + ")"
                    : std::string()) +
               " / float acts";
    std::string text = std::string(traits(weightType).name);
    if (isBlockFormat(traits(weightType)))
        text += " block " + std::to_string(traits(weightType).blockSize) +
                (mxScale == MxScaleMode::Rceil ? " rceil" : "");
    else if (traits(weightType).needsScale)
        text += " " + weightGranularity.describe() + (weightSymmetric ? " sym" : " asym") +
                (reduceRange ? " 7-bit" : weightRange == 127 ? " [-127, 127]" : "") +
                (method == Method::Gptq ? (gptqActOrder ? " gptq act-order" : " gptq")
                 : method == Method::Awq ? (awqClip ? " awq" : " awq no-clip")
                                         : "");
    if (actMode == ActMode::Float)
        return text + " / float acts";
    text += " / " + std::string(traits(actType).name) + " " + actModeName(actMode);
    if (actMode == ActMode::Static)
        text += " " + observer;
    if (actGranularity.kind == Granularity::Kind::PerToken)
        text += " per-token";
    else if (actGranularity.kind == Granularity::Kind::PerGroup)
        text += " block " + std::to_string(actGranularity.groupSize);
    return text;
}

const std::vector<std::string>& presetNames()
{
    static const std::vector<std::string> names{
        "dynamic-int8", "static-int8", "static-w4a8", "w4-int4",          "w4-nf4",
        "w4-fp4",       "fp8-e4m3",    "fp8-e5m2",    "llm-int8",         "smoothquant-int8",
        "fp16",         "bf16",        "qat-int8",    "qat-w4a8",         "gguf-f16",
        "gguf-q8_0",    "gguf-q4_0",   "gguf-q4_1",   "gguf-q4_k",        "gguf-q6_k",
        "mxfp4",        "mxfp4-w",     "nvfp4",       "nvfp4-w",          "mxfp6-e2m3",
        "mxfp6-e2m3-w", "mxfp6-e3m2",  "mxfp6-e3m2-w", "mxfp8-e4m3",      "mxfp8-e4m3-w",
        "mxfp8-e5m2",   "mxfp8-e5m2-w", "mxint8",     "mxint8-w"};
    return names;
}

GgmlType ggmlTypeForRow(GgmlType wanted, std::int64_t rowLength)
{
    if (rowLength % formats::ggmlTraits(wanted).blockSize == 0)
        return wanted;
    if (rowLength % 32 == 0) {
        if (wanted == GgmlType::Q4_K)
            return GgmlType::Q5_0;
        if (wanted == GgmlType::Q6_K)
            return GgmlType::Q8_0;
    }
    return GgmlType::F16;
}

std::string ggmlFallbackNote(GgmlType wanted, std::int64_t rowLength)
{
    const GgmlType type = ggmlTypeForRow(wanted, rowLength);
    if (type == wanted)
        return {};
    return std::string(formats::ggmlTraits(wanted).name) + " blocks of " +
           std::to_string(formats::ggmlTraits(wanted).blockSize) + " do not divide the " +
           std::to_string(rowLength) + " inputs per output channel; stored as " +
           std::string(formats::ggmlTraits(type).name) + " (as llama.cpp falls back)";
}

bool usesGgml(const Scheme& scheme)
{
    if (scheme.config.ggmlType)
        return true;
    for (const auto& [layer, config] : scheme.overrides)
        if (config && config->ggmlType)
            return true;
    return false;
}

const std::vector<std::string>& postTrainingPresetNames()
{
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto& name : presetNames())
            // The gguf-* export presets are compared when named (most layers of a small
            // CNN would fall back to F16).
            if (name.rfind("qat-", 0) != 0 && name.rfind("gguf-", 0) != 0)
                out.push_back(name);
        return out;
    }();
    return names;
}

std::int64_t dataSamplesNeeded(const Scheme& scheme)
{
    if (!scheme.qat)
        return scheme.calibSamples;
    const QatOptions& q = *scheme.qat;
    if (q.samples == 0)
        return 0;
    return std::max(scheme.calibSamples, q.samples * q.epochs + q.holdout);
}

Result<void> applyOverride(Scheme& scheme, const std::string& layer, const std::string& value)
{
    if (value == "float" || value == "float32") {
        scheme.overrides[layer] = std::nullopt;
        return {};
    }
    auto sub = parseInline(value);
    if (!sub) {
        Error e = sub.error();
        e.message = "override of '" + layer + "': " + e.message;
        return e;
    }
    scheme.overrides[layer] = sub->config;
    return {};
}

Result<Scheme> parseScheme(const std::string& spec)
{
    if (spec.empty())
        return Error::usage("empty scheme (presets: static-int8, w4-int4, ...)");
    std::error_code ec;
    if (spec.size() > 5 && spec.substr(spec.size() - 5) == ".json") {
        if (auto ok = io::checkOpenable(spec); !ok)
            return ok.error();
        return parseJsonFile(spec);
    }
    return parseInline(spec);
}

nlohmann::json schemeToJson(const Scheme& scheme)
{
    json j = {{"preset", scheme.preset},
              {"spec", scheme.spec},
              {"config", configToJson(scheme.config)},
              {"fold_batchnorm", scheme.foldBatchNorm}};
    if (scheme.config.actMode == ActMode::Static)
        j["calib_samples"] = scheme.calibSamples;
    if (scheme.qat) {
        const QatOptions& q = *scheme.qat;
        const char* range[] = {"fixed", "ema", "learned"};
        j["qat"] = {{"epochs", q.epochs},
                    {"samples", q.samples},
                    {"batch", q.batchSize},
                    {"lr", q.lr},
                    {"optimizer", q.optimizer == QatOptions::Optimizer::Adam ? "adam" : "sgd"},
                    {"momentum", q.momentum},
                    {"warmup", q.warmup},
                    {"lsq", q.lsq},
                    {"act_range", range[static_cast<int>(q.actRange)]},
                    {"distill", q.distill == 0 ? json("auto") : json(q.distill > 0)},
                    {"temperature", q.temperature},
                    {"freeze_bn_step", q.freezeBnStep},
                    {"eval_every", q.evalEvery},
                    {"holdout", q.holdout},
                    {"keep_best", q.keepBest},
                    {"seed", q.seed}};
    }
    json overrides = json::object();
    for (const auto& [layer, config] : scheme.overrides)
        overrides[layer] = config ? configToJson(*config) : json("float");
    j["overrides"] = overrides;
    j["display_name"] = displayName(scheme);
    return j;
}

const char* methodTitle(LayerConfig::Method method)
{
    switch (method) {
    case LayerConfig::Method::Rtn: return "RTN";
    case LayerConfig::Method::Gptq: return "GPTQ";
    case LayerConfig::Method::Awq: return "AWQ";
    }
    return "?";
}

namespace {

/// A number as a scheme option writes it: 0.05, 99.99, 6 (no trailing zeros, no exponent for
/// ordinary magnitudes).
std::string optionNumber(double value)
{
    std::ostringstream out;
    out << value;
    return out.str();
}

/// A weight granularity in a display name: "g128", "per-channel", "per-tensor".
std::string granularityLabel(const Granularity& g)
{
    if (g.kind == Granularity::Kind::PerGroup)
        return "g" + std::to_string(g.groupSize);
    if (g.kind == Granularity::Kind::PerChannel)
        return "per-channel";
    if (g.kind == Granularity::Kind::PerToken)
        return "per-token";
    return "per-tensor";
}

} // namespace

std::string displayName(const Scheme& scheme)
{
    auto defaults = presetDefaults(scheme.preset);
    if (!defaults)
        return scheme.preset.empty() ? scheme.spec : scheme.preset;
    const LayerConfig& c = scheme.config;
    const LayerConfig& d = defaults->config;
    std::vector<std::string> parts;
    if (c.method != d.method)
        parts.emplace_back(methodTitle(c.method));
    if (c.weightType != d.weightType)
        parts.push_back(std::string(traits(c.weightType).name) + " weights");
    if (c.weightGranularity != d.weightGranularity)
        parts.push_back(granularityLabel(c.weightGranularity));
    if (c.weightSymmetric != d.weightSymmetric)
        parts.emplace_back(c.weightSymmetric ? "sym" : "asym");
    // GPTQ / AWQ and another weight type drop NF4's double quantization by themselves.
    if (c.doubleQuant != d.doubleQuant && c.method == LayerConfig::Method::Rtn &&
        c.weightType == d.weightType)
        parts.emplace_back(c.doubleQuant ? "double-quant" : "no double-quant");
    if (c.reduceRange != d.reduceRange)
        parts.emplace_back("7-bit");
    if (c.weightRange != d.weightRange)
        parts.push_back("wrange " + std::to_string(c.weightRange));
    if (c.gptqActOrder != d.gptqActOrder)
        parts.emplace_back(c.gptqActOrder ? "act-order" : "no act-order");
    if (c.gptqDamp != d.gptqDamp)
        parts.push_back("damp " + optionNumber(c.gptqDamp));
    if (c.awqClip != d.awqClip)
        parts.emplace_back(c.awqClip ? "clip" : "no clip");
    if (c.mxScale != d.mxScale)
        parts.emplace_back(c.mxScale == MxScaleMode::Rceil ? "rceil" : "floor");
    if (c.actMode != ActMode::Float) {
        if (c.actType != d.actType)
            parts.push_back(std::string(traits(c.actType).name) + " acts");
        if (c.actGranularity != d.actGranularity)
            parts.push_back("acts " + granularityLabel(c.actGranularity));
        if (c.actSymmetric != d.actSymmetric)
            parts.emplace_back(c.actSymmetric ? "acts sym" : "acts asym");
        if (c.actMode == ActMode::Static && c.observer != d.observer)
            parts.push_back(c.observer);
    }
    if (c.outlierThreshold != d.outlierThreshold)
        parts.push_back("threshold " + optionNumber(c.outlierThreshold));
    if (c.smoothAlpha != d.smoothAlpha)
        parts.push_back("alpha " + optionNumber(c.smoothAlpha));
    if (scheme.calibSamples != defaults->calibSamples)
        parts.push_back("calib " + std::to_string(scheme.calibSamples));
    if (scheme.foldBatchNorm != defaults->foldBatchNorm)
        parts.emplace_back(scheme.foldBatchNorm ? "fold-bn" : "no fold-bn");
    if (scheme.qat && defaults->qat) {
        const QatOptions& q = *scheme.qat;
        const QatOptions& dq = *defaults->qat;
        if (q.epochs != dq.epochs)
            parts.push_back(std::to_string(q.epochs) + (q.epochs == 1 ? " epoch" : " epochs"));
        if (q.samples != dq.samples)
            parts.push_back(std::to_string(q.samples) + " samples");
        if (q.lr != dq.lr)
            parts.push_back("lr " + optionNumber(q.lr));
    }
    std::size_t others = 0;
    for (const auto& [layer, config] : scheme.overrides) {
        // head= says what the preset does anyway on some presets (w4-int4 keeps it float).
        if (layer == kLmHead) {
            if (config.has_value() == keepsLmHeadFloat(scheme.preset))
                parts.emplace_back(config ? "head quantized" : "head float");
        } else
            ++others;
    }
    if (others > 0)
        parts.push_back("+" + std::to_string(others) + (others == 1 ? " override" : " overrides"));
    std::string name = scheme.preset;
    for (std::size_t i = 0; i < parts.size(); ++i)
        name += (i == 0 ? " \u00b7 " : " ") + parts[i];
    return name;
}

bool isQuantizable(const ir::Graph& graph, const ir::Node& node)
{
    switch (node.op) {
    case ir::OpKind::Conv:
    case ir::OpKind::Gemm:
    case ir::OpKind::MatMul:
        return node.inputs.size() >= 2 && graph.initializer(node.inputs[1]) != nullptr &&
               graph.initializer(node.inputs[1])->is_floating_point();
    case ir::OpKind::LSTM:
    case ir::OpKind::GRU:
        // Both the input weight W and the recurrent weight R must be constants.
        for (std::size_t i : {std::size_t{1}, std::size_t{2}})
            if (node.inputs.size() <= i || graph.initializer(node.inputs[i]) == nullptr ||
                !graph.initializer(node.inputs[i])->is_floating_point())
                return false;
        return true;
    default:
        return false;
    }
}

Result<Plan> makePlan(const ir::Graph& graph, const Scheme& scheme)
{
    Plan plan;
    std::set<std::string> quantizable;
    std::vector<std::string> heads;
    for (const auto& node : graph.nodes) {
        if (!isQuantizable(graph, node))
            continue;
        quantizable.insert(node.name);
        plan.layers[node.name] = scheme.config;
        if (isLmHead(graph, node))
            heads.push_back(node.name);
    }
    // A language model's head stays float32 under the LLM presets unless an override (or
    // head=quantize, an override of lm_head) says otherwise.
    auto headOverride = scheme.overrides.find(kLmHead);
    for (const auto& head : heads) {
        if (scheme.overrides.count(head) && head != kLmHead)
            continue;
        if (headOverride != scheme.overrides.end()) {
            if (headOverride->second)
                plan.layers[head] = *headOverride->second;
            else
                plan.layers[head].keepFloat = true;
        } else if (keepsLmHeadFloat(scheme.preset)) {
            plan.layers[head].keepFloat = true;
        }
    }
    for (const auto& [layer, config] : scheme.overrides) {
        // head=float|quantize (an override of lm_head) is a no-op on a model without a head.
        if (layer == kLmHead && quantizable.count(layer) == 0)
            continue;
        if (quantizable.count(layer) == 0)
            return Error::usage("override names '" + layer +
                                "', which is not a quantizable layer (Conv, Gemm, MatMul, "
                                "LSTM or GRU with constant weights) of this model");
        if (config)
            plan.layers[layer] = *config;
        else
            plan.layers[layer].keepFloat = true;
    }
    return plan;
}

} // namespace bitlens::quant
