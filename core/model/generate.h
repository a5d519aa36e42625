#pragma once
// Text generation with a KV cache (issue #39): a decoder that runs a language-model graph of
// hf_builders (llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3, gpt2, from HF folders or
// GGUF) one prompt, then one token at a time, reusing the keys and values of earlier positions,
// and a sampler (greedy, temperature, top-k, top-p with a seed). No LibTorch in this header.
//
// Design: the graph is not changed. The decoder runs it with the executor and one more hook
// (KV cache) that rewrites a few values by their builder names:
//   "positions"                   0..S-1       -> past..past+S-1 (rotary, GPT-2's wpe)
//   "causal_mask.cols",           key positions 0..S-1 -> 0..past+S-1, so the causal (and
//   "sliding_mask.cols"           sliding-window) mask is [S, past+S]
//   "layer.N.attn.k_groups",      K / V of the new positions (after rotary) -> the cached
//   "layer.N.attn.v_groups"       ones followed by them, [B, kvHeads, 1, past+S, headDim]
// so every other hook (the quantized model's real kernels, RealKernelHook) runs unchanged on
// the decode path, and one prompt pass computes what the full-window graph computes.

#include "jobs/progress.h"
#include "jobs/result.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace bitlens::ir {
class Graph;
}
namespace bitlens::exec {
class NodeHook;
}

namespace bitlens::model {

/// How the next token is picked from the logits of the last position.
struct SamplingOptions {
    double temperature = 0.0; ///< 0: greedy (argmax, the lowest id on a tie); else logits / T
    std::int64_t topK = 0;    ///< keep the K most likely tokens (0: all)
    double topP = 1.0;        ///< keep the most likely tokens whose probabilities sum to >= P
    std::uint64_t seed = 0;   ///< seed of the random stream (std::mt19937_64)
};

/// Picks tokens from logits as SamplingOptions say; one random draw per sampled token, so two
/// samplers with one seed walk the same stream.
class Sampler {
public:
    explicit Sampler(SamplingOptions options);
    /// The next token id from the logits [vocab] of the last position.
    std::int32_t next(std::span<const float> logits);

private:
    SamplingOptions m_options;
    std::mt19937_64 m_rng;
};

/// Whether `graph` can be decoded with a KV cache: a language model (metadata task "lm") of
/// hf_builders with one input, "positions" and every layer's k / v groups. Unsupported naming
/// `path` and what is missing otherwise.
Result<void> checkDecodable(const ir::Graph& graph, const std::string& path);

/// Runs a language-model graph position by position with a KV cache (CPU, batch 1).
/// Not thread-safe; the graph and the hooks must outlive it.
class Decoder {
public:
    /// A decoder on `graph` with `hooks` attached before the cache (e.g. the quantized model's
    /// RealKernelHook). Fails as checkDecodable does.
    static Result<std::unique_ptr<Decoder>>
    create(const ir::Graph& graph, std::vector<std::shared_ptr<exec::NodeHook>> hooks,
           const std::string& path);
    ~Decoder();

    /// Runs `ids` after the positions already cached (the first call: the prompt) and caches
    /// them. Returns the logits of the last of them [vocab], or with `allPositions` of each of
    /// them, row after row [ids.size() * vocab]. An empty `ids`, an id outside the vocabulary
    /// or a position past the context length is BadInput; a failed run leaves the cache as it
    /// was.
    Result<std::vector<float>> append(std::span<const std::int32_t> ids, bool allPositions = false);
    /// Positions cached so far.
    std::int64_t position() const;
    /// Logits per position.
    std::int64_t vocabSize() const;
    /// The graph's context length (metadata "context_length"; 0 when it does not say).
    std::int64_t contextLength() const;
    /// Forgets every cached position.
    void reset();

private:
    Decoder();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

/// What generate() does.
struct GenerateOptions {
    std::int64_t maxTokens = 64;         ///< tokens to generate at most (>= 1)
    SamplingOptions sampling;            ///< greedy by default
    std::vector<std::int32_t> stopIds;   ///< ids that end the generation (kept as its last id)
    bool keepLogits = false;             ///< keep the logits each token was picked from
};

/// One generation and its timing.
struct Generation {
    std::vector<std::int32_t> ids;       ///< generated ids (a stop id included)
    std::string stopReason;              ///< "stop_token", "max_tokens" or "context_length"
    std::int64_t promptTokens = 0;       ///< positions of the prompt pass
    double prefillSeconds = 0.0;         ///< the prompt pass (gives the first token)
    std::int64_t decodeSteps = 0;        ///< one-token passes after it (ids.size() - 1)
    double decodeSeconds = 0.0;          ///< all of them
    std::vector<std::vector<float>> logits; ///< with keepLogits: [ids.size()][vocab]

    /// Prompt tokens per second of the prompt pass (0 when not timed).
    double prefillTokensPerS() const;
    /// Generated tokens per second of the one-token passes (0 when none ran).
    double decodeTokensPerS() const;
};

/// Generates after `prompt` from a fresh cache (the decoder is reset first): one prompt pass,
/// then one pass per token until maxTokens, a stop id or the context length. `onToken` (may be
/// empty) sees each id as it is picked. Cancelled: Error::cancelled().
Result<Generation> generate(Decoder& decoder, std::span<const std::int32_t> prompt,
                            const GenerateOptions& options,
                            const std::function<void(std::int32_t)>& onToken = {},
                            const CancelToken& cancel = CancelToken());

/// KL(p || q) in nats of the distributions softmax(p), softmax(q) of two logit rows.
double klDivergence(std::span<const float> pLogits, std::span<const float> qLogits);

} // namespace bitlens::model
