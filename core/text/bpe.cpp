#include "text/bpe.h"

#include "io/json_read.h"
#include "text/hf_json.h"
#include "text/unicode.h"

#include <nlohmann/json.hpp>

#include <queue>

namespace bitlens::text {

using nlohmann::json;

namespace {

// The pre-tokenizer regexes BitLens matches by hand, exactly as tokenizer.json files spell them.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2RegexShort =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// Longest piece the merge cache keeps (longer ones are rare and would bloat it).
constexpr std::size_t kCacheMaxPieceBytes = 64;
/// The cache is emptied when it reaches this many pieces.
constexpr std::size_t kCacheMaxEntries = 200000;

const std::array<char32_t, 256>& byteTable()
{
    static const std::array<char32_t, 256> table = [] {
        std::array<char32_t, 256> t{};
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                                   (b >= 0xAE && b <= 0xFF);
            t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
        }
        return t;
    }();
    return table;
}

/// Byte of a mapped character, or -1 when the character is not in the byte table.
int unicodeToByte(char32_t cp)
{
    static const std::unordered_map<char32_t, int> inverse = [] {
        std::unordered_map<char32_t, int> m;
        for (int b = 0; b < 256; ++b)
            m[byteTable()[static_cast<std::size_t>(b)]] = b;
        return m;
    }();
    const auto it = inverse.find(cp);
    return it == inverse.end() ? -1 : it->second;
}

/// The GPT-2 form of raw bytes: each byte as its mapped character, in UTF-8.
std::string mapBytes(std::string_view bytes)
{
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes)
        unicode::appendUtf8(byteTable()[static_cast<unsigned char>(c)], out);
    return out;
}

bool isOther(char32_t c)
{
    return !unicode::isWhitespace(c) && !unicode::isLetter(c) && !unicode::isNumber(c);
}

/// ASCII lower case plus the two non-ASCII characters that case-fold onto the contraction
/// letters of (?i:'s|'t|'re|'ve|'m|'ll|'d): LATIN SMALL LETTER LONG S and KELVIN SIGN.
char32_t foldContraction(char32_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if (c == 0x17F)
        return U's';
    if (c == 0x212A)
        return U'k';
    return c;
}

/// Length of 's 't 're 've 'm 'll 'd at i (0 when none); case-insensitive for Llama 3.
std::size_t matchContraction(const char32_t* s, std::size_t i, std::size_t n, bool anyCase)
{
    if (s[i] != U'\'' || i + 1 >= n)
        return 0;
    auto fold = [anyCase](char32_t c) { return anyCase ? foldContraction(c) : c; };
    const char32_t a = fold(s[i + 1]);
    if (a == U's' || a == U't' || a == U'm' || a == U'd')
        return 2;
    if (i + 2 < n) {
        const char32_t b = fold(s[i + 2]);
        if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l'))
            return 3;
    }
    return 0;
}

template <typename Pred>
std::size_t runOf(const char32_t* s, std::size_t i, std::size_t n, Pred pred)
{
    std::size_t j = i;
    while (j < n && pred(s[j]))
        ++j;
    return j - i;
}

/// \s+(?!\S)|\s+ at a whitespace character i.
std::size_t matchTrailingWhitespace(const char32_t* s, std::size_t i, std::size_t n)
{
    const std::size_t run = runOf(s, i, n, unicode::isWhitespace);
    if (i + run == n || run == 1)
        return run;  // at the end, or the \s+ fallback for a single character before \S
    return run - 1;  // leave the last one to start the next word (" word")
}

/// The GPT-2 regex at position i of s[0, n): the match length, 0 when nothing matches here.
std::size_t matchGpt2(const char32_t* s, std::size_t i, std::size_t n)
{
    if (std::size_t k = matchContraction(s, i, n, false))
        return k;
    const char32_t c = s[i];
    const std::size_t j = (c == U' ' && i + 1 < n) ? i + 1 : i;  // the optional leading space
    if (unicode::isLetter(s[j]))
        return j - i + runOf(s, j, n, unicode::isLetter);
    if (unicode::isNumber(s[j]))
        return j - i + runOf(s, j, n, unicode::isNumber);
    if (isOther(s[j]))
        return j - i + runOf(s, j, n, isOther);
    if (unicode::isWhitespace(c))
        return matchTrailingWhitespace(s, i, n);
    return 0;
}

