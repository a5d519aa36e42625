#include "quant_job.h"

#include "analysis/metrics.h"
#include "analysis/quant_report.h"
#include "export/report_json.h"
#include "io/dataset.h"
#include "io/file_util.h"
#include "model/model_data.h"
#include "quant/engine.h"
#include "quant/scheme.h"
#include "train/qat.h"
#include "zoo/zoo.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <new>
#include <optional>
#include <sstream>

namespace bitlens::widgets {

struct QuantSession::State {
    /// A data set as loaded, with the request that loaded it.
    struct Loaded {
        std::string path;
        std::string split;
        std::int64_t limit = 0;
        io::Dataset data;
    };
    std::optional<Loaded> calib;
    std::optional<Loaded> eval;
    std::optional<analysis::MetricValue> floatMetric;  ///< for `eval`
    /// The last single-scheme run as prepared, and the calibration tensor it used: a re-run
    /// on the same data takes every layer whose configuration is unchanged from it.
    std::optional<quant::QuantizedModel> lastPrepared;
    at::Tensor lastCalib;
    int dataLoads = 0;
    int floatEvaluations = 0;
};

QuantSession::QuantSession(std::shared_ptr<Model> model, std::string zooName)
    : m_model(std::move(model)), m_zooName(std::move(zooName)), m_state(std::make_unique<State>())
{
}

QuantSession::~QuantSession() = default;

int QuantSession::dataLoads() const
{
    std::lock_guard lock(m_mutex);
    return m_state->dataLoads;
}

int QuantSession::floatEvaluations() const
{
    std::lock_guard lock(m_mutex);
    return m_state->floatEvaluations;
}

namespace {

/// Forwards a sub-job's progress into [begin, end] of the outer job's range.
Progress subProgress(Progress& outer, double begin, double end, std::string prefix = {})
{
    return Progress([&outer, begin, end, prefix](double fraction, const std::string& stage) {
        outer.report(begin + (end - begin) * fraction, prefix + stage);
    });
}

/// Loads (or reuses) `path` with `split` and at least `limit` samples (0 = all; text: the
/// defaults of model/model_data.h), tokenized for `model` when it is text.
Result<const io::Dataset*> ensureData(QuantSession::State& state,
                                      std::optional<QuantSession::State::Loaded>& slot,
                                      const Model& model, const std::string& path,
                                      const std::string& split, std::int64_t limit,
                                      Progress& progress, const CancelToken& cancel)
{
    if (path.empty())
        return static_cast<const io::Dataset*>(nullptr);
    if (slot && slot->path == path && slot->split == split && slot->limit == limit)
        return &slot->data;
    progress.report(0.0, "loading " + path);
    ModelDataOptions options;
    options.limit = limit;
    auto data = loadModelData(model, path, split, options, Progress::none(), cancel);
    if (!data)
        return data.error();
    if (data->size() == 0)
        return Error::badInput(path, "holds no samples");
    ++state.dataLoads;
    if (&slot == &state.eval)
        state.floatMetric.reset();
    slot = QuantSession::State::Loaded{path, split, limit, std::move(data).value()};
    return &slot->data;
}

/// The data a request runs on, resolved: zoo data unless the request names its own.
struct ResolvedData {
    const io::Dataset* calib = nullptr;
    const io::Dataset* eval = nullptr;
};

Result<ResolvedData> resolveData(QuantSession& session, const QuantRequest& request,
                                 std::int64_t calibSamples, Progress& progress,
                                 const CancelToken& cancel)
{
    std::string calibPath = request.calibPath;
    std::string evalPath = request.evalPath;
    if (calibPath.empty() && evalPath.empty() && !session.zooName().empty()) {
        auto zooModel = zoo::ensure(session.zooName(), Progress::none(), cancel);
        if (!zooModel)
            return zooModel.error();
        calibPath = zooModel->calibData;
        evalPath = zooModel->evalData;
    }
    if (calibPath.empty() && evalPath.empty())
        return Error::usage("open data (File > Open Data) first: layer errors are measured on "
                            "real samples");
    QuantSession::State& state = session.state();
    const Model& model = *session.model();
    ResolvedData resolved;
    // Text takes the token-window defaults unless the scheme names its own calibration count.
    const std::int64_t calibLimit =
        isTextData(calibPath) && calibSamples == quant::Scheme().calibSamples ? 0 : calibSamples;
    auto calib = ensureData(state, state.calib, model, calibPath, "train", calibLimit, progress,
                            cancel);
    if (!calib)
        return calib.error();
    resolved.calib = *calib;
    auto eval = ensureData(state, state.eval, model, evalPath, "test", request.evalLimit,
                           progress, cancel);
    if (!eval)
        return eval.error();
    // Unlabelled evaluation data still gives layer errors, just no top-1; the metrics of
    // sequence models (perplexity, embedding cosine, agreement) need no labels.
    const bool needsLabels = model.summary().task == "classification";
    resolved.eval = *eval && (!needsLabels || (*eval)->labels.defined()) ? *eval : nullptr;
    if (!resolved.calib)
        resolved.calib = *eval;
    return resolved;
}

/// The scheme of `request` with its per-layer overrides applied.
Result<quant::Scheme> schemeOf(const std::string& spec,
                               const std::map<std::string, std::string>& overrides)
{
    auto scheme = quant::parseScheme(spec);
    if (!scheme)
        return scheme.error();
    for (const auto& [layer, value] : overrides) {
        if (value == "float" || value == "float32") {
            scheme->overrides[layer] = std::nullopt;
            continue;
        }
        auto sub = quant::parseScheme(value);
        if (!sub)
            return Error::usage("override of " + layer + ": " + sub.error().message);
        scheme->overrides[layer] = sub->config;
    }
    if (!overrides.empty()) {
        std::string text = spec + " with overrides";
        for (const auto& [layer, value] : overrides)
            text += " " + layer + "=" + value;
        scheme->spec = text;
    }
    return scheme;
}

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

/// One scheme on resolved data; reuses and fills the session's float metric. A QAT scheme
/// trains first: `stopTraining` ends training and keeps the best checkpoint (then analysed);
/// `cancel` ends the whole job.
Result<nlohmann::json> runOne(QuantSession& session, const ResolvedData& data,
                              const quant::Scheme& scheme, Progress& progress,
                              const CancelToken& cancel,
                              const std::function<void(const TrainingPoint&)>& onTrainingStep = {},
                              const CancelToken& stopTraining = CancelToken())
{
    QuantSession::State& state = session.state();
    const ir::Graph& graph = session.model()->graph();
    const bool qat = scheme.qat.has_value();
    // Training stops on either token; only `cancel` drops the result.
    const CancelToken trainCancel = qat ? stopTraining : cancel;
    Progress prepareProgress([&](double fraction, const std::string& stage) {
        if (cancel.cancelled())
            trainCancel.cancel();
        progress.report((qat ? 0.85 : 0.4) * fraction,
                        (qat ? "training: " : "calibrating: ") + stage);
    });
    const train::QatStepCallback onStep = [&](const train::QatStep& s) {
        if (cancel.cancelled())
            trainCancel.cancel();
        if (onTrainingStep)
            onTrainingStep(trainingPoint(s));
    };
    // A re-run on the same calibration data takes every unchanged layer from the last run
    // (quant::prepare's reuse); trained (QAT) models are never reused or reused from.
    const at::Tensor calib = data.calib ? data.calib->inputs : at::Tensor();
    const bool sameCalib = !qat && state.lastPrepared &&
                           state.lastCalib.defined() == calib.defined() &&
                           (!calib.defined() || state.lastCalib.is_same(calib));
    const quant::QuantizedModel* reuse = sameCalib ? &*state.lastPrepared : nullptr;
    auto prepared = qat ? train::prepareScheme(graph, scheme, data.calib, prepareProgress,
                                               trainCancel, onStep)
                        : quant::prepare(graph, scheme, calib, prepareProgress, cancel, reuse);
    if (!prepared) {
        Error e = prepared.error();
        if (e.path.empty() && e.code == ErrorCode::BadInput && data.calib)
            e.path = data.calib->path;
        return e;
    }
    if (cancel.cancelled())
        return Error::cancelled();
    if (qat) {
        state.lastPrepared.reset();
    } else {
        state.lastPrepared = *prepared;
        state.lastCalib = calib;
    }
    const at::Tensor batch = data.eval ? data.eval->inputs : data.calib->inputs;
    if (data.eval && !state.floatMetric)
        ++state.floatEvaluations;
    Progress analyzeProgress = subProgress(progress, qat ? 0.85 : 0.4, 1.0, "analyzing: ");
    auto report = analysis::analyze(graph, *prepared, batch, data.eval, analysis::AnalysisOptions(),
                                    data.eval ? state.floatMetric : std::nullopt,
                                    analyzeProgress, cancel);
    if (!report)
        return report.error();
    if (data.eval && report->metricFloat)
        state.floatMetric = report->metricFloat;
    report->modelPath = session.model()->path();
    report->modelFormat = session.model()->format();
    report->modelNote = session.model()->note();
    return exporting::reportToJson(*report);
}

/// Runs `body` under the session lock, turning exceptions into errors.
template <typename Body>
Result<nlohmann::json> guarded(QuantSession& session, Body body)
{
    std::lock_guard lock(session.mutex());
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while quantizing");
    } catch (const std::exception& e) {
        return Error::runtime(e.what());
    }
}

} // namespace

