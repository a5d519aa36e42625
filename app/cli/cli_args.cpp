// bitlens-cli's argument parsing: flags, numbers, the model argument and the run they describe.

#include "cli.h"

#include "exec/device.h"
#include "quant/scheme.h"
#include "zoo/zoo.h"

#include <cctype>
#include <cstdio>
#include <exception>

namespace bitlens::cli {

namespace {

const std::map<std::string, bool> kFlagTakesValue = {
    {"--json", false}, {"--data", true},   {"--limit", true}, {"--device", true},
    {"--input", true}, {"--out", true},    {"--batch", true}, {"--quiet", false},
    {"--scheme", true}, {"--schemes", true}, {"--calib", true}, {"--eval", true},
    {"--report", true}, {"--format", true}, {"--verify", false}, {"--text", true},
    {"--epochs", true}, {"--lr", true},    {"--steps", true}, {"--seq-len", true},
    {"--tokens", true}, {"--project", true}, {"--no-special", false},
    {"--precision", true}, {"--kv-precision", true}, {"--act-precision", true},
    {"--use", true}, {"--context", true}, {"--gpu", true}, {"--cards", true},
    {"--list", false}, {"--rank", true}, {"--checkpointing", false}, {"--by", true},
    {"--layers", true}, {"--estimate", false}, {"--help", false},
    {"--prompt", true}, {"--max-tokens", true}, {"--seed", true}, {"--temperature", true},
    {"--top-k", true}, {"--top-p", true}, {"--engine", true},
    {"--decode", false}, {"--prompt-tokens", true}, {"--gen-tokens", true},
    {"--repetitions", true},
};

} // namespace

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

Result<void> checkOutputs(const Args& args, io::OutputKind outKind)
{
    if (args.has("--out"))
        if (auto r = io::checkWritable(args.get("--out"), outKind); !r)
            return r.error();
    if (args.has("--report"))
        if (auto r = io::checkWritable(args.get("--report")); !r)
            return r.error();
    return {};
}

io::OutputKind exportOutKind(const Args& args)
{
    auto format = args.has("--format") ? Result<std::string>(args.get("--format"))
                                        : workspace::exportFormatOfPath(args.get("--out"));
    std::string name = format ? *format : std::string();
    for (char& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name == "safetensors" ? io::OutputKind::FileOrFolder : io::OutputKind::File;
}

Result<std::string> parseDevice(const Args& args)
{
    const std::string name = args.get("--device", "cpu");
    if (name == "cpu")
        return name;
    if (name == "cuda") {
        if (!exec::cudaAvailable())
            return Error::runtime("--device cuda: no CUDA device is available in this build or "
                                  "on this machine");
        return name;
    }
    return Error::usage("--device must be cpu or cuda, not '" + name + "'");
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

Result<void> requireScheme(const Args& args, const std::string& usage)
{
    if (args.positional.size() != 1 || !args.has("--scheme"))
        return Error::usage("usage: bitlens-cli " + usage);
    return workspace::checkScheme(args.get("--scheme"));
}

Result<std::int64_t> numberFlag(const Args& args, const std::string& flag, std::int64_t fallback,
                                bool positive)
{
    if (!args.has(flag))
        return fallback;
    std::int64_t value = 0;
    try {
        value = std::stoll(args.get(flag));
    } catch (const std::exception&) {
        if (!positive)
            return Error::usage(flag + " needs a number");
        value = 0;
    }
    if (positive && value < 1)
        return Error::usage(flag + " needs a positive number");
    return value;
}

namespace {

/// Says on stderr that a zoo model is being built (it takes minutes the first time).
std::function<void(const std::string&)> sayBuilding(bool quiet)
{
    return [quiet](const std::string& name) {
        if (!quiet)
            std::fprintf(stderr, "building zoo model %s (first use; cached in %s)\n",
                         name.c_str(), zoo::cacheDir().c_str());
    };
}

} // namespace

Result<workspace::ModelSource> resolveModelArg(const std::string& arg, bool quiet)
{
    Progress progress = stderrProgress(quiet);
    return workspace::resolveModel(arg, progress, CancelToken(), sayBuilding(quiet));
}

Result<std::unique_ptr<workspace::Workspace>> openWorkspace(const Args& args, bool quiet)
{
    auto device = parseDevice(args);
    if (!device)
        return device.error();
    Progress progress = stderrProgress(quiet);
    workspace::WorkspaceOptions options;
    options.device = *device;
    return workspace::open(args.positional[0], progress, CancelToken(), options,
                           sayBuilding(quiet));
}

Result<workspace::RunRequest> runRequest(const Args& args, const workspace::Workspace& ws,
                                         bool needEval)
{
    workspace::RunRequest request;
    request.scheme = args.get("--scheme");
    auto own = workspace::zooData(ws);
    if (!own)
        return own.error();
    request.calibPath = args.get("--calib", own->calibData);
    request.evalPath = args.get("--eval", own->evalData);
    if (needEval && request.evalPath.empty())
        return Error::usage("give evaluation data with --eval DATA (a zoo model brings its own)");
    if (request.calibPath.empty() && request.evalPath.empty())
        return Error::usage("give data with --calib DATA or --eval DATA (layer errors are "
                            "measured on real samples)");
    auto limit = numberFlag(args, "--limit", 0, false);
    if (!limit)
        return limit.error();
    request.evalLimit = *limit;
    auto seqLen = numberFlag(args, "--seq-len", 0, true);
    if (!seqLen)
        return seqLen.error();
    request.seqLen = *seqLen;
    auto tokens = numberFlag(args, "--tokens", 0, true);
    if (!tokens)
        return tokens.error();
    request.evalTokens = *tokens;
    return request;
}

} // namespace bitlens::cli
