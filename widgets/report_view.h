#pragma once
// The results of quantization runs: a one-line summary ("static-int8: top-1 0.9183 -> 0.9177
// (-0.06 points), size 1.61 MiB -> 413 KiB (0.251), 2 of 4 layers on real kernels") above tabs
// Layers (per-layer SQNR + the selected layer's histogram), Layer map (block x projection
// heatmap of a per-layer figure for transformer layer names), Memory, Throughput, Compare (all
// schemes: table + Pareto over every run in the history), Sensitivity, History (every run on the
// open model) and Side by side (two runs of the history). It shows exactly the JSON it is given
// (report.json, a compare file, a sensitivity file) and computes nothing.

#include "history_model.h"

#include <nlohmann/json.hpp>

#include <QString>
#include <QWidget>

class QComboBox;
class QLabel;
class QPushButton;
class QStackedWidget;
class QTabWidget;
class QTableView;

namespace bitlens::widgets {

class ComparisonTableModel;
class HistogramChart;
class LayerHeatmap;
class MemoryChart;
class ParetoChart;
class SensitivityChart;
class SideBySideView;
class SqnrChart;
class LayerLatencyChart;
class ThroughputChart;

/// "static-int8: top-1 on 2,000 samples 0.9183 -> 0.9177 (-0.06 points), size 1.61 MiB -> 413 KiB
/// (0.251), 2 of 4 layers on real kernels" for a report.json; empty for anything else.
QString reportSummary(const nlohmann::json& report);

/// Summary line + result tabs (see the file comment).
class ReportView : public QWidget {
    Q_OBJECT

public:
    explicit ReportView(QWidget* parent = nullptr);

    /// Shows a report.json (replaces the one shown; the selected layer stays when it exists).
    void setReport(const nlohmann::json& report);
    /// Shows the report of a run still going (layers and throughput, no metric yet): as
    /// setReport(), and the summary line says the metric is still being evaluated.
    void showPartialReport(const nlohmann::json& report);
    /// A run whose partial report is on screen ended without its report (cancelled, failed):
    /// shows the report from before it again. False when no partial report is shown.
    bool dropPartialReport();
    /// Shows a comparison {"runs": [report, ...]} in the Compare tab.
    void setComparison(const nlohmann::json& comparison);
    /// The open model's task metric ("perplexity", "top1"): the Compare table's headers and
    /// the Pareto chart name it (and a language model's KL divergence) before any run arrives.
    /// Kept by clear().
    void setModelMetric(const QString& metricName);
    /// Starts a comparison of `total` schemes: the Compare tab empties and then grows by
    /// addComparisonRun() as each scheme finishes.
    void beginComparison(int total);
    /// Appends one finished scheme's report to the comparison on screen.
    void addComparisonRun(const nlohmann::json& run);
    /// Ends the comparison begun: its line says how many schemes ran in `elapsed` (or that it
    /// stopped early, when `complete` is false).
    void endComparison(bool complete, const QString& elapsed);
    /// True between beginComparison() and endComparison().
    bool isComparing() const { return m_comparing; }
    /// Marks a job as running ("w4-nf4"): the summary line says so until the next report or
    /// setRunning({}).
    void setRunning(const QString& what);
    /// The Compare tab's line above the table (progress of a comparison, or how to start one).
    QLabel* compareStatus() const { return m_compareStatus; }
    /// Shows a sensitivity sweep in the Sensitivity tab.
    void setSensitivity(const nlohmann::json& sensitivity);
    /// Forgets everything shown, the history too.
    void clear();
    /// Appends a finished run to the History tab (and to the Pareto chart).
    void addRun(HistoryRun run);
    /// Appends every run of a compare file to the History tab (and to the Pareto chart).
    void addComparisonRuns(const nlohmann::json& comparison, const QString& modelPath);
    /// Shows history rows `rowA` and `rowB` in the Side by side tab and switches to it; false
    /// when a row does not exist.
    bool showSideBySide(int rowA, int rowB);

    /// The report shown (null when none).
    const nlohmann::json& report() const { return m_report; }
    /// The comparison shown (null when none).
    const nlohmann::json& comparison() const { return m_comparison; }
    /// The sensitivity sweep shown (null when none).
    const nlohmann::json& sensitivity() const { return m_sensitivity; }
    /// The summary line's text.
    QString summaryText() const;
    /// The selected layer (empty when none).
    QString selectedLayer() const { return m_selected; }
    /// The layer the histogram shows (empty when none).
    QString histogramLayer() const;

