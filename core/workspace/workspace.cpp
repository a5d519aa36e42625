#include "workspace/workspace.h"

#include "workspace/workspace_state.h"

#include "analysis/block_engine.h"
#include "analysis/layer_filter.h"
#include "analysis/lm_metrics.h"
#include "analysis/memory_estimate.h"
#include "analysis/metrics.h"
#include "analysis/quant_report.h"
#include "exec/device.h"
#include "export/report_json.h"
#include "io/file_util.h"
#include "model/model_data.h"
#include "quant/engine.h"
#include "quant/scheme.h"
#include "train/qat.h"
#include "zoo/zoo.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace bitlens::workspace {

Workspace::Workspace(std::shared_ptr<Model> model, std::string zooName, WorkspaceOptions options)
    : m_model(std::move(model)),
      m_zooName(std::move(zooName)),
      m_options(std::move(options)),
      m_state(std::make_unique<State>())
{
}

Workspace::~Workspace() = default;

int Workspace::dataLoads() const
{
    std::lock_guard lock(m_mutex);
    return m_state->dataLoads;
}

int Workspace::floatEvaluations() const
{
    std::lock_guard lock(m_mutex);
    return m_state->floatEvaluations;
}

Result<ModelSource> resolveModel(const std::string& arg, Progress& progress,
                                 const CancelToken& cancel,
                                 const std::function<void(const std::string&)>& onBuild)
{
    std::error_code ec;
    if (!zoo::isZooName(arg) || std::filesystem::exists(arg, ec))
        return ModelSource{arg, {}, {}, {}};
    if (!zoo::isBuilt(arg) && onBuild)
        onBuild(arg);
    auto built = zoo::ensure(arg, progress, cancel);
    if (!built)
        return built.error();
    return ModelSource{built->modelPath, arg, built->calibData, built->evalData};
}

Result<ModelSource> zooData(const Workspace& ws, const CancelToken& cancel)
{
    if (ws.zooName().empty())
        return ModelSource{ws.model()->path(), {}, {}, {}};
    auto built = zoo::ensure(ws.zooName(), Progress::none(), cancel);
    if (!built)
        return built.error();
    return ModelSource{built->modelPath, ws.zooName(), built->calibData, built->evalData};
}

Result<std::unique_ptr<Workspace>> open(const std::string& arg, Progress& progress,
                                        const CancelToken& cancel, WorkspaceOptions options,
                                        const std::function<void(const std::string&)>& onBuild)
{
    auto source = resolveModel(arg, progress, cancel, onBuild);
    if (!source)
        return source.error();
    auto model = openModel(source->path);
    if (!model)
        return model.error();
    return std::make_unique<Workspace>(std::move(model).value(), source->zooName,
                                       std::move(options));
}

