#include "chart_throughput.h"

#include "chart_json.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QFontMetricsF>
#include <QGraphicsSimpleTextItem>
#include <QLegend>
#include <QValueAxis>

#include <map>
#include <set>
#include <string>

namespace bitlens::widgets {

namespace rj = reportjson;

bool isRealKernel(const QString& kernel)
{
    return !kernel.isEmpty() && !kernel.startsWith(QLatin1String("simulated"))
           && kernel != QLatin1String("float") && !kernel.startsWith(QLatin1String("float "));
}

KernelCount kernelCount(const nlohmann::json& report)
{
    KernelCount count;
    if (!report.is_object())
        return count;
    std::set<std::string> keptFloat;
    const nlohmann::json* layers = nullptr;
    if (auto it = report.find("layers"); it != report.end() && it->is_array()) {
        layers = &*it;
        for (const nlohmann::json& layer : *layers)
            if (layer.is_object() && layer.value("weight_type", std::string()) == "float32")
                keptFloat.insert(layer.value("name", std::string()));
    }
    if (const nlohmann::json* throughput = rj::object(report, "throughput"))
        if (const nlohmann::json* kernels = rj::object(*throughput, "kernels")) {
            for (auto it = kernels->begin(); it != kernels->end(); ++it) {
                ++count.layers;
                if (it->is_string() && isRealKernel(QString::fromStdString(it->get<std::string>()))
                    && keptFloat.count(it.key()) == 0)
                    ++count.real;
            }
            return count;
        }
    if (layers)
        for (const nlohmann::json& layer : *layers) {
            if (!layer.is_object())
                continue;
            ++count.layers;
            if (!layer.value("simulated", true) &&
                layer.value("weight_type", std::string()) != "float32")
                ++count.real;
        }
    return count;
}

ThroughputChart::ThroughputChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("Throughput"));
}

void ThroughputChart::setReport(const nlohmann::json& report)
{
    try {
        build(report);
    } catch (const std::exception& error) {
        m_series = nullptr;
        m_kernelText = nullptr;
        showMessage(tr("No data: malformed report (%1)").arg(QString::fromUtf8(error.what())));
    }
    layoutOverlays();
}

