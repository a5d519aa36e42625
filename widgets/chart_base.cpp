#include "chart_base.h"

#include <QGraphicsLineItem>
#include <QPen>
#include <QTimer>

#include "chart_export.h"

#include <QAbstractAxis>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QCategoryAxis>
#include <QChart>
#include <QContextMenuEvent>
#include <QCursor>
#include <QFileDialog>
#include <QGraphicsSimpleTextItem>
#include <QLegend>
#include <QMenu>
#include <QMessageBox>
#include <QToolTip>
#include <QValueAxis>

#include <algorithm>
#include <array>
#include <cmath>

namespace bitlens::widgets {

namespace {

QFont chartFont(int pointSize, bool bold = false)
{
    QFont font;
    font.setPointSize(pointSize);
    font.setBold(bold);
    return font;
}

} // namespace

QColor chartColor(int index)
{
    // Okabe & Ito (2008): distinguishable with the common colour-vision deficiencies.
    static const std::array<QColor, 7> colors = {
        QColor(0x00, 0x72, 0xB2), QColor(0xE6, 0x9F, 0x00), QColor(0x00, 0x9E, 0x73),
        QColor(0xD5, 0x5E, 0x00), QColor(0xCC, 0x79, 0xA7), QColor(0x56, 0xB4, 0xE9),
        QColor(0x59, 0x59, 0x59)};
    return colors[static_cast<std::size_t>(index) % colors.size()];
}

ChartBase::ChartBase(QWidget* parent) : QChartView(new QChart, parent)
{
    setRenderHint(QPainter::Antialiasing);
    setRenderHint(QPainter::TextAntialiasing);
    setMinimumSize(320, 220);
    QChart* c = chart();
    c->setTheme(QChart::ChartThemeLight);
    c->setAnimationOptions(QChart::NoAnimation);
    c->setBackgroundRoundness(0);
    c->setTitleFont(chartFont(12, true));
    c->legend()->setVisible(true);
    c->legend()->setAlignment(Qt::AlignBottom);
    c->legend()->setFont(chartFont(9));
    c->setMargins(QMargins(6, 6, 6, 6));

    m_messageItem = new QGraphicsSimpleTextItem(c);
    m_messageItem->setFont(chartFont(13));
    m_messageItem->setBrush(QColor(0x59, 0x59, 0x59));
    m_messageItem->setZValue(10);
    connect(c, &QChart::plotAreaChanged, this, [this] {
        placeMessage();
        scheduleOverlayLayout();
    });
    showMessage(QStringLiteral("No data"));
}

ChartBase::~ChartBase() = default;

QSize ChartBase::sizeHint() const { return {900, 500}; }

bool ChartBase::exportTo(const QString& path) { return exportChart(this, path); }

void ChartBase::clearChart()
{
    QChart* c = chart();
    c->removeAllSeries();
    for (QAbstractAxis* axis : c->axes()) {
        c->removeAxis(axis);
        delete axis;
    }
    for (QGraphicsItem* item : m_overlays)
        delete item;
    m_overlays.clear();
    m_lastToolTip.clear();
}

void ChartBase::showMessage(const QString& text)
{
    clearChart();
    m_hasData = false;
    m_message = text;
    m_messageItem->setText(text);
    m_messageItem->setVisible(true);
    chart()->legend()->setVisible(false);
    placeMessage();
}

void ChartBase::markHasData()
{
    m_hasData = true;
    m_message.clear();
    m_messageItem->setVisible(false);
    chart()->legend()->setVisible(true);
}

void ChartBase::placeMessage()
{
    if (!m_messageItem->isVisible())
        return;
    const QRectF area = chart()->plotArea().isEmpty() ? chart()->rect() : chart()->plotArea();
    const QRectF box = m_messageItem->boundingRect();
    m_messageItem->setPos(area.center() - QPointF(box.width() / 2, box.height() / 2));
}

void ChartBase::showToolTip(const QString& text)
{
    m_lastToolTip = text;
    QToolTip::showText(QCursor::pos(), text, this);
}

void ChartBase::hideToolTip()
{
    m_lastToolTip.clear();
    QToolTip::hideText();
}

void ChartBase::styleAxis(QAbstractAxis* axis, const QString& title) const
{
    axis->setTitleText(title);
    axis->setTitleFont(chartFont(10, true));
    axis->setLabelsFont(chartFont(9));
}

QValueAxis* ChartBase::addValueAxis(const QString& title, Qt::Alignment alignment)
{
    // A category axis placed on values: its tick labels are our own strings (see setRoundTicks).
    auto* axis = new QCategoryAxis;
    axis->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    styleAxis(axis, title);
    chart()->addAxis(axis, alignment);
    return axis;
}

QBarSeries* ChartBase::addLayerBars(const QStringList& layers, const std::vector<QBarSet*>& sets,
                                    const QString& valueTitle, QValueAxis** valueAxis)
{
    auto* series = new QBarSeries;
    for (QBarSet* set : sets)
        series->append(set);
    series->setBarWidth(0.7);
    chart()->addSeries(series);
    auto* axisX = new QBarCategoryAxis;
    axisX->append(layers);
    styleAxis(axisX, tr("Layer (graph order)"));
    chart()->addAxis(axisX, Qt::AlignBottom);
    series->attachAxis(axisX);
    QValueAxis* axisY = addValueAxis(valueTitle, Qt::AlignLeft);
    series->attachAxis(axisY);
    if (valueAxis)
        *valueAxis = axisY;
    return series;
}

QGraphicsSimpleTextItem* ChartBase::addOverlayText(const QString& text)
{
    auto* item = new QGraphicsSimpleTextItem(text, chart());
    item->setFont(chartFont(9));
    item->setZValue(5);
    m_overlays.push_back(item);
    return item;
}

QGraphicsLineItem* ChartBase::addOverlayLine()
{
    auto* item = new QGraphicsLineItem(chart());
    item->setPen(QPen(QColor(0x8c, 0x8c, 0x8c), 1.0));
    item->setZValue(4);
    item->setVisible(false);
    m_overlays.push_back(item);
    return item;
}

void ChartBase::setRoundTicks(QValueAxis* axis, double lo, double hi, int targetTicks)
{
    axis->setRange(lo, hi);
    const double span = hi - lo;
    if (!(span > 0) || targetTicks < 2)
        return;
    const double raw = span / targetTicks;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    double step = magnitude;
    for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (m * magnitude >= raw) {
            step = m * magnitude;
            break;
        }
    int decimals = 0;
    while (decimals < 12) {
        const double scaled = step * std::pow(10.0, decimals);
        if (std::abs(scaled - std::round(scaled)) < 1e-6 * scaled)
            break;
        ++decimals;
    }
    auto* categories = qobject_cast<QCategoryAxis*>(axis);
    if (!categories) {
        axis->setTickType(QValueAxis::TicksDynamic);
        axis->setTickAnchor(0.0);
        axis->setTickInterval(step);
        axis->setLabelFormat(QStringLiteral("%.%1f").arg(decimals));
        return;
    }
    // Labels computed here, not by Qt's accumulated ticks, which print 0 as "-0.0" or
    // "6.93889e-18".
    for (const QString& label : categories->categoriesLabels())
        categories->remove(label);
    categories->setStartValue(lo);
    for (auto k = static_cast<long long>(std::ceil(lo / step - 1e-9));
         static_cast<double>(k) * step <= hi + 1e-9 * step; ++k) {
        const double value = static_cast<double>(k) * step;
        categories->append(QString::number(k == 0 ? 0.0 : value, 'f', decimals), value);
    }
    axis->setRange(lo, hi);
}

void ChartBase::setChartTitle(const QString& title) { chart()->setTitle(title); }

void ChartBase::resizeEvent(QResizeEvent* event)
{
    QChartView::resizeEvent(event);
    placeMessage();
    scheduleOverlayLayout();
}

void ChartBase::scheduleOverlayLayout()
{
    // Qt Charts lays out plot area and series positions lazily: overlays placed inside a resize
    // would use the old geometry. Lay them out now (for callers that read positions at once)
    // and again once the event loop has settled the chart's layout.
    layoutOverlays();
    if (m_overlayLayoutPending)
        return;
    m_overlayLayoutPending = true;
    QTimer::singleShot(0, this, [this] {
        m_overlayLayoutPending = false;
        layoutOverlays();
    });
}

void ChartBase::contextMenuEvent(QContextMenuEvent* event)
{
    QMenu menu(this);
    menu.addAction(tr("Export PNG…"), this, [this] { exportWithDialog(QStringLiteral("png")); });
    menu.addAction(tr("Export SVG…"), this, [this] { exportWithDialog(QStringLiteral("svg")); });
    menu.exec(event->globalPos());
}

void ChartBase::exportWithDialog(const QString& suffix)
{
    const QString filter = suffix == QLatin1String("png") ? tr("PNG image (*.png)")
                                                          : tr("SVG image (*.svg)");
    QString path = QFileDialog::getSaveFileName(this, tr("Export chart"), QString(), filter);
    if (path.isEmpty())
        return;
    if (!path.endsWith(QLatin1Char('.') + suffix, Qt::CaseInsensitive))
        path += QLatin1Char('.') + suffix;
    if (!exportTo(path))
        QMessageBox::warning(this, tr("Export chart"),
                             tr("Could not write “%1”: the file could not be created or "
                                "written.")
                                 .arg(path));
}

} // namespace bitlens::widgets
