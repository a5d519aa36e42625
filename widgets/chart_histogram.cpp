#include "chart_histogram.h"

#include "chart_json.h"

#include "analysis/teaching.h"

#include <QAreaSeries>
#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QValueAxis>

#include <algorithm>
#include <array>
#include <cmath>

namespace bitlens::widgets {

namespace rj = reportjson;

namespace {

QString typeLabel(const QString& type)
{
    if (type == QLatin1String("fp4_e2m1") || type == QLatin1String("fp4"))
        return QStringLiteral("FP4 E2M1");
    if (type == QLatin1String("nf4"))
        return QStringLiteral("NF4");
    if (type == QLatin1String("fp8_e4m3"))
        return QStringLiteral("FP8 E4M3");
    if (type == QLatin1String("fp8_e5m2"))
        return QStringLiteral("FP8 E5M2");
    return type;
}

} // namespace

QuantGrid quantGrid(const QString& weightType, bool symmetric, double lo, double hi)
{
    QuantGrid grid;
    grid.values = analysis::codePoints(weightType.toStdString(), symmetric, lo, hi);
    if (grid.values.empty())
        return grid;
    const bool integer = weightType.startsWith(QLatin1String("int")) ||
                         weightType.startsWith(QLatin1String("uint"));
    if (analysis::isBlockFormatName(weightType.toStdString()))
        grid.description =
            QObject::tr("%1 grid of the block holding max|w| (blocks of %2; each block has its "
                        "own scale)")
                .arg(typeLabel(weightType))
                .arg(analysis::blockSizeOf(weightType.toStdString()));
    else
        grid.description = integer ? QObject::tr("%1 grid (per-tensor view)").arg(weightType)
                                   : QObject::tr("%1 code points × max|w| (per-tensor view)")
                                         .arg(typeLabel(weightType));
    return grid;
}

HistogramChart::HistogramChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("Histogram"));
}

void HistogramChart::setReport(const nlohmann::json& report)
{
    m_layers = nlohmann::json::array();
    m_schemeConfig = nlohmann::json::object();
    m_scheme.clear();
    try {
        if (const nlohmann::json* layers = rj::array(report, "layers"))
            m_layers = *layers;
        if (const nlohmann::json* scheme = rj::object(report, "scheme"))
            if (const nlohmann::json* config = rj::object(*scheme, "config"))
                m_schemeConfig = *config;
        m_scheme = rj::schemeName(report);
    } catch (const std::exception&) {
        m_layers = nlohmann::json::array();
    }
    const QStringList names = layerNames();
    if (!names.contains(m_layer))
        m_layer = names.isEmpty() ? QString() : names.first();
    rebuild();
}

QStringList HistogramChart::layerNames() const
{
    QStringList names;
    for (const nlohmann::json& layer : m_layers) {
        const QString name = rj::text(layer, "name");
        if (!name.isEmpty())
            names << name;
    }
    return names;
}

void HistogramChart::setLayer(const QString& name)
{
    m_layer = name;
    rebuild();
}

void HistogramChart::setMode(Mode mode)
{
    m_mode = mode;
    rebuild();
}

void HistogramChart::setLogScale(bool on)
{
    m_logScale = on;
    rebuild();
}

const nlohmann::json* HistogramChart::currentLayer() const
{
    for (const nlohmann::json& layer : m_layers)
        if (rj::text(layer, "name") == m_layer)
            return &layer;
    return nullptr;
}

void HistogramChart::rebuild()
{
    m_area = nullptr;
    m_gridLines.clear();
    m_clipLines.clear();
    m_calibratorLines.clear();
    m_binCount = 0;
    m_gridLevels = 0;
    m_gridStride = 1;
    m_gridLabel.clear();
    m_clipLabel.clear();
    m_clipWhy.clear();
    try {
        build();
    } catch (const std::exception& error) {
        m_gridLines.clear();
        m_clipLines.clear();
        m_area = nullptr;
        showMessage(tr("No data: malformed report (%1)").arg(QString::fromUtf8(error.what())));
    }
}

QLineSeries* HistogramChart::addVerticalLine(double x, double y0, double y1, const QPen& pen,
                                             const QString& name)
{
    auto* line = new QLineSeries;
    line->setName(name);
    line->append(x, y0);
    line->append(x, y1);
    line->setPen(pen);
    chart()->addSeries(line);
    for (QAbstractAxis* axis : chart()->axes())
        line->attachAxis(axis);
    if (name.isEmpty())
        for (QLegendMarker* marker : chart()->legend()->markers(line))
            marker->setVisible(false);
    return line;
}

