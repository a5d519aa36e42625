#include "quant_job.h"

#include "analysis/metrics.h"
#include "analysis/quant_report.h"
#include "export/export.h"
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
#include <filesystem>
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
    /// The last trained (QAT) model and its training data's inputs: what an export of that
    /// run writes (it is never reused by prepare).
    std::optional<quant::QuantizedModel> lastTrained;
    at::Tensor lastTrainedCalib;
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
        state.lastTrained = *prepared;
        state.lastTrainedCalib = calib;
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

namespace {

/// `text` with every occurrence of `from` replaced by `to` (staging path -> the user's path).
std::string replaced(std::string text, const std::string& from, const std::string& to)
{
    if (from.empty() || from == to)
        return text;
    for (std::size_t pos = text.find(from); pos != std::string::npos;
         pos = text.find(from, pos + to.size()))
        text.replace(pos, from.size(), to);
    return text;
}

/// The quantized model a run of `scheme` on `data` produced, and whether it was the one the
/// session kept from that run (else it was prepared again).
struct PreparedRun {
    const quant::QuantizedModel* model = nullptr;
    bool reused = false;
};

Result<PreparedRun> preparedRun(QuantSession& session, const ResolvedData& data,
                                const quant::Scheme& scheme, Progress& progress,
                                const CancelToken& cancel)
{
    QuantSession::State& state = session.state();
    const ir::Graph& graph = session.model()->graph();
    const at::Tensor calib = data.calib ? data.calib->inputs : at::Tensor();
    const auto sameCalib = [&calib](const at::Tensor& kept) {
        return kept.defined() == calib.defined() && (!calib.defined() || kept.is_same(calib));
    };
    if (scheme.qat) {
        if (state.lastTrained && state.lastTrained->scheme.spec == scheme.spec &&
            sameCalib(state.lastTrainedCalib))
            return PreparedRun{&*state.lastTrained, true};
        Progress training = subProgress(progress, 0.0, 1.0, "training again: ");
        auto trained = train::prepareScheme(graph, scheme, data.calib, training, cancel);
        if (!trained)
            return trained.error();
        if (cancel.cancelled())
            return Error::cancelled();
        state.lastTrained = std::move(trained).value();
        state.lastTrainedCalib = calib;
        return PreparedRun{&*state.lastTrained, false};
    }
    const bool keptSameCalib = state.lastPrepared && sameCalib(state.lastCalib);
    if (keptSameCalib && state.lastPrepared->scheme.spec == scheme.spec)
        return PreparedRun{&*state.lastPrepared, true};
    Progress calibrating = subProgress(progress, 0.0, 1.0, "calibrating again: ");
    auto prepared = quant::prepare(graph, scheme, calib, calibrating, cancel,
                                   keptSameCalib ? &*state.lastPrepared : nullptr);
    if (!prepared) {
        Error e = prepared.error();
        if (e.path.empty() && e.code == ErrorCode::BadInput && data.calib)
            e.path = data.calib->path;
        return e;
    }
    if (cancel.cancelled())
        return Error::cancelled();
    state.lastPrepared = std::move(prepared).value();
    state.lastCalib = calib;
    return PreparedRun{&*state.lastPrepared, false};
}

/// The samples a verification runs on: the evaluation data (labelled or not), else the
/// calibration data.
const io::Dataset* verifyData(const QuantSession& session, const ResolvedData& data)
{
    if (data.eval)
        return data.eval;
    const QuantSession::State& state = session.state();
    if (state.eval)
        return &state.eval->data;
    return data.calib;
}

/// The format of a request: its name, else the extension of its path.
Result<exporting::ExportFormat> formatOf(const ExportRequest& request)
{
    if (!request.format.empty())
        return exporting::parseFormat(request.format);
    return exporting::formatFromPath(request.path);
}

/// The scheme, data and quantized model an export or verification of `request.run` uses.
struct ExportInputs {
    quant::Scheme scheme;
    exporting::ExportFormat format = exporting::ExportFormat::Onnx;
    const io::Dataset* samples = nullptr;
    PreparedRun prepared;
};

Result<ExportInputs> exportInputs(QuantSession& session, const ExportRequest& request,
                                  Progress& progress, const CancelToken& cancel)
{
    ExportInputs in;
    auto scheme = schemeOf(request.run.scheme, request.run.overrides);
    if (!scheme)
        return scheme.error();
    in.scheme = std::move(scheme).value();
    auto format = formatOf(request);
    if (!format)
        return format.error();
    in.format = *format;
    if (auto fits = exporting::checkExportable(in.scheme, in.format); !fits)
        return fits.error();
    if (session.model())
        if (auto fits = exporting::checkExportableModel(session.model()->graph(), in.scheme,
                                                        in.format, session.model()->path());
            !fits)
            return fits.error();
    auto data = resolveData(session, request.run, quant::dataSamplesNeeded(in.scheme), progress,
                            cancel);
    if (!data)
        return data.error();
    in.samples = verifyData(session, *data);
    auto prepared = preparedRun(session, *data, in.scheme, progress, cancel);
    if (!prepared)
        return prepared.error();
    in.prepared = *prepared;
    return in;
}

/// Runs the verification of `path` and stores it (or why it could not run) in `out`.
Result<void> verifyInto(nlohmann::json& out, const std::string& path, const std::string& shownPath,
                        const ExportInputs& in, Progress& progress, const CancelToken& cancel)
{
    if (!in.samples) {
        out["verify_error"] = "no samples to run the file on: open data (File > Open Data)";
        return {};
    }
    auto verified = exporting::verifyExport(path, in.format, *in.prepared.model, *in.samples,
                                            exporting::VerifyOptions(), progress, cancel);
    if (!verified) {
        if (verified.error().code == ErrorCode::Cancelled)
            return verified.error();
        Error e = verified.error();
        e.path = replaced(e.path, path, shownPath);
        e.message = replaced(e.message, path, shownPath);
        out["verify_error"] = e.describe();
        return {};
    }
    exporting::VerifyResult v = std::move(verified).value();
    v.message = replaced(v.message, path, shownPath);
    out["verify"] = exporting::exportToJson(exporting::ExportResult(), v)["verify"];
    return {};
}

} // namespace

