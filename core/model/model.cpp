#include "model/model.h"

#include "exec/executor.h"
#include "io/file_util.h"
#include "io/gguf.h"
#include "io/json_read.h"
#include "io/onnx.h"
#include "io/compressed_tensors.h"
#include "io/safetensors.h"
#include "io/torchscript.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "ir/task.h"
#include "model/hf_builders.h"
#include "model/torch_rnn.h"
#include "text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <filesystem>
#include <fstream>
#include <new>

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
    if (path.size() > 23 && path.ends_with(".safetensors.index.json"))
        return "safetensors";
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
    auto graph = model::graphFromTorchArchive(*archive);
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
    return std::make_shared<Model>(path, format, std::move(shared), std::move(summary).value());}

namespace fs = std::filesystem;

/// A graph read from some format, with what the summary adds to it.
struct Loaded {
    ir::Graph graph;
    std::string architecture;
    std::string note;
    std::string tokenizerPath;
    std::shared_ptr<const text::Tokenizer> tokenizer;
};

/// Where a Hugging Face model lives: its weights (file or index) and its config.json.
struct HfFiles {
    std::string weights;
    std::string config;
    std::string dir;
};

Result<HfFiles> locateHf(const std::string& path)
{
    std::error_code ec;
    HfFiles files;
    if (fs::is_directory(path, ec)) {
        files.dir = path;
        for (const char* name : {"model.safetensors.index.json", "model.safetensors"})
            if (fs::is_regular_file(fs::path(path) / name, ec)) {
                files.weights = (fs::path(path) / name).string();
                break;
            }
        if (files.weights.empty())
            return Error::badInput(path, "is a folder without model.safetensors or "
                                         "model.safetensors.index.json (a Hugging Face model "
                                         "folder holds config.json and its weights)");
    } else {
        files.weights = path;
        const fs::path parent = fs::path(path).parent_path();
        files.dir = parent.empty() ? std::string(".") : parent.string();
    }
    files.config = (fs::path(files.dir) / "config.json").string();
    if (!fs::is_regular_file(files.config, ec))
        return Error::unsupported(path, "no config.json beside the weights, so the architecture "
                                        "is unknown (BitLens builds bert, llama and gpt2 models "
                                        "from a Hugging Face config.json)");
    return files;
}

/// The tokenizer in a model folder (tokenizer.json, else vocab.txt), or none. A tokenizer that
/// is present but unreadable fails the open: text data could not be used with the model.
Result<std::shared_ptr<const text::Tokenizer>> tokenizerIn(const std::string& dir,
                                                           std::string& foundPath)
{
    std::error_code ec;
    for (const char* name : {"tokenizer.json", "vocab.txt"}) {
        const std::string candidate = (fs::path(dir) / name).string();
        if (!fs::is_regular_file(candidate, ec))
            continue;
        auto t = text::loadTokenizer(candidate);
        if (!t)
            return t.error();
        foundPath = candidate;
        return std::shared_ptr<const text::Tokenizer>(std::move(t).value());
    }
    return std::shared_ptr<const text::Tokenizer>();
}

