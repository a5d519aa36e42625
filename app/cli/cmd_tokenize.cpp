// bitlens-cli tokenize MODEL --text FILE [--json] [--no-special]: the token ids
// a language model sees for a text file, from the model's own tokenizer.

#include "io/file_util.h"
#include "text/tokenizer.h"
#include "zoo/zoo.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli.h"

namespace bitlens::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kTokenizeUsage =
    "usage: bitlens-cli tokenize MODEL --text FILE [--json] [--no-special]";
/// Largest text the command tokenizes (64 MiB).
constexpr std::uintmax_t kMaxTokenizeBytes = 64u << 20;

/// The tokenizer file of a MODEL argument: a zoo name, a tokenizer.json, a
/// vocab.txt, a folder holding one, or a model file whose folder holds one.
Result<std::string> tokenizerPathFor(const std::string& arg, bool quiet)
{
    std::error_code ec;
    if (zoo::isZooName(arg) && !fs::exists(arg, ec)) {
        Progress progress = stderrProgress(quiet);
        auto built = zoo::ensure(arg, progress);
        if (!built)
            return built.error();
        if (built->tokenizerPath.empty())
            return Error::unsupported(arg, "this zoo model has no tokenizer (it is not a "
                                           "language model)");
        return built->tokenizerPath;
    }
    if (!fs::exists(arg, ec))
        return Error::badInput(arg, "cannot open file: No such file or directory");
    const std::string ext = fs::path(arg).extension().string();
    if (fs::is_directory(arg, ec) || ext == ".json" || ext == ".txt" || ext == ".gguf")
        return arg;
    // A model file (model.safetensors, model.onnx): its tokenizer sits beside it.
    const fs::path dir =
        fs::path(arg).parent_path().empty() ? fs::path(".") : fs::path(arg).parent_path();
    for (const char* name : {"tokenizer.json", "vocab.txt"})
        if (fs::is_regular_file(dir / name, ec))
            return (dir / name).string();
    return Error::badInput(arg, "no tokenizer.json or vocab.txt beside this model");
}

} // namespace

int cmdTokenize(const Args& args)
{
    if (args.positional.size() != 1 || !args.has("--text"))
        return fail(Error::usage(kTokenizeUsage));
    const bool quiet = args.has("--quiet") || args.has("--json");
    auto tokenizerPath = tokenizerPathFor(args.positional[0], quiet);
    if (!tokenizerPath)
        return fail(tokenizerPath.error());
    auto tokenizer = text::loadTokenizer(*tokenizerPath);
    if (!tokenizer)
        return fail(tokenizer.error());

    const std::string textPath = args.get("--text");
    std::error_code ec;
    if (fs::is_regular_file(textPath, ec) && fs::file_size(textPath, ec) > kMaxTokenizeBytes)
        return fail(Error::badInput(textPath, "text file is larger than 64 MiB"));
    auto bytes = io::readFileBytes(textPath);
    if (!bytes)
        return fail(bytes.error());
    const std::string_view textView(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    text::EncodeOptions options;
    options.addSpecialTokens = !args.has("--no-special");
    const text::Encoding enc = (*tokenizer)->encode(textView, options);

    if (args.has("--json")) {
        const nlohmann::json j = {{"tokenizer", (*tokenizer)->kind()},
                                  {"tokenizer_path", *tokenizerPath},
                                  {"tokens", enc.tokens},
                                  {"ids", enc.ids},
                                  {"count", enc.size()}};
        // Tokens of a partial UTF-8 sequence are not valid UTF-8; show them as
        // U+FFFD.
        std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return 0;
    }
    for (std::size_t i = 0; i < enc.size(); ++i)
        std::printf("%d\t%s\n", enc.ids[i], enc.tokens[i].c_str());
    if (!args.has("--quiet"))
        std::fprintf(stderr, "%zu tokens (%s, %s)\n", enc.size(), (*tokenizer)->kind().c_str(),
                     tokenizerPath->c_str());
    return 0;
}

} // namespace bitlens::cli