namespace detail {

c10::Device deviceOf(const Workspace& ws)
{
    return ws.options().device == "cuda" ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
}

Progress subProgress(Progress& outer, double begin, double end, std::string prefix)
{
    return Progress([&outer, begin, end, prefix](double fraction, const std::string& stage) {
        outer.report(begin + (end - begin) * fraction, prefix + stage);
    });
}

Result<quant::Scheme> schemeOf(const std::string& spec,
                               const std::map<std::string, std::string>& overrides)
{
    auto scheme = quant::parseScheme(spec);
    if (!scheme)
        return scheme.error();
    for (const auto& [layer, value] : overrides)
        if (auto applied = quant::applyOverride(*scheme, layer, value); !applied)
            return applied.error();
    if (!overrides.empty()) {
        std::string text = spec + " with overrides";
        for (const auto& [layer, value] : overrides)
            text += " " + layer + "=" + value;
        scheme->spec = text;
    }
    return scheme;
}

namespace {

/// Loads (or reuses) `path` with `split`, tokenized for `model` when it is text.
Result<const io::Dataset*> ensureData(Workspace::State& state,
                                      std::optional<Workspace::State::Loaded>& slot,
                                      const Model& model, const std::string& path,
                                      const std::string& split, const ModelDataOptions& options,
                                      Progress& progress, const CancelToken& cancel)
{
    if (path.empty())
        return static_cast<const io::Dataset*>(nullptr);
    if (slot && slot->path == path && slot->split == split && slot->limit == options.limit &&
        slot->seqLen == options.seqLen && slot->maxTokens == options.maxTokens)
        return &slot->data;
    progress.report(0.0, "loading " + path);
    auto data = loadModelData(model, path, split, options, Progress::none(), cancel);
    if (!data)
        return data.error();
    if (data->size() == 0) {
        if (split != "train")
            return Error::badInput(path, "holds no samples");
        const auto& inputs = model.summary().inputs;
        return Error::badInput(path, "holds no samples; calibration needs inputs shaped " +
                                         (inputs.empty() ? std::string("like the model's")
                                                         : formatShape(inputs[0].shape)));
    }
    ++state.dataLoads;
    if (&slot == &state.eval)
        state.floatMetric.reset();
    slot = Workspace::State::Loaded{path,           split,
                                    options.limit,  options.seqLen,
                                    options.maxTokens, std::move(data).value()};
    return &slot->data;
}

} // namespace

Result<ResolvedData> resolveData(Workspace& ws, const RunRequest& request,
                                 std::int64_t calibSamples, Progress& progress,
                                 const CancelToken& cancel)
{
    std::string calibPath = request.calibPath;
    std::string evalPath = request.evalPath;
    if (calibPath.empty() && evalPath.empty()) {
        auto own = zooData(ws, cancel);
        if (!own)
            return own.error();
        calibPath = own->calibData;
        evalPath = own->evalData;
    }
    if (calibPath.empty() && evalPath.empty())
        return Error::usage("no data to measure on: layer errors are measured on real samples");
    Workspace::State& state = ws.state();
    const Model& model = *ws.model();
    // Text takes the token-window defaults unless the scheme names its own calibration count;
    // --tokens sizes the evaluation text only.
    ModelDataOptions calibOptions;
    calibOptions.limit =
        isTextData(calibPath) && calibSamples == quant::Scheme().calibSamples ? 0 : calibSamples;
    calibOptions.seqLen = request.seqLen;
    auto calib = ensureData(state, state.calib, model, calibPath, "train", calibOptions, progress,
                            cancel);
    if (!calib)
        return calib.error();
    ModelDataOptions evalOptions;
    evalOptions.limit = request.evalLimit;
    evalOptions.seqLen = request.seqLen;
    evalOptions.maxTokens = request.evalTokens;
    auto eval = ensureData(state, state.eval, model, evalPath, "test", evalOptions, progress,
                           cancel);
    if (!eval)
        return eval.error();
    ResolvedData resolved;
    resolved.calib = *calib;
    resolved.loadedEval = *eval;
    // Unlabelled evaluation data still gives layer errors, just no top-1; the metrics of
    // sequence models (perplexity, embedding cosine, agreement) need no labels.
    const bool needsLabels = model.summary().task == "classification";
    resolved.eval = *eval && (!needsLabels || (*eval)->labels.defined()) ? *eval : nullptr;
    if (!resolved.calib)
        resolved.calib = *eval;
    return resolved;
}

namespace {

TrainingPoint trainingPoint(const train::QatStep& s)
{
    TrainingPoint p;
    p.step = s.step;
    p.steps = s.steps;
    p.epoch = s.epoch;
    p.epochs = s.epochs;
    p.loss = s.loss;
    p.lr = s.lr;
    p.hasMetric = s.metric.has_value();
    p.metric = s.metric.value_or(0.0);
    p.bestMetric = s.bestMetric;
    p.metricName = s.metricName;
    p.lossName = s.lossName;
    return p;
}

bool sameTensor(const at::Tensor& kept, const at::Tensor& calib)
{
    return kept.defined() == calib.defined() && (!calib.defined() || kept.is_same(calib));
}

} // namespace

Result<PreparedRun> prepareRun(Workspace& ws, const ResolvedData& data,
                               const quant::Scheme& scheme, bool reuseWhole, Progress& progress,
                               const CancelToken& cancel, const RunRequest* training)
{
    Workspace::State& state = ws.state();
    const ir::Graph& graph = ws.model()->graph();
    const at::Tensor calib = data.calib ? data.calib->inputs : at::Tensor();
    // Refused before anything is allocated when the prepared model cannot fit.
    if (auto fits = analysis::checkMemory(
            analysis::estimateQuantize(graph, scheme,
                                       analysis::workShapeOf(graph, data.analysisBatch())),
            ws.model()->path());
        !fits)
        return fits.error();
    if (scheme.qat) {
        if (reuseWhole && state.lastTrained && state.lastTrained->scheme.spec == scheme.spec &&
            sameTensor(state.lastTrainedCalib, calib))
            return PreparedRun{state.lastTrained, true};
        // Training stops on either token; only `cancel` drops the result.
        const CancelToken stop = training ? training->stopTraining : cancel;
        Progress trainProgress([&](double fraction, const std::string& stage) {
            if (cancel.cancelled())
                stop.cancel();
            progress.report(fraction, stage);
        });
        const train::QatStepCallback onStep = [&](const train::QatStep& s) {
            if (cancel.cancelled())
                stop.cancel();
            if (training && training->onTrainingStep)
                training->onTrainingStep(trainingPoint(s));
        };
        auto trained = train::prepareScheme(graph, scheme, data.calib, trainProgress, stop, onStep);
        if (!trained)
            return trained.error();
        if (cancel.cancelled())
            return Error::cancelled();
        state.lastTrained = std::make_shared<const quant::QuantizedModel>(std::move(trained).value());
        state.lastTrainedCalib = calib;
        return PreparedRun{state.lastTrained, false};
    }
    // A re-run on the same calibration data takes every unchanged layer from the last run
    // (quant::prepare's reuse).
    const bool keptSameCalib = state.lastPrepared && sameTensor(state.lastCalib, calib);
    if (reuseWhole && keptSameCalib && state.lastPrepared->scheme.spec == scheme.spec)
        return PreparedRun{state.lastPrepared, true};
    auto made = train::prepareScheme(graph, scheme, data.calib, progress, cancel, {},
                                     keptSameCalib ? state.lastPrepared.get() : nullptr);
    if (!made) {
        // Calibration errors name the data set they came from.
        Error e = made.error();
        if (e.path.empty() && e.code == ErrorCode::BadInput && data.calib)
            e.path = data.calib->path;
        return e;
    }
    if (cancel.cancelled())
        return Error::cancelled();
    state.lastPrepared = std::make_shared<const quant::QuantizedModel>(std::move(made).value());
    state.lastCalib = calib;
    return PreparedRun{state.lastPrepared, false};
}

} // namespace detail

