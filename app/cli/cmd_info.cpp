// bitlens-cli info: a model's layers, shapes and parameters.

#include "cli.h"

#include "model/model.h"

#include <cstdio>
#include <iostream>

namespace bitlens::cli {

using nlohmann::json;

int cmdInfo(const Args& args)
{
    if (args.positional.size() != 1)
        return fail(Error::usage("usage: bitlens-cli info MODEL [--json]"));
    auto modelArg = resolveModelArg(args.positional[0], args.has("--quiet"));
    if (!modelArg)
        return fail(modelArg.error());
    auto model = openModel(modelArg->path);
    if (!model)
        return fail(model.error());
    const ModelSummary& s = (*model)->summary();
    if (args.has("--json")) {
        json layers = json::array();
        for (const auto& l : s.layers) {
            json inShapes = json::array();
            for (const auto& shape : l.inputShapes)
                inShapes.push_back(shapeJson(shape));
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
    std::printf("\n%-20s %-20s %-18s %10s %12s\n", "layer", "op", "output (batch 1)", "params",
                "bytes");
    for (const auto& l : s.layers)
        std::printf("%-20s %-20s %-18s %10lld %12s\n", l.name.c_str(), l.op.c_str(),
                    formatShape(l.outputShape).c_str(), static_cast<long long>(l.params),
                    formatBytes(l.bytes).c_str());
    return 0;
}

} // namespace bitlens::cli
