// bitlens-cli generate: one prompt continued by the float model and by a scheme's quantized
// model side by side (workspace/generate_run.h): the first token where they differ, the KL
// divergence per token, and prefill / decode tokens per second of each.

#include "cli.h"

#include "workspace/generate_run.h"

#include <cmath>
#include <cstdio>
#include <iostream>

namespace bitlens::cli {

namespace {

constexpr const char* kGenerateUsage =
    "generate MODEL --prompt TEXT [--scheme SCHEME] [--max-tokens N] [--seed N] "
    "[--temperature T] [--top-k K] [--top-p P] [--calib DATA] [--json]";

/// --NAME as a real number within [lo, hi] (`fallback` when absent).
Result<double> realFlag(const Args& args, const std::string& flag, double fallback, double lo,
                        double hi, const std::string& range)
{
    if (!args.has(flag))
        return fallback;
    const std::string text = args.get(flag);
    double value = 0.0;
    std::size_t used = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != text.size() || !std::isfinite(value) || value < lo || value > hi)
        return Error::usage(flag + " needs a number " + range + ", got '" + text + "'");
    return value;
}

/// A token's text on one line: newlines and tabs as \n and \t.
std::string oneLine(const std::string& text)
{
    std::string out;
    for (const char c : text) {
        if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else
            out += c;
    }
    return out;
}

} // namespace

int cmdGenerate(const Args& args)
{
    if (args.positional.size() != 1 || !args.has("--prompt"))
        return fail(Error::usage(std::string("usage: bitlens-cli ") + kGenerateUsage));
    const std::string scheme = args.get("--scheme", "w4-int4");
    if (auto ok = workspace::checkScheme(scheme); !ok)
        return fail(ok.error());
    workspace::GenerateRequest request;
    request.run.scheme = scheme;
    request.run.calibPath = args.get("--calib");
    request.prompt = args.get("--prompt");
    auto maxTokens = numberFlag(args, "--max-tokens", 64, true);
    if (!maxTokens)
        return fail(maxTokens.error());
    request.options.maxTokens = *maxTokens;
    auto seed = numberFlag(args, "--seed", 0, false);
    if (!seed)
        return fail(seed.error());
    if (*seed < 0)
        return fail(Error::usage("--seed needs a number >= 0"));
    request.options.sampling.seed = static_cast<std::uint64_t>(*seed);
    auto topK = numberFlag(args, "--top-k", 0, false);
    if (!topK)
        return fail(topK.error());
    if (*topK < 0)
        return fail(Error::usage("--top-k needs a number >= 0 (0: every token)"));
    request.options.sampling.topK = *topK;
    auto temperature = realFlag(args, "--temperature", 0.0, 0.0, 100.0, "from 0 (greedy) to 100");
    if (!temperature)
        return fail(temperature.error());
    request.options.sampling.temperature = *temperature;
    auto topP = realFlag(args, "--top-p", 1.0, 1e-9, 1.0, "in (0, 1]");
    if (!topP)
        return fail(topP.error());
    request.options.sampling.topP = *topP;

    const bool json = args.has("--json");
    const bool quiet = args.has("--quiet") || json;
    auto ws = openWorkspace(args, quiet);
    if (!ws)
        return fail(ws.error());
    Progress progress = stderrProgress(quiet);
    auto result = workspace::generateCompare(**ws, request, progress, CancelToken());
    if (!result)
        return fail(result.error());
    const workspace::GenerateComparison& c = *result;
    if (json) {
        // Tokens of a partial UTF-8 sequence are not valid UTF-8: shown as U+FFFD.
        std::cout << workspace::generateToJson(c).dump(2, ' ', false,
                                                       nlohmann::json::error_handler_t::replace)
                  << "\n";
        return 0;
    }
    const auto sampling = c.options.sampling;
    std::printf("prompt: %s (%zu tokens)\n", oneLine(c.prompt).c_str(), c.promptIds.size());
    if (sampling.temperature > 0)
        std::printf("sampling: temperature %g, top-k %lld, top-p %g, seed %llu\n",
                    sampling.temperature, static_cast<long long>(sampling.topK), sampling.topP,
                    static_cast<unsigned long long>(sampling.seed));
    else
        std::printf("greedy, at most %lld tokens\n", static_cast<long long>(c.options.maxTokens));
    for (const auto* run : {&c.floatRun, &c.quantRun})
        std::printf("\n%s (%zu tokens, %s):\n%s\n", run->label.c_str(), run->ids.size(),
                    run->stopReason.c_str(), run->text.c_str());
    std::printf("\n");
    if (c.firstDivergence) {
        const auto i = static_cast<std::size_t>(*c.firstDivergence);
        auto at = [i](const workspace::Continuation& r) {
            return i < r.tokens.size() ? "'" + oneLine(r.tokens[i]) + "'" : std::string("(end)");
        };
        std::printf("first divergence: token %zu (float32 %s, %s %s)\n", i,
                    at(c.floatRun).c_str(), c.quantRun.label.c_str(), at(c.quantRun).c_str());
    } else {
        std::printf("first divergence: none (the same %zu tokens)\n", c.floatRun.ids.size());
    }
    std::printf("KL(float32 || %s) on the float tokens: mean %.4g, max %.4g nats\n",
                c.quantRun.label.c_str(), c.meanKld, c.maxKld);
    std::printf("\ntokens/s (%s, %d threads, kernels at %s)\n", c.cpu.c_str(), c.threads,
                c.isa.c_str());
    std::printf("%-16s %10s %10s\n", "", "prefill", "decode");
    for (const auto* run : {&c.floatRun, &c.quantRun})
        std::printf("%-16s %10.1f %10.1f\n", run->label.c_str(), run->prefillTokensPerS,
                    run->decodeTokensPerS);
    if (!c.quantRun.kernels.empty()) {
        std::printf("\n%-24s %s\n", "layer", "kernel");
        for (const auto& [layer, kernel] : c.quantRun.kernels)
            std::printf("%-24s %s\n", layer.c_str(), kernel.c_str());
    }
    return 0;
}

} // namespace bitlens::cli