namespace {

using detail::guarded;
using detail::ResolvedData;
using detail::subProgress;

/// One scheme on resolved data; reuses and fills the workspace's float metric.
Result<Run> runOne(Workspace& ws, const ResolvedData& data, const quant::Scheme& scheme,
                   Progress& progress, const CancelToken& cancel, const RunRequest* training)
{
    Workspace::State& state = ws.state();
    const ir::Graph& graph = ws.model()->graph();
    const bool qat = scheme.qat.has_value();
    const double split = qat ? 0.85 : 0.4;
    Progress preparing = subProgress(progress, 0.0, split, qat ? "training: " : "calibrating: ");
    auto prepared = detail::prepareRun(ws, data, scheme, false, preparing, cancel, training);
    if (!prepared)
        return prepared.error();
    if (data.eval && !state.floatMetric)
        ++state.floatEvaluations;
    analysis::AnalysisOptions options;
    options.device = detail::deviceOf(ws);
    if (training && training->onLayers)
        options.onLayers = [&ws, onLayers = training->onLayers](const analysis::QuantReport& r) {
            analysis::QuantReport partial = r;
            partial.modelPath = ws.model()->path();
            partial.modelFormat = ws.model()->format();
            partial.modelNote = ws.model()->note();
            onLayers(exporting::reportToJson(partial));
        };
    Progress analyzing = subProgress(progress, split, 1.0, "analyzing: ");
    auto report = analysis::analyze(graph, *prepared->model, data.analysisBatch(), data.eval,
                                    options, data.eval ? state.floatMetric : std::nullopt,
                                    analyzing, cancel);
    if (!report)
        return report.error();
    if (data.eval && report->metricFloat)
        state.floatMetric = report->metricFloat;
    report->modelPath = ws.model()->path();
    report->modelFormat = ws.model()->format();
    report->modelNote = ws.model()->note();
    Run out;
    out.report = exporting::reportToJson(*report);
    out.details = std::make_shared<const analysis::QuantReport>(std::move(report).value());
    return out;
}

/// How many calibration windows the block engine carries for `scheme`.
std::int64_t blockCalibWindows(const ResolvedData& data, const quant::Scheme& scheme)
{
    return data.calib && data.calib->inputs.defined() && data.calib->inputs.dim() > 0
               ? std::min(data.calib->inputs.size(0), scheme.calibSamples)
               : 0;
}

/// The block engine's estimate for `scheme` on `data`.
analysis::MemoryEstimate blockEstimate(const ir::Graph& graph, const ResolvedData& data,
                                       const quant::Scheme& scheme)
{
    const at::Tensor rows = data.eval ? data.eval->inputs : data.analysisBatch();
    const std::int64_t windows = (rows.defined() && rows.dim() > 0 ? rows.size(0) : 0) +
                                 analysis::AnalysisOptions().sequenceAnalysisSamples;
    return analysis::estimateBlockQuantize(graph, scheme, analysis::workShapeOf(graph, rows),
                                           windows, blockCalibWindows(data, scheme));
}

/// RunRequest::engine auto: the block engine when the whole engine's estimate does not fit and
/// the block engine can run the model and the scheme within the memory available.
bool blocksInstead(const Workspace& ws, const ResolvedData& data, const quant::Scheme& scheme)
{
    const ir::Graph& graph = ws.model()->graph();
    if (analysis::checkMemory(analysis::estimateQuantize(
                                  graph, scheme, analysis::workShapeOf(graph, data.analysisBatch())),
                              ws.model()->path()))
        return false;
    if (!analysis::blockEngineUnsupported(graph, scheme).empty() ||
        !analysis::partitionBlocks(graph))
        return false;
    return analysis::checkMemory(blockEstimate(graph, data, scheme), ws.model()->path()).ok();
}

/// One scheme on resolved data by the block engine (RunRequest::engine "block").
Result<Run> runBlocks(Workspace& ws, const ResolvedData& data, const quant::Scheme& scheme,
                      Progress& progress, const CancelToken& cancel, const RunRequest& request)
{
    const ir::Graph& graph = ws.model()->graph();
    if (const std::string why = analysis::blockEngineUnsupported(graph, scheme); !why.empty())
        return Error::unsupported(ws.model()->path(),
                                  "--engine block cannot run " + scheme.spec + ": " + why);
    // Refused before anything is allocated when one block, the carried hidden states and one
    // batch of logits cannot fit.
    if (auto fits = analysis::checkMemory(blockEstimate(graph, data, scheme), ws.model()->path());
        !fits)
        return fits.error();
    analysis::AnalysisOptions options;
    options.device = detail::deviceOf(ws);
    if (request.onLayers)
        options.onLayers = [&ws, onLayers = request.onLayers](const analysis::QuantReport& r) {
            analysis::QuantReport partial = r;
            partial.modelPath = ws.model()->path();
            partial.modelFormat = ws.model()->format();
            partial.modelNote = ws.model()->note();
            onLayers(exporting::reportToJson(partial));
        };
    auto report = analysis::analyzeBlockwise(graph, scheme, data.analysisBatch(), data.eval,
                                             options, ws.model()->path(), progress, cancel,
                                             data.calib);
    if (!report)
        return report.error();
    report->modelPath = ws.model()->path();
    report->modelFormat = ws.model()->format();
    report->modelNote = ws.model()->note();
    Run out;
    out.report = exporting::reportToJson(*report);
    out.details = std::make_shared<const analysis::QuantReport>(std::move(report).value());
    return out;
}

/// The scheme of `request` with its overrides, and its data loaded for that scheme.
Result<std::pair<quant::Scheme, ResolvedData>> schemeAndData(Workspace& ws,
                                                             const RunRequest& request,
                                                             Progress& progress,
                                                             const CancelToken& cancel)
{
    auto scheme = detail::schemeOf(request.scheme, request.overrides);
    if (!scheme)
        return scheme.error();
    auto data = detail::resolveData(ws, request, quant::dataSamplesNeeded(*scheme), progress,
                                    cancel);
    if (!data)
        return data.error();
    return std::pair{std::move(scheme).value(), *data};
}

/// A sensitivity sweep (and its estimate) measures the metric: labelled evaluation data.
Result<void> labelledEval(const ResolvedData& data)
{
    if (!data.eval)
        return Error::usage("sensitivity needs labelled evaluation data (open a data set "
                            "with labels)");
    return {};
}

/// The layers `scheme` quantizes in `graph`, in graph order; a usage error when `filters`
/// (RunRequest::sensitivityLayers) match none of them.
Result<std::vector<std::string>> quantizedLayers(const ir::Graph& graph,
                                                 const quant::Scheme& scheme,
                                                 const std::vector<std::string>& filters)
{
    auto plan = quant::makePlan(graph, scheme);
    if (!plan)
        return plan.error();
    std::vector<std::string> names;
    std::size_t swept = 0;
    for (const auto& node : graph.nodes) {
        auto it = plan->layers.find(node.name);
        if (it == plan->layers.end() || it->second.keepFloat)
            continue;
        names.push_back(node.name);
        swept += analysis::sweepsLayer(filters, node.name) ? 1 : 0;
    }
    if (swept == 0 && !filters.empty()) {
        std::string list;
        for (const auto& f : filters)
            list += (list.empty() ? "'" : " or '") + f + "'";
        return Error::usage("no quantized layer's name contains " + list + " (" +
                            std::to_string(names.size()) + " layers are quantized)");
    }
    return names;
}

} // namespace

