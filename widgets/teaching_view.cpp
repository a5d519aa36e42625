#include "teaching_view.h"

#include "chart_histogram.h"

#include <QAreaSeries>
#include <QCategoryAxis>
#include <QChart>
#include <QComboBox>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QSlider>
#include <QSpinBox>
#include <QTabWidget>
#include <QValueAxis>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

namespace bitlens::widgets {

namespace {

bool isIntegerFormat(const QString& format)
{
    return analysis::isIntegerFormat(format.toStdString());
}

/// "0.0123", "1.2e-05": short labels for numbers of any magnitude.
QString shortNumber(double v)
{
    return QString::number(v, 'g', 3);
}

} // namespace

analysis::TeachingSettings toCore(const TeachingSettings& settings)
{
    analysis::TeachingSettings core;
    core.format = settings.format.toStdString();
    core.bits = settings.bits;
    core.clipFraction = settings.clipFraction;
    core.groupSize = settings.groupSize;
    return core;
}

std::vector<float> layerWeights(const Model& model, const std::string& layer)
{
    return analysis::layerWeightValues(model, layer);
}

QuantErrorStats quantizationError(const std::vector<float>& values,
                                  const TeachingSettings& settings)
{
    return analysis::quantizationError(values, toCore(settings));
}

// ---------------------------------------------------------------------------------------------

WeightGridChart::WeightGridChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("Weight distribution and code points"));
}

void WeightGridChart::setValues(const QString& layerName, const std::vector<float>& values)
{
    m_layerName = layerName;
    m_histogram = analysis::valueHistogram(values, kBins);
    rebuild();
}

void WeightGridChart::setSettings(const TeachingSettings& settings)
{
    m_settings = settings;
    rebuild();
}

void WeightGridChart::rebuild()
{
    m_codePoints = 0;
    m_drawnCodePoints = 0;
    m_gridLabel.clear();
    if (m_histogram.counts.empty()) {
        setChartTitle(tr("Weight distribution and code points"));
        showMessage(tr("No data: choose a layer with float weights"));
        return;
    }
    clearChart();
    markHasData();
    const double clip = m_histogram.absMax * std::clamp(m_settings.clipFraction, 0.05, 1.0);
    const QString format = isIntegerFormat(m_settings.format)
                               ? QStringLiteral("int%1").arg(m_settings.bits)
                               : m_settings.format;
    const std::int64_t block = analysis::blockSizeOf(m_settings.format.toStdString());
    const QString granularity =
        block > 0 ? tr("blocks of %1; grid of the block holding max|w|").arg(block)
        : m_settings.groupSize > 0 ? tr("group size %1").arg(m_settings.groupSize)
                                   : tr("per-tensor");
    setChartTitle(tr("%1: %2 weights, %3 code points (clip %4 × max|w|, %5)")
                      .arg(m_layerName.isEmpty() ? tr("Tensor") : m_layerName)
                      .arg(m_histogram.size)
                      .arg(format)
                      .arg(m_settings.clipFraction, 0, 'f', 2)
                      .arg(granularity));

    const double lo = m_histogram.lo;
    const double hi = m_histogram.hi;
    const double width = (hi - lo) / kBins;
    auto* upper = new QLineSeries;
    double maxCount = 0.0;
    for (int i = 0; i < kBins; ++i) {
        const double c = m_histogram.counts[static_cast<std::size_t>(i)];
        upper->append(lo + i * width, c);
        upper->append(lo + (i + 1) * width, c);
        maxCount = std::max(maxCount, c);
    }
    auto* area = new QAreaSeries(upper);
    area->setName(tr("weights (%1 bins)").arg(kBins));
    QColor fill = chartColor(0);
    fill.setAlpha(150);
    area->setBrush(fill);
    area->setPen(QPen(chartColor(0).darker(130), 1.0));
    chart()->addSeries(area);

    const double xMin = std::min(lo, -clip);
    const double xMax = std::max(hi, clip);
    const double pad = (xMax - xMin) * 0.02;
    QValueAxis* axisX = addValueAxis(tr("Weight value"), Qt::AlignBottom);
    setRoundTicks(axisX, xMin - pad, xMax + pad, 9);
    QValueAxis* axisY = addValueAxis(tr("Count (weights per bin)"), Qt::AlignLeft);
    const double yTop = std::max(1.0, maxCount) * 1.1;
    setRoundTicks(axisY, 0.0, yTop, 6);
    area->attachAxis(axisX);
    area->attachAxis(axisY);

    const std::vector<double> grid = analysis::teachingCodePoints(toCore(m_settings), clip);
    m_codePoints = static_cast<int>(grid.size());
    if (m_codePoints == 0)
        return;
    // Thin as the report's histogram does: at most kMaxGridLines, from the middle outwards so
    // that 0 is drawn.
    const int stride =
        (m_codePoints + HistogramChart::kMaxGridLines - 1) / HistogramChart::kMaxGridLines;
    // One comb-shaped series: up each code point and back along the axis, so the grid is one
    // legend entry however many lines it has.
    auto* comb = new QLineSeries;
    const double tooth = yTop * 0.96;
    for (int i = (m_codePoints / 2) % stride; i < m_codePoints; i += stride) {
        const double v = grid[static_cast<std::size_t>(i)];
        comb->append(v, 0.0);
        comb->append(v, tooth);
        comb->append(v, 0.0);
        ++m_drawnCodePoints;
    }
    m_gridLabel = tr("%1 code points within ±%2").arg(format).arg(shortNumber(clip));
    m_gridLabel += stride > 1 ? tr(" (every %1th of %2 drawn)").arg(stride).arg(m_codePoints)
                              : tr(" (%1)").arg(m_codePoints);
    comb->setName(m_gridLabel);
    QPen pen(chartColor(3)); // vermillion, as the report's weight histogram draws its grid
    pen.setWidthF(1.4);
    comb->setPen(pen);
    chart()->addSeries(comb);
    comb->attachAxis(axisX);
    comb->attachAxis(axisY);
}

