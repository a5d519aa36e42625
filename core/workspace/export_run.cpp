// Export and verification of a workspace's runs, and reading a run back from its report.json.

#include "workspace/workspace.h"

#include "workspace/workspace_state.h"

#include "export/export.h"
#include "export/folder_export.h"
#include "export/report_json.h"
#include "io/file_util.h"
#include "quant/scheme.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace bitlens::workspace {

using detail::guarded;
using detail::subProgress;

namespace {

/// `text` with every occurrence of `from` replaced by `to` (staging path -> the user's path).
std::string replaced(std::string text, const std::string& from, const std::string& to)
{
    if (from.empty() || from == to)
        return text;
    for (std::size_t pos = text.find(from); pos != std::string::npos;
         pos = text.find(from, pos + to.size()))
        text.replace(pos, from.size(), to);
    return text;
}

/// The format of a request: its name, else the extension of its path.
Result<exporting::ExportFormat> formatOf(const std::string& format, const std::string& path)
{
    if (!format.empty())
        return exporting::parseFormat(format);
    return exporting::formatFromPath(path);
}

/// The scheme, data and quantized model an export or verification of `request.run` uses.
struct ExportInputs {
    quant::Scheme scheme;
    exporting::ExportFormat format = exporting::ExportFormat::Onnx;
    const io::Dataset* samples = nullptr;  ///< what a verification runs on
    detail::PreparedRun prepared;
};

/// Whether `scheme` is written to `format` straight from the open model's weights, one tensor
/// at a time, with nothing prepared: GGUF, and every layer either float or rounded to nearest
/// to a ggml type with float activations (the gguf-* presets). The writer encodes each weight
/// as it writes it (exporting::writeGguf), so an 8B model exports in about one tensor's memory
/// (llama-quantize's way), where prepare would hold float32 and quantize-dequantized copies of
/// every weight.
bool streamsFromWeights(const ir::Graph& graph, const quant::Scheme& scheme,
                        const quant::Plan& plan, exporting::ExportFormat format)
{
    if (format != exporting::ExportFormat::Gguf || scheme.qat)
        return false;
    for (const auto& [name, c] : plan.layers)
        if (!c.keepFloat && (!c.ggmlType || c.method != quant::LayerConfig::Method::Rtn ||
                             c.actMode != quant::ActMode::Float || c.smoothAlpha > 0.0))
            return false;
    for (const auto& node : graph.nodes)
        if (scheme.foldBatchNorm && node.op == ir::OpKind::BatchNorm)
            return false;
    return true;
}

/// The model streamsFromWeights exports: the open graph (its tensors shared, 16-bit weights
/// still mapped) with the scheme's plan and no prepared layer.
std::shared_ptr<const quant::QuantizedModel> planOnly(const ir::Graph& graph,
                                                      const quant::Scheme& scheme,
                                                      quant::Plan plan)
{
    auto model = std::make_shared<quant::QuantizedModel>();
    model->graph = graph;
    model->scheme = scheme;
    model->plan = std::move(plan);
    // Float bytes as prepare counts them: every weight in float32, a storage shared by views
    // once.
    std::set<std::pair<const void*, std::int64_t>> seen;
    for (const auto& [name, t] : graph.initializers)
        if (!t.has_storage() || seen.emplace(t.data_ptr(), t.numel()).second)
            model->bytesFloat += graph.widenOnRead.count(name) ? t.numel() * 4
                                                               : graph.initializerBytes(name, t);
    return model;
}

/// `needModel`: the caller runs the prepared model (verification), so it is prepared even
/// where the file could be written from the weights alone.
Result<ExportInputs> exportInputs(Workspace& ws, const ExportRequest& request, Progress& progress,
                                  const CancelToken& cancel, bool needModel)
{
    ExportInputs in;
    auto scheme = detail::schemeOf(request.run.scheme, request.run.overrides);
    if (!scheme)
        return scheme.error();
    in.scheme = std::move(scheme).value();
    auto format = formatOf(request.format, request.path);
    if (!format)
        return format.error();
    in.format = *format;
    if (auto fits = exporting::checkExportable(in.scheme, in.format); !fits)
        return fits.error();
    if (auto fits = exporting::checkExportableModel(ws.model()->graph(), in.scheme, in.format,
                                                    ws.model()->path());
        !fits)
        return fits.error();
    auto data = detail::resolveData(ws, request.run, quant::dataSamplesNeeded(in.scheme),
                                    progress, cancel);
    if (!data)
        return data.error();
    // Verification runs on the evaluation data (labelled or not), else the calibration data.
    in.samples = data->loadedEval ? data->loadedEval : data->calib;
    if (!needModel) {
        const ir::Graph& graph = ws.model()->graph();
        if (auto plan = quant::makePlan(graph, in.scheme);
            plan && streamsFromWeights(graph, in.scheme, *plan, in.format)) {
            in.prepared.model = planOnly(graph, in.scheme, std::move(plan).value());
            return in;
        }
    }
    Progress preparing = subProgress(progress, 0.0, 1.0,
                                     in.scheme.qat ? "training again: " : "calibrating again: ");
    auto prepared = detail::prepareRun(ws, *data, in.scheme, true, preparing, cancel);
    if (!prepared)
        return prepared.error();
    in.prepared = *prepared;
    return in;
}

/// Verifies `path` (shown to the user as `shownPath`) into `out`; a verification that could
/// not run is out.verifyError.
Result<void> verifyInto(Exported& out, const std::string& path, const std::string& shownPath,
                        const ExportInputs& in, const Workspace& ws, Progress& progress,
                        const CancelToken& cancel)
{
    if (!in.samples) {
        out.verifyError = Error::usage("no samples to run the file on: open data first");
        return {};
    }
    exporting::VerifyOptions options;
    options.device = detail::deviceOf(ws);
    auto verified = exporting::verifyExport(path, in.format, *in.prepared.model, *in.samples,
                                            options, progress, cancel);
    if (!verified) {
        if (verified.error().code == ErrorCode::Cancelled)
            return verified.error();
        Error e = verified.error();
        e.path = replaced(e.path, path, shownPath);
        e.message = replaced(e.message, path, shownPath);
        out.verifyError = e;
        return {};
    }
    exporting::VerifyResult v = std::move(verified).value();
    v.message = replaced(v.message, path, shownPath);
    out.verified = std::make_shared<const exporting::VerifyResult>(std::move(v));
    return {};
}

/// A safetensors export also writes config.json beside the file: what was there before, so an
/// export that does not deliver can put it back.
struct SideFile {
    std::string path;
    bool existed = false;
    std::string bytes;

