#pragma once
// Teaching views: one tensor's distribution with a format's code points over it and the live
// error of quantizing it (bits, clip range, group size); the representable values of FP8 E4M3
// vs E5M2; NF4 vs uniform int4 vs FP4 vs MXFP4 / NVFP4 code points against the bell curve NF4
// is built from; one block of an MX / NVFP4 format with its shared scale and element grid, and
// the block scales along the tensor.
// Every number comes from core (analysis/teaching.h); these classes only draw and hold state.

#include "analysis/teaching.h"
#include "chart_base.h"

#include <QString>
#include <QStringList>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

QT_BEGIN_NAMESPACE
class QComboBox;
class QSpinBox;
class QLabel;
class QLineSeries;
class QScatterSeries;
class QSlider;
class QTabWidget;
QT_END_NAMESPACE

namespace bitlens {
class Model;
}

namespace bitlens::widgets {

/// The float32 weight that layer `layer` of `model` reads (analysis::layerWeightValues).
std::vector<float> layerWeights(const Model& model, const std::string& layer);

/// Error of quantizing a vector with one setting, as the teaching view shows it.
using QuantErrorStats = analysis::QuantErrorStats;

/// What the teaching view quantizes with.
struct TeachingSettings {
    QString format = QStringLiteral("int8");  ///< int8, int4, int2, nf4, fp4_e2m1, fp8_e4m3, ...
    int bits = 8;                 ///< integer formats only: 2..8 (symmetric, signed)
    double clipFraction = 1.0;    ///< clip range as a fraction of each block's max|w|, 0.05..1
    std::int64_t groupSize = 0;   ///< elements per scale; 0 = per-tensor
};

/// The same settings in core's terms.
analysis::TeachingSettings toCore(const TeachingSettings& settings);

/// analysis::quantizationError of `values` with `settings`. Thread-safe; ~500k values take a
/// few tens of ms.
QuantErrorStats quantizationError(const std::vector<float>& values,
                                  const TeachingSettings& settings);

/// The weight histogram with a format's code points drawn over it.
class WeightGridChart : public ChartBase {
    Q_OBJECT

public:
    /// Histogram bins drawn.
    static constexpr int kBins = 120;
    /// Creates an empty chart ("No data").
    explicit WeightGridChart(QWidget* parent = nullptr);
    /// Bins `values` (layer `layerName`) and redraws; empty values show "No data".
    void setValues(const QString& layerName, const std::vector<float>& values);
    /// Draws the grid of `settings` (scaled to clip × max|w|) over the histogram.
    void setSettings(const TeachingSettings& settings);
    /// Representable values of the grid within [-clip, clip] (before thinning).
    int codePointCount() const { return m_codePoints; }
    /// Code points drawn (at most HistogramChart::kMaxGridLines; every k-th beyond it).
    int drawnCodePointCount() const { return m_drawnCodePoints; }
    /// Legend text of the grid series.
    QString gridLabel() const { return m_gridLabel; }

private:
    void rebuild();

    QString m_layerName;
    analysis::ValueHistogram m_histogram;  ///< the binned values (empty counts: no data)
    TeachingSettings m_settings;
    int m_codePoints = 0;
    int m_drawnCodePoints = 0;
    QString m_gridLabel;
};

/// Positive representable values of FP8 E4M3 (FN) and E5M2 on a log axis.
class FloatFormatsChart : public ChartBase {
    Q_OBJECT

public:
    /// Builds the chart (analysis::float8PositiveValues: every bit pattern cast by LibTorch).
    explicit FloatFormatsChart(QWidget* parent = nullptr);
    /// Points of the E4M3 series (positive finite values, subnormals included).
    int e4m3Count() const;
    /// Points of the E5M2 series.
    int e5m2Count() const;
    /// Largest finite value of each format (448 and 57344).
    double e4m3Max() const { return m_e4m3Max; }
    double e5m2Max() const { return m_e5m2Max; }
    /// The series (E4M3 first).
    QScatterSeries* e4m3Series() const { return m_e4m3; }
    QScatterSeries* e5m2Series() const { return m_e5m2; }

private:
    QScatterSeries* m_e4m3 = nullptr;
    QScatterSeries* m_e5m2 = nullptr;
    double m_e4m3Max = 0.0;
    double m_e5m2Max = 0.0;
};

/// NF4, uniform int4, FP4 E2M1, and E2M1 under MX's E8M0 and NVFP4's E4M3 block scales: the
/// code points of a block whose max |w| is 1, with the normal density NF4 follows.
class FourBitGridChart : public ChartBase {
    Q_OBJECT

public:
    /// Builds the chart.
    explicit FourBitGridChart(QWidget* parent = nullptr);
    /// Points per row: NF4, int4, FP4, MXFP4, NVFP4 (in that order).
    std::vector<int> rowCounts() const;
    /// The density curve.
    QLineSeries* densitySeries() const { return m_density; }

private:
    std::vector<QScatterSeries*> m_rows;
    QLineSeries* m_density = nullptr;
};

/// One block of a tensor in an MX / NVFP4 format (analysis::blockView): the block's weights and
/// where they land, over the element grid the block's shared scale puts them on.
class BlockGridChart : public ChartBase {
    Q_OBJECT

public:
    explicit BlockGridChart(QWidget* parent = nullptr);
    /// Draws `view` (an invalid view shows a message saying what to do).
    void setBlock(const QString& layerName, const analysis::BlockView& view);
    /// Grid values drawn (within the axis range).
    int gridCount() const { return m_gridCount; }
    /// Points of the weights series (the block's elements).
    int pointCount() const { return m_pointCount; }

private:
    int m_gridCount = 0;
    int m_pointCount = 0;
};

/// The shared scale of each block along a tensor, log2, as stored (MX: whole powers of two;
/// NVFP4: E4M3 steps of 1/8 octave under the tensor scale), with the ideal continuous scale
/// max|w| / element max it stands for.
class BlockScaleStaircaseChart : public ChartBase {
    Q_OBJECT

public:
    explicit BlockScaleStaircaseChart(QWidget* parent = nullptr);
    /// Draws the first blocks of `values` in `format` (a block format); `marked` is the block
    /// the grid chart shows.
    void setValues(const QString& layerName, const std::vector<float>& values,
                   const QString& format, int marked);
    /// Blocks drawn.
    int blockCount() const { return m_blocks; }
    /// Distinct stored scales among them.
    int distinctScales() const { return m_distinct; }

private:
    int m_blocks = 0;
    int m_distinct = 0;
};

/// The "Block scales" tab: a block format, a block of the chosen layer, the block's stored
/// scale (E8M0 byte and 2^e, or E4M3 byte x tensor scale) and error, and the two charts.
class BlockScaleView : public QWidget {
    Q_OBJECT

public:
    /// Blocks the staircase draws.
    static constexpr int kStaircaseBlocks = 128;
    /// The block formats offered (analysis::blockFormatNames()).
    static QStringList formats();

