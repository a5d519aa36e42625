#pragma once
// The run pipeline every front end calls: an open model with its data (loaded once, kept), and
// the jobs on it — one scheme (PTQ or QAT) -> prepared model -> analysis -> report.json, every
// preset side by side, the per-layer sensitivity sweep, throughput, export and verification.
// bitlens-cli's commands and the GUI's jobs are thin callers of these functions, so the two
// give the same report.json for the same model, data and scheme. Each long call reports
// progress and stops at the next layer or batch once its CancelToken is cancelled.
//
// This header is torch-free (the GUI includes it): the loaded tensors live behind Workspace,
// and the typed results the CLI prints from are only forward-declared here.

#include "jobs/progress.h"
#include "jobs/result.h"
#include "model/model.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace bitlens::analysis {
struct QuantReport;
struct Throughput;
struct SensitivityRow;
struct MetricValue;
} // namespace bitlens::analysis
namespace bitlens::exporting {
struct ExportResult;
struct VerifyResult;
} // namespace bitlens::exporting
namespace bitlens::quant {
struct QuantizedModel;
} // namespace bitlens::quant

namespace bitlens::workspace {

/// One step of a quantization-aware training run (a torch-free copy of train::QatStep).
/// Step 0 is the calibrated start: a metric and a NaN loss.
struct TrainingPoint {
    std::int64_t step = 0;
    std::int64_t steps = 0;       ///< planned in total
    int epoch = 0;
    int epochs = 0;
    double loss = 0.0;            ///< this step's training loss (NaN at step 0)
    double lr = 0.0;
    bool hasMetric = false;       ///< the held-out metric was evaluated at this step
    double metric = 0.0;          ///< held-out metric (top-1 as a fraction, or SQNR in dB)
    double bestMetric = 0.0;      ///< best held-out metric so far (the kept checkpoint)
    std::string metricName;       ///< "top1" or "output_sqnr_db"
    std::string lossName;         ///< "cross_entropy", "kl_distill" or "mse_distill"
};

/// What one run quantizes with, and on which data. With neither calibPath nor evalPath, a
/// workspace opened on a zoo model takes that model's own calibration and evaluation data.
struct RunRequest {
    std::string scheme;  ///< "static-int8:observer=mse", or a scheme .json file
    /// Per-layer overrides: layer name -> "float" / "float32" (keep float32) or a scheme string
    /// whose layer configuration that layer runs with (quant::applyOverride).
    std::map<std::string, std::string> overrides;
    std::string calibPath;       ///< calibration data (train split); empty: none
    std::string evalPath;        ///< evaluation data (test split); empty: none
    std::int64_t evalLimit = 0;  ///< evaluation samples kept (0 = all; text: windows / lines)
    std::int64_t seqLen = 0;     ///< text: window / row length in tokens (0 = the default)
    std::int64_t evalTokens = 0; ///< language-model evaluation text: token budget (0 = none)
    /// What runs a quantize: "whole" (quant::prepare on the whole graph, then analysis),
    /// "block" (analysis/block_engine.h: a stacked language model one decoder block at a time,
    /// for models whose float32 copy does not fit; post-training schemes, no throughput), or
    /// "" / "auto": the whole engine where its estimate fits, else the block engine where it
    /// can run the model and scheme and its estimate fits, else the whole engine's refusal.
    /// run() only; other jobs run the whole engine.
    std::string engine;
    /// Sensitivity: rank a language model's layers by the KL divergence of its output
    /// (AnalysisOptions::sensitivityByKld) instead of by the metric change.
    bool sensitivityByKld = false;
    /// Sensitivity: sweep only the layers whose name contains one of these (empty = all).
    std::vector<std::string> sensitivityLayers;
    /// Called on the worker thread with report.json so far (layers, throughput; no metric yet)
    /// once the layer errors are measured, before the task metric (may be empty).
    std::function<void(const nlohmann::json&)> onLayers;
    /// QAT schemes: called on the worker thread after every training step (may be empty).
    std::function<void(const TrainingPoint&)> onTrainingStep;
    /// QAT schemes: stops training at the next step and keeps the best checkpoint, which is
    /// then analysed and delivered like any run (cancelling the job drops the result instead).
    CancelToken stopTraining;
};

/// How a workspace runs its jobs.
struct WorkspaceOptions {
    std::string device = "cpu";  ///< "cpu" or "cuda": where analysis, timing and verify run
};

/// One open model with what its runs share: the loaded data sets, the float metric and the
/// last prepared model, so a re-run after an override only prepares (reusing every unchanged
/// layer) and analyzes the quantized model again. Jobs of one workspace run one at a time.
class Workspace {
public:
    /// A workspace on `model`; `zooName` (may be empty) names the zoo model whose own
    /// calibration and evaluation data a request without data paths runs on.
    Workspace(std::shared_ptr<Model> model, std::string zooName,
              WorkspaceOptions options = WorkspaceOptions());
    ~Workspace();
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;

