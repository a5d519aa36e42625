#pragma once
// Calibration and evaluation data for an open model, the one place the CLI and the GUI load
// it: image and array files go to io::loadDataset; a text file (text::isTextDataPath) is cut
// into token rows with the model's own tokenizer — language models read it as one token
// stream in contiguous windows, encoders one line (sentence, verse) per row, framed by their
// special tokens and padded (the attention mask follows from the padding id).

#include "io/dataset.h"
#include "model/data_defaults.h"
#include "jobs/progress.h"
#include "jobs/result.h"
#include "model/model.h"

#include <cstdint>
#include <string>

namespace bitlens {

/// How much of a data file is read, and how text is cut.
struct ModelDataOptions {
    /// Samples kept: images / rows, or token windows (LMs) / lines (encoders) of text;
    /// 0 = all of a non-text file, the defaults above for text.
    std::int64_t limit = 0;
    std::int64_t seqLen = 0;    ///< text: window / row length in tokens; 0 = the default,
                                ///< cut to the model's context (a longer one is refused)
    std::int64_t maxTokens = 0; ///< LM text: token budget (windows = ceil(tokens / seqLen));
                                ///< overrides limit; 0 = none
};

/// Loads `path` for `model`: `split` ("train" for calibration, "test" for evaluation) picks the
/// IDX files of a folder and the text defaults. Text: int64 token ids [N, S] in
/// Dataset::inputs, kind "text"; a language model's windows do not overlap, and a last
/// window the text does not fill is dropped when there are others (perplexity would score
/// its padding); encoder rows are cut to the longest line read. Text for a model without a
/// tokenizer is Unsupported (naming the model); bad text is BadInput naming the file.
Result<io::Dataset> loadModelData(const Model& model, const std::string& path,
                                  const std::string& split, const ModelDataOptions& options = {},
                                  Progress& progress = Progress::none(),
                                  const CancelToken& cancel = CancelToken());

/// True when `path` is text that loadModelData tokenizes (a .txt file).
bool isTextData(const std::string& path);

} // namespace bitlens