// ---------------------------------------------------------------------------------------------

namespace {

/// Values in the octave [1, 2): the mantissa's resolution (2^mantissa bits).
int valuesPerOctave(const std::vector<double>& values)
{
    return static_cast<int>(std::count_if(values.begin(), values.end(),
                                          [](double v) { return v >= 1.0 && v < 2.0; }));
}

} // namespace

FloatFormatsChart::FloatFormatsChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("FP8 representable values: E4M3 vs E5M2 (positive half)"));
    std::vector<double> e4m3;
    std::vector<double> e5m2;
    try {
        e4m3 = analysis::float8PositiveValues("fp8_e4m3");
        e5m2 = analysis::float8PositiveValues("fp8_e5m2");
    } catch (const std::exception& e) {
        showMessage(tr("No data: %1").arg(QString::fromUtf8(e.what())));
        return;
    }
    if (e4m3.empty() || e5m2.empty()) {
        showMessage(tr("No data"));
        return;
    }
    markHasData();
    m_e4m3Max = e4m3.back();
    m_e5m2Max = e5m2.back();

    auto* axisX = new QLogValueAxis;
    styleAxis(axisX, tr("Value (log scale; subnormals at the left, max at the right)"));
    axisX->setBase(16.0);
    axisX->setLabelFormat(QStringLiteral("%.5g"));
    axisX->setRange(std::min(e4m3.front(), e5m2.front()) / 2.0, m_e5m2Max * 2.0);
    axisX->setMinorTickCount(3); // minor lines every factor of 2
    chart()->addAxis(axisX, Qt::AlignBottom);
    auto* axisY = new QCategoryAxis;
    styleAxis(axisY, tr("Format"));
    axisY->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    axisY->append(QStringLiteral("E5M2"), 1.0);
    axisY->append(QStringLiteral("E4M3"), 2.0);
    axisY->setRange(0.4, 2.6);
    chart()->addAxis(axisY, Qt::AlignLeft);

    const auto addRow = [&](const std::vector<double>& values, double y, const QString& name,
                            int color) {
        auto* series = new QScatterSeries;
        series->setName(tr("%1: %2 positive values, max %3, %4 per octave")
                            .arg(name)
                            .arg(values.size())
                            .arg(values.back(), 0, 'g', 6)
                            .arg(valuesPerOctave(values)));
        series->setMarkerSize(7.0);
        series->setColor(chartColor(color));
        series->setBorderColor(chartColor(color).darker(140));
        for (const double v : values)
            series->append(v, y);
        chart()->addSeries(series);
        series->attachAxis(axisX);
        series->attachAxis(axisY);
        showXOnHover(series, name, 8);
        return series;
    };
    m_e4m3 = addRow(e4m3, 2.0, QStringLiteral("E4M3 (FN)"), 0);
    m_e5m2 = addRow(e5m2, 1.0, QStringLiteral("E5M2"), 1);
}

int FloatFormatsChart::e4m3Count() const
{
    return m_e4m3 ? static_cast<int>(m_e4m3->count()) : 0;
}

