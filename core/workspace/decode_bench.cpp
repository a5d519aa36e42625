#include "workspace/decode_bench.h"

#include "kernels/cpu_features.h"
#include "model/generate.h"
#include "quant/engine.h"
#include "quant/real_kernels.h"
#include "workspace/workspace_state.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

namespace bitlens::workspace {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Mean and sample standard deviation of tokens / seconds over the repetitions.
std::pair<double, double> rateStats(std::int64_t tokens, const std::vector<double>& seconds)
{
    std::vector<double> rates;
    for (const double s : seconds)
        if (s > 0)
            rates.push_back(static_cast<double>(tokens) / s);
    if (rates.empty())
        return {0.0, 0.0};
    const double mean = std::accumulate(rates.begin(), rates.end(), 0.0) /
                        static_cast<double>(rates.size());
    if (rates.size() < 2)
        return {mean, 0.0};
    double sq = 0.0;
    for (const double r : rates)
        sq += (r - mean) * (r - mean);
    return {mean, std::sqrt(sq / static_cast<double>(rates.size() - 1))};
}

/// pp and tg of one decoder: after a warm-up pass (one token, so the weights are read once
/// and every lazy buffer exists), each repetition runs the prompt pass from an empty cache,
/// then from another empty cache genTokens one-token passes.
Result<DecodeSpeed> timeDecoder(model::Decoder& decoder, const std::string& label,
                                const std::vector<std::int32_t>& promptIds,
                                const std::vector<std::int32_t>& genIds, std::int64_t repetitions,
                                const CancelToken& cancel)
{
    DecodeSpeed speed;
    speed.label = label;
    speed.ppTokens = static_cast<std::int64_t>(promptIds.size());
    speed.tgTokens = static_cast<std::int64_t>(genIds.size());
    decoder.reset();
    if (auto warm = decoder.append(std::span(promptIds.data(), 1)); !warm)
        return warm.error();
    for (std::int64_t rep = 0; rep < repetitions; ++rep) {
        if (cancel.cancelled())
            return Error::cancelled();
        decoder.reset();
        auto start = Clock::now();
        if (auto out = decoder.append(promptIds); !out)
            return out.error();
        speed.ppSeconds.push_back(secondsSince(start));

        decoder.reset();
        double tg = 0.0;
        for (const std::int32_t id : genIds) {
            if (cancel.cancelled())
                return Error::cancelled();
            start = Clock::now();
            if (auto out = decoder.append(std::span(&id, 1)); !out)
                return out.error();
            tg += secondsSince(start);
        }
        speed.tgSeconds.push_back(tg);
    }
    decoder.reset();
    std::tie(speed.ppTokensPerS, speed.ppStddev) = rateStats(speed.ppTokens, speed.ppSeconds);
    std::tie(speed.tgTokensPerS, speed.tgStddev) = rateStats(speed.tgTokens, speed.tgSeconds);
    return speed;
}

nlohmann::json speedJson(const DecodeSpeed& s)
{
    return {{"label", s.label},
            {"pp_tokens", s.ppTokens},
            {"pp_seconds", s.ppSeconds},
            {"pp_tokens_per_s", s.ppTokensPerS},
            {"pp_stddev", s.ppStddev},
            {"tg_tokens", s.tgTokens},
            {"tg_seconds", s.tgSeconds},
            {"tg_tokens_per_s", s.tgTokensPerS},
            {"tg_stddev", s.tgStddev}};
}

} // namespace

