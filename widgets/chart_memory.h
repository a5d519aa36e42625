#pragma once
// Per-layer memory: float bytes next to quantized bytes, with the model total in the title.

#include "chart_base.h"

#include <nlohmann/json.hpp>

#include <QStringList>

#include <vector>

QT_BEGIN_NAMESPACE
class QBarSeries;
class QBarSet;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Bar chart of report.json layers[].bytes_float / bytes_quantized and size_bytes.
class MemoryChart : public ChartBase {
    Q_OBJECT

public:
    /// Creates an empty chart ("No data").
    explicit MemoryChart(QWidget* parent = nullptr);

    /// Shows the layers of a report; "No data" when none has byte counts. Never throws.
    void setReport(const nlohmann::json& report);
    /// Layer names in graph order.
    QStringList layerNames() const { return m_names; }
    /// The bar series (sets: float, quantized); nullptr without data.
    QBarSeries* barSeries() const { return m_series; }
    /// The unit the bars are drawn in: "KiB" or "MiB" (chosen by the largest layer).
    QString unit() const { return m_unit; }

private:
    void build(const nlohmann::json& report);
    void onHovered(bool status, int index);

    QStringList m_names;
    std::vector<double> m_float;
    std::vector<double> m_quantized;
    QBarSeries* m_series = nullptr;
    QString m_unit;
};

} // namespace bitlens::widgets
