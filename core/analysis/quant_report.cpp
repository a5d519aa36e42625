#include "analysis/quant_report.h"

#include "kernels/cpu_features.h"

#include "analysis/lm_metrics.h"
#include "jobs/step_clock.h"

#include "exec/device.h"
#include "quant/real_kernels.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <set>

namespace bitlens::analysis {

using ir::Task;
using ir::taskOf;

namespace {

using Clock = std::chrono::steady_clock;

std::string typeName(quant::QuantType t) { return std::string(quant::traits(t).name); }

/// "'down_proj' or 'o_proj'", for messages.
std::string joinFilters(const std::vector<std::string>& filters)
{
    std::string out;
    for (std::size_t i = 0; i < filters.size(); ++i)
        out += (i ? " or '" : "'") + filters[i] + "'";
    return out;
}

double secondsSince(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Median wall time of `reps` calls of f.
template <typename F>
double medianSeconds(F&& f, int reps)
{
    std::vector<double> times;
    for (int i = 0; i < reps; ++i) {
        const auto start = Clock::now();
        f();
        times.push_back(secondsSince(start));
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

std::string deviceName(const c10::Device& device)
{
    return exec::deviceDescription(device.is_cuda() ? "cuda" : "cpu");
}

/// Times every node between its first beforeNode and its afterNode (attach it first).
class LayerTimer : public exec::NodeHook {
public:
    void beforeNode(const ir::Node& node, std::vector<at::Tensor>&) override
    {
        m_start[node.name] = Clock::now();
    }
    void afterNode(const ir::Node& node, std::vector<at::Tensor>&) override
    {
        m_ms[node.name].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - m_start[node.name]).count());
    }
    double medianMs(const std::string& node) const
    {
        auto it = m_ms.find(node);
        if (it == m_ms.end() || it->second.empty())
            return 0.0;
        std::vector<double> v = it->second;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    }

private:
    std::map<std::string, Clock::time_point> m_start;
    std::map<std::string, std::vector<double>> m_ms;
};

} // namespace

ThroughputPlan planThroughputRuns(double pairSeconds, double budgetSeconds)
{
    ThroughputPlan plan;
    if (budgetSeconds <= 0.0 || pairSeconds <= 0.0)
        return plan;
    // 60 % of the budget to the totals (rounds x reps pairs), the rest to the per-layer runs.
    const int totals = std::clamp(static_cast<int>(0.6 * budgetSeconds / pairSeconds), 1, 9);
    plan.reps = totals >= 3 ? 3 : totals;
    plan.rounds = std::max(1, totals / plan.reps);
    plan.layerRuns = std::clamp(static_cast<int>(0.4 * budgetSeconds / pairSeconds), 1, 5);
    return plan;
}

Result<Throughput> measureThroughput(const quant::QuantizedModel& model, const at::Tensor& input,
                                     const AnalysisOptions& options, Progress& progress,
                                     const CancelToken& cancel)
{
    try {
        c10::InferenceMode guard;
        const at::Tensor x = input.to(options.device);
        exec::Executor floatExec(model.graph, exec::ExecOptions{options.device});
        // Real low-bit kernels where LibTorch has one for the layer on this device; the hook
        // runs the other layers simulated and records which kernel each layer got.
        exec::Executor quantExec(model.graph, exec::ExecOptions{options.device});
        auto realHook = quant::makeRealKernelHook(model, options.device);
        quantExec.addHook(realHook);
        const std::vector<at::Tensor> feeds = exec::inputsForBatch(model.graph, x);
        // The warm-up run of each model (weights packed, caches filled) says what a run costs.
        progress.report(0.0, "measuring throughput: warm-up");
        const auto warmStart = Clock::now();
        Result<std::vector<at::Tensor>> check = floatExec.run(feeds);
        if (!check)
            return check.error();
        auto runFloat = [&] { (void)floatExec.run(feeds); };
        auto runQuant = [&] { (void)quantExec.run(feeds); };
        runQuant();
        const ThroughputPlan plan =
            planThroughputRuns(secondsSince(warmStart), options.throughputSeconds);
        const bool perLayer = !options.device.is_cuda();
        const int pairs = plan.rounds * plan.reps + (perLayer ? plan.layerRuns : 0);
        int done = 0;
        auto step = [&]() -> bool {
            ++done;
            progress.report(static_cast<double>(done) / pairs,
                            "measuring throughput: run " + std::to_string(done) + " of " +
                                std::to_string(pairs));
            return !cancel.cancelled();
        };
        double tFloat = 0.0;
        double tQuant = 0.0;
        for (int round = 0; round < plan.rounds; ++round) {
            std::vector<double> f, q;
            for (int rep = 0; rep < plan.reps; ++rep) {
                f.push_back(medianSeconds(runFloat, 1));
                q.push_back(medianSeconds(runQuant, 1));
                if (!step())
                    return Error::cancelled();
            }
            std::sort(f.begin(), f.end());
            std::sort(q.begin(), q.end());
            tFloat += f[f.size() / 2];
            tQuant += q[q.size() / 2];
        }
        Throughput t;
        t.device = deviceName(options.device);
        t.cpu = kernels::cpuModelName();
        if (!options.device.is_cuda()) {
            t.isa = kernels::isaName(kernels::isaLevel());
            t.isaNote = kernels::isaOverrideNote();
        }
        t.batch = x.size(0);
        t.runs = plan.rounds * plan.reps;
        t.floatSamplesPerS = plan.rounds * static_cast<double>(x.size(0)) / tFloat;
        t.quantizedSamplesPerS = plan.rounds * static_cast<double>(x.size(0)) / tQuant;
        t.kernels = realHook->kernelsRun();

        // Per layer, on fresh executors so the timer runs before any other hook.
        if (!options.device.is_cuda()) {
            auto floatTimer = std::make_shared<LayerTimer>();
            auto quantTimer = std::make_shared<LayerTimer>();
            exec::Executor floatTimed(model.graph, exec::ExecOptions{options.device});
            floatTimed.addHook(floatTimer);
            exec::Executor quantTimed(model.graph, exec::ExecOptions{options.device});
            quantTimed.addHook(quantTimer);
            quantTimed.addHook(realHook);  // weights are packed once, by the hook above
            for (int i = 0; i < plan.layerRuns; ++i) {
                (void)floatTimed.run(feeds);
                (void)quantTimed.run(feeds);
                if (!step())
                    return Error::cancelled();
            }
            t.layerRuns = plan.layerRuns;
            for (const auto& [name, lq] : model.layers) {
                const double f = floatTimer->medianMs(name), q = quantTimer->medianMs(name);
                t.layerMs[name] = {f, q};
                const auto k = t.kernels.find(name);
                const bool real = k != t.kernels.end() && k->second.rfind("simulated", 0) != 0 &&
                                  k->second.rfind("float32", 0) != 0;
                if (real && f > 0.0 && q > f) {
                    char text[128];
                    std::snprintf(text, sizeof text,
                                  "real kernel slower than float32 here (%.2f ms vs %.2f ms "
                                  "per batch)",
                                  q, f);
                    t.notes[name] = text;
                }
            }
        }
        return t;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("throughput measurement failed: ") +
                              e.what_without_backtrace());
    }
}

Result<MetricValue> evaluateQuantized(const quant::QuantizedModel& model, const io::Dataset& eval,
                                      const AnalysisOptions& options,
                                      const std::set<std::string>& only, Progress& progress,
                                      const CancelToken& cancel)
{
    if (taskOf(model.graph) != Task::Classification)
        return evaluateMetric(model.graph, eval, options.device, options.batchSize,
                              quant::makeQuantHook(model, only), options.sequence, progress,
                              cancel);
    if (!eval.labels.defined())
        return Error::badInput(eval.path, "has no labels, so top-1 accuracy cannot be measured");
    c10::InferenceMode guard;
    exec::Executor executor(model.graph, exec::ExecOptions{options.device});
    executor.addHook(quant::makeQuantHook(model, only));
    const std::int64_t n = eval.size();
    std::int64_t correct = 0;
    for (std::int64_t start = 0; start < n; start += options.batchSize) {
        if (cancel.cancelled())
            return Error::cancelled();
        const std::int64_t end = std::min(n, start + options.batchSize);
        auto out = executor.run({eval.inputs.slice(0, start, end)});
        if (!out)
            return out.error();
        const at::Tensor predicted = out->front().argmax(1).to(at::kCPU);
        correct += predicted.eq(eval.labels.slice(0, start, end)).sum().item<std::int64_t>();
        progress.report(static_cast<double>(end) / static_cast<double>(n), "evaluating");
    }
    return MetricValue{"top1", static_cast<double>(correct) / static_cast<double>(n), n};
}

std::string weightHash(const at::Tensor& weight)
{
    // FNV-1a over 64-bit words (the tail bytes one by one): fast enough for every weight of an
    // 8B model, and any changed code changes the dequantized value it hashes.
    const at::Tensor w = weight.to(at::kCPU, at::kFloat).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(w.data_ptr());
    const std::size_t n = static_cast<std::size_t>(w.nbytes());
    std::uint64_t h = 14695981039346656037ull;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t word;
        std::memcpy(&word, bytes + i, 8);
        h = (h ^ word) * 1099511628211ull;
    }
    for (; i < n; ++i)
        h = (h ^ bytes[i]) * 1099511628211ull;
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
    return text;
}

