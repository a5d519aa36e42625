// bitlens-cli bench: float vs quantized samples/s of one scheme, side by side.

#include "cli.h"

#include "analysis/quant_report.h"

#include <cstdio>
#include <iostream>

namespace bitlens::cli {

int cmdBench(const Args& args)
{
    if (auto r = requireScheme(args, "bench MODEL --scheme SCHEME [--calib DATA] [--batch N] "
                                     "[--device cpu|cuda] [--json]");
        !r)
        return fail(r.error());
    const std::string spec = args.get("--scheme");
    auto batch = numberFlag(args, "--batch", 0, true);
    if (!batch)
        return fail(batch.error());
    const bool quiet = args.has("--quiet") || args.has("--json");
    auto ws = openWorkspace(args, quiet);
    if (!ws)
        return fail(ws.error());
    workspace::RunRequest request;
    request.scheme = spec;
    request.calibPath = args.get("--calib");
    // The same preparation as every command: a qat-* scheme trains first (progress on stderr).
    Progress progress = stderrProgress(quiet);
    auto timed = workspace::bench(**ws, request, *batch, progress, CancelToken());
    if (!timed)
        return fail(timed.error());
    const analysis::Throughput* t = timed->details.get();
    if (args.has("--json")) {
        std::cout << timed->report.dump(2) << "\n";
        return 0;
    }
    std::printf("%s on %s, batch %lld\n", spec.c_str(), t->device.c_str(),
                static_cast<long long>(t->batch));
    if (!t->isa.empty())
        std::printf("cpu %s, own kernels at ISA level %s%s%s\n",
                    t->cpu.empty() ? "(unknown)" : t->cpu.c_str(), t->isa.c_str(),
                    t->isaNote.empty() ? "" : "; ", t->isaNote.c_str());
    std::printf("float      %10.0f samples/s\nquantized  %10.0f samples/s  (%.2fx float)\n",
                t->floatSamplesPerS, t->quantizedSamplesPerS,
                t->quantizedSamplesPerS / t->floatSamplesPerS);
    std::printf("\n%-20s %10s %12s  %s\n", "layer", "float ms", "quantized ms", "kernel");
    for (const auto& [layer, kernel] : t->kernels) {
        const auto ms = t->layerMs.find(layer);
        if (ms == t->layerMs.end())
            std::printf("%-20s %10s %12s  %s\n", layer.c_str(), "", "", kernel.c_str());
        else
            std::printf("%-20s %10.3f %12.3f  %s\n", layer.c_str(), ms->second.first,
                        ms->second.second, kernel.c_str());
        if (const auto note = t->notes.find(layer); note != t->notes.end())
            std::printf("%-20s %10s %12s  note: %s\n", "", "", "", note->second.c_str());
    }
    return 0;
}

} // namespace bitlens::cli
