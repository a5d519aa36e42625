#include "chart_pareto.h"

#include "chart_json.h"

#include "analysis/metric_info.h"
#include "export/report_figures.h"

#include <QChart>
#include <QGraphicsSimpleTextItem>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>

#include <QGraphicsLineItem>
#include <QLineF>

#include <algorithm>
#include <optional>
#include <cmath>
#include <limits>

namespace bitlens::widgets {

namespace rj = reportjson;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

} // namespace

ParetoChart::ParetoChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("Accuracy vs cost"));
    m_metricTitle = rj::metricTitle(QString());
}

void ParetoChart::setComparison(const nlohmann::json& comparison)
{
    m_comparison = comparison;
    readRuns();
    rebuild();
}

void ParetoChart::setFigure(const QString& name)
{
    m_chosenFigure = name;
    readRuns();
    rebuild();
}

void ParetoChart::setModelMetric(const QString& metricName)
{
    m_modelMetric = metricName;
    readRuns();
    rebuild();
}

void ParetoChart::readRuns()
{
    m_data.clear();
    m_floatRun.reset();
    m_figures.clear();
    m_figure.clear();
    try {
        const nlohmann::json* runs = rj::array(m_comparison, "runs");
        // The figures the runs offer: their task metric, and a language model's divergences.
        std::string metricName;
        bool divergence = false;
        if (runs)
            for (const nlohmann::json& run : *runs) {
                if (metricName.empty() && rj::object(run, "metric"))
                    metricName = std::string(exporting::reportMetricName(run));
                divergence = divergence || exporting::hasDivergence(run);
            }
        if (!runs || runs->empty()) {
            metricName = m_modelMetric.toStdString();
            divergence = analysis::metricHasDivergence(metricName);
        } else {
            m_figures << QString::fromStdString(analysis::metricInfo(metricName).name);
            if (divergence)
                for (const std::string& name : analysis::divergenceFigures())
                    m_figures << QString::fromStdString(name);
        }
        m_figure = m_figures.contains(m_chosenFigure)
                       ? m_chosenFigure
                       : QString::fromStdString(analysis::defaultParetoFigure(metricName,
                                                                              divergence));
        const std::string figure = m_figure.toStdString();
        if (runs) {
            double floatRateSum = 0.0;
            int floatRates = 0;
            for (std::size_t i = 0; i < runs->size(); ++i) {
                const nlohmann::json& run = (*runs)[i];
                const auto value = exporting::reportFigure(run, figure);
                if (!value)
                    continue;
                Run entry{static_cast<int>(i), rj::schemeName(run), *value, NAN, NAN};
                const nlohmann::json* size = rj::object(run, "size_bytes");
                if (const auto bytes = size ? rj::number(*size, "quantized") : std::nullopt)
                    entry.sizeMiB = *bytes / kMiB;
                const nlohmann::json* throughput = rj::object(run, "throughput");
                if (throughput) {
                    const auto rate = rj::number(*throughput, "quantized_samples_per_s");
                    if (rate && *rate > 0)
                        entry.latencyMs = 1000.0 / *rate;
                    const auto floatRate = rj::number(*throughput, "float_samples_per_s");
                    if (floatRate && *floatRate > 0) {
                        floatRateSum += *floatRate;
                        ++floatRates;
                    }
                }
                if (!m_floatRun) {
                    // Measured (metric.float) or by definition (0 KLD from itself).
                    const auto floatValue = exporting::reportFloatFigure(run, figure);
                    const auto floatBytes = size ? rj::number(*size, "float") : std::nullopt;
                    if (floatValue)
                        m_floatRun = Run{-1, tr("float32"), *floatValue,
                                         floatBytes ? *floatBytes / kMiB : NAN, NAN};
                }
                m_data.push_back(entry);
            }
            // Every run measures float again on the same batch: the marker is their mean.
            if (m_floatRun && floatRates > 0)
                m_floatRun->latencyMs = 1000.0 / (floatRateSum / floatRates);
        }
    } catch (const std::exception&) {
        m_data.clear();
        m_floatRun.reset();
    }
    const analysis::MetricInfo info = analysis::metricInfo(m_figure.toStdString());
    m_lowerIsBetter = info.lowerIsBetter;
    m_metricTitle = QString::fromStdString(info.axisTitle());
}

