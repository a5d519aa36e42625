#include "layer_heatmap.h"

#include "chart_json.h"

#include <QEvent>
#include <QFontMetrics>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <array>
#include <cmath>

namespace bitlens::widgets {

namespace rj = reportjson;

namespace {

constexpr int kMargin = 8;
constexpr int kTitleH = 22;
constexpr int kNoteH = 18;
constexpr int kHeaderH = 20;
constexpr int kRowHeaderW = 64;
constexpr int kBarGap = 14;
constexpr int kBarW = 16;
constexpr int kBarLabelsW = 150;
constexpr int kOutsideW = 260;

QColor viridis(double t)
{
    // Viridis at 9 stops: perceptually uniform, readable in grey and by colour-blind readers.
    static const std::array<QColor, 9> stops = {
        QColor(0x44, 0x01, 0x54), QColor(0x47, 0x2d, 0x7b), QColor(0x3b, 0x52, 0x8b),
        QColor(0x2c, 0x72, 0x8e), QColor(0x21, 0x91, 0x8c), QColor(0x28, 0xae, 0x80),
        QColor(0x5e, 0xc9, 0x62), QColor(0xad, 0xdc, 0x30), QColor(0xfd, 0xe7, 0x25)};
    t = std::clamp(t, 0.0, 1.0) * (stops.size() - 1);
    const auto i = std::min(static_cast<std::size_t>(t), stops.size() - 2);
    const double f = t - static_cast<double>(i);
    const QColor& a = stops[i];
    const QColor& b = stops[i + 1];
    return QColor::fromRgbF(static_cast<float>(a.redF() + f * (b.redF() - a.redF())),
                            static_cast<float>(a.greenF() + f * (b.greenF() - a.greenF())),
                            static_cast<float>(a.blueF() + f * (b.blueF() - a.blueF())));
}

QColor textOn(const QColor& background)
{
    const double luminance =
        0.299 * background.redF() + 0.587 * background.greenF() + 0.114 * background.blueF();
    return luminance > 0.55 ? Qt::black : Qt::white;
}

const QColor kExact(0xff, 0xff, 0xff);
const QColor kHole(0xee, 0xee, 0xee);

} // namespace

LayerHeatmap::LayerHeatmap(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setObjectName(QStringLiteral("layerHeatmap"));
    build();
}

QString LayerHeatmap::metricName(Metric metric)
{
    switch (metric) {
    case Metric::SqnrLocal: return tr("SQNR, local (layer alone)");
    case Metric::SqnrAccumulated: return tr("SQNR, accumulated (all up to here)");
    case Metric::BytesQuantized: return tr("Memory, quantized");
    case Metric::BytesFloat: return tr("Memory, Float32");
    case Metric::LatencyQuantized: return tr("Latency, quantized");
    case Metric::LatencyFloat: return tr("Latency, Float32");
    }
    return {};
}

std::vector<LayerHeatmap::Metric> LayerHeatmap::allMetrics()
{
    return {Metric::SqnrLocal,  Metric::SqnrAccumulated,  Metric::BytesQuantized,
            Metric::BytesFloat, Metric::LatencyQuantized, Metric::LatencyFloat};
}

void LayerHeatmap::setReport(const nlohmann::json& report)
{
    m_report = report;
    build();
}

void LayerHeatmap::setMetric(Metric metric)
{
    m_metric = metric;
    build();
}

void LayerHeatmap::setSelectedLayer(const QString& name)
{
    m_selected = m_names.contains(name) ? name : QString();
    update();
}

void LayerHeatmap::build()
{
    m_names.clear();
    m_values.clear();
    m_exact.clear();
    m_grid = LayerGrid();
    m_message.clear();
    m_unit.clear();
    m_divisor = 1.0;
    m_logColor = false;
    try {
        const nlohmann::json* layers = rj::array(m_report, "layers");
        const nlohmann::json* throughput = rj::object(m_report, "throughput");
        const nlohmann::json* times = throughput ? rj::object(*throughput, "layers_ms") : nullptr;
        if (layers)
            for (const nlohmann::json& layer : *layers) {
                const QString name = rj::text(layer, "name");
                if (name.isEmpty())
                    continue;
                std::optional<double> v;
                bool exact = false;
                switch (m_metric) {
                case Metric::SqnrLocal:
                case Metric::SqnrAccumulated: {
                    const nlohmann::json* db = rj::member(
                        layer, m_metric == Metric::SqnrLocal ? "sqnr_db" : "sqnr_db_accumulated");
                    exact = db && db->is_null();
                    v = db ? rj::asNumber(*db) : std::nullopt;
                    break;
                }
                case Metric::BytesQuantized: v = rj::number(layer, "bytes_quantized"); break;
                case Metric::BytesFloat: v = rj::number(layer, "bytes_float"); break;
                case Metric::LatencyQuantized:
                case Metric::LatencyFloat: {
                    const nlohmann::json* t = times ? rj::object(*times, name.toStdString())
                                                    : nullptr;
                    if (t)
                        v = rj::number(*t, m_metric == Metric::LatencyFloat ? "float"
                                                                             : "quantized");
                    break;
                }
                }
                m_names << name;
                m_values.push_back(v);
                m_exact.push_back(exact);
            }
    } catch (const std::exception& error) {
        m_names.clear();
        m_values.clear();
        m_exact.clear();
        m_message = tr("No data: malformed report (%1)").arg(QString::fromUtf8(error.what()));
    }
    if (m_message.isEmpty()) {
        m_grid = layerGrid(m_names);
        if (m_names.isEmpty())
            m_message = tr("No data");
        else if (!m_grid.valid())
            m_message = tr("No block × projection grid: the layer names have no block index "
                           "(as in model.layers.17.self_attn.q_proj). The SQNR, Memory and "
                           "Latency charts show every layer.");
    }
    std::vector<double> present;
    for (std::size_t i = 0; i < m_values.size(); ++i)
        if (m_values[i])
            present.push_back(*m_values[i]);
    if (m_message.isEmpty() && present.empty())
        m_message = tr("No data: the report has no “%1” per layer").arg(metricName(m_metric));
    switch (m_metric) {
    case Metric::SqnrLocal:
    case Metric::SqnrAccumulated:
        m_unit = QStringLiteral("dB");
        m_higherIsBetter = true;
        break;
    case Metric::BytesQuantized:
    case Metric::BytesFloat: {
        const double largest = present.empty() ? 0.0
                                               : *std::max_element(present.begin(), present.end());
        const bool mib = largest >= 1024.0 * 1024.0;
        m_unit = mib ? QStringLiteral("MiB") : QStringLiteral("KiB");
        m_divisor = mib ? 1024.0 * 1024.0 : 1024.0;
        m_higherIsBetter = false;
        break;
    }
    case Metric::LatencyQuantized:
    case Metric::LatencyFloat:
        m_unit = QStringLiteral("ms");
        m_higherIsBetter = false;
        break;
    }
    // The colour range covers the grid's cells; an outside layer beyond it takes the end colour.
    std::vector<double> inGrid;
    for (const auto& row : m_grid.cell)
        for (const int i : row)
            if (i >= 0 && m_values[static_cast<std::size_t>(i)])
                inGrid.push_back(*m_values[static_cast<std::size_t>(i)] / m_divisor);
    if (inGrid.empty())
        for (const double v : present)
            inGrid.push_back(v / m_divisor);
    m_lo = inGrid.empty() ? 0.0 : *std::min_element(inGrid.begin(), inGrid.end());
    m_hi = inGrid.empty() ? 1.0 : *std::max_element(inGrid.begin(), inGrid.end());
    m_logColor = m_unit != QLatin1String("dB") && m_lo > 0 && hasOutlier(inGrid);
    if (!(m_hi > m_lo))
        m_hi = m_lo + 1.0;
    m_title = tr("%1 per layer — block × projection — %2")
                  .arg(metricName(m_metric), rj::schemeName(m_report));
    if (!m_names.contains(m_selected))
        m_selected.clear();
    layout();
    updateGeometry();
    update();
}

QString LayerHeatmap::colorBarTitle() const
{
    QString unit = m_unit;
    if (m_metric == Metric::SqnrLocal || m_metric == Metric::SqnrAccumulated)
        return tr("SQNR (%1), higher is better").arg(unit);
    if (m_metric == Metric::BytesQuantized || m_metric == Metric::BytesFloat)
        return m_logColor ? tr("Bytes (%1), log colour").arg(unit) : tr("Bytes (%1)").arg(unit);
    return m_logColor ? tr("Milliseconds per batch, log colour")
                      : tr("Milliseconds per batch");
}

std::optional<double> LayerHeatmap::value(int layer) const
{
    if (layer < 0 || layer >= static_cast<int>(m_values.size()))
        return std::nullopt;
    const auto& v = m_values[static_cast<std::size_t>(layer)];
    return v ? std::optional<double>(*v / m_divisor) : std::nullopt;
}

QString LayerHeatmap::valueText(int layer, bool withUnit) const
{
    if (layer < 0 || layer >= static_cast<int>(m_values.size()))
        return {};
    if (m_exact[static_cast<std::size_t>(layer)])
        return withUnit ? tr("exact (infinite: no error)") : tr("exact");
    const auto v = value(layer);
    if (!v)
        return withUnit ? tr("no value") : QString();
    QString text;
    if (m_unit == QLatin1String("dB"))
        text = QString::number(*v, 'f', 1);
    else
        text = rj::numberLabel(*v, 3);
    return withUnit ? text + QLatin1Char(' ') + m_unit : text;
}

QColor LayerHeatmap::colorFor(int layer) const
{
    if (layer < 0)
        return kHole;
    if (m_exact[static_cast<std::size_t>(layer)])
        return kExact;
    const auto v = value(layer);
    if (!v)
        return kHole;
    double t = 0.0;
    if (m_logColor && *v > 0)
        t = (std::log(*v) - std::log(m_lo)) / (std::log(m_hi) - std::log(m_lo));
    else
        t = (*v - m_lo) / (m_hi - m_lo);
    // Better is brighter: for bytes and milliseconds the small values are the light ones.
    return viridis(m_higherIsBetter ? t : 1.0 - t);
}

void LayerHeatmap::layout()
{
    const int rows = std::max(1, rowCount());
    const int cols = std::max(1, columnCount());
    const int top = kMargin + kTitleH + kNoteH + kHeaderH;
    const int availW = width() - 2 * kMargin - kRowHeaderW - kBarGap - kBarW - kBarLabelsW -
                       kOutsideW;
    const int availH = height() - top - 2 * kMargin;
    m_cellW = std::clamp(availW / cols, 40, 120);
    m_cellH = std::clamp(availH / rows, 14, 30);
    m_gridRect = QRect(kMargin + kRowHeaderW, top, m_cellW * cols, m_cellH * rows);
    m_barRect = QRect(m_gridRect.right() + 1 + kBarGap, top + 24, kBarW,
                      std::max(120, m_gridRect.height() - 32));
    m_outsideRect = QRect(m_barRect.right() + 1 + kBarLabelsW, top, kOutsideW - 8,
                          m_outsideRowH * (static_cast<int>(m_grid.outside.size()) + 1));
}

void LayerHeatmap::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    layout();
}

