#include "text/bpe_train.h"

#include "text/unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

namespace bitlens::text {

namespace {

using json = nlohmann::json;

std::uint64_t pairKey(std::int32_t a, std::int32_t b)
{
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
}

/// One distinct pre-tokenized piece: its symbols and how often it occurs.
struct Word {
    std::vector<std::int32_t> symbols;
    std::int64_t count = 0;
};

/// The pair counts of all words, and which words hold each pair.
class PairIndex {
public:
    void add(const Word& w, std::size_t index, std::int64_t sign)
    {
        for (std::size_t i = 0; i + 1 < w.symbols.size(); ++i) {
            const std::uint64_t key = pairKey(w.symbols[i], w.symbols[i + 1]);
            counts[key] += sign * w.count;
            if (sign > 0)
                where[key].insert(index);
        }
    }
    std::unordered_map<std::uint64_t, std::int64_t> counts;
    std::unordered_map<std::uint64_t, std::unordered_set<std::size_t>> where;
};

} // namespace

Result<BpeVocab> trainByteLevelBpe(std::string_view text, const BpeTrainOptions& options)
{
    if (options.vocabSize < options.specials.size() + 256)
        return Error::usage("a byte-level BPE vocabulary of " +
                            std::to_string(options.vocabSize) + " cannot hold " +
                            std::to_string(options.specials.size()) +
                            " special token(s) and the 256 byte symbols");
    BpeVocab vocab;
    vocab.pre = "gpt2";
    vocab.tokens = options.specials;
    vocab.tokenTypes.assign(options.specials.size(), 3);  // control
    const auto firstByte = static_cast<std::int32_t>(vocab.tokens.size());
    for (int byte = 0; byte < 256; ++byte) {
        std::string s;
        unicode::appendUtf8(byteToUnicode(static_cast<std::uint8_t>(byte)), s);
        vocab.tokens.push_back(s);
        vocab.tokenTypes.push_back(1);
    }
    if (!options.specials.empty()) {
        vocab.bosId = 0;
        vocab.eosId = 0;
    }

    // The pieces the GPT-2 pre-tokenizer cuts, counted.
    BpeVocab bytesOnly = vocab;
    auto splitter = BpeTokenizer::fromVocab(bytesOnly, "bpe-train");
    if (!splitter)
        return splitter.error();
    std::unordered_map<std::string, std::int64_t> pieceCounts;
    for (std::size_t start = 0; start < text.size();) {
        // Lines are cut separately (the regex never joins across "\n" except as whitespace runs,
        // which a line cut keeps whole), so the splitter's working copy stays small.
        std::size_t end = text.find('\n', start);
        end = end == std::string_view::npos ? text.size() : end + 1;
        for (auto& piece : (*splitter)->preTokenize(text.substr(start, end - start)))
            ++pieceCounts[piece];
        start = end;
    }
    std::vector<std::string> sortedPieces;
    sortedPieces.reserve(pieceCounts.size());
    for (const auto& [piece, count] : pieceCounts)
        sortedPieces.push_back(piece);
    std::sort(sortedPieces.begin(), sortedPieces.end());
    std::vector<Word> words;
    words.reserve(sortedPieces.size());
    for (const auto& piece : sortedPieces) {
        Word w;
        w.count = pieceCounts[piece];
        for (char c : piece)
            w.symbols.push_back(firstByte + static_cast<std::uint8_t>(c));
        words.push_back(std::move(w));
    }

    PairIndex index;
    for (std::size_t i = 0; i < words.size(); ++i)
        index.add(words[i], i, +1);

    while (vocab.tokens.size() < options.vocabSize) {
        std::uint64_t best = 0;
        std::int64_t bestCount = 0;
        for (const auto& [key, count] : index.counts) {
            if (count < bestCount || count <= 0)
                continue;
            if (count == bestCount) {
                const auto& bl = vocab.tokens[best >> 32];
                const auto& br = vocab.tokens[best & 0xffffffffu];
                const auto& kl = vocab.tokens[key >> 32];
                const auto& kr = vocab.tokens[key & 0xffffffffu];
                if (std::tie(kl, kr) >= std::tie(bl, br))
                    continue;
            }
            best = key;
            bestCount = count;
        }
        if (bestCount < static_cast<std::int64_t>(std::max<std::size_t>(options.minPairCount, 1)))
            break;
        const auto left = static_cast<std::int32_t>(best >> 32);
        const auto right = static_cast<std::int32_t>(best & 0xffffffffu);
        const auto merged = static_cast<std::int32_t>(vocab.tokens.size());
        vocab.merges.push_back(vocab.tokens[left] + " " + vocab.tokens[right]);
        vocab.tokens.push_back(vocab.tokens[left] + vocab.tokens[right]);
        vocab.tokenTypes.push_back(1);

        const std::unordered_set<std::size_t> holders = std::move(index.where[best]);
        index.where.erase(best);
        for (const std::size_t wi : holders) {
            Word& w = words[wi];
            index.add(w, wi, -1);
            std::vector<std::int32_t> out;
            out.reserve(w.symbols.size());
            for (std::size_t i = 0; i < w.symbols.size(); ++i) {
                if (i + 1 < w.symbols.size() && w.symbols[i] == left &&
                    w.symbols[i + 1] == right) {
                    out.push_back(merged);
                    ++i;
                } else {
                    out.push_back(w.symbols[i]);
                }
            }
            w.symbols = std::move(out);
            index.add(w, wi, +1);
        }
        // Pairs no word holds any more (counts at 0) leave the index.
        for (auto it = index.counts.begin(); it != index.counts.end();)
            it = it->second <= 0 ? index.counts.erase(it) : std::next(it);
    }
    return vocab;
}

json byteLevelTokenizerJson(const BpeVocab& vocab)
{
    json added = json::array();
    json v = json::object();
    for (std::size_t id = 0; id < vocab.tokens.size(); ++id) {
        v[vocab.tokens[id]] = id;
        const bool control = id < vocab.tokenTypes.size() && vocab.tokenTypes[id] == 3;
        if (control)
            added.push_back({{"id", id},
                             {"content", vocab.tokens[id]},
                             {"single_word", false},
                             {"lstrip", false},
                             {"rstrip", false},
                             {"normalized", false},
                             {"special", true}});
    }
    json merges = json::array();
    for (const auto& m : vocab.merges) {
        const auto space = m.find(' ');
        merges.push_back(json::array({m.substr(0, space), m.substr(space + 1)}));
    }
    const json byteLevel = {{"type", "ByteLevel"},
                            {"add_prefix_space", false},
                            {"trim_offsets", true},
                            {"use_regex", true}};
    return {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens", added},
            {"normalizer", nullptr},
            {"pre_tokenizer", byteLevel},
            {"post_processor", nullptr},
            {"decoder", byteLevel},
            {"model",
             {{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", nullptr},
              {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr},
              {"fuse_unk", false},
              {"byte_fallback", false},
              {"ignore_merges", false},
              {"vocab", v},
              {"merges", merges}}}};
}

} // namespace bitlens::text
