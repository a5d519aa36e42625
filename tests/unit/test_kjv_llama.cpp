// The zoo's float language model: the byte-level BPE trainer (text/bpe_train) and the small
// llama trained through BitLens's executor (zoo/kjv_llama). The full-size build, its
// tokenizer against Hugging Face `tokenizers` and its logits against transformers run in
// tests/e2e/test_kjv_llama.sh.

#include "analysis/lm_metrics.h"
#include "model/hf_builders.h"
#include "text/bpe_train.h"
#include "zoo/kjv_llama.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace bitlens {
namespace {

const std::string kText =
    "In the beginning God created the heaven and the earth.\n"
    "And the earth was without form, and void; and darkness was upon the face of the deep.\n"
    "And God said, Let there be light: and there was light.\n"
    "And God saw the light, that it was good: and God divided the light from the darkness.\n";

std::string repeated(int times)
{
    std::string s;
    for (int i = 0; i < times; ++i)
        s += kText;
    return s;
}

TEST(BpeTrain, LearnsTheMostFrequentPairsFirstAndEncodesLosslessly)
{
    text::BpeTrainOptions options;
    options.vocabSize = 300;
    auto vocab = text::trainByteLevelBpe(repeated(3), options);
    ASSERT_TRUE(vocab.ok()) << vocab.error().userMessage();
    ASSERT_EQ(vocab->tokens.size(), 300u);
    EXPECT_EQ(vocab->tokens[0], "<|endoftext|>");
    EXPECT_EQ(vocab->tokens[1 + ' '], "\xC4\xA0");  // GPT-2's 'Ġ' stands for the space byte
    EXPECT_EQ(vocab->merges.size(), 300u - 257u);
    // "th" is the text's most frequent pair ("the", "that", "there"), so it is merged first.
    EXPECT_EQ(vocab->merges[0], "t h");

    const auto json = text::byteLevelTokenizerJson(*vocab);
    auto tok = text::BpeTokenizer::fromTokenizerJson(json, "trained");
    ASSERT_TRUE(tok.ok()) << tok.error().userMessage();
    EXPECT_EQ((*tok)->vocabSize(), 300u);
    EXPECT_EQ((*tok)->mergeCount(), vocab->merges.size());
    text::EncodeOptions plain;
    plain.addSpecialTokens = false;
    const std::string sample =
        "And God said unto the earth: light!\nNew words: qwx 1234 \xC3\xA9t\xC3\xA9";
    const auto enc = (*tok)->encode(sample, plain);
    EXPECT_EQ((*tok)->decode(enc.ids), sample);
    // Trained merges shorten the text: fewer ids than bytes on the training text.
    const auto trainEnc = (*tok)->encode(kText, plain);
    EXPECT_LT(trainEnc.ids.size() * 2, kText.size());
    // " the" is one token.
    const auto the = (*tok)->encode(" the", plain);
    EXPECT_EQ(the.ids.size(), 1u);
    EXPECT_EQ(the.tokens.at(0), "\xC4\xA0the");
    // The special token is split off and kept whole.
    const auto withEos = (*tok)->encode("light<|endoftext|>light", plain);
    EXPECT_NE(std::find(withEos.ids.begin(), withEos.ids.end(), 0), withEos.ids.end());

    // Deterministic: the same text gives the same vocabulary.
    auto again = text::trainByteLevelBpe(repeated(3), options);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->merges, vocab->merges);
}

TEST(BpeTrain, StopsWhenNoPairRepeatsAndRefusesAVocabularyTooSmall)
{
    text::BpeTrainOptions options;
    options.vocabSize = 4000;
    auto vocab = text::trainByteLevelBpe("abcabc xyz", options);
    ASSERT_TRUE(vocab.ok());
    EXPECT_LT(vocab->tokens.size(), 270u);  // only pairs seen twice are merged
    options.vocabSize = 200;
    auto tooSmall = text::trainByteLevelBpe("abc", options);
    ASSERT_FALSE(tooSmall.ok());
    EXPECT_NE(tooSmall.error().userMessage().find("256 byte symbols"), std::string::npos);
}

TEST(KjvLlama, TrainsThroughTheExecutorAndTheLossFalls)
{
    zoo::KjvLlamaRecipe recipe;
    recipe.vocab = 300;
    recipe.hidden = 32;
    recipe.layers = 2;
    recipe.heads = 2;
    recipe.kvHeads = 1;
    recipe.intermediate = 64;
    recipe.seqLen = 32;
    recipe.batchSize = 8;
    recipe.steps = 60;
    recipe.warmupSteps = 5;
    recipe.learningRate = 1e-2;
    text::BpeTrainOptions bpe;
    bpe.vocabSize = 300;
    const std::string textData = repeated(6);
    auto vocab = text::trainByteLevelBpe(textData, bpe);
    ASSERT_TRUE(vocab.ok());
    auto tok = text::BpeTokenizer::fromTokenizerJson(text::byteLevelTokenizerJson(*vocab), "t");
    ASSERT_TRUE(tok.ok());
    text::EncodeOptions plain;
    plain.addSpecialTokens = false;
    const auto idsVec = (*tok)->encode(textData, plain).ids;
    const at::Tensor ids = at::tensor(std::vector<std::int64_t>(idsVec.begin(), idsVec.end()));

    const auto config = zoo::kjvLlamaConfig(recipe);
    auto weights = zoo::initKjvLlama(recipe);
    const at::Tensor embedBefore = weights.at("model.embed_tokens.weight").clone();
    EXPECT_EQ(weights.count("lm_head.weight"), 0u);  // tied
    auto trained = zoo::trainKjvLlama(weights, config, ids, recipe, Progress::none(),
                                      CancelToken());
    ASSERT_TRUE(trained.ok()) << trained.error().userMessage();
    // Starts no worse than uniform over the 300 ids (ln 300 = 5.7; the first 10 steps already
    // learn) and learns this small, repeated text.
    EXPECT_LT(trained->firstLoss, std::log(300.0) + 0.3);
    EXPECT_LT(trained->finalLoss, 0.6 * trained->firstLoss);
    for (const auto& [name, t] : weights) {
        EXPECT_FALSE(t.requires_grad()) << name;
        EXPECT_TRUE(t.is_contiguous()) << name;
    }
    EXPECT_FALSE(at::equal(weights.at("model.embed_tokens.weight"), embedBefore));

    // The trained weights build the same HF llama graph, with a perplexity far below the
    // vocabulary size on windows of the text.
    auto graph = model::buildFromHfConfig(config, weights, "kjv-llama");
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    const at::Tensor windows = ids.slice(0, 0, 4 * 32).reshape({4, 32});
    auto ppl = analysis::evaluatePerplexity(*graph, windows, {});
    ASSERT_TRUE(ppl.ok()) << ppl.error().userMessage();
    EXPECT_LT(ppl->value, 20.0);
}

TEST(KjvLlama, CancelStopsTraining)
{
    zoo::KjvLlamaRecipe recipe;
    recipe.vocab = 260;
    recipe.hidden = 16;
    recipe.layers = 1;
    recipe.heads = 2;
    recipe.kvHeads = 2;
    recipe.intermediate = 32;
    recipe.seqLen = 8;
    recipe.steps = 1000;
    auto weights = zoo::initKjvLlama(recipe);
    CancelToken cancel;
    cancel.cancel();
    auto r = zoo::trainKjvLlama(weights, zoo::kjvLlamaConfig(recipe),
                                at::arange(200, at::kLong) % 260, recipe, Progress::none(),
                                cancel);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
}

} // namespace
} // namespace bitlens
