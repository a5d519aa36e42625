#pragma once
// Typed, non-throwing reads from report.json values (a report, a compare file or a sensitivity
// file as `bitlens-cli` writes them). A missing key or a value of the wrong type reads as absent.

#include <nlohmann/json.hpp>

#include <QString>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace bitlens::widgets::reportjson {

/// The member `key` of `obj`, or nullptr when `obj` is not an object or has no such key.
const nlohmann::json* member(const nlohmann::json& obj, std::string_view key);
/// The member `key` when it is an object, else nullptr.
const nlohmann::json* object(const nlohmann::json& obj, std::string_view key);
/// The member `key` when it is an array, else nullptr.
const nlohmann::json* array(const nlohmann::json& obj, std::string_view key);
/// The member `key` when it is a finite number, else nullopt (null, text, NaN all read absent).
std::optional<double> number(const nlohmann::json& obj, std::string_view key);
/// The member `key` when it is a string, else an empty string.
QString text(const nlohmann::json& obj, std::string_view key);
/// `value` as a finite number, else nullopt.
std::optional<double> asNumber(const nlohmann::json& value);
/// The numbers of an array (non-numbers read as 0); empty when `value` is not an array.
std::vector<double> numbers(const nlohmann::json* value);

/// The scheme a report ran, as every view names it (quant::displayName: "w4-int4 · GPTQ g128"):
/// scheme.display_name, else the display name of scheme.spec, else scheme.preset, else
/// scheme.spec, else "?".
QString schemeName(const nlohmann::json& report);
/// A figure's display name (analysis::metricInfo): "top1" -> "Top-1 accuracy", "kld_mean" ->
/// "Mean KL divergence"; unknown names unchanged.
QString metricTitle(const QString& metricName);
/// "1.61 MiB", "413.4 KiB", "812 B" (binary units).
QString bytesLabel(double bytes);
/// A number with `digits` significant digits and no exponent for ordinary magnitudes.
QString numberLabel(double value, int digits = 4);

/// A histogram as report.json writes it: counts.size() + 1 == edges.size() when valid.
struct Histogram {
    std::vector<double> edges; ///< bin edges, ascending, in the histogrammed quantity's units
    std::vector<double> counts; ///< samples per bin
    /// True when there is at least one bin and the sizes agree.
    bool valid() const { return !counts.empty() && edges.size() == counts.size() + 1; }
};
/// The histogram at member `key` of `layer` ({"edges": [...], "counts": [...]}); invalid if absent.
Histogram histogram(const nlohmann::json& layer, std::string_view key);

} // namespace bitlens::widgets::reportjson
