#include "text/tokenizer.h"

#include "io/file_util.h"
#include "io/gguf.h"
#include "io/json_read.h"
#include "text/bpe.h"
#include "text/unicode.h"
#include "text/wordpiece.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>

namespace bitlens::text {

namespace fs = std::filesystem;

namespace {

/// The code point that ends `s` (for the word-boundary test of single-word added tokens).
char32_t lastCodePoint(std::string_view s)
{
    if (s.empty())
        return 0;
    std::size_t i = s.size() - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80)
        --i;
    std::u32string cps;
    unicode::decodeUtf8(s.substr(i), cps);
    return cps.empty() ? 0 : cps.back();
}

char32_t firstCodePoint(std::string_view s)
{
    if (s.empty())
        return 0;
    std::size_t len = 1;
    while (len < s.size() && len < 4 && (static_cast<unsigned char>(s[len]) & 0xC0) == 0x80)
        ++len;
    std::u32string cps;
    unicode::decodeUtf8(s.substr(0, len), cps);
    return cps.empty() ? 0 : cps.front();
}

bool isWordChar(char32_t cp)
{
    return cp == U'_' || unicode::isLetter(cp) || unicode::isNumber(cp);
}

/// Bytes of whitespace that end `s` (whole code points).
std::size_t trailingWhitespace(std::string_view s)
{
    std::size_t n = 0;
    while (n < s.size()) {
        const std::string_view head = s.substr(0, s.size() - n);
        const char32_t cp = lastCodePoint(head);
        if (!unicode::isWhitespace(cp))
            break;
        std::string enc;
        unicode::appendUtf8(cp, enc);
        n += enc.size();
    }
    return n;
}

/// Bytes of whitespace that start `s`.
std::size_t leadingWhitespace(std::string_view s)
{
    std::size_t n = 0;
    while (n < s.size()) {
        const char32_t cp = firstCodePoint(s.substr(n));
        if (!unicode::isWhitespace(cp))
            break;
        std::string enc;
        unicode::appendUtf8(cp, enc);
        n += enc.size();
    }
    return n;
}

/// True when the file starts with the GGUF magic (a model file under any name).
bool hasGgufMagic(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

/// An optional token id key: absent is nullopt; present but not a whole number in int32 range
/// is an error naming the key.
Result<std::optional<std::int32_t>> optionalId(const io::GgufFile& file, const std::string& key)
{
    if (!file.find(key))
        return std::optional<std::int32_t>();
    auto v = file.getInt(key);
    if (!v)
        return v.error();
    if (*v < 0 || *v > std::numeric_limits<std::int32_t>::max())
        return Error::badInput(file.path(), "key '" + key + "' is " + std::to_string(*v) +
                                                ", not a token id");
    return std::optional<std::int32_t>(static_cast<std::int32_t>(*v));
}

Result<bool> optionalFlag(const io::GgufFile& file, const std::string& key, bool fallback)
{
    if (!file.find(key))
        return fallback;
    return file.getBool(key);
}

} // namespace

void Tokenizer::setAddedTokens(std::vector<AddedToken> added)
{
    m_added = std::move(added);
    m_addedByFirstByte.assign(256, {});
    m_specialIds.clear();
    for (std::size_t i = 0; i < m_added.size(); ++i) {
        if (m_added[i].content.empty())
            continue;
        m_addedByFirstByte[static_cast<unsigned char>(m_added[i].content[0])].push_back(i);
        if (m_added[i].special)
            m_specialIds.push_back(m_added[i].id);
    }
    // Leftmost-longest: at one position the longest token wins.
    for (auto& list : m_addedByFirstByte)
        std::stable_sort(list.begin(), list.end(), [this](std::size_t a, std::size_t b) {
            return m_added[a].content.size() > m_added[b].content.size();
        });
    std::sort(m_specialIds.begin(), m_specialIds.end());
}

bool Tokenizer::isSpecial(std::int32_t id) const
{
    return std::binary_search(m_specialIds.begin(), m_specialIds.end(), id);
}

void Tokenizer::splitOnAdded(std::string_view text,
                             std::vector<std::pair<std::string_view, std::int32_t>>& out) const
{
    std::size_t pieceStart = 0;
    std::size_t i = 0;
    while (i < text.size() && !m_added.empty()) {
        const auto& candidates = m_addedByFirstByte[static_cast<unsigned char>(text[i])];
        const AddedToken* hit = nullptr;
        for (std::size_t k : candidates) {
            const AddedToken& t = m_added[k];
            if (text.compare(i, t.content.size(), t.content) != 0)
                continue;
            if (t.singleWord && (isWordChar(lastCodePoint(text.substr(0, i))) ||
                                 isWordChar(firstCodePoint(text.substr(i + t.content.size())))))
                continue;
            hit = &t;
            break;
        }
        if (!hit) {
            ++i;
            continue;
        }
        std::size_t start = i;
        std::size_t stop = i + hit->content.size();
        if (hit->lstrip)
            start -= trailingWhitespace(text.substr(pieceStart, start - pieceStart));
        if (hit->rstrip)
            stop += leadingWhitespace(text.substr(stop));
        if (start > pieceStart)
            out.emplace_back(text.substr(pieceStart, start - pieceStart), -1);
        out.emplace_back(std::string_view(), hit->id);
        pieceStart = stop;
        i = stop;
    }
    if (pieceStart < text.size())
        out.emplace_back(text.substr(pieceStart), -1);
}

Encoding Tokenizer::encode(std::string_view text, const EncodeOptions& options) const
{
    std::vector<std::pair<std::string_view, std::int32_t>> pieces;
    splitOnAdded(text, pieces);
    std::vector<std::int32_t> content;
    content.reserve(text.size() / 3 + 4);
    for (const auto& [piece, id] : pieces) {
        if (id >= 0)
            content.push_back(id);
        else
            encodePiece(piece, content);
    }

    const SpecialFrame none;
    const SpecialFrame& frame = options.addSpecialTokens ? m_frame : none;
    if (options.maxLength > 0) {
        const std::size_t framing = frame.prefix.size() + frame.suffix.size();
        const std::size_t keep = options.maxLength > framing ? options.maxLength - framing : 0;
        if (content.size() > keep)
            content.resize(keep);
    }

    Encoding enc;
    enc.ids.reserve(std::max(content.size() + frame.prefix.size() + frame.suffix.size(),
                             options.padTo));
    enc.ids.insert(enc.ids.end(), frame.prefix.begin(), frame.prefix.end());
    enc.ids.insert(enc.ids.end(), content.begin(), content.end());
    enc.ids.insert(enc.ids.end(), frame.suffix.begin(), frame.suffix.end());
    enc.attentionMask.assign(enc.ids.size(), 1);
    enc.special.resize(enc.ids.size());
    for (std::size_t k = 0; k < enc.ids.size(); ++k) {
        const bool framing = k < frame.prefix.size() ||
                             k >= frame.prefix.size() + content.size();
        enc.special[k] = framing || isSpecial(enc.ids[k]) ? 1 : 0;
    }
    while (enc.ids.size() < options.padTo) {
        enc.ids.push_back(m_padId);
        enc.attentionMask.push_back(0);
        enc.special.push_back(1);
    }
    enc.tokens.reserve(enc.ids.size());
    for (std::int32_t id : enc.ids)
        enc.tokens.push_back(tokenText(id));
    return enc;
}

namespace {

/// A Hugging Face tokenizer.json: WordPiece or byte-level BPE.
Result<std::unique_ptr<Tokenizer>> loadTokenizerJson(std::string_view text,
                                                     const std::string& path)
{
    const auto json = nlohmann::json::parse(text, nullptr, false);
    if (json.is_discarded() || !json.is_object())
        return Error::badInput(path, "not a JSON object");
    const auto model = json.find("model");
    if (model == json.end() || !model->is_object())
        return Error::badInput(path, "no \"model\" object: not a Hugging Face tokenizer.json");
    const std::string type = io::jsonString(*model, "type", "", "model");
    if (type == "WordPiece") {
        auto t = WordPieceTokenizer::fromTokenizerJson(json, path);
        if (!t)
            return t.error();
        return std::unique_ptr<Tokenizer>(std::move(*t));
    }
    if (type == "BPE" || (type.empty() && model->contains("merges"))) {
        auto t = BpeTokenizer::fromTokenizerJson(json, path);
        if (!t)
            return t.error();
        return std::unique_ptr<Tokenizer>(std::move(*t));
    }
    return Error::unsupported(path, "tokenizer model type '" + type +
                                        "' (supported: WordPiece, BPE)");
}

} // namespace

Result<std::unique_ptr<Tokenizer>> loadTokenizer(const std::string& path)
{
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        for (const char* name : {"tokenizer.json", "vocab.txt"}) {
            const std::string candidate = (fs::path(path) / name).string();
            if (fs::is_regular_file(candidate, ec))
                return loadTokenizer(candidate);
        }
        return Error::badInput(path, "no tokenizer.json or vocab.txt in this folder");
    }
    if (!fs::exists(path, ec))
        return Error::badInput(path, "cannot open file: No such file or directory");
    const std::string ext = fs::path(path).extension().string();
    if (ext == ".gguf" || hasGgufMagic(path)) {
        auto file = io::GgufFile::open(path);
        if (!file)
            return file.error();
        return loadGgufTokenizer(*file);
    }
    const auto size = fs::file_size(path, ec);
    if (ec)
        return Error::badInput(path, "cannot read file: " + ec.message());
    if (size > kMaxTokenizerFileBytes)
        return Error::badInput(path, "tokenizer file is larger than 256 MiB");
    auto bytes = io::readFileBytes(path);
    if (!bytes)
        return bytes.error();
    const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());

    if (ext == ".json")
        return io::readingJson(path, [&]() -> Result<std::unique_ptr<Tokenizer>> {
            return loadTokenizerJson(text, path);
        });

    // A BERT vocab.txt; a tokenizer_config.json beside it may turn lower-casing off.
    WordPieceOptions options;
    const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
    if (fs::is_regular_file(config, ec)) {
        std::ifstream in(config);
        const auto j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_object()) {
            if (auto it = j.find("do_lower_case"); it != j.end() && it->is_boolean())
                options.lowercase = it->get<bool>();
            if (auto it = j.find("strip_accents"); it != j.end() && it->is_boolean())
                options.stripAccents = it->get<bool>();
            if (auto it = j.find("tokenize_chinese_chars"); it != j.end() && it->is_boolean())
                options.handleChineseChars = it->get<bool>();
        }
    }
    auto t = WordPieceTokenizer::fromVocabText(text, path, options);
    if (!t)
        return t.error();
    return std::unique_ptr<Tokenizer>(std::move(*t));
}