/// The Llama 3 regex (maxDigits 3) or Qwen2's (maxDigits 1) at position i.
std::size_t matchLlama3(const char32_t* s, std::size_t i, std::size_t n, std::size_t maxDigits)
{
    if (std::size_t k = matchContraction(s, i, n, true))
        return k;
    const char32_t c = s[i];
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (unicode::isLetter(c))
        return runOf(s, i, n, unicode::isLetter);
    if (c != U'\r' && c != U'\n' && !unicode::isNumber(c) && i + 1 < n &&
        unicode::isLetter(s[i + 1]))
        return 1 + runOf(s, i + 1, n, unicode::isLetter);
    // \p{N}{1,maxDigits}
    if (unicode::isNumber(c))
        return std::min(maxDigits, runOf(s, i, n, unicode::isNumber));
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const std::size_t j = (c == U' ' && i + 1 < n && isOther(s[i + 1])) ? i + 1 : i;
    if (isOther(s[j])) {
        std::size_t end = j + runOf(s, j, n, isOther);
        end += runOf(s, end, n, [](char32_t x) { return x == U'\r' || x == U'\n'; });
        return end - i;
    }
    if (!unicode::isWhitespace(c))
        return 0;
    // \s*[\r\n]+: up to the last line break of the whitespace run.
    const std::size_t run = runOf(s, i, n, unicode::isWhitespace);
    for (std::size_t k = i + run; k > i; --k)
        if (s[k - 1] == U'\r' || s[k - 1] == U'\n')
            return k - i;
    return matchTrailingWhitespace(s, i, n);
}

struct Range {
    std::size_t begin;
    std::size_t end;
};

/// Cuts [r.begin, r.end) by a rule: matches and the gaps between them become pieces.
void splitRange(const std::u32string& text, Range r, SplitRule rule, std::vector<Range>& out)
{
    const char32_t* s = text.data() + r.begin;
    const std::size_t n = r.end - r.begin;
    std::size_t gap = 0;  // start of the unmatched text before i
    std::size_t i = 0;
    auto emit = [&](std::size_t a, std::size_t b) {
        if (b > a)
            out.push_back({r.begin + a, r.begin + b});
    };
    while (i < n) {
        std::size_t len = 0;
        switch (rule) {
        case SplitRule::Gpt2:
            len = matchGpt2(s, i, n);
            break;
        case SplitRule::Llama3:
            len = matchLlama3(s, i, n, 3);
            break;
        case SplitRule::Qwen2:
            len = matchLlama3(s, i, n, 1);
            break;
        case SplitRule::DigitsSingle:
            len = unicode::isNumber(s[i]) ? 1 : 0;
            break;
        case SplitRule::DigitsRuns:
            len = runOf(s, i, n, unicode::isNumber);
            break;
        }
        if (len == 0) {
            ++i;
            continue;
        }
        emit(gap, i);
        emit(i, i + len);
        i += len;
        gap = i;
    }
    emit(gap, n);
}

Result<SplitRule> ruleForRegex(const std::string& pattern, const std::string& path)
{
    if (pattern == kGpt2Regex || pattern == kGpt2RegexShort)
        return SplitRule::Gpt2;
    if (pattern == kLlama3Regex)
        return SplitRule::Llama3;
    if (pattern == kQwen2Regex)
        return SplitRule::Qwen2;
    if (pattern == R"(\p{N})")
        return SplitRule::DigitsSingle;
    return Error::unsupported(path, "pre-tokenizer regex " + pattern +
                                        " (known: the GPT-2, Llama 3 and Qwen2 patterns, \\p{N})");
}

