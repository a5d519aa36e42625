#include "chart_json.h"

#include "analysis/metric_info.h"
#include "workspace/workspace.h"

#include <cmath>

namespace bitlens::widgets::reportjson {

const nlohmann::json* member(const nlohmann::json& obj, std::string_view key)
{
    if (!obj.is_object())
        return nullptr;
    const auto it = obj.find(std::string(key));
    return it == obj.end() ? nullptr : &*it;
}

const nlohmann::json* object(const nlohmann::json& obj, std::string_view key)
{
    const nlohmann::json* value = member(obj, key);
    return value && value->is_object() ? value : nullptr;
}

const nlohmann::json* array(const nlohmann::json& obj, std::string_view key)
{
    const nlohmann::json* value = member(obj, key);
    return value && value->is_array() ? value : nullptr;
}

std::optional<double> asNumber(const nlohmann::json& value)
{
    if (!value.is_number())
        return std::nullopt;
    const double number = value.get<double>();
    if (!std::isfinite(number))
        return std::nullopt;
    return number;
}

std::optional<double> number(const nlohmann::json& obj, std::string_view key)
{
    const nlohmann::json* value = member(obj, key);
    return value ? asNumber(*value) : std::nullopt;
}

QString text(const nlohmann::json& obj, std::string_view key)
{
    const nlohmann::json* value = member(obj, key);
    if (!value || !value->is_string())
        return {};
    return QString::fromStdString(value->get<std::string>());
}

std::vector<double> numbers(const nlohmann::json* value)
{
    std::vector<double> out;
    if (!value || !value->is_array())
        return out;
    out.reserve(value->size());
    for (const nlohmann::json& item : *value)
        out.push_back(asNumber(item).value_or(0.0));
    return out;
}

QString schemeName(const nlohmann::json& report)
{
    if (const nlohmann::json* scheme = object(report, "scheme")) {
        if (const std::string shown = workspace::schemeDisplayName(report); !shown.empty())
            return QString::fromStdString(shown);
        QString name = text(*scheme, "preset");
        if (name.isEmpty())
            name = text(*scheme, "spec");
        if (!name.isEmpty())
            return name;
    }
    return QStringLiteral("?");
}

QString metricTitle(const QString& metricName)
{
    return QString::fromStdString(analysis::metricInfo(metricName.toStdString()).title);
}

QString bytesLabel(double bytes)
{
    const double kib = 1024.0;
    if (bytes < kib)
        return QStringLiteral("%1 B").arg(bytes, 0, 'f', 0);
    if (bytes < kib * kib)
        return QStringLiteral("%1 KiB").arg(bytes / kib, 0, 'f', 1);
    if (bytes < kib * kib * kib)
        return QStringLiteral("%1 MiB").arg(bytes / (kib * kib), 0, 'f', 2);
    return QStringLiteral("%1 GiB").arg(bytes / (kib * kib * kib), 0, 'f', 2);
}

QString numberLabel(double value, int digits)
{
    return QString::number(value, 'g', digits);
}

Histogram histogram(const nlohmann::json& layer, std::string_view key)
{
    Histogram out;
    if (const nlohmann::json* hist = object(layer, key)) {
        out.edges = numbers(array(*hist, "edges"));
        out.counts = numbers(array(*hist, "counts"));
    }
    if (!out.valid())
        return {};
    return out;
}

} // namespace bitlens::widgets::reportjson
