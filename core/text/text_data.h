#pragma once
// Text data for language models: a plain UTF-8 .txt file becomes token windows
// [N, seq_len] for calibration and evaluation. Language models read the text as
// one stream cut into contiguous windows (with a stride); encoders read one
// sample per line, framed by their special tokens and padded.

#include "jobs/progress.h"
#include "jobs/result.h"
#include "text/tokenizer.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace bitlens::text {

/// How a text file becomes samples.
enum class TextLayout {
    Stream, ///< language models: the whole file as one token stream, cut into
            ///< windows
    Lines,  ///< encoders: each non-empty line is one sample ([CLS] line [SEP] +
            ///< padding)
};

/// Options of loadTextDataset().
struct TextDataOptions {
    TextLayout layout = TextLayout::Stream;
    std::int64_t seqLen = 128;    ///< tokens per sample (window length, or padded length)
    std::int64_t stride = 0;      ///< Stream: start of window k is k * stride; 0 = seqLen
    std::int64_t maxTokens = 0;   ///< Stream: use the first maxTokens tokens only; 0 = all
    std::int64_t maxSamples = 0;  ///< keep the first maxSamples samples; 0 = all
    bool addSpecialTokens = true; ///< Stream: the post-processor's tokens around the whole text
                                  ///< (BOS for Llama 3); Lines: around each line
};

/// Token windows held in memory.
struct TextDataset {
    std::string path;         ///< the text file
    std::string layout;       ///< "stream" or "lines"
    at::Tensor inputIds;      ///< int64 [N, seqLen]
    at::Tensor attentionMask; ///< int64 [N, seqLen], 1 = token, 0 = padding
    std::int64_t seqLen = 0;
    std::int64_t stride = 0; ///< Stream: window step; in window k > 0 only the last
                             ///< `stride` positions are new (the rest is context)
    std::int64_t tokens = 0; ///< distinct text tokens covered (padding not counted)
    std::int64_t padId = 0;

    std::int64_t size() const { return inputIds.defined() ? inputIds.size(0) : 0; }
};

/// Largest text file loadTextDataset() reads (1 GiB).
inline constexpr std::uint64_t kMaxTextFileBytes = 1ull << 30;

/// Reads a UTF-8 text file (BadInput naming the byte offset of the first
/// invalid sequence) and tokenizes it into windows. seqLen in [2, 1Mi]; a last,
/// shorter Stream window is padded.
Result<TextDataset> loadTextDataset(const std::string& path, const Tokenizer& tokenizer,
                                    const TextDataOptions& options = {},
                                    Progress& progress = Progress::none(),
                                    const CancelToken& cancel = CancelToken());

/// The same from text already in memory; `path` names it in messages.
Result<TextDataset> textDatasetFromString(std::string_view text, const std::string& path,
                                          const Tokenizer& tokenizer,
                                          const TextDataOptions& options = {},
                                          Progress& progress = Progress::none(),
                                          const CancelToken& cancel = CancelToken());

/// True when `path` looks like a text data file (.txt).
bool isTextDataPath(const std::string& path);

} // namespace bitlens::text