Result<Loaded> loadSafetensorsModel(const std::string& path, Progress& progress,
                                    const CancelToken& cancel)
{
    auto files = locateHf(path);
    if (!files)
        return files.error();
    auto configBytes = io::readFileBytes(files->config);
    if (!configBytes)
        return configBytes.error();
    const auto config = nlohmann::json::parse(configBytes->begin(), configBytes->end(), nullptr,
                                              false);
    if (config.is_discarded() || !config.is_object())
        return Error::badInput(files->config, "not a JSON object");
    // Refuse an unknown architecture before mapping gigabytes of weights.
    auto modelType = io::readingJson(files->config, [&]() -> Result<std::string> {
        return io::jsonString(config, "model_type", "");
    });
    if (!modelType)
        return modelType.error();
    const std::string type = *modelType;
    if (!model::isHfModelType(type))
        return Error::unsupported(files->config,
                                  type.empty() ? std::string("no \"model_type\": the "
                                                             "architecture is unknown")
                                               : "model_type '" + type +
                                                     "' is not supported (" +
                                                     model::hfModelTypesText() + ")");
    progress.report(0.1, "mapping " + fs::path(files->weights).filename().string());
    auto weights = io::readSafetensors(files->weights);
    if (!weights)
        return weights.error();
    if (cancel.cancelled())
        return Error::cancelled();
    // A compressed-tensors folder (BitLens's own safetensors export, llm-compressor's): its
    // quantized weights read back to float32, as a GGUF's are.
    std::string note;
    if (io::isCompressedTensorsConfig(config)) {
        progress.report(0.2, "dequantizing the compressed-tensors weights");
        auto decoded = io::decodeCompressedTensors(*weights, files->weights, false);
        if (!decoded)
            return decoded.error();
        weights->tensors = std::move(decoded).value();
        const auto& qc = config.at("quantization_config");
        const auto format = qc.find("format");
        note = "float baseline = dequantized compressed-tensors weights" +
               (format != qc.end() && format->is_string()
                    ? " (" + format->get<std::string>() + ")"
                    : std::string()) +
               ", not the original unquantized model";
    }
    progress.report(0.3, "building the " + type + " graph");
    auto graph = model::buildFromHfConfig(config, weights->tensors, path);
    if (!graph)
        return graph.error();
    Loaded loaded{std::move(graph).value(), type, note, {}, nullptr};
    auto tokenizer = tokenizerIn(files->dir, loaded.tokenizerPath);
    if (!tokenizer)
        return tokenizer.error();
    loaded.tokenizer = std::move(tokenizer).value();
    return loaded;
}

/// GGUF metadata of one architecture as the JSON object buildLlamaFromGguf reads.
nlohmann::json ggufHyperParameters(const io::GgufFile& file, const std::string& arch)
{
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [key, value] : file.metadata()) {
        if (!key.starts_with(arch + "."))
            continue;
        if (const auto* u = std::get_if<std::uint64_t>(&value.data))
            j[key] = *u;
        else if (const auto* i = std::get_if<std::int64_t>(&value.data))
            j[key] = *i;
        else if (const auto* d = std::get_if<double>(&value.data))
            j[key] = *d;
        else if (const auto* b = std::get_if<bool>(&value.data))
            j[key] = *b;
        else if (const auto* str = std::get_if<std::string>(&value.data))
            j[key] = *str;
    }
    return j;
}

/// "float baseline = dequantized Q4_1 weights (GGUF tensors: 210 Q4_1, 1 Q8_0, 61 F32)", or
/// empty when every tensor is stored as plain float32.
std::string ggufNote(const io::GgufFile& file)
{
    std::map<std::string, int> counts;
    for (const auto& info : file.tensors())
        ++counts[std::string(formats::ggmlTraits(info.type).name)];
    if (counts.size() == 1 && counts.count("F32") == 1)
        return {};
    std::string main;
    int most = 0;
    for (const auto& [name, count] : counts)
        if (name != "F32" && count > most) {
            main = name;
            most = count;
        }
    std::vector<std::pair<int, std::string>> order;
    for (const auto& [name, count] : counts)
        order.emplace_back(-count, name);
    std::sort(order.begin(), order.end());
    std::string list;
    for (const auto& [negCount, name] : order)
        list += (list.empty() ? "" : ", ") + std::to_string(-negCount) + " " + name;
    return "float baseline = dequantized " + main + " weights (GGUF tensors: " + list +
           "), not the original unquantized model";
}