Result<nlohmann::json> runQuantization(QuantSession& session, const QuantRequest& request,
                                       Progress& progress, const CancelToken& cancel)
{
    return guarded(session, [&]() -> Result<nlohmann::json> {
        auto scheme = schemeOf(request.scheme, request.overrides);
        if (!scheme)
            return scheme.error();
        auto data = resolveData(session, request, quant::dataSamplesNeeded(*scheme), progress,
                                cancel);
        if (!data)
            return data.error();
        return runOne(session, *data, *scheme, progress, cancel, request.onTrainingStep,
                      request.stopTraining);
    });
}

Result<nlohmann::json> runComparison(QuantSession& session, const QuantRequest& request,
                                     Progress& progress, const CancelToken& cancel)
{
    return guarded(session, [&]() -> Result<nlohmann::json> {
        const std::vector<std::string>& presets = quant::postTrainingPresetNames();
        std::vector<quant::Scheme> schemes;
        std::int64_t calibSamples = 0;
        bool allSamples = false;  // a QAT preset that trains on all of the data
        for (const std::string& name : presets) {
            auto scheme = quant::parseScheme(name);
            if (!scheme)
                return scheme.error();
            const std::int64_t needed = quant::dataSamplesNeeded(*scheme);
            allSamples = allSamples || needed == 0;
            calibSamples = std::max(calibSamples, needed);
            schemes.push_back(std::move(scheme).value());
        }
        if (allSamples)
            calibSamples = 0;
        auto data = resolveData(session, request, calibSamples, progress, cancel);
        if (!data)
            return data.error();
        nlohmann::json runs = nlohmann::json::array();
        const double step = 1.0 / static_cast<double>(schemes.size());
        for (std::size_t i = 0; i < schemes.size(); ++i) {
            const double begin = step * static_cast<double>(i);
            Progress one = subProgress(progress, begin, begin + step, schemes[i].spec + ": ");
            auto report = runOne(session, *data, schemes[i], one, cancel);
            if (!report)
                return report.error();
            runs.push_back(std::move(report).value());
        }
        return nlohmann::json{{"runs", runs}};
    });
}