LayerReport layerReport(const ir::Node& node, const quant::QuantizedModel& model,
                        const quant::LayerQuant& lq,
                        const std::map<std::string, at::Tensor>& floatValues,
                        const std::map<std::string, at::Tensor>& quantValues,
                        const AnalysisOptions& options)
{
    const auto* floatVals = &floatValues;
    const auto* quantVals = &quantValues;
    LayerReport row;
    row.name = node.name;
    row.op = std::string(ir::opKindName(node.op));
    row.config = lq.config.describe();
    row.note = lq.note;
    row.method = lq.method;
    row.methodLossRtn = lq.methodLossRtn;
    row.methodLoss = lq.methodLoss;
    row.params = lq.params;
    row.bytesFloat = lq.bytesFloat;
    row.bytesQuantized = lq.bytesQuantized;
    const bool isFloat = lq.config.keepFloat;
    row.weightType = isFloat ? "float32" : typeName(lq.config.weightType);
    row.actType = isFloat || lq.config.actMode == quant::ActMode::Float
                      ? "float32"
                      : typeName(lq.config.actType);
    row.simulated = !isFloat;
    row.kernel = isFloat ? "float32 (LibTorch)" : "fake-quant (simulated)";

    // Local: this layer alone quantized, fed the float model's inputs.
    std::vector<at::Tensor> inputs;
    for (const auto& in : node.inputs) {
        if (in.empty())
            inputs.emplace_back();
        else if (const at::Tensor* w = model.graph.initializer(in))
            inputs.push_back(model.graph.readAs(in, *w).to(options.device));
        else
            inputs.push_back(floatVals->at(in));
    }
    const std::vector<at::Tensor> floatInputs = inputs;
    auto hook = quant::makeQuantHook(model, {node.name});
    hook->beforeNode(node, inputs);
    std::vector<at::Tensor> localOuts;  // LSTM / GRU: the hook runs the recurrence
    if (!hook->computeNode(node, inputs, localOuts))
        localOuts = exec::runNode(node, inputs, exec::ExecOptions{options.device});
    const at::Tensor local = localOuts.front();
    const at::Tensor& ref = floatVals->at(node.outputs.front());
    const at::Tensor& acc = quantVals->at(node.outputs.front());
    row.local = compareTensors(ref, local);
    row.accumulated = compareTensors(ref, acc);
    const at::Tensor err = (acc - ref).to(at::kCPU);
    const double range = std::max(err.abs().max().item<double>(), 1e-12);
    row.errorHistogram = histogram(err, options.histogramBins, -range, range);
    // LSTM / GRU: W and R together are the layer's weights.
    const bool recurrent = node.op == ir::OpKind::LSTM || node.op == ir::OpKind::GRU;
    auto allWeights = [&](const at::Tensor& w, const at::Tensor& r) {
        return recurrent ? at::cat({w.reshape({-1}), r.reshape({-1})}) : w;
    };
    const at::Tensor wShown =
        isFloat ? allWeights(floatInputs[1], recurrent ? floatInputs[2] : at::Tensor())
                : allWeights(lq.weightFloat, lq.recurrentFloat);
    if (!isFloat) {
        const at::Tensor fq = allWeights(lq.weightFq, lq.recurrentFq);
        row.weight = compareTensors(wShown, fq);
        row.weightHash = weightHash(fq);
    }
    row.weightHistogram = histogram(wShown, options.histogramBins);
    row.actHistogram = histogram(floatVals->at(node.inputs[0]), options.histogramBins);
    row.weightMin = wShown.min().item<double>();
    row.weightMax = wShown.max().item<double>();
    row.actClip = lq.actClip;
    // The calibration overlay: what each observer would clip this input to, and what
    // that costs at the layer's output (smoothed layers see a different input: skipped).
    const bool quantizedActs = lq.config.actMode == quant::ActMode::Static ||
                               lq.config.actMode == quant::ActMode::Dynamic;
    // Block formats (MX, NVFP4) scale every block of 16 / 32 on its own: no clip.
    if (!isFloat && quantizedActs && !lq.smooth.defined() &&
        quant::traits(lq.config.actType).needsScale &&
        !quant::isBlockFormat(quant::traits(lq.config.actType))) {
        for (const char* spec : {"minmax", "percentile:99.99", "entropy", "mse"}) {
            auto observer = (*quant::observerFactory(spec))();
            if (!observer->observe(floatInputs[0]))
                continue;
            const quant::ClipChoice clip =
                observer->choose(lq.config.actType, lq.config.actSymmetric);
            const quant::QParams qp = quant::chooseQParams(
                at::full({}, clip.lo, at::kFloat), at::full({}, clip.hi, at::kFloat),
                lq.config.actType, lq.config.actSymmetric,
                quant::Granularity::perTensor());
            at::Tensor y;
            if (recurrent) {
                // The recurrence as a static scheme runs it with this clip of X.
                quant::QuantizedModel one;
                quant::LayerQuant& l = one.layers[node.name] = lq;
                l.config.actMode = quant::ActMode::Static;
                l.act = qp;
                l.hiddenAct = quant::hiddenStateQParams(lq.config);
                auto clipHook = quant::makeQuantHook(one);
                std::vector<at::Tensor> in = floatInputs;
                std::vector<at::Tensor> outs;
                clipHook->beforeNode(node, in);
                clipHook->computeNode(node, in, outs);
                y = outs.front();
            } else {
                std::vector<at::Tensor> in = floatInputs;
                in[0] = quant::fakeQuantize(floatInputs[0], qp);
                in[1] = lq.weightFq.to(options.device);
                y = exec::runNode(node, in, exec::ExecOptions{options.device}).front();
            }
            row.calibrators.push_back({spec, clip.lo, clip.hi,
                                       compareTensors(ref, y).sqnrDb, clip.why});
        }
    }
    return row;
}