Result<void> parsePreTokenizer(const json& p, const std::string& path,
                               std::vector<PreTokenizeStep>& steps)
{
    if (p.is_null())
        return {};
    if (!p.is_object())
        return Error::badInput(path, "\"pre_tokenizer\" is not an object");
    const std::string type = io::jsonString(p, "type", "", "pre_tokenizer");
    if (type == "Sequence") {
        const auto list = p.find("pretokenizers");
        if (list == p.end() || !list->is_array())
            return Error::badInput(path, "pre_tokenizer Sequence without \"pretokenizers\"");
        for (const auto& sub : *list)
            if (auto r = parsePreTokenizer(sub, path, steps); !r)
                return r;
        return {};
    }
    if (type == "ByteLevel") {
        PreTokenizeStep step;
        step.byteLevel = true;
        step.useRegex = io::jsonBool(p, "use_regex", true, "pre_tokenizer");
        step.addPrefixSpace = io::jsonBool(p, "add_prefix_space", false, "pre_tokenizer");
        steps.push_back(step);
        return {};
    }
    if (type == "Digits") {
        PreTokenizeStep step;
        step.rule = io::jsonBool(p, "individual_digits", false, "pre_tokenizer")
                        ? SplitRule::DigitsSingle
                        : SplitRule::DigitsRuns;
        steps.push_back(step);
        return {};
    }
    if (type == "Split") {
        const std::string behavior = io::jsonString(p, "behavior", "", "pre_tokenizer");
        if (behavior != "Isolated" || io::jsonBool(p, "invert", false, "pre_tokenizer"))
            return Error::unsupported(path, "Split pre-tokenizer with behavior '" + behavior +
                                                "' (only Isolated, not inverted)");
        const auto pattern = p.find("pattern");
        if (pattern == p.end() || !pattern->is_object() || !pattern->contains("Regex") ||
            !(*pattern)["Regex"].is_string())
            return Error::unsupported(path, "Split pre-tokenizer without a Regex pattern");
        auto rule = ruleForRegex((*pattern)["Regex"].get<std::string>(), path);
        if (!rule)
            return rule.error();
        PreTokenizeStep step;
        step.rule = *rule;
        steps.push_back(step);
        return {};
    }
    return Error::unsupported(path, "pre_tokenizer type '" + type + "'");
}

} // namespace

char32_t byteToUnicode(std::uint8_t byte) { return byteTable()[byte]; }

Result<std::vector<PreTokenizeStep>> BpeTokenizer::stepsForGgufPre(const std::string& pre,
                                                                   const std::string& path)
{
    PreTokenizeStep byteLevel;
    byteLevel.byteLevel = true;
    PreTokenizeStep byteLevelNoRegex = byteLevel;
    byteLevelNoRegex.useRegex = false;
    PreTokenizeStep split;
    if (pre == "gpt2" || pre == "gpt-2" || pre == "mpt" || pre == "olmo" || pre == "jais")
        return std::vector<PreTokenizeStep>{byteLevel};
    if (pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe") {
        split.rule = SplitRule::Llama3;
        return std::vector<PreTokenizeStep>{split, byteLevelNoRegex};
    }
    if (pre == "qwen2" || pre == "stablelm2") {
        split.rule = SplitRule::Qwen2;
        return std::vector<PreTokenizeStep>{split, byteLevelNoRegex};
    }
    if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell" ||
        pre == "command-r" || pre == "exaone") {
        split.rule = SplitRule::DigitsSingle;
        return std::vector<PreTokenizeStep>{split, byteLevel};
    }
    return Error::unsupported(path, "BPE pre-tokenizer '" + pre +
                                        "' (known: gpt2, llama-bpe, qwen2, smollm, starcoder)");
}

