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
/// The "throughput" object of report.json and of `bench --json`: device, ISA level and CPU the
/// figures were measured on, samples per second, the kernel per layer, milliseconds per layer.
nlohmann::json throughputToJson(const analysis::Throughput& throughput);

nlohmann::json sensitivityToJson(const analysis::MetricValue& floatMetric,
                                 const std::vector<analysis::SensitivityRow>& rows);
/// A finite number, or null for inf / NaN (JSON has neither).
nlohmann::json number(double value);

} // namespace bitlens::exporting
