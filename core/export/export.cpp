#include "export/export.h"

#include "exec/executor.h"
#include "exec/quant_ops.h"
#include "export/consumer.h"
#include "export/folder_export.h"
#include "export/gguf_export.h"
#include "export/onnx_qdq.h"
#include "export/safetensors_export.h"
#include "export/verify_runs.h"
#include "io/safetensors.h"
#include "export/report_json.h"
#include "io/onnx.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <limits>

namespace bitlens::exporting {

namespace {

std::string lower(std::string text)
{
    for (char& c : text)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

/// A format value without a writer (none today: every ExportFormat has one).
Error notYet(ExportFormat format, const std::string& path = {})
{
    return Error::unsupported(path, "export to " + formatName(format) +
                                        " is not available in this build yet; --format onnx "
                                        "writes int8 and int4 QDQ models, --format safetensors "
                                        "the compressed-tensors layout");
}

std::string fmt(double value)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", value);
    return buf;
}

/// Why compressed-tensors cannot hold a layer configuration, or nullopt when it can.
std::optional<std::string> safetensorsLimitation(const quant::LayerConfig& c)
{
    if (c.keepFloat)
        return std::nullopt;
    switch (c.weightType) {
    case quant::QuantType::NF4:
    case quant::QuantType::FP4E2M1:
    case quant::QuantType::FP8E5M2:
        return std::string("compressed-tensors has no layout for ") +
               std::string(quant::traits(c.weightType).name) +
               " weights (ONNX or GGUF cannot hold them either; keep them in BitLens' report)";
    default: break;
    }
    if (quant::isBlockFormat(quant::traits(c.weightType))) {
        // compressed-tensors' nvfp4-pack-quantized, mxfp4-pack-quantized and mxfp8-quantized,
        // weight-only (NVFP4A16, MXFP4A16, MXFP8A16).
        const quant::QuantType w = c.weightType;
        if (compressedTensorsBlockFormat(w).empty())
            return std::string("compressed-tensors' block layouts hold nvfp4, mxfp4 and "
                               "mxfp8_e4m3 weights, not ") +
                   std::string(quant::traits(w).name);
        if (c.actMode != quant::ActMode::Float)
            return std::string("compressed-tensors computes activation block scales by its "
                               "own rule (MX: amax rounded to a power of two; NVFP4: a "
                               "calibrated global scale), not the one BitLens measured: export "
                               "the weight-only preset (") +
                   std::string(quant::traits(w).name) + " weights, -w)";
    } else if (c.actMode != quant::ActMode::Float &&
               quant::isBlockFormat(quant::traits(c.actType))) {
        return std::string("compressed-tensors has no layout for ") +
               std::string(quant::traits(c.actType).name) + " activations";
    }
    if (c.smoothAlpha > 0.0)
        return std::string("SmoothQuant's per-channel input divisor has no place in "
                           "compressed-tensors (export it to ONNX instead)");
    if (c.method == quant::LayerConfig::Method::Awq)
        return std::string("AWQ's per-channel input scale is folded into the op before each "
                           "layer by AutoAWQ, which BitLens does not do yet; it has no place in "
                           "compressed-tensors (export it to ONNX instead, where it is a Div)");
    return std::nullopt;
}

/// Unsupported naming the scheme and the format when `limitation` refuses its global
/// configuration or one of its layer overrides.
Result<void> checkSchemeFits(const quant::Scheme& scheme, const std::string& formatLabel,
                             std::optional<std::string> (*limitation)(const quant::LayerConfig&))
{
    const std::string name = scheme.spec.empty() ? scheme.preset : scheme.spec;
    const std::string prefix = "scheme " + name + " cannot be exported to " + formatLabel + ": ";
    if (auto why = limitation(scheme.config))
        return Error::unsupported({}, prefix + *why);
    for (const auto& [layer, config] : scheme.overrides)
        if (config)
            if (auto why = limitation(*config))
                return Error::unsupported({}, prefix + "override of layer '" + layer + "': " +
                                                  *why);
    return {};
}

} // namespace

std::string formatName(ExportFormat format)
{
    switch (format) {
    case ExportFormat::Onnx: return "onnx";
    case ExportFormat::Gguf: return "gguf";
    case ExportFormat::Safetensors: return "safetensors";
    }
    return "?";
}

Result<ExportFormat> parseFormat(const std::string& name)
{
    const std::string n = lower(name);
    if (n == "onnx")
        return ExportFormat::Onnx;
    if (n == "gguf")
        return ExportFormat::Gguf;
    if (n == "safetensors")
        return ExportFormat::Safetensors;
    return Error::usage("--format must be onnx, gguf or safetensors, not '" + name + "'");
}

Result<ExportFormat> formatFromPath(const std::string& path)
{
    const std::string ext = lower(std::filesystem::path(path).extension().string());
    if (ext == ".onnx")
        return ExportFormat::Onnx;
    if (ext == ".gguf")
        return ExportFormat::Gguf;
    if (ext == ".safetensors")
        return ExportFormat::Safetensors;
    return Error::usage("cannot tell the export format of '" + path +
                        "' from its extension (use .onnx, .gguf or .safetensors)");
}

Result<void> checkExportable(const quant::Scheme& scheme, ExportFormat format)
{
    // ggml's block types exist only in GGUF.
    if (format != ExportFormat::Gguf && quant::usesGgml(scheme))
        return Error::unsupported({}, "scheme " +
                                          (scheme.spec.empty() ? scheme.preset : scheme.spec) +
                                          " quantizes with ggml block types, which only "
                                          "--format gguf holds");
    switch (format) {
    case ExportFormat::Onnx: return checkSchemeFits(scheme, "ONNX", onnxQdqLimitation);
    case ExportFormat::Safetensors:
        return checkSchemeFits(scheme, "safetensors", safetensorsLimitation);
    case ExportFormat::Gguf: return checkSchemeFits(scheme, "gguf", ggufLimitation);
    }
    return notYet(format);
}

std::string partialGroupRule(ExportFormat format)
{
    switch (format) {
    case ExportFormat::Onnx:
        return "int4 / int8 groups that do not divide a row: kept, the last block shorter "
               "(DequantizeLinear block_size, opset 21; onnxruntime gives the same values)";
    case ExportFormat::Safetensors:
        return "int4 / int8 groups that do not divide a row: refused before writing "
               "(compressed-tensors needs groups that divide the row); pick a group that "
               "divides it or keep the layer float";
    case ExportFormat::Gguf:
        return "blocks that do not divide a row: that tensor falls back to a type whose block "
               "divides it, as llama-quantize does (Q4_K -> Q5_0, Q6_K -> Q8_0, else F16); "
               "MXFP4 is refused before writing";
    }
    return {};
}

std::vector<InteropOption> interopOptions(ExportFormat format, const quant::Scheme* scheme)
{
    const quant::LayerConfig defaults;
    const quant::LayerConfig& c = scheme ? scheme->config : defaults;
    std::vector<InteropOption> options;
    options.push_back(
        {"wrange", std::to_string(c.weightRange), std::to_string(defaults.weightRange),
         "int8 weight codes: 128 = [-128, 127] (PyTorch's observers), 127 = [-127, 127] with "
         "scale max|w| / 127 (TensorRT, onnxruntime's symmetric quantizer); scheme option "
         "wrange=127|128"});
    options.push_back(
        {"reduce-range", c.reduceRange ? "true" : "false", defaults.reduceRange ? "true" : "false",
         "7-bit int8 weights [-64, 64] for CPUs without VNNI (onnxruntime's reduce_range: its "
         "u8 x s8 kernels cannot saturate; BitLens runs the exact vpmaddubsw tile); scheme "
         "option reduce-range=true"});
    const std::string rule = partialGroupRule(format);
    options.push_back({"partial groups", rule, rule,
                       "what " + formatName(format) +
                           " does with a weight row its group size does not divide, checked "
                           "before anything is written"});
    return options;
}

std::vector<std::string> interopOptionLines(ExportFormat format, const quant::Scheme* scheme)
{
    std::vector<std::string> lines;
    for (const InteropOption& o : interopOptions(format, scheme)) {
        if (o.key == "partial groups")
            lines.push_back(o.key + ": " + o.value);
        else
            lines.push_back(o.key + " = " + o.value + " (default " + o.defaultValue + "): " +
                            o.meaning);
    }
    return lines;
}

namespace {

/// The largest group size from 2 up to `group` that divides `inputs`, 0 when none does.
std::int64_t dividingGroup(std::int64_t inputs, std::int64_t group)
{
    for (std::int64_t g = std::min(group, inputs); g >= 2; --g)
        if (inputs % g == 0)
            return g;
    return 0;
}

} // namespace

Result<void> checkPartialGroups(const ir::Graph& graph,
                                const std::map<std::string, quant::LayerConfig>& layers,
                                ExportFormat format, const std::string& path)
{
    if (format == ExportFormat::Onnx)
        return {};
    for (const auto& node : graph.nodes) {
        const auto it = layers.find(node.name);
        if (it == layers.end() || it->second.keepFloat || it->second.ggmlType)
            continue;  // float, or a gguf-* type with llama.cpp's fallback (ggmlTypeForRow)
        if (node.op == ir::OpKind::LSTM || node.op == ir::OpKind::GRU || node.inputs.size() < 2)
            continue;  // refused by checkExportableModel
        const quant::LayerConfig& c = it->second;
        const quant::QuantTypeTraits& t = quant::traits(c.weightType);
        std::int64_t group = 0;
        if (quant::isBlockFormat(t))
            group = t.blockSize;
        else if (c.weightGranularity.kind == quant::Granularity::Kind::PerGroup)
            group = c.weightGranularity.groupSize;
        const at::Tensor* w = graph.initializer(node.inputs[1]);
        if (group <= 0 || w == nullptr)
            continue;
        const std::int64_t inputs = quant::weightView(node, *w).size(1);
        if (inputs % group == 0)
            continue;
        const std::string what =
            "weight '" + node.inputs[1] + "' (layer '" + node.name + "') has rows of " +
            std::to_string(inputs) + " inputs, which " +
            (quant::isBlockFormat(t) ? std::string(t.name) + " blocks of "
                                     : std::string("groups of ")) +
            std::to_string(group) + " do not divide (the last would hold " +
            std::to_string(inputs % group) + ")";
        if (format == ExportFormat::Safetensors) {
            const std::int64_t fits = dividingGroup(inputs, group);
            return Error::unsupported(
                path, "cannot export to safetensors: " + what +
                          "; compressed-tensors refuses a shorter last group (\"tensor column "
                          "shape must be divisble by the given group_size\"). Nothing was "
                          "written. " +
                          (quant::isBlockFormat(t) || fits == 0
                               ? std::string("Keep the layer float with an override")
                               : "Use group=" + std::to_string(fits) +
                                     " (it divides the row), keep the layer float with an "
                                     "override") +
                          ", or export to ONNX, whose blocked DequantizeLinear holds it");
        }
        if (format == ExportFormat::Gguf && quant::isBlockFormat(t))
            return Error::unsupported(path, "cannot export to gguf: " + what +
                                                "; a GGUF tensor holds whole blocks only. "
                                                "Nothing was written. Keep the layer float "
                                                "with an override");
    }
    return {};
}

Result<void> checkExportableModel(const ir::Graph& graph, const quant::Scheme& scheme,
                                  ExportFormat format, const std::string& modelPath)
{
    if (format == ExportFormat::Gguf) {
        auto type = graph.metadata.find("model_type");
        if (type == graph.metadata.end() || type->second != "llama")
            return Error::unsupported(modelPath, "GGUF export writes llama-family models only; "
                                                 "this model is " +
                                                     (type == graph.metadata.end()
                                                          ? std::string("not a built language "
                                                                        "model")
                                                          : "'" + type->second + "'"));
        auto plan = quant::makePlan(graph, scheme);
        if (!plan)
            return plan.error();
        return checkPartialGroups(graph, plan->layers, format, modelPath);
    }
    if (format == ExportFormat::Safetensors) {
        // The graph reads Phi-3's fused qkv_proj / gate_up_proj as row slices under llama's
        // names; a checkpoint of those names is not one transformers' Phi3 loads.
        // Gemma 2's norms are held as 1 + weight under their own names.
        auto type = graph.metadata.find("model_type");
        if (type != graph.metadata.end() && type->second == "phi3")
            return Error::unsupported(modelPath, "safetensors export of phi3 is not supported: "
                                                 "its fused qkv_proj / gate_up_proj would have "
                                                 "to be written fused again (export to ONNX)");
        if (type != graph.metadata.end() &&
            (type->second == "gemma2" || type->second == "gemma3_text"))
            return Error::unsupported(modelPath, "safetensors export of " + type->second +
                                                     " is not supported: the graph holds its "
                                                     "norms as 1 + weight (export to ONNX)");
    }
    auto plan = quant::makePlan(graph, scheme);
    if (!plan)
        return plan.error();
    for (const auto& node : graph.nodes) {
        if (node.op != ir::OpKind::LSTM && node.op != ir::OpKind::GRU)
            continue;
        const auto it = plan->layers.find(node.name);
        if (it == plan->layers.end() || it->second.keepFloat)
            continue;
        return Error::unsupported(
            modelPath, "scheme " + (scheme.spec.empty() ? scheme.preset : scheme.spec) + " cannot be exported to " + formatName(format) +
                           ": layer '" + node.name + "' is an " +
                           std::string(ir::opKindName(node.op)) +
                           ", whose hidden state is quantized inside the recurrence, which " +
                           (format == ExportFormat::Onnx ? "QDQ nodes cannot express"
                                                         : "compressed-tensors has no layout for") +
                           " (keep it float with an override)");
    }
    return checkPartialGroups(graph, plan->layers, format, modelPath);
}

Result<ExportResult> exportModel(const quant::QuantizedModel& model, ExportFormat format,
                                 const std::string& path, Progress& progress,
                                 const CancelToken& cancel, const ExportSource& source)
{
    if (format != ExportFormat::Gguf && quant::usesGgml(model.scheme)) {
        Error e = checkExportable(model.scheme, format).error();
        e.path = path;
        return e;
    }
    {
        // Before anything is written: a group the format cannot hold is refused here.
        std::map<std::string, quant::LayerConfig> configs;
        for (const auto& [name, lq] : model.layers)
            configs[name] = lq.config;
        if (auto r = checkPartialGroups(model.graph, configs, format, path); !r)
            return r.error();
    }
    if (format == ExportFormat::Gguf) {
        auto written = writeGguf(model, path, source, progress, cancel);
        if (!written)
            return written.error();
        ExportResult result;
        result.format = format;
        result.path = path;
        std::error_code ec;
        result.bytes = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
        result.quantizedLayers = written->quantizedLayers;
        result.floatLayers = written->floatLayers;
        result.notes = written->notes;
        return result;
    }
    if (format == ExportFormat::Safetensors) {
        if (auto r = checkExportable(model.scheme, format); !r) {
            Error e = r.error();
            e.path = path;
            return e;
        }
        if (cancel.cancelled())
            return Error::cancelled();
        // A folder (an existing one, a name ending in '/', or a name without an extension)
        // becomes a Hugging Face model folder with its weights in model.safetensors, written
        // whole into a staging folder and swapped in at the end (folder_export.h).
        std::error_code ec;
        const std::filesystem::path target = folderOfPath(path);
        std::string file = path;
        std::unique_ptr<FolderExport> folder;
        if (std::filesystem::is_directory(target, ec) || (!path.empty() && path.back() == '/') ||
            !target.has_extension()) {
            auto begun = FolderExport::begin(path, progress, cancel);
            if (!begun)
                return begun.error();
            folder = std::move(begun).value();
            file = (folder->staging() / "model.safetensors").string();
        }
        progress.report(0.1, "writing " + (folder ? path : file));
        auto written = writeCompressedTensors(model, file, source.modelPath);
        // Paths in what follows name the user's folder, not the staging one.
        const auto shown = [&](std::string text) {
            if (!folder)
                return text;
            const std::string from = folder->staging().string();
            const std::string to = target.string();
            for (std::size_t at = text.find(from); at != std::string::npos;
                 at = text.find(from, at + to.size()))
                text.replace(at, from.size(), to);
            return text;
        };
        if (!written) {
            Error e = written.error();
            e.path = shown(e.path);
            e.message = shown(e.message);
            return e;
        }
        const std::int64_t bytes =
            static_cast<std::int64_t>(std::filesystem::file_size(file, ec));
        if (folder) {
            if (cancel.cancelled())
                return Error::cancelled();
            if (auto r = folder->commit(); !r)
                return r.error();
            file = (target / "model.safetensors").string();
            for (std::string& f : written->folderFiles)
                f = shown(f);
            for (std::string& note : written->notes)
                note = shown(note);
        }
        ExportResult result;
        result.format = format;
        result.path = file;
        result.folderFiles = written->folderFiles;
        result.bytes = bytes;
        for (const auto& [name, lq] : model.layers)
            (lq.config.keepFloat ? result.floatLayers : result.quantizedLayers) += 1;
        result.notes = written->notes;
        progress.report(1.0, "exported");
        return result;
    }
    if (format != ExportFormat::Onnx)
        return notYet(format, path);
    auto graph = buildQdqGraph(model, progress, cancel);
    if (!graph) {
        Error e = graph.error();
        if (e.path.empty() && e.code != ErrorCode::Cancelled)
            e.path = path;
        return e;
    }
    // The last chance to stop: after this the temporary file is renamed into place whole.
    if (cancel.cancelled())
        return Error::cancelled();
    progress.report(0.9, "writing " + path);
    if (auto r = io::writeOnnxFile(*graph, path); !r)
        return r.error();
    ExportResult result;
    result.format = format;
    result.path = path;
    std::error_code ec;
    result.bytes = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
    result.opset = io::writtenOpset(*graph);
    for (const auto& [name, lq] : model.layers)
        (lq.config.keepFloat ? result.floatLayers : result.quantizedLayers) += 1;
    progress.report(1.0, "exported");
    return result;
}

namespace {

/// Runs the file's QuantizeLinear / DynamicQuantizeLinear with the in-app rounding rule
/// (x * (1 / scale), as torch.fake_quantize): with it the file must reproduce the in-app model
/// exactly, which checks every scale, zero point, layout and op the file holds.
class InAppRoundingHook : public exec::NodeHook {
public:
    bool computeNode(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                     std::vector<at::Tensor>& outputs) override
    {
        if (node.op == ir::OpKind::QuantizeLinear) {
            outputs = {exec::runQuantizeLinear(node, inputs, exec::QuantizeRounding::Reciprocal)};
            return true;
        }
        if (node.op == ir::OpKind::DynamicQuantizeLinear) {
            outputs =
                exec::runDynamicQuantizeLinear(node, inputs, exec::QuantizeRounding::Reciprocal);
            return true;
        }
        return false;
    }
};

} // namespace

namespace {

/// |a - b| <= 2^-22 |b| everywhere: a and b agree to two float32 roundings.
bool equalToTwoRoundings(const at::Tensor& a, const at::Tensor& b)
{
    return at::le((a - b).abs(), b.abs() * 0x1p-22).all().item<bool>();
}

/// Safetensors (compressed-tensors) verification: the file holds weights and activation scales,
/// not a graph. Every tensor is read back with BitLens' readers: dequantized weights must equal
/// the in-app ones bit for bit, the other tensors the model's own, the stored input scales the
/// calibrated ones; then the in-app model is run again with everything taken from the file
/// (weights and activation scales) and must give exactly the in-app outputs.
Result<VerifyResult> verifySafetensors(const std::string& path, const quant::QuantizedModel& model,
                                       const io::Dataset& data, const VerifyOptions& options,
                                       Progress& progress, const CancelToken& cancel)
{
    if (!data.inputs.defined() || data.size() == 0)
        return Error::usage("verification needs samples (--eval DATA)");
    auto tensors = readCompressedTensors(path);
    if (!tensors)
        return tensors.error();
    auto raw = io::readSafetensors(path);
    if (!raw)
        return raw.error();
    try {
        c10::InferenceMode guard;
        VerifyResult result;
        quant::QuantizedModel fromFile = model;
        std::int64_t otherMismatches = 0;
        std::int64_t scaleMismatches = 0;
        bool reciprocalScales = false;
        for (const auto& node : model.graph.nodes) {
            auto it = fromFile.layers.find(node.name);
            if (it == fromFile.layers.end() || it->second.config.keepFloat ||
                node.inputs.size() < 2)
                continue;
            quant::LayerQuant& lq = it->second;
            ++result.weightsChecked;
            auto w = tensors->find(node.inputs[1]);
            // NVFP4: the file holds weight_global_scale, the reciprocal of the per-tensor scale
            // (compressed-tensors divides by it), so element * (block / global) may differ from
            // BitLens's (and torchao's) element * (tensor * block) in the last place.
            const bool reciprocal = lq.weight.type == quant::QuantType::NVFP4;
            reciprocalScales = reciprocalScales || reciprocal;
            const bool same =
                w != tensors->end() && w->second.sizes() == lq.weightFq.sizes() &&
                (reciprocal ? equalToTwoRoundings(w->second.to(at::kFloat), lq.weightFq.to(at::kCPU))
                            : at::equal(w->second.to(at::kFloat), lq.weightFq.to(at::kCPU)));
            if (!same) {
                ++result.weightsMismatched;
                continue;
            }
            lq.weightFq = w->second.to(at::kFloat);
            if (lq.act && lq.config.actMode == quant::ActMode::Static) {
                std::string module = node.inputs[1];
                if (module.size() > 7 && module.ends_with(".weight"))
                    module.resize(module.size() - 7);
                else
                    module = node.name;
                auto scale = raw->tensors.find(module + ".input_scale");
                if (scale == raw->tensors.end() ||
                    !at::equal(scale->second.to(at::kFloat).reshape({-1}),
                               lq.act->scale.to(at::kCPU, at::kFloat).reshape({-1}))) {
                    ++scaleMismatches;
                    continue;
                }
                lq.act->scale = scale->second.to(at::kFloat).reshape(lq.act->scale.sizes());
            }
        }
        // Graph tensors an export from a Hugging Face folder leaves out on purpose (executor
        // constants, tensors the source checkpoint lacks) are the model's own.
        std::set<std::string> omitted;
        if (auto m = raw->metadata.find(kOmittedTensorsKey); m != raw->metadata.end()) {
            const auto names = nlohmann::json::parse(m->second, nullptr, false);
            if (names.is_array())
                for (const auto& n : names)
                    if (n.is_string())
                        omitted.insert(n.get<std::string>());
        }
        for (auto& [name, t] : fromFile.graph.initializers) {
            if (omitted.count(name) && !tensors->count(name))
                continue;
            auto it = tensors->find(name);
            bool quantizedWeight = false;
            for (const auto& node : model.graph.nodes)
                if (node.inputs.size() > 1 && node.inputs[1] == name &&
                    model.layers.count(node.name) && !model.layers.at(node.name).config.keepFloat)
                    quantizedWeight = true;
            if (quantizedWeight)
                continue;
            if (it == tensors->end() || it->second.sizes() != t.sizes() ||
                !at::equal(it->second.to(t.scalar_type()), t.to(at::kCPU))) {
                ++otherMismatches;
                continue;
            }
            t = it->second.to(t.scalar_type());
        }

        exec::Executor appExec(model.graph, exec::ExecOptions{options.device});
        appExec.addHook(quant::makeQuantHook(model));
        exec::Executor fileExec(fromFile.graph, exec::ExecOptions{options.device});
        fileExec.addHook(quant::makeQuantHook(fromFile));
        if (auto r = detail::compareRuns(appExec, fileExec, data,
                                         detail::verifyBatch(model.graph, data, options), path,
                                         result, progress, cancel);
            !r)
            return r.error();
        const std::int64_t n = result.samples;
        // The consumer: transformers with compressed-tensors loads the folder the file lies in
        // and runs the first batch (exporting::checkWithConsumer); a folder it refuses is an
        // Error naming why, figures beyond the format's rounding fail the verification.
        auto consumer = checkWithConsumer(ExportFormat::Safetensors, path, model.graph, appExec,
                                          data, detail::verifyBatch(model.graph, data, options),
                                          cancel);
        if (!consumer)
            return consumer.error();
        result.consumer = std::move(*consumer);
        result.sameRoundingTolerance = options.device.is_cpu() && !reciprocalScales
                                           ? 0.0
                                           : 1e-5 * std::max(result.outputAbsMax, 1e-6);
        result.ok = result.weightsMismatched == 0 && otherMismatches == 0 &&
                    scaleMismatches == 0 && result.maxAbsDiff <= result.sameRoundingTolerance &&
                    (!result.consumer || result.consumer->ok);
        result.message =
            "safetensors file vs in-app model on " + std::to_string(n) + " samples: " +
            std::to_string(result.weightsChecked - result.weightsMismatched) + "/" +
            std::to_string(result.weightsChecked) + " quantized weights identical" +
            (reciprocalScales ? std::string(" (nvfp4: to two float32 roundings, as the file "
                                            "stores 1 / tensor scale)")
                              : std::string()) +
            ", " +
            std::to_string(otherMismatches) + " other tensors differ, " +
            std::to_string(scaleMismatches) + " activation scales differ; max |diff| " +
            fmt(result.maxAbsDiff) + " running the model from the file (" +
            (result.sameRoundingTolerance == 0.0 ? std::string("must be 0")
                                                 : "tolerance " + fmt(result.sameRoundingTolerance)) +
            ")" + detail::figuresText(result) + consumerText(result.consumer);
        return result;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("verification failed: ") + e.what_without_backtrace(),
                              path);
    } catch (const std::exception& e) {
        return Error::runtime(std::string("verification failed: ") + e.what(), path);
    }
}

} // namespace

