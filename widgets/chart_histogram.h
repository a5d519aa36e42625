#pragma once
// One layer's distributions from report.json: the output error histogram, the weight histogram
// with the quantization grid over it, or the input activation histogram with the observer's
// clip points.

#include "chart_base.h"

#include <nlohmann/json.hpp>

#include <QStringList>

#include <vector>

QT_BEGIN_NAMESPACE
class QAreaSeries;
class QLineSeries;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// The representable values that a weight type places in a tensor's range, for drawing.
struct QuantGrid {
    std::vector<double> values; ///< every representable value in the range, ascending
    QString description;        ///< "int8 grid (per-tensor view)"; empty when there is no grid
};

/// The grid of `weightType` ("int8", "int4", "nf4", "fp4_e2m1", "fp8_e4m3", ...) over the weight
/// range [lo, hi]: analysis::codePoints (core) with a legend text. Per-channel and per-group
/// scales differ from this per-tensor view.
QuantGrid quantGrid(const QString& weightType, bool symmetric, double lo, double hi);

/// Histogram of one layer (error, weights or activations), chosen by setMode / setLayer.
class HistogramChart : public ChartBase {
    Q_OBJECT

public:
    /// What is drawn.
    enum class Mode {
        Error,       ///< layers[].error_histogram: quantized minus float output
        Weights,     ///< layers[].weight_histogram with the weight type's grid
        Activations, ///< layers[].act_histogram with act_clip lo/hi
    };
    /// Grid lines drawn at most; beyond it every k-th value is drawn.
    static constexpr int kMaxGridLines = 64;

    /// Creates an empty chart ("No data").
    explicit HistogramChart(QWidget* parent = nullptr);

    /// Keeps a copy of the report's layers and shows the selected layer (the first one when the
    /// selected name is not in the report). Never throws.
    void setReport(const nlohmann::json& report);
    /// Layer names of the report, in graph order.
    QStringList layerNames() const;
    /// The layer shown.
    QString layer() const { return m_layer; }
    /// The mode shown.
    Mode mode() const { return m_mode; }
    /// Counts on a logarithmic axis (for histograms with one dominant bin, e.g. after ReLU).
    void setLogScale(bool on);
    /// Number of histogram bins drawn (0 without data).
    int binCount() const { return m_binCount; }
    /// The histogram as an area series; nullptr without data.
    QAreaSeries* histogramSeries() const { return m_area; }
    /// Grid lines drawn in Weights mode (at most kMaxGridLines).
    int gridLineCount() const { return static_cast<int>(m_gridLines.size()); }
    /// Representable values of the grid within the weight range (before thinning).
    int gridLevelCount() const { return m_gridLevels; }
    /// Every gridStride()-th representable value is drawn (1: all of them).
    int gridStride() const { return m_gridStride; }
    /// Legend text of the grid ("int8 grid (per-tensor view) ..."), empty without grid.
    QString gridLabel() const { return m_gridLabel; }
    /// Clip lines drawn in Activations mode (0 or 2).
    int clipLineCount() const { return static_cast<int>(m_clipLines.size()); }
    /// Activations mode: one dotted line per calibrator of the report ("calibrators"), at the
    /// upper clip point, labelled with the output SQNR that clip gives.
    int calibratorLineCount() const { return static_cast<int>(m_calibratorLines.size()); }
    /// The clip lines' legend text ("minmax clip [0, 11.73]"), empty without act_clip.
    QString clipLabel() const { return m_clipLabel; }

public Q_SLOTS:
    /// Shows layer `name` of the report.
    void setLayer(const QString& name);
    /// Shows error, weights or activations.
    void setMode(bitlens::widgets::HistogramChart::Mode mode);

private:
    void rebuild();
    void build();
    void onHistogramHovered(const QPointF& point, bool state);
    const nlohmann::json* currentLayer() const;
    QLineSeries* addVerticalLine(double x, double y0, double y1, const QPen& pen,
                                 const QString& name);

    nlohmann::json m_layers = nlohmann::json::array();
    nlohmann::json m_schemeConfig;
    QString m_scheme;
    QString m_layer;
    Mode m_mode = Mode::Error;
    bool m_logScale = false;
    int m_binCount = 0;
    std::vector<double> m_edges;
    std::vector<double> m_counts;
    QAreaSeries* m_area = nullptr;
    std::vector<QLineSeries*> m_gridLines;
    std::vector<QLineSeries*> m_clipLines;
    std::vector<QLineSeries*> m_calibratorLines;
    int m_gridLevels = 0;
    int m_gridStride = 1;
    QString m_gridLabel;
    QString m_clipLabel;
    QString m_clipWhy;
    QString m_xTitle;
};

} // namespace bitlens::widgets
