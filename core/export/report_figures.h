#pragma once
// Where each figure of merit (analysis/metric_info.h) lives in report.json, read back: the
// compare table, the Pareto chart and the tests read a run's figures through here, beside the
// writer (report_json.cpp), not by spelling the keys again. Torch-free.

#include <nlohmann/json.hpp>

#include <optional>
#include <string_view>

namespace bitlens::exporting {

/// The quantized run's value of figure `name` in a report.json: metric.quantized for the task
/// metric (when `name` is the report's metric.name, or "" for it), kl_divergence.kld.mean for
/// "kld_mean", kl_divergence.kld.p99 for "kld_p99", kl_divergence.same_top.fraction for
/// "same_top". nullopt when absent, not a finite number, or `report` is no object. Never throws.
std::optional<double> reportFigure(const nlohmann::json& report, std::string_view name);

/// The float model's value of figure `name`: metric.float for the task metric, the value by
/// definition for the divergence figures (analysis::MetricInfo::floatValue). Never throws.
std::optional<double> reportFloatFigure(const nlohmann::json& report, std::string_view name);

/// The task metric's name of a report.json (metric.name; "" when absent).
std::string_view reportMetricName(const nlohmann::json& report);

/// True when the report carries a language model's KL divergence figures.
bool hasDivergence(const nlohmann::json& report);

} // namespace bitlens::exporting