void ParetoChart::setCostAxis(Axis axis)
{
    m_axis = axis;
    rebuild();
}

double ParetoChart::cost(const Run& run) const
{
    return m_axis == Axis::Size ? run.sizeMiB : run.latencyMs;
}

QStringList ParetoChart::runLabels() const
{
    QStringList labels;
    for (const Run& run : m_shown)
        labels << run.label;
    return labels;
}

void ParetoChart::rebuild()
{
    m_runs = nullptr;
    m_float = nullptr;
    m_front = nullptr;
    m_labels.clear();
    m_leaders.clear();
    m_shown.clear();
    const QString costTitle = m_axis == Axis::Size ? tr("Model size (MiB)")
                                                   : tr("Latency (ms per sample)");
    // The direction is said where it is not the usual "higher is better"; then the figure's
    // short title ("KLD"; the y axis has the full one), so the title fits next to the table at
    // 1280x800 ("Mean KL divergence vs model size (lower is better)" was cut even at 8 pt).
    const analysis::MetricInfo info = analysis::metricInfo(m_figure.toStdString());
    const QString figureTitle = QString::fromStdString(m_lowerIsBetter ? info.shortTitle
                                                                       : info.title);
    const QString direction = m_lowerIsBetter ? tr(" (lower is better)") : QString();
    setChartTitle(m_axis == Axis::Size ? tr("%1 vs model size%2").arg(figureTitle, direction)
                                       : tr("%1 vs latency%2").arg(figureTitle, direction));
    for (const Run& run : m_data)
        if (std::isfinite(cost(run)))
            m_shown.push_back(run);
    if (m_shown.empty()) {
        // "model size", not costTitle lowered ("model size (mib)").
        const QString costName = m_axis == Axis::Size ? tr("model size") : tr("latency");
        showMessage(m_data.empty() ? tr("No data yet: run schemes (Run, or Compare all schemes) "
                                        "to weigh %1 against the %2")
                                         .arg(figureTitle, costName)
                                   : tr("No data: the runs have no %1").arg(costName));
        return;
    }
    clearChart();
    markHasData();

    std::vector<Run> all = m_shown;
    const bool showFloat = m_floatRun && std::isfinite(cost(*m_floatRun));
    if (showFloat)
        all.push_back(*m_floatRun);

    m_runs = new QScatterSeries;
    m_runs->setName(tr("Runs"));
    m_runs->setMarkerSize(11);
    m_runs->setColor(chartColor(0));
    m_runs->setBorderColor(Qt::white);
    for (const Run& run : m_shown)
        m_runs->append(cost(run), run.metric);
    if (showFloat) {
        m_float = new QScatterSeries;
        m_float->setName(tr("float32"));
        m_float->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
        m_float->setMarkerSize(13);
        m_float->setColor(chartColor(6));
        m_float->append(cost(*m_floatRun), m_floatRun->metric);
    }

    // Pareto front (core's analysis::paretoFront): the points no other beats on both cost and
    // the figure, in the figure's direction (lower perplexity and KLD are better).
    std::vector<analysis::ParetoPoint> points;
    for (const Run& run : all)
        points.push_back({cost(run), run.metric});
    m_front = new QLineSeries;
    // Short legend names: the legend shares the chart's width with the plot at 1280x800.
    m_front->setName(tr("Pareto front"));
    QPen frontPen(chartColor(1));
    frontPen.setWidthF(2.0);
    m_front->setPen(frontPen);
    for (const std::size_t i : analysis::paretoFront(points, m_lowerIsBetter))
        m_front->append(points[i].cost, points[i].value);

    chart()->addSeries(m_front);
    chart()->addSeries(m_runs);
    if (m_float)
        chart()->addSeries(m_float);

    double xLo = std::numeric_limits<double>::infinity();
    double xHi = -xLo;
    double yLo = xLo;
    double yHi = -xLo;
    for (const Run& run : all) {
        xLo = std::min(xLo, cost(run));
        xHi = std::max(xHi, cost(run));
        yLo = std::min(yLo, run.metric);
        yHi = std::max(yHi, run.metric);
    }
    // Runs that (nearly) agree still get a readable span: at least 5 % of the cost and 1 % of
    // the metric around them (one run spanned 0.92590-0.92610 before).
    const double xPad = std::max({1e-6, (xHi - xLo) * 0.12, 0.05 * std::abs(xHi)});
    const double yPad =
        std::max({1e-4, (yHi - yLo) * 0.15, 0.01 * std::max(std::abs(yLo), std::abs(yHi))});
    QValueAxis* axisX = addValueAxis(costTitle, Qt::AlignBottom);
    // Few x ticks: the chart shares the Compare tab with the table at 1280x800.
    setRoundTicks(axisX, std::max(0.0, xLo - xPad), xHi + xPad, 5);
    QValueAxis* axisY = addValueAxis(m_metricTitle, Qt::AlignLeft);
    setRoundTicks(axisY, yLo - yPad, yHi + yPad, 6);
    for (QAbstractSeries* series : chart()->series()) {
        series->attachAxis(axisX);
        series->attachAxis(axisY);
    }

    for (const Run& run : all) {
        m_labels.push_back(addOverlayText(run.label));
        m_leaders.push_back(addOverlayLine());
    }

    connect(m_runs, &QScatterSeries::clicked, this, &ParetoChart::onPointClicked);
    const auto hover = [this](const QPointF& point, bool state) {
        if (!state) {
            hideToolTip();
            return;
        }
        std::vector<Run> candidates = m_shown;
        if (m_floatRun)
            candidates.push_back(*m_floatRun);
        for (const Run& run : candidates)
            if (std::abs(cost(run) - point.x()) < 1e-12 && std::abs(run.metric - point.y()) < 1e-12)
                showToolTip(tr("<b>%1</b><br>%2 %3<br>size %4 MiB<br>latency %5 ms per sample%6")
                                .arg(run.label.toHtmlEscaped(), m_metricTitle)
                                .arg(rj::numberLabel(run.metric, 5))
                                .arg(run.sizeMiB, 0, 'f', 3)
                                .arg(run.latencyMs, 0, 'f', 4)
                                .arg(run.index < 0 ? tr("<br>(float latency: mean over the runs)")
                                                   : QString()));
    };
    connect(m_runs, &QScatterSeries::hovered, this, hover);
    if (m_float)
        connect(m_float, &QScatterSeries::hovered, this, hover);
    layoutOverlays();
}

