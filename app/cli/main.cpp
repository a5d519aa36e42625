// bitlens-cli: everything the GUI does, from a shell. The command names, exit codes and JSON
// keys are a contract (DESIGN.md, "Command-line contract"); tests and scripts rely on them.

#include "analysis/metrics.h"
#include "analysis/quant_report.h"
#include "exec/device.h"
#include "export/export.h"
#include "export/report_json.h"
#include "io/file_util.h"
#include "exec/executor.h"
#include "exec/omp_env.h"
#include "io/dataset.h"
#include "ir/graph.h"
#include "model/model.h"
#include "model/model_data.h"
#include "quant/engine.h"
#include "quant/scheme.h"
#include "train/qat.h"
#include "zoo/zoo.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <malloc.h>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "cli.h"

namespace bitlens::cli {

using nlohmann::json;

namespace {

constexpr const char* kUsage = R"(usage: bitlens-cli COMMAND [ARGS]

commands:
  --version                          print the version
  zoo list                           the demo models
  zoo build NAME                     build (train) a zoo model again
  zoo path NAME                      print a zoo model's file path (builds it when missing)
  info MODEL [--json]                layers, shapes, parameters
  eval MODEL [--data DATA] [--limit N] [--seq-len N] [--tokens N] [--device cpu|cuda] [--json]
                                     task metric (top-1, perplexity, embedding cosine)
  run MODEL --input X.npy[,Y.npy...] --out DIR [--device cpu|cuda] [--scheme SCHEME [--calib DATA]]
                                     run the model, write each output as DIR/<name>.npy
  quantize MODEL --scheme SCHEME [--calib DATA] [--eval DATA] [--limit N] [--report FILE.json]
           [--out FILE.onnx [--verify]]
                                     quantize, compare layer by layer with float, measure;
                                     --out also exports (format from the extension)
  compare MODEL --schemes S1,S2,...|all [--calib DATA] [--eval DATA] [--report FILE.json]
                                     one quantize run per scheme, side by side (all: every
                                     post-training preset; name qat-* schemes to train them)
  sensitivity MODEL --scheme SCHEME [--calib DATA] [--eval DATA] [--report FILE.json]
                                     quantize each layer alone; rank layers by metric drop
  bench MODEL --scheme SCHEME [--calib DATA] [--batch N] [--device cpu|cuda] [--json]
                                     float vs quantized samples/s, side by side
  tokenize MODEL --text FILE [--json] [--no-special]
                                     token ids of a text (MODEL: zoo name, tokenizer.json,
                                     vocab.txt, or a folder or model file beside one)
  export MODEL --scheme SCHEME --format onnx|gguf|safetensors --out FILE [--verify]
         [--calib DATA] [--eval DATA] [--limit N] [--report FILE.json] [--json]
                                     write the quantized model (ONNX QDQ: static-int8,
                                     dynamic-int8, w4-int4, static-w4a8, smoothquant-int8;
                                     GGUF: llama models with the gguf-* presets);
                                     --verify reloads it and compares with the in-app model

SCHEME is a preset with options (static-int8:observer=percentile:99.99,per=channel,
w4-int4:group=64) or a JSON file {"preset", "options", "overrides": {"layer": "float"}}.
presets: dynamic-int8 static-int8 static-w4a8 w4-int4 w4-nf4 w4-fp4 fp8-e4m3 fp8-e5m2
         llm-int8 smoothquant-int8 fp16 bf16 qat-int8 qat-w4a8
         gguf-f16 gguf-q8_0 gguf-q4_0 gguf-q4_1 gguf-q4_k gguf-q6_k (weight-only, ggml's
         block round trip: the weights a GGUF file of that type holds)
qat-* presets fine-tune through fake quantization on the calibration (training) data, then
report like any scheme: qat-w4a8:epochs=1,samples=12000,lr=1e-4,optimizer=adam|sgd,lsq=true,
act-range=fixed|ema|learned,distill=true,freeze-bn=STEP,eval-every=N,holdout=N,batch=N

MODEL is a model file (.onnx, .gguf, .safetensors with config.json beside it), a Hugging Face
folder (config.json + model.safetensors), or a zoo name (fashion-cnn, minilm-l6, smollm2-135m);
a zoo name brings its own data.
DATA is a folder of IDX files, an IDX images file, an image folder, a .npy or a .npz, or a .txt
for models with a tokenizer: language models read it in windows of --seq-len tokens (512;
--tokens N or --limit N windows, 32 by default), encoders one line per sample (--limit lines).
exit codes: 0 ok, 2 usage, 3 bad input, 4 unsupported model or op, 5 runtime failure
)";

} // namespace

