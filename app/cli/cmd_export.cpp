// bitlens-cli export: quantize a model and write it in a format other tools load, optionally
// reloading the file and comparing it with the in-app quantized model (--verify).

#include "cli.h"

#include "export/export.h"

#include <cstdio>
#include <filesystem>
#include <iostream>

namespace bitlens::cli {

using nlohmann::json;

namespace {

constexpr const char* kExportUsage =
    "export MODEL --scheme SCHEME --format onnx|gguf|safetensors --out FILE [--verify] "
    "[--calib DATA] [--eval DATA] [--limit N] [--report FILE.json] [--json]";

/// `export --help`: the usage, then the interop options with their defaults and each format's
/// rule for groups that do not divide a row, in the core's words (exporting::interopOptions).
void printExportHelp()
{
    std::printf("usage: bitlens-cli %s\n\n", kExportUsage);
    std::printf("Writes the quantized model: --format onnx (QDQ), safetensors (compressed-tensors, "
                "a file or a\nHugging Face folder), gguf (llama models, the gguf-* presets). "
                "--verify reloads the file and\nruns it next to the in-app model.\n\n");
    std::printf("Interop options (scheme options, e.g. static-int8:wrange=127,reduce-range=true), "
                "with their defaults:\n");
    const auto options = exporting::interopOptions(exporting::ExportFormat::Onnx);
    for (const auto& o : options)
        if (o.key != "partial groups")
            std::printf("  %s=%s (default)\n      %s\n", o.key.c_str(), o.defaultValue.c_str(),
                        o.meaning.c_str());
    std::printf("  partial groups (a row its group size does not divide), per format:\n");
    for (auto format : {exporting::ExportFormat::Onnx, exporting::ExportFormat::Safetensors,
                        exporting::ExportFormat::Gguf})
        std::printf("    %-12s %s\n", exporting::formatName(format).c_str(),
                    exporting::partialGroupRule(format).c_str());
    std::printf("\nexit codes: 0 ok, 2 usage, 3 bad input, 4 unsupported model, op or layout "
                "(refused before\nanything is written), 5 runtime failure (a failed --verify "
                "included)\n");
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

} // namespace

int exportQuantized(const Args& args, workspace::Workspace& ws, const workspace::RunRequest& run,
                    json* report)
{
    const bool quiet = args.has("--quiet") || args.has("--json");
    workspace::ExportRequest request;
    request.run = run;
    request.format = args.get("--format");
    request.path = args.get("--out");
    request.verify = args.has("--verify");
    Progress progress = stderrProgress(quiet);
    auto exported = workspace::exportRun(ws, request, progress, CancelToken());
    if (!exported)
        return fail(exported.error());
    if (!quiet)
        printExported(*exported);
    if (exported->verifyError)
        return fail(*exported->verifyError);
    const exporting::VerifyResult* verified = exported->verified.get();
    if (verified && !quiet)
        std::printf("verify      %s: %s\n", verified->ok ? "ok" : "MISMATCH",
                    verified->message.c_str());
    if (report)
        (*report)["export"] = exported->file;
    // The report (written by the caller) keeps the numbers; the exit code says it failed.
    if (verified && !verified->ok)
        return fail(exporting::mismatchError(exported->written->path, *verified));
    return 0;
}

int cmdExport(const Args& args)
{
    if (args.has("--help")) {
        printExportHelp();
        return 0;
    }
    if (auto r = requireScheme(args, kExportUsage); !r)
        return fail(r.error());
    if (!args.has("--out"))
        return fail(Error::usage("usage: bitlens-cli " + std::string(kExportUsage)));
    workspace::RunRequest scheme;
    scheme.scheme = args.get("--scheme");
    // Refuse what the format cannot hold before loading data or calibrating.
    if (auto r = workspace::checkExport(scheme, args.get("--format"), args.get("--out")); !r)
        return fail(r.error());
    if (auto r = checkOutputs(args, exportOutKind(args)); !r)
        return fail(r.error());
    const bool quiet = args.has("--quiet") || args.has("--json");
    auto ws = openWorkspace(args, quiet);
    if (!ws)
        return fail(ws.error());
    auto run = runRequest(args, **ws, false);
    if (!run)
        return fail(run.error());
    if (auto r = workspace::checkExport(*run, args.get("--format"), args.get("--out"), ws->get());
        !r)
        return fail(r.error());
    if (const std::string advice =
            workspace::exportAdvice(*run, args.get("--format"), args.get("--out"));
        !advice.empty() && !args.has("--quiet"))
        std::cerr << "note: " << advice << "\n";

    // With --report the full analysis runs (as `quantize`) and its model is exported; without,
    // only the preparation.
    json report;
    if (args.has("--report")) {
        Progress progress = stderrProgress(quiet);
        auto analysed = workspace::run(**ws, *run, progress, CancelToken());
        if (!analysed)
            return fail(analysed.error());
        report = std::move(analysed->report);
    }
    const int code = exportQuantized(args, **ws, *run, &report);
    if (args.has("--report") && report.contains("export"))
        if (auto r = workspace::writeJsonFile(args.get("--report"), report); !r) {
            // A command that fails leaves no new output: the exported files go too.
            removeExported(report["export"]);
            return fail(r.error());
        }
    if (args.has("--json") && report.contains("export"))
        std::cout << report["export"].dump(2) << "\n";
    return code;
}

} // namespace bitlens::cli
