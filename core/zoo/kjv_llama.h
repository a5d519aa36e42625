#pragma once
// kjv-llama: a small Llama (LlamaForCausalLM: RMSNorm, rope, grouped-query attention, SwiGLU,
// tied embeddings) that BitLens trains itself on the Old Testament of the King James Bible,
// with a byte-level BPE tokenizer it learns from the same text. It is the zoo's float language
// model: every LLM scheme is measured against a float32 baseline (smollm2-135m's is already
// 4-bit). The model is a Hugging Face folder (config.json, model.safetensors in float32,
// tokenizer.json), so BitLens opens it as any HF llama and transformers loads it too.

#include "jobs/progress.h"
#include "jobs/result.h"

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace bitlens::zoo {

/// The network and its training settings (fixed steps and seed: a build is reproducible on one
/// machine and LibTorch version).
struct KjvLlamaRecipe {
    std::int64_t vocab = 2048;         ///< byte-level BPE: <|endoftext|>, 256 bytes, 1791 merges
    std::int64_t hidden = 256;
    std::int64_t layers = 4;
    std::int64_t heads = 4;            ///< head_dim 64
    std::int64_t kvHeads = 2;          ///< grouped-query attention, as Llama 3 and SmolLM2
    std::int64_t intermediate = 768;   ///< SwiGLU width
    std::int64_t seqLen = 256;         ///< tokens per training window (plus the target shift);
                                       ///< also the config's max_position_embeddings, so the
                                       ///< app's windows never outrun what the model learned
    std::int64_t batchSize = 8;
    std::int64_t steps = 600;
    std::int64_t warmupSteps = 30;     ///< linear warm-up, then cosine decay to 10 %
    double learningRate = 3e-3;        ///< Adam peak
    double clipNorm = 1.0;             ///< global L2 norm of the gradients
    double initStd = 0.02;             ///< HF initializer_range
    std::uint64_t seed = 20261203;
};

/// The model's config.json (model_type llama, float32, tie_word_embeddings, context seqLen).
nlohmann::json kjvLlamaConfig(const KjvLlamaRecipe& recipe);

/// The untrained parameters by Hugging Face name (model.embed_tokens.weight, model.layers.N.
/// self_attn.q_proj.weight [out, in], ...), float32: N(0, initStd) for the projections and the
/// embedding, ones for the norms, as transformers initialises LlamaForCausalLM.
std::map<std::string, at::Tensor> initKjvLlama(const KjvLlamaRecipe& recipe);

struct KjvLlamaTraining {
    double finalLoss = 0.0;   ///< mean cross-entropy (nats per token) of the last 50 steps
    double firstLoss = 0.0;   ///< mean of the first 10 steps
    double seconds = 0.0;
};

/// Trains `weights` in place (next-token cross-entropy over random windows of `ids`, int64 [n])
/// through BitLens's own executor: the graph is the one buildFromHfConfig builds for `config`,
/// its initializers views of `weights`, so the gradients reach them. Cancel works between steps.
Result<KjvLlamaTraining> trainKjvLlama(std::map<std::string, at::Tensor>& weights,
                                       const nlohmann::json& config, const at::Tensor& ids,
                                       const KjvLlamaRecipe& recipe, Progress& progress,
                                       const CancelToken& cancel);

} // namespace bitlens::zoo
