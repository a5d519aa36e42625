#include "quant_job.h"

namespace bitlens::widgets {

namespace {

/// A request without data on a model that brings none: what to do, in the window's words.
Result<void> checkData(const QuantSession& session, const workspace::RunRequest& request)
{
    if (request.calibPath.empty() && request.evalPath.empty() && session.zooName().empty())
        return Error::usage("open data (File > Open Data) first: layer errors are measured on "
                            "real samples");
    return {};
}

} // namespace

Result<nlohmann::json> runQuantization(QuantSession& session, const QuantRequest& request,
                                       Progress& progress, const CancelToken& cancel)
{
    if (auto ok = checkData(session, request); !ok)
        return ok.error();
    auto run = workspace::run(session, request, progress, cancel);
    if (!run)
        return run.error();
    return std::move(run->report);
}

Result<nlohmann::json> runComparison(QuantSession& session, const QuantRequest& request,
                                     Progress& progress, const CancelToken& cancel,
                                     const std::function<void(const nlohmann::json&)>& onRun)
{
    if (auto ok = checkData(session, request); !ok)
        return ok.error();
    std::function<void(const workspace::Run&)> each;
    if (onRun)
        each = [&onRun](const workspace::Run& run) { onRun(run.report); };
    return workspace::compare(session, request, {}, progress, cancel, each);
}

int comparisonSize() { return static_cast<int>(workspace::postTrainingPresets().size()); }

Result<nlohmann::json> runSensitivity(QuantSession& session, const QuantRequest& request,
                                      Progress& progress, const CancelToken& cancel)
{
    if (auto ok = checkData(session, request); !ok)
        return ok.error();
    auto sweep = workspace::sensitivity(session, request, progress, cancel);
    if (!sweep)
        return sweep.error();
    return std::move(sweep->report);
}

Result<nlohmann::json> estimateSensitivity(QuantSession& session, const QuantRequest& request,
                                           Progress& progress, const CancelToken& cancel)
{
    if (auto ok = checkData(session, request); !ok)
        return ok.error();
    auto cost = workspace::sensitivityCost(session, request, progress, cancel);
    if (!cost)
        return cost.error();
    return workspace::sensitivityCostToJson(*cost);
}

Result<nlohmann::json> runExport(QuantSession& session, const ExportRequest& request,
                                 Progress& progress, const CancelToken& cancel)
{
    if (auto ok = checkData(session, request.run); !ok)
        return ok.error();
    auto exported = workspace::exportRun(session, request, progress, cancel);
    if (!exported)
        return exported.error();
    return exported->toJson();
}

Result<nlohmann::json> runVerify(QuantSession& session, const ExportRequest& request,
                                 Progress& progress, const CancelToken& cancel)
{
    if (auto ok = checkData(session, request.run); !ok)
        return ok.error();
    auto verified = workspace::verifyFile(session, request, progress, cancel);
    if (!verified)
        return verified.error();
    nlohmann::json out = verified->toJson();
    out["verified_only"] = true;
    return out;
}

Result<QuantRequest> runOfReport(const nlohmann::json& report)
{
    auto run = workspace::runOfReport(report);
    if (!run)
        return run.error();
    return QuantRequest{std::move(run).value()};
}

} // namespace bitlens::widgets
