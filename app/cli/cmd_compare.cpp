// bitlens-cli compare: one quantize run per scheme, side by side.

#include "cli.h"

#include "analysis/metric_info.h"
#include "analysis/quant_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace bitlens::cli {

using nlohmann::json;

int cmdCompare(const Args& args)
{
    if (args.positional.size() != 1 || !args.has("--schemes"))
        return fail(Error::usage("usage: bitlens-cli compare MODEL --schemes S1,S2,...|all "
                                 "[--calib DATA] [--eval DATA] [--report FILE.json]"));
    // "all": every post-training preset (workspace::compare's default).
    const std::vector<std::string> specs = args.get("--schemes") == "all"
                                               ? std::vector<std::string>()
                                               : splitSchemes(args.get("--schemes"));
    for (const auto& spec : specs)
        if (auto r = workspace::checkScheme(spec); !r)
            return fail(r.error());
    if (auto r = checkOutputs(args); !r)
        return fail(r.error());
    auto ws = openWorkspace(args, args.has("--quiet") || args.has("--json"));
    if (!ws)
        return fail(ws.error());
    auto request = runRequest(args, **ws, false);
    if (!request)
        return fail(request.error());
    // The table grows a row as each run ends; the float row comes with the first.
    bool first = true;
    const auto printRow = [&first](const workspace::Run& run) {
        const analysis::QuantReport& report = *run.details;
        const auto& floatMetric = report.metricFloat;
        if (first) {
            std::printf("%-40s %8s %8s %8s %9s %9s %10s %7s %7s  %s\n", "scheme", "metric",
                        "change", "size", "min SQNR", "mean KLD", "samples/s", "x float", "time s",
                        "why slower than float");
            if (floatMetric)
                std::printf("%-40s %8.4f %8s %8s %9s %9s %10s %7s\n", "float32",
                            floatMetric->value, "", "1.000", "", "", "", "");
            first = false;
        }
        double minSqnr = std::numeric_limits<double>::infinity();
        for (const auto& l : report.layers)
            minSqnr = std::min(minSqnr, l.accumulated.sqnrDb);
        const double q = report.metricQuantized ? report.metricQuantized->value : NAN;
        const auto& t = report.throughput;
        const double speedup = t.floatSamplesPerS > 0 ? t.quantizedSamplesPerS / t.floatSamplesPerS
                                                      : NAN;
        // The change in the metric's own unit (analysis::metricChange): points of top-1 and
        // agreement, percent of perplexity, the cosine's own (4 decimals: changes are small).
        char change[32] = "nan";
        if (floatMetric) {
            const analysis::MetricInfo info = analysis::metricInfo(floatMetric->name);
            if (const auto d = analysis::metricChange(info, q, floatMetric->value))
                std::snprintf(change, sizeof change,
                              info.change == analysis::ChangeUnit::Same ? "%+.4f" : "%+.2f", *d);
        }
        char kld[32] = "";
        if (report.divergence)
            std::snprintf(kld, sizeof kld, "%.5f", report.divergence->meanKld);
        std::printf("%-40s %8.4f %8s %8.3f %9s %9s %10.0f %7.2f %7.1f  %s\n",
                    report.schemeSpec.substr(0, 40).c_str(), q, change,
                    static_cast<double>(report.sizeQuantized) /
                        static_cast<double>(report.sizeFloat),
                    dbText(minSqnr).c_str(), kld, report.throughput.quantizedSamplesPerS, speedup,
                    report.seconds, analysis::throughputWhy(t).c_str());
        std::fflush(stdout);
    };
    auto runs = workspace::compare(**ws, *request, specs, Progress::none(), CancelToken(), printRow);
    if (!runs)
        return fail(runs.error());
    if (args.has("--report"))
        if (auto r = workspace::writeJsonFile(args.get("--report"), *runs); !r)
            return fail(r.error());
    return 0;
}

} // namespace bitlens::cli