Result<VerifyResult> verifyExport(const std::string& path, ExportFormat format,
                                  const quant::QuantizedModel& model, const io::Dataset& data,
                                  const VerifyOptions& options, Progress& progress,
                                  const CancelToken& cancel)
{
    if (format == ExportFormat::Safetensors)
        return verifySafetensors(path, model, data, options, progress, cancel);
    if (format == ExportFormat::Gguf)
        return verifyGguf(path, model, data, options, progress, cancel);
    if (format != ExportFormat::Onnx)
        return notYet(format, path);
    auto file = io::readOnnxFile(path);
    if (!file)
        return file.error();
    if (!data.inputs.defined() || data.size() == 0)
        return Error::usage("verification needs samples (--eval DATA)");
    auto inFile = [&path](const Error& e) { return Error{e.code, e.message, path, std::nullopt}; };
    try {
        c10::InferenceMode guard;
        VerifyResult result;
        exec::Executor appExec(model.graph, exec::ExecOptions{options.device});
        appExec.addHook(quant::makeQuantHook(model));
        exec::Executor fileExec(*file, exec::ExecOptions{options.device});
        exec::Executor sameExec(*file, exec::ExecOptions{options.device});
        sameExec.addHook(std::make_shared<InAppRoundingHook>());

        // 1. Weights: each quantized layer of the file must read exactly (bit for bit) the
        //    dequantized weight the in-app model uses.
        auto firstFeeds = detail::feedsFor(*file, data.inputs.slice(0, 0, 1), path);
        if (!firstFeeds)
            return firstFeeds.error();
        auto values = fileExec.runAll(*firstFeeds);
        if (!values)
            return inFile(values.error());
        for (const auto& [name, lq] : model.layers) {
            if (lq.config.keepFloat)
                continue;
            ++result.weightsChecked;
            const ir::Node* node = nullptr;
            for (const auto& n : file->nodes)
                if (n.name == name)
                    node = &n;
            bool same = false;
            if (node && node->inputs.size() > 1) {
                at::Tensor w;
                if (const at::Tensor* init = file->initializer(node->inputs[1]))
                    w = *init;
                else if (auto it = values->find(node->inputs[1]); it != values->end())
                    w = it->second;
                same = w.defined() && w.scalar_type() == at::kFloat &&
                       w.sizes() == lq.weightFq.sizes() &&
                       at::equal(w.to(at::kCPU), lq.weightFq.to(at::kCPU));
            }
            if (!same)
                ++result.weightsMismatched;
        }

        // 2. Outputs and the task's figures on every sample, in the batches the in-app metric
        //    uses, fed what each graph declares: the file as ONNX defines it, and the file with
        //    the in-app rounding rule.
        if (auto r = detail::compareRuns(appExec, fileExec, data,
                                         detail::verifyBatch(model.graph, data, options), path,
                                         result, progress, cancel, &sameExec);
            !r)
            return r.error();
        const std::int64_t n = result.samples;

        // 3. The consumer: onnxruntime runs the file on the first batch where it is installed
        //    (exporting::checkWithConsumer); a file it refuses is an Error, figures beyond the
        //    format's rounding fail the verification.
        auto consumer = checkWithConsumer(format, path, *file, appExec, data,
                                          detail::verifyBatch(model.graph, data, options),
                                          cancel);
        if (!consumer)
            return consumer.error();
        result.consumer = std::move(*consumer);

        // 4. Verdict (see VerifyResult): exact weights; with the in-app rounding rule exact
        //    outputs (on a GPU, where kernels may pick different algorithms per run, to 1e-5 of
        //    the outputs' range); as ONNX defines it, the same top-1 to 0.2 points (a language
        //    model: the same perplexity to 0.2 %).
        result.sameRoundingTolerance =
            options.device.is_cpu() ? 0.0 : 1e-5 * std::max(result.outputAbsMax, 1e-6);
        result.ok = result.weightsMismatched == 0 &&
                    result.maxAbsDiffSameRounding <= result.sameRoundingTolerance &&
                    detail::metricAgrees(result) && (!result.consumer || result.consumer->ok);
        result.message = formatName(format) + " file vs in-app model on " + std::to_string(n) +
                         " samples: " +
                         std::to_string(result.weightsChecked - result.weightsMismatched) + "/" +
                         std::to_string(result.weightsChecked) +
                         " quantized weights identical; max |diff| " +
                         fmt(result.maxAbsDiffSameRounding) + " with the in-app rounding (" +
                         (result.sameRoundingTolerance == 0.0
                              ? std::string("must be 0")
                              : "tolerance " + fmt(result.sameRoundingTolerance)) +
                         "), " + fmt(result.maxAbsDiff) + " as ONNX rounds (outputs up to " +
                         fmt(result.outputAbsMax) + "); " +
                         std::to_string(result.argmaxDisagreements) + " top-1 disagreements" +
                         detail::figuresText(result) + consumerText(result.consumer);
        return result;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("verification failed: ") + e.what_without_backtrace(),
                              path);
    } catch (const std::exception& e) {
        return Error::runtime(std::string("verification failed: ") + e.what(), path);
    }
}

