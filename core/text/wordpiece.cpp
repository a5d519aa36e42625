#include "text/wordpiece.h"

#include "io/json_read.h"
#include "text/hf_json.h"
#include "text/unicode.h"

#include <nlohmann/json.hpp>

namespace bitlens::text {

using nlohmann::json;

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::fromTokens(
    std::vector<std::string> tokens, const std::string& path, const WordPieceOptions& options)
{
    std::unique_ptr<WordPieceTokenizer> t(new WordPieceTokenizer());
    t->m_options = options;
    if (auto r = t->init(std::move(tokens), path); !r)
        return r.error();
    // The special tokens HF's BertWordPieceTokenizer declares, when the vocabulary has them.
    std::vector<AddedToken> added;
    for (const char* name : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
        if (auto id = t->tokenId(name))
            added.push_back({name, *id, true, false, false, false});
    t->setAddedTokens(std::move(added));
    const auto cls = t->tokenId("[CLS]");
    const auto sep = t->tokenId("[SEP]");
    if (cls && sep)
        t->m_frame = {{*cls}, {*sep}};
    if (auto pad = t->tokenId("[PAD]"))
        t->m_padId = *pad;
    return t;
}

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::fromVocabText(
    std::string_view vocabText, const std::string& path, const WordPieceOptions& options)
{
    if (const auto bad = unicode::findInvalidUtf8(vocabText); bad != std::string_view::npos)
        return Error::badInput(path, "vocabulary is not UTF-8 text", bad);
    std::vector<std::string> tokens;
    std::size_t pos = 0;
    while (pos < vocabText.size()) {
        std::size_t end = vocabText.find('\n', pos);
        if (end == std::string_view::npos)
            end = vocabText.size();
        std::string_view line = vocabText.substr(pos, end - pos);
        // HF trims the end of each line (a "\r\n" file reads as "\n").
        while (!line.empty() && (line.back() == ' ' || line.back() == '\t' ||
                                 line.back() == '\r' || line.back() == '\v' ||
                                 line.back() == '\f'))
            line.remove_suffix(1);
        tokens.emplace_back(line);
        if (tokens.size() > kMaxVocabSize)
            return Error::badInput(path, "more than 4Mi vocabulary lines");
        pos = end + 1;
    }
    return fromTokens(std::move(tokens), path, options);
}

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::fromTokenizerJson(
    const json& root, const std::string& path)
{
    const json& model = root["model"];
    WordPieceOptions options;
    options.unkToken = io::jsonString(model, "unk_token", "[UNK]", "model");
    options.continuingPrefix = io::jsonString(model, "continuing_subword_prefix", "##", "model");
    const auto maxChars = io::jsonInt(model, "max_input_chars_per_word", 100, "model");
    if (maxChars < 1)
        return Error::badInput(path, "max_input_chars_per_word must be positive");
    options.maxInputCharsPerWord = static_cast<std::size_t>(maxChars);

    const auto normalizer = root.find("normalizer");
    if (normalizer != root.end() && !normalizer->is_null()) {
        if (!normalizer->is_object() ||
            io::jsonString(*normalizer, "type", "", "normalizer") != "BertNormalizer")
            return Error::unsupported(path, "WordPiece with a normalizer other than "
                                            "BertNormalizer");
        options.cleanText = io::jsonBool(*normalizer, "clean_text", true, "normalizer");
        options.handleChineseChars =
            io::jsonBool(*normalizer, "handle_chinese_chars", true, "normalizer");
        options.lowercase = io::jsonBool(*normalizer, "lowercase", true, "normalizer");
        // null (the default): strip accents exactly when lower-casing.
        if (auto s = normalizer->find("strip_accents"); s != normalizer->end() && !s->is_null())
            options.stripAccents = io::jsonBool(*normalizer, "strip_accents", false, "normalizer");
    } else {
        options.cleanText = options.handleChineseChars = options.lowercase = false;
        options.stripAccents = false;
    }
    const auto pre = root.find("pre_tokenizer");
    if (pre == root.end() || !pre->is_object() ||
        io::jsonString(*pre, "type", "", "pre_tokenizer") != "BertPreTokenizer")
        return Error::unsupported(path, "WordPiece needs the BertPreTokenizer");

    const auto vocab = model.find("vocab");
    if (vocab == model.end() || !vocab->is_object())
        return Error::badInput(path, "WordPiece model without a \"vocab\" object");
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

    std::unique_ptr<WordPieceTokenizer> t(new WordPieceTokenizer());
    t->m_options = options;
    if (auto r = t->init(std::move(tokens), path); !r)
        return r.error();
    auto added = hf::parseAddedTokens(root, path);
    if (!added)
        return added.error();
    for (const auto& a : *added) {
        if (static_cast<std::size_t>(a.id) >= t->m_tokens.size())
            t->m_tokens.resize(static_cast<std::size_t>(a.id) + 1);
        if (t->m_tokens[static_cast<std::size_t>(a.id)].empty())
            t->m_tokens[static_cast<std::size_t>(a.id)] = a.content;
        t->m_vocab.try_emplace(a.content, a.id);
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
    } else if (auto pad = t->tokenId("[PAD]")) {
        t->m_padId = *pad;
    }
    return t;
}

Result<void> WordPieceTokenizer::init(std::vector<std::string> tokens, const std::string& path)
{
    if (tokens.empty())
        return Error::badInput(path, "empty vocabulary");
    m_tokens = std::move(tokens);
    m_vocab.reserve(m_tokens.size());
    for (std::size_t i = 0; i < m_tokens.size(); ++i)
        m_vocab.insert_or_assign(m_tokens[i], static_cast<std::int32_t>(i));
    const auto unk = m_vocab.find(m_options.unkToken);
    if (unk == m_vocab.end())
        return Error::badInput(path, "the unknown token '" + m_options.unkToken +
                                         "' is not in the vocabulary");
    m_unkId = unk->second;
    return {};
}

std::optional<std::int32_t> WordPieceTokenizer::tokenId(std::string_view token) const
{
    const auto it = m_vocab.find(token);
    if (it == m_vocab.end())
        return std::nullopt;
    return it->second;
}

std::string WordPieceTokenizer::tokenText(std::int32_t id) const
{
    if (id < 0 || static_cast<std::size_t>(id) >= m_tokens.size())
        return {};
    return m_tokens[static_cast<std::size_t>(id)];
}

std::u32string WordPieceTokenizer::normalizeCodePoints(std::string_view text) const
{
    std::u32string cps;
    unicode::decodeUtf8(text, cps);
    std::u32string out;
    out.reserve(cps.size() + 8);
    for (char32_t cp : cps) {
        if (m_options.cleanText) {
            const bool keepControl = cp == U'\t' || cp == U'\n' || cp == U'\r';
            if (cp == 0 || cp == 0xFFFD || (!keepControl && unicode::isBertOther(cp)))
                continue;
            if (unicode::isWhitespace(cp))
                cp = U' ';
        }
        if (m_options.handleChineseChars && unicode::isCjkIdeograph(cp)) {
            out.push_back(U' ');
            out.push_back(cp);
            out.push_back(U' ');
            continue;
        }
        out.push_back(cp);
    }
    if (m_options.stripAccents.value_or(m_options.lowercase)) {
        std::u32string decomposed = unicode::nfd(out);
        out.clear();
        for (char32_t cp : decomposed)
            if (!unicode::isBertNonspacingMark(cp))
                out.push_back(cp);
    }
    if (m_options.lowercase) {
        std::u32string lower;
        lower.reserve(out.size());
        for (char32_t cp : out)
            unicode::appendLower(cp, lower);
        out = std::move(lower);
    }
    return out;
}

std::string WordPieceTokenizer::normalize(std::string_view text) const
{
    return unicode::toUtf8(normalizeCodePoints(text));
}

void WordPieceTokenizer::encodePiece(std::string_view piece, std::vector<std::int32_t>& ids) const
{
    const std::u32string text = normalizeCodePoints(piece);
    // BertPreTokenizer: whitespace separates words and is dropped; punctuation is a word alone.
    std::size_t start = 0;
    auto flush = [&](std::size_t end) {
        if (end > start)
            wordPiece(std::u32string_view(text).substr(start, end - start), ids);
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char32_t cp = text[i];
        if (unicode::isWhitespace(cp)) {
            flush(i);
            start = i + 1;
        } else if (unicode::isBertPunctuation(cp)) {
            flush(i);
            wordPiece(std::u32string_view(text).substr(i, 1), ids);
            start = i + 1;
        }
    }
    flush(text.size());
}

void WordPieceTokenizer::wordPiece(std::u32string_view word, std::vector<std::int32_t>& ids) const
{
    if (word.size() > m_options.maxInputCharsPerWord) {
        ids.push_back(m_unkId);
        return;
    }
    // UTF-8 of the word with the byte offset of every code point, so that candidates are
    // substrings of one buffer.
    std::string utf8;
    std::vector<std::size_t> offset;
    offset.reserve(word.size() + 1);
    for (char32_t cp : word) {
        offset.push_back(utf8.size());
        unicode::appendUtf8(cp, utf8);
    }
    offset.push_back(utf8.size());

    const std::size_t firstNew = ids.size();
    std::string candidate;
    std::size_t start = 0;
    while (start < word.size()) {
        std::size_t end = word.size();
        std::int32_t found = -1;
        while (start < end) {
            candidate.clear();
            if (start > 0)
                candidate += m_options.continuingPrefix;
            candidate.append(utf8, offset[start], offset[end] - offset[start]);
            if (auto it = m_vocab.find(candidate); it != m_vocab.end()) {
                found = it->second;
                break;
            }
            --end;
        }
        if (found < 0) {
            // One piece that matches nothing makes the whole word unknown.
            ids.resize(firstNew);
            ids.push_back(m_unkId);
            return;
        }
        ids.push_back(found);
        start = end;
    }
}

std::string WordPieceTokenizer::decode(std::span<const std::int32_t> ids, bool skipSpecial) const
{
    static const std::pair<const char*, const char*> kCleanup[] = {
        {" .", "."},       {" ?", "?"},   {" !", "!"},   {" ,", ","},   {" ' ", "'"},
        {" n't", "n't"},   {" 'm", "'m"}, {" do not", " don't"},
        {" 's", "'s"},     {" 've", "'ve"}, {" 're", "'re"},
    };
    std::string out;
    std::size_t index = 0;
    for (std::int32_t id : ids) {
        if (skipSpecial && isSpecial(id))
            continue;
        std::string token = tokenText(id);
        const std::string& prefix = m_options.continuingPrefix;
        if (index != 0) {
            if (!prefix.empty() && token.compare(0, prefix.size(), prefix) == 0)
                token.erase(0, prefix.size());
            else
                token.insert(token.begin(), ' ');
        }
        for (const auto& [from, to] : kCleanup) {
            const std::string f = from;
            std::size_t at = 0;
            while ((at = token.find(f, at)) != std::string::npos) {
                token.replace(at, f.size(), to);
                at += std::char_traits<char>::length(to);
            }
        }
        out += token;
        ++index;
    }
    return out;
}

} // namespace bitlens::text