Result<Run> run(Workspace& ws, const RunRequest& request, Progress& progress,
                const CancelToken& cancel)
{
    return guarded(ws, [&]() -> Result<Run> {
        const bool automatic = request.engine.empty() || request.engine == "auto";
        if (!automatic && request.engine != "whole" && request.engine != "block")
            return Error::usage("engine '" + request.engine + "' is not one of auto, whole, "
                                "block");
        auto in = schemeAndData(ws, request, progress, cancel);
        if (!in)
            return in.error();
        auto& [scheme, data] = *in;
        if (request.engine == "block" || (automatic && blocksInstead(ws, data, scheme)))
            return runBlocks(ws, data, scheme, progress, cancel, request);
        return runOne(ws, data, scheme, progress, cancel, &request);
    });
}

Result<nlohmann::json> compare(Workspace& ws, const RunRequest& request,
                               const std::vector<std::string>& schemes, Progress& progress,
                               const CancelToken& cancel,
                               const std::function<void(const Run&)>& onRun)
{
    return guarded(ws, [&]() -> Result<nlohmann::json> {
        const std::vector<std::string>& specs =
            schemes.empty() ? quant::postTrainingPresetNames() : schemes;
        std::vector<quant::Scheme> parsed;
        std::int64_t calibSamples = 0;
        bool allSamples = false;  // a QAT scheme that trains on all of the data
        for (const std::string& spec : specs) {
            auto scheme = quant::parseScheme(spec);
            if (!scheme)
                return scheme.error();
            const std::int64_t needed = quant::dataSamplesNeeded(*scheme);
            allSamples = allSamples || needed == 0;
            calibSamples = std::max(calibSamples, needed);
            parsed.push_back(std::move(scheme).value());
        }
        if (allSamples)
            calibSamples = 0;
        auto data = detail::resolveData(ws, request, calibSamples, progress, cancel);
        if (!data)
            return data.error();
        // The whole comparison is refused before the first scheme is prepared when its
        // costliest scheme cannot fit beside the one before it.
        const ir::Graph& graph = ws.model()->graph();
        if (auto fits = analysis::checkMemory(
                analysis::estimateCompare(graph, parsed,
                                          analysis::workShapeOf(graph, data->analysisBatch())),
                ws.model()->path());
            !fits)
            return fits.error();
        nlohmann::json runs = nlohmann::json::array();
        const double step = 1.0 / static_cast<double>(std::max<std::size_t>(parsed.size(), 1));
        for (std::size_t i = 0; i < parsed.size(); ++i) {
            const double begin = step * static_cast<double>(i);
            Progress one = subProgress(progress, begin, begin + step, parsed[i].spec + ": ");
            auto report = runOne(ws, *data, parsed[i], one, cancel, nullptr);
            if (!report)
                return report.error();
            if (onRun)
                onRun(*report);
            runs.push_back(std::move(report->report));
        }
        return nlohmann::json{{"runs", runs}};
    });
}

