// bitlens-cli sensitivity: quantize each layer alone and rank the layers by metric drop, or
// (--by kld, language models) by the KL divergence of the output.

#include "cli.h"

#include "analysis/metric_info.h"
#include "analysis/metrics.h"
#include "analysis/quant_report.h"
#include "jobs/step_clock.h"
#include "kernels/cpu_features.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace bitlens::cli {

int cmdSensitivity(const Args& args)
{
    if (auto r = requireScheme(args, "sensitivity MODEL --scheme SCHEME [--calib DATA] "
                                     "[--eval DATA] [--by metric|kld] [--layers NAME,...] "
                                     "[--estimate] [--report FILE.json]");
        !r)
        return fail(r.error());
    const std::string by = args.has("--by") ? args.get("--by") : "metric";
    if (by != "metric" && by != "kld")
        return fail(Error::usage("--by must be metric or kld, not '" + by + "'"));
    if (auto r = checkOutputs(args); !r)
        return fail(r.error());
    const std::string spec = args.get("--scheme");
    auto ws = openWorkspace(args, args.has("--quiet") || args.has("--json"));
    if (!ws)
        return fail(ws.error());
    auto request = runRequest(args, **ws, true);
    if (!request)
        return fail(request.error());
    request->sensitivityByKld = by == "kld";
    if (args.has("--layers")) {
        std::stringstream list(args.get("--layers"));
        for (std::string name; std::getline(list, name, ',');)
            if (!name.empty())
                request->sensitivityLayers.push_back(name);
        if (request->sensitivityLayers.empty())
            return fail(Error::usage("--layers needs one or more names, separated by commas"));
    }
    Progress progress = stderrProgress(args.has("--quiet"));
    if (args.has("--estimate")) {
        auto cost = workspace::sensitivityCost(**ws, *request, progress, CancelToken());
        if (!cost)
            return fail(cost.error());
        if (args.has("--json")) {
            std::printf("%s\n", workspace::sensitivityCostToJson(*cost).dump(2).c_str());
            return 0;
        }
        std::printf("sensitivity of %s: %lld of %zu quantized layers, each alone: %lld "
                    "evaluation passes over %lld %s\n"
                    "%.3f s per evaluation unit (measured on the first %lld of them, %s)\n"
                    "about %s in all%s\n",
                    spec.c_str(), static_cast<long long>(cost->layers),
                    cost->layerNames.size(), static_cast<long long>(cost->passes(cost->layers)),
                    static_cast<long long>(cost->evalUnits), cost->unit.c_str(),
                    cost->secondsPerUnit, static_cast<long long>(cost->measuredUnits),
                    kernels::cpuModelName().c_str(), clockText(cost->seconds()).c_str(),
                    cost->needsCalibration ? ", after calibration" : "");
        return 0;
    }
    auto sweep = workspace::sensitivity(**ws, *request, progress, CancelToken());
    if (!sweep)
        return fail(sweep.error());
    const analysis::MetricValue& floatMetric = *sweep->floatMetric;
    std::printf("%s = %.4f in float; each layer quantized alone with %s:\n\n",
                floatMetric.name.c_str(), floatMetric.value, spec.c_str());
    if (request->sensitivityByKld) {
        std::printf("%-20s %10s %11s %11s %9s\n", "layer", "metric", "change", "mean KLD",
                    "SQNR dB");
        for (const auto& row : *sweep->rows)
            std::printf("%-20s %10.5g %+11.4g %11.4g %9s\n", row.layer.c_str(), row.metric,
                        row.drop, row.kld.value_or(NAN), dbText(row.sqnrDb).c_str());
    } else {
        // The change in the metric's own unit, quantized - float: top-1 in points, perplexity
        // in % of float (83.5111 -> 83.5722: +0.073 %, not -6.11 "points").
        const analysis::MetricInfo info = analysis::metricInfo(floatMetric.name);
        const char* unit = info.change == analysis::ChangeUnit::Points    ? "change (points)"
                           : info.change == analysis::ChangeUnit::Percent ? "change (%)"
                                                                          : "change";
        int width = 20;
        for (const auto& row : *sweep->rows)
            width = std::max(width, static_cast<int>(row.layer.size()));
        std::printf("%-*s %8s %16s %9s\n", width, "layer", "metric", unit, "SQNR dB");
        for (const auto& row : *sweep->rows) {
            const double change =
                analysis::metricChange(info, row.metric, floatMetric.value).value_or(NAN);
            std::printf("%-*s %8.4f %+16.*f %9s\n", width, row.layer.c_str(), row.metric,
                        info.change == analysis::ChangeUnit::Percent ? 3 : 2, change,
                        dbText(row.sqnrDb).c_str());
        }
        std::printf("\n(quantized - float; %s is worse)\n",
                    info.lowerIsBetter ? "above 0" : "below 0");
    }
    if (args.has("--report"))
        if (auto r = workspace::writeJsonFile(args.get("--report"), sweep->report); !r)
            return fail(r.error());
    return 0;
}

} // namespace bitlens::cli
