#pragma once
// The quantization jobs the window runs: one scheme, every preset ("Compare all schemes") and a
// sensitivity sweep. Each calls the core exactly as `bitlens-cli quantize / compare /
// sensitivity` do (parseScheme -> prepare -> analyze -> reportToJson) and hands back the JSON
// those commands write, so the window shows exactly what report.json holds. This header is
// torch-free: data sets and float metrics live behind QuantSession, inside quant_job.cpp.

#include "jobs/progress.h"
#include "jobs/result.h"
#include "model/model.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace bitlens::widgets {

/// One step of a quantization-aware training run, as the Training tab plots it (a torch-free
/// copy of train::QatStep). Step 0 is the calibrated start: a metric and a NaN loss.
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

/// What one run quantizes with, and on which data.
struct QuantRequest {
    std::string scheme;  ///< "static-int8:observer=mse", as the CLI takes it
    /// Per-layer overrides: layer name -> "float" (keep float32) or a scheme string whose
    /// layer configuration that layer runs with.
    std::map<std::string, std::string> overrides;
    std::string calibPath;       ///< calibration data (train split); empty: none
    std::string evalPath;        ///< evaluation data (test split, needs labels); empty: none
    std::int64_t evalLimit = 0;  ///< evaluation samples kept (0 = all)
    /// QAT schemes: called on the worker thread after every training step (may be empty).
    std::function<void(const TrainingPoint&)> onTrainingStep;
    /// QAT schemes: stops training at the next step and keeps the best checkpoint, which is
    /// then analysed and delivered like any run (cancelling the job drops the result instead).
    CancelToken stopTraining;
};

/// One open model with what its runs share: the loaded data sets and the float metric, so a
/// re-run after an override only prepares and analyzes the quantized model again. Jobs of one
/// session run one at a time (a cancelled job returns at its next layer or batch).
class QuantSession {
public:
    /// A session for `model`; `zooName` (may be empty) names the demo model whose own
    /// calibration and evaluation data are used when a request names none.
    QuantSession(std::shared_ptr<Model> model, std::string zooName);
    ~QuantSession();
    QuantSession(const QuantSession&) = delete;
    QuantSession& operator=(const QuantSession&) = delete;

    /// The model every run of this session quantizes.
    const std::shared_ptr<Model>& model() const { return m_model; }
    /// The demo zoo name, or empty.
    const std::string& zooName() const { return m_zooName; }
    /// How many times a data set was read from disk (tests check that re-runs reuse them).
    int dataLoads() const;
    /// How many times the float model was evaluated (tests check that re-runs reuse it).
    int floatEvaluations() const;

    /// The loaded data and cached metrics (defined in quant_job.cpp).
    struct State;
    /// The cache; lock mutex() while using it.
    State& state() const { return *m_state; }
    /// Serializes the jobs of this session.
    std::mutex& mutex() const { return m_mutex; }

private:
    std::shared_ptr<Model> m_model;
    std::string m_zooName;
    std::unique_ptr<State> m_state;
    mutable std::mutex m_mutex;
};

/// Runs `request` on `session`'s model; the result is report.json as `quantize` writes it.
Result<nlohmann::json> runQuantization(QuantSession& session, const QuantRequest& request,
                                       Progress& progress, const CancelToken& cancel);
/// Runs every post-training preset (request.scheme and overrides ignored); {"runs": [report,
/// ...]} as `compare --schemes all` writes it.
Result<nlohmann::json> runComparison(QuantSession& session, const QuantRequest& request,
                                     Progress& progress, const CancelToken& cancel);
/// Quantizes each layer alone with request.scheme and measures the metric (needs labelled
/// evaluation data); the JSON `sensitivity --report` writes.
Result<nlohmann::json> runSensitivity(QuantSession& session, const QuantRequest& request,
                                      Progress& progress, const CancelToken& cancel);

/// What an export writes: the run (scheme, overrides, data) whose quantized model goes out,
/// the format ("onnx", "safetensors", "gguf") and the file.
struct ExportRequest {
    QuantRequest run;
    std::string format;
    std::string path;       ///< the file the user chose
    /// Where the job writes; the window renames it to `path` once the job has delivered (so
    /// Cancel at any moment leaves no file, and an existing `path` untouched). Empty: `path`.
    std::string stagingPath;
    bool verify = true;     ///< reload the file and run it next to the in-app model
};

/// Exports the quantized model of `request.run`: the prepared model the session kept for that
/// run when it is the last one of its scheme on the same calibration data, else prepared again
/// (quant::prepare with the kept layers reused). Writes atomically to the staging path, then
/// (optionally) verifies it there. The result is report.json's "export" object (see
/// exporting::exportToJson; "path" and the verify message name `request.path`), plus
/// "reused_run_model" (bool) and "verify_error" (string: the file was written but could not be
/// verified). Cancelled: the staging file is removed.
Result<nlohmann::json> runExport(QuantSession& session, const ExportRequest& request,
                                 Progress& progress, const CancelToken& cancel);
/// Verifies an existing exported file (`request.path`, format from `request.format` or, when
/// empty, from its extension) against the quantized model of `request.run`; the same JSON as
/// runExport with "verified_only": true. A file that does not match is "verify.ok": false.
Result<nlohmann::json> runVerify(QuantSession& session, const ExportRequest& request,
                                 Progress& progress, const CancelToken& cancel);
/// Checks before any work that `format` can hold the scheme of `run` (parsing only): the
/// Unsupported error of exporting::checkExportable, or a Usage error for a bad format name.
Result<void> checkExport(const QuantRequest& run, const std::string& format);
/// The format a file name asks for by its extension ("onnx", ...); Usage error otherwise.
Result<std::string> exportFormatOfPath(const std::string& path);
/// The scheme string and layer overrides a report.json's run ran with, read back from its
/// "scheme" object (checked: the overrides must give the same "scheme.overrides" again).
/// Usage error when the report holds no scheme or its overrides cannot be read back.
Result<QuantRequest> runOfReport(const nlohmann::json& report);
/// Moves a finished export from its staging file to `path` (replacing a file there).
Result<void> commitExport(const std::string& stagingPath, const std::string& path);
/// Removes a staging file left by a cancelled export (no error when it is gone).
void discardExport(const std::string& stagingPath);

/// True when `spec` parses to a quantization-aware training scheme (qat-*).
bool isTrainingScheme(const std::string& spec);
/// The scheme presets, in the order `compare` runs them.
std::vector<std::string> schemePresets();
/// Checks a scheme string (cheap: parsing only); the error says what is wrong with it.
Result<void> checkScheme(const std::string& spec);
/// Writes `json` (indented) to `path` atomically: a failed write leaves no partial file.
Result<void> writeJsonFile(const std::string& path, const nlohmann::json& json);
/// Reads a JSON file; BadInput names the file and the parse error.
Result<nlohmann::json> readJsonFile(const std::string& path);

} // namespace bitlens::widgets