Result<void> BpeTokenizer::init(std::vector<std::string> tokens,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                const std::string& path)
{
    if (tokens.empty())
        return Error::badInput(path, "empty vocabulary");
    m_tokens = std::move(tokens);
    m_vocab.reserve(m_tokens.size());
    for (std::size_t i = 0; i < m_tokens.size(); ++i)
        if (!m_tokens[i].empty())
            m_vocab.insert_or_assign(m_tokens[i], static_cast<std::int32_t>(i));
    m_merges.reserve(merges.size());
    std::string joined;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [left, right] = merges[rank];
        const auto a = m_vocab.find(left);
        const auto b = m_vocab.find(right);
        joined = left + right;
        const auto merged = m_vocab.find(joined);
        if (a == m_vocab.end() || b == m_vocab.end() || merged == m_vocab.end())
            return Error::badInput(path, "merge " + std::to_string(rank) + " ('" + left + " " +
                                             right + "') uses a token missing from the "
                                                     "vocabulary");
        const auto key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a->second)) << 32) |
                         static_cast<std::uint32_t>(b->second);
        m_merges.insert_or_assign(key, Merge{static_cast<std::int32_t>(rank), merged->second});
    }
    m_mergeCount = merges.size();
    for (int byte = 0; byte < 256; ++byte) {
        std::string mapped;
        unicode::appendUtf8(byteTable()[static_cast<std::size_t>(byte)], mapped);
        const auto it = m_vocab.find(mapped);
        m_byteId[static_cast<std::size_t>(byte)] = it == m_vocab.end() ? -1 : it->second;
    }
    return {};
}

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::fromTokenizerJson(const json& root,
                                                                      const std::string& path)
{
    const json& model = root["model"];
    if (const auto d = model.find("dropout"); d != model.end() && !d->is_null())
        return Error::unsupported(path, "BPE dropout (it makes encoding random)");
    if (io::jsonBool(model, "byte_fallback", false, "model"))
        return Error::unsupported(path, "BPE byte_fallback (SentencePiece-style vocabularies)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (!io::jsonString(model, key, "", "model").empty())
            return Error::unsupported(path, std::string("BPE ") + key);
    if (const auto n = root.find("normalizer"); n != root.end() && !n->is_null()) {
        const std::string type = io::jsonString(*n, "type", "", "normalizer");
        const bool emptySequence = n->is_object() && type == "Sequence" &&
                                   n->contains("normalizers") && (*n)["normalizers"].is_array() &&
                                   (*n)["normalizers"].empty();
        if (!emptySequence)
            return Error::unsupported(path, "a normalizer in a byte-level BPE tokenizer ('" +
                                                type + "')");
    }

    std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
    if (const auto pre = root.find("pre_tokenizer"); pre != root.end())
        if (auto r = parsePreTokenizer(*pre, path, t->m_steps); !r)
            return r.error();
    const bool hasByteLevel = std::any_of(t->m_steps.begin(), t->m_steps.end(),
                                          [](const PreTokenizeStep& s) { return s.byteLevel; });
    if (!hasByteLevel)
        return Error::unsupported(path, "a BPE tokenizer without the ByteLevel pre-tokenizer "
                                        "(only byte-level BPE is supported)");

    const auto vocab = model.find("vocab");
    if (vocab == model.end() || !vocab->is_object())
        return Error::badInput(path, "BPE model without a \"vocab\" object");
    if (vocab->size() > kMaxVocabSize)
        return Error::badInput(path, "more than 4Mi vocabulary entries");
    std::vector<std::string> tokens(vocab->size());
    for (const auto& [token, id] : vocab->items()) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
            id.get<std::int64_t>() >= static_cast<std::int64_t>(kMaxVocabSize))
            return Error::badInput(path, "vocabulary id of '" + token + "' is out of range");
        const auto i = static_cast<std::size_t>(id.get<std::int64_t>());
        if (i >= tokens.size())
            tokens.resize(i + 1);
        tokens[i] = token;
    }
    auto added = hf::parseAddedTokens(root, path);
    if (!added)
        return added.error();
    for (const auto& a : *added) {
        const auto i = static_cast<std::size_t>(a.id);
        if (i >= tokens.size())
            tokens.resize(i + 1);
        if (tokens[i].empty())
            tokens[i] = a.content;
    }

    const auto mergesJson = model.find("merges");
    if (mergesJson == model.end() || !mergesJson->is_array())
        return Error::badInput(path, "BPE model without a \"merges\" array");
    if (mergesJson->size() > kMaxVocabSize)
        return Error::badInput(path, "more than 4Mi merges");
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(mergesJson->size());
    for (const auto& m : *mergesJson) {
        if (m.is_string()) {  // "left right"
            const std::string s = m.get<std::string>();
            const auto space = s.find(' ');
            if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
                return Error::badInput(path, "merge '" + s + "' is not two tokens");
            merges.emplace_back(s.substr(0, space), s.substr(space + 1));
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        } else {
            return Error::badInput(path, "a merge that is neither \"a b\" nor [\"a\", \"b\"]");
        }
    }
    if (auto r = t->init(std::move(tokens), merges, path); !r)
        return r.error();
    t->m_ignoreMerges = io::jsonBool(model, "ignore_merges", false, "model");
    if (const std::string unk = io::jsonString(model, "unk_token", "", "model"); !unk.empty()) {
        t->m_unkId = t->tokenId(unk);
        if (!t->m_unkId)
            return Error::badInput(path, "the unknown token is not in the vocabulary");
    }
    t->setAddedTokens(std::move(*added));
    auto frame = hf::parsePostProcessor(root, path, [&t](const std::string& token) {
        return t->tokenId(token);
    });
    if (!frame)
        return frame.error();
    t->m_frame = std::move(*frame);
    if (auto padding = root.find("padding"); padding != root.end() && padding->is_object()) {
        const std::int64_t pad = io::jsonInt(*padding, "pad_id", 0, "padding");
        if (pad < 0 || pad >= static_cast<std::int64_t>(t->vocabSize()))
            return Error::badInput(path, "key 'padding.pad_id': " + std::to_string(pad) +
                                             " is not a token id");
        t->m_padId = static_cast<std::int32_t>(pad);
    } else if (auto eos = t->tokenId("<|endoftext|>")) {
        t->m_padId = *eos;
    }
    for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"})
        if (auto id = t->tokenId(name); id && !t->m_eosId)
            t->m_eosId = id;
    for (const char* name : {"<|begin_of_text|>", "<s>"})
        if (auto id = t->tokenId(name); id && !t->m_bosId)
            t->m_bosId = id;
    return t;
}

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::fromVocab(const BpeVocab& vocab,
                                                              const std::string& path)
{
    if (vocab.tokens.size() > kMaxVocabSize || vocab.merges.size() > kMaxVocabSize)
        return Error::badInput(path, "more than 4Mi tokens or merges");
    if (!vocab.tokenTypes.empty() && vocab.tokenTypes.size() != vocab.tokens.size())
        return Error::badInput(path, "token_type has " + std::to_string(vocab.tokenTypes.size()) +
                                         " entries for " + std::to_string(vocab.tokens.size()) +
                                         " tokens");
    auto steps = stepsForGgufPre(vocab.pre, path);
    if (!steps)
        return steps.error();
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(vocab.merges.size());
    for (const auto& s : vocab.merges) {
        const auto space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
            return Error::badInput(path, "merge '" + s + "' is not two tokens");
        merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    }
    std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
    t->m_steps = std::move(*steps);
    if (auto r = t->init(vocab.tokens, merges, path); !r)
        return r.error();
    const auto n = static_cast<std::int64_t>(vocab.tokens.size());
    auto checkId = [&](const std::optional<std::int32_t>& id, const char* what) -> Result<void> {
        if (id && (*id < 0 || *id >= n))
            return Error::badInput(path, std::string(what) + " " + std::to_string(*id) +
                                             " is not a token id");
        return {};
    };
    for (const auto& [id, what] : {std::pair{vocab.bosId, "bos_token_id"},
                                   std::pair{vocab.eosId, "eos_token_id"},
                                   std::pair{vocab.padId, "padding_token_id"}})
        if (auto r = checkId(id, what); !r)
            return r.error();
    std::vector<AddedToken> added;
    for (std::size_t i = 0; i < vocab.tokenTypes.size(); ++i) {
        const std::int32_t type = vocab.tokenTypes[i];
        if ((type == 3 || type == 4) && !vocab.tokens[i].empty())
            added.push_back({vocab.tokens[i], static_cast<std::int32_t>(i), type == 3, false,
                             false, false});
    }
    t->setAddedTokens(std::move(added));
    t->m_bosId = vocab.bosId;
    t->m_eosId = vocab.eosId;
    t->m_padId = vocab.padId.value_or(vocab.eosId.value_or(0));
    if (vocab.addBos && vocab.bosId)
        t->m_frame.prefix.push_back(*vocab.bosId);
    if (vocab.addEos && vocab.eosId)
        t->m_frame.suffix.push_back(*vocab.eosId);
    return t;
}