int FloatFormatsChart::e5m2Count() const
{
    return m_e5m2 ? static_cast<int>(m_e5m2->count()) : 0;
}

// ---------------------------------------------------------------------------------------------

namespace {

/// NF4's codes are the quantiles of N(0, 1) at evenly spaced probabilities, divided by the
/// largest one, Phi^-1(0.9677) = 1.848 (bitsandbytes' create_normal_map offset). In code units
/// the bell they follow is therefore N(0, sigma = 1 / 1.848 = 0.541).
constexpr double kNf4Sigma = 1.0 / 1.848;

} // namespace

FourBitGridChart::FourBitGridChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("4-bit codes of a block with max |w| = 1: NF4 follows the bell, int4 is "
                     "uniform, MX's top code lands past the block"));
    markHasData();
    auto* axisX = addValueAxis(tr("Value (scaled so the largest code is 1)"), Qt::AlignBottom);
    setRoundTicks(axisX, -1.1, 1.1, 11);
    auto* axisRows = new QCategoryAxis;
    styleAxis(axisRows, tr("Format"));
    axisRows->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    axisRows->append(QStringLiteral("NVFP4"), 1.0);
    axisRows->append(QStringLiteral("MXFP4"), 2.0);
    axisRows->append(QStringLiteral("FP4 E2M1"), 3.0);
    axisRows->append(QStringLiteral("int4"), 4.0);
    axisRows->append(QStringLiteral("NF4"), 5.0);
    axisRows->setRange(0.4, 5.6);
    chart()->addAxis(axisRows, Qt::AlignLeft);
    const double peak = 1.0 / (kNf4Sigma * std::sqrt(2.0 * M_PI));
    auto* axisDensity = addValueAxis(tr("Density of N(0, 0.541²) (1 / unit)"), Qt::AlignRight);
    setRoundTicks(axisDensity, 0.0, peak * 5.6 / 5.0, 6);

    m_density = new QLineSeries;
    m_density->setName(tr("N(0, 0.541²) density"));
    for (int i = 0; i <= 200; ++i) {
        const double x = -1.1 + 2.2 * i / 200.0;
        m_density->append(x, peak * std::exp(-0.5 * (x / kNf4Sigma) * (x / kNf4Sigma)));
    }
    QPen pen(chartColor(6));
    pen.setWidthF(2.0);
    pen.setStyle(Qt::DashLine);
    m_density->setPen(pen);
    chart()->addSeries(m_density);
    m_density->attachAxis(axisX);
    m_density->attachAxis(axisDensity);

    struct Row {
        QString type;
        QString name;
        double y;
    };
    // The block formats' scales for a block whose max |w| is 1, from core.
    std::vector<float> unitBlock(32, 0.0f);
    unitBlock[0] = 1.0f;
    const analysis::BlockView mx = analysis::blockView(unitBlock, "mxfp4", 0);
    const analysis::BlockView nv = analysis::blockView(unitBlock, "nvfp4", 0);
    const Row rows[] = {
        {QStringLiteral("nf4"), QStringLiteral("NF4"), 5.0},
        {QStringLiteral("int4"), QStringLiteral("int4 (symmetric)"), 4.0},
        {QStringLiteral("fp4_e2m1"), QStringLiteral("FP4 × 1/6"), 3.0},
        {QStringLiteral("mxfp4"),
         tr("MXFP4 × 2^%1 (top code %2 unused)")
             .arg(std::lround(std::log2(mx.scale)))
             .arg(mx.elementMax * mx.scale, 0, 'g', 3),
         2.0},
        {QStringLiteral("nvfp4"),
         tr("NVFP4 × %1 × 1/%2").arg(nv.e4m3).arg(1.0 / nv.tensorScale, 0, 'f', 0), 1.0}};
    int color = 0;
    for (const Row& row : rows) {
        const QuantGrid grid = quantGrid(row.type, true, -1.0, 1.0);
        auto* series = new QScatterSeries;
        series->setName(tr("%1: %2 values").arg(row.name).arg(grid.values.size()));
        series->setMarkerSize(9.0);
        series->setColor(chartColor(color));
        series->setBorderColor(chartColor(color).darker(140));
        ++color;
        for (const double v : grid.values)
            series->append(v, row.y);
        chart()->addSeries(series);
        series->attachAxis(axisX);
        series->attachAxis(axisRows);
        showXOnHover(series, row.name);
        m_rows.push_back(series);
    }
}

std::vector<int> FourBitGridChart::rowCounts() const
{
    std::vector<int> counts;
    for (const QScatterSeries* series : m_rows)
        counts.push_back(static_cast<int>(series->count()));
    return counts;
}

