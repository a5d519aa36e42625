// bitlens-cli info: a model's layers, shapes and parameters.

#include "cli.h"

#include "analysis/memory_estimate.h"
#include "model/model.h"
#include "quant/scheme.h"

#include <cstdio>
#include <iostream>
#include <optional>

namespace bitlens::cli {

using nlohmann::json;

int cmdInfo(const Args& args)
{
    if (args.positional.size() != 1)
        return fail(Error::usage("usage: bitlens-cli info MODEL [--scheme SCHEME] [--json]"));
    auto modelArg = resolveModelArg(args.positional[0], args.has("--quiet"));
    if (!modelArg)
        return fail(modelArg.error());
    auto model = openModel(modelArg->path);
    if (!model)
        return fail(model.error());
    const ModelSummary& s = (*model)->summary();
    // What a float eval and a quantize of --scheme (default w4-int4) would hold at their peak,
    // at the default batch: the estimates the commands refuse on, shown before running them.
    const std::string schemeSpec = args.get("--scheme", "w4-int4");
    auto scheme = quant::parseScheme(schemeSpec);
    if (!scheme)
        return fail(scheme.error());
    const ir::Graph& graph = (*model)->graph();
    const analysis::WorkShape shape = analysis::defaultWorkShape(graph);
    const analysis::MemoryEstimate evalNeeds = analysis::estimateEval(graph, shape);
    const analysis::MemoryEstimate quantizeNeeds =
        analysis::estimateQuantize(graph, *scheme, shape);
    const std::optional<std::int64_t> available = analysis::availableMemory();
    if (args.has("--json")) {
        json layers = json::array();
        for (const auto& l : s.layers) {
            json inShapes = json::array();
            for (const auto& dims : l.inputShapes)
                inShapes.push_back(shapeJson(dims));
            layers.push_back({{"name", l.name}, {"op", l.op}, {"params", l.params},
                              {"bytes", l.bytes}, {"input_shapes", inShapes},
                              {"output_shape", shapeJson(l.outputShape)}});
        }
        auto tensors = [](const std::vector<TensorSummary>& list) {
            json j = json::array();
            for (const auto& t : list)
                j.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", shapeJson(t.shape)}});
            return j;
        };
        json j = {{"path", s.path},       {"format", s.format},
                  {"name", s.name},       {"params", s.params},
                  {"bytes", s.bytes},     {"inputs", tensors(s.inputs)},
                  {"outputs", tensors(s.outputs)}, {"layers", layers},
                  {"task", s.task},       {"metric", s.metric}};
        if (!s.architecture.empty())
            j["architecture"] = s.architecture;
        if (!s.tokenizerPath.empty())
            j["tokenizer"] = s.tokenizerPath;
        if (!s.note.empty())
            j["note"] = s.note;
        if (!s.notes.empty())
            j["notes"] = s.notes;
        j["memory"] = {{"eval_bytes", evalNeeds.total()},
                       {"quantize_bytes", quantizeNeeds.total()},
                       {"quantize_scheme", schemeSpec},
                       {"available_bytes", available ? json(*available) : json(nullptr)}};
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    std::printf("model   %s\nformat  %s\nparams  %lld (%s)\n", s.path.c_str(), s.format.c_str(),
                static_cast<long long>(s.params), formatBytes(s.bytes).c_str());
    if (!s.architecture.empty())
        std::printf("arch    %s\n", s.architecture.c_str());
    std::printf("task    %s (metric: %s)\n", s.task.c_str(), s.metric.c_str());
    if (!s.tokenizerPath.empty())
        std::printf("tokens  %s\n", s.tokenizerPath.c_str());
    if (!s.note.empty())
        std::printf("note    %s\n", s.note.c_str());
    for (const auto& note : s.notes)
        std::printf("note    %s\n", note.c_str());
    for (const auto& t : s.inputs)
        std::printf("input   %s %s %s\n", t.name.c_str(), t.dtype.c_str(),
                    formatShape(t.shape).c_str());
    for (const auto& t : s.outputs)
        std::printf("output  %s %s %s\n", t.name.c_str(), t.dtype.c_str(),
                    formatShape(t.shape).c_str());
    std::printf("memory  eval ~%s, quantize %s ~%s%s\n",
                analysis::formatGigabytes(evalNeeds.total()).c_str(), schemeSpec.c_str(),
                analysis::formatGigabytes(quantizeNeeds.total()).c_str(),
                available ? (", " + analysis::formatGigabytes(*available) + " available").c_str()
                          : "");
    std::printf("\n%-20s %-20s %-18s %10s %12s\n", "layer", "op", "output (batch 1)", "params",
                "bytes");
    for (const auto& l : s.layers)
        std::printf("%-20s %-20s %-18s %10lld %12s\n", l.name.c_str(), l.op.c_str(),
                    formatShape(l.outputShape).c_str(), static_cast<long long>(l.params),
                    formatBytes(l.bytes).c_str());
    return 0;
}

} // namespace bitlens::cli