    static SideFile snapshot(const std::string& path)
    {
        SideFile side;
        side.path = path;
        std::ifstream in(path, std::ios::binary);
        if (in) {
            side.existed = true;
            std::ostringstream text;
            text << in.rdbuf();
            side.bytes = text.str();
        }
        return side;
    }

    void restore() const
    {
        if (existed) {
            (void)io::writeFileAtomic(path, bytes.data(), bytes.size());
        } else {
            std::error_code ec;
            std::filesystem::remove(path, ec);
        }
    }
};

} // namespace

nlohmann::json Exported::toJson() const
{
    nlohmann::json out = file;
    if (verifyError)
        out["verify_error"] = verifyError->describe();
    out["reused_run_model"] = reusedRunModel;
    out["scheme"] = scheme;
    return out;
}

Result<Exported> exportRun(Workspace& ws, const ExportRequest& request, Progress& progress,
                           const CancelToken& cancel)
{
    const std::string staging = request.stagingPath.empty() ? request.path : request.stagingPath;
    std::optional<SideFile> config;
    if (auto format = formatOf(request.format, request.path);
        format && *format == exporting::ExportFormat::Safetensors && !request.stagingPath.empty()) {
        const std::filesystem::path target(request.path);
        config = SideFile::snapshot(
            ((target.has_parent_path() ? target.parent_path() : std::filesystem::path("."))
             / "config.json").string());
    }
    auto result = guarded(ws, [&]() -> Result<Exported> {
        Progress preparing = subProgress(progress, 0.0, 0.4);
        auto in = exportInputs(ws, request, preparing, cancel, request.verify);
        if (!in)
            return in.error();
        if (cancel.cancelled())
            return Error::cancelled();
        exporting::ExportSource source;
        source.modelPath = ws.model()->path();
        source.tokenizerPath = ws.model()->summary().tokenizerPath;
        Progress writing = subProgress(progress, 0.4, request.verify ? 0.5 : 1.0, "exporting: ");
        auto written = exporting::exportModel(*in->prepared.model, in->format, staging, writing,
                                              cancel, source);
        if (!written) {
            Error e = written.error();
            e.path = replaced(e.path, staging, request.path);
            e.message = replaced(e.message, staging, request.path);
            return e;
        }
        Exported out;
        if (request.verify) {
            Progress verifying = subProgress(progress, 0.5, 1.0, "verifying: ");
            // The file as written: for a folder export, the model.safetensors inside it.
            const std::string file = written->path.empty() ? staging : written->path;
            if (auto r = verifyInto(out, file, replaced(file, staging, request.path), *in, ws,
                                    verifying, cancel);
                !r)
                return r.error();
        }
        if (cancel.cancelled())
            return Error::cancelled();
        // Paths name the user's file, not the staging one (a folder export names the
        // model.safetensors inside it).
        written->path = replaced(written->path, staging, request.path);
        for (std::string& file : written->folderFiles)
            file = replaced(file, staging, request.path);
        for (std::string& note : written->notes)
            note = replaced(note, staging, request.path);
        out.file = exporting::exportToJson(*written, out.verified
                                                         ? std::optional(*out.verified)
                                                         : std::nullopt);
        out.written = std::make_shared<const exporting::ExportResult>(std::move(written).value());
        out.reusedRunModel = in->prepared.reused;
        out.scheme = in->scheme.spec;
        out.bytesFloat = in->prepared.model->bytesFloat;
        return out;
    });
    // Whatever stopped the job, nothing of it stays behind: no staging file, config.json as
    // it was.
    if (!result && !request.stagingPath.empty()) {
        discardExport(request.stagingPath);
        if (config)
            config->restore();
    }
    return result;
}

