#pragma once
// Sensitivity: the metric change when only one layer is quantized, per layer, worst first.

#include "chart_base.h"

#include "analysis/metric_info.h"

#include <nlohmann/json.hpp>

#include <QStringList>

#include <optional>
#include <vector>

QT_BEGIN_NAMESPACE
class QBarCategoryAxis;
class QHorizontalStackedBarSeries;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Horizontal bars of each layer's metric change from `bitlens-cli sensitivity --report`, in
/// the metric's change unit (analysis::metricInfo): top-1 in points, perplexity in % of float.
class SensitivityChart : public ChartBase {
    Q_OBJECT

public:
    /// Creates an empty chart ("No data").
    explicit SensitivityChart(QWidget* parent = nullptr);

    /// Shows a sensitivity file; "No data" without layers. Never throws.
    void setSensitivity(const nlohmann::json& sensitivity);
    /// Layer names ranked, the largest drop first.
    QStringList rankedLayers() const { return m_names; }
    /// The row labels in rank order: "0.up" for layer.0.mlp.up_proj (shortLayerLabels), all
    /// distinct; the full name shows when the pointer is over the label or the bar.
    QStringList rowLabels() const { return m_labels; }
    /// The full layer name of row label `label`; empty when no row has it.
    QString layerForLabel(const QString& label) const;
    /// Rows shown at once (as many as fit at one label line each) and the rank of the top one;
    /// with more layers the wheel scrolls.
    int visibleRowCount() const { return m_visibleRows; }
    int firstVisibleRow() const { return m_firstRow; }
    /// Scrolls so that rank `first` is the top row shown.
    void scrollToRow(int first);
    /// The rank of the row at view position `pos` (labels or bars), -1 outside the rows.
    int rowAt(const QPoint& pos) const;
    /// Metric change (quantized - float) per ranked layer in the metric's change unit: points
    /// for top-1 (negative: worse), % of the float value for perplexity (positive: worse); the
    /// mean KLD in nats when rankedByKld().
    std::vector<double> changes() const { return m_changes; }
    /// The metric the sweep measured (its unit and direction).
    const analysis::MetricInfo& metric() const { return m_info; }
    /// True when the bars are KL divergences (a sweep with "rank": "kld").
    bool rankedByKld() const { return m_byKld; }
    /// The series (sets: worse, not worse); nullptr without data.
    QHorizontalStackedBarSeries* barSeries() const { return m_series; }

public Q_SLOTS:
    /// What a click on the bar of the layer ranked `index` (0: most sensitive) does.
    void onBarClicked(int index);

Q_SIGNALS:
    /// The user clicked the bar of layer `name`.
    void layerClicked(const QString& name);

protected:
    void layoutOverlays() override;
    void wheelEvent(QWheelEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;

private:
    void build(const nlohmann::json& sensitivity);
    /// Shows the rows that fit the plot's height from m_firstRow on (axis range and title).
    void updateRowWindow();
    /// The height in pixels one row needs for its label.
    int rowPixels() const;
    /// "Change in perplexity (% of float 83.51; above 0 is worse)".
    QString changeAxisTitle() const;
    /// "+0.073 % of float", "-0.95 points".
    QString changeText(double change) const;

    QStringList m_names;
    QStringList m_labels;
    QBarCategoryAxis* m_axisY = nullptr;
    int m_firstRow = 0;
    int m_visibleRows = 0;
    bool m_inRowWindow = false;
    std::vector<double> m_changes;
    std::vector<bool> m_worse;  ///< per ranked layer: worse than float
    std::vector<double> m_metrics;
    analysis::MetricInfo m_info;
    double m_floatMetric = 0.0;
    std::vector<std::optional<double>> m_sqnr;
    QHorizontalStackedBarSeries* m_series = nullptr;
    QString m_metricTitle;
    /// The sweep ranked a language model by output KL divergence ("rank": "kld"): the bars are
    /// each layer's mean KLD (m_changes holds them), not a metric change in points.
    bool m_byKld = false;
};

} // namespace bitlens::widgets