Result<QuantReport> analyze(const ir::Graph& floatGraph, const quant::QuantizedModel& model,
                            const at::Tensor& analysisBatch, const io::Dataset* eval,
                            const AnalysisOptions& options, std::optional<MetricValue> floatMetric,
                            Progress& progress, const CancelToken& cancel)
{
    const auto started = Clock::now();
    QuantReport report;
    report.scheme = model.scheme;
    report.schemeSpec = model.scheme.spec;
    report.params = floatGraph.parameterCount();
    report.sizeFloat = model.bytesFloat;
    report.sizeQuantized = model.bytesQuantized;
    report.foldedBatchNorms = model.foldedBatchNorms;
    report.calibSamples = model.calibSamples;
    report.reusedLayers = model.reusedLayers;
    report.qat = model.qat;
    try {
        c10::InferenceMode guard;
        at::Tensor x =
            analysisBatch.slice(0, 0, std::min(analysisBatch.size(0), options.analysisSamples))
                .to(options.device);
        // Sequence models keep every activation of a few short windows (attention is S x S).
        if (taskOf(model.graph) != Task::Classification && x.dim() >= 2) {
            x = x.slice(0, 0, std::min(x.size(0), options.sequenceAnalysisSamples));
            if (taskOf(model.graph) != Task::Sequence)
                x = x.slice(1, 0, std::min(x.size(1), options.sequenceAnalysisTokens));
        }
        report.analysisSamples = x.size(0);
        exec::Executor floatExec(model.graph, exec::ExecOptions{options.device});
        exec::Executor quantExec(model.graph, exec::ExecOptions{options.device});
        quantExec.addHook(quant::makeQuantHook(model));
        progress.report(0.0, "comparing layers");
        // Only the layers' inputs and outputs are read below: attention internals (scores,
        // probabilities, S x S per head) are freed as the runs go.
        std::set<std::string> keep;
        for (const auto& node : model.graph.nodes) {
            if (!model.layers.count(node.name))
                continue;
            for (const auto& in : node.inputs)
                if (!in.empty() && !model.graph.initializer(in))
                    keep.insert(in);
            keep.insert(node.outputs.front());
        }
        auto floatVals = floatExec.runKeeping(exec::inputsForBatch(model.graph, x), keep);
        if (!floatVals)
            return floatVals.error();
        auto quantVals = quantExec.runKeeping(exec::inputsForBatch(model.graph, x), keep);
        if (!quantVals)
            return quantVals.error();

        for (const auto& node : model.graph.nodes) {
            auto it = model.layers.find(node.name);
            if (it == model.layers.end())
                continue;
            if (cancel.cancelled())
                return Error::cancelled();
            report.layers.push_back(
                layerReport(node, model, it->second, *floatVals, *quantVals, options));
        }

        // Language models and encoders are timed on one window: each timed run of a
        // 135M-parameter LM costs ~0.5 CPU-s per 128-token window; options.throughputSeconds
        // bounds the runs.
        const at::Tensor timed = taskOf(model.graph) != Task::Classification && x.size(0) > 1
                                     ? x.slice(0, 0, 1)
                                     : x;
        Progress timing([&](double f, const std::string& stage) {
            progress.report(0.3 + 0.05 * f, stage);
        });
        auto throughput = measureThroughput(model, timed, options, timing, cancel);
        if (!throughput)
            return throughput.error();
        report.throughput = *throughput;
        for (auto& row : report.layers) {
            auto k = throughput->kernels.find(row.name);
            if (k == throughput->kernels.end())
                continue;
            row.kernel = k->second;
            row.simulated = k->second.rfind("simulated", 0) == 0;
            if (auto n = throughput->notes.find(row.name); n != throughput->notes.end())
                row.note = row.note.empty() ? n->second : row.note + "; " + n->second;
        }
        if (options.onLayers)
            options.onLayers(report);

        if (eval && taskOf(model.graph) == Task::LanguageModel) {
            // One pass gives both perplexities (bit for bit evaluatePerplexity's) and the KL
            // divergence; a float metric handed in is the same number, so it is kept.
            Progress sub([&](double f, const std::string&) {
                progress.report(0.35 + 0.65 * f, "evaluating float and quantized model");
            });
            auto d = evaluateLmDivergence(floatGraph, model.graph, quant::makeQuantHook(model, {}),
                                          eval->inputs, options.sequence, options.device, sub,
                                          cancel);
            if (!d) {
                Error e = d.error();
                if (e.path.empty() && e.code == ErrorCode::BadInput)
                    e.path = eval->path;
                return e;
            }
            MetricValue pf{std::string(ir::metricNameOf(Task::LanguageModel)), d->pplFloat,
                           d->tokens};
            pf.higherIsBetter = false;
            MetricValue pq = pf;
            pq.value = d->pplQuantized;
            report.metricFloat = floatMetric ? floatMetric : std::optional<MetricValue>(pf);
            report.metricQuantized = pq;
            report.divergence = *d;
        } else if (eval) {
            report.metricFloatReused = floatMetric.has_value();
            if (!floatMetric) {
                Progress sub([&](double f, const std::string&) {
                    progress.report(0.35 + 0.3 * f, "evaluating float model");
                });
                auto m = evaluateMetric(floatGraph, *eval, options.device, options.batchSize,
                                        nullptr, options.sequence, sub, cancel);
                if (!m)
                    return m.error();
                floatMetric = *m;
            }
            report.metricFloat = floatMetric;
            Progress sub([&](double f, const std::string&) {
                progress.report(0.65 + 0.35 * f, "evaluating quantized model");
            });
            auto q = evaluateQuantized(model, *eval, options, {}, sub, cancel);
            if (!q)
                return q.error();
            report.metricQuantized = *q;
        }
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("analysis failed: ") + e.what_without_backtrace());
    } catch (const std::out_of_range&) {
        return Error::runtime("analysis failed: a layer output was not computed");
    }
    report.seconds = secondsSince(started);
    progress.report(1.0, "done");
    return report;
}