Result<Sensitivity> sensitivity(Workspace& ws, const RunRequest& request, Progress& progress,
                                const CancelToken& cancel)
{
    return guarded(ws, [&]() -> Result<Sensitivity> {
        auto in = schemeAndData(ws, request, progress, cancel);
        if (!in)
            return in.error();
        auto& [scheme, data] = *in;
        if (auto ok = labelledEval(data); !ok)
            return ok.error();
        Workspace::State& state = ws.state();
        const ir::Graph& graph = ws.model()->graph();
        // A filter that matches no layer is said before calibration, not after.
        if (auto names = quantizedLayers(graph, scheme, request.sensitivityLayers); !names)
            return names.error();
        Progress preparing = subProgress(progress, 0.0, 0.2, "calibrating: ");
        auto prepared = detail::prepareRun(ws, data, scheme, true, preparing, cancel);
        if (!prepared)
            return prepared.error();
        const c10::Device device = detail::deviceOf(ws);
        if (!state.floatMetric) {
            // The sweep's time left comes from its measured layers (StepClock); until then no
            // view should extrapolate from the fraction reached so far.
            progress.report(0.2, "measuring the float model; time left after the first layer");
            auto metric = analysis::evaluateMetric(graph, *data.eval, device, 256, nullptr, {},
                                                   Progress::none(), cancel);
            if (!metric)
                return metric.error();
            ++state.floatEvaluations;
            state.floatMetric = *metric;
        }
        analysis::AnalysisOptions options;
        options.device = device;
        options.sensitivityByKld = request.sensitivityByKld;
        options.sensitivityLayers = request.sensitivityLayers;
        Progress sweep = subProgress(progress, 0.2, 1.0, "sensitivity: ");
        auto rows = analysis::sensitivity(graph, *prepared->model, *data.eval,
                                          data.eval->inputs, options, *state.floatMetric, sweep,
                                          cancel);
        if (!rows)
            return rows.error();
        Sensitivity out;
        out.report = exporting::sensitivityToJson(*state.floatMetric, *rows);
        out.report["scheme"] = quant::schemeToJson(scheme);
        out.report["model"] = {{"path", ws.model()->path()}, {"format", ws.model()->format()}};
        if (!request.sensitivityLayers.empty())
            out.report["layers_filter"] = request.sensitivityLayers;
        out.rows = std::make_shared<const std::vector<analysis::SensitivityRow>>(
            std::move(rows).value());
        out.floatMetric = std::make_shared<const analysis::MetricValue>(*state.floatMetric);
        return out;
    });
}