QSize LayerHeatmap::sizeHint() const
{
    const int rows = std::max(1, rowCount());
    const int cols = std::max(1, columnCount());
    return {2 * kMargin + kRowHeaderW + cols * 80 + kBarGap + kBarW + kBarLabelsW + kOutsideW,
            kMargin * 2 + kTitleH + kNoteH + kHeaderH + rows * 20};
}

QSize LayerHeatmap::minimumSizeHint() const
{
    if (!hasGrid())
        return {320, 160};
    const int rows = std::max(1, rowCount());
    const int cols = std::max(1, columnCount());
    return {2 * kMargin + kRowHeaderW + cols * 40 + kBarGap + kBarW + kBarLabelsW + kOutsideW,
            std::max(kMargin * 2 + kTitleH + kNoteH + kHeaderH + rows * 14,
                     kMargin * 2 + kTitleH + kNoteH + kHeaderH +
                         m_outsideRowH * (static_cast<int>(m_grid.outside.size()) + 1))};
}

QString LayerHeatmap::layerAt(int row, int column) const
{
    if (row < 0 || row >= rowCount() || column < 0 || column >= columnCount())
        return {};
    const int i = m_grid.cell[static_cast<std::size_t>(row)][static_cast<std::size_t>(column)];
    return i >= 0 ? m_names[i] : QString();
}

