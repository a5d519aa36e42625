#include "chart_latency.h"

#include "chart_json.h"
#include "layer_names.h"

#include <QLogValueAxis>

#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

namespace bitlens::widgets {

namespace rj = reportjson;

LayerLatencyChart::LayerLatencyChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("Latency per layer"));
}

void LayerLatencyChart::setReport(const nlohmann::json& report)
{
    try {
        build(report);
    } catch (const std::exception& error) {
        m_series = nullptr;
        showMessage(tr("No data: malformed report (%1)").arg(QString::fromUtf8(error.what())));
    }
}

void LayerLatencyChart::build(const nlohmann::json& report)
{
    m_names.clear();
    m_kernels.clear();
    m_float.clear();
    m_quantized.clear();
    m_series = nullptr;
    setChartTitle(tr("Latency per layer"));
    const nlohmann::json* throughput = rj::object(report, "throughput");
    const nlohmann::json* times = throughput ? rj::object(*throughput, "layers_ms") : nullptr;
    const nlohmann::json* kernels = throughput ? rj::object(*throughput, "kernels") : nullptr;
    const nlohmann::json* layers = rj::array(report, "layers");
    if (times && layers) {
        for (const nlohmann::json& layer : *layers) {  // graph order, not the map's order
            const QString name = rj::text(layer, "name");
            const nlohmann::json* t = rj::object(*times, name.toStdString());
            const auto f = t ? rj::number(*t, "float") : std::nullopt;
            const auto q = t ? rj::number(*t, "quantized") : std::nullopt;
            if (!f || !q)
                continue;
            m_names << name;
            m_float.push_back(*f);
            m_quantized.push_back(*q);
            m_kernels << (kernels ? rj::text(*kernels, name.toStdString()) : QString());
        }
    }
    if (m_names.isEmpty()) {
        showMessage(report.is_object() && report.contains("layers")
                        ? tr("No data: the report has no per-layer times (measured on CPU only)")
                        : tr("No data yet: run a scheme (Run, Ctrl+R) to time each layer in the "
                             "float and the quantized model"));
        return;
    }
    clearChart();
    markHasData();
    QString device;
    if (throughput)
        device = rj::text(*throughput, "device");
    // Short: the chart shares the Throughput tab with the whole-model chart.
    const bool log = hasOutlier(m_float) || hasOutlier(m_quantized);
    setChartTitle(log ? tr("Latency per layer — %1 — log scale (slowest %2x median)")
                            .arg(rj::schemeName(report))
                            .arg(std::max(outlierRatio(m_float), outlierRatio(m_quantized)), 0,
                                 'f', 0)
                      : tr("Latency per layer — %1").arg(rj::schemeName(report)));
    chart()->setToolTip(tr("Median of 5 batches on %1").arg(device));

    auto* floatSet = new QBarSet(tr("Float32"));
    auto* quantizedSet = new QBarSet(tr("Quantized (kernel in tooltip)"));
    floatSet->setColor(chartColor(6));
    quantizedSet->setColor(chartColor(2));
    for (std::size_t i = 0; i < m_float.size(); ++i) {
        *floatSet << m_float[i];
        *quantizedSet << m_quantized[i];
    }
    QValueAxis* axisY = nullptr;
    QLogValueAxis* logAxis = nullptr;
    m_series = addLayerBars(m_names, {floatSet, quantizedSet}, tr("Milliseconds per batch"),
                            &axisY, log ? &logAxis : nullptr);
    const double largest = std::max(*std::max_element(m_float.begin(), m_float.end()),
                                    *std::max_element(m_quantized.begin(), m_quantized.end()));
    if (logAxis) {
        double smallest = largest;
        for (const auto* values : {&m_float, &m_quantized})
            for (const double v : *values)
                if (v > 0)
                    smallest = std::min(smallest, v);
        logAxis->setRange(std::pow(10.0, std::floor(std::log10(smallest))),
                          largest * 1.6);
    } else {
        setRoundTicks(axisY, 0.0, std::max(largest, 1e-6) * 1.1, 6);
    }
    for (QBarSet* set : {floatSet, quantizedSet})
        connect(set, &QBarSet::hovered, this, &LayerLatencyChart::onHovered);
}

void LayerLatencyChart::onHovered(bool status, int index)
{
    if (!status || index < 0 || index >= m_names.size()) {
        hideToolTip();
        return;
    }
    const auto i = static_cast<std::size_t>(index);
    showToolTip(tr("<b>%1</b><br>float %2 ms<br>quantized %3 ms (speed %4x float)<br>%5")
                    .arg(m_names[index].toHtmlEscaped())
                    .arg(m_float[i], 0, 'f', 3)
                    .arg(m_quantized[i], 0, 'f', 3)
                    .arg(m_quantized[i] > 0 ? m_float[i] / m_quantized[i] : 0.0, 0, 'f', 2)
                    .arg(m_kernels[index].toHtmlEscaped()));
}

} // namespace bitlens::widgets
