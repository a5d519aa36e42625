#pragma once
// The quantization jobs the window runs, as the names the widgets know them by. The pipeline
// itself is core/workspace (one scheme, every preset, the sensitivity sweep, export and
// verify), which bitlens-cli calls too, so the window shows exactly the report.json that
// `bitlens-cli quantize` writes. What is left here is the GUI's wording of one error; the
// threads and signals are JobRunner's. This header is torch-free.

#include "workspace/workspace.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace bitlens::widgets {

/// One step of a quantization-aware training run, as the Training tab plots it.
using TrainingPoint = workspace::TrainingPoint;

/// What one run quantizes with, and on which data (main_window.h declares it as a struct).
struct QuantRequest : workspace::RunRequest {};

/// One open model with what its runs share (main_window.h declares it as a class).
class QuantSession : public workspace::Workspace {
public:
    using workspace::Workspace::Workspace;
};

/// What an export writes: the run whose quantized model goes out, the format and the file.
using ExportRequest = workspace::ExportRequest;

/// Runs `request`; the result is report.json as `bitlens-cli quantize --report` writes it.
Result<nlohmann::json> runQuantization(QuantSession& session, const QuantRequest& request,
                                       Progress& progress, const CancelToken& cancel);
/// Runs every post-training preset (request.scheme and overrides ignored); {"runs": [...]}.
/// `onRun` (may be empty) gets each scheme's report as it finishes, on the worker thread.
Result<nlohmann::json> runComparison(QuantSession& session, const QuantRequest& request,
                                     Progress& progress, const CancelToken& cancel,
                                     const std::function<void(const nlohmann::json&)>& onRun = {});
/// How many schemes runComparison runs.
int comparisonSize();
/// The sensitivity sweep of request.scheme; the JSON `sensitivity --report` writes.
Result<nlohmann::json> runSensitivity(QuantSession& session, const QuantRequest& request,
                                      Progress& progress, const CancelToken& cancel);
/// What the sensitivity sweep of `request` will cost (workspace::sensitivityCostToJson).
Result<nlohmann::json> estimateSensitivity(QuantSession& session, const QuantRequest& request,
                                           Progress& progress, const CancelToken& cancel);
/// Exports the quantized model of `request.run` (workspace::exportRun); report.json's "export"
/// object plus "reused_run_model", "scheme" and "verify_error".
Result<nlohmann::json> runExport(QuantSession& session, const ExportRequest& request,
                                 Progress& progress, const CancelToken& cancel);
/// Verifies an existing exported file (workspace::verifyFile); runExport's JSON with
/// "verified_only": true.
Result<nlohmann::json> runVerify(QuantSession& session, const ExportRequest& request,
                                 Progress& progress, const CancelToken& cancel);
/// Checks before any work that `format` can hold the scheme of `run` (parsing only).
inline Result<void> checkExport(const QuantRequest& run, const std::string& format)
{
    return workspace::checkExport(run, format);
}
/// Advice for exporting `run` to `format` (workspace::exportAdvice), or "".
inline std::string exportAdvice(const QuantRequest& run, const std::string& format)
{
    return workspace::exportAdvice(run, format);
}
/// The interop options of exporting `run` to `format`, one line each
/// (workspace::exportInteropOptions).
inline std::vector<std::string> exportInteropOptions(const QuantRequest& run,
                                                     const std::string& format)
{
    return workspace::exportInteropOptions(run, format);
}
/// The scheme string and layer overrides a report.json's run ran with.
Result<QuantRequest> runOfReport(const nlohmann::json& report);

using workspace::commitExport;
using workspace::discardExport;
using workspace::exportFormatOfPath;
using workspace::isTrainingScheme;
using workspace::schemePresets;
using workspace::checkScheme;
using workspace::writeJsonFile;
using workspace::readJsonFile;

} // namespace bitlens::widgets