// ---------------------------------------------------------------------------------------------

namespace {

/// "E8M0 0x7B = 2^-4" / "E4M3 0x5C = 40 × tensor scale 0.000153": the stored scale of a block.
QString storedScaleText(const analysis::BlockView& b)
{
    const QString byte =
        QStringLiteral("0x") + QString::number(b.scaleByte, 16).rightJustified(2, QLatin1Char('0')).toUpper();
    if (b.tensorScale > 0.0)
        return QObject::tr("E4M3 %1 = %2 × tensor scale %3 (float32)")
            .arg(byte)
            .arg(b.e4m3, 0, 'g', 6)
            .arg(b.tensorScale, 0, 'g', 4);
    return QObject::tr("E8M0 %1 = 2^%2")
        .arg(byte)
        .arg(b.scaleByte - 127);
}

} // namespace

BlockGridChart::BlockGridChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("One block and its element grid"));
    showMessage(tr("No data: choose a layer with float weights (Layers table or Histograms tab), "
                   "then a block format and a block"));
}

void BlockGridChart::setBlock(const QString& layerName, const analysis::BlockView& view)
{
    m_gridCount = 0;
    m_pointCount = 0;
    if (!view.valid || view.values.empty()) {
        setChartTitle(tr("One block and its element grid"));
        showMessage(tr("No data: choose a layer with float weights (Layers table or Histograms "
                       "tab), then a block format and a block"));
        return;
    }
    clearChart();
    markHasData();
    const QString format = QString::fromStdString(view.format);
    setChartTitle(tr("%1, block %2 of %3 (%4 elements, max|w| %5): scale %6")
                      .arg(layerName.isEmpty() ? tr("Tensor") : layerName)
                      .arg(view.block)
                      .arg(view.blocks)
                      .arg(format)
                      .arg(view.amax, 0, 'g', 3)
                      .arg(storedScaleText(view)));
    // The x range: the block's values and its largest code, so saturation shows.
    const double top = std::max(view.amax, view.grid.back()) * 1.08;
    QValueAxis* axisX = addValueAxis(tr("Weight value"), Qt::AlignBottom);
    setRoundTicks(axisX, -top, top, 9);
    auto* axisRows = new QCategoryAxis;
    styleAxis(axisRows, tr("Row"));
    axisRows->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    axisRows->append(tr("grid"), 1.0);
    axisRows->append(tr("quantized"), 2.0);
    axisRows->append(tr("weights"), 3.0);
    axisRows->setRange(0.4, 3.6);
    chart()->addAxis(axisRows, Qt::AlignLeft);

    // Grid: thinned from the middle outwards to at most kMaxGridLines, as the grid tab does.
    const int n = static_cast<int>(view.grid.size());
    const int stride =
        (n + HistogramChart::kMaxGridLines - 1) / HistogramChart::kMaxGridLines;
    auto* grid = new QScatterSeries;
    grid->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    grid->setMarkerSize(6.0);
    grid->setColor(chartColor(3));
    grid->setBorderColor(chartColor(3).darker(140));
    for (int i = (n / 2) % stride; i < n; i += stride) {
        const double v = view.grid[static_cast<std::size_t>(i)];
        if (std::abs(v) > top)
            continue;
        grid->append(v, 1.0);
        ++m_gridCount;
    }
    grid->setName(tr("%1 grid: %2 values × scale %3%4")
                      .arg(format)
                      .arg(n)
                      .arg(view.scale, 0, 'g', 4)
                      .arg(stride > 1 ? tr(" (every %1th drawn)").arg(stride) : QString()));
    auto* quantized = new QScatterSeries;
    quantized->setName(tr("quantized (SQNR %1)")
                           .arg(std::isinf(view.sqnrDb) ? tr("∞, exact")
                                                        : tr("%1 dB").arg(view.sqnrDb, 0, 'f', 1)));
    quantized->setMarkerSize(9.0);
    quantized->setColor(chartColor(1));
    quantized->setBorderColor(chartColor(1).darker(140));
    auto* weights = new QScatterSeries;
    weights->setName(tr("the block's %1 weights").arg(view.values.size()));
    weights->setMarkerSize(9.0);
    weights->setColor(chartColor(0));
    weights->setBorderColor(chartColor(0).darker(140));
    for (std::size_t i = 0; i < view.values.size(); ++i) {
        weights->append(view.values[i], 3.0);
        quantized->append(view.quantized[i], 2.0);
    }
    m_pointCount = static_cast<int>(view.values.size());
    for (QScatterSeries* series : {weights, quantized, grid}) {
        chart()->addSeries(series);
        series->attachAxis(axisX);
        series->attachAxis(axisRows);
        showXOnHover(series, series->name());
    }
}