Result<std::unique_ptr<Tokenizer>> loadGgufTokenizer(const io::GgufFile& file)
{
    const std::string& path = file.path();
    if (!file.find("tokenizer.ggml.tokens"))
        return Error::badInput(path, "this GGUF file holds no tokenizer (no tokenizer.ggml.tokens)");
    auto model = file.getString("tokenizer.ggml.model");
    if (!model)
        return model.error();
    if (*model != "gpt2")
        return Error::unsupported(path, "GGUF tokenizer model '" + *model +
                                            "' is not supported (only byte-level BPE, 'gpt2')");
    BpeVocab vocab;
    auto tokens = file.getStringArray("tokenizer.ggml.tokens");
    if (!tokens)
        return tokens.error();
    vocab.tokens = std::move(tokens).value();
    auto merges = file.getStringArray("tokenizer.ggml.merges");
    if (!merges)
        return merges.error();
    vocab.merges = std::move(merges).value();
    if (file.find("tokenizer.ggml.token_type")) {
        auto types = file.getIntArray("tokenizer.ggml.token_type");
        if (!types)
            return types.error();
        vocab.tokenTypes.reserve(types->size());
        for (const std::int64_t t : *types) {
            if (t < 0 || t > 6)
                return Error::badInput(path, "tokenizer.ggml.token_type holds " +
                                                 std::to_string(t) + " (types are 0 to 6)");
            vocab.tokenTypes.push_back(static_cast<std::int32_t>(t));
        }
    }
    if (file.find("tokenizer.ggml.pre")) {
        auto pre = file.getString("tokenizer.ggml.pre");
        if (!pre)
            return pre.error();
        vocab.pre = *pre;
    }
    auto bos = optionalId(file, "tokenizer.ggml.bos_token_id");
    auto eos = optionalId(file, "tokenizer.ggml.eos_token_id");
    auto pad = optionalId(file, "tokenizer.ggml.padding_token_id");
    for (const auto* r : {&bos, &eos, &pad})
        if (!*r)
            return r->error();
    vocab.bosId = *bos;
    vocab.eosId = *eos;
    vocab.padId = *pad;
    auto addBos = optionalFlag(file, "tokenizer.ggml.add_bos_token", false);
    if (!addBos)
        return addBos.error();
    auto addEos = optionalFlag(file, "tokenizer.ggml.add_eos_token", false);
    if (!addEos)
        return addEos.error();
    vocab.addBos = *addBos;
    vocab.addEos = *addEos;
    auto t = BpeTokenizer::fromVocab(vocab, path);
    if (!t)
        return t.error();
    return std::unique_ptr<Tokenizer>(std::move(*t));
}

} // namespace bitlens::text