Result<std::vector<SensitivityRow>> sensitivity(const ir::Graph& floatGraph,
                                                const quant::QuantizedModel& model,
                                                const io::Dataset& eval,
                                                const at::Tensor& analysisBatch,
                                                const AnalysisOptions& options,
                                                const MetricValue& floatMetric,
                                                Progress& progress, const CancelToken& cancel)
{
    const bool byKld = options.sensitivityByKld;
    if (byKld && taskOf(model.graph) != Task::LanguageModel)
        return Error::usage("ranking layers by KL divergence needs a language model (task lm); "
                            "this model's metric is " +
                            std::string(ir::metricNameOf(taskOf(model.graph))));
    progress.report(0.0, "comparing layers with float; time left after the first layer");
    // The sweep reads each layer's local SQNR from this pass, not its timing: one timed run.
    AnalysisOptions once = options;
    once.throughputSeconds = 1e-9;
    auto report = analyze(floatGraph, model, analysisBatch, nullptr, once, floatMetric,
                          Progress::none(), cancel);
    if (!report)
        return report.error();
    std::vector<SensitivityRow> rows;
    // The layers a sweep runs are the quantized ones: "layer n of N" counts those, and the time
    // left is their measured mean x the layers to go (the first layer's own pass is slow
    // on a large model, ~30 s on smollm2-135m; the fraction of the whole job is not a rate).
    auto swept = [&](const LayerReport& layer) {
        return layer.weightType != "float32" &&
               sweepsLayer(options.sensitivityLayers, layer.name);
    };
    const std::size_t total = static_cast<std::size_t>(
        std::count_if(report->layers.begin(), report->layers.end(), swept));
    if (total == 0)
        return Error::usage(options.sensitivityLayers.empty()
                                ? std::string("the scheme quantizes no layer of this model")
                                : "no quantized layer's name contains " +
                                      joinFilters(options.sensitivityLayers));
    StepClock clock(total);
    for (const auto& layer : report->layers) {
        if (!swept(layer))
            continue;
        const auto done = static_cast<double>(clock.done());
        progress.report(done / static_cast<double>(total), clock.stage("layer", layer.name));
        Progress sub([&](double f, const std::string&) {
            progress.report((done + f) / static_cast<double>(total),
                            clock.stage("layer", layer.name));
        });
        if (byKld) {
            auto d = evaluateLmDivergence(floatGraph, model.graph,
                                          quant::makeQuantHook(model, {layer.name}), eval.inputs,
                                          options.sequence, options.device, sub, cancel);
            if (!d) {
                Error e = d.error();
                if (e.path.empty() && e.code == ErrorCode::BadInput)
                    e.path = eval.path;
                return e;
            }
            rows.push_back({layer.name, d->pplQuantized, d->pplQuantized - floatMetric.value,
                            layer.local.sqnrDb, d->meanKld});
            clock.finishStep();
            continue;
        }
        auto m = evaluateQuantized(model, eval, options, {layer.name}, sub, cancel);
        if (!m)
            return m.error();
        const double drop = floatMetric.higherIsBetter ? floatMetric.value - m->value
                                                       : m->value - floatMetric.value;
        rows.push_back({layer.name, m->value, drop, layer.local.sqnrDb, std::nullopt});
        clock.finishStep();
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [byKld](const SensitivityRow& a, const SensitivityRow& b) {
                         return byKld ? a.kld.value_or(0.0) > b.kld.value_or(0.0)
                                      : a.drop > b.drop;
                     });
    return rows;
}