    /// The model every run of this workspace quantizes.
    const std::shared_ptr<Model>& model() const { return m_model; }
    /// The zoo name, or empty.
    const std::string& zooName() const { return m_zooName; }
    /// How the jobs run.
    const WorkspaceOptions& options() const { return m_options; }
    /// How many times a data set was read from disk (tests check that re-runs reuse them).
    int dataLoads() const;
    /// How many times the float model was evaluated (tests check that re-runs reuse it).
    int floatEvaluations() const;

    /// The loaded data and cached results (defined in workspace_state.h).
    struct State;
    /// The cache; lock mutex() while using it.
    State& state() const { return *m_state; }
    /// Serializes the jobs of this workspace.
    std::mutex& mutex() const { return m_mutex; }

private:
    std::shared_ptr<Model> m_model;
    std::string m_zooName;
    WorkspaceOptions m_options;
    std::unique_ptr<State> m_state;
    mutable std::mutex m_mutex;
};

/// A model argument resolved: the model file, and for a zoo name the data it brings.
struct ModelSource {
    std::string path;       ///< the model file (or folder)
    std::string zooName;    ///< the zoo name the argument named, or empty
    std::string calibData;  ///< the zoo model's calibration data, or empty
    std::string evalData;   ///< the zoo model's evaluation data, or empty
};

/// Resolves `arg`: a zoo name (that is not also an existing file) is built when missing
/// (`onBuild` is called first, with the name, so a caller can say it takes minutes) and
/// becomes its file and data; anything else is taken as a path.
Result<ModelSource> resolveModel(const std::string& arg, Progress& progress,
                                 const CancelToken& cancel = CancelToken(),
                                 const std::function<void(const std::string&)>& onBuild = {});
/// The zoo model's own data for `ws` (empty paths when it is not on a zoo model).
Result<ModelSource> zooData(const Workspace& ws, const CancelToken& cancel = CancelToken());
/// Resolves `arg` (resolveModel) and opens the model in a workspace.
Result<std::unique_ptr<Workspace>> open(const std::string& arg, Progress& progress,
                                        const CancelToken& cancel = CancelToken(),
                                        WorkspaceOptions options = WorkspaceOptions(),
                                        const std::function<void(const std::string&)>& onBuild = {});

/// One run as report.json holds it, and the typed report the CLI prints from.
struct Run {
    nlohmann::json report;                                 ///< exporting::reportToJson
    std::shared_ptr<const analysis::QuantReport> details;  ///< the same, typed
};

/// Runs `request` on the workspace's model: prepares its scheme (quant::prepare, or QAT
/// training for qat-* schemes), analyzes it against float and returns report.json.
Result<Run> run(Workspace& ws, const RunRequest& request, Progress& progress,
                const CancelToken& cancel);
/// Runs each of `schemes` (empty: every post-training preset) on the data of `request` (its
/// scheme and overrides are ignored); `onRun` sees each run as it ends. {"runs": [report,
/// ...]}, as `compare --report` writes it.
Result<nlohmann::json> compare(Workspace& ws, const RunRequest& request,
                               const std::vector<std::string>& schemes, Progress& progress,
                               const CancelToken& cancel,
                               const std::function<void(const Run&)>& onRun = {});

/// A sensitivity sweep as `sensitivity --report` writes it, and typed.
struct Sensitivity {
    nlohmann::json report;
    std::shared_ptr<const std::vector<analysis::SensitivityRow>> rows;
    std::shared_ptr<const analysis::MetricValue> floatMetric;
};
/// Quantizes each layer alone with the request's scheme and measures the metric on labelled
/// evaluation data (Usage error without it).
Result<Sensitivity> sensitivity(Workspace& ws, const RunRequest& request, Progress& progress,
                                const CancelToken& cancel);

/// What a sensitivity sweep of a request will cost, before it starts: the layers it runs one
/// at a time, the evaluation passes, and the time on this machine from one measured pass over
/// a slice of the evaluation data (scaled to the whole set).
struct SensitivityCost {
    std::vector<std::string> layerNames; ///< the layers the scheme quantizes, in graph order
    std::int64_t layers = 0;          ///< layers the sweep quantizes alone (the filter applied)
    std::int64_t evalUnits = 0;       ///< samples, lines or windows of one evaluation pass
    std::string unit;                 ///< "samples", "lines", "windows of 512 tokens"
    bool byKld = false;               ///< two passes per layer (float and quantized)
    bool floatPassNeeded = false;     ///< the float model's metric is not known yet
    double secondsPerUnit = 0.0;      ///< one evaluation unit (window, sample), measured
    std::int64_t measuredUnits = 0;   ///< the slice the time was measured on
    bool needsCalibration = false;    ///< the scheme calibrates (or GPTQ / AWQ) first

