#include "zoo/open_request.h"

#include "io/dataset.h"
#include "ir/graph.h"
#include "model/model_data.h"
#include "zoo/zoo.h"

#include <c10/core/InferenceMode.h>

#include <exception>
#include <filesystem>
#include <map>
#include <new>

namespace bitlens::zoo {

namespace {

namespace fs = std::filesystem;

/// Forwards a sub-job's progress into [begin, end] of the outer job's range.
Progress subProgress(Progress& outer, double begin, double end)
{
    return Progress([&outer, begin, end](double fraction, const std::string& stage) {
        outer.report(begin + (end - begin) * fraction, stage);
    });
}

/// Element type names as ir::dtypeName spells them ("float32", "int8", ...).
std::string dtypeText(c10::ScalarType type)
{
    switch (type) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::Float8_e4m3fn: return "float8_e4m3fn";
    case c10::ScalarType::Float8_e5m2: return "float8_e5m2";
    default: return c10::toString(type);
    }
}

std::vector<WeightInfo> weightsOf(const ir::Graph& graph, const ir::Node& node)
{
    std::vector<WeightInfo> weights;
    for (const std::string& input : node.inputs) {
        const at::Tensor* tensor = input.empty() ? nullptr : graph.initializer(input);
        if (!tensor || !tensor->defined())
            continue;
        WeightInfo info;
        info.name = input;
        info.dtype = dtypeText(tensor->scalar_type());
        info.shape.assign(tensor->sizes().begin(), tensor->sizes().end());
        info.bytes = static_cast<std::int64_t>(tensor->nbytes());
        weights.push_back(std::move(info));
    }
    return weights;
}

/// Weights per summary layer. Layers follow the graph's nodes one to one; when a reader ever
/// summarizes differently, layers are matched to nodes by name.
std::vector<std::vector<WeightInfo>> layerWeights(const Model& model)
{
    const ir::Graph& graph = model.graph();
    const auto& layers = model.summary().layers;
    std::vector<std::vector<WeightInfo>> result(layers.size());
    if (layers.size() == graph.nodes.size()) {
        for (std::size_t i = 0; i < layers.size(); ++i)
            result[i] = weightsOf(graph, graph.nodes[i]);
        return result;
    }
    std::map<std::string, const ir::Node*> byName;
    for (const ir::Node& node : graph.nodes)
        byName.emplace(node.name, &node);
    for (std::size_t i = 0; i < layers.size(); ++i)
        if (const auto it = byName.find(layers[i].name); it != byName.end())
            result[i] = weightsOf(graph, *it->second);
    return result;
}

Result<OpenedModel> openModelImpl(const std::string& request, Progress& progress,
                                  const CancelToken& cancel)
{
    OpenedModel opened;
    opened.request = request;
    std::string path = request;
    std::error_code ec;
    const bool fileExists = fs::exists(request, ec);
    if (!fileExists && isZooName(request)) {
        opened.zooName = request;
        Progress zooProgress = subProgress(progress, 0.0, 0.9);
        Result<ZooModel> built = ensure(request, zooProgress, cancel);
        if (!built)
            return built.error();
        path = built->modelPath;
    }
    if (cancel.cancelled())
        return Error::cancelled();
    // InferenceMode is per thread, so it is set here on the worker; not before the zoo build,
    // which trains with autograd.
    const c10::InferenceMode inferenceMode;
    Progress openProgress = subProgress(progress, opened.zooName.empty() ? 0.0 : 0.9, 1.0);
    Result<std::shared_ptr<Model>> model = openModel(path, openProgress, cancel);
    if (!model)
        return model.error();
    opened.model = std::move(model.value());
    if (cancel.cancelled())
        return Error::cancelled();
    opened.layerWeights = layerWeights(*opened.model);
    if (!opened.zooName.empty())
        opened.displayName = opened.zooName;
    else if (!opened.model->summary().name.empty())
        opened.displayName = opened.model->summary().name;
    else
        opened.displayName = fs::path(path).stem().string();
    progress.report(1.0, "done");
    return opened;
}

} // namespace

Result<OpenedModel> openRequestedModel(const std::string& request, Progress& progress,
                                    const CancelToken& cancel)
{
    try {
        return openModelImpl(request, progress, cancel);
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while opening the model", request);
    } catch (const std::exception& e) {
        return Error::runtime(e.what(), request);
    }
}

Result<DataInfo> openRequestedData(const std::string& path, Progress& progress,
                                const CancelToken& cancel, std::shared_ptr<Model> model)
{
    const c10::InferenceMode inferenceMode;
    try {
        if (isTextData(path) && !model)
            return Error::usage("open a model with a tokenizer first: text data is cut into "
                                "tokens by the model's own tokenizer");
        Result<io::Dataset> dataset = model ? loadModelData(*model, path, "test", {}, progress,
                                                            cancel)
                                            : io::loadDataset(path, "test", 0, progress, cancel);
        if (!dataset)
            return dataset.error();
        const io::DatasetSummary summary = io::summarize(dataset.value());
        DataInfo info;
        info.path = summary.path.empty() ? path : summary.path;
        info.kind = summary.kind;
        info.samples = summary.samples;
        info.sampleShape = summary.sampleShape;
        info.classes = summary.classes;
        return info;
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while loading the data", path);
    } catch (const std::exception& e) {
        return Error::runtime(e.what(), path);
    }
}

} // namespace bitlens::zoo