    explicit BlockScaleView(QWidget* parent = nullptr);
    /// The tensor shown (shared with the grid tab).
    void setValues(const QString& layerName, std::shared_ptr<const std::vector<float>> values);
    /// The block on show.
    const analysis::BlockView& block() const { return m_block; }
    /// The readout above the charts.
    QString readoutText() const;
    QString format() const;
    BlockGridChart* gridChart() const { return m_gridChart; }
    BlockScaleStaircaseChart* staircaseChart() const { return m_staircase; }

public Q_SLOTS:
    /// One of formats().
    void setFormat(const QString& format);
    /// Block index, clamped to the tensor.
    void setBlockIndex(int block);

private:
    void rebuild();

    QComboBox* m_formatCombo = nullptr;
    QSpinBox* m_blockSpin = nullptr;
    QLabel* m_readout = nullptr;
    BlockGridChart* m_gridChart = nullptr;
    BlockScaleStaircaseChart* m_staircase = nullptr;
    QString m_layerName;
    std::shared_ptr<const std::vector<float>> m_values;
    analysis::BlockView m_block;
};

/// The teaching tabs: "Quantization grid" (a tensor with sliders and live error), "Float
/// formats", "4-bit grids" and "Block scales".
class TeachingView : public QWidget {
    Q_OBJECT

public:
    /// Elements up to which the error is computed on the GUI thread. Measured (test_teaching,
    /// 2 shared cores): 500k values per-group(128) take 24-54 ms, over the 30 ms budget, so
    /// ~7 ms at this limit; larger tensors are computed with QtConcurrent, the last request
    /// winning (one computation in flight; the newest settings run when it finishes).
    static constexpr std::size_t kSyncLimit = 65536;
    /// The formats offered, in combo order.
    static QStringList formats();

    /// Creates the view with no tensor ("No data" on the first tab).
    explicit TeachingView(QWidget* parent = nullptr);
    ~TeachingView() override;

    /// Shows `values` (a layer's weights, any shape, flattened) on the first tab.
    void setWeights(const QString& layerName, std::vector<float> values);
    /// The settings the controls show.
    TeachingSettings settings() const { return m_settings; }
    /// The error readout for the current tensor and settings (valid == false while none).
    QuantErrorStats stats() const { return m_stats; }
    /// The readout text ("SQNR 38.1 dB   MSE 1.2e-06   max |error| 0.0041").
    QString readoutText() const;
    /// True while a background computation is running.
    bool isComputing() const { return m_pending > 0; }

    /// The tab widget (tabs: grid, float formats, 4-bit grids).
    QTabWidget* tabs() const { return m_tabs; }
    WeightGridChart* gridChart() const { return m_gridChart; }
    FloatFormatsChart* floatFormatsChart() const { return m_floatChart; }
    FourBitGridChart* fourBitChart() const { return m_fourBitChart; }
    BlockScaleView* blockView() const { return m_blockView; }

public Q_SLOTS:
    /// Selects a format by name (one of formats()); integer formats also set the bits.
    void setFormat(const QString& format);
    /// Bits of the integer formats, 2..8 (ignored by the others).
    void setBits(int bits);
    /// Clip range as a fraction of max|w|, 0.05..1.0.
    void setClipFraction(double fraction);
    /// Elements per scale: 0 (per-tensor), 32, 64, 128 or 256 (block formats: their block).
    void setGroupSize(std::int64_t groupSize);

Q_SIGNALS:
    /// The error readout changed (after a synchronous or background computation).
    void statsChanged();

private:
    void syncControls();
    void refresh();
    void applyStats(const QuantErrorStats& stats);
    void startBackground();

    QTabWidget* m_tabs = nullptr;
    WeightGridChart* m_gridChart = nullptr;
    FloatFormatsChart* m_floatChart = nullptr;
    FourBitGridChart* m_fourBitChart = nullptr;
    BlockScaleView* m_blockView = nullptr;
    QComboBox* m_formatCombo = nullptr;
    QSlider* m_bitsSlider = nullptr;
    QLabel* m_bitsLabel = nullptr;
    QSlider* m_clipSlider = nullptr;
    QLabel* m_clipLabel = nullptr;
    QComboBox* m_groupCombo = nullptr;
    QLabel* m_readout = nullptr;
    QString m_layerName;
    std::shared_ptr<const std::vector<float>> m_values;
    TeachingSettings m_settings;
    QuantErrorStats m_stats;
    int m_pending = 0;
    bool m_dirty = false;
};

} // namespace bitlens::widgets
