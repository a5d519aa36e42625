// Tokenizer throughput on the King James Bible (4.4 MB, ~1M tokens), one
// thread, whole text per encode. scripts/bench-tokenize runs these next to the
// pip `tokenizers` package on the same text and prints the ratio. The
// tokenizers come from the zoo (minilm-l6's WordPiece) and from
// $BITLENS_BENCH_BPE (a tokenizer.json; the script builds SmolLM2's from its
// GGUF).

#include "text/tokenizer.h"
#include "zoo/packages.h"
#include "zoo/zoo.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace {

using namespace bitlens;

const std::string& bibleText()
{
    static const std::string text = [] {
        const zoo::KjvText kjv = zoo::kjvTextPaths();
        std::string all;
        for (const auto& path : {kjv.calibPath, kjv.evalPath}) {
            std::ifstream in(path);
            std::stringstream ss;
            ss << in.rdbuf();
            all += ss.str();
        }
        return all;
    }();
    return text;
}

void runTokenizer(benchmark::State& state, const std::string& path)
{
    if (path.empty() || bibleText().empty()) {
        state.SkipWithError("tokenizer or KJV text missing (zoo build minilm-l6; "
                            "scripts/bench-tokenize)");
        return;
    }
    auto tokenizer = text::loadTokenizer(path);
    if (!tokenizer) {
        state.SkipWithError(tokenizer.error().userMessage().c_str());
        return;
    }
    std::size_t tokens = 0;
    for (auto _ : state) {
        const auto enc = (*tokenizer)->encode(bibleText());
        tokens = enc.size();
        benchmark::DoNotOptimize(enc.ids.data());
    }
    state.counters["tokens"] = static_cast<double>(tokens);
    state.counters["tokens_per_s"] = benchmark::Counter(
        static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["bytes_per_s"] = benchmark::Counter(
        static_cast<double>(bibleText().size()), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_TokenizeKjvWordPiece(benchmark::State& state)
{
    const bool built = zoo::isBuilt("minilm-l6");
    runTokenizer(state, built ? zoo::ensure("minilm-l6")->tokenizerPath : std::string());
}
BENCHMARK(BM_TokenizeKjvWordPiece)->Unit(benchmark::kMillisecond);

void BM_TokenizeKjvBpe(benchmark::State& state)
{
    const char* path = std::getenv("BITLENS_BENCH_BPE");
    runTokenizer(state, path ? path : "");
}
BENCHMARK(BM_TokenizeKjvBpe)->Unit(benchmark::kMillisecond);

} // namespace