BlockScaleStaircaseChart::BlockScaleStaircaseChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("Block scales along the tensor"));
    showMessage(tr("No data: choose a layer with float weights, then a block format"));
}

void BlockScaleStaircaseChart::setValues(const QString& layerName,
                                         const std::vector<float>& values, const QString& format,
                                         int marked)
{
    m_blocks = 0;
    m_distinct = 0;
    const std::string name = format.toStdString();
    const std::vector<double> scales =
        analysis::blockScales(values, name, BlockScaleView::kStaircaseBlocks);
    if (scales.empty()) {
        setChartTitle(tr("Block scales along the tensor"));
        showMessage(tr("No data: choose a layer with float weights, then a block format"));
        return;
    }
    clearChart();
    markHasData();
    const std::int64_t size = analysis::blockSizeOf(name);
    const bool nv = format == QLatin1String("nvfp4");
    m_blocks = static_cast<int>(scales.size());
    std::vector<double> sorted = scales;
    std::sort(sorted.begin(), sorted.end());
    m_distinct = static_cast<int>(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
    setChartTitle(tr("%1 in %2: the first %3 block scales take %4 distinct values (%5)")
                      .arg(layerName.isEmpty() ? tr("Tensor") : layerName)
                      .arg(format)
                      .arg(m_blocks)
                      .arg(m_distinct)
                      .arg(nv ? tr("E4M3: 8 steps per octave") : tr("E8M0: whole octaves")));
    // The ideal scale each block stands for: its max|w| over the element format's largest
    // value (what a float32 scale would be).
    const double elementMax = analysis::blockElementMax(name);
    auto* stored = new QLineSeries;
    stored->setName(tr("stored block scale, log2"));
    auto* ideal = new QLineSeries;
    ideal->setName(tr("max|w| of the block / %1 (a float32 scale), log2").arg(elementMax));
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (int b = 0; b < m_blocks; ++b) {
        const double s = std::log2(scales[static_cast<std::size_t>(b)]);
        stored->append(b, s);
        stored->append(b + 1, s);
        double amax = 0.0;
        const std::size_t begin = static_cast<std::size_t>(b * size);
        for (std::size_t i = begin; i < std::min(values.size(), begin + std::size_t(size)); ++i)
            if (std::isfinite(values[i]))
                amax = std::max(amax, std::abs(double(values[i])));
        lo = std::min(lo, s);
        hi = std::max(hi, s);
        if (amax > 0.0) {
            const double t = std::log2(amax / elementMax);
            ideal->append(b + 0.5, t);
            lo = std::min(lo, t);
            hi = std::max(hi, t);
        }
    }
    QValueAxis* axisX = addValueAxis(tr("Block (%1 elements each)").arg(size), Qt::AlignBottom);
    setRoundTicks(axisX, 0.0, m_blocks, 8);
    QValueAxis* axisY = addValueAxis(tr("log2(scale)"), Qt::AlignLeft);
    setRoundTicks(axisY, std::floor(lo) - 0.5, std::ceil(hi) + 0.5, 5);
    QPen pen(chartColor(0));
    pen.setWidthF(2.0);
    stored->setPen(pen);
    QPen idealPen(chartColor(6));
    idealPen.setWidthF(1.4);
    idealPen.setStyle(Qt::DashLine);
    ideal->setPen(idealPen);
    for (QLineSeries* series : {stored, ideal}) {
        chart()->addSeries(series);
        series->attachAxis(axisX);
        series->attachAxis(axisY);
    }
    if (marked >= 0 && marked < m_blocks) {
        auto* mark = new QScatterSeries;
        mark->setName(tr("block %1 (shown above)").arg(marked));
        mark->setMarkerSize(11.0);
        mark->setColor(chartColor(3));
        mark->append(marked + 0.5, std::log2(scales[static_cast<std::size_t>(marked)]));
        chart()->addSeries(mark);
        mark->attachAxis(axisX);
        mark->attachAxis(axisY);
    }
}

QStringList BlockScaleView::formats()
{
    QStringList out;
    for (const std::string& name : analysis::blockFormatNames())
        out << QString::fromStdString(name);
    return out;
}

BlockScaleView::BlockScaleView(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    auto* controls = new QHBoxLayout;
    m_formatCombo = new QComboBox;
    m_formatCombo->addItems(formats());
    m_formatCombo->setToolTip(tr("OCP MX (blocks of 32, E8M0 power-of-two scales) or NVFP4 "
                                 "(blocks of 16, E4M3 scales under a float32 tensor scale)"));
    controls->addWidget(new QLabel(tr("Block format:")));
    controls->addWidget(m_formatCombo);
    controls->addSpacing(12);
    m_blockSpin = new QSpinBox;
    m_blockSpin->setRange(0, 0);
    m_blockSpin->setToolTip(tr("Which block of the tensor (flattened) to show"));
    controls->addWidget(new QLabel(tr("Block:")));
    controls->addWidget(m_blockSpin);
    controls->addStretch(1);
    layout->addLayout(controls);
    m_readout = new QLabel;
    m_readout->setWordWrap(true);
    m_readout->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_readout);
    m_gridChart = new BlockGridChart;
    layout->addWidget(m_gridChart, 1);
    m_staircase = new BlockScaleStaircaseChart;
    layout->addWidget(m_staircase, 1);
    connect(m_formatCombo, &QComboBox::currentTextChanged, this, &BlockScaleView::setFormat);
    connect(m_blockSpin, &QSpinBox::valueChanged, this, &BlockScaleView::setBlockIndex);
    rebuild();
}

