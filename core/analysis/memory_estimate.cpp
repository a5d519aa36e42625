#include "analysis/memory_estimate.h"

#include "exec/executor.h"
#include "ir/shape_inference.h"
#include "quant/scheme.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace bitlens::analysis {

namespace {

bool isWide16(const ir::Graph& graph, const std::string& name, const at::Tensor& t)
{
    return graph.widenOnRead.count(name) != 0 && t.defined() && t.scalar_type() != at::kFloat;
}

/// Float32 bytes of the storages of the initializers `pred` picks, each storage once: views of
/// one storage (a tied embedding and its LM head, Phi-3's q / k / v rows of qkv_proj) widen
/// through one float32 copy of the whole storage (ir::widened).
template <typename Pred>
std::int64_t storageFloat32Bytes(const ir::Graph& graph, Pred pred)
{
    std::set<const void*> seen;
    std::int64_t bytes = 0;
    for (const auto& [name, t] : graph.initializers) {
        if (!t.defined() || !pred(name, t) || !seen.insert(t.storage().data()).second)
            continue;
        bytes += static_cast<std::int64_t>(t.storage().nbytes()) / t.element_size() * 4;
    }
    return bytes;
}

/// The most memory a size may say: 1 EB. Larger sizes (1e30) are read as this much, which
/// every estimate fits, instead of overflowing int64.
constexpr double kMaxMemoryBytes = 1e18;

/// Bytes of "16G", "512M", "1.5T", "1000" (decimal suffixes, an optional B); nullopt for
/// anything else, a negative size, or NaN / infinity.
std::optional<std::int64_t> parseBytes(const std::string& text)
{
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || !(v >= 0) || !std::isfinite(v))
        return std::nullopt;
    double scale = 1.0;
    switch (*end) {
    case 'k': case 'K': scale = 1e3; ++end; break;
    case 'm': case 'M': scale = 1e6; ++end; break;
    case 'g': case 'G': scale = 1e9; ++end; break;
    case 't': case 'T': scale = 1e12; ++end; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        ++end;
    if (*end != '\0')
        return std::nullopt;
    return static_cast<std::int64_t>(std::min(v * scale, kMaxMemoryBytes));
}

constexpr const char* kMemoryVariable = "BITLENS_MEMORY_AVAILABLE";

/// BITLENS_MEMORY_AVAILABLE: nullopt when unset or empty, an Error when it is not a size.
Result<std::optional<std::int64_t>> memoryOverride()
{
    const char* env = std::getenv(kMemoryVariable);
    if (env == nullptr || *env == '\0')
        return std::optional<std::int64_t>();
    if (auto v = parseBytes(env))
        return std::optional<std::int64_t>(*v);
    return Error::usage(std::string(kMemoryVariable) + "='" + env +
                        "' is not a size: give bytes, or a number with a K, M, G or T suffix "
                        "(16G), at least 0");
}

std::optional<std::int64_t> readNumberFile(const std::string& path)
{
    std::ifstream in(path);
    std::string word;
    if (!(in >> word) || word == "max")
        return std::nullopt;
    return parseBytes(word);
}

/// The graph's input shapes for `shape`: the batch in dimension 0, the window length in the
/// other dynamic ones.
std::vector<std::vector<std::int64_t>> inputShapesFor(const ir::Graph& graph,
                                                      const WorkShape& shape)
{
    std::vector<std::vector<std::int64_t>> inputShapes;
    for (const auto& in : graph.inputs) {
        std::vector<std::int64_t> s = in.shape;
        for (std::size_t d = 0; d < s.size(); ++d)
            if (s[d] < 0)
                s[d] = d == 0 ? shape.batch : shape.seqLen;
        inputShapes.push_back(std::move(s));
    }
    return inputShapes;
}

/// 4 bytes per element of `shape` (float32; int64 values are few).
std::int64_t elementBytes(const std::vector<std::int64_t>& shape)
{
    std::int64_t n = 4;
    for (const auto d : shape)
        n *= std::max<std::int64_t>(d, 1);
    return n;
}

} // namespace