QStringList LayerHeatmap::outsideLayers() const
{
    QStringList names;
    for (const int i : m_grid.outside)
        names << m_names[i];
    return names;
}

QRect LayerHeatmap::cellRect(int row, int column) const
{
    return {m_gridRect.left() + column * m_cellW, m_gridRect.top() + row * m_cellH, m_cellW,
            m_cellH};
}

QRect LayerHeatmap::outsideRect(int index) const
{
    return {m_outsideRect.left(), m_outsideRect.top() + (index + 1) * m_outsideRowH,
            m_outsideRect.width(), m_outsideRowH};
}

QString LayerHeatmap::cellText(int row, int column) const
{
    if (row < 0 || row >= rowCount() || column < 0 || column >= columnCount())
        return {};
    const int i = m_grid.cell[static_cast<std::size_t>(row)][static_cast<std::size_t>(column)];
    if (i < 0)
        return {};
    const QString text = valueText(i, false);
    QFont small = font();
    small.setPointSize(8);
    const QFontMetrics metrics(small);
    if (metrics.horizontalAdvance(text) > m_cellW - 4 || metrics.height() > m_cellH)
        return {};
    return text;
}

QString LayerHeatmap::layerAtPoint(const QPoint& pos) const
{
    if (!hasGrid())
        return {};
    if (m_gridRect.contains(pos))
        return layerAt((pos.y() - m_gridRect.top()) / m_cellH,
                       (pos.x() - m_gridRect.left()) / m_cellW);
    for (int k = 0; k < static_cast<int>(m_grid.outside.size()); ++k)
        if (outsideRect(k).contains(pos))
            return m_names[m_grid.outside[static_cast<std::size_t>(k)]];
    return {};
}