std::string throughputWhy(const Throughput& t)
{
    if (t.floatSamplesPerS <= 0.0 || t.quantizedSamplesPerS <= 0.0 ||
        t.quantizedSamplesPerS >= t.floatSamplesPerS)
        return {};
    std::size_t simulated = 0;
    std::string firstReason, names;
    for (const auto& [layer, kernel] : t.kernels) {
        if (kernel.rfind("simulated", 0) != 0)
            continue;
        if (++simulated <= 3)
            names += (simulated > 1 ? ", " : "") + layer;
        const auto colon = kernel.find(": ");
        if (firstReason.empty() && colon != std::string::npos)
            firstReason = layer + ": " + kernel.substr(colon + 2);
    }
    if (simulated > 3)
        names += ", ...";
    std::string why;
    if (simulated > 0)
        why = (simulated == t.kernels.size()
                   ? std::string("every layer simulated (fake-quant in float32")
                   : std::to_string(simulated) + " of " + std::to_string(t.kernels.size()) +
                         " layers simulated (fake-quant in float32") +
              (firstReason.empty() ? ": " + names + ")" : "; " + firstReason + ")");
    if (!t.notes.empty()) {
        std::string slow;
        std::size_t shown = 0;
        for (const auto& [layer, note] : t.notes) {
            if (shown == 2)
                break;
            const auto open = note.find('(');
            slow += (shown++ ? ", " : "") + layer +
                    (open == std::string::npos ? std::string() : " " + note.substr(open));
        }
        if (t.notes.size() > shown)
            slow += " and " + std::to_string(t.notes.size() - shown) + " more";
        why += (why.empty() ? "" : "; ") + std::string("real kernel slower than float32 here: ") +
               slow;
    }
    if (why.empty())
        why = "every layer ran a real kernel at least as fast as float32; the cost is outside "
              "the layers (input quantization, layout changes between them)";
    return why;
}

} // namespace bitlens::analysis
