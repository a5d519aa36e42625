#include "text/text_data.h"

#include "io/file_util.h"
#include "text/unicode.h"

#include <ATen/ATen.h>

#include <filesystem>

namespace bitlens::text {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kMaxSeqLen = 1 << 20;
/// Refuses data sets with more token slots than this (2 GiB of int64 ids).
constexpr std::int64_t kMaxSlots = std::int64_t{1} << 28;
/// Extra tokens read past maxTokens, so that the cut in the text cannot change
/// the tokens kept.
constexpr std::size_t kCutMargin = 256;

/// Where to cut `text` at or after `bytes`: the start of a line that begins
/// with a non-space character, so no pre-tokenizer piece spans the cut. npos:
/// no such place.
std::size_t cutAfter(std::string_view text, std::size_t bytes)
{
    std::size_t pos = bytes;
    while (pos < text.size()) {
        const std::size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos || nl + 1 >= text.size())
            return std::string_view::npos;
        const char next = text[nl + 1];
        if (next != ' ' && next != '\t' && next != '\n' && next != '\r')
            return nl + 1;
        pos = nl + 1;
    }
    return std::string_view::npos;
}

/// The token stream of a text, at most maxTokens (0 = all) tokens of it.
std::vector<std::int32_t> streamTokens(std::string_view text, const Tokenizer& tokenizer,
                                       const TextDataOptions& options)
{
    EncodeOptions plain;
    plain.addSpecialTokens = false;
    std::vector<std::int32_t> ids;
    bool whole = true;
    if (options.maxTokens > 0) {
        // Tokenize a prefix that surely holds maxTokens tokens (about 4 bytes a
        // token in English; doubled until enough), not the whole file.
        std::size_t bytes = static_cast<std::size_t>(options.maxTokens) * 6 + 4096;
        while (true) {
            const std::size_t cut = cutAfter(text, bytes);
            if (cut == std::string_view::npos) {
                ids = tokenizer.encode(text, plain).ids;
                break;
            }
            ids = tokenizer.encode(text.substr(0, cut), plain).ids;
            if (ids.size() >= static_cast<std::size_t>(options.maxTokens) + kCutMargin) {
                whole = false;
                break;
            }
            bytes = cut * 2;
        }
    } else {
        ids = tokenizer.encode(text, plain).ids;
    }
    if (options.addSpecialTokens) {
        const SpecialFrame& frame = tokenizer.frame();
        ids.insert(ids.begin(), frame.prefix.begin(), frame.prefix.end());
        if (whole)
            ids.insert(ids.end(), frame.suffix.begin(), frame.suffix.end());
    }
    if (options.maxTokens > 0 && ids.size() > static_cast<std::size_t>(options.maxTokens))
        ids.resize(static_cast<std::size_t>(options.maxTokens));
    return ids;
}

} // namespace

bool isTextDataPath(const std::string& path) { return fs::path(path).extension() == ".txt"; }

