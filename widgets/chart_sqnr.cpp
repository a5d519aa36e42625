#include "chart_sqnr.h"

#include "chart_json.h"

#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QGraphicsSimpleTextItem>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QValueAxis>

#include <algorithm>
#include <array>
#include <cmath>

namespace bitlens::widgets {

namespace rj = reportjson;

namespace {

constexpr int kLocalSet = 0;
constexpr int kAccumulatedSet = 1;
constexpr std::array<double, 2> kReferenceDb = {20.0, 40.0};

QString dbText(const std::optional<double>& db)
{
    return db ? QStringLiteral("%1 dB").arg(*db, 0, 'f', 2)
              : QStringLiteral("exact (infinite: no error)");
}

} // namespace

SqnrChart::SqnrChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("SQNR per layer"));
}

void SqnrChart::setReport(const nlohmann::json& report)
{
    try {
        build(report);
    } catch (const std::exception& error) {
        showMessage(tr("No data: malformed report (%1)").arg(QString::fromUtf8(error.what())));
    }
}

void SqnrChart::build(const nlohmann::json& report)
{
    m_names.clear();
    m_local.clear();
    m_accumulated.clear();
    m_details.clear();
    m_exactLabels.clear();
    m_referenceLines.clear();
    m_series = nullptr;
    setChartTitle(tr("SQNR per layer"));

    const nlohmann::json* layers = rj::array(report, "layers");
    if (layers) {
        for (const nlohmann::json& layer : *layers) {
            const QString name = rj::text(layer, "name");
            const nlohmann::json* local = rj::member(layer, "sqnr_db");
            const nlohmann::json* accumulated = rj::member(layer, "sqnr_db_accumulated");
            // null is an exact match (infinite SQNR); a missing or non-number value is no data.
            const auto usable = [](const nlohmann::json* v) {
                return v && (v->is_null() || rj::asNumber(*v).has_value());
            };
            if (name.isEmpty() || !usable(local) || !usable(accumulated))
                continue;
            m_names << name;
            m_local.push_back(rj::asNumber(*local));
            m_accumulated.push_back(rj::asNumber(*accumulated));
            QString detail = rj::text(layer, "op");
            const QString weight = rj::text(layer, "weight_type");
            const QString act = rj::text(layer, "act_type");
            if (!weight.isEmpty())
                detail += tr(", weights %1").arg(weight);
            if (!act.isEmpty())
                detail += tr(", activations %1").arg(act);
            if (const auto mse = rj::number(layer, "mse"))
                detail += tr("\nMSE %1").arg(*mse, 0, 'g', 4);
            if (const auto cosine = rj::number(layer, "cosine"))
                detail += tr(", cosine %1").arg(*cosine, 0, 'f', 6);
            m_details.push_back(detail);
        }
    }
    if (m_names.isEmpty()) {
        // Before any run the window shows an empty report: say what makes this chart.
        showMessage(layers ? tr("No data: the report has no layers with SQNR")
                           : tr("No data yet: run a scheme (Run, Ctrl+R) to see each layer's "
                                "SQNR"));
        return;
    }
    clearChart();
    markHasData();
    setChartTitle(tr("SQNR per layer — %1 (higher is better)")
                      .arg(rj::schemeName(report)));

    double maxFinite = 0.0;
    double minFinite = 0.0;
    for (std::size_t i = 0; i < m_local.size(); ++i)
        for (const auto& v : {m_local[i], m_accumulated[i]})
            if (v) {
                maxFinite = std::max(maxFinite, *v);
                minFinite = std::min(minFinite, *v);
            }
    // Exact bars reach past every finite bar and the top reference line, then the axis ends.
    const double top = std::ceil((std::max(maxFinite, kReferenceDb.back()) * 1.12) / 10.0) * 10.0;
    m_exactHeight = top;

    auto* local = new QBarSet(tr("Local (layer alone)"));
    auto* accumulated = new QBarSet(tr("Accumulated (all up to here)"));
    local->setColor(chartColor(0));
    accumulated->setColor(chartColor(1));
    local->setSelectedColor(chartColor(0).darker(170));
    accumulated->setSelectedColor(chartColor(1).darker(170));
    for (std::size_t i = 0; i < m_local.size(); ++i) {
        *local << m_local[i].value_or(top);
        *accumulated << m_accumulated[i].value_or(top);
    }
    QValueAxis* axisY = nullptr;
    m_series = addLayerBars(m_names, {local, accumulated}, tr("SQNR (dB)"), &axisY);
    const double bottom = std::floor(minFinite / 10.0) * 10.0;
    setRoundTicks(axisY, bottom, top, static_cast<int>((top - bottom) / 10.0));
    QAbstractAxis* axisX = chart()->axes(Qt::Horizontal, m_series).value(0);

    for (std::size_t r = 0; r < kReferenceDb.size(); ++r) {
        auto* line = new QLineSeries;
        line->setName(r == 0 ? tr("20 / 40 dB") : QString());
        line->append(-0.5, kReferenceDb[r]);
        line->append(m_names.size() - 0.5, kReferenceDb[r]);
        QPen pen(QColor(0x59, 0x59, 0x59));
        pen.setStyle(Qt::DashLine);
        pen.setWidthF(1.2);
        line->setPen(pen);
        chart()->addSeries(line);
        line->attachAxis(axisX);
        line->attachAxis(axisY);
        line->setVisible(m_referenceVisible);
        if (r > 0)
            for (QLegendMarker* marker : chart()->legend()->markers(line))
                marker->setVisible(false);
        m_referenceLines.push_back(line);
    }

    for (int i = 0; i < m_names.size(); ++i) {
        if (!m_local[static_cast<std::size_t>(i)])
            m_exactLabels.push_back({addOverlayText(tr("exact")), i, kLocalSet});
        if (!m_accumulated[static_cast<std::size_t>(i)])
            m_exactLabels.push_back({addOverlayText(tr("exact")), i, kAccumulatedSet});
    }
    for (QBarSet* set : {local, accumulated}) {
        connect(set, &QBarSet::clicked, this, &SqnrChart::onBarClicked);
        connect(set, &QBarSet::hovered, this,
                [this, set](bool status, int index) { onBarHovered(status, index, set); });
    }
    if (!m_selected.isEmpty())
        setSelectedLayer(m_selected);
    layoutOverlays();
}