std::optional<std::int32_t> BpeTokenizer::tokenId(std::string_view token) const
{
    const auto it = m_vocab.find(token);
    if (it == m_vocab.end())
        return std::nullopt;
    return it->second;
}

std::string BpeTokenizer::tokenText(std::int32_t id) const
{
    if (id < 0 || static_cast<std::size_t>(id) >= m_tokens.size())
        return {};
    return m_tokens[static_cast<std::size_t>(id)];
}

namespace {

/// Applies the pre-tokenizer steps to `text`; the pieces are ranges of the returned buffer
/// (ByteLevel's prefix space may insert characters, hence a buffer of its own).
std::u32string runSteps(std::string_view piece, const std::vector<PreTokenizeStep>& steps,
                        std::vector<Range>& ranges)
{
    std::u32string text;
    unicode::decodeUtf8(piece, text);
    ranges.assign(1, Range{0, text.size()});
    if (text.empty())
        ranges.clear();
    std::vector<Range> next;
    for (const auto& step : steps) {
        if (step.byteLevel && step.addPrefixSpace) {
            std::u32string spaced;
            std::vector<Range> moved;
            for (const Range& r : ranges) {
                const std::size_t begin = spaced.size();
                if (text[r.begin] != U' ')
                    spaced.push_back(U' ');
                spaced.append(text, r.begin, r.end - r.begin);
                moved.push_back({begin, spaced.size()});
            }
            text = std::move(spaced);
            ranges = std::move(moved);
        }
        if (step.byteLevel && !step.useRegex)
            continue;
        next.clear();
        for (const Range& r : ranges)
            splitRange(text, r, step.rule, next);
        ranges.swap(next);
    }
    return text;
}

} // namespace