Result<TextDataset> textDatasetFromString(std::string_view text, const std::string& path,
                                          const Tokenizer& tokenizer,
                                          const TextDataOptions& options, Progress& progress,
                                          const CancelToken& cancel)
{
    if (options.seqLen < 2 || options.seqLen > kMaxSeqLen)
        return Error::usage("sequence length must be in [2, 1048576], not " +
                            std::to_string(options.seqLen));
    const std::int64_t stride = options.stride > 0 ? options.stride : options.seqLen;
    if (stride > options.seqLen)
        return Error::usage("stride " + std::to_string(stride) +
                            " is longer than the sequence length " +
                            std::to_string(options.seqLen));
    if (options.maxTokens < 0 || options.maxSamples < 0)
        return Error::usage("token and sample limits must not be negative");
    if (const auto bad = unicode::findInvalidUtf8(text); bad != std::string_view::npos)
        return Error::badInput(path, "not UTF-8 text", bad);

    TextDataset data;
    data.path = path;
    data.seqLen = options.seqLen;
    data.padId = tokenizer.padId();
    const std::int64_t L = options.seqLen;
    std::vector<std::vector<std::int32_t>> samples; // Lines: one per line
    std::vector<std::int32_t> stream;               // Stream: the whole token stream
    std::int64_t rows = 0;

    progress.report(0.0, "tokenizing " + fs::path(path).filename().string());
    if (options.layout == TextLayout::Stream) {
        data.layout = "stream";
        data.stride = stride;
        stream = streamTokens(text, tokenizer, options);
        const auto n = static_cast<std::int64_t>(stream.size());
        if (n < 2)
            return Error::badInput(path, "the text holds fewer than 2 tokens");
        rows = n <= L ? 1 : 1 + (n - L + stride - 1) / stride;
        if (options.maxSamples > 0)
            rows = std::min(rows, options.maxSamples);
        data.tokens = std::min(n, L + (rows - 1) * stride);
    } else {
        data.layout = "lines";
        data.stride = L;
        EncodeOptions enc;
        enc.addSpecialTokens = options.addSpecialTokens;
        enc.maxLength = static_cast<std::size_t>(L);
        std::size_t pos = 0;
        while (pos < text.size()) {
            if (cancel.cancelled())
                return Error::cancelled();
            std::size_t end = text.find('\n', pos);
            if (end == std::string_view::npos)
                end = text.size();
            std::string_view line = text.substr(pos, end - pos);
            pos = end + 1;
            if (line.find_first_not_of(" \t\r\f\v") == std::string_view::npos)
                continue;
            if (!line.empty() && line.back() == '\r')
                line.remove_suffix(1);
            samples.push_back(tokenizer.encode(line, enc).ids);
            if (samples.size() % 1000 == 0)
                progress.report(static_cast<double>(pos) / static_cast<double>(text.size()),
                                "tokenizing lines");
            if (options.maxSamples > 0 &&
                static_cast<std::int64_t>(samples.size()) >= options.maxSamples)
                break;
        }
        if (samples.empty())
            return Error::badInput(path, "the text has no non-empty line");
        rows = static_cast<std::int64_t>(samples.size());
        for (const auto& s : samples)
            data.tokens += static_cast<std::int64_t>(s.size());
    }
    if (cancel.cancelled())
        return Error::cancelled();
    if (rows > kMaxSlots / L)
        return Error::badInput(path, std::to_string(rows) + " samples of " + std::to_string(L) +
                                         " tokens are more than BitLens holds in memory");

    data.inputIds = at::full({rows, L}, static_cast<std::int64_t>(data.padId), at::kLong);
    data.attentionMask = at::zeros({rows, L}, at::kLong);
    auto* ids = data.inputIds.data_ptr<std::int64_t>();
    auto* mask = data.attentionMask.data_ptr<std::int64_t>();
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int32_t* src = nullptr;
        std::int64_t count = 0;
        if (options.layout == TextLayout::Stream) {
            const std::int64_t start = r * stride;
            src = stream.data() + start;
            count = std::min(L, static_cast<std::int64_t>(stream.size()) - start);
        } else {
            src = samples[static_cast<std::size_t>(r)].data();
            count = static_cast<std::int64_t>(samples[static_cast<std::size_t>(r)].size());
        }
        for (std::int64_t k = 0; k < count; ++k) {
            ids[r * L + k] = src[k];
            mask[r * L + k] = 1;
        }
    }
    progress.report(1.0, "tokenized");
    return data;
}

Result<TextDataset> loadTextDataset(const std::string& path, const Tokenizer& tokenizer,
                                    const TextDataOptions& options, Progress& progress,
                                    const CancelToken& cancel)
{
    std::error_code ec;
    if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) > kMaxTextFileBytes)
        return Error::badInput(path, "text file is larger than 1 GiB");
    auto bytes = io::readFileBytes(path);
    if (!bytes)
        return bytes.error();
    const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    return textDatasetFromString(text, path, tokenizer, options, progress, cancel);
}

} // namespace bitlens::text