Error mismatchError(const std::string& path, const VerifyResult& result)
{
    return Error::runtime("verification failed: " + result.message, path);
}

nlohmann::json exportToJson(const ExportResult& result, const std::optional<VerifyResult>& verify)
{
    nlohmann::json j = {{"format", formatName(result.format)},
                        {"path", result.path},
                        {"bytes", result.bytes},
                        {"opset", result.opset},
                        {"quantized_layers", result.quantizedLayers},
                        {"float_layers", result.floatLayers},
                        {"notes", result.notes},
                        {"verify", nullptr}};
    if (!result.folderFiles.empty())
        j["folder_files"] = result.folderFiles;
    if (verify) {
        auto metric = [](const std::optional<analysis::MetricValue>& m) {
            return m ? number(m->value) : nlohmann::json(nullptr);
        };
        auto optional = [](const std::optional<double>& v) {
            return v ? number(*v) : nlohmann::json(nullptr);
        };
        j["verify"] = {{"samples", verify->samples},
                       {"max_abs_diff", number(verify->maxAbsDiff)},
                       {"max_abs_diff_same_rounding", number(verify->maxAbsDiffSameRounding)},
                       {"same_rounding_tolerance", number(verify->sameRoundingTolerance)},
                       {"output_abs_max", number(verify->outputAbsMax)},
                       {"metric_tolerance", verify->metricTolerance},
                       {"weights_checked", verify->weightsChecked},
                       {"weights_mismatched", verify->weightsMismatched},
                       {"argmax_disagreements", verify->argmaxDisagreements},
                       {"metric_app", metric(verify->metricApp)},
                       {"metric_file", metric(verify->metricFile)},
                       {"metric_name", verify->metricApp ? nlohmann::json(verify->metricApp->name)
                                                         : nlohmann::json(nullptr)},
                       {"task", verify->task},
                       {"top1_positions", verify->top1Positions},
                       {"same_top1_rate", number(verify->sameTop1Rate)},
                       {"tokens", verify->tokens},
                       {"perplexity_app", verify->tokens > 0 ? metric(verify->metricApp)
                                                             : nlohmann::json(nullptr)},
                       {"perplexity_file", verify->tokens > 0 ? metric(verify->metricFile)
                                                              : nlohmann::json(nullptr)},
                       {"mean_kld", optional(verify->meanKld)},
                       {"max_kld", optional(verify->maxKld)},
                       {"embedding_cosine_mean", optional(verify->embeddingCosineMean)},
                       {"embedding_cosine_min", optional(verify->embeddingCosineMin)},
                       {"ok", verify->ok},
                       {"message", verify->message},
                       {"consumer", nullptr}};
        if (const auto& c = verify->consumer) {
            j["verify"]["consumer"] = {
                {"runtime", c->runtime.empty() ? nlohmann::json(nullptr)
                                               : nlohmann::json(c->runtime)},
                {"skipped", c->runtime.empty() ? nlohmann::json(c->skipped)
                                               : nlohmann::json(nullptr)},
                {"samples", c->samples},
                {"max_abs_diff", number(c->maxAbsDiff)},
                {"top1_positions", c->top1Positions},
                {"same_top1_rate", number(c->sameTop1Rate)},
                {"metric_app", metric(c->metricApp)},
                {"metric_file", metric(c->metricFile)},
                {"mean_kld", optional(c->meanKld)},
                {"embedding_cosine_mean", optional(c->embeddingCosineMean)},
                {"embedding_cosine_min", optional(c->embeddingCosineMin)},
                {"ok", c->ok}};
        }
    }
    return j;
}

} // namespace bitlens::exporting
