#include "analysis/block_engine.h"

#include "analysis/lm_metrics.h"
#include "exec/device.h"
#include "io/mapped_file.h"
#include "kernels/cpu_features.h"
#include "ir/shape_inference.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string_view>

namespace bitlens::analysis {

namespace {

using Clock = std::chrono::steady_clock;

/// The block index of a node named "layer.<i>.…", or -1.
std::int64_t blockOf(const std::string& name)
{
    constexpr std::string_view prefix = "layer.";
    if (name.compare(0, prefix.size(), prefix) != 0)
        return -1;
    std::size_t i = prefix.size();
    std::int64_t block = 0;
    bool digits = false;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') {
        block = block * 10 + (name[i] - '0');
        digits = true;
        ++i;
    }
    return digits && i < name.size() && name[i] == '.' ? block : -1;
}

/// One stream of windows through the parts: the values its later parts still read, float and
/// quantized.
struct Stream {
    at::Tensor ids;
    std::int64_t start = 0;
    std::int64_t end = 0;
    std::map<std::string, at::Tensor> floatValues;
    std::map<std::string, at::Tensor> quantValues;
};

std::string partName(std::size_t p, std::size_t parts)
{
    if (p == 0)
        return "embedding";
    if (p + 1 == parts)
        return "head";
    return "block " + std::to_string(p) + " / " + std::to_string(parts - 2);
}

/// Whether a layer configured so reads calibration data (static activation ranges,
/// SmoothQuant, GPTQ, AWQ).
bool readsCalibration(const quant::LayerConfig& c)
{
    return !c.keepFloat && (c.actMode == quant::ActMode::Static || c.smoothAlpha > 0.0 ||
                            c.method != quant::LayerConfig::Method::Rtn);
}

/// Whether a layer of the plan reads calibration data.
bool readsCalibration(const quant::Plan& plan)
{
    for (const auto& [name, c] : plan.layers)
        if (readsCalibration(c))
            return true;
    return false;
}

} // namespace

Result<BlockPartition> partitionBlocks(const ir::Graph& graph, const std::string& path)
{
    BlockPartition out;
    std::vector<std::size_t> before, after;
    std::vector<std::vector<std::size_t>> blocks;
    for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
        const std::int64_t b = blockOf(graph.nodes[i].name);
        if (b < 0) {
            (blocks.empty() ? before : after).push_back(i);
            continue;
        }
        const auto count = static_cast<std::int64_t>(blocks.size());
        if (!after.empty() || b < count - 1 || b > count)
            return Error::unsupported(
                path, "the block engine runs stacks of decoder blocks whose nodes are named "
                      "layer.<i>.… in order; node '" + graph.nodes[i].name + "' breaks the stack" +
                      (after.empty() ? std::string() : " (after '" +
                                                           graph.nodes[after.front()].name + "')"));
        if (b == count)
            blocks.emplace_back();
        blocks.back().push_back(i);
    }
    if (blocks.empty())
        return Error::unsupported(path, "the block engine runs stacks of decoder blocks (nodes "
                                        "named layer.<i>.…); this graph has none");
    out.blocks = static_cast<std::int64_t>(blocks.size());
    out.parts.push_back(std::move(before));
    for (auto& b : blocks)
        out.parts.push_back(std::move(b));
    out.parts.push_back(std::move(after));
    return out;
}

std::string blockEngineUnsupported(const ir::Graph& graph, const quant::Scheme& scheme)
{
    if (ir::taskOf(graph) != ir::Task::LanguageModel)
        return "it runs language models (task lm); this model's metric is " +
               std::string(ir::metricNameOf(ir::taskOf(graph)));
    if (scheme.qat)
        return "quantization-aware training (" + scheme.preset + ") trains the whole model";
    auto plan = quant::makePlan(graph, scheme);
    if (!plan)
        return plan.error().message;
    if (scheme.foldBatchNorm)
        for (const auto& node : graph.nodes)
            if (node.op == ir::OpKind::BatchNorm)
                return "scheme " + scheme.preset + " folds BatchNorm (node '" + node.name +
                       "'), which needs the whole graph";
    return {};
}

