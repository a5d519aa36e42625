#pragma once
// The Training tab: loss and held-out metric curves of a quantization-aware training run, drawn
// live while it runs. The job calls the sink from begin() on its worker thread after every step;
// the sink posts each point to the GUI thread with a queued call, and points of an older run are
// dropped. Stop (or Cancel in the window) ends training at the next step and keeps the best
// checkpoint, which is then analysed and shown; the chart marks it. A saved report with a "qat"
// object shows its recorded curves the same way.

#include "chart_base.h"
#include "jobs/progress.h"
#include "quant_job.h"

#include <QWidget>

#include <nlohmann/json.hpp>

#include <functional>
#include <limits>

QT_BEGIN_NAMESPACE
class QLabel;
class QLineSeries;
class QPushButton;
class QScatterSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// One chart of the Training tab: lines over optimizer steps with round ticks.
class TrainingChart : public ChartBase {
    Q_OBJECT

public:
    explicit TrainingChart(QWidget* parent = nullptr);

    /// Clears the chart and sets it up: title, x axis "Optimizer step" over [0, steps], y axis
    /// titled `yTitle` (with its unit); series are added with addLine / addMarkers.
    void reset(const QString& title, const QString& yTitle, std::int64_t steps);
    /// Shows `text` instead of curves ("No training run yet").
    void showEmpty(const QString& text) { showMessage(text); }
    /// A line series named `name` (legend), colour `color` (chartColor index).
    QLineSeries* addLine(const QString& name, int color);
    /// A scatter series for marked points (held-out evaluations, the kept checkpoint).
    QScatterSeries* addMarkers(const QString& name, int color, double size);
    /// Widens the y range (never narrows it during a run) so that `value` shows.
    void includeValue(double value);
    /// Widens the x range to `steps` (a recorded curve may run past the planned steps).
    void includeStep(std::int64_t step);

    QValueAxis* axisX() const { return m_axisX; }
    QValueAxis* axisY() const { return m_axisY; }

private:
    QValueAxis* m_axisX = nullptr;
    QValueAxis* m_axisY = nullptr;
    double m_yLo = std::numeric_limits<double>::infinity();
    double m_yHi = -std::numeric_limits<double>::infinity();
    double m_xHi = 1.0;
};

/// The Training tab (see the file comment).
class TrainingView : public QWidget {
    Q_OBJECT

public:
    explicit TrainingView(QWidget* parent = nullptr);

    /// Starts showing a new run of `scheme`: clears the curves and returns the sink the job
    /// calls after each step (from any thread). Points of earlier runs are dropped from now on.
    std::function<void(const TrainingPoint&)> begin(const QString& scheme);
    /// The token that stops the current run's training and keeps its best checkpoint.
    CancelToken stopToken() const { return m_stop; }
    /// True between begin() and finish()/setReport() while Stop was not pressed.
    bool isTraining() const { return m_training && !m_stop.cancelled(); }
    /// Stops training, keeping the best checkpoint; false when no training runs.
    bool stopTraining();
    /// The run ended without a report (failed or cancelled): `message` says why.
    void finish(const QString& message);
    /// Shows a report: with a "qat" object, its recorded curves (unless this run's live curves
    /// are on screen) and the kept checkpoint; other reports leave the tab as it is.
    void setReport(const nlohmann::json& report);

    /// Points received for the current run (tests).
    int pointCount() const { return m_points; }
    QLineSeries* lossSeries() const { return m_loss; }
    QLineSeries* smoothedLossSeries() const { return m_lossSmooth; }
    QLineSeries* metricSeries() const { return m_metric; }
    QScatterSeries* bestSeries() const { return m_best; }
    TrainingChart* lossChart() const { return m_lossChart; }
    TrainingChart* metricChart() const { return m_metricChart; }
    QString statusText() const;

public Q_SLOTS:
    /// Adds one step's point (GUI thread).
    void addPoint(const bitlens::widgets::TrainingPoint& point);

Q_SIGNALS:
    /// The Stop button was pressed during training.
    void stopRequested();

private:
    void setUp(const QString& scheme, std::int64_t steps, const std::string& lossName,
               const std::string& metricName);
    double metricValue(double raw) const;
    void markBest(std::int64_t step, double raw);

    TrainingChart* m_lossChart;
    TrainingChart* m_metricChart;
    QLabel* m_status;
    QPushButton* m_stopButton;
    QLineSeries* m_loss = nullptr;
    QLineSeries* m_lossSmooth = nullptr;
    QLineSeries* m_metric = nullptr;
    QScatterSeries* m_best = nullptr;
    CancelToken m_stop;
    QString m_scheme;
    std::string m_metricName;
    quint64 m_generation = 0;
    bool m_training = false;
    bool m_live = false;       ///< curves on screen came from live points of this run
    bool m_setUp = false;
    int m_points = 0;
    double m_smoothed = 0.0;
    std::int64_t m_bestStep = -1;
    double m_bestRaw = 0.0;
};

} // namespace bitlens::widgets
