#pragma once
// "How many tokens per second will it give me on this machine?" (issue #39): llama-bench's two
// figures for the float model and a scheme's quantized model (its real kernels), batch 1, KV
// cache: pp (one pass over a prompt of N tokens, 512 by default) and tg (N one-token passes,
// 128 by default), each from an empty cache, as `llama-bench -p 512 -n 128` times them. What
// `bitlens-cli bench MODEL --scheme S --decode` prints; torch-free.

#include "jobs/progress.h"
#include "jobs/result.h"
#include "workspace/workspace.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bitlens::workspace {

/// What decodeBench times.
struct DecodeBenchRequest {
    RunRequest run;                  ///< the scheme (and overrides, calibration data)
    std::int64_t promptTokens = 512; ///< pp: tokens of the one prompt pass (llama-bench -p)
    std::int64_t genTokens = 128;    ///< tg: one-token passes (llama-bench -n)
    std::int64_t repetitions = 1;    ///< each test this many times (llama-bench -r)
};

/// pp and tg of one model; tokens per second are the mean over the repetitions of
/// tokens / seconds of each, stddev their sample standard deviation (0 for one), as
/// llama-bench's avg_ts / stddev_ts.
struct DecodeSpeed {
    std::string label;               ///< "float32" or the scheme
    std::int64_t ppTokens = 0;       ///< tokens of each prompt pass
    std::vector<double> ppSeconds;   ///< one per repetition
    double ppTokensPerS = 0.0;
    double ppStddev = 0.0;
    std::int64_t tgTokens = 0;       ///< one-token passes of each repetition
    std::vector<double> tgSeconds;   ///< one per repetition (all its passes)
    double tgTokensPerS = 0.0;
    double tgStddev = 0.0;
};

/// Float and quantized pp / tg of one scheme.
struct DecodeBench {
    std::string modelPath;
    std::string scheme;
    int threads = 0;                 ///< intra-op threads the runs used
    std::string cpu;                 ///< the CPU's model name
    std::string isa;                 ///< ISA level of BitLens's own kernels in force
    std::string cpuIsa;              ///< the highest level the CPU has
    std::string isaNote;             ///< why the two differ (BITLENS_ISA), or empty
    std::int64_t repetitions = 1;
    DecodeSpeed floatRun;
    DecodeSpeed quantRun;
    std::map<std::string, std::string> kernels; ///< quantized layer -> what computed it
};

/// Times pp and tg (after one warm-up pass each) of the float model and of the quantized
/// model of `request.run`, prepared as run() prepares it. The tokens are pseudo-random ids of
/// the vocabulary from a fixed seed (as llama-bench's), the same for both models. A count
/// below 1, or a pass longer than the model's context length, is a usage error; a model that
/// is not a language model BitLens builds is Unsupported.
Result<DecodeBench> decodeBench(Workspace& ws, const DecodeBenchRequest& request,
                                Progress& progress, const CancelToken& cancel);

/// `bench --decode --json`: {"model", "scheme", "threads", "cpu", "isa", "cpu_isa",
/// "isa_note", "repetitions", "float" and "quantized": {"label", "pp_tokens", "pp_seconds"
/// [per repetition], "pp_tokens_per_s", "pp_stddev", "tg_tokens", "tg_seconds",
/// "tg_tokens_per_s", "tg_stddev"}; quantized also "kernels": {layer: kernel}},
/// "pp_ratio", "tg_ratio" (quantized / float tokens per second)}.
nlohmann::json decodeBenchToJson(const DecodeBench& bench);

} // namespace bitlens::workspace
