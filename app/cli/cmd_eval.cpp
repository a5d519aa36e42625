// bitlens-cli eval: the float model's task metric on a data set.

#include "cli.h"

#include "analysis/lm_metrics.h"
#include "analysis/memory_estimate.h"
#include "analysis/metrics.h"
#include "exec/device.h"
#include "model/model.h"
#include "model/model_data.h"

#include <c10/core/Device.h>
#include <cstdio>
#include <iostream>
#include <utility>

namespace bitlens::cli {

using nlohmann::json;

int cmdEval(const Args& args)
{
    if (args.positional.size() != 1)
        return fail(Error::usage("usage: bitlens-cli eval MODEL [--data DATA] [--json]"));
    const bool quiet = args.has("--quiet") || args.has("--json");
    auto modelArg = resolveModelArg(args.positional[0], args.has("--quiet"));
    if (!modelArg)
        return fail(modelArg.error());
    const std::string dataPath = args.get("--data", modelArg->evalData);
    if (dataPath.empty())
        return fail(Error::usage("eval needs --data DATA for a model that is not from the zoo"));
    auto limit = numberFlag(args, "--limit", 0, false);
    if (!limit)
        return fail(limit.error());
    auto device = parseDevice(args);
    if (!device)
        return fail(device.error());
    auto model = openModel(modelArg->path);
    if (!model)
        return fail(model.error());
    ModelDataOptions dataOptions;
    dataOptions.limit = *limit;
    for (const auto& [flag, slot] : {std::pair{"--seq-len", &dataOptions.seqLen},
                                     std::pair{"--tokens", &dataOptions.maxTokens}}) {
        auto value = numberFlag(args, flag, 0, true);
        if (!value)
            return fail(value.error());
        *slot = *value;
    }
    Progress loadProgress = stderrProgress(quiet);
    auto data = loadModelData(**model, dataPath, "test", dataOptions, loadProgress);
    if (!data)
        return fail(data.error());
    // Refused before the run allocates when its activations and widened weights cannot fit.
    const ir::Graph& graph = (*model)->graph();
    const analysis::MemoryEstimate estimate =
        analysis::estimateEval(graph, analysis::workShapeOf(graph, data->inputs));
    if (auto fits = analysis::checkMemory(estimate, modelArg->path); !fits)
        return fail(fits.error());
    Progress evalProgress = stderrProgress(quiet);
    auto top1 = analysis::evaluateMetric((*model)->graph(), *data, c10::Device(*device), 256, nullptr, {},
                                         evalProgress);
    if (!top1)
        return fail(top1.error());
    const std::string note = (*model)->note();
    if (args.has("--json")) {
        json j = {{"metric", {{"name", top1->name}, {"value", top1->value}}},
                  {"samples", top1->samples},
                  {"model", modelArg->path},
                  {"data", dataPath},
                  {"device", exec::deviceDescription(args.get("--device", "cpu"))},
                  {"memory", {{"estimate_bytes", estimate.total()}, {"held_bytes", estimate.held}}}};
        if (data->kind == "text")
            j["data_shape"] = {data->inputs.size(0), data->inputs.size(1)};
        if (!note.empty())
            j["note"] = note;
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    // Perplexity counts scored tokens, the other metrics samples.
    const char* unit = top1->name == "perplexity" ? "tokens" : "samples";
    std::printf("%s = %.4f on %lld %s of %s\n", top1->name.c_str(), top1->value,
                static_cast<long long>(top1->samples), unit, dataPath.c_str());
    if (!note.empty())
        std::printf("note: %s\n", note.c_str());
    return 0;
}

} // namespace bitlens::cli