Result<Exported> verifyFile(Workspace& ws, const ExportRequest& request, Progress& progress,
                            const CancelToken& cancel)
{
    return guarded(ws, [&]() -> Result<Exported> {
        std::error_code ec;
        const auto bytes = std::filesystem::file_size(request.path, ec);
        if (ec)
            return Error::badInput(request.path, "cannot read the file: " + ec.message());
        Progress preparing = subProgress(progress, 0.0, 0.3);
        auto in = exportInputs(ws, request, preparing, cancel, true);
        if (!in)
            return in.error();
        exporting::ExportResult file;
        file.format = in->format;
        file.path = request.path;
        file.bytes = static_cast<std::int64_t>(bytes);
        for (const auto& [name, layer] : in->prepared.model->layers)
            (layer.config.keepFloat ? file.floatLayers : file.quantizedLayers) += 1;
        Exported out;
        Progress verifying = subProgress(progress, 0.3, 1.0, "verifying: ");
        if (auto r = verifyInto(out, request.path, request.path, *in, ws, verifying, cancel); !r)
            return r.error();
        if (cancel.cancelled())
            return Error::cancelled();
        out.file = exporting::exportToJson(file, std::nullopt);
        if (out.verified)
            out.file["verify"] =
                exporting::exportToJson(exporting::ExportResult(), *out.verified)["verify"];
        out.written = std::make_shared<const exporting::ExportResult>(std::move(file));
        out.reusedRunModel = in->prepared.reused;
        out.scheme = in->scheme.spec;
        out.bytesFloat = in->prepared.model->bytesFloat;
        return out;
    });
}

Result<void> checkExport(const RunRequest& run, const std::string& format,
                         const std::string& path, const Workspace* ws)
{
    auto scheme = detail::schemeOf(run.scheme, run.overrides);
    if (!scheme)
        return scheme.error();
    auto parsed = formatOf(format, path);
    if (!parsed)
        return parsed.error();
    if (auto fits = exporting::checkExportable(*scheme, *parsed); !fits)
        return fits;
    if (ws)
        return exporting::checkExportableModel(ws->model()->graph(), *scheme, *parsed,
                                               ws->model()->path());
    return {};
}

std::string exportAdvice(const RunRequest& run, const std::string& format,
                         const std::string& path)
{
    auto scheme = detail::schemeOf(run.scheme, run.overrides);
    auto parsed = formatOf(format, path);
    if (!scheme || !parsed || *parsed != exporting::ExportFormat::Onnx)
        return {};
    const auto saturates = [](const quant::LayerConfig& c) {
        return !c.keepFloat && !c.ggmlType && c.weightType == quant::QuantType::Int8 &&
               !c.reduceRange && c.actType == quant::QuantType::UInt8 &&
               (c.actMode == quant::ActMode::Static || c.actMode == quant::ActMode::Dynamic);
    };
    bool any = saturates(scheme->config);
    for (const auto& [layer, config] : scheme->overrides)
        any = any || (config && saturates(*config));
    if (!any)
        return {};
    return "onnxruntime's u8 x s8 kernels on CPUs without VNNI (AVX2 only) add pairs of "
           "products in 16 bits and can saturate with 8-bit weight codes, so its results can "
           "differ there (on fashion-cnn by up to 1.5 of the logits); quantize with "
           "reduce-range=true (7-bit weights, as onnxruntime's reduce_range) to rule it out";
}

