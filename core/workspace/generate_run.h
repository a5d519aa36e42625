#pragma once
// "What does the quantized LLM say, and how fast?" (issue #39): one prompt continued by the
// float model and by a scheme's quantized model (its real kernels on the decode path), side by
// side: where the two first differ, the KL divergence per token of the quantized model scored
// on the float model's tokens, and prefill / decode tokens per second of each. What
// `bitlens-cli generate` prints; torch-free, for the window's Generate tab to come.

#include "jobs/progress.h"
#include "jobs/result.h"
#include "model/generate.h"
#include "workspace/workspace.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bitlens::workspace {

/// What generateCompare runs.
struct GenerateRequest {
    RunRequest run;                       ///< the scheme (and overrides, calibration data)
    std::string prompt;                   ///< the prompt text, encoded by the model's tokenizer
    model::GenerateOptions options;       ///< tokens, sampling, seed (stopIds: stopTokenIds())
};

/// One model's continuation.
struct Continuation {
    std::string label;                    ///< "float32" or the scheme
    std::vector<std::int32_t> ids;        ///< generated ids (a stop id included)
    std::vector<std::string> tokens;      ///< each id as its own text
    std::string text;                     ///< the ids decoded, special tokens skipped
    std::string stopReason;               ///< model::Generation::stopReason
    std::int64_t promptTokens = 0;
    double prefillSeconds = 0.0;
    double prefillTokensPerS = 0.0;
    std::int64_t decodeSteps = 0;
    double decodeSeconds = 0.0;
    double decodeTokensPerS = 0.0;
    std::map<std::string, std::string> kernels; ///< layer -> what computed it (quantized only)
};

/// Float and quantized continuations of one prompt.
struct GenerateComparison {
    std::string modelPath;
    std::string scheme;
    std::string prompt;
    std::vector<std::int32_t> promptIds;
    std::vector<std::int32_t> stopIds;
    model::GenerateOptions options;
    int threads = 0;                      ///< intra-op threads the runs used
    std::string cpu;                      ///< the CPU's model name
    std::string isa;                      ///< ISA level of BitLens's own kernels ("avx512-vnni")
    Continuation floatRun;
    Continuation quantRun;
    /// Index of the first generated token where the two differ (a continuation that stops
    /// earlier differs where it ends); nullopt when they are equal.
    std::optional<std::int64_t> firstDivergence;
    /// Per float token: KL(float || quantized) of the distributions it was picked from, the
    /// quantized model reading the prompt and the float tokens before it.
    std::vector<double> kld;
    double meanKld = 0.0;
    double maxKld = 0.0;
};

/// The ids that end a generation: eos_token_id (a number or a list) of generation_config.json,
/// else of config.json beside the model, else the tokenizer's end-of-sequence id. A file that
/// is not JSON or a key of the wrong type is BadInput naming the file and the key.
Result<std::vector<std::int32_t>> stopTokenIds(const Model& model);

/// Continues `request.prompt` with the float model and with the quantized model of
/// `request.run` (prepared as run() prepares it), and scores the quantized model on the float
/// tokens. `onToken` (may be empty) sees each token as it is picked: (false: float, true:
/// quantized; the id). Unsupported for a model that is not a language model BitLens builds.
Result<GenerateComparison> generateCompare(
    Workspace& ws, const GenerateRequest& request, Progress& progress, const CancelToken& cancel,
    const std::function<void(bool quantized, std::int32_t id)>& onToken = {});

/// `generate --json`: {"model", "scheme", "prompt", "prompt_ids", "stop_ids", "max_tokens",
/// "sampling": {"temperature", "top_k", "top_p", "seed"}, "threads", "cpu", "isa", "float" and "quantized":
/// {"label", "ids", "tokens", "text", "stop_reason", "prompt_tokens", "prefill_seconds",
/// "prefill_tokens_per_s", "decode_steps", "decode_seconds", "decode_tokens_per_s"; quantized
/// also "kernels": {layer: kernel}}, "first_divergence" (null: none), "kld": [...],
/// "mean_kld", "max_kld"}.
nlohmann::json generateToJson(const GenerateComparison& comparison);

} // namespace bitlens::workspace
