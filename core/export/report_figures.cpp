#include "export/report_figures.h"

#include "analysis/metric_info.h"

#include <cmath>
#include <initializer_list>

namespace bitlens::exporting {

namespace {

/// The value at `path` below `j` when every step is an object member and the end is a finite
/// number.
std::optional<double> numberAt(const nlohmann::json& j, std::initializer_list<const char*> path)
{
    const nlohmann::json* at = &j;
    for (const char* key : path) {
        if (!at->is_object())
            return std::nullopt;
        const auto it = at->find(key);
        if (it == at->end())
            return std::nullopt;
        at = &*it;
    }
    if (!at->is_number())
        return std::nullopt;
    const double value = at->get<double>();
    return std::isfinite(value) ? std::optional<double>(value) : std::nullopt;
}

} // namespace

std::string_view reportMetricName(const nlohmann::json& report)
{
    if (!report.is_object())
        return {};
    const auto metric = report.find("metric");
    if (metric == report.end() || !metric->is_object())
        return {};
    const auto name = metric->find("name");
    if (name == metric->end() || !name->is_string())
        return {};
    return name->get_ref<const std::string&>();
}

std::optional<double> reportFigure(const nlohmann::json& report, std::string_view name)
{
    if (name == "kld_mean")
        return numberAt(report, {"kl_divergence", "kld", "mean"});
    if (name == "kld_p99")
        return numberAt(report, {"kl_divergence", "kld", "p99"});
    if (name == "same_top")
        return numberAt(report, {"kl_divergence", "same_top", "fraction"});
    if (name.empty() || analysis::metricInfo(name).name ==
                            analysis::metricInfo(reportMetricName(report)).name)
        return numberAt(report, {"metric", "quantized"});
    return std::nullopt;
}

std::optional<double> reportFloatFigure(const nlohmann::json& report, std::string_view name)
{
    const analysis::MetricInfo info = analysis::metricInfo(name);
    if (info.floatValue)
        return reportFigure(report, name) ? info.floatValue : std::nullopt;
    if (name.empty() || info.name == analysis::metricInfo(reportMetricName(report)).name)
        return numberAt(report, {"metric", "float"});
    return std::nullopt;
}

bool hasDivergence(const nlohmann::json& report)
{
    return reportFigure(report, "kld_mean").has_value();
}

} // namespace bitlens::exporting
