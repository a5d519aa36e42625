#pragma once
// Tokenizers for language models: the common interface of WordPiece (BERT) and byte-level BPE
// (GPT-2, Llama 3, SmolLM2), and the loader that picks one for a file. Their ids match the
// Hugging Face `tokenizers` package (golden tests in tests/e2e/test_tokenize.sh). No LibTorch.
//
// encode() follows the Hugging Face pipeline: the text is first split on added tokens
// ([CLS], <|im_start|>, ...), each piece between them is normalized, pre-tokenized and run
// through the model, then the sequence is truncated, framed by the post-processor's special
// tokens and padded.

#include "jobs/result.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bitlens::io {
class GgufFile;
}

namespace bitlens::text {

/// Token ids of one text.
struct Encoding {
    std::vector<std::int32_t> ids;           ///< token ids, special tokens included
    std::vector<std::string> tokens;         ///< the vocabulary string of each id ("##ing", "Ġthe")
    std::vector<std::uint8_t> attentionMask; ///< 1 for a real token, 0 for padding
    std::vector<std::uint8_t> special;       ///< 1 for a special token ([CLS], [PAD], <|im_end|>)

    std::size_t size() const { return ids.size(); }
};

/// How encode() frames a text.
struct EncodeOptions {
    bool addSpecialTokens = true; ///< the post-processor's tokens ([CLS] ... [SEP] for BERT)
    std::size_t maxLength = 0;    ///< truncate to this many ids, special tokens included; 0: none
    std::size_t padTo = 0;        ///< pad with the pad token up to this length; 0: no padding
};

/// A token the text is split on before anything else (HF "added_tokens").
struct AddedToken {
    std::string content;     ///< exact text, e.g. "[CLS]" or "<|im_start|>"
    std::int32_t id = 0;     ///< its id
    bool special = true;     ///< skipped by decode(skipSpecial = true)
    bool lstrip = false;     ///< also swallows the whitespace on its left
    bool rstrip = false;     ///< also swallows the whitespace on its right
    bool singleWord = false; ///< only matches when not inside a word
};

/// Ids a post-processor puts around the text ([CLS] $A [SEP], <|begin_of_text|> $A).
struct SpecialFrame {
    std::vector<std::int32_t> prefix;
    std::vector<std::int32_t> suffix;
};

/// A loaded tokenizer. Thread-safe for concurrent encode()/decode() calls.
class Tokenizer {
public:
    virtual ~Tokenizer() = default;

    /// "wordpiece" or "bpe".
    virtual std::string kind() const = 0;
    /// Number of ids (the largest id + 1, added tokens included).
    virtual std::size_t vocabSize() const = 0;
    /// The id of a vocabulary string or added token.
    virtual std::optional<std::int32_t> tokenId(std::string_view token) const = 0;
    /// The string of an id ("" for an id outside the vocabulary).
    virtual std::string tokenText(std::int32_t id) const = 0;
    /// Text of a sequence of ids, special tokens skipped when `skipSpecial`.
    virtual std::string decode(std::span<const std::int32_t> ids,
                               bool skipSpecial = true) const = 0;

    /// Tokenizes a UTF-8 text (invalid bytes read as U+FFFD).
    Encoding encode(std::string_view text, const EncodeOptions& options = {}) const;

    /// The padding id ([PAD], else the model's pad/eos token, else 0).
    std::int32_t padId() const { return m_padId; }
    /// The beginning-of-sequence id of language models, when they have one.
    std::optional<std::int32_t> bosId() const { return m_bosId; }
    /// The end-of-sequence id of language models, when they have one.
    std::optional<std::int32_t> eosId() const { return m_eosId; }
    /// The added tokens, in the order they were declared.
    const std::vector<AddedToken>& addedTokens() const { return m_added; }
    /// The special tokens encode() adds around a text.
    const SpecialFrame& frame() const { return m_frame; }
    /// True when `id` is an added special token.
    bool isSpecial(std::int32_t id) const;

protected:
    /// Appends the ids of a text piece that holds no added token (normalize, pre-tokenize, model).
    virtual void encodePiece(std::string_view piece, std::vector<std::int32_t>& ids) const = 0;
    /// Sets the added tokens; they must already have ids.
    void setAddedTokens(std::vector<AddedToken> added);

    std::int32_t m_padId = 0;
    std::optional<std::int32_t> m_bosId;
    std::optional<std::int32_t> m_eosId;
    SpecialFrame m_frame;

private:
    /// Splits on added tokens: appends (piece, -1) for plain text and ("", id) for a token.
    void splitOnAdded(std::string_view text,
                      std::vector<std::pair<std::string_view, std::int32_t>>& out) const;

    std::vector<AddedToken> m_added;
    std::vector<std::vector<std::size_t>> m_addedByFirstByte; ///< candidates, longest first
    std::vector<std::int32_t> m_specialIds;                   ///< sorted
};

/// Opens a tokenizer: a tokenizer.json (WordPiece or BPE model), a BERT vocab.txt (lower case
/// unless a tokenizer_config.json beside it says do_lower_case false), a GGUF model file (its
/// tokenizer.ggml.* keys, see loadGgufTokenizer), or a folder holding a tokenizer.json or
/// vocab.txt (tokenizer.json preferred).
Result<std::unique_ptr<Tokenizer>> loadTokenizer(const std::string& path);

/// The byte-level BPE tokenizer stored in an opened GGUF file: tokenizer.ggml.model "gpt2",
/// tokens, merges, token_type, pre, bos/eos/padding_token_id, add_bos/add_eos_token. A GGUF
/// without tokenizer.ggml.tokens is BadInput; another tokenizer model (SentencePiece "llama",
/// "bert", ...) is Unsupported, naming it.
Result<std::unique_ptr<Tokenizer>> loadGgufTokenizer(const io::GgufFile& file);

/// Reads a tokenizer.json or vocab.txt no bigger than this (256 MiB).
inline constexpr std::uint64_t kMaxTokenizerFileBytes = 256ull << 20;
/// Refuses vocabularies with more entries than this.
inline constexpr std::size_t kMaxVocabSize = 4u << 20;

} // namespace bitlens::text