void ParetoChart::layoutOverlays()
{
    if (!m_runs || m_labels.empty())
        return;
    // Labels go right of their point; one that would overlap a placed label tries below, above,
    // then left, then further down.
    std::vector<QRectF> placed;
    const QRectF area = chart()->plotArea();
    std::vector<Run> all = m_shown;
    if (m_float && m_floatRun)
        all.push_back(*m_floatRun);
    // Runs drawn on (nearly) the same spot share one label, "fp16 / bf16", instead of two
    // labels stacked on each other. Texts are rebuilt on every layout (resizes call this again).
    // Three or more on one spot read "dynamic-int8 +2" (the tooltip names them all).
    const std::size_t count = std::min(m_labels.size(), all.size());
    std::vector<QPointF> spots(count);
    std::vector<QStringList> sharing(count);
    for (std::size_t i = 0; i < count; ++i) {
        spots[i] = chart()->mapToPosition(QPointF(cost(all[i]), all[i].metric), m_runs);
        m_labels[i]->setVisible(true);
        sharing[i] = QStringList{all[i].label};
        for (std::size_t j = 0; j < i; ++j) {
            if (m_labels[j]->isVisible() && (spots[j] - spots[i]).manhattanLength() < 8.0) {
                sharing[j] << all[i].label;
                m_labels[i]->setVisible(false);
                break;
            }
        }
    }
    for (std::size_t i = 0; i < count; ++i)
        m_labels[i]->setText(sharing[i].size() <= 2
                                 ? sharing[i].join(QStringLiteral(" / "))
                                 : sharing[i].front() + QStringLiteral(" +%1").arg(sharing[i].size() - 1));
    // Labels of the Pareto front (and float32) are placed first and search furthest; a label
    // that finds no free place is hidden rather than drawn over another (its name is in the
    // tooltip and the comparison table). With a dozen runs on a small model, many sit
    // close together below the front.
    QList<QPointF> front;
    if (m_front)
        front = m_front->points();
    const auto onFront = [&](std::size_t i) {
        if (m_float && m_floatRun && i + 1 == all.size())
            return true;
        return std::any_of(front.begin(), front.end(), [&](const QPointF& f) {
            return std::abs(f.x() - cost(all[i])) < 1e-12 && std::abs(f.y() - all[i].metric) < 1e-12;
        });
    };
    std::vector<std::size_t> order;
    for (int pass = 0; pass < 2; ++pass)
        for (std::size_t i = 0; i < count; ++i)
            if (onFront(i) == (pass == 0))
                order.push_back(i);
    m_hiddenLabels = 0;
    // Markers are obstacles too: a label never covers another run's point.
    for (const QPointF& spot : spots)
        placed.emplace_back(spot.x() - 6, spot.y() - 6, 12, 12);
    for (QGraphicsLineItem* leader : m_leaders)
        leader->setVisible(false);
    for (const std::size_t i : order) {
        QGraphicsSimpleTextItem* item = m_labels[i];
        if (!item->isVisible())
            continue;
        const QPointF p = spots[i];
        const QRectF box = item->boundingRect();
        const double w = box.width();
        const double h = box.height();
        std::vector<QPointF> candidates = {
            {p.x() + 9, p.y() - h / 2},
            {p.x() - w / 2, p.y() + 8},
            {p.x() - w / 2, p.y() - h - 8},
            {p.x() - w - 9, p.y() - h / 2},
        };
        // Then stacked rows right and left of the point, nearest first; front labels search
        // further before giving up.
        const int rows = onFront(i) ? 6 : 2;
        for (int k = 1; k <= rows; ++k)
            for (const double dy : {k * h, -k * h})
                for (const double x : {p.x() + 9, p.x() - w - 9})
                    candidates.emplace_back(x, p.y() - h / 2 + dy);
        std::optional<QPointF> chosen;
        std::size_t chosenIndex = 0;
        for (const QPointF& c : candidates) {
            const QRectF rect(c, box.size());
            const bool free = std::none_of(placed.begin(), placed.end(), [&](const QRectF& r) {
                return r.intersects(rect);
            });
            if (free && area.contains(rect)) {
                chosen = c;
                break;
            }
            ++chosenIndex;
        }
        if (!chosen) {
            item->setVisible(false);
            ++m_hiddenLabels;
            continue;
        }
        item->setPos(*chosen);
        placed.emplace_back(item->pos(), box.size());
        // A label stacked away from its point gets a leader line to the point's edge.
        if (chosenIndex >= 4 && i < m_leaders.size()) {
            const QRectF rect(*chosen, box.size());
            const QPointF anchor(rect.left() > p.x() ? rect.left() - 1 : rect.right() + 1,
                                 rect.center().y());
            QLineF line(p, anchor);
            if (line.length() > 6.0)
                line.setP1(line.pointAt(6.0 / line.length()));
            m_leaders[i]->setLine(line);
            m_leaders[i]->setVisible(true);
        }
    }
}

