#pragma once
// Learning a byte-level BPE vocabulary from a text, as GPT-2-style tokenizers are trained: the
// text is cut by the GPT-2 pre-tokenizer (ByteLevel with its regex), each piece's bytes become
// GPT-2's printable characters, and the most frequent adjacent pair of symbols, counted over the
// pieces, is merged until the vocabulary has the size asked for. The vocabulary starts with the
// special tokens, then all 256 byte symbols (so every text encodes), then one token per merge.
// The result is written as a Hugging Face tokenizer.json that BitLens's BpeTokenizer and the
// `tokenizers` package both load. Deterministic: ties go to the pair whose (left, right) strings
// sort first. No LibTorch.

#include "text/bpe.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace bitlens::text {

struct BpeTrainOptions {
    std::size_t vocabSize = 2048;                          ///< specials + 256 bytes + merges
    std::vector<std::string> specials = {"<|endoftext|>"};  ///< ids 0, 1, ...; the first is BOS/EOS
    std::size_t minPairCount = 2;                           ///< stop when no pair is this frequent
};

/// Learns the vocabulary of `text`. Fewer merges than asked when the text runs out of pairs
/// that occur minPairCount times. Usage error when vocabSize cannot hold the specials and bytes.
Result<BpeVocab> trainByteLevelBpe(std::string_view text, const BpeTrainOptions& options = {});

/// The Hugging Face tokenizer.json of a trained vocabulary: BPE model (vocab, merges as pairs),
/// ByteLevel pre-tokenizer (GPT-2 regex, no prefix space) and decoder, the specials as added
/// tokens, no post-processor tokens (encode() adds no BOS).
nlohmann::json byteLevelTokenizerJson(const BpeVocab& vocab);

} // namespace bitlens::text
