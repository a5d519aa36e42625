#include "model/model.h"

#include "exec/executor.h"
#include "io/file_util.h"
#include "io/onnx.h"
#include "io/torchscript.h"
#include "ir/graph.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace bitlens {

namespace {

/// Recognises a model file by its first bytes, falling back to the extension.
std::string detectFormat(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    char head[16] = {};
    in.read(head, sizeof head);
    const auto got = in.gcount();
    const std::string ext = std::filesystem::path(path).extension().string();
    if (got >= 4 && std::string(head, 4) == "GGUF")
        return "gguf";
    if (got >= 4 && head[0] == 'P' && head[1] == 'K')
        return ext == ".npz" ? "npz" : "torchscript";
    if (got >= 9 && head[8] == '{' && ext == ".safetensors")
        return "safetensors";
    if (ext == ".safetensors")
        return "safetensors";
    if (ext == ".gguf")
        return "gguf";
    if (ext == ".pt" || ext == ".pth" || ext == ".torchscript")
        return "torchscript";
    return "onnx";
}

/// A TorchScript / torch.save zip: its tensors are read, its code never runs (io/torchscript.h).
Result<std::shared_ptr<Model>> openTorchArchive(const std::string& path, Progress& progress,
                                                const CancelToken& cancel)
{
    auto archive = io::readTorchArchive(path);
    if (!archive)
        return archive.error();
    if (cancel.cancelled())
        return Error::cancelled();
    auto graph = io::graphFromTorchArchive(*archive);
    if (!graph)
        return graph.error();
    progress.report(0.6, "inferring shapes");
    auto shared = std::make_shared<ir::Graph>(std::move(graph).value());
    auto summary = summarize(*shared, path, "torchscript");
    if (!summary)
        return summary.error();
    if (archive->hasCode) {
        summary->notes.push_back(io::kTorchScriptTrustNote);
    } else {
        summary->format = "torch.save";
        summary->notes.push_back("untrusted: a torch.save pickle may name any Python callable; "
                                 "BitLens only reads its tensors");
    }
    summary->notes.push_back("parameters: " + io::describeTensors(*archive));
    progress.report(1.0, "done");
    const std::string format = summary->format;
    return std::make_shared<Model>(path, format, std::move(shared), std::move(summary).value());
}

} // namespace

Model::Model(std::string path, std::string format, std::shared_ptr<ir::Graph> graph,
             ModelSummary summary)
    : m_path(std::move(path)), m_format(std::move(format)), m_graph(std::move(graph)),
      m_summary(std::move(summary))
{
}

Result<std::shared_ptr<Model>> openModel(const std::string& path, Progress& progress,
                                         const CancelToken& cancel)
{
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        return Error::badInput(path, "cannot open file: no such file");
    if (std::filesystem::is_directory(path, ec))
        return Error::badInput(path, "is a directory, expected a model file");
    const std::string format = detectFormat(path);
    progress.report(0.0, "reading " + format);
    if (format == "torchscript")
        return openTorchArchive(path, progress, cancel);
    if (format != "onnx")
        return Error::unsupported(path, "this is a " + format +
                                            " file; BitLens reads ONNX models so far");
    auto graph = io::readOnnxFile(path);
    if (!graph)
        return graph.error();
    if (cancel.cancelled())
        return Error::cancelled();
    progress.report(0.6, "inferring shapes");
    auto shared = std::make_shared<ir::Graph>(std::move(graph).value());
    auto summary = summarize(*shared, path, format);
    if (!summary)
        return summary.error();
    progress.report(1.0, "done");
    return std::make_shared<Model>(path, format, std::move(shared), std::move(summary).value());
}

Result<ModelSummary> summarize(const ir::Graph& graph, const std::string& path,
                               const std::string& format)
{
    ModelSummary summary;
    summary.path = path;
    summary.format = format;
    summary.name = graph.name;
    summary.params = graph.parameterCount();
    summary.bytes = graph.parameterBytes();
    for (const auto& in : graph.inputs)
        summary.inputs.push_back({in.name, std::string(ir::dtypeName(in.dtype)), in.shape});
    for (const auto& out : graph.outputs)
        summary.outputs.push_back({out.name, std::string(ir::dtypeName(out.dtype)), out.shape});

    // Shapes come from a traced run on one sample of zeros, allocated from the declared input
    // shapes: refuse a sample too large for that before allocating it (a file of 100 bytes can
    // declare an input of [1, 100000, 100000] floats; zero-filling 40 GB gets the process killed).
    constexpr std::int64_t kMaxTraceElements = std::int64_t{1} << 28;  // 1 GiB of float32
    for (const auto& in : graph.inputs) {
        std::int64_t elements = 1;
        for (const std::int64_t d : in.shape) {
            const std::int64_t dim = d < 0 ? 1 : d;  // dynamic dimensions trace as 1
            if (dim != 0 && elements > kMaxTraceElements / dim) {
                elements = kMaxTraceElements + 1;
                break;
            }
            elements *= dim;
        }
        if (elements > kMaxTraceElements)
            return Error::badInput(path, "input '" + in.name + "' declares shape " +
                                             formatShape(in.shape) +
                                             ": one sample would hold more than 2^28 elements");
    }
    auto shapes = exec::inferShapes(graph);
    if (!shapes) {
        Error e = shapes.error();
        e.path = path;
        e.message = "the model does not run on a zero input: " + e.message;
        return e;
    }
    for (const auto& node : graph.nodes) {
        LayerSummary layer;
        layer.name = node.name;
        layer.op = std::string(ir::opKindName(node.op));
        for (const auto& in : node.inputs) {
            if (in.empty() || graph.initializer(in))
                continue;
            if (auto it = shapes->find(in); it != shapes->end())
                layer.inputShapes.push_back(it->second);
        }
        if (auto it = shapes->find(node.outputs.front()); it != shapes->end())
            layer.outputShape = it->second;
        layer.params = graph.nodeParameterCount(node);
        layer.bytes = graph.nodeParameterBytes(node);
        summary.layers.push_back(std::move(layer));
    }
    // Graph outputs get their concrete (batch-1) shapes where the declaration left them open.
    // Graph outputs get their traced shapes where the declaration left them open, with the
    // batch dimension left open again when the inputs' is.
    const bool dynamicBatch = !graph.inputs.empty() && !graph.inputs.front().shape.empty() &&
                              graph.inputs.front().shape.front() < 0;
    for (auto& out : summary.outputs) {
        if (!out.shape.empty())
            continue;
        if (auto it = shapes->find(out.name); it != shapes->end()) {
            out.shape = it->second;
            if (dynamicBatch && !out.shape.empty())
                out.shape.front() = -1;
        }
    }
    return summary;
}

std::string formatBytes(std::int64_t bytes)
{
    char buf[64];
    const double b = static_cast<double>(bytes);
    if (bytes < 1024)
        std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
    else if (bytes < (1 << 20))
        std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
    else if (bytes < (1ll << 30))
        std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024.0));
    else
        std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

std::string formatShape(const std::vector<std::int64_t>& shape)
{
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i)
            text += ", ";
        text += shape[i] < 0 ? std::string("N") : std::to_string(shape[i]);
    }
    return text + "]";
}

} // namespace bitlens
