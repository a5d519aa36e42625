#include "analysis/memory_estimate.h"

#include "exec/executor.h"
#include "analysis/lm_metrics.h"
#include "analysis/quant_report.h"
#include "ir/shape_inference.h"
#include "ir/task.h"
#include "quant/scheme.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <malloc.h>
#include <limits>
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
    part("held by the process", held);
    part("float32 weights", widened);
    part("quantized copies", quantized);
    part("activations", activations);
    part("calibration", calibration);
    if (reusable > 0 && added() > 0)
        part("less freed heap taken again", std::min(reusable, added()));
    part("heap fragmentation", fragmentation);
    out << (*sep ? "; " : "") << "weights mapped from the file: " << formatGigabytes(mapped)
        << ")";
    return out.str();
}

std::int64_t heldMemoryBytes()
{
    std::ifstream status("/proc/self/status");
    for (std::string key; status >> key;) {
        if (key == "RssAnon:") {
            std::int64_t kb = 0;
            status >> kb;
            return kb * 1024;
        }
        status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    return 0;
}

std::int64_t reusableHeapBytes()
{
    // Freed heap stays resident (the CLI keeps it: M_TRIM_THRESHOLD, M_TOP_PAD) and is taken
    // again before the process grows: what RssAnon holds beyond the heap's live blocks
    // (uordblks) and its mapped ones (hblkhd), at most the heap's free bytes.
    const struct mallinfo2 m = mallinfo2();
    const std::int64_t anon = heldMemoryBytes();
    const auto live = static_cast<std::int64_t>(m.uordblks + m.hblkhd);
    return std::clamp<std::int64_t>(anon - live, 0, static_cast<std::int64_t>(m.fordblks));
}

WorkShape workShapeOf(const ir::Graph& graph, const at::Tensor& rows)
{
    WorkShape shape;
    if (!rows.defined() || rows.dim() == 0)
        return shape;
    const bool tokens = !graph.inputs.empty() && graph.inputs.front().shape.size() == 2 &&
                        rows.dim() == 2;
    const AnalysisOptions analysis;
    shape.batch = std::min<std::int64_t>(
        rows.size(0), tokens ? analysis.sequenceAnalysisSamples : analysis.analysisSamples);
    shape.seqLen = tokens ? rows.size(1) : 1;
    // The metric's batches (evaluateMetric): a language model as many windows as keep the
    // logits within ~256 MB, other token models SequenceMetricOptions::batchSize, the rest
    // AnalysisOptions::batchSize samples.
    const std::int64_t metric =
        ir::taskOf(graph) == ir::Task::LanguageModel && tokens
            ? lmWindowBatch(graph, shape.seqLen, analysis.sequence.batchSize)
        : ir::taskOf(graph) == ir::Task::Classification ? analysis.batchSize
                                                         : analysis.sequence.batchSize;
    shape.metricBatch = std::min<std::int64_t>(rows.size(0), metric);
    return shape;
}

WorkShape defaultWorkShape(const ir::Graph& graph, std::int64_t seqLen)
{
    const bool tokens = !graph.inputs.empty() && graph.inputs.front().shape.size() == 2 &&
                        graph.inputs.front().dtype == ir::DType::Int64;
    if (!tokens)
        return WorkShape{64, 1, AnalysisOptions().batchSize};
    const AnalysisOptions analysis;
    WorkShape shape{analysis.sequenceAnalysisSamples, seqLen, analysis.sequence.batchSize};
    if (ir::taskOf(graph) == ir::Task::LanguageModel)
        shape.metricBatch = lmWindowBatch(graph, seqLen, shape.metricBatch);
    return shape;
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

namespace {

/// Bytes of the graph's outputs at `shape`.
std::int64_t outputBytes(const ir::Graph& graph, const WorkShape& shape)
{
    std::int64_t outputs = 0;
    if (auto shapes = ir::inferShapes(graph, inputShapesFor(graph, shape)); shapes)
        for (const auto& out : graph.outputs)
            if (auto it = shapes->find(out.name); it != shapes->end())
                outputs += elementBytes(it->second);
    return outputs;
}

/// The largest value of one forward pass at `shape`: LibTorch computes a node's output beside
/// temporaries of about its size (BatchNorm's centred input, matmul's packed operand), so the
/// node that writes it holds it about twice.
std::int64_t largestValueBytes(const ir::Graph& graph, const WorkShape& shape)
{
    std::int64_t largest = 0;
    if (auto shapes = ir::inferShapes(graph, inputShapesFor(graph, shape)); shapes)
        for (const auto& node : graph.nodes)
            for (const auto& out : node.outputs)
                if (auto it = shapes->find(out); it != shapes->end())
                    largest = std::max(largest, elementBytes(it->second));
    return largest;
}

/// One forward pass of `shape` at its peak, with the temporary of its largest node.
std::int64_t forwardBytes(const ir::Graph& graph, const WorkShape& shape)
{
    return peakActivationBytes(graph, shape) + largestValueBytes(graph, shape);
}

/// The metric's batch alone (WorkShape::metricRows windows or samples).
WorkShape metricShape(const WorkShape& shape) { return {shape.metricRows(), shape.seqLen, 0}; }

/// Vocabulary of a language model's logits (their last dimension), 0 when unknown.
std::int64_t vocabularyOf(const ir::Graph& graph)
{
    if (graph.outputs.empty() || graph.outputs.front().shape.empty())
        return 0;
    return std::max<std::int64_t>(graph.outputs.front().shape.back(), 0);
}

/// The CLI's M_TOP_PAD (app/cli/main.cpp): blocks up to about this size are carved from the
/// heap's top instead of being mapped on their own, so freeing them leaves holes in the heap.
constexpr std::int64_t kHeapTopPad = std::int64_t{256} << 20;

/// quantize's fragmentation: 40 % of what the run grows the heap by, up to the top pad. Measured
/// on the zoo models (bench/RESULTS.md): the heap's live peak (heaptrack) equals held + the run,
/// while RssAnon peaks 30-55 % of the run above it when the run is served from the heap
/// (minilm-l6, kjv-llama), and a run of GBs (smollm2-135m) is mapped block by block.
void addFragmentation(MemoryEstimate& e)
{
    const std::int64_t grows = std::max<std::int64_t>(0, e.added() - e.reusable);
    e.fragmentation = std::min(grows, kHeapTopPad) * 2 / 5;
}

} // namespace

MemoryEstimate estimateEval(const ir::Graph& graph, const WorkShape& shape)
{
    MemoryEstimate e;
    e.action = "eval";
    e.mapped = graph.parameterBytes();
    e.held = heldMemoryBytes();
    e.reusable = reusableHeapBytes();
    std::int64_t largest = 0;
    const std::int64_t wide =
        storageFloat32Bytes(graph, [&](const std::string& name, const at::Tensor& t) {
            if (isWide16(graph, name, t))
                largest = std::max<std::int64_t>(largest, t.numel() * 4);
            return isWide16(graph, name, t);
        });
    // The cache, and the largest weight widened for its node beside one more float32 copy of
    // it while the node runs (an 8B LM head: 2 x 2.1 GB; its 16-bit pages are file pages,
    // not anonymous memory).
    e.widened = std::min(wide, exec::ExecOptions().widenCacheBytes + 2 * largest);
    // One metric batch; its scores (top-1's argmax, perplexity's per-token log-likelihoods)
    // are small beside the outputs they read.
    e.activations = forwardBytes(graph, metricShape(shape));
    return e;
}

MemoryEstimate estimateQuantize(const ir::Graph& graph, const quant::Scheme& scheme,
                                const WorkShape& shape)
{
    MemoryEstimate e;
    e.action = "quantize";
    e.mapped = graph.parameterBytes();
    e.held = heldMemoryBytes();
    e.reusable = reusableHeapBytes();
    e.widened = storageFloat32Bytes(graph, [&](const std::string& name, const at::Tensor& t) {
        return isWide16(graph, name, t);
    });
    std::map<std::string, bool> layers;  // node name -> its weight is quantized
    if (auto plan = quant::makePlan(graph, scheme)) {
        std::set<std::string> quantizedWeights;
        for (const auto& node : graph.nodes) {
            auto it = plan->layers.find(node.name);
            if (it == plan->layers.end())
                continue;
            const bool quantized = !it->second.keepFloat && node.inputs.size() >= 2;
            layers[node.name] = quantized;
            if (quantized)
                quantizedWeights.insert(node.inputs[1]);
        }
        // One float32 quantize-dequantized copy per quantized weight (LayerQuant::weightFq).
        for (const auto& name : quantizedWeights)
            if (const at::Tensor* t = graph.initializer(name); t && t->defined())
                e.quantized += t->numel() * 4;
    }
    // The layer comparison (analyze): a few windows of at most sequenceAnalysisTokens tokens
    // for language models and encoders. Both runs keep every layer's inputs and output
    // (Executor::runKeeping) to the end of the analysis, the metric included.
    std::set<std::string> keep;
    for (const auto& node : graph.nodes) {
        if (!quant::isQuantizable(graph, node))
            continue;
        for (const auto& in : node.inputs)
            if (!in.empty() && !graph.initializer(in))
                keep.insert(in);
        keep.insert(node.outputs.front());
    }
    const AnalysisOptions options;
    WorkShape analysisShape{shape.batch, shape.seqLen, 0};
    const ir::Task task = ir::taskOf(graph);
    if (task == ir::Task::LanguageModel || task == ir::Task::Embedding)
        analysisShape.seqLen = std::min(shape.seqLen, options.sequenceAnalysisTokens);
    std::int64_t kept = 0;
    const std::int64_t runs = peakActivationBytes(graph, analysisShape, &keep, &kept) + kept +
                              largestValueBytes(graph, analysisShape);
    // Each layer's report (layerReport): its local output and error beside four float64
    // sizes of its output (compareTensors: both sides, their difference, its square), or of
    // its weight when that is quantized, and the float32 weight it shows.
    std::int64_t layerPeak = 0;
    if (auto shapes = ir::inferShapes(graph, inputShapesFor(graph, analysisShape)); shapes) {
        for (const auto& node : graph.nodes) {
            auto it = layers.find(node.name);
            if (it == layers.end())
                continue;
            auto out = shapes->find(node.outputs.front());
            const std::int64_t outBytes = out != shapes->end() ? elementBytes(out->second) : 0;
            const at::Tensor* w =
                node.inputs.size() >= 2 ? graph.initializer(node.inputs[1]) : nullptr;
            const std::int64_t weightBytes = w && w->defined() ? w->numel() * 4 : 0;
            const std::int64_t compared = std::max(outBytes, it->second ? weightBytes : 0);
            layerPeak = std::max(layerPeak, 2 * outBytes + 8 * compared + weightBytes);
        }
    }
    // Then the metric, float and quantized, one batch at a time. A language model holds the
    // float logits while the quantized batch runs, then scores them window by window: each
    // window's logits copied for both models, and 128 rows of the vocabulary in float64 for
    // the KL divergence (both log-softmaxes and their temporaries, DivergenceAccumulator).
    const WorkShape metric = metricShape(shape);
    std::int64_t scoring = 0;
    if (task != ir::Task::Classification)
        scoring += outputBytes(graph, metric);
    if (task == ir::Task::LanguageModel)
        scoring += 2 * outputBytes(graph, {1, shape.seqLen, 0}) +
                   6 * std::min<std::int64_t>(128, shape.seqLen) * vocabularyOf(graph) * 8;
    const std::int64_t metricBytes = forwardBytes(graph, metric) + scoring;
    e.activations = std::max(runs, 2 * kept + std::max(layerPeak, metricBytes));
    addFragmentation(e);
    return e;
}

MemoryEstimate estimateCompare(const ir::Graph& graph, const std::vector<quant::Scheme>& schemes,
                               const WorkShape& shape)
{
    MemoryEstimate worst;
    std::int64_t previous = 0;
    for (const auto& scheme : schemes) {
        MemoryEstimate e = estimateQuantize(graph, scheme, shape);
        // The workspace keeps the last scheme's prepared model until the next one is made.
        const std::int64_t own = e.quantized;
        e.quantized += previous;
        previous = own;
        addFragmentation(e);
        // By what each run adds: `held` is read anew for each estimate and moves by a few
        // pages between two reads, which must not decide which scheme is the costliest.
        if (worst.action.empty() ||
            e.added() + e.fragmentation > worst.added() + worst.fragmentation)
            worst = e;
    }
    worst.action = "compare";
    return worst;
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

std::int64_t MemoryEstimate::total() const
{
    return held + std::max<std::int64_t>(0, added() - reusable) + fragmentation;
}

std::optional<std::int64_t> memoryBudget(const MemoryEstimate& estimate)
{
    const auto available = availableMemory();
    if (!available)
        return std::nullopt;
    // The override is the whole budget; the machine's free memory leaves out what this
    // process holds already.
    if (auto v = memoryOverride(); v && *v)
        return *available;
    return *available + estimate.held;
}

Result<void> checkMemory(const MemoryEstimate& estimate, const std::string& path)
{
    const auto budget = memoryBudget(estimate);
    if (!budget || estimate.total() <= *budget)
        return {};
    return Error::runtime(estimate.action + " needs " + estimate.describe() + ", " +
                              formatGigabytes(*budget) +
                              " available; use --limit / --seq-len, a smaller model, or a "
                              "machine with more memory",
                          path);
}

} // namespace bitlens::analysis