std::vector<std::string> exportInteropOptions(const RunRequest& run, const std::string& format)
{
    auto parsed = formatOf(format, {});
    if (!parsed)
        return {};
    auto scheme = detail::schemeOf(run.scheme, run.overrides);
    return exporting::interopOptionLines(*parsed, scheme ? &*scheme : nullptr);
}

Result<std::string> exportFormatOfPath(const std::string& path)
{
    auto format = exporting::formatFromPath(path);
    if (!format)
        return format.error();
    return exporting::formatName(*format);
}

Result<RunRequest> runOfReport(const nlohmann::json& report)
{
    const auto noScheme = [] {
        return Error::usage("this report names no scheme (run one first)");
    };
    if (!report.is_object() || !report.contains("scheme") || !report["scheme"].is_object())
        return noScheme();
    const nlohmann::json& saved = report["scheme"];
    if (!saved.contains("spec") || !saved["spec"].is_string())
        return noScheme();
    const std::string spec = saved["spec"].get<std::string>();
    // schemeOf writes "SPEC with overrides LAYER=VALUE ..." for runs with overrides.
    const std::string marker = " with overrides";
    RunRequest run;
    const std::size_t at = spec.find(marker);
    run.scheme = spec.substr(0, at);
    if (at != std::string::npos) {
        std::istringstream rest(spec.substr(at + marker.size()));
        std::string token;
        while (rest >> token) {
            const std::size_t eq = token.find('=');
            if (eq == std::string::npos || eq == 0)
                return Error::usage("cannot read the layer overrides of run '" + spec + "'");
            run.overrides[token.substr(0, eq)] = token.substr(eq + 1);
        }
    }
    // What was read back must describe the same run as the report does.
    auto scheme = detail::schemeOf(run.scheme, run.overrides);
    if (!scheme)
        return Error::usage("cannot read back the scheme of run '" + spec +
                            "': " + scheme.error().message);
    const nlohmann::json again = quant::schemeToJson(*scheme);
    for (const char* key : {"config", "overrides"})
        if (saved.contains(key) && saved[key] != again[key])
            return Error::usage("the scheme of run '" + spec + "' reads back as another " +
                                std::string(key) + " (run it again to export it)");
    return run;
}

std::string schemeDisplayName(const nlohmann::json& report)
{
    if (!report.is_object() || !report.contains("scheme") || !report["scheme"].is_object())
        return {};
    const nlohmann::json& saved = report["scheme"];
    if (saved.contains("display_name") && saved["display_name"].is_string())
        return saved["display_name"].get<std::string>();
    // A scheme file's spec is its path: not opened for a name.
    const std::string spec = saved.value("spec", nlohmann::json()).is_string()
                                 ? saved["spec"].get<std::string>()
                                 : std::string();
    if (spec.substr(0, spec.find(" with overrides")).ends_with(".json"))
        return {};
    auto run = runOfReport(report);
    if (!run)
        return {};
    auto scheme = detail::schemeOf(run->scheme, run->overrides);
    return scheme ? quant::displayName(*scheme) : std::string();
}

Result<void> commitExport(const std::string& stagingPath, const std::string& path)
{
    if (stagingPath.empty() || stagingPath == path)
        return {};
    std::error_code ec;
    // A folder export (the window's staging folder) replaces the folder whole, under its lock.
    if (std::filesystem::is_directory(stagingPath, ec)) {
        auto moved = exporting::replaceFolder(stagingPath, path);
        if (!moved)
            discardExport(stagingPath);
        return moved;
    }
    std::filesystem::rename(stagingPath, path, ec);
    if (ec) {
        discardExport(stagingPath);
        return Error::runtime("cannot move the exported file into place: " + ec.message(), path);
    }
    return {};
}

void discardExport(const std::string& stagingPath)
{
    std::error_code ec;
    if (!stagingPath.empty())
        std::filesystem::remove_all(stagingPath, ec);
}

} // namespace bitlens::workspace
