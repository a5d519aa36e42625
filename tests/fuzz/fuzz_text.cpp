// libFuzzer target for the text data reader: the input as a text file tokenized into windows
// (stream and lines layouts) by the WordPiece and byte-level BPE tokenizers of tests/data/text.

#include "fuzz_common.h"
#include "text/text_data.h"
#include "text/tokenizer.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <memory>

#ifndef BITLENS_TEST_DATA
#error "BITLENS_TEST_DATA must name tests/data"
#endif

namespace {
std::unique_ptr<bitlens::text::Tokenizer> load(const char* name)
{
    auto tok = bitlens::text::loadTokenizer(std::string(BITLENS_TEST_DATA) + "/text/" + name);
    if (!tok.ok()) {
        std::fprintf(stderr, "%s\n", tok.error().userMessage().c_str());
        std::abort();
    }
    return std::move(tok).value();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static const auto wordpiece = load("wp_vocab.txt");
    static const auto bpe = load("bpe_gpt2.json");
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    for (const auto* tok : {wordpiece.get(), bpe.get()}) {
        for (auto layout : {bitlens::text::TextLayout::Stream, bitlens::text::TextLayout::Lines}) {
            bitlens::text::TextDataOptions options;
            options.layout = layout;
            options.seqLen = 16;
            options.stride = 8;
            auto dataset = bitlens::text::textDatasetFromString(text, "fuzz.txt", *tok, options);
            if (!dataset.ok())
                bitlens::fuzz::checkError(dataset.error(), "fuzz.txt");
        }
    }
    return 0;
}
