#pragma once
// The demo zoo: real models BitLens builds itself (or takes from installed packages) with the
// calibration and evaluation data that belong to them. Nothing is fetched from a hub.

#include "jobs/progress.h"
#include "jobs/result.h"

#include <string>
#include <vector>

namespace bitlens::zoo {

/// One zoo model.
struct ZooEntry {
    std::string name;         ///< "fashion-cnn"
    std::string description;  ///< one line
    std::string task;         ///< "image-classification"
    std::string metric;       ///< "top1"
};

/// A built zoo model with its data.
struct ZooModel {
    ZooEntry entry;
    std::string modelPath;  ///< the model file
    std::string calibData;  ///< data set path used for calibration (train split)
    std::string evalData;   ///< data set path used for evaluation (test split)
    std::string tokenizerPath; ///< text models: tokenizer.json / vocab.txt / the GGUF itself
};

/// All zoo entries.
std::vector<ZooEntry> list();
/// True when `name` is a zoo model name.
bool isZooName(const std::string& name);
/// BitLens' cache folder: $BITLENS_CACHE, else $XDG_CACHE_HOME/bitlens, else ~/.cache/bitlens.
std::string cacheDir();
/// True when the model file of `name` is built and current.
bool isBuilt(const std::string& name);
/// Builds `name` if it is not built yet (training takes minutes) and returns it.
Result<ZooModel> ensure(const std::string& name, Progress& progress = Progress::none(),
                        const CancelToken& cancel = CancelToken());
/// Builds `name` again even if it is cached.
Result<ZooModel> build(const std::string& name, Progress& progress = Progress::none(),
                       const CancelToken& cancel = CancelToken());

} // namespace bitlens::zoo
