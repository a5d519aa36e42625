#pragma once
// char-lstm: a character-level LSTM language model (embedding -> 2-layer LSTM -> linear to the
// alphabet) that BitLens trains itself, through its own executor and LibTorch autograd, on the
// King James Bible text (Old Testament; the New Testament is held out for evaluation).

#include "ir/graph.h"
#include "jobs/progress.h"
#include "jobs/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>

namespace bitlens::zoo {

/// Size of char-lstm's alphabet: id 0 = any other character, 1 = '\n', 2..96 = ' '..'~'.
inline constexpr std::int64_t kCharLstmVocab = 97;

/// Training settings of char-lstm (a fixed number of steps, so a build is reproducible).
struct CharLstmRecipe {
    std::int64_t embedding = 64;    ///< embedding width
    std::int64_t hidden = 256;      ///< LSTM hidden size
    std::int64_t layers = 2;
    std::int64_t seqLen = 64;       ///< characters per training window (plus the target shift)
    std::int64_t batchSize = 32;
    std::int64_t steps = 300;       ///< optimizer steps (~614k characters seen)
    double learningRate = 5e-3;     ///< Adam, cosine-decayed to 0 over the steps
    double clipNorm = 1.0;          ///< gradients are scaled down to this global L2 norm
    std::uint64_t seed = 20261201;
};

/// Character ids of a text (int64 [n]): see kCharLstmVocab; bytes outside ASCII are one id 0
/// each.
at::Tensor encodeChars(std::string_view text);

/// `count` consecutive, non-overlapping windows of `seqLen` ids from the start of `ids`
/// (int64 [count, seqLen]); fewer when the text is shorter.
at::Tensor charWindows(const at::Tensor& ids, std::int64_t seqLen, std::int64_t count);

/// The untrained network: input "input_ids" int64 [B, S], output "logits" [B, S, vocab];
/// weights initialised from `recipe.seed` as torch.nn initialises Embedding / LSTM / Linear.
/// Metadata task "sequence" (its metric is output agreement with the float model).
ir::Graph makeCharLstm(const CharLstmRecipe& recipe);

/// What training did.
struct CharLstmTraining {
    double finalLoss = 0.0;  ///< mean cross-entropy (nats per character) of the last 50 steps
    double seconds = 0.0;
};

/// Trains `graph` in place on random windows of `ids` (int64 [n], the training text).
Result<CharLstmTraining> trainCharLstm(ir::Graph& graph, const at::Tensor& ids,
                                       const CharLstmRecipe& recipe, Progress& progress,
                                       const CancelToken& cancel);

/// Next-character accuracy of a model over windows [N, S]: the fraction of positions 0..S-2
/// whose arg-max logit is the character that follows.
Result<double> nextCharAccuracy(const ir::Graph& graph, const at::Tensor& windows);

} // namespace bitlens::zoo
