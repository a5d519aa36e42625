// Shared pieces of bitlens-cli: argument parsing, model/data loading and the commands, one
// function per command. main.cpp holds the usage text and the dispatch table; a new command
// goes in its own cmd_*.cpp with a declaration here and one row in dispatch().
#pragma once

#include "analysis/metrics.h"
#include "analysis/quant_report.h"
#include "io/dataset.h"
#include "jobs/progress.h"
#include "jobs/result.h"
#include "model/model.h"
#include "quant/engine.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bitlens::cli {

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

/// A model argument resolved: the file, and the data its zoo entry brings (if any).
struct ModelArg {
    std::string path;
    std::string calibData;
    std::string evalData;
};

/// Everything a quantization command needs, loaded and checked.
struct QuantInputs {
    ModelArg modelArg;
    std::shared_ptr<Model> model;
    c10::Device device = c10::Device(c10::kCPU);
    std::optional<io::Dataset> calib;
    std::optional<io::Dataset> eval;
    std::string evalPath;
};

Result<Args> parseArgs(int argc, char** argv, int first);
/// Prints the error ("error: <path>: <reason>") and returns its exit code.
int fail(const Error& error);
/// Progress lines on stderr (nothing when quiet).
Progress stderrProgress(bool quiet);
Result<ModelArg> resolveModel(const std::string& arg, bool quiet);
Result<c10::Device> parseDevice(const Args& args);
nlohmann::json shapeJson(const std::vector<std::int64_t>& shape);
std::vector<std::string> splitComma(const std::string& text);
Result<QuantInputs> loadQuantInputs(const Args& args, bool needEval, std::int64_t calibSamples);
/// The batch layer errors and throughput are measured on: evaluation data, else calibration.
at::Tensor analysisBatch(const QuantInputs& in);
/// Prepares and analyzes one scheme; with `keep` set, the quantized model is moved there
/// (for export).
Result<analysis::QuantReport> runScheme(const QuantInputs& in, const std::string& spec,
                                        std::optional<analysis::MetricValue> floatMetric,
                                        bool quiet, quant::QuantizedModel* keep = nullptr);
std::string dbText(double db);
Result<void> writeJson(const std::string& path, const nlohmann::json& j);
/// The front of every single-scheme command: one MODEL and a parseable --scheme.
Result<quant::Scheme> requireScheme(const Args& args, const std::string& usage);

int cmdZoo(const Args& args);
int cmdInfo(const Args& args);
int cmdEval(const Args& args);
int cmdRun(const Args& args);
int cmdQuantize(const Args& args);
int cmdCompare(const Args& args);
int cmdSensitivity(const Args& args);
int cmdBench(const Args& args);
int cmdTokenize(const Args& args);
int cmdExport(const Args& args);
/// `quantize --out FILE` / `export`: writes `model` to `out` (format from `format`, else the
/// extension), verifies it when --verify is given, and adds report["export"]. Returns the exit
/// code (0 ok).
int exportQuantized(const Args& args, const QuantInputs& in, const quant::QuantizedModel& model,
                    nlohmann::json* report);
int dispatch(int argc, char** argv);

} // namespace bitlens::cli
