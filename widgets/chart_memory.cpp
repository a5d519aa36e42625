#include "chart_memory.h"

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

MemoryChart::MemoryChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("Memory per layer"));
}

void MemoryChart::setReport(const nlohmann::json& report)
{
    try {
        build(report);
    } catch (const std::exception& error) {
        m_series = nullptr;
        showMessage(tr("No data: malformed report (%1)").arg(QString::fromUtf8(error.what())));
    }
}

void MemoryChart::build(const nlohmann::json& report)
{
    m_names.clear();
    m_float.clear();
    m_quantized.clear();
    m_series = nullptr;
    setChartTitle(tr("Memory per layer"));
    if (const nlohmann::json* layers = rj::array(report, "layers")) {
        for (const nlohmann::json& layer : *layers) {
            const QString name = rj::text(layer, "name");
            const auto bytesFloat = rj::number(layer, "bytes_float");
            const auto bytesQuantized = rj::number(layer, "bytes_quantized");
            if (name.isEmpty() || !bytesFloat || !bytesQuantized)
                continue;
            m_names << name;
            m_float.push_back(*bytesFloat);
            m_quantized.push_back(*bytesQuantized);
        }
    }
    if (m_names.isEmpty()) {
        showMessage(report.is_object() && report.contains("layers")
                        ? tr("No data: the report has no per-layer byte counts")
                        : tr("No data yet: run a scheme (Run, Ctrl+R) to see each layer's "
                             "float32 and quantized bytes"));
        return;
    }
    clearChart();
    markHasData();

    QString title = tr("Memory per layer — %1").arg(rj::schemeName(report));
    if (const nlohmann::json* size = rj::object(report, "size_bytes")) {
        const auto total = rj::number(*size, "float");
        const auto quantized = rj::number(*size, "quantized");
        if (total && quantized && *total > 0)
            title += tr(" — model %1 -> %2 (%3)")
                         .arg(rj::bytesLabel(*total), rj::bytesLabel(*quantized))
                         .arg(*quantized / *total, 0, 'f', 3);
    }
    std::vector<double> all = m_float;
    all.insert(all.end(), m_quantized.begin(), m_quantized.end());
    const bool log = hasOutlier(m_float) || hasOutlier(m_quantized);
    if (log) {
        const auto top = std::max_element(m_float.begin(), m_float.end()) - m_float.begin();
        title += tr(" — log scale: %1 is %2x the median layer")
                     .arg(m_names[top])
                     .arg(outlierRatio(m_float), 0, 'f', 0);
    }
    setChartTitle(title);

    const double largest = std::max(*std::max_element(m_float.begin(), m_float.end()),
                                    *std::max_element(m_quantized.begin(), m_quantized.end()));
    const bool mib = largest >= 10.0 * 1024 * 1024;
    m_unit = mib ? QStringLiteral("MiB") : QStringLiteral("KiB");
    const double divisor = mib ? 1024.0 * 1024.0 : 1024.0;

    auto* floatSet = new QBarSet(tr("Float32"));
    auto* quantizedSet = new QBarSet(tr("Quantized (codes + scales + zero points)"));
    floatSet->setColor(chartColor(6));
    quantizedSet->setColor(chartColor(2));
    for (QBarSet* set : {floatSet, quantizedSet})
        set->setLabelColor(QColor(0x33, 0x33, 0x33));
    for (std::size_t i = 0; i < m_float.size(); ++i) {
        *floatSet << m_float[i] / divisor;
        *quantizedSet << m_quantized[i] / divisor;
    }
    QValueAxis* axisY = nullptr;
    QLogValueAxis* logAxis = nullptr;
    m_series = addLayerBars(m_names, {floatSet, quantizedSet}, tr("Bytes (%1)").arg(m_unit),
                            &axisY, log ? &logAxis : nullptr);
    if (logAxis) {
        double smallest = largest;
        for (const double v : all)
            if (v > 0)
                smallest = std::min(smallest, v);
        logAxis->setRange(std::pow(10.0, std::floor(std::log10(smallest / divisor))),
                          largest / divisor * 1.6);
    } else {
        setRoundTicks(axisY, 0.0, largest / divisor * 1.1, 6);
    }
    // Value labels help while they fit; with many layers the tooltips carry the numbers.
    if (m_names.size() <= 12) {
        m_series->setLabelsVisible(true);
        m_series->setLabelsPosition(QAbstractBarSeries::LabelsOutsideEnd);
        m_series->setLabelsPrecision(4);
        m_series->setLabelsFormat(QStringLiteral("@value"));
    }

    for (QBarSet* set : {floatSet, quantizedSet})
        connect(set, &QBarSet::hovered, this, &MemoryChart::onHovered);
}

void MemoryChart::onHovered(bool status, int index)
{
    if (!status || index < 0 || index >= m_names.size()) {
        hideToolTip();
        return;
    }
    const auto i = static_cast<std::size_t>(index);
    const QString ratio = m_float[i] > 0 ? QString::number(m_quantized[i] / m_float[i], 'f', 3)
                                         : QStringLiteral("-");
    showToolTip(tr("<b>%1</b><br>float %2 (%3 bytes)<br>quantized %4 (%5 bytes)<br>"
                   "quantized / float %6")
                    .arg(m_names[index].toHtmlEscaped(), rj::bytesLabel(m_float[i]))
                    .arg(m_float[i], 0, 'f', 0)
                    .arg(rj::bytesLabel(m_quantized[i]))
                    .arg(m_quantized[i], 0, 'f', 0)
                    .arg(ratio));
}

} // namespace bitlens::widgets
