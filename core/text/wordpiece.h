#pragma once
// BERT's WordPiece tokenizer (vocab.txt or a tokenizer.json with a WordPiece model), as Hugging
// Face tokenizers runs it: BertNormalizer (clean text, pad CJK ideographs, strip accents by NFD
// + dropping Mn, lower case), BertPreTokenizer (split on whitespace, isolate punctuation), then
// greedy longest-match-first WordPiece with a "##" continuation prefix. No LibTorch.

#include "text/tokenizer.h"

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bitlens::text {

/// BertNormalizer and WordPiece settings.
struct WordPieceOptions {
    bool cleanText = true;              ///< drop control characters, map whitespace to ' '
    bool handleChineseChars = true;     ///< put spaces around CJK ideographs
    bool lowercase = true;              ///< do_lower_case
    std::optional<bool> stripAccents;   ///< unset: same as lowercase (BERT's default)
    std::string unkToken = "[UNK]";
    std::string continuingPrefix = "##";
    std::size_t maxInputCharsPerWord = 100; ///< longer words become [UNK]
};

/// A WordPiece tokenizer.
class WordPieceTokenizer final : public Tokenizer {
public:
    /// From the lines of a vocab.txt (id = line number); [CLS] text [SEP] framing and the usual
    /// special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]) when they are in the vocabulary.
    static Result<std::unique_ptr<WordPieceTokenizer>> fromVocabText(
        std::string_view vocabText, const std::string& path, const WordPieceOptions& options = {});
    /// From a parsed tokenizer.json whose model is WordPiece.
    static Result<std::unique_ptr<WordPieceTokenizer>> fromTokenizerJson(
        const nlohmann::json& root, const std::string& path);
    /// From a token list (id = index).
    static Result<std::unique_ptr<WordPieceTokenizer>> fromTokens(
        std::vector<std::string> tokens, const std::string& path,
        const WordPieceOptions& options = {});

    std::string kind() const override { return "wordpiece"; }
    std::size_t vocabSize() const override { return m_tokens.size(); }
    std::optional<std::int32_t> tokenId(std::string_view token) const override;
    std::string tokenText(std::int32_t id) const override;
    /// Joins tokens with spaces, glues "##" pieces, then HF's cleanup (" ." -> ".", " n't").
    std::string decode(std::span<const std::int32_t> ids, bool skipSpecial = true) const override;

    const WordPieceOptions& options() const { return m_options; }
    /// BertNormalizer on its own (for tests and the CLI's --json): the normalized text.
    std::string normalize(std::string_view text) const;

protected:
    void encodePiece(std::string_view piece, std::vector<std::int32_t>& ids) const override;

private:
    WordPieceTokenizer() = default;
    Result<void> init(std::vector<std::string> tokens, const std::string& path);
    std::u32string normalizeCodePoints(std::string_view text) const;
    void wordPiece(std::u32string_view word, std::vector<std::int32_t>& ids) const;

    struct Hash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const
        {
            return std::hash<std::string_view>{}(s);
        }
    };
    WordPieceOptions m_options;
    std::vector<std::string> m_tokens;
    std::unordered_map<std::string, std::int32_t, Hash, std::equal_to<>> m_vocab;
    std::int32_t m_unkId = -1;
};

} // namespace bitlens::text
