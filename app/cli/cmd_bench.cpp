// bitlens-cli bench: float vs quantized samples/s of one scheme, side by side; with --decode,
// a language model's pp / tg tokens per second (workspace/decode_bench.h), as llama-bench.

#include "cli.h"

#include "analysis/quant_report.h"
#include "workspace/decode_bench.h"

#include <cstdio>
#include <iostream>

namespace bitlens::cli {

namespace {

int benchDecode(const Args& args)
{
    if (args.has("--device") && args.get("--device") != "cpu")
        return fail(Error::usage("bench --decode times batch-1 decoding on the CPU (got --device " +
                                 args.get("--device") + ")"));
    workspace::DecodeBenchRequest request;
    request.run.scheme = args.get("--scheme");
    request.run.calibPath = args.get("--calib");
    for (auto [flag, target] : {std::pair{"--prompt-tokens", &request.promptTokens},
                                std::pair{"--gen-tokens", &request.genTokens},
                                std::pair{"--repetitions", &request.repetitions}}) {
        auto n = numberFlag(args, flag, *target, true);
        if (!n)
            return fail(n.error());
        *target = *n;
    }
    const bool quiet = args.has("--quiet") || args.has("--json");
    auto ws = openWorkspace(args, quiet);
    if (!ws)
        return fail(ws.error());
    Progress progress = stderrProgress(quiet);
    auto result = workspace::decodeBench(**ws, request, progress, CancelToken());
    if (!result)
        return fail(result.error());
    const workspace::DecodeBench& b = *result;
    if (args.has("--json")) {
        std::cout << workspace::decodeBenchToJson(b).dump(2) << "\n";
        return 0;
    }
    std::printf("%s, batch 1, KV cache, %d threads\n", b.scheme.c_str(), b.threads);
    std::printf("cpu %s, own kernels at ISA level %s%s%s\n",
                b.cpu.empty() ? "(unknown)" : b.cpu.c_str(), b.isa.c_str(),
                b.isaNote.empty() ? "" : "; ", b.isaNote.c_str());
    std::printf("\n%-16s %8s %18s\n", "model", "test", "tokens/s");
    for (const auto* s : {&b.floatRun, &b.quantRun}) {
        std::printf("%-16s %8s %10.2f ± %5.2f\n", s->label.c_str(),
                    ("pp" + std::to_string(s->ppTokens)).c_str(), s->ppTokensPerS, s->ppStddev);
        std::printf("%-16s %8s %10.2f ± %5.2f\n", s->label.c_str(),
                    ("tg" + std::to_string(s->tgTokens)).c_str(), s->tgTokensPerS, s->tgStddev);
    }
    if (b.floatRun.tgTokensPerS > 0 && b.floatRun.ppTokensPerS > 0)
        std::printf("\n%s / float32: pp %.2fx, tg %.2fx\n", b.scheme.c_str(),
                    b.quantRun.ppTokensPerS / b.floatRun.ppTokensPerS,
                    b.quantRun.tgTokensPerS / b.floatRun.tgTokensPerS);
    return 0;
}

} // namespace

int cmdBench(const Args& args)
{
    if (auto r = requireScheme(args, "bench MODEL --scheme SCHEME [--calib DATA] [--batch N] "
                                     "[--device cpu|cuda] [--json]\n       bench MODEL --scheme "
                                     "SCHEME --decode [--prompt-tokens N] [--gen-tokens N] "
                                     "[--repetitions N] [--json]");
        !r)
        return fail(r.error());
    if (args.has("--decode"))
        return benchDecode(args);
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