Result<Loaded> loadGgufModel(const std::string& path, Progress& progress,
                             const CancelToken& cancel)
{
    auto file = io::GgufFile::open(path);
    if (!file)
        return file.error();
    auto arch = file->getString("general.architecture");
    if (!arch)
        return arch.error();
    if (*arch != "llama")
        return Error::unsupported(path, "GGUF architecture '" + *arch +
                                            "' is not supported (llama)");
    // Every tensor as float32: F32 ones stay views into the mapping, block types are
    // dequantized (in parallel over blocks) — these copies are the model's float weights.
    std::map<std::string, at::Tensor> weights;
    const auto& infos = file->tensors();
    for (std::size_t i = 0; i < infos.size(); ++i) {
        if (cancel.cancelled())
            return Error::cancelled();
        auto t = file->dequantize(infos[i].name);
        if (!t)
            return t.error();
        weights.emplace(infos[i].name, std::move(t).value());
        if (i % 16 == 0)
            progress.report(0.05 + 0.5 * static_cast<double>(i) / static_cast<double>(infos.size()),
                            "dequantizing " + infos[i].name);
    }
    progress.report(0.55, "building the llama graph");
    auto graph = model::buildLlamaFromGguf(ggufHyperParameters(*file, *arch), weights, path);
    if (!graph)
        return graph.error();
    weights.clear();
    Loaded loaded{std::move(graph).value(), *arch, ggufNote(*file), {}, nullptr};
    if (file->find("tokenizer.ggml.tokens")) {
        auto tokenizer = text::loadGgufTokenizer(*file);
        if (!tokenizer)
            return tokenizer.error();
        loaded.tokenizer = std::shared_ptr<const text::Tokenizer>(std::move(tokenizer).value());
        loaded.tokenizerPath = path;
    }
    return loaded;
}

Result<Loaded> loadAny(const std::string& path, const std::string& format, Progress& progress,
                       const CancelToken& cancel)
{
    if (format == "safetensors")
        return loadSafetensorsModel(path, progress, cancel);
    if (format == "gguf")
        return loadGgufModel(path, progress, cancel);
    if (format != "onnx")
        return Error::unsupported(path, "this is a " + format +
                                            " file; BitLens reads ONNX, safetensors (with "
                                            "config.json), GGUF and TorchScript models");
    auto graph = io::readOnnxFile(path);
    if (!graph)
        return graph.error();
    return Loaded{std::move(graph).value(), {}, {}, {}, nullptr};
}

} // namespace

Model::Model(std::string path, std::string format, std::shared_ptr<ir::Graph> graph,
             ModelSummary summary, std::shared_ptr<const text::Tokenizer> tokenizer)
    : m_path(std::move(path)), m_format(std::move(format)), m_graph(std::move(graph)),
      m_summary(std::move(summary)), m_tokenizer(std::move(tokenizer))
{
}

Result<std::shared_ptr<Model>> openModel(const std::string& path, Progress& progress,
                                         const CancelToken& cancel)
{
    std::error_code ec;
    if (auto ok = io::checkOpenable(path, io::PathKind::FileOrFolder); !ok)
        return ok.error();
    const bool folder = fs::is_directory(path, ec);
    if (folder && !fs::is_regular_file(fs::path(path) / "config.json", ec))
        return Error::badInput(path, "is a folder without config.json; expected a model file "
                                     "or a Hugging Face model folder (config.json + "
                                     "model.safetensors)");
    const std::string format = folder ? std::string("safetensors") : detectFormat(path);
    progress.report(0.0, "reading " + format);
    if (format == "torchscript")
        return openTorchArchive(path, progress, cancel);
    Result<Loaded> loaded = Error::runtime("not loaded");
    try {
        loaded = loadAny(path, format, progress, cancel);
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while reading the model", path);
    } catch (const c10::Error& e) {
        return Error::badInput(path, std::string("reading the model failed: ") +
                                         e.what_without_backtrace());
    }
    if (!loaded)
        return loaded.error();
    if (cancel.cancelled())
        return Error::cancelled();
    progress.report(0.6, "inferring shapes");
    auto shared = std::make_shared<ir::Graph>(std::move(loaded->graph));
    auto summary = summarize(*shared, path, format);
    if (!summary)
        return summary.error();
    summary->architecture = loaded->architecture;
    summary->note = loaded->note;
    summary->tokenizerPath = loaded->tokenizerPath;
    progress.report(1.0, "done");
    return std::make_shared<Model>(path, format, std::move(shared), std::move(summary).value(),
                                   std::move(loaded->tokenizer));
}

