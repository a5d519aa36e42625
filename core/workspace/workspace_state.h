#pragma once
// Inside core/workspace: what a Workspace keeps between jobs, and the steps its jobs share
// (data resolution, scheme + overrides, preparing a scheme). Not for front ends: they call
// workspace.h.

#include "workspace/workspace.h"

#include "analysis/metrics.h"
#include "io/dataset.h"
#include "jobs/guard.h"
#include "quant/engine.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <exception>
#include <new>
#include <optional>

namespace bitlens::workspace {

struct Workspace::State {
    /// A data set as loaded, with the request that loaded it.
    struct Loaded {
        std::string path;
        std::string split;
        std::int64_t limit = 0;
        std::int64_t seqLen = 0;
        std::int64_t maxTokens = 0;
        io::Dataset data;
    };
    std::optional<Loaded> calib;
    std::optional<Loaded> eval;
    std::optional<analysis::MetricValue> floatMetric;  ///< for `eval`
    /// The last post-training run as prepared, and the calibration tensor it used: a re-run
    /// on the same data takes every layer whose configuration is unchanged from it.
    std::shared_ptr<const quant::QuantizedModel> lastPrepared;
    at::Tensor lastCalib;
    /// The last trained (QAT) model and its training data's inputs: what an export of that
    /// run writes (it is never reused by prepare).
    std::shared_ptr<const quant::QuantizedModel> lastTrained;
    at::Tensor lastTrainedCalib;
    int dataLoads = 0;
    int floatEvaluations = 0;
};

namespace detail {

/// The data a request runs on, resolved.
struct ResolvedData {
    const io::Dataset* calib = nullptr;  ///< calibration (training) samples; else the eval set
    const io::Dataset* eval = nullptr;   ///< evaluation data the metric can be measured on
    const io::Dataset* loadedEval = nullptr;  ///< evaluation data as loaded (labelled or not)

    /// The batch layer errors and throughput are measured on: evaluation, else calibration.
    at::Tensor analysisBatch() const
    {
        return loadedEval ? loadedEval->inputs : calib ? calib->inputs : at::Tensor();
    }
};

/// The quantized model of a scheme on resolved data, and whether it was the one the
/// workspace kept from the last run (else it was prepared now).
struct PreparedRun {
    std::shared_ptr<const quant::QuantizedModel> model;
    bool reused = false;
};

/// The workspace's device.
c10::Device deviceOf(const Workspace& ws);
/// Forwards a sub-job's progress into [begin, end] of the outer job's range.
Progress subProgress(Progress& outer, double begin, double end, std::string prefix = {});
/// The scheme of `request` with its per-layer overrides applied; with overrides its spec reads
/// "SPEC with overrides LAYER=VALUE ..." (runOfReport reads it back).
Result<quant::Scheme> schemeOf(const std::string& spec,
                               const std::map<std::string, std::string>& overrides);
/// Loads (or reuses) the data of `request`: its own paths, else the zoo model's; calibration
/// sized for `calibSamples` (quant::dataSamplesNeeded; 0 = all).
Result<ResolvedData> resolveData(Workspace& ws, const RunRequest& request,
                                 std::int64_t calibSamples, Progress& progress,
                                 const CancelToken& cancel);
/// The one preparation of any scheme: quant::prepare (reusing the unchanged layers of the last
/// run on the same calibration tensor) or, for qat-* schemes, train::prepareScheme. With
/// `reuseWhole`, the kept model of the same scheme and data is returned as it is.
Result<PreparedRun> prepareRun(Workspace& ws, const ResolvedData& data,
                               const quant::Scheme& scheme, bool reuseWhole, Progress& progress,
                               const CancelToken& cancel, const RunRequest* training = nullptr);

/// Runs `body` under the workspace lock, under the error boundary (jobs/guard.h).
template <typename Body>
auto guarded(Workspace& ws, Body body) -> decltype(body())
{
    std::lock_guard lock(ws.mutex());
    using R = typename decltype(body())::value_type;
    return bitlens::guarded<R>(Boundary{.libraryPrefix = "", .oomWhile = "quantizing"}, body);
}

} // namespace detail
} // namespace bitlens::workspace
