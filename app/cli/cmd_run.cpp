// bitlens-cli run: the float model, or a scheme's quantized model as the app simulates it, on
// .npy inputs; each output goes to DIR/<name>.npy.

#include "cli.h"

#include "analysis/memory_estimate.h"
#include "exec/executor.h"
#include "io/dataset.h"
#include "ir/graph.h"
#include "quant/engine.h"

#include <ATen/ATen.h>

#include <cctype>
#include <cstdio>
#include <filesystem>

namespace bitlens::cli {

namespace {

/// A value name as a file name: path separators and odd characters become '_'.
std::string fileNameFor(const std::string& value)
{
    std::string name = value;
    for (char& c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
            c = '_';
    return name.empty() || name[0] == '.' ? "_" + name : name;
}

} // namespace

int cmdRun(const Args& args)
{
    if (args.positional.size() != 1 || !args.has("--input") || !args.has("--out"))
        return fail(Error::usage("usage: bitlens-cli run MODEL --input X.npy[,Y.npy...] --out DIR "
                                 "[--scheme SCHEME [--calib DATA] [--limit N]]"));
    // The folder the outputs go to (created when missing) is checked before the model opens.
    if (auto r = checkOutputs(args, io::OutputKind::Folder); !r)
        return fail(r.error());
    auto ws = openWorkspace(args, args.has("--quiet"));
    if (!ws)
        return fail(ws.error());
    const ir::Graph& graph = (*ws)->model()->graph();
    const auto inputPaths = splitComma(args.get("--input"));
    if (inputPaths.size() != graph.inputs.size())
        return fail(Error::usage("the model takes " + std::to_string(graph.inputs.size()) +
                                 " input(s), --input gave " + std::to_string(inputPaths.size())));
    std::vector<at::Tensor> inputs;
    for (const auto& p : inputPaths) {
        auto t = io::readNpy(p);
        if (!t)
            return fail(t.error());
        inputs.push_back(*t);
    }
    // With --scheme: the quantized model as the app simulates it (the same prepare as every
    // other command, calibrated on --calib or the zoo's data), e.g. to compare a runtime that
    // loads an export with BitLens's own quantized outputs.
    std::shared_ptr<const quant::QuantizedModel> prepared;
    if (args.has("--scheme")) {
        if (auto r = requireScheme(args, "run MODEL --input X.npy[,Y.npy...] --out DIR "
                                         "[--scheme SCHEME [--calib DATA] [--limit N]]");
            !r)
            return fail(r.error());
        auto request = runRequest(args, **ws, false);
        if (!request)
            return fail(request.error());
        Progress progress = stderrProgress(args.has("--quiet"));
        auto p = workspace::prepared(**ws, *request, progress, CancelToken());
        if (!p)
            return fail(p.error());
        prepared = std::move(p).value();
    }
    const ir::Graph& runGraph = prepared ? prepared->graph : graph;
    if (!prepared && !inputs.empty() && inputs[0].dim() > 0) {
        // The whole input runs at once: refused before it allocates when it cannot fit.
        analysis::WorkShape shape;
        shape.batch = inputs[0].size(0);
        shape.seqLen = inputs[0].dim() == 2 ? inputs[0].size(1) : 1;
        analysis::MemoryEstimate estimate = analysis::estimateEval(graph, shape);
        estimate.action = "run";
        if (auto fits = analysis::checkMemory(estimate, (*ws)->model()->path()); !fits)
            return fail(fits.error());
    }
    exec::Executor executor(runGraph, exec::ExecOptions{c10::Device((*ws)->options().device)});
    if (prepared)
        executor.addHook(quant::makeQuantHook(*prepared));
    auto outputs = executor.run(inputs);
    if (!outputs) {
        Error e = outputs.error();
        if (e.path.empty())
            e.path = inputPaths.size() == 1 ? inputPaths[0] : args.get("--input");
        return fail(e);
    }
    const std::string outDir = args.get("--out");
    std::error_code ec;
    std::filesystem::create_directories(outDir, ec);
    if (ec)
        return fail(Error::runtime("cannot create folder: " + ec.message(), outDir));
    for (std::size_t i = 0; i < outputs->size(); ++i) {
        const std::string file = outDir + "/" + fileNameFor(graph.outputs[i].name) + ".npy";
        if (auto r = io::writeNpy((*outputs)[i].to(at::kCPU), file); !r)
            return fail(r.error());
        std::printf("%s\n", file.c_str());
    }
    return 0;
}

} // namespace bitlens::cli
