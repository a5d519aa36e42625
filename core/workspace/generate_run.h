#pragma once
// "What does the quantized LLM say, and how fast?" (issue #39): one prompt continued by the
// float model and by a scheme's quantized model (its real kernels on the decode path), side by
// side: where the two first differ, the KL divergence per token of the quantized model scored
// on the float model's tokens (with the most likely tokens of both there), and prefill / decode
// tokens per second of each. What `bitlens-cli generate` prints and the window's Generate tab
// streams (GenerateObserver); torch-free.

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
    int topTokens = 5;                    ///< most likely tokens kept per scored position (0: none)
};

/// One of the most likely next tokens of a distribution.
struct TokenProbability {
    std::int32_t id = 0;
    std::string token;                    ///< the id as its own text
    double probability = 0.0;             ///< softmax of the logits, in [0, 1]
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
    /// Per float token (parallel to kld): the request's topTokens most likely tokens of the
    /// float model and of the quantized model there, most likely first (a tie: the lower id).
    std::vector<std::vector<TokenProbability>> floatTop;
    std::vector<std::vector<TokenProbability>> quantTop;
};

/// One token as a model of generateCompare picks it.
struct GeneratedToken {
    bool quantized = false;               ///< false: the float model
    std::int64_t index = 0;               ///< in the continuation (0: the first generated token)
    std::int32_t id = 0;
    std::string token;                    ///< the id as its own text
    std::int64_t promptTokens = 0;        ///< positions of the prompt pass
    /// Seconds since this model's prompt pass began: at index 0 the prefill, after it the
    /// prefill and `index` one-token passes.
    double elapsedSeconds = 0.0;
};

/// One float token scored: the quantized model's divergence from the float model there.
struct ScoredToken {
    std::int64_t index = 0;               ///< in the float continuation
    double kld = 0.0;                     ///< GenerateComparison::kld[index], nats
    std::vector<TokenProbability> floatTop;
    std::vector<TokenProbability> quantTop;
};

/// What generateCompare reports while it runs, on its own thread; each member may be empty.
/// Order: the float model's tokens, its Continuation, the quantized model's tokens, its
/// Continuation, then one ScoredToken per float token.
struct GenerateObserver {
    std::function<void(const GeneratedToken&)> onToken;
    /// A model finished: its continuation with the final timing (quantized: kernels too).
    std::function<void(const Continuation&, bool quantized)> onContinuation;
    std::function<void(const ScoredToken&)> onScored;
};

/// The ids that end a generation: eos_token_id (a number or a list) of generation_config.json,
/// else of config.json beside the model, else the tokenizer's end-of-sequence id. A file that
/// is not JSON or a key of the wrong type is BadInput naming the file and the key.
Result<std::vector<std::int32_t>> stopTokenIds(const Model& model);

/// Whether the open model can generate: a language model BitLens decodes with a KV cache
/// (model::checkDecodable) and a tokenizer. Unsupported naming the model and what is missing.
/// Reads the graph only, so it may run while a job uses the workspace.
Result<void> checkGenerate(const Workspace& ws);

/// Continues `request.prompt` with the float model, then with the quantized model of
/// `request.run` (prepared as run() prepares it, after the float continuation, so the first
/// float token comes without waiting for quantization), and scores the quantized model on the
/// float tokens. `observer` sees the tokens and scores as they come. Unsupported for a model
/// that is not a language model BitLens builds (checkGenerate).
Result<GenerateComparison> generateCompare(Workspace& ws, const GenerateRequest& request,
                                           Progress& progress, const CancelToken& cancel,
                                           const GenerateObserver& observer);

/// As above; `onToken` (may be empty) sees each token as it is picked: (false: float, true:
/// quantized; the id).
Result<GenerateComparison> generateCompare(
    Workspace& ws, const GenerateRequest& request, Progress& progress, const CancelToken& cancel,
    const std::function<void(bool quantized, std::int32_t id)>& onToken = {});

/// `generate --json`: {"model", "scheme", "prompt", "prompt_ids", "stop_ids", "max_tokens",
/// "sampling": {"temperature", "top_k", "top_p", "seed"}, "threads", "cpu", "isa", "float" and "quantized":
/// {"label", "ids", "tokens", "text", "stop_reason", "prompt_tokens", "prefill_seconds",
/// "prefill_tokens_per_s", "decode_steps", "decode_seconds", "decode_tokens_per_s"; quantized
/// also "kernels": {layer: kernel}}, "first_divergence" (null: none), "kld": [...],
/// "mean_kld", "max_kld", "top": [{"float": [{"id", "token", "p"}, ...], "quantized": [...]}
/// per float token, parallel to "kld"]}.
nlohmann::json generateToJson(const GenerateComparison& comparison);

} // namespace bitlens::workspace