namespace {

/// A safetensors export also writes config.json beside the file: what was there before, so an
/// export that does not deliver can put it back.
struct SideFile {
    std::string path;
    bool existed = false;
    std::string bytes;

    static SideFile snapshot(const std::string& path)
    {
        SideFile side;
        side.path = path;
        std::ifstream in(path, std::ios::binary);
        if (in) {
            side.existed = true;
            std::ostringstream text;
            text << in.rdbuf();
            side.bytes = text.str();
        }
        return side;
    }

    void restore() const
    {
        if (existed) {
            (void)io::writeFileAtomic(path, bytes.data(), bytes.size());
        } else {
            std::error_code ec;
            std::filesystem::remove(path, ec);
        }
    }
};

} // namespace

Result<nlohmann::json> runExport(QuantSession& session, const ExportRequest& request,
                                 Progress& progress, const CancelToken& cancel)
{
    const std::string staging = request.stagingPath.empty() ? request.path : request.stagingPath;
    std::optional<SideFile> config;
    if (request.format == "safetensors") {
        const std::filesystem::path target(request.path);
        config = SideFile::snapshot(
            ((target.has_parent_path() ? target.parent_path() : std::filesystem::path("."))
             / "config.json").string());
    }
    auto result = guarded(session, [&]() -> Result<nlohmann::json> {
        Progress preparing = subProgress(progress, 0.0, 0.4);
        auto in = exportInputs(session, request, preparing, cancel);
        if (!in)
            return in.error();
        if (cancel.cancelled())
            return Error::cancelled();
        Progress writing = subProgress(progress, 0.4, 0.5, "exporting: ");
        auto written = exporting::exportModel(*in->prepared.model, in->format, staging, writing,
                                              cancel);
        if (!written) {
            Error e = written.error();
            e.path = replaced(e.path, staging, request.path);
            e.message = replaced(e.message, staging, request.path);
            return e;
        }
        written->path = request.path;
        for (std::string& note : written->notes)
            note = replaced(note, staging, request.path);
        nlohmann::json out = exporting::exportToJson(*written, std::nullopt);
        if (request.verify) {
            Progress verifying = subProgress(progress, 0.5, 1.0, "verifying: ");
            if (auto r = verifyInto(out, staging, request.path, *in, verifying, cancel); !r)
                return r.error();
        }
        if (cancel.cancelled())
            return Error::cancelled();
        out["reused_run_model"] = in->prepared.reused;
        out["scheme"] = in->scheme.spec;
        return out;
    });
    // Whatever stopped the job, nothing of it stays behind: no staging file, config.json as
    // it was.
    if (!result && !request.stagingPath.empty()) {
        discardExport(request.stagingPath);
        if (config)
            config->restore();
    }
    return result;
}

