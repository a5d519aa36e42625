#include "chart_sensitivity.h"

#include "chart_json.h"
#include "layer_names.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QFontMetrics>
#include <QMouseEvent>
#include <QWheelEvent>
#include <QHorizontalStackedBarSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace bitlens::widgets {

namespace rj = reportjson;

SensitivityChart::SensitivityChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("Sensitivity per layer"));
}

void SensitivityChart::setSensitivity(const nlohmann::json& sensitivity)
{
    try {
        build(sensitivity);
    } catch (const std::exception& error) {
        m_series = nullptr;
        showMessage(tr("No data: malformed sensitivity file (%1)")
                        .arg(QString::fromUtf8(error.what())));
    }
}

void SensitivityChart::build(const nlohmann::json& sensitivity)
{
    m_names.clear();
    m_labels.clear();
    m_axisY = nullptr;
    m_changes.clear();
    m_metrics.clear();
    m_worse.clear();
    m_sqnr.clear();
    m_series = nullptr;
    setChartTitle(tr("Sensitivity per layer"));
    struct Entry {
        QString name;
        double drop;
        double metric;
        std::optional<double> sqnr;
    };
    std::vector<Entry> entries;
    m_byKld = rj::text(sensitivity, "rank") == QLatin1String("kld");
    QString metricName;
    std::optional<double> floatMetric;
    if (const nlohmann::json* metric = rj::object(sensitivity, "metric")) {
        metricName = rj::text(*metric, "name");
        floatMetric = rj::number(*metric, "float");
    }
    m_info = analysis::metricInfo(metricName.toStdString());
    if (const nlohmann::json* layers = rj::array(sensitivity, "layers"))
        for (const nlohmann::json& layer : *layers) {
            const QString name = rj::text(layer, "layer");
            // Ranked by KL divergence, the bar is the KLD (always >= 0, larger is worse).
            const auto drop = rj::number(layer, m_byKld ? "kld" : "drop");
            if (name.isEmpty() || !drop)
                continue;
            entries.push_back({name, *drop, rj::number(layer, "metric").value_or(NAN),
                               rj::number(layer, "sqnr_db")});
        }
    if (entries.empty()) {
        showMessage(sensitivity.is_object() && sensitivity.contains("layers")
                        ? tr("No data: the sensitivity file has no layers")
                        : tr("No data yet: press “Run sensitivity” to quantize each layer alone "
                             "and rank the layers by how much the metric drops"));
        return;
    }
    clearChart();
    markHasData();
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& a, const Entry& b) { return a.drop > b.drop; });
    // "drop" is how much worse than float, in the metric's own sign: float - metric when
    // higher is better, metric - float when lower is. Without a "metric" the layer's value is
    // rebuilt from it; without the float value it is rebuilt from a layer that has both.
    if (!floatMetric)
        for (const Entry& e : entries)
            if (std::isfinite(e.metric)) {
                floatMetric = m_info.lowerIsBetter ? e.metric - e.drop : e.metric + e.drop;
                break;
            }
    m_floatMetric = floatMetric.value_or(NAN);
    for (const Entry& e : entries) {
        m_names << e.name;
        double value = e.metric;
        if (!std::isfinite(value) && floatMetric)
            value = m_info.lowerIsBetter ? *floatMetric + e.drop : *floatMetric - e.drop;
        // A change in the metric's own unit: top-1 in points (0.9240 -> 0.9145: -0.95),
        // perplexity in percent of float (83.5111 -> 83.5722: +0.073).
        std::optional<double> change;
        if (!m_byKld && floatMetric && std::isfinite(value))
            change = analysis::metricChange(m_info, value, *floatMetric);
        m_changes.push_back(m_byKld ? e.drop : change.value_or(0.0));
        m_worse.push_back(m_byKld || e.drop > 0.0);
        m_metrics.push_back(value);
        m_sqnr.push_back(e.sqnr);
    }

    // "0.up" for layer.0.mlp.up_proj: a full name is too long for the label column and Qt
    // drew it as "…"; the full name shows on hover.
    m_labels = shortLayerLabels(m_names);
    m_metricTitle = rj::metricTitle(metricName);
    QString title = (m_byKld ? tr("Output KL divergence per layer, %1 on one layer at a time")
                             : tr("Sensitivity to %1, one layer quantized at a time"))
                        .arg(rj::schemeName(sensitivity));
    if (floatMetric)
        title += tr(" — float %1 %2").arg(m_metricTitle.toLower()).arg(*floatMetric, 0, 'f', 4);
    setChartTitle(title);

    // Category 0 is drawn at the bottom: reverse so that the most sensitive layer is on top.
    // Two stacked sets (one value each per row) colour worse and better rows differently; a KL
    // divergence is never better than float, so it has the one set.
    auto* worse = new QBarSet(m_byKld ? tr("KL divergence from the float model (keep the top "
                                           "layers in higher precision?)")
                                        : tr("Worse than float (keep in higher precision?)"));
    auto* better = m_byKld ? nullptr : new QBarSet(tr("Same or better than float"));
    worse->setColor(chartColor(3));
    if (better)
        better->setColor(chartColor(2));
    QStringList categories;
    for (int i = static_cast<int>(m_names.size()) - 1; i >= 0; --i) {
        const double change = m_changes[static_cast<std::size_t>(i)];
        if (m_byKld) {
            *worse << change;
        } else {
            const bool isWorse = m_worse[static_cast<std::size_t>(i)];
            *worse << (isWorse ? change : 0.0);
            *better << (isWorse ? 0.0 : change);
        }
        categories << m_labels[i];
    }
    m_series = new QHorizontalStackedBarSeries;
    m_series->append(worse);
    if (better)
        m_series->append(better);
    m_series->setBarWidth(0.6);
    chart()->addSeries(m_series);

    auto* axisY = new QBarCategoryAxis;
    axisY->append(categories);
    styleAxis(axisY, tr("Layer (most sensitive on top)"));
    axisY->setTruncateLabels(false);
    chart()->addAxis(axisY, Qt::AlignLeft);
    m_series->attachAxis(axisY);
    m_axisY = axisY;
    m_firstRow = 0;
    m_visibleRows = static_cast<int>(m_names.size());
    const auto [lo, hi] = std::minmax_element(m_changes.begin(), m_changes.end());
    // KL divergences are small (often < 0.01 nats): no floor of 0.1 on their span.
    // A perplexity change in % is often < 0.1: only points (top-1) get a floor of 0.1.
    const double span = m_byKld || m_info.change != analysis::ChangeUnit::Points
                            ? std::max(1e-9, std::max(0.0, *hi) - std::min(0.0, *lo))
                            : std::max(0.1, *hi - *lo);
    QValueAxis* axisX = addValueAxis(m_byKld ? tr("Mean KL divergence of the next-token "
                                                  "distribution vs float (nats)")
                                             : changeAxisTitle(),
                                     Qt::AlignBottom);
    setRoundTicks(axisX, std::min(0.0, *lo) - 0.08 * span, std::max(0.0, *hi) + 0.08 * span, 8);
    m_series->attachAxis(axisX);
    updateRowWindow();

    const int count = static_cast<int>(m_names.size());
    for (QBarSet* set : m_series->barSets()) {
        connect(set, &QBarSet::clicked, this,
                [this, count](int index) { onBarClicked(count - 1 - index); });
        connect(set, &QBarSet::hovered, this, [this, count](bool status, int index) {
            const int rank = count - 1 - index;
            if (!status || rank < 0 || rank >= count) {
                hideToolTip();
                return;
            }
            const auto i = static_cast<std::size_t>(rank);
            QString text =
                m_byKld ? tr("<b>%1</b> (rank %2 of %3)<br>mean KL divergence %4 nats")
                              .arg(m_names[rank].toHtmlEscaped())
                              .arg(rank + 1)
                              .arg(count)
                              .arg(m_changes[i], 0, 'g', 4)
                        : tr("<b>%1</b> (rank %2 of %3)<br>%4 change %5")
                              .arg(m_names[rank].toHtmlEscaped())
                              .arg(rank + 1)
                              .arg(count)
                              .arg(m_metricTitle, changeText(m_changes[i]));
            if (std::isfinite(m_metrics[i]))
                text += tr("<br>%1 with only this layer quantized: %2")
                            .arg(m_metricTitle)
                            .arg(m_metrics[i], 0, 'f', 4);
            if (m_sqnr[i])
                text += tr("<br>SQNR %1 dB").arg(*m_sqnr[i], 0, 'f', 2);
            showToolTip(text);
        });
    }
}

