#pragma once
// Pieces of a Hugging Face tokenizer.json that WordPiece and BPE share: the added tokens and
// the post-processor (which special tokens frame a single sequence).

#include "jobs/result.h"
#include "text/tokenizer.h"

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <string>
#include <vector>

namespace bitlens::text::hf {

/// "added_tokens": [{id, content, special, lstrip, rstrip, single_word}]; ids below
/// kMaxVocabSize, contents not empty.
Result<std::vector<AddedToken>> parseAddedTokens(const nlohmann::json& root,
                                                 const std::string& path);

/// "post_processor": TemplateProcessing (single), BertProcessing, RobertaProcessing, ByteLevel
/// (no tokens) or a Sequence of them; null gives an empty frame. `lookup` maps a token string
/// to its id.
Result<SpecialFrame> parsePostProcessor(
    const nlohmann::json& root, const std::string& path,
    const std::function<std::optional<std::int32_t>(const std::string&)>& lookup);

} // namespace bitlens::text::hf
