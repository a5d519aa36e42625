#include "zoo/zoo.h"

#include "analysis/metrics.h"
#include "io/dataset.h"
#include "io/file_util.h"
#include "io/onnx.h"
#include "zoo/fashion_cnn.h"

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

ZooModel describe(const std::string& name)
{
    ZooModel m;
    m.entry = fashionEntry();
    m.modelPath = modelDir(name) + "/model.onnx";
    m.calibData = fashionFile("train-images-idx3-ubyte.gz");
    m.evalData = fashionFile("t10k-images-idx3-ubyte.gz");
    return m;
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

} // namespace

std::vector<ZooEntry> list() { return {fashionEntry()}; }

bool isZooName(const std::string& name)
{
    for (const auto& e : list())
        if (e.name == name)
            return true;
    return false;
}

std::string cacheDir()
{
    if (const char* dir = std::getenv("BITLENS_CACHE"); dir && *dir)
        return dir;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
        return std::string(xdg) + "/bitlens";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : "/tmp") + "/.cache/bitlens";
}

bool isBuilt(const std::string& name)
{
    if (!isZooName(name))
        return false;
    const ZooModel m = describe(name);
    std::ifstream in(modelDir(name) + "/meta.json");
    if (!in || !fs::exists(m.modelPath))
        return false;
    const auto meta = nlohmann::json::parse(in, nullptr, false);
    return !meta.is_discarded() && meta.value("zoo_format", 0) == kZooFormatVersion;
}

Result<ZooModel> build(const std::string& name, Progress& progress, const CancelToken& cancel)
{
    if (name == "fashion-cnn")
        return buildFashionCnn(progress, cancel);
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
