#pragma once
// Per-layer latency: float milliseconds next to quantized milliseconds for each quantized layer,
// from report.json throughput.layers_ms, with the kernel that ran in the tooltip.

#include "chart_base.h"

#include <nlohmann/json.hpp>

#include <QStringList>

#include <vector>

QT_BEGIN_NAMESPACE
class QBarSeries;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Bar chart of throughput.layers_ms (median ms per batch, float vs quantized).
class LayerLatencyChart : public ChartBase {
    Q_OBJECT

public:
    /// Creates an empty chart ("No data").
    explicit LayerLatencyChart(QWidget* parent = nullptr);

    /// Shows the per-layer times of a report; "No data" without them (CUDA runs, old reports).
    /// Never throws.
    void setReport(const nlohmann::json& report);
    /// Layers drawn, in graph order.
    QStringList layerNames() const { return m_names; }
    /// The bar series (sets: float, quantized); nullptr without data.
    QBarSeries* barSeries() const { return m_series; }

private:
    void build(const nlohmann::json& report);
    void onHovered(bool status, int index);

    QStringList m_names;
    QStringList m_kernels;
    std::vector<double> m_float;
    std::vector<double> m_quantized;
    QBarSeries* m_series = nullptr;
};

} // namespace bitlens::widgets