int ParetoChart::hiddenLabelCount() const { return m_hiddenLabels; }

std::vector<QRectF> ParetoChart::visibleLabelRects() const
{
    std::vector<QRectF> rects;
    for (const QGraphicsSimpleTextItem* item : m_labels)
        if (item->isVisible())
            rects.emplace_back(item->pos(), item->boundingRect().size());
    return rects;
}

void ParetoChart::onPointClicked(const QPointF& point)
{
    double xSpan = 1.0;
    double ySpan = 1.0;
    if (m_runs)
        for (QAbstractAxis* axis : m_runs->attachedAxes())
            if (auto* value = qobject_cast<QValueAxis*>(axis);
                value && value->max() > value->min())
                (axis->orientation() == Qt::Horizontal ? xSpan : ySpan) =
                    value->max() - value->min();
    int best = -1;
    double bestDistance = std::numeric_limits<double>::infinity();
    for (const Run& run : m_shown) {
        // Nearest relative to the axis spans: size (MiB) and accuracy have unrelated scales.
        const double dx = (cost(run) - point.x()) / xSpan;
        const double dy = (run.metric - point.y()) / ySpan;
        const double distance = dx * dx + dy * dy;
        if (distance < bestDistance) {
            bestDistance = distance;
            best = run.index;
        }
    }
    if (best >= 0)
        Q_EMIT runClicked(best);
}

} // namespace bitlens::widgets
