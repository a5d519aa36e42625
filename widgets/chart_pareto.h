#pragma once
// A figure of merit against cost for the runs of a compare file: top-1, perplexity or a language
// model's KL divergence vs model size (or vs latency), the float model as its own marker, and
// the Pareto front (the best figure for the cost, in the figure's own direction:
// analysis::paretoFront).

#include "chart_base.h"

#include <nlohmann/json.hpp>

#include <QPointF>
#include <QRectF>
#include <QStringList>

#include <optional>
#include <vector>

QT_BEGIN_NAMESPACE
class QLineSeries;
class QScatterSeries;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Scatter of a figure (metric.quantized, or a KL divergence figure: exporting::reportFigure)
/// against size_bytes.quantized (MiB) or latency (ms per sample).
class ParetoChart : public ChartBase {
    Q_OBJECT

public:
    /// The cost on the x axis.
    enum class Axis {
        Size,    ///< size_bytes.quantized in MiB
        Latency, ///< 1000 / throughput.quantized_samples_per_s, ms per sample
    };

    /// Creates an empty chart ("No data").
    explicit ParetoChart(QWidget* parent = nullptr);

    /// Shows the runs of a compare file ({"runs": [report, ...]}). Never throws.
    void setComparison(const nlohmann::json& comparison);
    /// The cost shown on the x axis.
    Axis costAxis() const { return m_axis; }
    /// The figure on the y axis ("top1", "perplexity", "kld_mean", ...): the one chosen with
    /// setFigure() when the runs have it, else analysis::defaultParetoFigure (mean KLD for a
    /// language model's runs, else the task metric).
    QString figure() const { return m_figure; }
    /// The figures the runs shown can be weighed by: the task metric, then for language models
    /// analysis::divergenceFigures(). Empty without data.
    QStringList figures() const { return m_figures; }
    /// Point labels of the runs shown (scheme.preset or spec), in run order.
    QStringList runLabels() const;
    /// Labels of runs off the Pareto front hidden because they found no free place (tests).
    int hiddenLabelCount() const;
    /// Scene rectangles of the run labels drawn (tests: none may overlap another).
    std::vector<QRectF> visibleLabelRects() const;
    /// The runs' scatter series; nullptr without data.
    QScatterSeries* runSeries() const { return m_runs; }
    /// The float model's marker; nullptr without a float metric.
    QScatterSeries* floatSeries() const { return m_float; }
    /// The Pareto front through the non-dominated points, cheapest first; nullptr without data.
    QLineSeries* frontSeries() const { return m_front; }

public Q_SLOTS:
    /// Shows size or latency on the x axis.
    void setCostAxis(bitlens::widgets::ParetoChart::Axis axis);
    /// Weighs figure `name` (one of figures(); "" or one the runs lack: the default).
    void setFigure(const QString& name);
    /// The open model's task metric: without runs, the title names the figure its runs will be
    /// weighed by (mean KLD for a language model), not top-1.
    void setModelMetric(const QString& metricName);
    /// What a click on the runs' series at `point` does: emits runClicked for the nearest run.
    void onPointClicked(const QPointF& point);

Q_SIGNALS:
    /// The user clicked the point of run `index` (index into "runs").
    void runClicked(int index);

protected:
    void layoutOverlays() override;

private:
    struct Run {
        int index;        // into "runs"
        QString label;
        double metric;
        double sizeMiB;   // NaN when unknown
        double latencyMs; // NaN when unknown
    };
    void readRuns();
    void rebuild();
    double cost(const Run& run) const;

    nlohmann::json m_comparison;
    QString m_chosenFigure;  ///< setFigure's; "" for the default
    QString m_modelMetric;   ///< setModelMetric's
    QString m_figure;        ///< the figure shown
    QStringList m_figures;
    bool m_lowerIsBetter = false;
    std::vector<Run> m_data;
    std::vector<Run> m_shown;
    std::optional<Run> m_floatRun;
    QString m_metricTitle;
    Axis m_axis = Axis::Size;
    QScatterSeries* m_runs = nullptr;
    QScatterSeries* m_float = nullptr;
    QLineSeries* m_front = nullptr;
    std::vector<QGraphicsSimpleTextItem*> m_labels;
    std::vector<QGraphicsLineItem*> m_leaders;  ///< label -> point, for labels set apart
    int m_hiddenLabels = 0;
};

} // namespace bitlens::widgets