Result<DecodeBench> decodeBench(Workspace& ws, const DecodeBenchRequest& request,
                                Progress& progress, const CancelToken& cancel)
{
    const Model& m = *ws.model();
    if (auto ok = model::checkDecodable(m.graph(), m.path()); !ok)
        return ok.error();
    if (request.promptTokens < 1 || request.genTokens < 1 || request.repetitions < 1)
        return Error::usage("--prompt-tokens, --gen-tokens and --repetitions need numbers >= 1");

    progress.report(0.0, "preparing " + request.run.scheme);
    auto q = prepared(ws, request.run, progress, cancel);
    if (!q)
        return q.error();
    const std::shared_ptr<const quant::QuantizedModel> qm = std::move(q).value();

    return detail::guarded(ws, [&]() -> Result<DecodeBench> {
        DecodeBench out;
        out.modelPath = m.path();
        out.scheme = request.run.scheme;
        out.threads = at::get_num_threads();
        out.cpu = kernels::cpuModelName();
        out.isa = kernels::isaName(kernels::isaLevel());
        out.cpuIsa = kernels::isaName(kernels::hardwareIsaLevel());
        out.isaNote = kernels::isaOverrideNote();
        out.repetitions = request.repetitions;

        auto floatDecoder = model::Decoder::create(m.graph(), {}, m.path());
        if (!floatDecoder)
            return floatDecoder.error();
        const std::int64_t context = (*floatDecoder)->contextLength();
        for (const auto& [flag, count] : {std::pair{"--prompt-tokens", request.promptTokens},
                                          std::pair{"--gen-tokens", request.genTokens}})
            if (context > 0 && count > context)
                return Error::usage(std::string(flag) + " " + std::to_string(count) +
                                    " exceeds the model's context length " +
                                    std::to_string(context) + " (" + m.path() + ")");
        // Pseudo-random ids from a fixed seed, as llama-bench's prompt and generated tokens:
        // both models read the same ones, and what they would pick does not change the work.
        const std::int64_t vocab = (*floatDecoder)->vocabSize();
        std::mt19937 rng(0);
        std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(vocab - 1));
        std::vector<std::int32_t> promptIds(static_cast<std::size_t>(request.promptTokens));
        std::vector<std::int32_t> genIds(static_cast<std::size_t>(request.genTokens));
        for (auto& id : promptIds)
            id = pick(rng);
        for (auto& id : genIds)
            id = pick(rng);

        progress.report(0.3, "timing float32 (pp " + std::to_string(request.promptTokens) +
                                 ", tg " + std::to_string(request.genTokens) + ")");
        auto fs = timeDecoder(**floatDecoder, "float32", promptIds, genIds, request.repetitions,
                              cancel);
        if (!fs)
            return fs.error();
        out.floatRun = std::move(*fs);

        progress.report(0.6, "timing " + request.run.scheme);
        auto hook = quant::makeRealKernelHook(*qm, c10::Device(c10::kCPU));
        auto quantDecoder = model::Decoder::create(qm->graph, {hook}, m.path());
        if (!quantDecoder)
            return quantDecoder.error();
        auto qs = timeDecoder(**quantDecoder, request.run.scheme, promptIds, genIds,
                              request.repetitions, cancel);
        if (!qs)
            return qs.error();
        out.quantRun = std::move(*qs);
        out.kernels = hook->kernelsRun();
        progress.report(1.0, "done");
        return out;
    });
}

nlohmann::json decodeBenchToJson(const DecodeBench& b)
{
    auto ratio = [](double q, double f) { return f > 0 ? q / f : 0.0; };
    nlohmann::json quantized = speedJson(b.quantRun);
    quantized["kernels"] = b.kernels;
    return {{"model", b.modelPath},
            {"scheme", b.scheme},
            {"threads", b.threads},
            {"cpu", b.cpu},
            {"isa", b.isa},
            {"cpu_isa", b.cpuIsa},
            {"isa_note", b.isaNote},
            {"repetitions", b.repetitions},
            {"float", speedJson(b.floatRun)},
            {"quantized", std::move(quantized)},
            {"pp_ratio", ratio(b.quantRun.ppTokensPerS, b.floatRun.ppTokensPerS)},
            {"tg_ratio", ratio(b.quantRun.tgTokensPerS, b.floatRun.tgTokensPerS)}};
}

} // namespace bitlens::workspace
