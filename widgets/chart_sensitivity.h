#pragma once
// Sensitivity: the metric change when only one layer is quantized, per layer, worst first.

#include "chart_base.h"

#include "analysis/metric_info.h"

#include <nlohmann/json.hpp>

#include <QStringList>

#include <optional>
#include <vector>

QT_BEGIN_NAMESPACE
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

private:
    void build(const nlohmann::json& sensitivity);
    /// "Change in perplexity (% of float 83.51; above 0 is worse)".
    QString changeAxisTitle() const;
    /// "+0.073 % of float", "-0.95 points".
    QString changeText(double change) const;

    QStringList m_names;
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