QString BlockScaleView::format() const { return m_formatCombo->currentText(); }

void BlockScaleView::setValues(const QString& layerName,
                               std::shared_ptr<const std::vector<float>> values)
{
    m_layerName = layerName;
    m_values = std::move(values);
    rebuild();
}

void BlockScaleView::setFormat(const QString& format)
{
    if (!formats().contains(format))
        return;
    if (m_formatCombo->currentText() != format) {
        const QSignalBlocker block(m_formatCombo);
        m_formatCombo->setCurrentText(format);
    }
    rebuild();
}

void BlockScaleView::setBlockIndex(int block)
{
    if (m_blockSpin->value() != block) {
        const QSignalBlocker blocker(m_blockSpin);
        m_blockSpin->setValue(std::clamp(block, m_blockSpin->minimum(), m_blockSpin->maximum()));
    }
    rebuild();
}

void BlockScaleView::rebuild()
{
    const std::string name = format().toStdString();
    const std::int64_t size = analysis::blockSizeOf(name);
    const std::int64_t n = m_values ? static_cast<std::int64_t>(m_values->size()) : 0;
    const int blocks = size > 0 ? static_cast<int>((n + size - 1) / size) : 0;
    {
        const QSignalBlocker blocker(m_blockSpin);
        m_blockSpin->setRange(0, std::max(0, blocks - 1));
    }
    static const std::vector<float> kEmpty;
    const std::vector<float>& values = m_values ? *m_values : kEmpty;
    m_block = analysis::blockView(values, name, m_blockSpin->value());
    m_gridChart->setBlock(m_layerName, m_block);
    m_staircase->setValues(m_layerName, values, format(),
                           m_blockSpin->value() < kStaircaseBlocks ? m_blockSpin->value() : -1);
    m_readout->setText(readoutText());
}

QString BlockScaleView::readoutText() const
{
    if (!m_values || m_values->empty())
        return tr("No tensor: choose a layer to see its weights in blocks of a shared scale.");
    if (!m_block.valid)
        return tr("The block could not be quantized in %1.").arg(format());
    const QString sqnr = std::isinf(m_block.sqnrDb) ? tr("∞ (exact)")
                                                    : tr("%1 dB").arg(m_block.sqnrDb, 0, 'f', 2);
    const double reach = m_block.elementMax * m_block.scale;
    const QString fit =
        m_block.amax > reach
            ? tr("max|w| %1 is past the largest code %2: it saturates")
                  .arg(m_block.amax, 0, 'g', 3)
                  .arg(reach, 0, 'g', 3)
            : tr("the largest code %1 covers max|w| %2 (%3 % of the range used)")
                  .arg(reach, 0, 'g', 3)
                  .arg(m_block.amax, 0, 'g', 3)
                  .arg(reach > 0.0 ? 100.0 * m_block.amax / reach : 0.0, 0, 'f', 0);
    return tr("<b>%1</b>, block %2 of %3: scale %4 = %5; %6; SQNR %7")
        .arg(format())
        .arg(m_block.block)
        .arg(m_block.blocks)
        .arg(storedScaleText(m_block))
        .arg(m_block.scale, 0, 'g', 4)
        .arg(fit)
        .arg(sqnr);
}

QStringList TeachingView::formats()
{
    QStringList out = {QStringLiteral("int8"),     QStringLiteral("int4"),
                       QStringLiteral("int2"),     QStringLiteral("nf4"),
                       QStringLiteral("fp4_e2m1"), QStringLiteral("fp8_e4m3"),
                       QStringLiteral("fp8_e5m2")};
    return out + BlockScaleView::formats();
}

