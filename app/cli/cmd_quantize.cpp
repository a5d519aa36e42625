// bitlens-cli quantize: one scheme, compared layer by layer with float and measured; --out also
// exports the quantized model.

#include "cli.h"

#include <cstdio>
#include <iostream>

namespace bitlens::cli {

using nlohmann::json;

int cmdQuantize(const Args& args)
{
    if (auto r = requireScheme(args, "quantize MODEL --scheme SCHEME [--calib DATA] "
                                     "[--eval DATA] [--report FILE.json] "
                                     "[--out FILE.onnx [--verify]] [--engine auto|whole|block]");
        !r)
        return fail(r.error());
    const bool quiet = args.has("--quiet") || args.has("--json");
    // --engine block: one decoder block at a time (analysis/block_engine.h); auto (the
    // default): the whole engine where it fits, else the block engine where it can run.
    const std::string engine = args.get("--engine", "auto");
    if (engine != "whole" && engine != "block" && engine != "auto")
        return fail(Error::usage("--engine " + engine + ": give auto, whole or block"));
    // --out FILE writes the quantized model in the format its extension names (export.h);
    // what the format cannot hold is refused before any work.
    workspace::RunRequest scheme;
    scheme.scheme = args.get("--scheme");
    if (args.has("--out"))
        if (auto r = workspace::checkExport(scheme, {}, args.get("--out")); !r)
            return fail(r.error());
    // --out and --report can be written: checked before the model opens, not after the run.
    if (auto r = checkOutputs(args, exportOutKind(args)); !r)
        return fail(r.error());
    auto ws = openWorkspace(args, quiet);
    if (!ws)
        return fail(ws.error());
    auto request = runRequest(args, **ws, false);
    if (!request)
        return fail(request.error());
    request->engine = engine == "auto" ? std::string() : engine;
    if (args.has("--out"))
        if (auto r = workspace::checkExport(*request, {}, args.get("--out"), ws->get()); !r)
            return fail(r.error());
    Progress progress = stderrProgress(args.has("--quiet"));
    auto run = workspace::run(**ws, *request, progress, CancelToken());
    if (!run)
        return fail(run.error());
    json j = std::move(run->report);
    if (!args.has("--json"))
        printReport(*run->details);
    int code = 0;
    if (args.has("--out"))
        code = exportQuantized(args, **ws, *request, &j);
    if (args.has("--report"))
        if (auto r = workspace::writeJsonFile(args.get("--report"), j); !r)
            return fail(r.error());
    if (args.has("--json"))
        std::cout << j.dump(2) << "\n";
    return code;
}

} // namespace bitlens::cli