const std::map<std::string, bool> kFlagTakesValue = {
    {"--json", false}, {"--data", true},   {"--limit", true}, {"--device", true},
    {"--input", true}, {"--out", true},    {"--batch", true}, {"--quiet", false},
    {"--scheme", true}, {"--schemes", true}, {"--calib", true}, {"--eval", true},
    {"--report", true}, {"--format", true}, {"--verify", false}, {"--text", true},
    {"--epochs", true}, {"--lr", true},    {"--steps", true}, {"--seq-len", true},
    {"--tokens", true}, {"--project", true}, {"--no-special", false},
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

/// --limit (given as `limit`), --seq-len and --tokens as loadModelData takes them.
Result<ModelDataOptions> modelDataOptions(const Args& args, std::int64_t limit)
{
    ModelDataOptions options;
    options.limit = limit;
    for (const auto& [flag, slot] : {std::pair{"--seq-len", &options.seqLen},
                                     std::pair{"--tokens", &options.maxTokens}}) {
        if (!args.has(flag))
            continue;
        try {
            *slot = std::stoll(args.get(flag));
        } catch (const std::exception&) {
            *slot = 0;
        }
        if (*slot < 1)
            return Error::usage(std::string(flag) + " needs a positive number");
    }
    return options;
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
    auto dataOptions = modelDataOptions(args, limit);
    if (!dataOptions)
        return fail(dataOptions.error());
    Progress loadProgress = stderrProgress(quiet);
    auto data = loadModelData(**model, dataPath, "test", *dataOptions, loadProgress);
    if (!data)
        return fail(data.error());
    Progress evalProgress = stderrProgress(quiet);
    auto top1 = analysis::evaluateMetric((*model)->graph(), *data, *device, 256, nullptr, {},
                                         evalProgress);
    if (!top1)
        return fail(top1.error());
    const std::string note = (*model)->note();
    if (args.has("--json")) {
        json j = {{"metric", {{"name", top1->name}, {"value", top1->value}}},
                  {"samples", top1->samples},
                  {"model", modelArg->path},
                  {"data", dataPath},
                  {"device", exec::deviceDescription(args.get("--device", "cpu"))}};
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
        return fail(Error::usage("usage: bitlens-cli run MODEL --input X.npy[,Y.npy...] --out DIR "
                                 "[--scheme SCHEME [--calib DATA] [--limit N]]"));
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
    // With --scheme: the quantized model as the app simulates it (the same prepare as every
    // other command, calibrated on --calib or the zoo's data), e.g. to compare a runtime that
    // loads an export with BitLens's own quantized outputs.
    std::optional<quant::QuantizedModel> prepared;
    std::optional<QuantInputs> quantInputs;
    if (args.has("--scheme")) {
        auto scheme = requireScheme(args, "run MODEL --input X.npy[,Y.npy...] --out DIR "
                                          "[--scheme SCHEME [--calib DATA] [--limit N]]");
        if (!scheme)
            return fail(scheme.error());
        auto in = loadQuantInputs(args, false, scheme->calibSamples);
        if (!in)
            return fail(in.error());
        quantInputs = std::move(in).value();
        Progress progress = stderrProgress(args.has("--quiet"));
        auto p = train::prepareScheme(quantInputs->model->graph(), *scheme,
                                      quantInputs->calib ? &*quantInputs->calib : nullptr,
                                      progress);
        if (!p)
            return fail(p.error());
        prepared = std::move(p).value();
    }
    const ir::Graph& runGraph = prepared ? prepared->graph : graph;
    exec::Executor executor(runGraph, exec::ExecOptions{*device});
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

/// Splits "--schemes" at commas, keeping a scheme's own options together:
/// "static-int8:observer=minmax,per=tensor,w4-int4" -> {"static-int8:...,per=tensor", "w4-int4"}.
std::vector<std::string> splitSchemes(const std::string& text)
{
    std::vector<std::string> specs;
    for (const auto& piece : splitComma(text)) {
        const auto eq = piece.find('=');
        const auto colon = piece.find(':');
        const bool isOption = eq != std::string::npos && (colon == std::string::npos || colon > eq);
        if (isOption && !specs.empty())
            specs.back() += "," + piece;
        else
            specs.push_back(piece);
    }
    return specs;
}

Result<QuantInputs> loadQuantInputs(const Args& args, bool needEval, std::int64_t calibSamples)
{
    QuantInputs in;
    const bool quiet = args.has("--quiet") || args.has("--json");
    auto modelArg = resolveModel(args.positional[0], quiet);
    if (!modelArg)
        return modelArg.error();
    in.modelArg = *modelArg;
    auto device = parseDevice(args);
    if (!device)
        return device.error();
    in.device = *device;
    auto model = openModel(modelArg->path);
    if (!model)
        return model.error();
    in.model = *model;
    const std::string calibPath = args.get("--calib", modelArg->calibData);
    if (!calibPath.empty()) {
        // Text: the scheme's calibration count when it names one (calib=N windows or lines),
        // else the text defaults of model_data.h; other data: the scheme's count.
        const bool textDefault =
            isTextData(calibPath) && calibSamples == quant::Scheme().calibSamples;
        auto calibOptions = modelDataOptions(args, textDefault ? 0 : calibSamples);
        if (!calibOptions)
            return calibOptions.error();
        calibOptions->maxTokens = 0;  // --tokens sizes the evaluation text
        auto calib = loadModelData(*in.model, calibPath, "train", *calibOptions);
        if (!calib)
            return calib.error();
        if (calib->size() == 0) {
            const auto& inputs = in.model->summary().inputs;
            return Error::badInput(calibPath, "holds no samples; calibration needs inputs shaped " +
                                                  (inputs.empty() ? std::string("like the model's")
                                                                  : formatShape(inputs[0].shape)));
        }
        in.calib = std::move(calib).value();
    }
    in.evalPath = args.get("--eval", modelArg->evalData);
    if (needEval && in.evalPath.empty())
        return Error::usage("give evaluation data with --eval DATA (a zoo model brings its own)");
    if (!in.evalPath.empty()) {
        std::int64_t limit = 0;
        if (args.has("--limit")) {
            try {
                limit = std::stoll(args.get("--limit"));
            } catch (const std::exception&) {
                return Error::usage("--limit needs a number");
            }
        }
        auto evalOptions = modelDataOptions(args, limit);
        if (!evalOptions)
            return evalOptions.error();
        auto eval = loadModelData(*in.model, in.evalPath, "test", *evalOptions);
        if (!eval)
            return eval.error();
        in.eval = std::move(eval).value();
    }
    if (!in.calib && !in.eval)
        return Error::usage("give data with --calib DATA or --eval DATA (layer errors are "
                            "measured on real samples)");
    return in;
}

/// The batch layer errors and throughput are measured on: evaluation data, else calibration.
at::Tensor analysisBatch(const QuantInputs& in)
{
    return in.eval ? in.eval->inputs : in.calib->inputs;
}

Result<analysis::QuantReport> runScheme(const QuantInputs& in, const std::string& spec,
                                        std::optional<analysis::MetricValue> floatMetric,
                                        bool quiet, quant::QuantizedModel* keep)
{
    auto scheme = quant::parseScheme(spec);
    if (!scheme)
        return scheme.error();
    Progress progress = stderrProgress(quiet);
    const at::Tensor calib = in.calib ? in.calib->inputs : at::Tensor();
    auto prepared = train::prepareScheme(in.model->graph(), *scheme,
                                         in.calib ? &*in.calib : nullptr, progress);
    if (!prepared) {
        Error e = prepared.error();
        if (e.path.empty() && e.code == ErrorCode::BadInput && in.calib)
            e.path = in.calib->path;
        return e;
    }
    analysis::AnalysisOptions options;
    options.device = in.device;
    auto report = analysis::analyze(in.model->graph(), *prepared, analysisBatch(in),
                                    in.eval ? &*in.eval : nullptr, options, floatMetric,
                                    progress);
    if (!report)
        return report.error();
    report->modelPath = in.modelArg.path;
    report->modelFormat = in.model->format();
    report->modelNote = in.model->note();
    if (keep)
        *keep = std::move(prepared).value();
    return report;
}

std::string dbText(double db)
{
    if (!std::isfinite(db))
        return db > 0 ? "exact" : "-inf";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", db);
    return buf;
}

Result<void> writeJson(const std::string& path, const json& j)
{
    const std::string text = j.dump(2) + "\n";
    return io::writeFileAtomic(path, text.data(), text.size());
}

void printReport(const analysis::QuantReport& r)
{
    std::printf("scheme  %s\n", r.schemeSpec.c_str());
    std::printf("\n%-14s %-8s %-44s %9s %9s %10s %10s\n", "layer", "op", "config", "SQNR dB",
                "accum dB", "float", "quantized");
    for (const auto& l : r.layers)
        std::printf("%-14s %-8s %-44s %9s %9s %10s %10s\n", l.name.c_str(), l.op.c_str(),
                    l.config.substr(0, 44).c_str(), dbText(l.local.sqnrDb).c_str(),
                    dbText(l.accumulated.sqnrDb).c_str(), formatBytes(l.bytesFloat).c_str(),
                    formatBytes(l.bytesQuantized).c_str());
    if (r.qat)
        std::printf("\nqat         %d epoch(s), %lld steps, %s %.4f, held-out %s %.4f -> %.4f "
                    "(step %lld kept)%s, %.1f s\n",
                    r.qat->epochs, static_cast<long long>(r.qat->steps), r.qat->lossName.c_str(),
                    r.qat->finalLoss, r.qat->metricName.c_str(), r.qat->startMetric,
                    r.qat->bestMetric, static_cast<long long>(r.qat->bestStep),
                    r.qat->cancelled ? ", cancelled" : "", r.qat->seconds);
    std::printf("\nsize        %s -> %s (%.3f of float)\n", formatBytes(r.sizeFloat).c_str(),
                formatBytes(r.sizeQuantized).c_str(),
                static_cast<double>(r.sizeQuantized) / static_cast<double>(r.sizeFloat));
    if (r.metricFloat && r.metricQuantized) {
        if (r.metricFloat->name == "perplexity")
            std::printf("%-11s %.4f -> %.4f (%+.2f %%) on %lld tokens\n",
                        r.metricFloat->name.c_str(), r.metricFloat->value, r.metricQuantized->value,
                        100.0 * (r.metricQuantized->value / r.metricFloat->value - 1.0),
                        static_cast<long long>(r.metricQuantized->samples));
        else
            std::printf("%-11s %.4f -> %.4f (%+.2f points) on %lld samples\n",
                        r.metricFloat->name.c_str(), r.metricFloat->value,
                        r.metricQuantized->value,
                        100.0 * (r.metricQuantized->value - r.metricFloat->value),
                        static_cast<long long>(r.metricQuantized->samples));
    }
    if (!r.modelNote.empty())
        std::printf("note        %s\n", r.modelNote.c_str());
    int real = 0;
    for (const auto& l : r.layers)
        real += l.simulated || l.weightType == "float32" ? 0 : 1;
    std::printf("throughput  %.0f -> %.0f samples/s (%s, batch %lld; %d of %zu layers on real "
                "low-bit kernels)\n",
                r.throughput.floatSamplesPerS, r.throughput.quantizedSamplesPerS,
                r.throughput.device.c_str(), static_cast<long long>(r.throughput.batch), real,
                r.layers.size());
    for (const auto& l : r.layers)
        std::printf("  %-14s %s\n", l.name.c_str(), l.kernel.c_str());
}

/// The front of every single-scheme command: one MODEL and a parseable --scheme.
Result<quant::Scheme> requireScheme(const Args& args, const std::string& usage)
{
    if (args.positional.size() != 1 || !args.has("--scheme"))
        return Error::usage("usage: bitlens-cli " + usage);
    return quant::parseScheme(args.get("--scheme"));
}

int cmdQuantize(const Args& args)
{
    auto scheme = requireScheme(args, "quantize MODEL --scheme SCHEME [--calib DATA] "
                                      "[--eval DATA] [--report FILE.json] "
                                      "[--out FILE.onnx [--verify]]");
    if (!scheme)
        return fail(scheme.error());
    // --out FILE writes the quantized model in the format its extension names (export.h);
    // what the format cannot hold is refused before any work.
    if (args.has("--out")) {
        auto format = exporting::formatFromPath(args.get("--out"));
        if (!format)
            return fail(format.error());
        if (auto r = exporting::checkExportable(*scheme, *format); !r)
            return fail(r.error());
    }
    const std::string spec = args.get("--scheme");
    auto in = loadQuantInputs(args, false, quant::dataSamplesNeeded(*scheme));
    if (!in)
        return fail(in.error());
    if (args.has("--out"))
        if (auto r = exporting::checkExportableModel(in->model->graph(), *scheme,
                                                     *exporting::formatFromPath(args.get("--out")),
                                                     in->model->path());
            !r)
            return fail(r.error());
    quant::QuantizedModel prepared;
    auto report = runScheme(*in, spec, std::nullopt, args.has("--quiet"),
                            args.has("--out") ? &prepared : nullptr);
    if (!report)
        return fail(report.error());
    json j = exporting::reportToJson(*report);
    if (!args.has("--json"))
        printReport(*report);
    int code = 0;
    if (args.has("--out"))
        code = exportQuantized(args, *in, prepared, &j);
    if (args.has("--report"))
        if (auto r = writeJson(args.get("--report"), j); !r)
            return fail(r.error());
    if (args.has("--json"))
        std::cout << j.dump(2) << "\n";
    return code;
}

int cmdCompare(const Args& args)
{
    if (args.positional.size() != 1 || !args.has("--schemes"))
        return fail(Error::usage("usage: bitlens-cli compare MODEL --schemes S1,S2,...|all "
                                 "[--calib DATA] [--eval DATA] [--report FILE.json]"));
    std::vector<std::string> specs = args.get("--schemes") == "all"
                                         ? quant::postTrainingPresetNames()
                                         : splitSchemes(args.get("--schemes"));
    std::int64_t calibSamples = 0;
    bool allSamples = false;  // a QAT scheme that trains on all of the data
    for (const auto& spec : specs) {
        auto s = quant::parseScheme(spec);
        if (!s)
            return fail(s.error());
        const std::int64_t needed = quant::dataSamplesNeeded(*s);
        allSamples = allSamples || needed == 0;
        calibSamples = std::max(calibSamples, needed);
    }
    if (allSamples)
        calibSamples = 0;
    auto in = loadQuantInputs(args, false, calibSamples);
    if (!in)
        return fail(in.error());
    std::optional<analysis::MetricValue> floatMetric;
    if (in->eval) {
        auto m = analysis::evaluateMetric(in->model->graph(), *in->eval, in->device);
        if (!m)
            return fail(m.error());
        floatMetric = *m;
    }
    json runs = json::array();
    std::printf("%-40s %8s %8s %8s %9s %10s %7s\n", "scheme", "metric", "drop", "size",
                "min SQNR", "samples/s", "time s");
    if (floatMetric)
        std::printf("%-40s %8.4f %8s %8s %9s %10s %7s\n", "float32", floatMetric->value, "",
                    "1.000", "", "", "");
    for (const auto& spec : specs) {
        auto report = runScheme(*in, spec, floatMetric, true);
        if (!report)
            return fail(report.error());
        double minSqnr = std::numeric_limits<double>::infinity();
        for (const auto& l : report->layers)
            minSqnr = std::min(minSqnr, l.accumulated.sqnrDb);
        const double q = report->metricQuantized ? report->metricQuantized->value : NAN;
        std::printf("%-40s %8.4f %+8.2f %8.3f %9s %10.0f %7.1f\n", spec.substr(0, 40).c_str(), q,
                    !floatMetric                          ? NAN
                    : floatMetric->name == "perplexity" ? 100.0 * (q / floatMetric->value - 1.0)
                                                        : 100.0 * (q - floatMetric->value),
                    static_cast<double>(report->sizeQuantized) /
                        static_cast<double>(report->sizeFloat),
                    dbText(minSqnr).c_str(), report->throughput.quantizedSamplesPerS,
                    report->seconds);
        std::fflush(stdout);
        runs.push_back(exporting::reportToJson(*report));
    }
    if (args.has("--report"))
        if (auto r = writeJson(args.get("--report"), json{{"runs", runs}}); !r)
            return fail(r.error());
    return 0;
}

int cmdSensitivity(const Args& args)
{
    auto scheme = requireScheme(args, "sensitivity MODEL --scheme SCHEME [--calib DATA] "
                                      "[--eval DATA] [--report FILE.json]");
    if (!scheme)
        return fail(scheme.error());
    const std::string spec = args.get("--scheme");
    auto in = loadQuantInputs(args, true, quant::dataSamplesNeeded(*scheme));
    if (!in)
        return fail(in.error());
    Progress progress = stderrProgress(args.has("--quiet"));
    auto prepared = train::prepareScheme(in->model->graph(), *scheme,
                                         in->calib ? &*in->calib : nullptr, progress);
    if (!prepared)
        return fail(prepared.error());
    auto floatMetric = analysis::evaluateMetric(in->model->graph(), *in->eval, in->device);
    if (!floatMetric)
        return fail(floatMetric.error());
    analysis::AnalysisOptions options;
    options.device = in->device;
    auto rows = analysis::sensitivity(in->model->graph(), *prepared, *in->eval, analysisBatch(*in),
                                      options, *floatMetric, progress);
    if (!rows)
        return fail(rows.error());
    std::printf("%s = %.4f in float; each layer quantized alone with %s:\n\n",
                floatMetric->name.c_str(), floatMetric->value, spec.c_str());
    std::printf("%-20s %8s %14s %9s\n", "layer", "metric", "change (points)", "SQNR dB");
    for (const auto& row : *rows)
        std::printf("%-20s %8.4f %+14.2f %9s\n", row.layer.c_str(), row.metric, -100.0 * row.drop,
                    dbText(row.sqnrDb).c_str());
    if (args.has("--report")) {
        json j = exporting::sensitivityToJson(*floatMetric, *rows);
        j["scheme"] = quant::schemeToJson(*scheme);
        j["model"] = {{"path", in->modelArg.path}, {"format", in->model->format()}};
        if (auto r = writeJson(args.get("--report"), j); !r)
            return fail(r.error());
    }
    return 0;
}

int cmdBench(const Args& args)
{
    auto scheme = requireScheme(args, "bench MODEL --scheme SCHEME [--calib DATA] [--batch N] "
                                      "[--device cpu|cuda] [--json]");
    if (!scheme)
        return fail(scheme.error());
    const std::string spec = args.get("--scheme");
    std::int64_t batch = 0;  // set below when --batch is not given
    if (args.has("--batch")) {
        try {
            batch = std::stoll(args.get("--batch"));
        } catch (const std::exception&) {
            batch = 0;
        }
        if (batch < 1)
            return fail(Error::usage("--batch needs a positive number"));
    }
    const bool quiet = args.has("--quiet") || args.has("--json");
    auto modelArg = resolveModel(args.positional[0], quiet);
    if (!modelArg)
        return fail(modelArg.error());
    auto device = parseDevice(args);
    if (!device)
        return fail(device.error());
    auto model = openModel(modelArg->path);
    if (!model)
        return fail(model.error());
    // Real calibration data when there is some (static schemes need it); the timed batch is
    // its first `batch` samples, or uniform noise shaped like the model's input.
    at::Tensor calib;
    const std::string calibPath = args.get("--calib", modelArg->calibData);
    // Token windows are costly ([B, S, vocab] logits): text models time 4 at a time.
    if (batch == 0)
        batch = isTextData(calibPath) ? 4 : 64;
    if (!calibPath.empty()) {
        ModelDataOptions benchData;
        benchData.limit = std::max(batch, scheme->calibSamples);
        if (isTextData(calibPath))
            benchData.limit = scheme->calibSamples == quant::Scheme().calibSamples
                                  ? std::max(batch, kLmCalibWindows)
                                  : std::max(batch, scheme->calibSamples);
        auto data = loadModelData(**model, calibPath, "train", benchData);
        if (!data)
            return fail(data.error());
        calib = data->inputs;
    }
    const auto& inputs = (*model)->summary().inputs;
    at::Tensor x;
    if (calib.defined() && calib.size(0) >= batch) {
        x = calib.slice(0, 0, batch);
    } else {
        if (inputs.size() != 1)
            return fail(Error::unsupported(modelArg->path, "bench needs a model with one input"));
        std::vector<std::int64_t> shape = inputs[0].shape;
        for (auto& d : shape)
            if (d < 0)
                d = batch;
        x = at::rand(shape);
    }
    auto prepared = quant::prepare((*model)->graph(), *scheme, calib);
    if (!prepared)
        return fail(prepared.error());
    analysis::AnalysisOptions options;
    options.device = *device;
    auto t = analysis::measureThroughput(*prepared, x, options);
    if (!t)
        return fail(t.error());
    const json j = exporting::throughputToJson(*t);
    if (args.has("--json")) {
        std::cout << j.dump(2) << "\n";
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
    if (command == "quantize")
        return cmdQuantize(*args);
    if (command == "compare")
        return cmdCompare(*args);
    if (command == "sensitivity")
        return cmdSensitivity(*args);
    if (command == "bench")
        return cmdBench(*args);
    if (command == "tokenize")
        return cmdTokenize(*args);
    if (command == "export")
        return cmdExport(*args);
    std::fprintf(stderr, "error: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
}

} // namespace bitlens::cli

int main(int argc, char** argv)
{
    // Before anything else: LibTorch's OpenMP threads sleep instead of spinning (exec/omp_env.h).
    bitlens::exec::usePassiveOpenMp(argv);
    // Token windows of language models allocate and free hundreds of MB per batch (logits are
    // [B, S, vocab]); keeping freed memory in the heap instead of handing it back to the kernel
    // saves re-faulting it: SmolLM2 perplexity spends ~60 % less system time.
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 256 << 20);
    try {
        return bitlens::cli::dispatch(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: internal failure: %s\n", e.what());
        return 5;
    }
}
