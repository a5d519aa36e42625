#include "model/model_data.h"

#include "ir/graph.h"
#include "text/text_data.h"
#include "text/tokenizer.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace bitlens {

bool isTextData(const std::string& path) { return text::isTextDataPath(path); }

std::int64_t contextLength(const Model& model)
{
    const auto it = model.graph().metadata.find("context_length");
    if (it == model.graph().metadata.end())
        return 0;
    try {
        return std::stoll(it->second);
    } catch (const std::exception&) {
        return 0;
    }
}

std::int64_t defaultTextRowLength(const Model& model)
{
    const std::int64_t length = model.summary().task == "lm" ? kLmSeqLen : kEncoderSeqLen;
    const std::int64_t context = contextLength(model);
    return context > 1 ? std::min(length, context) : length;
}

Result<io::Dataset> loadModelData(const Model& model, const std::string& path,
                                  const std::string& split, const ModelDataOptions& options,
                                  Progress& progress, const CancelToken& cancel)
{
    if (options.limit < 0 || options.seqLen < 0 || options.maxTokens < 0)
        return Error::usage("sample, sequence and token limits must not be negative");
    if (!text::isTextDataPath(path)) {
        auto data = io::loadDataset(path, split, options.limit, progress, cancel);
        if (!data)
            return data;
        // Checked here, on the file's own shape: the executor would only see a batch of it
        // (a 1-D array of 784 values is 784 samples of nothing, not one image).
        const auto& inputs = model.graph().inputs;
        if (inputs.size() == 1 && data->size() > 0 && !inputs[0].shape.empty()) {
            const auto& want = inputs[0].shape;
            bool fits = data->inputs.dim() == static_cast<std::int64_t>(want.size());
            for (std::size_t d = 1; fits && d < want.size(); ++d)
                fits = want[d] < 0 || want[d] == data->inputs.size(static_cast<std::int64_t>(d));
            if (!fits) {
                std::string got = "[";
                for (std::int64_t d = 0; d < data->inputs.dim(); ++d)
                    got += (d ? ", " : "") + std::to_string(data->inputs.size(d));
                std::string expected = "[N";
                for (std::size_t d = 1; d < want.size(); ++d)
                    expected += ", " + (want[d] < 0 ? std::string("?") : std::to_string(want[d]));
                return Error::badInput(path, "holds an array of shape " + got +
                                                 "]; the model expects " + expected +
                                                 "] for input '" + inputs[0].name + "'");
            }
        }
        return data;
    }

    const auto& tokenizer = model.tokenizer();
    if (!tokenizer)
        return Error::unsupported(model.path(),
                                  "has no tokenizer (no tokenizer.json or vocab.txt beside it), "
                                  "so the text " + path + " cannot be used with it");
    const bool lm = model.summary().task == "lm";
    const bool calibration = split == "train";
    text::TextDataOptions t;
    t.layout = lm ? text::TextLayout::Stream : text::TextLayout::Lines;
    // Rows longer than the model's context would run positions it never saw (or has no
    // position embedding for): the default is cut to it, a longer --seq-len is refused.
    const std::int64_t context = contextLength(model);
    t.seqLen = options.seqLen > 0 ? options.seqLen : defaultTextRowLength(model);
    if (context > 1 && t.seqLen > context)
        return Error::usage("sequence length " + std::to_string(t.seqLen) +
                            " is longer than the model's context of " + std::to_string(context) +
                            " tokens");
    if (lm) {
        std::int64_t windows = options.limit > 0 ? options.limit
                               : calibration     ? kLmCalibWindows
                                                 : kLmEvalWindows;
        if (options.maxTokens > 0)
            windows = (options.maxTokens + t.seqLen - 1) / t.seqLen;
        t.stride = t.seqLen;
        t.maxSamples = windows;
        t.maxTokens = windows * t.seqLen;
    } else {
        t.maxSamples = options.limit > 0 ? options.limit
                       : calibration     ? kEncoderCalibLines
                                         : kEncoderEvalLines;
    }
    auto data = text::loadTextDataset(path, *tokenizer, t, progress, cancel);
    if (!data)
        return data.error();

    at::Tensor ids = data->inputIds;
    at::Tensor mask = data->attentionMask;
    if (lm) {
        // A last window the text did not fill ends in padding that perplexity would score.
        const std::int64_t rows = ids.size(0);
        if (rows > 1 && mask[rows - 1].sum().item<std::int64_t>() < t.seqLen)
            ids = ids.slice(0, 0, rows - 1);
    } else {
        // Rows are padded to seqLen; cut the columns no line reaches (the attention mask makes
        // the padding invisible, so this only saves work).
        const std::int64_t longest = mask.sum(1).max().item<std::int64_t>();
        ids = ids.slice(1, 0, std::max<std::int64_t>(longest, 2)).contiguous();
    }
    io::Dataset dataset;
    dataset.path = path;
    dataset.kind = "text";
    dataset.inputs = ids;
    return dataset;
}

} // namespace bitlens