TeachingView::TeachingView(QWidget* parent) : QWidget(parent)
{
    m_tabs = new QTabWidget(this);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_tabs);

    auto* gridPage = new QWidget;
    auto* gridLayout = new QVBoxLayout(gridPage);
    auto* controls = new QHBoxLayout;
    m_formatCombo = new QComboBox;
    m_formatCombo->addItems(formats());
    m_formatCombo->setToolTip(tr("The number format whose code points are drawn and used"));
    controls->addWidget(new QLabel(tr("Format:")));
    controls->addWidget(m_formatCombo);
    controls->addSpacing(12);
    m_bitsLabel = new QLabel;
    m_bitsSlider = new QSlider(Qt::Horizontal);
    m_bitsSlider->setRange(2, 8);
    m_bitsSlider->setPageStep(1);
    m_bitsSlider->setTickPosition(QSlider::TicksBelow);
    m_bitsSlider->setToolTip(tr("Bits of the integer formats (symmetric, signed)"));
    controls->addWidget(m_bitsLabel);
    controls->addWidget(m_bitsSlider, 1);
    controls->addSpacing(12);
    m_clipLabel = new QLabel;
    m_clipSlider = new QSlider(Qt::Horizontal);
    m_clipSlider->setRange(5, 100);
    m_clipSlider->setToolTip(tr("Clip range as a fraction of max|w|: values beyond saturate"));
    controls->addWidget(m_clipLabel);
    controls->addWidget(m_clipSlider, 2);
    controls->addSpacing(12);
    m_groupCombo = new QComboBox;
    m_groupCombo->addItem(tr("per-tensor"), 0);
    for (const int g : {32, 64, 128, 256})
        m_groupCombo->addItem(QString::number(g), g);
    m_groupCombo->setToolTip(tr("Elements that share one scale"));
    controls->addWidget(new QLabel(tr("Group size:")));
    controls->addWidget(m_groupCombo);
    gridLayout->addLayout(controls);
    m_readout = new QLabel;
    QFont readoutFont = m_readout->font();
    readoutFont.setPointSize(readoutFont.pointSize() + 2);
    m_readout->setFont(readoutFont);
    m_readout->setTextInteractionFlags(Qt::TextSelectableByMouse);
    gridLayout->addWidget(m_readout);
    m_gridChart = new WeightGridChart;
    gridLayout->addWidget(m_gridChart, 1);
    m_tabs->addTab(gridPage, tr("Quantization grid"));

    m_floatChart = new FloatFormatsChart;
    m_tabs->addTab(m_floatChart, tr("Float formats"));
    m_fourBitChart = new FourBitGridChart;
    m_tabs->addTab(m_fourBitChart, tr("4-bit grids"));
    m_blockView = new BlockScaleView;
    m_tabs->addTab(m_blockView, tr("Block scales (MX, NVFP4)"));

    connect(m_formatCombo, &QComboBox::currentTextChanged, this, &TeachingView::setFormat);
    connect(m_bitsSlider, &QSlider::valueChanged, this, &TeachingView::setBits);
    connect(m_clipSlider, &QSlider::valueChanged, this,
            [this](int percent) { setClipFraction(percent / 100.0); });
    connect(m_groupCombo, &QComboBox::currentIndexChanged, this, [this](int index) {
        setGroupSize(m_groupCombo->itemData(index).toLongLong());
    });
    syncControls();
    refresh();
}

TeachingView::~TeachingView() = default;

void TeachingView::setWeights(const QString& layerName, std::vector<float> values)
{
    m_layerName = layerName;
    m_values = std::make_shared<const std::vector<float>>(std::move(values));
    m_gridChart->setValues(layerName, *m_values);
    m_blockView->setValues(layerName, m_values);
    refresh();
}

void TeachingView::setFormat(const QString& format)
{
    if (!formats().contains(format))
        return;
    m_settings.format = format;
    if (isIntegerFormat(format))
        m_settings.bits = format.mid(3).toInt();
    if (analysis::isBlockFormatName(format.toStdString()))
        m_blockView->setFormat(format);
    syncControls();
    refresh();
}

void TeachingView::setBits(int bits)
{
    bits = std::clamp(bits, 2, 8);
    if (bits == m_settings.bits || !isIntegerFormat(m_settings.format))
        return;
    m_settings.bits = bits;
    // The combo follows when the core has the type (int8/int4/int2); int3, int5, ... keep the
    // combo on "int" entry last chosen, and the chart title and readout name the real width.
    if (bits == 8 || bits == 4 || bits == 2)
        m_settings.format = QStringLiteral("int%1").arg(bits);
    syncControls();
    refresh();
}