Result<QuantReport> analyzeBlockwise(const ir::Graph& floatGraph, const quant::Scheme& scheme,
                                     const at::Tensor& analysisBatch, const io::Dataset* eval,
                                     const AnalysisOptions& options, const std::string& path,
                                     Progress& progress, const CancelToken& cancel,
                                     const io::Dataset* calib)
{
    const auto started = Clock::now();
    if (const std::string why = blockEngineUnsupported(floatGraph, scheme); !why.empty())
        return Error::unsupported(path, "the block engine cannot run " + scheme.spec + ": " + why);
    auto partition = partitionBlocks(floatGraph, path);
    if (!partition)
        return partition.error();
    auto plan = quant::makePlan(floatGraph, scheme);
    if (!plan)
        return plan.error();
    const auto& parts = partition->parts;

    QuantReport report;
    report.engine = "block";
    report.scheme = scheme;
    report.schemeSpec = scheme.spec;
    report.params = floatGraph.parameterCount();
    if (readsCalibration(*plan) && calib && calib->inputs.defined())
        report.calibSamples = std::min(calib->inputs.size(0), scheme.calibSamples);
    report.throughput.device = exec::deviceDescription(options.device.is_cuda() ? "cuda" : "cpu");
    report.throughput.cpu = kernels::cpuModelName();
    try {
        c10::InferenceMode guard;
        // The analysis batch as analyze takes it: a few short windows.
        at::Tensor x =
            analysisBatch.slice(0, 0, std::min(analysisBatch.size(0), options.analysisSamples))
                .to(options.device);
        if (x.dim() >= 2) {
            x = x.slice(0, 0, std::min(x.size(0), options.sequenceAnalysisSamples));
            x = x.slice(1, 0, std::min(x.size(1), options.sequenceAnalysisTokens));
        }
        report.analysisSamples = x.size(0);

        // Streams: [0] the analysis batch, then the evaluation windows in the metric's batches.
        std::vector<Stream> streams;
        auto feed = [&](const at::Tensor& batch, std::int64_t start, std::int64_t end) {
            Stream s;
            s.ids = batch;
            s.start = start;
            s.end = end;
            const auto in = exec::inputsForBatch(floatGraph, batch);
            for (std::size_t i = 0; i < in.size(); ++i)
                s.floatValues[floatGraph.inputs[i].name] = in[i];
            s.quantValues = s.floatValues;
            streams.push_back(std::move(s));
        };
        feed(x, 0, x.size(0));

        // Calibration streams (static ranges, SmoothQuant, GPTQ, AWQ): the calibration windows
        // in prepare's batches, carried through the parts by the float model only (prepare
        // calibrates on the float graph, so no layer's statistics depend on another's rounding).
        std::vector<Stream> calibStreams;
        std::int64_t calibCount = 0;
        if (readsCalibration(*plan)) {
            if (!calib || !calib->inputs.defined() || calib->inputs.size(0) == 0)
                return Error::usage("scheme " + scheme.spec +
                                    " reads calibration data (static activation ranges, "
                                    "SmoothQuant, GPTQ or AWQ): give calibration data (--calib)");
            const at::Tensor& samples = calib->inputs;
            calibCount = std::min(samples.size(0), scheme.calibSamples);
            const std::int64_t batch = quant::calibrationBatch(floatGraph);
            for (std::int64_t start = 0; start < calibCount; start += batch) {
                const std::int64_t end = std::min(calibCount, start + batch);
                Stream c;
                c.ids = samples.slice(0, start, end);
                c.start = start;
                c.end = end;
                const auto in = exec::inputsForBatch(floatGraph, c.ids);
                for (std::size_t i = 0; i < in.size(); ++i)
                    c.floatValues[floatGraph.inputs[i].name] = in[i];
                calibStreams.push_back(std::move(c));
            }
        }
        std::optional<DivergenceAccumulator> divergence;
        if (eval) {
            if (auto r = checkLmWindows(eval->inputs, options.sequence.overlap); !r) {
                Error e = r.error();
                if (e.path.empty())
                    e.path = eval->path;
                return e;
            }
            const at::Tensor& windows = eval->inputs;
            const std::int64_t batch =
                std::max<std::int64_t>(lmWindowBatch(floatGraph, windows.size(1),
                                                     options.sequence.batchSize),
                                       1);
            for (std::int64_t start = 0; start < windows.size(0); start += batch) {
                const std::int64_t end = std::min(windows.size(0), start + batch);
                feed(windows.slice(0, start, end).to(at::kLong), start, end);
            }
            divergence.emplace(options.sequence.overlap, eval->path);
        }

        // The last part that reads each value; graph outputs are read after the last part.
        std::map<std::string, std::size_t> lastPart;
        for (std::size_t p = 0; p < parts.size(); ++p)
            for (const std::size_t i : parts[p])
                for (const auto& in : floatGraph.nodes[i].inputs)
                    if (!in.empty() && !floatGraph.initializer(in))
                        lastPart[in] = std::max(lastPart[in], p);
        for (const auto& out : floatGraph.outputs)
            lastPart[out.name] = parts.size();

        std::int64_t quantizedBytes = 0;
        std::set<std::string> quantizedWeights;
        for (std::size_t p = 0; p < parts.size(); ++p) {
            if (cancel.cancelled())
                return Error::cancelled();
            const std::string stage = partName(p, parts.size());
            const double partFrom = static_cast<double>(p) / static_cast<double>(parts.size());
            progress.report(partFrom, stage + ": quantizing");
            // The part as a graph of its own: its nodes, the weights they read, the values
            // earlier parts computed as inputs and what later parts read as outputs.
            ir::Graph sub;
            sub.name = floatGraph.name;
            sub.metadata = floatGraph.metadata;
            sub.opsetVersion = floatGraph.opsetVersion;
            std::set<std::string> produced, seenInputs;
            std::vector<std::string> inputNames, outputNames;
            for (const std::size_t i : parts[p]) {
                const ir::Node& node = floatGraph.nodes[i];
                for (const auto& in : node.inputs) {
                    if (in.empty())
                        continue;
                    if (const at::Tensor* w = floatGraph.initializer(in)) {
                        sub.initializers[in] = *w;
                        if (floatGraph.widenOnRead.count(in))
                            sub.widenOnRead.insert(in);
                        if (auto t = floatGraph.initializerTypes.find(in);
                            t != floatGraph.initializerTypes.end())
                            sub.initializerTypes[in] = t->second;
                    } else if (!produced.count(in) && seenInputs.insert(in).second) {
                        inputNames.push_back(in);
                    }
                }
                for (const auto& out : node.outputs)
                    if (!out.empty()) {
                        produced.insert(out);
                        if (auto it = lastPart.find(out); it != lastPart.end() && it->second > p)
                            outputNames.push_back(out);
                    }
                sub.nodes.push_back(node);
            }
            // Declared without a shape; Int64 so the executor hands each value on as it was
            // computed (it converts floating inputs declared Float32 to float32).
            for (const auto& name : inputNames)
                sub.inputs.push_back(ir::ValueInfo{name, ir::DType::Int64, {}});
            for (const auto& name : outputNames)
                sub.outputs.push_back(ir::ValueInfo{name, ir::DType::Float32, {}});
            // This part's quantized layers read their weights in float32 (checked for NaN and
            // infinity as they widen); the rest stay in their file's width.
            for (const auto& node : sub.nodes) {
                auto it = plan->layers.find(node.name);
                if (it == plan->layers.end() || it->second.keepFloat)
                    continue;
                const bool recurrent =
                    node.op == ir::OpKind::LSTM || node.op == ir::OpKind::GRU;
                for (std::size_t k = 1; k <= (recurrent ? 2u : 1u) && k < node.inputs.size(); ++k) {
                    const std::string& name = node.inputs[k];
                    if (!sub.widenOnRead.erase(name))
                        continue;
                    const at::Tensor& narrow = floatGraph.initializers.at(name);
                    sub.initializers[name] = floatGraph.readAs(name, narrow);
                    // The 16-bit pages are read: give them back (nothing writes a widenOnRead
                    // tensor), so the file's pages do not pile up block after block.
                    io::MappedFile::releasePages(narrow.data_ptr(), narrow.nbytes());
                }
            }
            // The part's calibration inputs, batch by batch, when one of its layers reads them.
            std::optional<quant::PartCalibration> partCalib;
            if (!calibStreams.empty()) {
                bool reads = false;
                for (const auto& node : sub.nodes)
                    if (auto it = plan->layers.find(node.name);
                        it != plan->layers.end() && readsCalibration(it->second))
                        reads = true;
                if (reads) {
                    partCalib.emplace();
                    partCalib->samples = calibCount;
                    for (const Stream& c : calibStreams) {
                        std::vector<at::Tensor> in;
                        for (const auto& name : inputNames)
                            in.push_back(c.floatValues.at(name));
                        partCalib->batches.push_back(std::move(in));
                    }
                }
            }
            Progress preparing([&progress, partFrom, n = parts.size(),
                                stage](double f, const std::string& what) {
                progress.report(partFrom + 0.5 * f / static_cast<double>(n),
                                stage + ": " + what);
            });
            auto prepared = quant::preparePart(sub, scheme, *plan, cancel,
                                               partCalib ? &*partCalib : nullptr, preparing);
            partCalib.reset();
            if (!prepared) {
                Error e = prepared.error();
                if (e.path.empty() && e.code == ErrorCode::BadInput && calib)
                    e.path = calib->path;
                return e;
            }
            sub = ir::Graph();  // the prepared part holds what it needs
            const quant::QuantizedModel& qm = *prepared;
            for (const auto& node : qm.graph.nodes) {
                auto lq = qm.layers.find(node.name);
                if (lq == qm.layers.end() || lq->second.config.keepFloat)
                    continue;
                quantizedBytes += lq->second.bytesQuantized;
                quantizedWeights.insert(node.inputs[1]);
                if ((node.op == ir::OpKind::LSTM || node.op == ir::OpKind::GRU) &&
                    node.inputs.size() > 2)
                    quantizedWeights.insert(node.inputs[2]);
            }
            exec::Executor floatExec(qm.graph, exec::ExecOptions{options.device});
            exec::Executor quantExec(qm.graph, exec::ExecOptions{options.device});
            quantExec.addHook(quant::makeQuantHook(qm));
            std::set<std::string> keep;
            for (const auto& node : qm.graph.nodes) {
                if (!qm.layers.count(node.name))
                    continue;
                for (const auto& in : node.inputs)
                    if (!in.empty() && !qm.graph.initializer(in))
                        keep.insert(in);
                keep.insert(node.outputs.front());
            }
            // The calibration windows move on through the float part (the last part's outputs,
            // the logits, are not needed).
            if (p + 1 < parts.size()) {
                for (Stream& c : calibStreams) {
                    if (cancel.cancelled())
                        return Error::cancelled();
                    std::vector<at::Tensor> in;
                    for (const auto& name : inputNames)
                        in.push_back(c.floatValues.at(name));
                    auto out = floatExec.run(in);
                    if (!out)
                        return out.error();
                    for (std::size_t i = 0; i < outputNames.size(); ++i)
                        c.floatValues[outputNames[i]] = (*out)[i];
                    for (auto it = c.floatValues.begin(); it != c.floatValues.end();) {
                        auto last = lastPart.find(it->first);
                        if (last == lastPart.end() || last->second <= p)
                            it = c.floatValues.erase(it);
                        else
                            ++it;
                    }
                }
            } else {
                calibStreams.clear();
            }
            for (std::size_t s = 0; s < streams.size(); ++s) {
                if (cancel.cancelled())
                    return Error::cancelled();
                Stream& st = streams[s];
                std::vector<at::Tensor> floatIn, quantIn;
                for (const auto& name : inputNames) {
                    floatIn.push_back(st.floatValues.at(name));
                    quantIn.push_back(st.quantValues.at(name));
                }
                std::map<std::string, at::Tensor> floatOut, quantOut;
                if (s == 0) {
                    auto fv = floatExec.runKeeping(floatIn, keep);
                    if (!fv)
                        return fv.error();
                    auto qv = quantExec.runKeeping(quantIn, keep);
                    if (!qv)
                        return qv.error();
                    for (std::size_t i = 0; i < inputNames.size(); ++i) {
                        fv->emplace(inputNames[i], floatIn[i]);
                        qv->emplace(inputNames[i], quantIn[i]);
                    }
                    for (const auto& node : qm.graph.nodes)
                        if (auto lq = qm.layers.find(node.name); lq != qm.layers.end())
                            report.layers.push_back(
                                layerReport(node, qm, lq->second, *fv, *qv, options));
                    floatOut = std::move(fv).value();
                    quantOut = std::move(qv).value();
                } else {
                    auto fv = floatExec.run(floatIn);
                    if (!fv)
                        return fv.error();
                    auto qv = quantExec.run(quantIn);
                    if (!qv)
                        return qv.error();
                    for (std::size_t i = 0; i < outputNames.size(); ++i) {
                        floatOut[outputNames[i]] = (*fv)[i];
                        quantOut[outputNames[i]] = (*qv)[i];
                    }
                }
                for (const auto& name : outputNames) {
                    st.floatValues[name] = floatOut.at(name);
                    st.quantValues[name] = quantOut.at(name);
                }
                // Values no later part reads are dropped.
                for (auto* values : {&st.floatValues, &st.quantValues})
                    for (auto it = values->begin(); it != values->end();) {
                        auto last = lastPart.find(it->first);
                        if (last == lastPart.end() || last->second <= p)
                            it = values->erase(it);
                        else
                            ++it;
                    }
                if (p + 1 == parts.size()) {
                    // The head's logits: scored batch by batch, then dropped.
                    if (s > 0 && divergence) {
                        const std::string& logits = floatGraph.outputs.front().name;
                        if (auto r = divergence->add(st.floatValues.at(logits),
                                                     st.quantValues.at(logits), st.ids,
                                                     st.start, st.end);
                            !r)
                            return r.error();
                    }
                    st.floatValues.clear();
                    st.quantValues.clear();
                }
                progress.report(partFrom + (0.5 + 0.5 * static_cast<double>(s + 1) /
                                                      static_cast<double>(streams.size())) /
                                               static_cast<double>(parts.size()),
                                stage + (s == 0 ? ": comparing layers" : ": evaluating"));
            }
        }

        // Sizes as quant::prepare counts them: every weight in float32 (views of one storage
        // once), and quantized weights as stored beside the rest in float32.
        std::set<std::pair<const void*, std::int64_t>> seen;
        for (const auto& [name, t] : floatGraph.initializers) {
            const bool wide = floatGraph.widenOnRead.count(name) != 0;
            const std::int64_t bytes = wide ? t.numel() * 4 : floatGraph.initializerBytes(name, t);
            if (!t.has_storage() || seen.emplace(t.data_ptr(), t.numel()).second)
                report.sizeFloat += bytes;
            if (!quantizedWeights.count(name))
                report.sizeQuantized +=
                    t.numel() * (wide ? 4 : static_cast<std::int64_t>(t.element_size()));
        }
        report.sizeQuantized += quantizedBytes;
        if (options.onLayers)
            options.onLayers(report);

        if (divergence) {
            auto d = divergence->finish();
            if (!d)
                return d.error();
            MetricValue pf{std::string(ir::metricNameOf(ir::Task::LanguageModel)), d->pplFloat,
                           d->tokens};
            pf.higherIsBetter = false;
            MetricValue pq = pf;
            pq.value = d->pplQuantized;
            report.metricFloat = pf;
            report.metricQuantized = pq;
            report.divergence = *d;
        }
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("block engine failed: ") + e.what_without_backtrace());
    } catch (const std::out_of_range&) {
        return Error::runtime("block engine failed: a value was not computed");
    } catch (const std::runtime_error& e) {
        // A 16-bit weight holding NaN or infinity, found as it widens.
        return Error::badInput(path, e.what());
    }
    report.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    progress.report(1.0, "done");
    return report;
}

