// Shared pieces of bitlens-cli: argument parsing (cli_args.cpp), output (cli_output.cpp) and
// one function per command, each in its own cmd_*.cpp and a thin caller of core/workspace.
// main.cpp holds the usage text and the dispatch table; a new command goes in its own
// cmd_*.cpp with a declaration here and one row in dispatch().
#pragma once

#include "io/file_util.h"
#include "jobs/progress.h"
#include "jobs/result.h"
#include "workspace/workspace.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
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

// cli_args.cpp
Result<Args> parseArgs(int argc, char** argv, int first);
/// --device cpu|cuda, checked (cuda: a device must be there).
Result<std::string> parseDevice(const Args& args);
/// `text` split at commas, empty parts dropped.
std::vector<std::string> splitComma(const std::string& text);
/// --schemes split at commas, keeping a scheme's own options together.
std::vector<std::string> splitSchemes(const std::string& text);
/// The front of every single-scheme command: one MODEL and a parseable --scheme.
Result<void> requireScheme(const Args& args, const std::string& usage);
/// --NAME as a number (`fallback` when absent); Usage error "--NAME needs ..." otherwise.
Result<std::int64_t> numberFlag(const Args& args, const std::string& flag, std::int64_t fallback,
                                bool positive);
/// A MODEL argument resolved (a zoo name is built when missing, saying so unless `quiet`).
Result<workspace::ModelSource> resolveModelArg(const std::string& arg, bool quiet);
/// The model of positional[0] in a workspace on the --device (a zoo name is built when
/// missing, saying so on stderr unless `quiet`).
Result<std::unique_ptr<workspace::Workspace>> openWorkspace(const Args& args, bool quiet);
/// The run the flags describe: --scheme, --calib / --eval (else the zoo model's own),
/// --limit, --seq-len, --tokens. `needEval`: Usage error without evaluation data; without any
/// data a Usage error says how to give some.
Result<workspace::RunRequest> runRequest(const Args& args, const workspace::Workspace& ws,
                                         bool needEval);
/// Checks before any work that the command's outputs can be written (io::checkWritable): --report
/// as a file, --out as `outKind`. Otherwise io::checkWritable's error naming the path (exit 3
/// for a missing folder, 5 for a target that cannot be written or replaced).
Result<void> checkOutputs(const Args& args, io::OutputKind outKind = io::OutputKind::File);
/// What `export` and `quantize --out` write to --out: a file, or for safetensors (--format,
/// else the extension) a file or a model folder.
io::OutputKind exportOutKind(const Args& args);

// cli_output.cpp
/// Prints the error ("error: <path>: <reason>") and returns its exit code.
int fail(const Error& error);
/// Progress lines on stderr (nothing when quiet).
Progress stderrProgress(bool quiet);
/// A shape as JSON: dynamic dimensions as "N".
nlohmann::json shapeJson(const std::vector<std::int64_t>& shape);
/// SQNR in dB as the tables print it ("exact" for a lossless layer).
std::string dbText(double db);
/// One run as `quantize` prints it.
void printReport(const analysis::QuantReport& report);
/// The "exported ..." lines of `quantize --out` and `export`.
void printExported(const workspace::Exported& exported);

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
/// `generate`: float and quantized continuations of a prompt side by side
/// (workspace/generate_run.h).
int cmdGenerate(const Args& args);
/// `plan`: memory per part and the accelerators that hold it (analysis/planner.h).
int cmdPlan(const Args& args);
/// `quantize --out FILE` / `export`: writes the quantized model of `run` to --out (format from
/// --format, else the extension), verifies it when --verify is given, and adds
/// report["export"]. Returns the exit code (0 ok).
int exportQuantized(const Args& args, workspace::Workspace& ws, const workspace::RunRequest& run,
                    nlohmann::json* report);
int dispatch(int argc, char** argv);

} // namespace bitlens::cli
