#include "model_loader.h"

#include <utility>

namespace bitlens::widgets {

Result<OpenedModel> openModelForGui(const std::string& request, Progress& progress,
                                    const CancelToken& cancel)
{
    return zoo::openRequestedModel(request, progress, cancel);
}

Result<DataInfo> openDataForGui(const std::string& path, Progress& progress,
                                const CancelToken& cancel, std::shared_ptr<Model> model)
{
    return zoo::openRequestedData(path, progress, cancel, std::move(model));
}

} // namespace bitlens::widgets
