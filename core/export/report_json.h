#pragma once
// report.json: the keys DESIGN.md promises (tests and scripts rely on them), plus more.

#include "analysis/quant_report.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace bitlens::exporting {

/// The report of one quantization run as JSON (DESIGN.md "report.json"). Infinite SQNR (an
/// exact match) is written as null.
nlohmann::json reportToJson(const analysis::QuantReport& report);
/// A sensitivity sweep as JSON: {"metric_float", "layers": [{"layer","metric","drop","sqnr_db"}]}.
nlohmann::json sensitivityToJson(const analysis::MetricValue& floatMetric,
                                 const std::vector<analysis::SensitivityRow>& rows);
/// A finite number, or null for inf / NaN (JSON has neither).
nlohmann::json number(double value);

} // namespace bitlens::exporting