QString SensitivityChart::changeAxisTitle() const
{
    // Every change is quantized - float: where lower is better, above 0 is worse.
    const QString metric = m_metricTitle.toLower();
    const QString worse = m_info.lowerIsBetter ? tr("above 0 is worse") : tr("below 0 is worse");
    switch (m_info.change) {
    case analysis::ChangeUnit::Points:
        return tr("Change in %1 (points; %2)").arg(metric, worse);
    case analysis::ChangeUnit::Percent:
        return std::isfinite(m_floatMetric)
                   ? tr("Change in %1 (% of float %2; %3)")
                         .arg(metric)
                         .arg(m_floatMetric, 0, 'f', 2)
                         .arg(worse)
                   : tr("Change in %1 (% of float; %2)").arg(metric, worse);
    case analysis::ChangeUnit::Same: break;
    }
    return tr("Change in %1 (%2)").arg(metric, worse);
}

QString SensitivityChart::changeText(double change) const
{
    switch (m_info.change) {
    case analysis::ChangeUnit::Points: return tr("%1 points").arg(change, 0, 'f', 2);
    case analysis::ChangeUnit::Percent:
        return tr("%1 % of float").arg(QString::number(change, 'f', 3).prepend(change >= 0 ? "+" : ""));
    case analysis::ChangeUnit::Same: break;
    }
    return QString::number(change, 'g', 4);
}