void ThroughputChart::build(const nlohmann::json& report)
{
    m_series = nullptr;
    m_kernelText = nullptr;
    m_kernelLines.clear();
    m_realKernels = 0;
    m_kernelLayers = 0;
    chart()->setMargins(QMargins(6, 6, 6, 6));
    setChartTitle(tr("Throughput"));
    const nlohmann::json* throughput = rj::object(report, "throughput");
    const auto floatRate = throughput ? rj::number(*throughput, "float_samples_per_s")
                                      : std::optional<double>();
    const auto quantizedRate = throughput ? rj::number(*throughput, "quantized_samples_per_s")
                                          : std::optional<double>();
    if (!floatRate || !quantizedRate) {
        showMessage(report.is_object() && report.contains("layers")
                        ? tr("No data: the report has no throughput measurement")
                        : tr("No data yet: run a scheme (Run, Ctrl+R) to measure float and "
                             "quantized samples per second side by side"));
        return;
    }
    clearChart();
    markHasData();
    m_floatRate = *floatRate;
    m_quantizedRate = *quantizedRate;

    const QString device = rj::text(*throughput, "device");
    const auto batch = rj::number(*throughput, "batch");
    // A language model is timed on windows of text (one per batch: "batch 1"), and a window
    // holds many tokens: count windows, not samples. Its report has next-token figures.
    const nlohmann::json* metric = rj::object(report, "metric");
    const bool windows = rj::object(report, "kl_divergence") != nullptr ||
                         (metric && rj::text(*metric, "name") == QLatin1String("perplexity"));
    m_unit = windows ? tr("windows/s") : tr("samples/s");
    const QString per = windows ? tr("window") : tr("sample");
    // Two lines: in half of the tab at 1280x800 one line was cut to "batch 64 quantized ...".
    QString title = tr("Throughput — %1").arg(rj::schemeName(report).toHtmlEscaped());
    if (m_floatRate > 0)
        title += tr(": quantized / float %1×").arg(m_quantizedRate / m_floatRate, 0, 'f', 2);
    QString where = tr("on %1").arg(device.isEmpty() ? tr("unknown device") : device);
    if (windows)
        where += batch && *batch != 1 ? tr(", %1 windows of text per batch").arg(*batch, 0, 'f', 0)
                                      : tr(", one window of text per batch");
    else if (batch)
        where += tr(", batch %1").arg(*batch, 0, 'f', 0);
    setChartTitle(title + QStringLiteral("<br>") + where.toHtmlEscaped());

    auto* floatSet = new QBarSet(tr("Float32"));
    auto* quantizedSet = new QBarSet(tr("Quantized (%1)").arg(rj::schemeName(report)));
    floatSet->setColor(chartColor(6));
    quantizedSet->setColor(chartColor(2));
    for (QBarSet* set : {floatSet, quantizedSet})
        set->setLabelColor(QColor(0x33, 0x33, 0x33));
    *floatSet << m_floatRate;
    *quantizedSet << m_quantizedRate;
    m_series = new QBarSeries;
    m_series->append(floatSet);
    m_series->append(quantizedSet);
    m_series->setBarWidth(0.45);
    m_series->setLabelsVisible(true);
    m_series->setLabelsPosition(QAbstractBarSeries::LabelsOutsideEnd);
    m_series->setLabelsPrecision(5);
    m_series->setLabelsFormat(QStringLiteral("@value ") + m_unit);
    chart()->addSeries(m_series);

    auto* axisX = new QBarCategoryAxis;
    // The batch is the axis title: as the category label Qt cut it to "One batch of 64 sa...".
    axisX->append(rj::schemeName(report));
    styleAxis(axisX, windows ? (batch && *batch != 1
                                    ? tr("One batch of %1 windows of text").arg(*batch, 0, 'f', 0)
                                    : tr("One window of text"))
                             : batch ? tr("One batch of %1 samples").arg(*batch, 0, 'f', 0)
                                     : tr("One batch"));
    chart()->addAxis(axisX, Qt::AlignBottom);
    m_series->attachAxis(axisX);
    QValueAxis* axisY =
        addValueAxis(windows ? tr("Windows per second") : tr("Samples per second"), Qt::AlignLeft);
    setRoundTicks(axisY, 0.0, std::max(m_floatRate, m_quantizedRate) * 1.12, 6);
    m_series->attachAxis(axisY);

    connect(floatSet, &QBarSet::hovered, this, [this, per](bool status, int) {
        status ? showToolTip(tr("Float32: %1 %2 (%3 ms per %4)")
                                 .arg(m_floatRate, 0, 'f', 1)
                                 .arg(m_unit)
                                 .arg(1000.0 / m_floatRate, 0, 'f', 4)
                                 .arg(per))
               : hideToolTip();
    });
    connect(quantizedSet, &QBarSet::hovered, this, [this, per](bool status, int) {
        status ? showToolTip(tr("Quantized: %1 %2 (%3 ms per %4)")
                                 .arg(m_quantizedRate, 0, 'f', 1)
                                 .arg(m_unit)
                                 .arg(1000.0 / m_quantizedRate, 0, 'f', 4)
                                 .arg(per))
               : hideToolTip();
    });

    // Kernels, grouped: "at::_int_mm (int8 x int8 -> int32): fc1, logits". Layer order is kept
    // within a group; groups list real kernels first.
    std::vector<std::pair<QString, QStringList>> groups;
    if (const nlohmann::json* kernels = rj::object(*throughput, "kernels")) {
        for (auto it = kernels->begin(); it != kernels->end(); ++it) {
            const QString kernel = it->is_string() ? QString::fromStdString(it->get<std::string>())
                                                   : tr("unknown");
            const QString layer = QString::fromStdString(it.key());
            auto group = std::find_if(groups.begin(), groups.end(),
                                      [&](const auto& g) { return g.first == kernel; });
            if (group == groups.end())
                groups.push_back({kernel, {layer}});
            else
                group->second << layer;
        }
    }
    std::stable_partition(groups.begin(), groups.end(),
                          [](const auto& g) { return isRealKernel(g.first); });
    const KernelCount count = kernelCount(report);
    m_realKernels = count.real;
    m_kernelLayers = throughput && rj::object(*throughput, "kernels") ? count.layers : 0;
    if (m_kernelLayers > 0) {
        m_kernelLines << tr("Kernels: %1 of %2 layers on a real low-bit kernel")
                             .arg(m_realKernels)
                             .arg(m_kernelLayers);
        for (const auto& [kernel, layers] : groups)
            m_kernelLines << QStringLiteral("  %1 %2:  %3")
                                 .arg(isRealKernel(kernel) ? QStringLiteral("■")
                                                           : QStringLiteral("□"),
                                      kernel, layers.join(QStringLiteral(", ")));
    } else {
        m_kernelLines << tr("Kernels: not recorded in this report");
    }
    m_kernelText = addOverlayText(m_kernelLines.join(QLatin1Char('\n')));
    const QFontMetricsF metrics(m_kernelText->font());
    const int textHeight = static_cast<int>(metrics.lineSpacing() * m_kernelLines.size()) + 10;
    chart()->setMargins(QMargins(6, 6, 6, 6 + textHeight));
}

void ThroughputChart::layoutOverlays()
{
    if (!m_kernelText)
        return;
    const QRectF box = m_kernelText->boundingRect();
    const QRectF area = chart()->rect();
    m_kernelText->setPos(area.left() + 16, area.bottom() - box.height() - 8);
}

} // namespace bitlens::widgets
