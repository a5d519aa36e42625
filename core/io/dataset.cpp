// loadDataset: finds out what a path holds (IDX folder or file, image folder, .npy, .npz),
// reads it, pairs inputs with labels and checks what calibration and evaluation rely on:
// one label per sample, labels whole numbers, no NaN or Inf in the inputs.

#include "io/dataset.h"

#include "io/file_util.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <new>

namespace bitlens::io {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string text)
{
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

std::string shapeText(const at::Tensor& t)
{
    std::string text = "[";
    for (std::int64_t i = 0; i < t.dim(); ++i)
        text += (i ? ", " : "") + std::to_string(t.size(i));
    return text + "]";
}

/// IDX file names carry "idx" and/or "ubyte" ("train-images-idx3-ubyte.gz").
bool looksLikeIdxName(const std::string& name)
{
    const std::string n = lower(name);
    return n.find("idx") != std::string::npos || n.find("ubyte") != std::string::npos;
}

/// Peeks at the first bytes: gzip (1f 8b) or an IDX magic 00 00 TT DD with a known type.
bool looksLikeIdxContent(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    unsigned char head[4] = {};
    if (!in.read(reinterpret_cast<char*>(head), 4))
        return false;
    if (head[0] == 0x1f && head[1] == 0x8b)
        return true;
    return head[0] == 0 && head[1] == 0 && head[2] >= 0x08 && head[2] <= 0x0E && head[3] > 0;
}

/// What the inputs and labels of a data set were read from, for error messages.
struct Sources {
    std::string inputs;       ///< file (or folder) of the inputs
    std::string labels;       ///< file of the labels; may equal `inputs` (.npz)
    std::string inputsName;   ///< .npz: array name of the inputs
    std::string labelsName;   ///< .npz: array name of the labels
};

/// Picks `<prefix>-images*` / `<prefix>-labels*` in a folder of IDX files.
Result<std::pair<std::string, std::string>> findIdxPair(const std::string& dir,
                                                      const std::vector<std::string>& files,
                                                      const std::vector<std::string>& prefixes,
                                                      const std::string& split)
{
    for (const std::string& prefix : prefixes) {
        std::string images;
        std::string labels;
        for (const std::string& name : files) {  // sorted: the uncompressed file wins a tie
            if (images.empty() && name.starts_with(prefix + "-images"))
                images = name;
            if (labels.empty() && name.starts_with(prefix + "-labels"))
                labels = name;
        }
        if (!images.empty()) {
            const std::string labelsPath =
                labels.empty() ? std::string() : (fs::path(dir) / labels).string();
            return std::make_pair((fs::path(dir) / images).string(), labelsPath);
        }
    }
    std::string wanted;
    for (const std::string& prefix : prefixes)
        wanted += (wanted.empty() ? "" : " or ") + prefix + "-images*";
    return Error::badInput(dir, "has no " + wanted + " file for split '" + split + "'");
}

/// The labels file beside an IDX images file, if there is one: "...images-idx3..." ->
/// "...labels-idx1...", else "...images..." -> "...labels...".
std::string idxLabelsBeside(const std::string& imagesPath)
{
    const fs::path p(imagesPath);
    const std::pair<std::string, std::string> renames[] = {{"images-idx3", "labels-idx1"},
                                                           {"images", "labels"}};
    for (const auto& [from, to] : renames) {
        std::string name = p.filename().string();
        const auto at = name.find(from);
        if (at == std::string::npos)
            continue;
        name.replace(at, from.size(), to);
        const fs::path labels = p.parent_path() / name;
        std::error_code ec;
        if (fs::is_regular_file(labels, ec))
            return labels.string();
    }
    return {};
}

Result<at::Tensor> toLabels(const at::Tensor& raw, const Sources& src)
{
    const std::string where = src.labelsName.empty() ? "labels" : "array '" + src.labelsName + "'";
    if (raw.dim() != 1)
        return Error::badInput(src.labels, where + " must be one-dimensional, not of shape " +
                                               shapeText(raw));
    if (at::isFloatingType(raw.scalar_type())) {
        const at::Tensor f = raw.to(at::kDouble);
        if (!at::equal(f, f.floor()))  // also false for NaN and Inf
            return Error::badInput(src.labels, where + " must be whole numbers (class indices)");
    }
    return raw.to(at::kLong, /*non_blocking=*/false, /*copy=*/true).contiguous();
}

/// Checks and normalises a freshly read data set: float32 inputs with a sample dimension,
/// int64 labels of the same count, `limit`, and no NaN or Inf.
Result<Dataset> finish(Dataset dataset, const Sources& src, std::int64_t limit)
{
    if (!dataset.inputs.defined())
        return Error::badInput(src.inputs, "holds no inputs");
    if (dataset.inputs.dim() == 0)
        return Error::badInput(src.inputs, "holds a single value; a data set needs a first "
                                           "(sample) dimension");
    const std::int64_t n = dataset.inputs.size(0);
    if (dataset.labels.defined()) {
        auto labels = toLabels(dataset.labels, src);
        if (!labels)
            return labels.error();
        dataset.labels = *labels;
        const std::int64_t labelCount = dataset.labels.size(0);
        if (labelCount != n) {
            if (src.labels == src.inputs)
                return Error::badInput(src.inputs, "array '" + src.inputsName + "' has " +
                                                       std::to_string(n) + " samples but '" +
                                                       src.labelsName + "' has " +
                                                       std::to_string(labelCount) + " labels");
            return Error::badInput(src.inputs, "has " + std::to_string(n) +
                                                   " samples but labels file " + src.labels +
                                                   " has " + std::to_string(labelCount) +
                                                   " labels");
        }
    }
    if (limit > 0 && limit < n) {
        // clone(): a narrowed view would keep the whole data set alive.
        dataset.inputs = dataset.inputs.narrow(0, 0, limit).clone();
        if (dataset.labels.defined())
            dataset.labels = dataset.labels.narrow(0, 0, limit).clone();
    }
    if (dataset.inputs.scalar_type() != at::kFloat)
        dataset.inputs = dataset.inputs.to(at::kFloat);
    dataset.inputs = dataset.inputs.contiguous();

    if (dataset.inputs.numel() > 0) {
        const std::int64_t kept = dataset.inputs.size(0);
        const at::Tensor perSample = dataset.inputs.reshape({kept, -1});
        const at::Tensor badSamples = at::isfinite(perSample).logical_not().any(1);
        if (badSamples.any().item<bool>()) {
            const std::int64_t sample = badSamples.nonzero()[0][0].item<std::int64_t>();
            const bool nan = at::isnan(perSample[sample]).any().item<bool>();
            return Error::badInput(src.inputs, std::string("contains ") +
                                                   (nan ? "NaN" : "Inf") + " at sample " +
                                                   std::to_string(sample));
        }
    }
    return dataset;
}

/// A data set as read, before finish(), and where its parts came from.
struct Loaded {
    Dataset dataset;
    Sources src;
};

Result<Loaded> loadNpz(const std::string& path)
{
    auto arrays = readNpz(path);
    if (!arrays)
        return arrays.error();
    Loaded loaded;
    loaded.dataset.path = path;
    loaded.dataset.kind = "npz";
    Sources& src = loaded.src;
    src.inputs = src.labels = path;
    for (const char* key : {"x", "inputs"})
        if (src.inputsName.empty() && arrays->count(key))
            src.inputsName = key;
    for (const char* key : {"y", "labels"})
        if (src.labelsName.empty() && arrays->count(key))
            src.labelsName = key;
    if (src.inputsName.empty()) {
        if (arrays->size() != 1) {
            std::string names;
            for (const auto& entry : *arrays)
                names += (names.empty() ? "'" : ", '") + entry.first + "'";
            return Error::badInput(path, "holds arrays " + names + "; expected 'x' or 'inputs' "
                                         "(and optionally 'y' or 'labels')");
        }
        src.inputsName = arrays->begin()->first;
    }
    loaded.dataset.inputs = arrays->at(src.inputsName);
    if (!src.labelsName.empty())
        loaded.dataset.labels = arrays->at(src.labelsName);
    return loaded;
}

Result<Loaded> loadIdx(const std::string& images, const std::string& labels,
                       const std::string& datasetPath, Progress& progress,
                       const CancelToken& cancel)
{
    Loaded loaded;
    loaded.dataset.path = datasetPath;
    loaded.dataset.kind = "idx";
    loaded.src.inputs = images;
    loaded.src.labels = labels;
    progress.report(0.05, "reading " + fs::path(images).filename().string());
    auto inputs = readIdx(images);
    if (!inputs)
        return inputs.error();
    loaded.dataset.inputs = *inputs;
    if (cancel.cancelled())
        return Error::cancelled();
    if (!labels.empty()) {
        progress.report(0.8, "reading " + fs::path(labels).filename().string());
        auto read = readIdx(labels);
        if (!read)
            return read.error();
        loaded.dataset.labels = *read;
    }
    return loaded;
}

Result<Loaded> loadAny(const std::string& path, const std::vector<std::string>& prefixes,
                       const std::string& split, Progress& progress, const CancelToken& cancel)
{
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (ec || !fs::exists(status)) {
        if (auto ok = checkOpenable(path, PathKind::FileOrFolder); !ok &&
            ok.error().message != "cannot open file: no such file")
            return ok.error();
        return Error::badInput(path, "no such file or folder");
    }
    if (auto ok = checkOpenable(path, PathKind::FileOrFolder); !ok)
        return ok.error();

    if (fs::is_directory(status)) {
        std::vector<std::string> idxFiles;
        for (const auto& entry : fs::directory_iterator(path, ec)) {
            const std::string name = entry.path().filename().string();
            if (entry.is_regular_file() && looksLikeIdxName(name) &&
                (name.find("-images") != std::string::npos ||
                 name.find("-labels") != std::string::npos))
                idxFiles.push_back(name);
        }
        if (ec)
            return Error::badInput(path, "cannot list folder: " + ec.message());
        if (!idxFiles.empty()) {
            std::sort(idxFiles.begin(), idxFiles.end());
            auto pair = findIdxPair(path, idxFiles, prefixes, split);
            if (!pair)
                return pair.error();
            return loadIdx(pair->first, pair->second, path, progress, cancel);
        }
        auto folder = readImageFolder(path, 0, progress, cancel);
        if (!folder)
            return folder.error();
        Loaded loaded;
        loaded.dataset = std::move(folder.value());
        loaded.src.inputs = loaded.src.labels = path;
        return loaded;
    }

    const std::string ext = lower(fs::path(path).extension().string());
    if (ext == ".npy") {
        progress.report(0.05, "reading " + fs::path(path).filename().string());
        auto array = readNpy(path);
        if (!array)
            return array.error();
        Loaded loaded;
        loaded.dataset.path = path;
        loaded.dataset.kind = "npy";
        loaded.dataset.inputs = *array;
        loaded.src.inputs = loaded.src.labels = path;
        return loaded;
    }
    if (ext == ".npz") {
        progress.report(0.05, "reading " + fs::path(path).filename().string());
        return loadNpz(path);
    }
    if (looksLikeIdxName(fs::path(path).filename().string()) || looksLikeIdxContent(path))
        return loadIdx(path, idxLabelsBeside(path), path, progress, cancel);
    return Error::badInput(path, "unknown data set format (expected a folder, a .npy or .npz "
                                 "file, or an IDX file)");
}

Result<Dataset> loadDatasetImpl(const std::string& path, const std::string& split,
                                std::int64_t limit, Progress& progress,
                                const CancelToken& cancel)
{
    std::vector<std::string> prefixes;
    if (split == "train" || split == "calib")
        prefixes = {"train"};
    else if (split == "test" || split == "eval")
        prefixes = {"t10k", "test"};
    else
        return Error::usage("unknown data split '" + split +
                            "' (expected train, calib, test or eval)");
    if (limit < 0)
        return Error::usage("the sample limit must be 0 (all) or positive, not " +
                            std::to_string(limit));
    if (cancel.cancelled())
        return Error::cancelled();
    auto loaded = loadAny(path, prefixes, split, progress, cancel);
    if (!loaded)
        return loaded.error();
    if (cancel.cancelled())
        return Error::cancelled();
    progress.report(0.9, "checking data");
    auto dataset = finish(std::move(loaded->dataset), loaded->src, limit);
    if (!dataset)
        return dataset.error();
    progress.report(1.0, "loaded " + std::to_string(dataset->size()) + " samples");
    return dataset;
}

} // namespace

