// bitlens-cli plan: memory per part and the accelerators that hold it (analysis/planner.h; the
// GUI's Plan tab calls the same core functions).

#include "cli.h"

#include "analysis/planner.h"
#include "model/model.h"
#include "zoo/zoo.h"

#include <cstdio>
#include <filesystem>
#include <iostream>

namespace bitlens::cli {

using nlohmann::json;

namespace {

constexpr const char* kPlanUsage =
    "usage: bitlens-cli plan MODEL|PRESET|config.json [--precision P] [--kv-precision P] "
    "[--act-precision P] [--use inference|finetune|lora|qlora] [--batch N] [--context N] "
    "[--rank N] [--checkpointing] [--gpu CARD] [--cards FILE] [--json]\n"
    "       bitlens-cli plan --list [--cards FILE] [--json]";

Result<std::vector<analysis::Accelerator>> loadCards(const Args& args)
{
    std::string path = args.get("--cards");
    if (path.empty()) {
        auto found = analysis::defaultAcceleratorsPath();
        if (!found)
            return found.error();
        path = *found;
    }
    return analysis::loadAccelerators(path);
}

Result<analysis::PlanPrecision> precisionFlag(const Args& args, const std::string& flag,
                                              const std::string& fallback)
{
    const std::string name = args.get(flag, fallback);
    auto p = analysis::findPlanPrecision(name);
    if (!p)
        return Error::usage(flag + ": unknown precision '" + name + "' (choices: " +
                            analysis::planPrecisionNames() + ")");
    return *p;
}

/// PRESET, config.json, a folder with one, or a model file (its config.json, else its count).
Result<analysis::ModelShape> modelArg(const std::string& arg, bool quiet)
{
    if (auto preset = analysis::findModelPreset(arg))
        return *preset;
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool looksLikePath = arg.find('/') != std::string::npos ||
                               arg.find('.') != std::string::npos || fs::exists(arg, ec);
    if (!looksLikePath && !zoo::isZooName(arg))
        return Error::usage("plan: unknown preset '" + arg + "' (presets: " +
                            analysis::modelPresetNames() + "); or give a config.json path");
    const fs::path p(arg);
    if (p.extension() == ".json")
        return analysis::readHfConfigShape(arg);
    if (fs::is_directory(p, ec) || fs::is_regular_file(p.parent_path() / "config.json", ec))
        return analysis::shapeForModelFile(arg, 0);
    // A plan is arithmetic: it never trains or downloads a zoo model to count its parameters.
    if (zoo::isZooName(arg) && !zoo::isBuilt(arg))
        return Error::usage("plan: the zoo model '" + arg + "' is not built (bitlens-cli zoo "
                            "build " + arg + "); or plan a preset or a config.json");
    auto source = resolveModelArg(arg, quiet);
    if (!source)
        return source.error();
    auto model = openModel(source->path);
    if (!model)
        return model.error();
    return analysis::shapeFromParamCount(arg, (*model)->summary().params);
}

json cardJson(const analysis::Accelerator& c)
{
    auto orNull = [](double v) { return v > 0 ? json(v) : json(nullptr); };
    json sources = json::object();
    for (const auto& [figure, text] : c.sources)
        sources[figure] = text;
    return {{"id", c.id},
            {"name", c.name},
            {"memory_gib", c.memoryGib},
            {"memory_bandwidth_gbps", c.bandwidthGBs},
            {"bf16_tflops", c.bf16Tflops},
            {"fp8_tflops", orNull(c.fp8Tflops)},
            {"fp4_tflops", orNull(c.fp4Tflops)},
            {"native_fp8", c.nativeFp8},
            {"native_fp4", c.nativeFp4},
            {"price_usd", c.priceUsd ? json(*c.priceUsd) : json(nullptr)},
            {"source", sources}};
}

std::string tflopsText(double v)
{
    if (v <= 0)
        return "-";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", v);
    return buffer;
}

int listPlan(const Args& args)
{
    auto cards = loadCards(args);
    if (!cards)
        return fail(cards.error());
    if (args.has("--json")) {
        json presets = json::array();
        for (const auto& m : analysis::modelPresets())
            presets.push_back({{"name", m.name},
                               {"family", m.family},
                               {"params", m.params()},
                               {"active_params", m.activeParams()},
                               {"published_params", m.publishedParams},
                               {"source", m.source}});
        json list = json::array();
        for (const auto& c : *cards)
            list.push_back(cardJson(c));
        json precisions = json::array();
        for (const auto& p : analysis::planPrecisions())
            precisions.push_back({{"name", p.name}, {"bits", p.bitsPerValue}, {"layout", p.layout}});
        std::cout << json{{"presets", presets}, {"cards", list}, {"precisions", precisions}}.dump(2)
                  << "\n";
        return 0;
    }
    std::printf("presets (shapes from each model's config.json)\n");
    std::printf("  %-18s %-6s %16s %16s %16s\n", "name", "family", "params", "active/token",
                "published");
    for (const auto& m : analysis::modelPresets())
        std::printf("  %-18s %-6s %16lld %16lld %16lld\n", m.name.c_str(), m.family.c_str(),
                    static_cast<long long>(m.params()), static_cast<long long>(m.activeParams()),
                    static_cast<long long>(m.publishedParams));
    std::printf("\ncards (dense TFLOPS; '-' = not native)\n");
    std::printf("  %-10s %-26s %8s %10s %9s %9s %9s %9s\n", "id", "name", "GiB", "GB/s", "BF16",
                "FP8", "FP4", "price $");
    for (const auto& c : *cards)
        std::printf("  %-10s %-26s %8g %10g %9s %9s %9s %9s\n", c.id.c_str(), c.name.c_str(),
                    c.memoryGib, c.bandwidthGBs, tflopsText(c.bf16Tflops).c_str(),
                    tflopsText(c.fp8Tflops).c_str(), tflopsText(c.fp4Tflops).c_str(),
                    c.priceUsd ? tflopsText(*c.priceUsd).c_str() : "none");
    std::printf("\nprecisions (bits per value, scales included)\n");
    for (const auto& p : analysis::planPrecisions())
        std::printf("  %-8s %7.4g  %s\n", p.name.c_str(), p.bitsPerValue, p.layout.c_str());
    return 0;
}

} // namespace

int cmdPlan(const Args& args)
{
    if (args.has("--list"))
        return args.positional.empty() ? listPlan(args)
                                       : fail(Error::usage(kPlanUsage));
    if (args.positional.size() != 1)
        return fail(Error::usage(kPlanUsage));

    analysis::PlanRequest request;
    auto use = analysis::parsePlanUse(args.get("--use", "inference"));
    if (!use)
        return fail(Error::usage("--use must be inference, finetune, lora or qlora, not '" +
                                 args.get("--use") + "'"));
    request.use = *use;
    auto weights =
        precisionFlag(args, "--precision", request.use == analysis::PlanUse::Qlora ? "nf4" : "bf16");
    if (!weights)
        return fail(weights.error());
    request.weights = *weights;
    // KV cache and activations default to the weights' format where it is one kernels compute
    // in (fp32, bf16, fp16, fp8), else to bf16.
    const std::string computeDefault =
        weights->bitsPerValue >= 8 && weights->name != "int8" ? weights->name : "bf16";
    auto kv = precisionFlag(args, "--kv-precision", computeDefault);
    if (!kv)
        return fail(kv.error());
    request.kvCache = *kv;
    auto act = precisionFlag(args, "--act-precision",
                             computeDefault == "fp8" ? "bf16" : computeDefault);
    if (!act)
        return fail(act.error());
    request.activations = *act;
    auto batch = numberFlag(args, "--batch", 1, true);
    if (!batch)
        return fail(batch.error());
    auto context = numberFlag(args, "--context", 2048, true);
    if (!context)
        return fail(context.error());
    auto rank = numberFlag(args, "--rank", 16, true);
    if (!rank)
        return fail(rank.error());
    request.batch = *batch;
    request.context = *context;
    request.loraRank = *rank;
    request.checkpointing = args.has("--checkpointing");

    auto cards = loadCards(args);
    if (!cards)
        return fail(cards.error());
    const std::string gpu = args.get("--gpu", "a100-80gb");
    const analysis::Accelerator* card = analysis::findAccelerator(*cards, gpu);
    if (!card) {
        std::string ids;
        for (const auto& c : *cards)
            ids += (ids.empty() ? "" : ", ") + c.id;
        return fail(Error::usage("--gpu: unknown card '" + gpu + "' (choices: " + ids + ")"));
    }
    request.card = *card;
    auto shape = modelArg(args.positional[0], args.has("--quiet") || args.has("--json"));
    if (!shape)
        return fail(shape.error());
    request.model = *shape;

    auto plan = analysis::computePlan(request);
    if (!plan)
        return fail(plan.error());
    const analysis::ModelShape& m = request.model;

    if (args.has("--json")) {
        json parts = json::array();
        for (const auto& p : plan->parts)
            parts.push_back({{"key", p.key}, {"label", p.label}, {"bytes", p.bytes},
                             {"how", p.how}});
        json decode = nullptr;
        if (plan->bytesPerDecodeStep > 0)
            decode = {{"bytes_per_step", plan->bytesPerDecodeStep},
                      {"tokens_per_s_min_gpus", plan->decodeTokensPerSecMin},
                      {"tokens_per_s_tensor_parallel", plan->decodeTokensPerSecTp},
                      {"how", plan->decodeHow}};
        auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
        json out = {
            {"model", {{"name", m.name}, {"family", m.family}, {"params", plan->params},
                       {"active_params", plan->activeParams},
                       {"published_params", m.publishedParams}, {"source", m.source}}},
            {"use", analysis::planUseName(request.use)},
            {"batch", request.batch},
            {"context", request.context},
            {"precision", {{"weights", request.weights.name},
                           {"weights_bits", request.weights.bitsPerValue},
                           {"kv_cache", request.kvCache.name},
                           {"activations", request.activations.name}}},
            {"card", cardJson(*card)},
            {"parts", parts},
            {"total_bytes", plan->totalBytes},
            {"min_gpus", plan->minGpus},
            {"tensor_parallel", plan->tensorParallel},
            {"gpu_line", plan->gpuLine},
            {"decode", decode},
            {"price", {{"usd", opt(card->priceUsd)}, {"usd_per_fp8_tflop", opt(plan->usdPerFp8Tflop)},
                       {"usd_per_fp4_tflop", opt(plan->usdPerFp4Tflop)}, {"line", plan->priceLine}}},
            {"notes", plan->notes}};
        if (request.use != analysis::PlanUse::Inference)
            out["lora_rank"] = request.loraRank;
        std::cout << out.dump(2) << "\n";
        return 0;
    }

    std::printf("model    %s (%s, %s params", m.name.c_str(), m.family.c_str(),
                std::to_string(plan->params).c_str());
    if (plan->activeParams != plan->params)
        std::printf(", %lld per token", static_cast<long long>(plan->activeParams));
    if (m.publishedParams > 0)
        std::printf("; published %lld", static_cast<long long>(m.publishedParams));
    std::printf(")\n");
    std::printf("use      %s, batch %lld x context %lld; weights %s, KV cache %s, activations %s\n",
                analysis::planUseName(request.use), static_cast<long long>(request.batch),
                static_cast<long long>(request.context), request.weights.name.c_str(),
                request.kvCache.name.c_str(), request.activations.name.c_str());
    std::printf("card     %s: %g GiB, %g GB/s; dense TFLOPS BF16 %s, FP8 %s, FP4 %s\n\n",
                card->name.c_str(), card->memoryGib, card->bandwidthGBs,
                tflopsText(card->bf16Tflops).c_str(), tflopsText(card->fp8Tflops).c_str(),
                tflopsText(card->fp4Tflops).c_str());
    std::printf("%-30s %12s  %s\n", "part", "memory", "how computed");
    for (const auto& p : plan->parts)
        std::printf("%-30s %12s  %s\n", p.label.c_str(), analysis::planBytesText(p.bytes).c_str(),
                    p.how.c_str());
    std::printf("%-30s %12s\n\n", "total", analysis::planBytesText(plan->totalBytes).c_str());
    std::printf("GPUs     %s\n", plan->gpuLine.c_str());
    if (plan->bytesPerDecodeStep > 0)
        std::printf("decode   %s\n", plan->decodeHow.c_str());
    std::printf("price    %s\n", plan->priceLine.c_str());
    for (const auto& note : plan->notes)
        std::printf("note     %s\n", note.c_str());
    return 0;
}

} // namespace bitlens::cli