QString LayerHeatmap::toolTipAt(const QPoint& pos) const
{
    const QString name = layerAtPoint(pos);
    if (name.isEmpty())
        return {};
    const int i = static_cast<int>(m_names.indexOf(name));
    QString where = tr("outside the grid");
    const bool outside =
        std::find(m_grid.outside.begin(), m_grid.outside.end(), i) != m_grid.outside.end();
    if (const auto parsed = parseBlockLayer(name); parsed && !outside)
        where = tr("block %1, %2").arg(parsed->block).arg(parsed->projection);
    return QStringLiteral("<b>%1</b><br>%2<br>%3: %4")
        .arg(name.toHtmlEscaped(), where, metricName(m_metric).toHtmlEscaped(),
             valueText(i, true));
}

void LayerHeatmap::mousePressEvent(QMouseEvent* event)
{
    const QString name = layerAtPoint(event->position().toPoint());
    if (name.isEmpty() || event->button() != Qt::LeftButton) {
        QWidget::mousePressEvent(event);
        return;
    }
    setSelectedLayer(name);
    Q_EMIT layerClicked(name);
}

bool LayerHeatmap::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QString text = toolTipAt(help->pos());
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), text, this);
        return true;
    }
    return QWidget::event(event);
}

void LayerHeatmap::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), Qt::white);
    p.setRenderHint(QPainter::TextAntialiasing);
    QFont titleFont = font();
    titleFont.setPointSize(12);
    titleFont.setBold(true);
    QFont labelFont = font();
    labelFont.setPointSize(9);
    QFont boldLabel = labelFont;
    boldLabel.setBold(true);
    QFont cellFont = font();
    cellFont.setPointSize(8);

    p.setPen(Qt::black);
    p.setFont(titleFont);
    p.drawText(QRect(kMargin, kMargin, width() - 2 * kMargin, kTitleH),
               Qt::AlignLeft | Qt::AlignVCenter, m_title);
    if (!hasGrid() || !m_message.isEmpty()) {
        p.setFont(labelFont);
        p.setPen(QColor(0x59, 0x59, 0x59));
        p.drawText(rect().adjusted(kMargin, kMargin + kTitleH, -kMargin, -kMargin),
                   Qt::AlignCenter | Qt::TextWordWrap, m_message);
        return;
    }
    p.setFont(labelFont);
    p.setPen(QColor(0x33, 0x33, 0x33));
    p.drawText(QRect(kMargin, kMargin + kTitleH, width() - 2 * kMargin, kNoteH),
               Qt::AlignLeft | Qt::AlignVCenter,
               tr("Rows: block (layers.N) · columns: projection · %1 layers in the grid, %2 "
                  "outside · click a cell to select its layer, hover for its full name")
                   .arg(static_cast<int>(m_names.size()) - static_cast<int>(m_grid.outside.size()))
                   .arg(m_grid.outside.size()));

    // Column headers (projection) and the axis captions.
    p.setFont(boldLabel);
    p.drawText(QRect(kMargin, m_gridRect.top() - kHeaderH, kRowHeaderW - 4, kHeaderH),
               Qt::AlignRight | Qt::AlignVCenter, tr("block"));
    for (int c = 0; c < columnCount(); ++c) {
        const QRect header(m_gridRect.left() + c * m_cellW, m_gridRect.top() - kHeaderH, m_cellW,
                           kHeaderH);
        p.drawText(header, Qt::AlignCenter,
                   QFontMetrics(boldLabel).elidedText(m_grid.columns[c], Qt::ElideLeft,
                                                      m_cellW - 2));
    }
    p.setFont(labelFont);
    const bool everyRow = m_cellH >= QFontMetrics(labelFont).height() - 1;
    for (int r = 0; r < rowCount(); ++r) {
        if (!everyRow && r % 2)
            continue;
        p.drawText(QRect(kMargin, m_gridRect.top() + r * m_cellH, kRowHeaderW - 6, m_cellH),
                   Qt::AlignRight | Qt::AlignVCenter, QString::number(m_grid.blocks[r]));
    }
    // Cells.
    p.setFont(cellFont);
    QRect selectedRect;
    for (int r = 0; r < rowCount(); ++r)
        for (int c = 0; c < columnCount(); ++c) {
            const int i = m_grid.cell[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
            const QRect cell = cellRect(r, c);
            const QColor color = colorFor(i);
            p.fillRect(cell, color);
            p.setPen(QColor(0xff, 0xff, 0xff));
            p.drawRect(cell.adjusted(0, 0, -1, -1));
            const QString text = i >= 0 ? cellText(r, c) : QStringLiteral("–");
            p.setPen(i >= 0 ? textOn(color) : QColor(0x99, 0x99, 0x99));
            p.drawText(cell, Qt::AlignCenter, text);
            if (i >= 0 && m_names[i] == m_selected)
                selectedRect = cell;
        }
    // Colour bar with its caption and five ticks.
    p.setFont(boldLabel);
    p.setPen(Qt::black);
    // The caption above the bar, on two lines when it is long ("SQNR (dB),\nhigher is better").
    p.drawText(QRect(m_barRect.left() - 4, m_barRect.top() - 48, kBarW + kBarLabelsW, 44),
               Qt::AlignLeft | Qt::AlignBottom | Qt::TextWordWrap, colorBarTitle());
    for (int y = 0; y < m_barRect.height(); ++y) {
        const double t = 1.0 - static_cast<double>(y) / std::max(1, m_barRect.height() - 1);
        p.setPen(viridis(m_higherIsBetter ? t : 1.0 - t));
        p.drawLine(m_barRect.left(), m_barRect.top() + y, m_barRect.right(), m_barRect.top() + y);
    }
    p.setPen(QColor(0x59, 0x59, 0x59));
    p.drawRect(m_barRect.adjusted(0, 0, -1, -1));
    p.setFont(labelFont);
    for (int k = 0; k <= 4; ++k) {
        const double t = k / 4.0;
        const double v = m_logColor
                             ? std::exp(std::log(m_lo) + t * (std::log(m_hi) - std::log(m_lo)))
                             : m_lo + t * (m_hi - m_lo);
        const int y = m_barRect.bottom() - static_cast<int>(t * (m_barRect.height() - 1));
        p.drawLine(m_barRect.right() + 1, y, m_barRect.right() + 4, y);
        p.drawText(QRect(m_barRect.right() + 6, y - 8, kBarLabelsW - 10, 16),
                   Qt::AlignLeft | Qt::AlignVCenter,
                   (m_unit == QLatin1String("dB") ? QString::number(v, 'f', 1)
                                                  : rj::numberLabel(v, 3)) +
                       QLatin1Char(' ') + m_unit);
    }
    // Layers outside the grid.
    p.setFont(boldLabel);
    p.setPen(Qt::black);
    p.drawText(QRect(m_outsideRect.left(), m_outsideRect.top(), m_outsideRect.width(),
                     m_outsideRowH),
               Qt::AlignLeft | Qt::AlignVCenter, tr("Outside the grid"));
    p.setFont(labelFont);
    for (int k = 0; k < static_cast<int>(m_grid.outside.size()); ++k) {
        const int i = m_grid.outside[static_cast<std::size_t>(k)];
        const QRect row = outsideRect(k);
        const QRect swatch(row.left(), row.top() + 3, 12, row.height() - 6);
        p.fillRect(swatch, colorFor(i));
        p.setPen(QColor(0x59, 0x59, 0x59));
        p.drawRect(swatch.adjusted(0, 0, -1, -1));
        p.setPen(Qt::black);
        const QString text = m_names[i] + QStringLiteral("  ") + valueText(i, true);
        p.drawText(row.adjusted(18, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetrics(labelFont).elidedText(text, Qt::ElideMiddle, row.width() - 18));
        if (m_names[i] == m_selected)
            selectedRect = row;
    }
    if (!selectedRect.isNull()) {
        QPen pen(QColor(0xD5, 0x5E, 0x00));
        pen.setWidth(3);
        p.setPen(pen);
        p.setBrush(Qt::NoBrush);
        p.drawRect(selectedRect.adjusted(1, 1, -2, -2));
    }
}

} // namespace bitlens::widgets