void SqnrChart::layoutOverlays()
{
    if (!m_series)
        return;
    // Bars of a two-set group: each takes half of barWidth, centred either side of the category.
    const double half = m_series->barWidth() / 4.0;
    for (const ExactLabel& label : m_exactLabels) {
        const double x = label.layer + (label.set == kLocalSet ? -half : half);
        const QPointF top = chart()->mapToPosition(QPointF(x, m_exactHeight), m_series);
        const QRectF box = label.item->boundingRect();
        label.item->setPos(top.x() - box.width() / 2, top.y() + 2);
        // Layers scrolled out of the window keep their label hidden.
        const QRectF area = chart()->plotArea();
        const bool inWindow = top.x() >= area.left() && top.x() <= area.right() &&
                              box.width() <= area.width() / std::max(1, visibleLayerCount());
        label.item->setVisible(area.width() < 50 || inWindow);
        label.item->setBrush(Qt::white);
    }
}

void SqnrChart::setReferenceLinesVisible(bool visible)
{
    m_referenceVisible = visible;
    for (QLineSeries* line : m_referenceLines)
        line->setVisible(visible);
}

void SqnrChart::setSelectedLayer(const QString& name)
{
    m_selected = name;
    if (!m_series)
        return;
    const int index = static_cast<int>(m_names.indexOf(name));
    for (QBarSet* set : m_series->barSets()) {
        set->deselectAllBars();
        if (index >= 0)
            set->selectBar(index);
    }
    ensureLayerVisible(index);
}

void SqnrChart::onBarClicked(int index)
{
    if (index < 0 || index >= m_names.size())
        return;
    setSelectedLayer(m_names[index]);
    Q_EMIT layerClicked(m_names[index]);
}

void SqnrChart::onBarHovered(bool status, int index, QBarSet* set)
{
    if (!status || index < 0 || index >= m_names.size()) {
        hideToolTip();
        return;
    }
    const auto i = static_cast<std::size_t>(index);
    const bool isLocal = m_series && !m_series->barSets().isEmpty()
                         && m_series->barSets().first() == set;
    QString text = QStringLiteral("<b>%1</b><br>").arg(m_names[index].toHtmlEscaped());
    text += (isLocal ? tr("<b>local SQNR %1</b><br>accumulated SQNR %2")
                     : tr("local SQNR %1<br><b>accumulated SQNR %2</b>"))
                .arg(dbText(m_local[i]), dbText(m_accumulated[i]));
    if (!m_details[i].isEmpty())
        text += QStringLiteral("<br>") + m_details[i].toHtmlEscaped().replace(
                                              QLatin1Char('\n'), QStringLiteral("<br>"));
    showToolTip(text);
}

} // namespace bitlens::widgets