Result<nlohmann::json> runSensitivity(QuantSession& session, const QuantRequest& request,
                                      Progress& progress, const CancelToken& cancel)
{
    return guarded(session, [&]() -> Result<nlohmann::json> {
        auto scheme = schemeOf(request.scheme, request.overrides);
        if (!scheme)
            return scheme.error();
        auto data = resolveData(session, request, quant::dataSamplesNeeded(*scheme), progress,
                                cancel);
        if (!data)
            return data.error();
        if (!data->eval)
            return Error::usage("sensitivity needs labelled evaluation data (open a data set "
                                "with labels)");
        QuantSession::State& state = session.state();
        const ir::Graph& graph = session.model()->graph();
        Progress prepareProgress = subProgress(progress, 0.0, 0.2, "calibrating: ");
        auto prepared = train::prepareScheme(graph, *scheme, data->calib, prepareProgress,
                                             cancel);
        if (!prepared)
            return prepared.error();
        if (!state.floatMetric) {
            auto metric = analysis::evaluateMetric(graph, *data->eval, c10::Device(c10::kCPU),
                                                   256, nullptr, {}, Progress::none(), cancel);
            if (!metric)
                return metric.error();
            ++state.floatEvaluations;
            state.floatMetric = *metric;
        }
        Progress sweep = subProgress(progress, 0.2, 1.0, "sensitivity: ");
        auto rows = analysis::sensitivity(graph, *prepared, *data->eval, data->eval->inputs,
                                          analysis::AnalysisOptions(), *state.floatMetric, sweep,
                                          cancel);
        if (!rows)
            return rows.error();
        nlohmann::json j = exporting::sensitivityToJson(*state.floatMetric, *rows);
        j["scheme"] = quant::schemeToJson(*scheme);
        j["model"] = {{"path", session.model()->path()}, {"format", session.model()->format()}};
        return j;
    });
}

std::vector<std::string> schemePresets() { return quant::presetNames(); }

bool isTrainingScheme(const std::string& spec)
{
    auto scheme = quant::parseScheme(spec);
    return scheme && scheme->qat.has_value();
}

Result<void> checkScheme(const std::string& spec)
{
    auto scheme = quant::parseScheme(spec);
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

} // namespace bitlens::widgets