int SensitivityChart::rowPixels() const
{
    // A 9 pt label's line plus a little air: rows closer than that overlap and Qt drops
    // every other label.
    return m_axisY ? QFontMetrics(m_axisY->labelsFont()).height() + 2 : 16;
}

void SensitivityChart::updateRowWindow()
{
    if (!m_axisY || m_names.isEmpty() || m_inRowWindow)
        return;
    m_inRowWindow = true;
    const int n = static_cast<int>(m_names.size());
    double plotHeight = chart()->plotArea().height();
    if (plotHeight < 50)
        plotHeight = std::max(100.0, height() - 160.0);
    const int fit = std::max(1, static_cast<int>(plotHeight / rowPixels()));
    m_visibleRows = std::min(n, fit);
    m_firstRow = std::clamp(m_firstRow, 0, n - m_visibleRows);
    // Categories run bottom-up in reverse rank: rank r is category n - 1 - r.
    const QStringList categories = m_axisY->categories();
    const QString top = categories[n - 1 - m_firstRow];
    const QString bottom = categories[n - m_firstRow - m_visibleRows];
    if (m_axisY->min() != bottom || m_axisY->max() != top)
        m_axisY->setRange(bottom, top);
    QString title = tr("Layer (most sensitive on top)");
    if (m_visibleRows < n)
        title = tr("Layer, ranks %1 to %2 of %3 (wheel scrolls)")
                    .arg(m_firstRow + 1)
                    .arg(m_firstRow + m_visibleRows)
                    .arg(n);
    if (m_axisY->titleText() != title)
        m_axisY->setTitleText(title);
    m_inRowWindow = false;
}

void SensitivityChart::scrollToRow(int first)
{
    m_firstRow = first;
    updateRowWindow();
}

QString SensitivityChart::layerForLabel(const QString& label) const
{
    const qsizetype i = m_labels.indexOf(label);
    return i >= 0 ? m_names[i] : QString();
}

int SensitivityChart::rowAt(const QPoint& pos) const
{
    const QRectF plot = chart()->plotArea();
    const QPointF scenePos = mapToScene(pos);
    if (m_visibleRows <= 0 || scenePos.y() < plot.top() || scenePos.y() >= plot.bottom())
        return -1;
    const int row = static_cast<int>((scenePos.y() - plot.top()) / plot.height() * m_visibleRows);
    const int rank = m_firstRow + row;
    return rank < m_names.size() ? rank : -1;
}

void SensitivityChart::layoutOverlays() { updateRowWindow(); }

void SensitivityChart::wheelEvent(QWheelEvent* event)
{
    const int n = static_cast<int>(m_names.size());
    if (!m_axisY || m_visibleRows >= n || event->angleDelta().y() == 0) {
        ChartBase::wheelEvent(event);
        return;
    }
    const int steps = event->angleDelta().y() / 120 != 0 ? event->angleDelta().y() / 120
                                                          : (event->angleDelta().y() > 0 ? 1 : -1);
    scrollToRow(m_firstRow - steps * std::max(1, m_visibleRows / 5));
    event->accept();
}

void SensitivityChart::mouseMoveEvent(QMouseEvent* event)
{
    ChartBase::mouseMoveEvent(event);
    // Over the label column (left of the plot), the row's full name: the bars have their own.
    if (mapToScene(event->position().toPoint()).x() >= chart()->plotArea().left())
        return;
    const int rank = rowAt(event->position().toPoint());
    if (rank >= 0)
        showToolTip(tr("<b>%1</b> (rank %2 of %3)")
                        .arg(m_names[rank].toHtmlEscaped())
                        .arg(rank + 1)
                        .arg(m_names.size()));
}

void SensitivityChart::onBarClicked(int index)
{
    if (index >= 0 && index < m_names.size())
        Q_EMIT layerClicked(m_names[index]);
}

} // namespace bitlens::widgets