std::string formatGigabytes(std::int64_t bytes)
{
    char buf[32];
    if (bytes >= 1'000'000'000)
        std::snprintf(buf, sizeof buf, "%.1f GB", static_cast<double>(bytes) / 1e9);
    else
        std::snprintf(buf, sizeof buf, "%.0f MB", static_cast<double>(bytes) / 1e6);
    return buf;
}

std::string MemoryEstimate::describe() const
{
    return "~" + formatGigabytes(total()) + " " + partsText();
}

std::string MemoryEstimate::partsText() const
{
    std::ostringstream out;
    out << "(";
    const char* sep = "";
    auto part = [&](const char* what, std::int64_t bytes) {
        if (bytes <= 0)
            return;
        out << sep << what << " " << formatGigabytes(bytes);
        sep = ", ";
    };
    part("float32 weights", widened);
    part("quantized copies", quantized);
    part("activations", activations);
    part("calibration", calibration);
    out << (*sep ? "; " : "") << "weights mapped from the file: " << formatGigabytes(mapped)
        << ")";
    return out.str();
}

WorkShape workShapeOf(const ir::Graph& graph, const at::Tensor& rows)
{
    WorkShape shape;
    if (!rows.defined() || rows.dim() == 0)
        return shape;
    const bool tokens = !graph.inputs.empty() && graph.inputs.front().shape.size() == 2 &&
                        rows.dim() == 2;
    shape.batch = std::min<std::int64_t>(rows.size(0), tokens ? 2 : 64);
    shape.seqLen = tokens ? rows.size(1) : 1;
    return shape;
}

WorkShape defaultWorkShape(const ir::Graph& graph, std::int64_t seqLen)
{
    const bool tokens = !graph.inputs.empty() && graph.inputs.front().shape.size() == 2 &&
                        graph.inputs.front().dtype == ir::DType::Int64;
    return tokens ? WorkShape{2, seqLen} : WorkShape{64, 1};
}

std::int64_t peakActivationBytes(const ir::Graph& graph, const WorkShape& shape,
                                 const std::set<std::string>* keep, std::int64_t* keptBytes)
{
    const auto inputShapes = inputShapesFor(graph, shape);
    auto shapes = ir::inferShapes(graph, inputShapes);
    const auto bytesOf = elementBytes;
    std::int64_t largest = 0;
    if (shapes)
        for (const auto& node : graph.nodes)
            for (const auto& out : node.outputs)
                if (auto it = shapes->find(out); it != shapes->end())
                    largest = std::max(largest, bytesOf(it->second));
    std::map<std::string, int> readers;
    for (const auto& node : graph.nodes)
        for (const auto& in : node.inputs)
            ++readers[in];
    if (keep)
        for (const auto& name : *keep)
            ++readers[name];
    std::map<std::string, std::int64_t> live;
    std::int64_t now = 0;
    std::int64_t peak = 0;
    for (std::size_t i = 0; i < graph.inputs.size(); ++i) {
        live[graph.inputs[i].name] = bytesOf(inputShapes[i]);
        now += live[graph.inputs[i].name];
    }
    for (const auto& node : graph.nodes) {
        for (const auto& out : node.outputs) {
            if (out.empty())
                continue;
            const auto it = shapes ? shapes->find(out) : ir::ShapeMap::const_iterator();
            const std::int64_t b = shapes && it != shapes->end() ? bytesOf(it->second) : largest;
            live[out] = b;
            now += b;
            if (keep && keptBytes && keep->count(out))
                *keptBytes += b;
        }
        peak = std::max(peak, now);
        for (const auto& in : node.inputs) {
            if (in.empty() || --readers[in] > 0)
                continue;
            if (auto it = live.find(in); it != live.end()) {
                now -= it->second;
                live.erase(it);
            }
        }
    }
    return peak;
}

MemoryEstimate estimateEval(const ir::Graph& graph, const WorkShape& shape)
{
    MemoryEstimate e;
    e.action = "eval";
    e.mapped = graph.parameterBytes();
    std::int64_t largest = 0;
    const std::int64_t wide =
        storageFloat32Bytes(graph, [&](const std::string& name, const at::Tensor& t) {
            if (isWide16(graph, name, t))
                largest = std::max<std::int64_t>(largest, t.numel() * 4);
            return isWide16(graph, name, t);
        });
    // The cache, and the largest weight widened for its node with its 16-bit pages still
    // resident until the node is done (an 8B LM head: 2.1 GB + 1.05 GB).
    e.widened = std::min(wide, exec::ExecOptions().widenCacheBytes + largest + largest / 2);
    // The metric scores the outputs (perplexity: log-softmax of the logits) beside them.
    std::int64_t outputs = 0;
    if (auto shapes = ir::inferShapes(graph, inputShapesFor(graph, shape)); shapes)
        for (const auto& out : graph.outputs)
            if (auto it = shapes->find(out.name); it != shapes->end())
                outputs += elementBytes(it->second);
    e.activations = peakActivationBytes(graph, shape) + 2 * outputs;
    return e;
}

MemoryEstimate estimateQuantize(const ir::Graph& graph, const quant::Scheme& scheme,
                                const WorkShape& shape)
{
    MemoryEstimate e;
    e.action = "quantize";
    e.mapped = graph.parameterBytes();
    e.widened = storageFloat32Bytes(graph, [&](const std::string& name, const at::Tensor& t) {
        return isWide16(graph, name, t);
    });
    std::set<std::string> quantizedWeights;
    if (auto plan = quant::makePlan(graph, scheme)) {
        for (const auto& node : graph.nodes) {
            auto it = plan->layers.find(node.name);
            if (it == plan->layers.end() || it->second.keepFloat || node.inputs.size() < 2)
                continue;
            quantizedWeights.insert(node.inputs[1]);
        }
    }
    // One float32 quantize-dequantized copy per quantized weight (LayerQuant::weightFq).
    for (const auto& name : quantizedWeights)
        if (const at::Tensor* t = graph.initializer(name); t && t->defined())
            e.quantized += t->numel() * 4;
    std::set<std::string> keep;
    for (const auto& node : graph.nodes) {
        if (!quant::isQuantizable(graph, node))
            continue;
        for (const auto& in : node.inputs)
            if (!in.empty() && !graph.initializer(in))
                keep.insert(in);
        keep.insert(node.outputs.front());
    }
    std::int64_t kept = 0;
    e.activations = peakActivationBytes(graph, shape, &keep, &kept);
    e.activations += kept;  // the float run's values, alive while the quantized one runs
    return e;
}

Result<void> checkMemoryOverride()
{
    if (auto v = memoryOverride(); !v)
        return v.error();
    return {};
}

std::optional<std::int64_t> availableMemory()
{
    // A malformed override is refused by checkMemoryOverride (the CLI, before any command);
    // here it is passed over, and the machine's memory is read.
    if (auto v = memoryOverride(); v && *v)
        return **v;
    std::optional<std::int64_t> available;
    std::ifstream meminfo("/proc/meminfo");
    for (std::string key; meminfo >> key;) {
        std::int64_t kb = 0;
        std::string unit;
        meminfo >> kb >> unit;
        if (key == "MemAvailable:") {
            available = kb * 1024;
            break;
        }
    }
    // cgroup v2: what memory.max leaves of this group's memory.current.
    const auto max = readNumberFile("/sys/fs/cgroup/memory.max");
    const auto current = readNumberFile("/sys/fs/cgroup/memory.current");
    if (max && current) {
        const std::int64_t left = std::max<std::int64_t>(0, *max - *current);
        available = available ? std::min(*available, left) : left;
    }
    return available;
}

Result<void> checkMemory(const MemoryEstimate& estimate, const std::string& path)
{
    const auto available = availableMemory();
    if (!available || estimate.total() <= *available)
        return {};
    return Error::runtime(estimate.action + " needs " + estimate.describe() + ", " +
                              formatGigabytes(*available) +
                              " available; use --limit / --seq-len, a smaller model, or a "
                              "machine with more memory",
                          path);
}

} // namespace bitlens::analysis
