// bitlens-cli: everything the GUI does, from a shell. The command names, exit codes and JSON
// keys are a contract (DESIGN.md, "Command-line contract"); tests and scripts rely on them.

#include "analysis/metrics.h"
#include "exec/device.h"
#include "exec/executor.h"
#include "io/dataset.h"
#include "ir/graph.h"
#include "model/model.h"
#include "zoo/zoo.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace bitlens;
using nlohmann::json;

constexpr const char* kUsage = R"(usage: bitlens-cli COMMAND [ARGS]

commands:
  --version                          print the version
  zoo list                           the demo models
  zoo build NAME                     build (train) a zoo model again
  zoo path NAME                      print a zoo model's file path (builds it when missing)
  info MODEL [--json]                layers, shapes, parameters
  eval MODEL [--data DATA] [--limit N] [--device cpu|cuda] [--json]
                                     task metric (top-1 accuracy) on a data set
  run MODEL --input X.npy[,Y.npy...] --out DIR [--device cpu|cuda]
                                     run the model, write each output as DIR/<name>.npy

MODEL is a model file (.onnx) or a zoo name (fashion-cnn); a zoo name brings its own data.
DATA is a folder of IDX files, an IDX images file, an image folder, a .npy or a .npz.
exit codes: 0 ok, 2 usage, 3 bad input, 4 unsupported model or op, 5 runtime failure
)";

/// Parsed command line: positional words and --flags (with or without a value).
struct Args {
    std::vector<std::string> positional;
    std::map<std::string, std::string> flags;

    bool has(const std::string& flag) const { return flags.count(flag) != 0; }
    std::string get(const std::string& flag, const std::string& fallback = {}) const
    {
        auto it = flags.find(flag);
        return it == flags.end() ? fallback : it->second;
    }
};

const std::map<std::string, bool> kFlagTakesValue = {
    {"--json", false}, {"--data", true},   {"--limit", true}, {"--device", true},
    {"--input", true}, {"--out", true},    {"--batch", true}, {"--quiet", false},
};

Result<Args> parseArgs(int argc, char** argv, int first)
{
    Args args;
    for (int i = first; i < argc; ++i) {
        std::string word = argv[i];
        if (word.rfind("--", 0) != 0) {
            args.positional.push_back(word);
            continue;
        }
        std::string value;
        const auto eq = word.find('=');
        if (eq != std::string::npos) {
            value = word.substr(eq + 1);
            word = word.substr(0, eq);
        }
        auto spec = kFlagTakesValue.find(word);
        if (spec == kFlagTakesValue.end())
            return Error::usage("unknown option " + word);
        if (spec->second && eq == std::string::npos) {
            if (i + 1 >= argc)
                return Error::usage("option " + word + " needs a value");
            value = argv[++i];
        }
        args.flags[word] = value;
    }
    return args;
}

int fail(const Error& error)
{
    std::fprintf(stderr, "%s\n", error.userMessage().c_str());
    return exitCode(error.code);
}

/// Prints progress to stderr when it is a terminal or a log: a line per stage change or 10 %.
Progress stderrProgress(bool quiet)
{
    if (quiet)
        return Progress();
    auto last = std::make_shared<std::pair<std::string, int>>("", -1);
    return Progress([last](double fraction, const std::string& stage) {
        const int tenth = static_cast<int>(fraction * 10.0);
        const std::string head = stage.substr(0, stage.find(','));
        if (head == last->first && tenth == last->second)
            return;
        last->first = head;
        last->second = tenth;
        std::fprintf(stderr, "[%3d%%] %s\n", static_cast<int>(fraction * 100.0), stage.c_str());
    });
}

/// A model argument resolved: the file, and the data its zoo entry brings (if any).
struct ModelArg {
    std::string path;
    std::string calibData;
    std::string evalData;
};

Result<ModelArg> resolveModel(const std::string& arg, bool quiet)
{
    std::error_code ec;
    if (zoo::isZooName(arg) && !std::filesystem::exists(arg, ec)) {
        if (!zoo::isBuilt(arg) && !quiet)
            std::fprintf(stderr, "building zoo model %s (first use; cached in %s)\n", arg.c_str(),
                         zoo::cacheDir().c_str());
        Progress progress = stderrProgress(quiet);
        auto built = zoo::ensure(arg, progress);
        if (!built)
            return built.error();
        return ModelArg{built->modelPath, built->calibData, built->evalData};
    }
    return ModelArg{arg, {}, {}};
}

Result<c10::Device> parseDevice(const Args& args)
{
    const std::string name = args.get("--device", "cpu");
    if (name == "cpu")
        return c10::Device(c10::kCPU);
    if (name == "cuda") {
        if (!exec::cudaAvailable())
            return Error::runtime("--device cuda: no CUDA device is available in this build or "
                                  "on this machine");
        return c10::Device(c10::kCUDA);
    }
    return Error::usage("--device must be cpu or cuda, not '" + name + "'");
}

json shapeJson(const std::vector<std::int64_t>& shape)
{
    json j = json::array();
    for (auto d : shape)
        j.push_back(d < 0 ? json("N") : json(d));
    return j;
}