    /// Selects `layer` in every view (no layerSelected signal).
    void selectLayer(const QString& layer);
    /// Shows the tab called `name` (case-insensitive); false when there is none.
    bool showTab(const QString& name);

    QTabWidget* tabs() const { return m_tabs; }
    SqnrChart* sqnrChart() const { return m_sqnr; }
    HistogramChart* histogramChart() const { return m_histogram; }
    MemoryChart* memoryChart() const { return m_memory; }
    /// The Layer map tab's block x projection heatmap and its figure chooser.
    LayerHeatmap* layerHeatmap() const { return m_heatmap; }
    QComboBox* heatmapMetric() const { return m_heatmapMetric; }
    ThroughputChart* throughputChart() const { return m_throughput; }
    LayerLatencyChart* latencyChart() const { return m_latency; }
    SensitivityChart* sensitivityChart() const { return m_sensitivityChart; }
    ComparisonTableModel* comparisonModel() const { return m_compareModel; }
    ParetoChart* paretoChart() const { return m_pareto; }
    /// The Compare tab's choice of the figure the Pareto chart weighs (shown when there are
    /// several: a language model's perplexity and KL divergence figures).
    QComboBox* paretoFigure() const { return m_paretoFigure; }
    QTableView* comparisonTable() const { return m_compareTable; }
    /// The runs of the open model, oldest first.
    HistoryModel* historyModel() const { return m_history; }
    /// The History tab's table (its model is historyModel()).
    QTableView* historyTable() const { return m_historyTable; }
    /// The History tab's "Side by side" button (enabled with two rows selected).
    QPushButton* sideBySideButton() const { return m_sideBySideButton; }
    /// The Side by side tab.
    SideBySideView* sideBySideView() const { return m_sideBySide; }
    /// Histogram mode: Error, Weights or Activations.
    QComboBox* histogramMode() const { return m_histogramMode; }
    /// The Sensitivity tab's "Rank by" box: the task metric (0) or, for language models, the
    /// output KL divergence (1).
    QComboBox* sensitivityRank() const { return m_sensitivityRank; }
    /// True when the next sweep ranks layers by output KL divergence.
    bool sensitivityByKld() const;

Q_SIGNALS:
    /// setReport() showed a report (a run, a history row or an opened file).
    void reportChanged();
    /// The user picked a layer in a chart.
    void layerSelected(const QString& layer);
    /// "Run sensitivity" was clicked in the Sensitivity tab.
    void sensitivityRequested();
    /// The user selected one row of the History tab: show that run.
    void historyRunSelected(int row);

private:
    QWidget* createLayersTab();
    QWidget* createLayerMapTab();
    QWidget* createCompareTab();
    QWidget* createSensitivityTab();
    QWidget* createHistoryTab();
    void updateHistogram();
    void updatePareto();
    void updateParetoFigures();
    void updateSummary();
    void applyReport(const nlohmann::json& report, bool partial);
    void onHistorySelectionChanged();

    QLabel* m_summary;
    QTabWidget* m_tabs;
    SqnrChart* m_sqnr = nullptr;
    QComboBox* m_histogramMode = nullptr;
    QComboBox* m_sensitivityRank = nullptr;
    HistogramChart* m_histogram = nullptr;
    MemoryChart* m_memory = nullptr;
    LayerHeatmap* m_heatmap = nullptr;
    QComboBox* m_heatmapMetric = nullptr;
    ThroughputChart* m_throughput = nullptr;
    LayerLatencyChart* m_latency = nullptr;
    ParetoChart* m_pareto = nullptr;
    QWidget* m_paretoFigureRow = nullptr;
    QComboBox* m_paretoFigure = nullptr;
    QTableView* m_compareTable = nullptr;
    SensitivityChart* m_sensitivityChart = nullptr;
    ComparisonTableModel* m_compareModel = nullptr;
    HistoryModel* m_history = nullptr;
    QTableView* m_historyTable = nullptr;
    QPushButton* m_sideBySideButton = nullptr;
    SideBySideView* m_sideBySide = nullptr;
    QString m_histogramLayer;
    nlohmann::json m_report;
    nlohmann::json m_comparison;
    QLabel* m_compareStatus = nullptr;
    int m_compareTotal = 0;
    bool m_comparing = false;
    QString m_running;
    bool m_partial = false;  ///< the report shown is a run's layers before its metric
    nlohmann::json m_beforePartial;  ///< what was on screen before the partial report
    nlohmann::json m_sensitivity;
    QString m_selected;
};

} // namespace bitlens::widgets