void HistogramChart::build()
{
    static const char* const kKeys[] = {"error_histogram", "weight_histogram", "act_histogram"};
    const QString modeName = m_mode == Mode::Error     ? tr("output error")
                             : m_mode == Mode::Weights ? tr("weights")
                                                       : tr("input activations");
    // Layer first and short: the title must fit a half-width panel at 1280x800.
    setChartTitle(m_layer.isEmpty() ? tr("Histogram of %1").arg(modeName)
                                    : tr("%2: %1").arg(modeName, m_layer));
    const nlohmann::json* layer = currentLayer();
    if (!layer) {
        showMessage(m_layers.empty() ? tr("No data yet: run a scheme (Run, Ctrl+R), then pick "
                                          "a layer")
                                     : tr("No data: no layer “%1”").arg(m_layer));
        return;
    }
    const rj::Histogram hist = rj::histogram(*layer, kKeys[static_cast<int>(m_mode)]);
    if (!hist.valid()) {
        showMessage(m_mode == Mode::Activations
                        ? tr("No data: this layer's input activations were not recorded "
                             "(float activations or dynamic scheme)")
                        : tr("No data: the report has no %1 for “%2”")
                              .arg(QLatin1String(kKeys[static_cast<int>(m_mode)]), m_layer));
        return;
    }
    clearChart();
    markHasData();
    m_edges = hist.edges;
    m_counts = hist.counts;
    m_binCount = static_cast<int>(hist.counts.size());

    const double maxCount = std::max(1.0, *std::max_element(m_counts.begin(), m_counts.end()));
    // A log axis cannot show 0: empty bins sit on a baseline half a count high.
    const double base = m_logScale ? 0.5 : 0.0;
    auto* upper = new QLineSeries;
    auto* lower = new QLineSeries;
    for (std::size_t i = 0; i < m_counts.size(); ++i) {
        const double y = std::max(base, m_counts[i]);
        upper->append(m_edges[i], y);
        upper->append(m_edges[i + 1], y);
        lower->append(m_edges[i], base);
        lower->append(m_edges[i + 1], base);
    }
    m_area = new QAreaSeries(upper, lower);
    m_area->setName(m_mode == Mode::Error       ? tr("Quantized − float output, per bin")
                    : m_mode == Mode::Weights   ? tr("Float weights, per bin")
                                                : tr("Float input activations, per bin"));
    QColor fill = chartColor(0);
    fill.setAlpha(150);
    m_area->setBrush(fill);
    m_area->setPen(QPen(chartColor(0).darker(130), 1.0));
    chart()->addSeries(m_area);

    m_xTitle = m_mode == Mode::Error     ? tr("Error (output units)")
               : m_mode == Mode::Weights ? tr("Weight value (float units)")
                                         : tr("Activation value (input units)");
    QValueAxis* axisX = addValueAxis(m_xTitle, Qt::AlignBottom);
    double xMin = m_edges.front();
    double xMax = m_edges.back();

    const nlohmann::json* clip = m_mode == Mode::Activations ? rj::object(*layer, "act_clip")
                                                             : nullptr;
    double clipLo = 0.0;
    double clipHi = 0.0;
    bool hasClip = false;
    if (clip) {
        const auto lo = rj::number(*clip, "lo");
        const auto hi = rj::number(*clip, "hi");
        hasClip = lo.has_value() && hi.has_value();
        clipLo = lo.value_or(0.0);
        clipHi = hi.value_or(0.0);
    }
    if (hasClip) {
        xMin = std::min(xMin, clipLo);
        xMax = std::max(xMax, clipHi);
    }
    const nlohmann::json* calibrators = nullptr;
    if (m_mode == Mode::Activations && layer->contains("calibrators") &&
        (*layer)["calibrators"].is_array())
        calibrators = &(*layer)["calibrators"];
    if (calibrators)
        for (const auto& c : *calibrators)
            if (const auto hi = rj::number(c, "hi"))
                xMax = std::max(xMax, *hi);
    const double pad = (xMax - xMin) * 0.02 + 1e-12;
    setRoundTicks(axisX, xMin - pad, xMax + pad, 10);
    m_area->attachAxis(axisX);

    const double yTop = m_logScale ? maxCount * 2.0 : maxCount * 1.08;
    if (m_logScale) {
        auto* axisY = new QLogValueAxis;
        styleAxis(axisY, tr("Count (log scale)"));
        axisY->setBase(10.0);
        axisY->setLabelFormat(QStringLiteral("%g"));
        axisY->setRange(base, yTop);
        chart()->addAxis(axisY, Qt::AlignLeft);
        m_area->attachAxis(axisY);
    } else {
        QValueAxis* axisY = addValueAxis(tr("Count"), Qt::AlignLeft);
        setRoundTicks(axisY, 0.0, yTop, 6);
        m_area->attachAxis(axisY);
    }
    connect(m_area, &QAreaSeries::hovered, this, &HistogramChart::onHistogramHovered);

    if (m_mode == Mode::Weights) {
        QString type = rj::text(*layer, "weight_type");
        if (type.isEmpty())
            type = rj::text(m_schemeConfig, "weight_type");
        const nlohmann::json* symmetric = rj::member(m_schemeConfig, "weight_symmetric");
        bool isSymmetric = !(symmetric && symmetric->is_boolean() && !symmetric->get<bool>());
        const QString config = rj::text(*layer, "config");
        if (config.contains(QLatin1String(" asym")))
            isSymmetric = false;
        else if (config.contains(QLatin1String(" sym")))
            isSymmetric = true;
        const std::vector<double> range = rj::numbers(rj::array(*layer, "weight_range"));
        QuantGrid grid;
        if (range.size() == 2)
            grid = quantGrid(type, isSymmetric, range[0], range[1]);
        m_gridLevels = static_cast<int>(grid.values.size());
        if (!grid.values.empty()) {
            m_gridStride = (m_gridLevels + kMaxGridLines - 1) / kMaxGridLines;
            m_gridLabel = grid.description;
            if (m_gridStride > 1)
                m_gridLabel += tr(", every %1th of %2 values").arg(m_gridStride).arg(m_gridLevels);
            else
                m_gridLabel += tr(", %1 values").arg(m_gridLevels);
            QPen pen(chartColor(3));
            pen.setWidthF(0.9);
            // Thin from the middle outwards so that 0 (exact in every symmetric type) is drawn.
            const int centre = m_gridLevels / 2;
            for (int i = centre % m_gridStride; i < m_gridLevels; i += m_gridStride)
                m_gridLines.push_back(addVerticalLine(grid.values[static_cast<std::size_t>(i)],
                                                      base, yTop,
                                                      pen, m_gridLines.empty() ? m_gridLabel
                                                                               : QString()));
        } else if (!type.isEmpty()) {
            m_gridLabel = tr("%1: no grid drawn (finer than the bins)").arg(type);
        }
        const QString sub = m_gridLines.empty() ? m_gridLabel : QString();
        if (!sub.isEmpty())
            setChartTitle(chart()->title() + QStringLiteral(" (") + sub + QLatin1Char(')'));
    }

    if (hasClip) {
        const QString method = rj::text(*clip, "method");
        m_clipWhy = rj::text(*clip, "why");
        m_clipLabel = tr("%1 clip [%2, %3]")
                          .arg(method.isEmpty() ? tr("observer") : method,
                               rj::numberLabel(clipLo), rj::numberLabel(clipHi));
        QPen pen(chartColor(3));
        pen.setWidthF(2.2);
        pen.setStyle(Qt::DashLine);
        for (const double x : {clipLo, clipHi}) {
            QLineSeries* line = addVerticalLine(x, base, yTop, pen,
                                                m_clipLines.empty() ? m_clipLabel : QString());
            connect(line, &QLineSeries::hovered, this,
                    [this, x](const QPointF&, bool state) {
                        if (!state) {
                            hideToolTip();
                            return;
                        }
                        showToolTip(QStringLiteral("<b>%1</b> at %2<br>%3")
                                        .arg(m_clipLabel.toHtmlEscaped(), rj::numberLabel(x, 6),
                                             m_clipWhy.toHtmlEscaped()));
                    });
            m_clipLines.push_back(line);
        }
    }

    // The calibration overlay: where every calibrator would clip, and the SQNR each gives.
    if (calibrators) {
        int index = 0;
        for (const auto& c : *calibrators) {
            const auto hi = rj::number(c, "hi");
            if (!hi)
                continue;
            const auto sqnr = rj::number(c, "sqnr_db");
            const QString label = tr("%1 → %2")
                                      .arg(rj::text(c, "method"),
                                           sqnr ? tr("%1 dB").arg(*sqnr, 0, 'f', 1) : tr("exact"));
            QPen pen(chartColor(4 + index++));
            pen.setWidthF(1.6);
            pen.setStyle(Qt::DotLine);
            QLineSeries* line = addVerticalLine(*hi, base, yTop, pen, label);
            const QString why = rj::text(c, "why");
            const double x = *hi;
            connect(line, &QLineSeries::hovered, this,
                    [this, label, why, x](const QPointF&, bool state) {
                        if (!state) {
                            hideToolTip();
                            return;
                        }
                        showToolTip(QStringLiteral("<b>%1</b>, clip at %2<br>%3")
                                        .arg(label.toHtmlEscaped(), rj::numberLabel(x, 6),
                                             why.toHtmlEscaped()));
                    });
            m_calibratorLines.push_back(line);
        }
    }
    // Six entries (the histogram, the observer's clip, four calibrators) do not fit in one row
    // under a chart half the window wide (they were cut to "Flo… mi… mi… per…"): with the
    // overlay the legend stands to the right, one entry per line.
    chart()->legend()->setAlignment(m_calibratorLines.empty() ? Qt::AlignBottom : Qt::AlignRight);
    chart()->legend()->setShowToolTips(true);
}

void HistogramChart::onHistogramHovered(const QPointF& point, bool state)
{
    if (!state || m_edges.size() < 2) {
        hideToolTip();
        return;
    }
    const auto it = std::upper_bound(m_edges.begin(), m_edges.end(), point.x());
    const auto bin = static_cast<std::size_t>(
        std::clamp<std::ptrdiff_t>(it - m_edges.begin() - 1, 0,
                                   static_cast<std::ptrdiff_t>(m_counts.size()) - 1));
    showToolTip(tr("%1 in [%2, %3)<br><b>count %4</b>")
                    .arg(m_xTitle.toHtmlEscaped(), rj::numberLabel(m_edges[bin], 6),
                         rj::numberLabel(m_edges[bin + 1], 6))
                    .arg(m_counts[bin], 0, 'f', 0));
}

} // namespace bitlens::widgets