    /// Evaluation passes of a sweep of `swept` layers.
    std::int64_t passes(std::int64_t swept) const
    {
        return swept * (byKld ? 2 : 1) + (floatPassNeeded ? 1 : 0);
    }
    /// Seconds of a sweep of `swept` layers over `units` evaluation units (calibration not
    /// included): passes x units x the measured time of one unit.
    double seconds(std::int64_t swept, std::int64_t units) const
    {
        return static_cast<double>(passes(swept)) * static_cast<double>(units) * secondsPerUnit;
    }
    /// The sweep as requested.
    double seconds() const { return seconds(layers, evalUnits); }
};
/// Loads the request's data, counts the layers, and times the float model on a slice of the
/// evaluation data (one window of a language model, one batch of up to 64 samples). Usage
/// error without labelled evaluation data, or when the filter matches no quantized layer.
Result<SensitivityCost> sensitivityCost(Workspace& ws, const RunRequest& request,
                                        Progress& progress, const CancelToken& cancel);
/// `sensitivity --estimate --json`: {"layers", "quantized_layers", "layer_names", "eval_units",
/// "unit", "passes", "by_kld", "float_pass_needed", "seconds_per_unit", "measured_units",
/// "seconds", "needs_calibration"}.
nlohmann::json sensitivityCostToJson(const SensitivityCost& cost);
/// Reads sensitivityCostToJson's object back (the window's dialog); BadInput when malformed.
Result<SensitivityCost> sensitivityCostFromJson(const nlohmann::json& j);
/// Float vs quantized throughput of one scheme.
struct Bench {
    nlohmann::json report;  ///< exporting::throughputToJson
    std::shared_ptr<const analysis::Throughput> details;
};
/// Times float and quantized on `batch` samples (0: 64, text 4) of the calibration data (the
/// request's, else the zoo's), or on uniform noise shaped like the model's one input when
/// there is no data or too little of it. The scheme is prepared as run() prepares it.
Result<Bench> bench(Workspace& ws, const RunRequest& request, std::int64_t batch,
                    Progress& progress, const CancelToken& cancel);

/// The quantized model of `request` as run() prepares it (the last run's when it was the same
/// scheme on the same data), for callers that execute it themselves.
Result<std::shared_ptr<const quant::QuantizedModel>> prepared(Workspace& ws,
                                                              const RunRequest& request,
                                                              Progress& progress,
                                                              const CancelToken& cancel);

/// What an export writes: the run whose quantized model goes out, the format and the file.
struct ExportRequest {
    RunRequest run;
    std::string format;     ///< "onnx", "safetensors", "gguf"; empty: from the extension
    std::string path;       ///< the file the user chose
    /// Where the job writes; the caller renames it to `path` once the job has delivered (so
    /// a cancel at any moment leaves no file, and an existing `path` untouched). Empty: `path`.
    std::string stagingPath;
    bool verify = true;     ///< reload the file and run it next to the in-app model
};

/// An export or verification as it ended.
struct Exported {
    nlohmann::json file;    ///< report.json's "export" object (exporting::exportToJson)
    std::shared_ptr<const exporting::ExportResult> written;
    std::shared_ptr<const exporting::VerifyResult> verified;  ///< null: not verified
    std::optional<Error> verifyError;  ///< the file was written but could not be verified
    bool reusedRunModel = false;       ///< the prepared model of the last run went out
    std::string scheme;                ///< the spec of the exported scheme
    std::int64_t bytesFloat = 0;       ///< float32 weight bytes of the exported model
    /// The GUI's JSON: `file` plus "reused_run_model", "scheme" and "verify_error".
    nlohmann::json toJson() const;
};

/// Exports the quantized model of `request.run` (the one the last run kept when it was the
/// same scheme on the same data, else prepared again). Writes atomically to the staging path,
/// then (optionally) verifies it there; paths in the result name `request.path`. Cancelled or
/// failed with a staging path: the staging file is removed, config.json beside it restored.
Result<Exported> exportRun(Workspace& ws, const ExportRequest& request, Progress& progress,
                           const CancelToken& cancel);
/// Verifies an existing exported file (`request.path`) against the quantized model of
/// `request.run`. A file that does not match is verified->ok false, not an error.
Result<Exported> verifyFile(Workspace& ws, const ExportRequest& request, Progress& progress,
                            const CancelToken& cancel);
/// Checks before any work that `format` ("onnx", ...; empty: by the extension of `path`) can
/// hold the scheme of `run` — and, with a workspace, its model. Parsing only.
Result<void> checkExport(const RunRequest& run, const std::string& format,
                         const std::string& path = {}, const Workspace* ws = nullptr);
/// Advice (not an error) for exporting `run` to `format`: for ONNX with 8-bit weight codes and
/// u8 activations, that onnxruntime's u8 x s8 kernels on CPUs without VNNI add pairs of
/// products in 16 bits and can saturate, and that `reduce-range=true` rules it out. Empty when
/// there is nothing to say (or the run does not parse: checkExport reports that).
std::string exportAdvice(const RunRequest& run, const std::string& format,
                         const std::string& path = {});
/// The interop options of exporting `run` to `format` (exporting::interopOptionLines with the
/// run's scheme): int8 weight range, reduce-range, the format's rule for partial groups. The
/// defaults when the run does not parse; empty when the format does not.
std::vector<std::string> exportInteropOptions(const RunRequest& run, const std::string& format);
/// The format a file name asks for by its extension ("onnx", ...); Usage error otherwise.
Result<std::string> exportFormatOfPath(const std::string& path);
/// The scheme string and layer overrides a report.json's run ran with, read back from its
/// "scheme" object (checked: the overrides must give the same "scheme.overrides" again).
Result<RunRequest> runOfReport(const nlohmann::json& report);
/// The name every view gives the scheme a report ran (quant::displayName: "w4-int4 · GPTQ
/// g128", "static-int8 · +2 overrides"): its "scheme.display_name", else (reports written
/// before it) read back from its spec and overrides. Empty when the report names no scheme
/// or only a scheme .json file (not read here).
std::string schemeDisplayName(const nlohmann::json& report);
/// Moves a finished export from its staging file to `path` (replacing a file there); a staging
/// folder replaces the folder `path` whole (exporting::replaceFolder).
Result<void> commitExport(const std::string& stagingPath, const std::string& path);
/// Removes a staging file or folder left by a cancelled export (no error when it is gone).
void discardExport(const std::string& stagingPath);

/// True when `spec` parses to a quantization-aware training scheme (qat-*).
bool isTrainingScheme(const std::string& spec);
/// The scheme presets, in the order the GUI lists them.
std::vector<std::string> schemePresets();
/// The presets compare() runs when given none (every post-training preset).
std::vector<std::string> postTrainingPresets();
/// What a quantize run of a scheme will hold at its peak against the memory available: the
/// estimate prepareRun refuses a run on (analysis/memory_estimate.h), for the GUI to show
/// before a run. Planned for the default batch (text: 2 windows of 512 tokens).
struct MemoryForecast {
    std::int64_t neededBytes = 0;
    std::int64_t availableBytes = -1;  ///< -1: unknown (nothing is refused then)
    bool fits = true;
    std::string text;  ///< "~1.2 GB of 24.7 GB available (float32 weights 0.5 GB, ...)"
};
/// Reads only the model's graph, never the workspace's data: safe while a job runs.
Result<MemoryForecast> memoryForecast(const Workspace& ws, const std::string& scheme,
                                      const std::map<std::string, std::string>& overrides = {});

/// Checks a scheme string (parsing only); the error says what is wrong with it.
Result<void> checkScheme(const std::string& spec);
/// Checks a scheme with its overrides (parsing only).
Result<void> checkRun(const RunRequest& request);
/// Writes `json` (indented) to `path` atomically: a failed write leaves no partial file.
Result<void> writeJsonFile(const std::string& path, const nlohmann::json& json);
/// Reads a JSON object file; BadInput names the file and the parse error.
Result<nlohmann::json> readJsonFile(const std::string& path);

} // namespace bitlens::workspace