Result<ModelSummary> summarize(const ir::Graph& graph, const std::string& path,
                               const std::string& format)
{
    ModelSummary summary;
    summary.path = path;
    summary.format = format;
    summary.name = graph.name;
    const ir::Task task = ir::taskOf(graph);
    summary.task = std::string(ir::taskName(task));
    summary.metric = std::string(ir::metricNameOf(task));
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
    // The trace holds one sample's values: refuse before it when the shapes inferred from the
    // graph say they would not fit (issue #49: a 520-byte model, Conv then Upsample x400, traced
    // past 3 GB and growing; Conv pads=3000 peaked at 4.1 GB). Values inference cannot derive
    // are not counted; the executor frees values after their last reader, so the sum is an
    // upper bound of what the trace holds.
    auto inferred = ir::inferShapes(graph);
    if (inferred) {
        constexpr std::int64_t kMaxTraceTotalElements = std::int64_t{1} << 30;  // 4 GiB
        std::int64_t total = 0;
        std::string largestName;
        std::vector<std::int64_t> largestShape;
        std::int64_t largest = 0;
        for (const auto& node : graph.nodes) {
            for (const auto& out : node.outputs) {
                const auto it = out.empty() ? inferred->end() : inferred->find(out);
                if (it == inferred->end())
                    continue;
                std::int64_t elements = 1;
                for (const std::int64_t d : it->second)
                    elements = d > 0 && elements > kMaxTraceTotalElements / d
                                   ? kMaxTraceTotalElements + 1
                                   : elements * std::max<std::int64_t>(d, 0);
                total = std::min(total + elements, kMaxTraceTotalElements + 1);
                if (elements > largest) {
                    largest = elements;
                    largestName = "value '" + out + "' of node '" + node.name + "' (" +
                                  std::string(ir::opKindName(node.op)) + ")";
                    largestShape = it->second;
                }
            }
        }
        if (largest > kMaxTraceElements || total > kMaxTraceTotalElements) {
            auto gigabytes = [](double elements) {
                char text[32];
                std::snprintf(text, sizeof text, "%.3g GB", 4.0 * elements / 1e9);
                return std::string(text);
            };
            double largestElements = 1;
            for (const std::int64_t d : largestShape)
                largestElements *= static_cast<double>(d);
            const bool one = largest > kMaxTraceElements;
            return Error::runtime(
                "opening runs the model once on a zero sample, and " +
                    (one ? largestName + " would hold " + formatShape(largestShape) + " (~" +
                               gigabytes(largestElements) +
                               " as float32), more than the 1 GiB one value may take"
                         : std::string("its values would hold more than ") +
                               gigabytes(static_cast<double>(kMaxTraceTotalElements)) +
                               " as float32, more than the 4 GiB a sample may take") +
                    "; refused before allocating",
                path);
        }
    }
    // A model larger than kTraceBytes gets its shapes from shape inference alone when that
    // derives every node's output: tracing would read every weight (an 8B model's 16 GB) just
    // to list the layers. Smaller models are traced, which also shows at open that they run.
    constexpr std::int64_t kTraceBytes = std::int64_t{1} << 30;
    Result<ir::ShapeMap> shapes = Error::runtime("not traced");
    if (summary.bytes > kTraceBytes) {
        bool complete = inferred.ok();
        for (std::size_t i = 0; complete && i < graph.nodes.size(); ++i)
            for (const auto& out : graph.nodes[i].outputs)
                complete = complete && (out.empty() || inferred->count(out) != 0);
        if (complete)
            shapes = std::move(inferred);
    }
    if (!shapes)
        shapes = exec::traceShapes(graph);
    if (!shapes) {
        Error e = shapes.error();
        e.path = path;
        // The zero sample is BitLens's own input, so a node that fails on it fails for what the
        // file says (an attribute, a wiring, a shape): bad input naming the node, exit 3, or
        // unsupported (4) where the op says what it does not support. Only a failed allocation
        // stays a resource failure (exit 5).
        const auto says = [&](const char* words) {
            return e.message.find(words) != std::string::npos;
        };
        if (e.code == ErrorCode::Runtime && !says("out of memory") && !says("can't allocate"))
            e.code = says("not supported") || says("unsupported") ? ErrorCode::Unsupported
                                                                   : ErrorCode::BadInput;
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
