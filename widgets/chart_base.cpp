#include "chart_base.h"

#include <QFontMetricsF>

#include <QGraphicsLineItem>
#include <QFontMetrics>
#include <QPen>
#include <QTimer>

#include "chart_export.h"
#include "layer_names.h"

#include <QLogValueAxis>
#include <QScatterSeries>
#include <QScrollBar>
#include <QWheelEvent>

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
        updateLayerWindow();
        placeMessage();
        scheduleOverlayLayout();
    });
    m_layerScroll = new QScrollBar(Qt::Horizontal, this);
    m_layerScroll->setObjectName(QStringLiteral("layerScroll"));
    m_layerScroll->setToolTip(tr("Scroll the layers (mouse wheel); Ctrl+wheel zooms"));
    m_layerScroll->hide();
    connect(m_layerScroll, &QScrollBar::valueChanged, this, [this](int value) {
        if (!m_inLayerWindow)
            scrollToLayer(value);
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
    m_layerAxis = nullptr;
    m_layerSeries = nullptr;
    m_layerLabels.clear();
    m_visibleLayers = 0;
    m_firstLayer = 0;
    m_pendingCenter = -1;
    m_logScale = false;
    if (m_layerScroll) {
        m_layerScroll->hide();
        c->setMargins(QMargins(6, 6, 6, 6));
    }
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
    // A message wider than the chart breaks at spaces instead of running off its edge.
    const QFontMetrics metrics(m_messageItem->font());
    QStringList lines;
    QString line;
    for (const QString& word : m_message.split(QLatin1Char(' '))) {
        const QString longer = line.isEmpty() ? word : line + QLatin1Char(' ') + word;
        if (!line.isEmpty() && metrics.horizontalAdvance(longer) > area.width() - 16) {
            lines << line;
            line = word;
        } else {
            line = longer;
        }
    }
    lines << line;
    m_messageItem->setText(lines.join(QLatin1Char('\n')));
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

void ChartBase::showXOnHover(QScatterSeries* series, const QString& name, int digits)
{
    connect(series, &QScatterSeries::hovered, this,
            [this, name, digits](const QPointF& point, bool state) {
                if (!state) {
                    hideToolTip();
                    return;
                }
                showToolTip(QStringLiteral("<b>%1</b>: %2").arg(name).arg(point.x(), 0, 'g', digits));
            });
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
                                    const QString& valueTitle, QValueAxis** valueAxis,
                                    QLogValueAxis** logAxis)
{
    auto* series = new QBarSeries;
    for (QBarSet* set : sets)
        series->append(set);
    series->setBarWidth(0.7);
    chart()->addSeries(series);
    auto* axisX = new QBarCategoryAxis;
    m_layerLabels = shortLayerLabels(layers);
    axisX->append(m_layerLabels);
    styleAxis(axisX, tr("Layer (graph order)"));
    chart()->addAxis(axisX, Qt::AlignBottom);
    series->attachAxis(axisX);
    if (logAxis) {
        auto* axisY = new QLogValueAxis;
        axisY->setBase(10.0);
        axisY->setLabelFormat(QStringLiteral("%g"));
        axisY->setMinorTickCount(-1);
        styleAxis(axisY, valueTitle + tr(", log scale"));
        chart()->addAxis(axisY, Qt::AlignLeft);
        series->attachAxis(axisY);
        *logAxis = axisY;
        m_logScale = true;
        if (valueAxis)
            *valueAxis = nullptr;
    } else {
        QValueAxis* axisY = addValueAxis(valueTitle, Qt::AlignLeft);
        series->attachAxis(axisY);
        if (valueAxis)
            *valueAxis = axisY;
    }
    m_layerAxis = axisX;
    m_layerSeries = series;
    m_firstLayer = 0;
    updateLayerWindow();
    return series;
}

namespace {
constexpr double kReadableGroupPx = 16.0;  // a rotated 9 pt label fits
constexpr double kMinGroupPx = 6.0;        // two bars of about 2 px each
} // namespace

void ChartBase::updateLayerWindow()
{
    if (!m_layerAxis || m_inLayerWindow || m_layerLabels.isEmpty())
        return;
    m_inLayerWindow = true;
    const int n = static_cast<int>(m_layerLabels.size());
    double plotWidth = chart()->plotArea().width();
    if (plotWidth < 50)
        plotWidth = std::max(100.0, width() - 120.0);
    const int readable = std::max(1, static_cast<int>(plotWidth / kReadableGroupPx));
    const int densest = std::max(1, static_cast<int>(plotWidth / kMinGroupPx));
    int visible = m_zoomLayers > 0 ? std::clamp(m_zoomLayers, std::min(n, 3), std::min(n, densest))
                                   : std::min(n, readable);
    m_visibleLayers = visible;
    if (m_pendingCenter >= 0)
        m_firstLayer = m_pendingCenter - visible / 2;
    m_firstLayer = std::clamp(m_firstLayer, 0, n - visible);
    m_layerAxis->setRange(m_layerLabels[m_firstLayer], m_layerLabels[m_firstLayer + visible - 1]);
    const double group = plotWidth / visible;
    qsizetype longest = 0;
    for (const QString& label : m_layerLabels)
        longest = std::max(longest, label.size());
    const double labelPx = 7.0 * static_cast<double>(longest) + 8.0;
    // Qt would elide a rotated label to the category's width ("⋮"); the label fits its length.
    m_layerAxis->setTruncateLabels(false);
    m_layerAxis->setLabelsVisible(group >= kReadableGroupPx - 0.5);
    m_layerAxis->setLabelsAngle(group >= labelPx ? 0 : -90);
    QString title = tr("Layer (graph order)");
    if (visible < n)
        title += tr(" — %1 to %2 of %3; wheel scrolls, Ctrl+wheel zooms")
                     .arg(m_firstLayer + 1)
                     .arg(m_firstLayer + visible)
                     .arg(n);
    if (!m_layerAxis->labelsVisible())
        title += tr(" — labels hidden at this zoom, hover a bar for its name");
    m_layerAxis->setTitleText(title);
    fitTitles();
    const bool scroll = visible < n;
    const int barHeight = m_layerScroll->sizeHint().height();
    chart()->setMargins(QMargins(6, 6, 6, scroll ? 6 + barHeight : 6));
    m_layerScroll->setRange(0, n - visible);
    m_layerScroll->setPageStep(visible);
    m_layerScroll->setSingleStep(std::max(1, visible / 10));
    m_layerScroll->setValue(m_firstLayer);
    m_layerScroll->setGeometry(8, height() - barHeight - 3, width() - 16, barHeight);
    m_layerScroll->setVisible(scroll);
    m_inLayerWindow = false;
}

double ChartBase::barPixelWidth() const
{
    if (!m_layerSeries || m_visibleLayers <= 0)
        return 0.0;
    double plotWidth = chart()->plotArea().width();
    if (plotWidth < 50)
        plotWidth = std::max(100.0, width() - 120.0);
    const int sets = std::max(1, static_cast<int>(m_layerSeries->count()));
    return plotWidth / m_visibleLayers * m_layerSeries->barWidth() / sets;
}

void ChartBase::zoomLayers(int count)
{
    m_pendingCenter = -1;
    m_zoomLayers = std::max(1, count);
    updateLayerWindow();
    layoutOverlays();
}

void ChartBase::scrollToLayer(int first)
{
    m_pendingCenter = -1;
    m_firstLayer = first;
    updateLayerWindow();
    layoutOverlays();
}

void ChartBase::ensureLayerVisible(int index)
{
    if (index < 0 || index >= layerCount())
        return;
    // Hidden or not laid out yet, the window is a guess: the layer stays the window's centre
    // (through later resizes) until the user scrolls or zooms.
    const bool laidOut = isVisible() && chart()->plotArea().width() >= 50;
    if (!laidOut || index < m_firstLayer || index >= m_firstLayer + m_visibleLayers) {
        m_pendingCenter = index;
        updateLayerWindow();
        layoutOverlays();
    }
}

void ChartBase::wheelEvent(QWheelEvent* event)
{
    if (!m_layerAxis || m_layerLabels.size() < 2) {
        QChartView::wheelEvent(event);
        return;
    }
    const int steps = event->angleDelta().y() / 120 != 0 ? event->angleDelta().y() / 120
                                                          : (event->angleDelta().y() > 0 ? 1 : -1);
    if (event->angleDelta().y() == 0) {
        QChartView::wheelEvent(event);
        return;
    }
    if (event->modifiers() & Qt::ControlModifier) {
        const double factor = steps > 0 ? 0.8 : 1.25;
        const int n = static_cast<int>(m_layerLabels.size());
        const int next = static_cast<int>(std::lround(m_visibleLayers * factor));
        zoomLayers(next == m_visibleLayers ? m_visibleLayers + (steps > 0 ? -1 : 1)
                                           : std::min(next, n));
    } else if (isScrollable()) {
        scrollToLayer(m_firstLayer - steps * std::max(1, m_visibleLayers / 10));
    }
    event->accept();
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

namespace {

/// The largest bold-or-not font from `largest` down to `smallest` points in which every line
/// of `text` (lines end at "<br>", as in a two-line chart title) fits `width` pixels (the
/// smallest when none does: Qt elides it then).
QFont fittingFont(const QString& text, int largest, int smallest, bool bold, double width)
{
    const QStringList lines = text.split(QStringLiteral("<br>"));
    for (int points = largest; points > smallest; --points) {
        const QFont font = chartFont(points, bold);
        const QFontMetricsF metrics(font);
        if (std::all_of(lines.begin(), lines.end(), [&](const QString& line) {
                return metrics.horizontalAdvance(line) <= width;
            }))
            return font;
    }
    return chartFont(smallest, bold);
}

} // namespace

void ChartBase::setChartTitle(const QString& title)
{
    chart()->setTitle(title);
    fitTitles();
}

void ChartBase::fitTitles()
{
    // A long title (scheme, device, batch, log-scale note) shrinks to fit the chart's width,
    // down to 8 pt, instead of being cut to "...".
    // Qt lays the title out narrower than the view (margins, and its own elision slack): keep
    // a tenth in hand.
    const double width = std::max(120.0, 0.9 * (static_cast<double>(this->width()) - 24.0));
    const QFont title = fittingFont(chart()->title(), 12, 8, true, width);
    if (chart()->titleFont() != title)
        chart()->setTitleFont(title);
    if (m_layerAxis) {
        const double axisWidth = std::max(120.0, chart()->plotArea().width());
        const QFont axis = fittingFont(m_layerAxis->titleText(), 10, 7, true, axisWidth);
        if (m_layerAxis->titleFont() != axis)
            m_layerAxis->setTitleFont(axis);
    }
}

void ChartBase::resizeEvent(QResizeEvent* event)
{
    QChartView::resizeEvent(event);
    fitTitles();
    updateLayerWindow();
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