Result<nlohmann::json> runVerify(QuantSession& session, const ExportRequest& request,
                                 Progress& progress, const CancelToken& cancel)
{
    return guarded(session, [&]() -> Result<nlohmann::json> {
        std::error_code ec;
        const auto bytes = std::filesystem::file_size(request.path, ec);
        if (ec)
            return Error::badInput(request.path, "cannot read the file: " + ec.message());
        Progress preparing = subProgress(progress, 0.0, 0.3);
        auto in = exportInputs(session, request, preparing, cancel);
        if (!in)
            return in.error();
        exporting::ExportResult file;
        file.format = in->format;
        file.path = request.path;
        file.bytes = static_cast<std::int64_t>(bytes);
        for (const auto& [name, layer] : in->prepared.model->layers)
            (layer.config.keepFloat ? file.floatLayers : file.quantizedLayers) += 1;
        nlohmann::json out = exporting::exportToJson(file, std::nullopt);
        Progress verifying = subProgress(progress, 0.3, 1.0, "verifying: ");
        if (auto r = verifyInto(out, request.path, request.path, *in, verifying, cancel); !r)
            return r.error();
        if (cancel.cancelled())
            return Error::cancelled();
        out["reused_run_model"] = in->prepared.reused;
        out["scheme"] = in->scheme.spec;
        out["verified_only"] = true;
        return out;
    });
}

Result<void> checkExport(const QuantRequest& run, const std::string& format)
{
    auto scheme = schemeOf(run.scheme, run.overrides);
    if (!scheme)
        return scheme.error();
    auto parsed = exporting::parseFormat(format);
    if (!parsed)
        return parsed.error();
    return exporting::checkExportable(*scheme, *parsed);
}

Result<std::string> exportFormatOfPath(const std::string& path)
{
    auto format = exporting::formatFromPath(path);
    if (!format)
        return format.error();
    return exporting::formatName(*format);
}

Result<QuantRequest> runOfReport(const nlohmann::json& report)
{
    const auto noScheme = [] {
        return Error::usage("this report names no scheme (run one first)");
    };
    if (!report.is_object() || !report.contains("scheme") || !report["scheme"].is_object())
        return noScheme();
    const nlohmann::json& saved = report["scheme"];
    if (!saved.contains("spec") || !saved["spec"].is_string())
        return noScheme();
    const std::string spec = saved["spec"].get<std::string>();
    // schemeOf writes "SPEC with overrides LAYER=VALUE ..." for runs with overrides.
    const std::string marker = " with overrides";
    QuantRequest run;
    const std::size_t at = spec.find(marker);
    run.scheme = spec.substr(0, at);
    if (at != std::string::npos) {
        std::istringstream rest(spec.substr(at + marker.size()));
        std::string token;
        while (rest >> token) {
            const std::size_t eq = token.find('=');
            if (eq == std::string::npos || eq == 0)
                return Error::usage("cannot read the layer overrides of run '" + spec + "'");
            run.overrides[token.substr(0, eq)] = token.substr(eq + 1);
        }
    }
    // What was read back must describe the same run as the report does.
    auto scheme = schemeOf(run.scheme, run.overrides);
    if (!scheme)
        return Error::usage("cannot read back the scheme of run '" + spec +
                            "': " + scheme.error().message);
    const nlohmann::json again = quant::schemeToJson(*scheme);
    for (const char* key : {"config", "overrides"})
        if (saved.contains(key) && saved[key] != again[key])
            return Error::usage("the scheme of run '" + spec + "' reads back as another " +
                                std::string(key) + " (run it again to export it)");
    return run;
}

Result<void> commitExport(const std::string& stagingPath, const std::string& path)
{
    if (stagingPath.empty() || stagingPath == path)
        return {};
    std::error_code ec;
    std::filesystem::rename(stagingPath, path, ec);
    if (ec) {
        discardExport(stagingPath);
        return Error::runtime("cannot move the exported file into place: " + ec.message(), path);
    }
    return {};
}

void discardExport(const std::string& stagingPath)
{
    std::error_code ec;
    if (!stagingPath.empty())
        std::filesystem::remove(stagingPath, ec);
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