void TeachingView::setClipFraction(double fraction)
{
    fraction = std::clamp(fraction, 0.05, 1.0);
    if (fraction == m_settings.clipFraction)
        return;
    m_settings.clipFraction = fraction;
    syncControls();
    refresh();
}

void TeachingView::setGroupSize(std::int64_t groupSize)
{
    if (groupSize == m_settings.groupSize)
        return;
    m_settings.groupSize = std::max<std::int64_t>(0, groupSize);
    syncControls();
    refresh();
}

void TeachingView::syncControls()
{
    const QSignalBlocker b1(m_formatCombo);
    const QSignalBlocker b2(m_bitsSlider);
    const QSignalBlocker b3(m_clipSlider);
    const QSignalBlocker b4(m_groupCombo);
    m_formatCombo->setCurrentText(m_settings.format);
    const bool integer = isIntegerFormat(m_settings.format);
    m_bitsSlider->setEnabled(integer);
    m_bitsSlider->setValue(m_settings.bits);
    m_bitsLabel->setText(integer ? tr("Bits: %1").arg(m_settings.bits) : tr("Bits: fixed"));
    m_bitsLabel->setEnabled(integer);
    m_clipSlider->setValue(static_cast<int>(std::lround(m_settings.clipFraction * 100.0)));
    m_clipLabel->setText(tr("Clip: %1 × max|w|").arg(m_settings.clipFraction, 0, 'f', 2));
    const int groupIndex = m_groupCombo->findData(static_cast<int>(m_settings.groupSize));
    if (groupIndex >= 0)
        m_groupCombo->setCurrentIndex(groupIndex);
    const std::int64_t block = analysis::blockSizeOf(m_settings.format.toStdString());
    m_groupCombo->setEnabled(block == 0);
    m_groupCombo->setToolTip(block > 0 ? tr("%1 shares one scale per block of %2 elements")
                                             .arg(m_settings.format)
                                             .arg(block)
                                       : tr("Elements that share one scale"));
}

void TeachingView::refresh()
{
    m_gridChart->setSettings(m_settings);
    if (!m_values || m_values->empty()) {
        applyStats({});
        return;
    }
    if (m_values->size() <= kSyncLimit) {
        applyStats(quantizationError(*m_values, m_settings));
        return;
    }
    // Last request wins: one computation at a time; a change while it runs marks the result
    // stale, and the newest settings are computed as soon as it finishes.
    if (m_pending > 0) {
        m_dirty = true;
        m_readout->setText(readoutText() + tr("   (updating…)"));
        return;
    }
    startBackground();
}

void TeachingView::startBackground()
{
    ++m_pending;
    m_dirty = false;
    m_readout->setText(readoutText() + tr("   (updating…)"));
    const auto values = m_values;
    const TeachingSettings settings = m_settings;
    auto* watcher = new QFutureWatcher<QuantErrorStats>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher] {
        --m_pending;
        watcher->deleteLater();
        if (m_dirty && m_values && m_values->size() > kSyncLimit) {
            startBackground();
            return;
        }
        applyStats(watcher->result());
    });
    watcher->setFuture(QtConcurrent::run(
        [values, settings] { return quantizationError(*values, settings); }));
}

void TeachingView::applyStats(const QuantErrorStats& stats)
{
    m_stats = stats;
    m_readout->setText(readoutText());
    Q_EMIT statsChanged();
}

QString TeachingView::readoutText() const
{
    if (!m_values || m_values->empty())
        return tr("No tensor: choose a layer to see its weights quantized.");
    if (!m_stats.valid)
        return tr("The error could not be computed for %1.").arg(m_settings.format);
    const QString format = isIntegerFormat(m_settings.format)
                               ? QStringLiteral("int%1").arg(m_settings.bits)
                               : m_settings.format;
    const QString sqnr = std::isinf(m_stats.sqnrDb)
                             ? tr("∞ (exact)")
                             : tr("%1 dB").arg(m_stats.sqnrDb, 0, 'f', 2);
    return tr("<b>%1</b>: SQNR %2 &nbsp;&nbsp; MSE %3 &nbsp;&nbsp; max |error| %4")
        .arg(format, sqnr, QString::number(m_stats.mse, 'g', 3),
             QString::number(m_stats.maxAbsError, 'g', 3));
}

} // namespace bitlens::widgets
