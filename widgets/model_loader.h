#pragma once
// The jobs behind File > Open Model and File > Open Data, as plain functions the GUI runs on a
// JobRunner. The work (and every tensor) is in core (zoo/open_request.h); the widgets see only
// the plain descriptions it returns.

#include "zoo/open_request.h"

#include <memory>
#include <string>

namespace bitlens::widgets {

/// One weight tensor a layer reads, as the details panel lists it.
using WeightInfo = zoo::WeightInfo;
/// A model opened for the GUI: the core model plus what its panels show.
using OpenedModel = zoo::OpenedModel;
/// A data set opened for the GUI.
using DataInfo = zoo::DataInfo;

/// The Open Model job: zoo::openRequestedModel (a file, or a zoo name built first if needed).
Result<OpenedModel> openModelForGui(const std::string& request, Progress& progress,
                                    const CancelToken& cancel);

/// The Open Data job: zoo::openRequestedData (text needs a model with a tokenizer).
Result<DataInfo> openDataForGui(const std::string& path, Progress& progress,
                                const CancelToken& cancel,
                                std::shared_ptr<Model> model = nullptr);

} // namespace bitlens::widgets