Result<Dataset> loadDataset(const std::string& path, const std::string& split,
                            std::int64_t limit, Progress& progress, const CancelToken& cancel)
{
    try {
        return loadDatasetImpl(path, split, limit, progress, cancel);
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while loading the data set", path);
    } catch (const c10::Error& e) {
        return Error::runtime(e.what_without_backtrace(), path);
    } catch (const std::exception& e) {
        return Error::runtime(e.what(), path);
    }
}

DatasetSummary summarize(const Dataset& dataset)
{
    DatasetSummary summary;
    summary.path = dataset.path;
    summary.kind = dataset.kind;
    summary.samples = dataset.size();
    if (dataset.inputs.defined())
        for (std::int64_t i = 1; i < dataset.inputs.dim(); ++i)
            summary.sampleShape.push_back(dataset.inputs.size(i));
    if (!dataset.classNames.empty()) {
        summary.classes = static_cast<std::int64_t>(dataset.classNames.size());
    } else if (dataset.labels.defined() && dataset.labels.numel() > 0) {
        const at::Tensor labels = dataset.labels.to(at::kCPU).to(at::kLong).contiguous();
        std::vector<std::int64_t> values(labels.data_ptr<std::int64_t>(),
                                         labels.data_ptr<std::int64_t>() + labels.numel());
        std::sort(values.begin(), values.end());
        summary.classes = std::unique(values.begin(), values.end()) - values.begin();
    }
    return summary;
}

} // namespace bitlens::io