Result<SensitivityCost> sensitivityCost(Workspace& ws, const RunRequest& request,
                                        Progress& progress, const CancelToken& cancel)
{
    return guarded(ws, [&]() -> Result<SensitivityCost> {
        auto in = schemeAndData(ws, request, progress, cancel);
        if (!in)
            return in.error();
        auto& [scheme, data] = *in;
        if (auto ok = labelledEval(data); !ok)
            return ok.error();
        const ir::Graph& graph = ws.model()->graph();
        auto names = quantizedLayers(graph, scheme, request.sensitivityLayers);
        if (!names)
            return names.error();
        SensitivityCost cost;
        cost.layerNames = std::move(names).value();
        cost.layers = std::count_if(cost.layerNames.begin(), cost.layerNames.end(),
                                    [&](const std::string& name) {
                                        return analysis::sweepsLayer(request.sensitivityLayers,
                                                                     name);
                                    });
        const io::Dataset& eval = *data.eval;
        const ir::Task task = ir::taskOf(graph);
        cost.evalUnits = eval.size();
        cost.unit = task == ir::Task::LanguageModel
                        ? "windows of " + std::to_string(eval.inputs.size(-1)) + " tokens"
                    : task == ir::Task::Classification ? "samples"
                                                       : "lines";
        // Calibration runs before the sweep when a layer needs data: static activations,
        // SmoothQuant, GPTQ / AWQ, or training.
        cost.needsCalibration = scheme.qat.has_value();
        if (auto plan = quant::makePlan(graph, scheme))
            for (const auto& [name, c] : plan->layers)
                cost.needsCalibration = cost.needsCalibration ||
                                        (!c.keepFloat && (c.actMode == quant::ActMode::Static ||
                                                          c.smoothAlpha > 0.0 ||
                                                          c.method != quant::LayerConfig::Method::Rtn));
        cost.byKld = request.sensitivityByKld;
        cost.floatPassNeeded = !ws.state().floatMetric.has_value();
        // One pass over a slice: a window of text, or a batch of up to 64 samples. A short
        // first pass (allocations, thread pool) is repeated and the second one counts.
        io::Dataset slice = eval;
        cost.measuredUnits = std::min<std::int64_t>(
            eval.size(), task == ir::Task::Classification ? 64 : 1);
        slice.inputs = eval.inputs.slice(0, 0, cost.measuredUnits);
        if (eval.labels.defined() && eval.labels.dim() > 0 &&
            eval.labels.size(0) == eval.size())
            slice.labels = eval.labels.slice(0, 0, cost.measuredUnits);
        const c10::Device device = detail::deviceOf(ws);
        double seconds = 0.0;
        for (int pass = 0; pass < 2; ++pass) {
            progress.report(0.5 + 0.25 * pass, "timing one evaluation pass");
            const auto start = std::chrono::steady_clock::now();
            auto m = analysis::evaluateMetric(graph, slice, device, 256, nullptr, {},
                                              Progress::none(), cancel);
            if (!m)
                return m.error();
            seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                          .count();
            if (seconds > 2.0)
                break;
        }
        cost.secondsPerUnit =
            seconds / static_cast<double>(std::max<std::int64_t>(1, cost.measuredUnits));
        progress.report(1.0, "done");
        return cost;
    });
}