int cmdZoo(const Args& args)
{
    if (args.positional.empty())
        return fail(Error::usage("zoo needs a subcommand: list, build NAME or path NAME"));
    const std::string& sub = args.positional[0];
    if (sub == "list") {
        if (args.has("--json")) {
            json j = json::array();
            for (const auto& e : zoo::list())
                j.push_back({{"name", e.name}, {"description", e.description},
                             {"task", e.task}, {"metric", e.metric},
                             {"built", zoo::isBuilt(e.name)}});
            std::cout << j.dump(2) << "\n";
            return 0;
        }
        for (const auto& e : zoo::list())
            std::printf("%-14s %-9s %s\n", e.name.c_str(),
                        zoo::isBuilt(e.name) ? "built" : "not built", e.description.c_str());
        return 0;
    }
    if (args.positional.size() != 2)
        return fail(Error::usage("usage: bitlens-cli zoo " + sub + " NAME"));
    const std::string& name = args.positional[1];
    if (!zoo::isZooName(name))
        return fail(Error::usage("unknown zoo model '" + name + "' (see `bitlens-cli zoo list`)"));
    Progress progress = stderrProgress(args.has("--quiet"));
    if (sub == "build") {
        auto built = zoo::build(name, progress);
        if (!built)
            return fail(built.error());
        std::printf("%s\n", built->modelPath.c_str());
        return 0;
    }
    if (sub == "path") {
        auto built = zoo::ensure(name, progress);
        if (!built)
            return fail(built.error());
        std::printf("%s\n", built->modelPath.c_str());
        return 0;
    }
    return fail(Error::usage("unknown zoo subcommand '" + sub + "'"));
}

int cmdInfo(const Args& args)
{
    if (args.positional.size() != 1)
        return fail(Error::usage("usage: bitlens-cli info MODEL [--json]"));
    auto modelArg = resolveModel(args.positional[0], args.has("--quiet"));
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
                  {"outputs", tensors(s.outputs)}, {"layers", layers}};
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    std::printf("model   %s\nformat  %s\nparams  %lld (%s)\n", s.path.c_str(), s.format.c_str(),
                static_cast<long long>(s.params), formatBytes(s.bytes).c_str());
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

int cmdEval(const Args& args)
{
    if (args.positional.size() != 1)
        return fail(Error::usage("usage: bitlens-cli eval MODEL [--data DATA] [--json]"));
    const bool quiet = args.has("--quiet") || args.has("--json");
    auto modelArg = resolveModel(args.positional[0], args.has("--quiet"));
    if (!modelArg)
        return fail(modelArg.error());
    const std::string dataPath = args.get("--data", modelArg->evalData);
    if (dataPath.empty())
        return fail(Error::usage("eval needs --data DATA for a model that is not from the zoo"));
    std::int64_t limit = 0;
    if (args.has("--limit")) {
        try {
            limit = std::stoll(args.get("--limit"));
        } catch (const std::exception&) {
            return fail(Error::usage("--limit needs a number"));
        }
    }
    auto device = parseDevice(args);
    if (!device)
        return fail(device.error());
    auto model = openModel(modelArg->path);
    if (!model)
        return fail(model.error());
    Progress loadProgress = stderrProgress(quiet);
    auto data = io::loadDataset(dataPath, "test", limit, loadProgress);
    if (!data)
        return fail(data.error());
    Progress evalProgress = stderrProgress(quiet);
    auto top1 = analysis::evaluateTop1((*model)->graph(), *data, *device, 256, evalProgress);
    if (!top1)
        return fail(top1.error());
    if (args.has("--json")) {
        json j = {{"metric", {{"name", top1->name}, {"value", top1->value}}},
                  {"samples", top1->samples},
                  {"model", modelArg->path},
                  {"data", dataPath},
                  {"device", exec::deviceDescription(args.get("--device", "cpu"))}};
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    std::printf("%s = %.4f on %lld samples of %s\n", top1->name.c_str(), top1->value,
                static_cast<long long>(top1->samples), dataPath.c_str());
    return 0;
}

std::vector<std::string> splitComma(const std::string& text)
{
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto comma = text.find(',', start);
        const auto end = comma == std::string::npos ? text.size() : comma;
        if (end > start)
            parts.push_back(text.substr(start, end - start));
        if (comma == std::string::npos)
            break;
        start = comma + 1;
    }
    return parts;
}

/// A value name as a file name: path separators and odd characters become '_'.
std::string fileNameFor(const std::string& value)
{
    std::string name = value;
    for (char& c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
            c = '_';
    return name.empty() || name[0] == '.' ? "_" + name : name;
}

int cmdRun(const Args& args)
{
    if (args.positional.size() != 1 || !args.has("--input") || !args.has("--out"))
        return fail(Error::usage("usage: bitlens-cli run MODEL --input X.npy[,Y.npy...] --out DIR"));
    auto modelArg = resolveModel(args.positional[0], args.has("--quiet"));
    if (!modelArg)
        return fail(modelArg.error());
    auto device = parseDevice(args);
    if (!device)
        return fail(device.error());
    auto model = openModel(modelArg->path);
    if (!model)
        return fail(model.error());
    const ir::Graph& graph = (*model)->graph();
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
    exec::Executor executor(graph, exec::ExecOptions{*device});
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

int dispatch(int argc, char** argv)
{
    if (argc < 2) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    const std::string command = argv[1];
    if (command == "--version" || command == "version") {
        std::printf("bitlens-cli %s (LibTorch %s)\n", BITLENS_VERSION, BITLENS_TORCH_VERSION);
        return 0;
    }
    if (command == "--help" || command == "-h" || command == "help") {
        std::fputs(kUsage, stdout);
        return 0;
    }
    auto args = parseArgs(argc, argv, 2);
    if (!args)
        return fail(args.error());
    if (command == "zoo")
        return cmdZoo(*args);
    if (command == "info")
        return cmdInfo(*args);
    if (command == "eval")
        return cmdEval(*args);
    if (command == "run")
        return cmdRun(*args);
    std::fprintf(stderr, "error: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
}

} // namespace

int main(int argc, char** argv)
{
    try {
        return dispatch(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: internal failure: %s\n", e.what());
        return 5;
    }
}
