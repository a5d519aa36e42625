// libFuzzer target for the tokenizer loader: the input as a tokenizer.json (when it starts with
// '{') or a BERT vocab.txt, then a fixed text and the input itself encoded and decoded.

#include "fuzz_common.h"
#include "text/tokenizer.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static bitlens::fuzz::ScratchCleanup cleanup;
    const bool json = size > 0 && data[0] == '{';
    const std::string path =
        bitlens::fuzz::writeScratch(json ? "tok/tokenizer.json" : "tok/vocab.txt", data, size);
    auto tokenizer = bitlens::text::loadTokenizer(path);
    if (!tokenizer.ok()) {
        bitlens::fuzz::checkError(tokenizer.error(), tokenizer.error().path.empty()
                                                         ? path
                                                         : tokenizer.error().path);
        return 0;
    }
    const auto& tok = **tokenizer;
    const std::string_view texts[] = {
        "Hello, world! Ünïcödé ½ 東京 [CLS] <|endoftext|>  tabs\tand\nnewlines",
        std::string_view(reinterpret_cast<const char*>(data), std::min<std::size_t>(size, 256))};
    for (std::string_view text : texts) {
        bitlens::text::EncodeOptions options;
        options.maxLength = 64;
        options.padTo = 64;
        const auto encoding = tok.encode(text, options);
        (void)tok.decode(encoding.ids, true);
        (void)tok.decode(encoding.ids, false);
    }
    for (std::int32_t id : {-1, 0, 1, static_cast<std::int32_t>(tok.vocabSize()), 1 << 30})
        (void)tok.tokenText(id);
    return 0;
}