nlohmann::json sensitivityCostToJson(const SensitivityCost& cost)
{
    return {{"layers", cost.layers},
            {"quantized_layers", cost.layerNames.size()},
            {"layer_names", cost.layerNames},
            {"eval_units", cost.evalUnits},
            {"unit", cost.unit},
            {"passes", cost.passes(cost.layers)},
            {"by_kld", cost.byKld},
            {"float_pass_needed", cost.floatPassNeeded},
            {"seconds_per_unit", cost.secondsPerUnit},
            {"measured_units", cost.measuredUnits},
            {"seconds", cost.seconds()},
            {"needs_calibration", cost.needsCalibration}};
}

Result<SensitivityCost> sensitivityCostFromJson(const nlohmann::json& j)
{
    try {
        SensitivityCost cost;
        cost.layerNames = j.at("layer_names").get<std::vector<std::string>>();
        cost.layers = j.at("layers").get<std::int64_t>();
        cost.evalUnits = j.at("eval_units").get<std::int64_t>();
        cost.unit = j.at("unit").get<std::string>();
        cost.byKld = j.at("by_kld").get<bool>();
        cost.floatPassNeeded = j.at("float_pass_needed").get<bool>();
        cost.secondsPerUnit = j.at("seconds_per_unit").get<double>();
        cost.measuredUnits = j.at("measured_units").get<std::int64_t>();
        cost.needsCalibration = j.at("needs_calibration").get<bool>();
        return cost;
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput({}, std::string("not a sensitivity estimate: ") + e.what());
    }
}

Result<Bench> bench(Workspace& ws, const RunRequest& request, std::int64_t batch,
                    Progress& progress, const CancelToken& cancel)
{
    return guarded(ws, [&]() -> Result<Bench> {
        auto scheme = detail::schemeOf(request.scheme, request.overrides);
        if (!scheme)
            return scheme.error();
        const Model& model = *ws.model();
        std::string calibPath = request.calibPath;
        if (calibPath.empty()) {
            auto own = zooData(ws, cancel);
            if (!own)
                return own.error();
            calibPath = own->calibData;
        }
        // Token windows are costly ([B, S, vocab] logits): text models time 4 at a time.
        if (batch == 0)
            batch = isTextData(calibPath) ? 4 : 64;
        // Real calibration data when there is some (static schemes need it); the timed batch
        // is its first `batch` samples, or uniform noise shaped like the model's input.
        ResolvedData data;
        std::optional<io::Dataset> benchData;
        if (!calibPath.empty()) {
            const std::int64_t needed = quant::dataSamplesNeeded(*scheme);
            ModelDataOptions options;
            options.limit = needed == 0 ? 0 : std::max(batch, needed);
            if (isTextData(calibPath) && needed == quant::Scheme().calibSamples)
                options.limit = std::max(batch, kLmCalibWindows);
            options.seqLen = request.seqLen;
            progress.report(0.0, "loading " + calibPath);
            auto loaded = loadModelData(model, calibPath, "train", options, Progress::none(),
                                        cancel);
            if (!loaded)
                return loaded.error();
            benchData = std::move(loaded).value();
            data.calib = &*benchData;
        }
        at::Tensor x;
        if (data.calib && data.calib->size() >= batch) {
            x = data.calib->inputs.slice(0, 0, batch);
        } else {
            const auto& inputs = model.summary().inputs;
            if (inputs.size() != 1)
                return Error::unsupported(model.path(), "bench needs a model with one input");
            std::vector<std::int64_t> shape = inputs[0].shape;
            for (auto& d : shape)
                if (d < 0)
                    d = batch;
            x = at::rand(shape);
        }
        Progress preparing =
            subProgress(progress, 0.0, 0.5, scheme->qat ? "training: " : "calibrating: ");
        auto prepared = detail::prepareRun(ws, data, *scheme, false, preparing, cancel);
        if (!prepared)
            return prepared.error();
        analysis::AnalysisOptions options;
        options.device = detail::deviceOf(ws);
        options.throughputSeconds = 0.0;  // a benchmark runs the full protocol
        Progress timing = subProgress(progress, 0.5, 1.0, "");
        auto timed = analysis::measureThroughput(*prepared->model, x, options, timing, cancel);
        if (!timed)
            return timed.error();
        Bench out;
        out.report = exporting::throughputToJson(*timed);
        out.details = std::make_shared<const analysis::Throughput>(std::move(timed).value());
        return out;
    });
}