std::vector<std::string> BpeTokenizer::preTokenize(std::string_view text) const
{
    std::vector<Range> ranges;
    const std::u32string buffer = runSteps(text, m_steps, ranges);
    std::vector<std::string> out;
    out.reserve(ranges.size());
    for (const Range& r : ranges)
        out.push_back(unicode::toUtf8(std::u32string_view(buffer).substr(r.begin,
                                                                         r.end - r.begin)));
    return out;
}

void BpeTokenizer::encodePiece(std::string_view piece, std::vector<std::int32_t>& ids) const
{
    std::vector<Range> ranges;
    const std::u32string buffer = runSteps(piece, m_steps, ranges);
    std::string bytes;
    for (const Range& r : ranges) {
        bytes.clear();
        for (std::size_t k = r.begin; k < r.end; ++k)
            unicode::appendUtf8(buffer[k], bytes);
        bpeWord(bytes, ids);
    }
}

void BpeTokenizer::bpeWord(std::string_view bytes, std::vector<std::int32_t>& ids) const
{
    if (bytes.empty())
        return;
    const bool cacheable = bytes.size() <= kCacheMaxPieceBytes;
    if (cacheable) {
        std::lock_guard lock(m_cacheMutex);
        if (const auto it = m_cache.find(bytes); it != m_cache.end()) {
            ids.insert(ids.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    if (m_ignoreMerges) {
        if (const auto it = m_vocab.find(mapBytes(bytes)); it != m_vocab.end()) {
            ids.push_back(it->second);
            return;
        }
    }

    // A linked list of symbols, initially one per byte, merged lowest rank first (leftmost on
    // ties) through a min-heap of candidate pairs; stale candidates are skipped when popped.
    struct Symbol {
        std::int32_t id;
        std::int32_t prev;
        std::int32_t next;
    };
    std::vector<Symbol> sym;
    sym.reserve(bytes.size());
    for (char c : bytes) {
        std::int32_t id = m_byteId[static_cast<unsigned char>(c)];
        if (id < 0) {
            if (!m_unkId)
                continue;  // HF drops characters it cannot map when there is no unk token
            id = *m_unkId;
        }
        const auto index = static_cast<std::int32_t>(sym.size());
        sym.push_back({id, index - 1, index + 1});
    }
    if (sym.empty())
        return;
    sym.back().next = -1;

    struct Candidate {
        std::int32_t rank;
        std::int32_t left;
        std::int32_t leftId;
        std::int32_t rightId;
        std::int32_t merged;
        bool operator>(const Candidate& o) const
        {
            return rank != o.rank ? rank > o.rank : left > o.left;
        }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto pushPair = [&](std::int32_t left) {
        if (left < 0)
            return;
        const std::int32_t right = sym[static_cast<std::size_t>(left)].next;
        if (right < 0)
            return;
        const std::int32_t a = sym[static_cast<std::size_t>(left)].id;
        const std::int32_t b = sym[static_cast<std::size_t>(right)].id;
        const auto it = m_merges.find((static_cast<std::uint64_t>(static_cast<std::uint32_t>(a))
                                       << 32) |
                                      static_cast<std::uint32_t>(b));
        if (it != m_merges.end())
            heap.push({it->second.rank, left, a, b, it->second.merged});
    };
    for (std::int32_t k = 0; k + 1 < static_cast<std::int32_t>(sym.size()); ++k)
        pushPair(k);
    while (!heap.empty()) {
        const Candidate c = heap.top();
        heap.pop();
        Symbol& left = sym[static_cast<std::size_t>(c.left)];
        if (left.id != c.leftId || left.next < 0)
            continue;
        Symbol& right = sym[static_cast<std::size_t>(left.next)];
        if (right.id != c.rightId)
            continue;
        left.id = c.merged;
        right.id = -1;
        left.next = right.next;
        if (left.next >= 0)
            sym[static_cast<std::size_t>(left.next)].prev = c.left;
        pushPair(left.prev);
        pushPair(c.left);
    }

    const std::size_t first = ids.size();
    for (std::int32_t k = 0; k >= 0; k = sym[static_cast<std::size_t>(k)].next)
        ids.push_back(sym[static_cast<std::size_t>(k)].id);
    if (cacheable) {
        std::lock_guard lock(m_cacheMutex);
        if (m_cache.size() >= kCacheMaxEntries)
            m_cache.clear();
        m_cache.emplace(std::string(bytes),
                        std::vector<std::int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(first),
                                                  ids.end()));
    }
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids, bool skipSpecial) const
{
    std::string bytes;
    std::u32string cps;
    for (std::int32_t id : ids) {
        if (skipSpecial && isSpecial(id))
            continue;
        const std::string token = tokenText(id);
        // Added tokens are plain text; vocabulary tokens are byte-mapped characters.
        cps.clear();
        unicode::decodeUtf8(token, cps);
        for (char32_t cp : cps) {
            const int byte = unicodeToByte(cp);
            if (byte >= 0)
                bytes.push_back(static_cast<char>(byte));
            else
                unicode::appendUtf8(cp, bytes);
        }
    }
    if (unicode::findInvalidUtf8(bytes) == std::string::npos)
        return bytes;
    std::u32string fixed;
    unicode::decodeUtf8(bytes, fixed);
    return unicode::toUtf8(fixed);
}

} // namespace bitlens::text
