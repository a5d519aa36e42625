#pragma once
// Byte-level BPE (GPT-2, Llama 3, SmolLM2, Qwen2), as Hugging Face tokenizers runs it: added
// tokens split first; pre-tokenizers (a Split on one of the known regexes, Digits, ByteLevel
// with the GPT-2 regex) cut the text into pieces; each piece's bytes are mapped to printable
// characters (GPT-2's byte-to-unicode table) and merged pair by pair in merge-rank order.
// The regexes are matched by hand (no std::regex: it is slow and knows no \p{L}). No LibTorch.

#include "text/tokenizer.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bitlens::text {

/// A BPE vocabulary as plain vectors, the way GGUF stores it (tokenizer.ggml.*).
struct BpeVocab {
    std::vector<std::string> tokens;       ///< tokenizer.ggml.tokens, id = index
    std::vector<std::string> merges;       ///< tokenizer.ggml.merges, "left right", rank = index
    std::vector<std::int32_t> tokenTypes;  ///< tokenizer.ggml.token_type (1 normal, 2 unknown,
                                           ///< 3 control, 4 user-defined, 5 unused, 6 byte);
                                           ///< empty: all normal
    std::string pre = "gpt2";              ///< tokenizer.ggml.pre: gpt2, llama-bpe, llama3,
                                           ///< smollm, starcoder, qwen2, ...
    std::optional<std::int32_t> bosId;     ///< tokenizer.ggml.bos_token_id
    std::optional<std::int32_t> eosId;     ///< tokenizer.ggml.eos_token_id
    std::optional<std::int32_t> padId;     ///< tokenizer.ggml.padding_token_id
    bool addBos = false;                   ///< tokenizer.ggml.add_bos_token
    bool addEos = false;                   ///< tokenizer.ggml.add_eos_token
};

/// How one pre-tokenization step cuts text.
enum class SplitRule {
    Gpt2,           ///< 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    Llama3,         ///< (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
                    ///< \s*[\r\n]+|\s+(?!\S)|\s+
    Qwen2,          ///< as Llama3 with \p{N} one digit at a time
    DigitsSingle,   ///< Digits(individual_digits=true) or Split(\p{N}): each digit alone
    DigitsRuns,     ///< Digits(individual_digits=false): runs of digits
};

/// One step of the pre-tokenizer pipeline.
struct PreTokenizeStep {
    SplitRule rule = SplitRule::Gpt2;
    bool byteLevel = false;      ///< the ByteLevel pre-tokenizer (rule = Gpt2 when use_regex)
    bool useRegex = true;        ///< ByteLevel: split with the GPT-2 regex
    bool addPrefixSpace = false; ///< ByteLevel: a space before every piece that lacks one
};

/// A byte-level BPE tokenizer.
class BpeTokenizer final : public Tokenizer {
public:
    /// From a parsed tokenizer.json whose model is BPE.
    static Result<std::unique_ptr<BpeTokenizer>> fromTokenizerJson(const nlohmann::json& root,
                                                                   const std::string& path);
    /// From GGUF-style vectors; control and user-defined tokens become added tokens (control
    /// ones special); `path` names the source in errors.
    static Result<std::unique_ptr<BpeTokenizer>> fromVocab(const BpeVocab& vocab,
                                                           const std::string& path);
    /// The pre-tokenizer pipeline of a GGUF tokenizer.ggml.pre name.
    static Result<std::vector<PreTokenizeStep>> stepsForGgufPre(const std::string& pre,
                                                                const std::string& path);

    std::string kind() const override { return "bpe"; }
    std::size_t vocabSize() const override { return m_tokens.size(); }
    std::optional<std::int32_t> tokenId(std::string_view token) const override;
    std::string tokenText(std::int32_t id) const override;
    /// Maps token characters back to bytes; invalid UTF-8 in the result becomes U+FFFD.
    std::string decode(std::span<const std::int32_t> ids, bool skipSpecial = true) const override;

    /// The pre-tokenizer pipeline in use.
    const std::vector<PreTokenizeStep>& steps() const { return m_steps; }
    /// Number of merges.
    std::size_t mergeCount() const { return m_mergeCount; }
    /// Splits a text as the pre-tokenizers do (pieces as UTF-8, before the byte mapping).
    std::vector<std::string> preTokenize(std::string_view text) const;

protected:
    void encodePiece(std::string_view piece, std::vector<std::int32_t>& ids) const override;

private:
    BpeTokenizer() = default;
    Result<void> init(std::vector<std::string> tokens,
                      const std::vector<std::pair<std::string, std::string>>& merges,
                      const std::string& path);
    void bpeWord(std::string_view bytes, std::vector<std::int32_t>& ids) const;

    struct Hash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const
        {
            return std::hash<std::string_view>{}(s);
        }
    };
    struct Merge {
        std::int32_t rank;
        std::int32_t merged;
    };

    std::vector<std::string> m_tokens;
    std::unordered_map<std::string, std::int32_t, Hash, std::equal_to<>> m_vocab;
    std::unordered_map<std::uint64_t, Merge> m_merges;  ///< (left id << 32 | right id)
    std::size_t m_mergeCount = 0;
    std::vector<PreTokenizeStep> m_steps;
    std::array<std::int32_t, 256> m_byteId{};           ///< id of each single byte, -1 if none
    std::optional<std::int32_t> m_unkId;
    bool m_ignoreMerges = false;                        ///< a whole piece in the vocab wins

    mutable std::mutex m_cacheMutex;
    mutable std::unordered_map<std::string, std::vector<std::int32_t>, Hash, std::equal_to<>>
        m_cache;
};

/// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the rest map to
/// U+0100 onwards (space -> U+0120 'Ġ', newline -> U+010A 'Ċ').
char32_t byteToUnicode(std::uint8_t byte);

} // namespace bitlens::text
