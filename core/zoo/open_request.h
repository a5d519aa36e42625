#pragma once
// Opening what a person asks for, as plain descriptions without tensors (the GUI's File > Open
// Model and File > Open Data jobs call these): a model file, or a zoo name (built first when
// needed), with each layer's weights listed; a data set, summarized.

#include "jobs/progress.h"
#include "jobs/result.h"
#include "model/model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bitlens::zoo {

/// One weight tensor (initializer) a layer reads.
struct WeightInfo {
    std::string name;                 ///< initializer name, e.g. "conv1.weight"
    std::string dtype;                ///< "float32", "int8", ... (ir::dtypeName's spelling)
    std::vector<std::int64_t> shape;  ///< its shape
    std::int64_t bytes = 0;           ///< bytes as stored
};

/// A model opened on request: the core model plus what a viewer lists about it.
struct OpenedModel {
    std::shared_ptr<Model> model;
    std::string request;      ///< what was asked for: a path or a zoo name
    std::string zooName;      ///< the zoo name when `request` named a zoo model, else empty
    std::string displayName;  ///< zoo name, else graph name, else the file's base name
    std::vector<std::vector<WeightInfo>> layerWeights;  ///< parallel to summary().layers
};

/// A data set opened on request (io::DatasetSummary without its tensors).
struct DataInfo {
    std::string path;
    std::string kind;                       ///< "idx", "image-folder", "npy", "npz", "text"
    std::int64_t samples = 0;               ///< samples in the split that was read
    std::vector<std::int64_t> sampleShape;  ///< one sample, without the batch dimension
    std::int64_t classes = 0;               ///< 0 when unlabelled
};

/// Opens `request` (a model file, or a zoo name when no such file exists; the zoo model is
/// built first if needed, which trains for minutes) and lists each layer's weights. Runs the
/// open under c10::InferenceMode on the calling thread (not the zoo build, which trains).
/// Exceptions become Errors naming `request`.
Result<OpenedModel> openRequestedModel(const std::string& request, Progress& progress,
                                       const CancelToken& cancel);

/// Loads the data set at `path` (test split for IDX folders) and summarizes it. Text (.txt)
/// is tokenized for `model` (token windows or lines, as a run will use it); without a model
/// it is refused (Usage). Exceptions become Errors naming `path`.
Result<DataInfo> openRequestedData(const std::string& path, Progress& progress,
                                   const CancelToken& cancel,
                                   std::shared_ptr<Model> model = nullptr);

} // namespace bitlens::zoo
