#pragma once
// The jobs behind File > Open Model and File > Open Data, as plain functions the GUI runs on a
// JobRunner. Only model_loader.cpp sees tensor types: it turns a graph's weights and a data set
// into plain descriptions the widgets can show.

#include "jobs/progress.h"
#include "jobs/result.h"
#include "model/model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bitlens::widgets {

/// One weight tensor (initializer) a layer reads, as the details panel lists it.
struct WeightInfo {
    std::string name;                 ///< initializer name, e.g. "conv1.weight"
    std::string dtype;                ///< "float32", ...
    std::vector<std::int64_t> shape;  ///< its shape
    std::int64_t bytes = 0;           ///< bytes as stored
};

/// A model opened for the GUI: the core model plus what its panels show.
struct OpenedModel {
    std::shared_ptr<Model> model;
    std::string request;      ///< what was asked for: a path or a zoo name
    std::string zooName;      ///< the zoo name when `request` named a zoo model, else empty
    std::string displayName;  ///< zoo name, else graph name, else the file's base name
    std::vector<std::vector<WeightInfo>> layerWeights;  ///< parallel to summary().layers
};

/// A data set opened for the GUI (mirrors io::DatasetSummary, whose header holds tensors).
struct DataInfo {
    std::string path;
    std::string kind;                       ///< "idx", "image-folder", "npy", "npz", "text"
    std::int64_t samples = 0;               ///< samples in the split that was read
    std::vector<std::int64_t> sampleShape;  ///< one sample, without the batch dimension
    std::int64_t classes = 0;               ///< 0 when unlabelled
};

/// Opens `request` (a model file, or a zoo name when no such file exists; the zoo model is
/// built first if needed, which trains for minutes) and collects each layer's weights.
Result<OpenedModel> openModelForGui(const std::string& request, Progress& progress,
                                    const CancelToken& cancel);

/// Loads the data set at `path` (test split for IDX folders) and summarizes it. Text (.txt)
/// is tokenized for `model` (token windows or lines, as a run will use it); without a model
/// that has a tokenizer it is refused.
Result<DataInfo> openDataForGui(const std::string& path, Progress& progress,
                                const CancelToken& cancel,
                                std::shared_ptr<Model> model = nullptr);

} // namespace bitlens::widgets