Result<std::shared_ptr<const quant::QuantizedModel>> prepared(Workspace& ws,
                                                              const RunRequest& request,
                                                              Progress& progress,
                                                              const CancelToken& cancel)
{
    return guarded(ws, [&]() -> Result<std::shared_ptr<const quant::QuantizedModel>> {
        auto in = schemeAndData(ws, request, progress, cancel);
        if (!in)
            return in.error();
        auto& [scheme, data] = *in;
        auto made = detail::prepareRun(ws, data, scheme, true, progress, cancel, &request);
        if (!made)
            return made.error();
        return made->model;
    });
}

std::vector<std::string> schemePresets() { return quant::presetNames(); }

std::vector<std::string> postTrainingPresets() { return quant::postTrainingPresetNames(); }

bool isTrainingScheme(const std::string& spec)
{
    auto scheme = quant::parseScheme(spec);
    return scheme && scheme->qat.has_value();
}

Result<MemoryForecast> memoryForecast(const Workspace& ws, const std::string& scheme,
                                      const std::map<std::string, std::string>& overrides)
{
    auto parsed = detail::schemeOf(scheme, overrides);
    if (!parsed)
        return parsed.error();
    const ir::Graph& graph = ws.model()->graph();
    const analysis::WorkShape shape = analysis::defaultWorkShape(graph, kLmSeqLen);
    const analysis::MemoryEstimate e = analysis::estimateQuantize(graph, *parsed, shape);
    MemoryForecast f;
    f.neededBytes = e.total();
    const auto available = analysis::memoryBudget(e);
    f.availableBytes = available.value_or(-1);
    f.fits = !available || f.neededBytes <= *available;
    f.text = "~" + analysis::formatGigabytes(f.neededBytes) +
             (available ? " of " + analysis::formatGigabytes(*available) + " available" : "") +
             " " + e.partsText();
    // What a run does then (RunRequest::engine auto): a stacked language model that does not
    // fit whole runs one decoder block at a time; the forecast is that engine's.
    if (!f.fits && analysis::blockEngineUnsupported(graph, *parsed).empty() &&
        analysis::partitionBlocks(graph)) {
        const analysis::MemoryEstimate b = analysis::estimateBlockQuantize(
            graph, *parsed, shape,
            shape.batch + analysis::AnalysisOptions().sequenceAnalysisSamples,
            parsed->calibSamples);
        if (const auto budget = analysis::memoryBudget(b); budget && b.total() <= *budget) {
            f.neededBytes = b.total();
            f.availableBytes = *budget;
            f.fits = true;
            f.text = "~" + analysis::formatGigabytes(b.total()) + " of " +
                     analysis::formatGigabytes(*budget) +
                     " available, one decoder block at a time (the whole model at once: ~" +
                     analysis::formatGigabytes(e.total()) + ") " + b.partsText();
        }
    }
    return f;
}

Result<void> checkScheme(const std::string& spec)
{
    auto scheme = quant::parseScheme(spec);
    if (!scheme)
        return scheme.error();
    return {};
}

Result<void> checkRun(const RunRequest& request)
{
    auto scheme = detail::schemeOf(request.scheme, request.overrides);
    if (!scheme)
        return scheme.error();
    return {};
}

Result<void> writeJsonFile(const std::string& path, const nlohmann::json& json)
{
    const std::string text = json.dump(2) + "\n";
    return io::writeFileAtomic(path, text.data(), text.size());
}

Result<nlohmann::json> readJsonFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return Error::badInput(path, "cannot open the file");
    std::ostringstream text;
    text << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded())
        return Error::badInput(path, "not valid JSON");
    if (!j.is_object())
        return Error::badInput(path, "not a BitLens report (expected a JSON object)");
    return j;
}

} // namespace bitlens::workspace