MemoryEstimate estimateBlockQuantize(const ir::Graph& graph, const quant::Scheme& scheme,
                                     const WorkShape& batch, std::int64_t windows,
                                     std::int64_t calibWindows)
{
    MemoryEstimate e;
    e.action = "quantize (block engine)";
    e.mapped = graph.parameterBytes();
    e.held = heldMemoryBytes();
    e.reusable = reusableHeapBytes();
    auto partition = partitionBlocks(graph);
    auto plan = quant::makePlan(graph, scheme);
    if (!partition || !plan)
        return e;  // analyzeBlockwise refuses such a graph or scheme before allocating
    const auto& parts = partition->parts;
    const auto isWide16 = [&](const std::string& name, const at::Tensor& t) {
        return graph.widenOnRead.count(name) != 0 && t.defined() && t.scalar_type() != at::kFloat;
    };
    const std::int64_t cache = exec::ExecOptions().widenCacheBytes;
    for (const auto& part : parts) {
        std::int64_t quantized = 0, others = 0, largest = 0;
        std::set<std::string> seen;
        std::int64_t hessians = 0, solve = 0;
        for (const std::size_t i : part) {
            const ir::Node& node = graph.nodes[i];
            auto it = plan->layers.find(node.name);
            const bool quantizedLayer = it != plan->layers.end() && !it->second.keepFloat;
            if (quantizedLayer && calibWindows > 0 &&
                it->second.method != quant::LayerConfig::Method::Rtn && node.inputs.size() > 1)
                if (const at::Tensor* w = graph.initializer(node.inputs[1]); w && w->dim() >= 2) {
                    // Its Hessian [in, in] float32 until the part's weights are rounded; the
                    // solve holds about four more [in, in] float32 (damped copy, Cholesky
                    // factor, inverse, its factor), the loss in float64 ([in, in] and the
                    // [out, in] difference) and the rounded weight.
                    const std::int64_t in = quant::weightView(node, *w).size(1);
                    const std::int64_t out = w->numel() / std::max<std::int64_t>(in, 1);
                    hessians += in * in * 4;
                    solve = std::max(solve, in * in * (4 * 4 + 8) + out * in * (8 + 4));
                }
            for (std::size_t k = 0; k < node.inputs.size(); ++k) {
                const at::Tensor* t = graph.initializer(node.inputs[k]);
                if (!t || !seen.insert(node.inputs[k]).second)
                    continue;
                if (quantizedLayer && k == 1) {
                    quantized += t->numel() * 4;
                } else if (isWide16(node.inputs[k], *t)) {
                    others += t->numel() * 4;
                    largest = std::max<std::int64_t>(largest, t->numel() * 4);
                }
            }
        }
        // Two executors (float, quantized), each with its widen cache; the largest weight
        // widened for its node with its 16-bit pages still resident (estimateEval's rule).
        const std::int64_t widened =
            quantized + std::min(others, 2 * cache + largest + largest / 2);
        if (widened + quantized + hessians + solve >
            e.widened + e.quantized + e.calibration) {
            e.widened = widened;
            e.quantized = quantized;
            e.calibration = hessians + solve;
        }
    }
    // The values handed from part to part, for every window and the analysis batch, twice.
    std::map<std::string, std::size_t> lastPart, firstPart;
    for (std::size_t p = 0; p < parts.size(); ++p)
        for (const std::size_t i : parts[p]) {
            for (const auto& in : graph.nodes[i].inputs)
                if (!in.empty() && !graph.initializer(in))
                    lastPart[in] = std::max(lastPart[in], p);
            for (const auto& out : graph.nodes[i].outputs)
                firstPart.emplace(out, p);
        }
    std::vector<std::vector<std::int64_t>> inputShapes;
    for (const auto& in : graph.inputs) {
        std::vector<std::int64_t> s = in.shape;
        for (std::size_t d = 0; d < s.size(); ++d)
            if (s[d] < 0)
                s[d] = d == 0 ? windows : batch.seqLen;
        inputShapes.push_back(std::move(s));
    }
    std::int64_t carried = 0;
    std::int64_t carriedPerWindow = 0;
    if (auto shapes = ir::inferShapes(graph, inputShapes)) {
        for (std::size_t p = 0; p + 1 < parts.size(); ++p) {
            std::int64_t bytes = 0;
            for (const auto& [name, last] : lastPart) {
                auto first = firstPart.find(name);
                auto shape = shapes->find(name);
                if (first == firstPart.end() || first->second > p || last <= p ||
                    shape == shapes->end())
                    continue;
                std::int64_t n = 4;
                for (const auto d : shape->second)
                    n *= std::max<std::int64_t>(d, 1);
                bytes += n;
            }
            carried = std::max(carried, bytes);
        }
        carriedPerWindow = carried / std::max<std::int64_t>(windows, 1);
    }
    // The calibration windows' values, carried by the float model only.
    if (readsCalibration(*plan))
        e.calibration += carriedPerWindow * calibWindows;
    // One batch through a part and its logits scored: estimateEval's activations.
    const MemoryEstimate one = estimateEval(graph, batch);
    e.activations = 2 * carried + one.activations;
    return e;
}

} // namespace bitlens::analysis
