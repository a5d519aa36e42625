// bitlens-cli export: quantize a model and write it in a format other tools load, optionally
// reloading the file and comparing it with the in-app quantized model (--verify).

#include "export/export.h"
#include "export/report_json.h"
#include "quant/engine.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "cli.h"

namespace bitlens::cli {

using nlohmann::json;

namespace {

constexpr const char* kExportUsage =
    "export MODEL --scheme SCHEME --format onnx|gguf|safetensors --out FILE [--verify] "
    "[--calib DATA] [--eval DATA] [--limit N] [--report FILE.json] [--json]";

/// --format when given, else the extension of --out.
Result<exporting::ExportFormat> chosenFormat(const Args& args)
{
    if (args.has("--format"))
        return exporting::parseFormat(args.get("--format"));
    return exporting::formatFromPath(args.get("--out"));
}

} // namespace

int exportQuantized(const Args& args, const QuantInputs& in, const quant::QuantizedModel& model,
                    json* report)
{
    const bool quiet = args.has("--quiet") || args.has("--json");
    const std::string out = args.get("--out");
    auto format = chosenFormat(args);
    if (!format)
        return fail(format.error());
    Progress progress = stderrProgress(quiet);
    exporting::ExportSource source;
    if (in.model) {
        source.modelPath = in.model->path();
        source.tokenizerPath = in.model->summary().tokenizerPath;
    }
    auto written = exporting::exportModel(model, *format, out, progress, CancelToken(), source);
    if (!written)
        return fail(written.error());
    if (!quiet) {
        const std::string opset =
            *format == exporting::ExportFormat::Onnx
                ? ", opset " + std::to_string(written->opset)
                : std::string();
        std::printf("exported    %s (%s%s, %s; float weights %s, %d layers quantized, "
                    "%d float)\n",
                    out.c_str(), exporting::formatName(*format).c_str(), opset.c_str(),
                    formatBytes(written->bytes).c_str(), formatBytes(model.bytesFloat).c_str(),
                    written->quantizedLayers, written->floatLayers);
        if (*format == exporting::ExportFormat::Gguf)
            for (const auto& note : written->notes)
                std::printf("note        %s\n", note.c_str());
    }

    std::optional<exporting::VerifyResult> verified;
    if (args.has("--verify")) {
        const io::Dataset* data = in.eval ? &*in.eval : in.calib ? &*in.calib : nullptr;
        if (!data)
            return fail(Error::usage("--verify needs samples: give --eval DATA"));
        exporting::VerifyOptions options;
        options.device = in.device;
        Progress verifyProgress = stderrProgress(quiet);
        auto v = exporting::verifyExport(written->path, *format, model, *data, options, verifyProgress);
        if (!v)
            return fail(v.error());
        verified = *v;
        if (!quiet)
            std::printf("verify      %s: %s\n", v->ok ? "ok" : "MISMATCH", v->message.c_str());
    }
    if (report)
        (*report)["export"] = exporting::exportToJson(*written, verified);
    if (verified && !verified->ok) {
        // The report (written by the caller) keeps the numbers; the exit code says it failed.
        return fail(exporting::mismatchError(written->path, *verified));
    }
    return 0;
}

void removeExported(const json& exported)
{
    std::error_code ec;
    if (exported.contains("path") && exported["path"].is_string())
        std::filesystem::remove(exported["path"].get<std::string>(), ec);
    if (exported.contains("folder_files"))
        for (const auto& f : exported["folder_files"])
            if (f.is_string())
                std::filesystem::remove(f.get<std::string>(), ec);
}

int cmdExport(const Args& args)
{
    auto scheme = requireScheme(args, kExportUsage);
    if (!scheme)
        return fail(scheme.error());
    if (!args.has("--out"))
        return fail(Error::usage("usage: bitlens-cli " + std::string(kExportUsage)));
    auto format = chosenFormat(args);
    if (!format)
        return fail(format.error());
    // Refuse what the format cannot hold before loading data or calibrating.
    if (auto r = exporting::checkExportable(*scheme, *format); !r)
        return fail(r.error());
    const bool quiet = args.has("--quiet") || args.has("--json");
    auto in = loadQuantInputs(args, false, scheme->calibSamples);
    if (!in)
        return fail(in.error());
    if (auto r = exporting::checkExportableModel(in->model->graph(), *scheme, *format,
                                                 in->model->path());
        !r)
        return fail(r.error());

    // With --report the full analysis runs (as `quantize`); without, only the preparation.
    json report;
    quant::QuantizedModel prepared;
    if (args.has("--report")) {
        auto r = runScheme(*in, args.get("--scheme"), std::nullopt, quiet, &prepared);
        if (!r)
            return fail(r.error());
        report = exporting::reportToJson(*r);
    } else {
        Progress progress = stderrProgress(quiet);
        auto p = quant::prepare(in->model->graph(), *scheme,
                                in->calib ? in->calib->inputs : at::Tensor(), progress);
        if (!p) {
            Error e = p.error();
            if (e.path.empty() && e.code == ErrorCode::BadInput && in->calib)
                e.path = in->calib->path;
            return fail(e);
        }
        prepared = std::move(p).value();
    }
    const int code = exportQuantized(args, *in, prepared, &report);
    if (args.has("--report") && report.contains("export"))
        if (auto r = writeJson(args.get("--report"), report); !r) {
            // A command that fails leaves no new output: the exported files go too.
            removeExported(report["export"]);
            return fail(r.error());
        }
    if (args.has("--json") && report.contains("export"))
        std::cout << report["export"].dump(2) << "\n";
    return code;
}

} // namespace bitlens::cli
