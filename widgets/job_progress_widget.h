#pragma once
// The status bar's job indicator: what is running, a progress bar, the time elapsed and an
// estimate of the time left, and a Cancel button. It watches one or more JobRunners and hides
// itself when none of them is running. The clock ticks every second, also while a stage sends
// no progress.

#include <QElapsedTimer>
#include <QList>
#include <QPointer>
#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;
class QTimer;

namespace bitlens::widgets {

class JobRunner;

/// Progress bar + Cancel button for the jobs of the runners it watches.
class JobProgressWidget : public QWidget {
    Q_OBJECT

public:
    explicit JobProgressWidget(QWidget* parent = nullptr);

    /// Starts watching `runner`; the widget shows the most recently started running job.
    void watch(JobRunner* runner);
    /// The text shown next to the bar ("Opening model.onnx: reading weights · 0:12 elapsed,
    /// about 0:30 left").
    QString text() const;
    /// "0:12 elapsed, about 0:30 left" for a job at `fraction` after `elapsedMs`; the estimate
    /// is left out until 2 s and 2 % have passed, and when the `stage` text gives its own
    /// (a sweep's "layer 3 of 211 (...), about 1:47:49 left", bitlens::stageHasTimeLeft).
    static QString timeText(qint64 elapsedMs, double fraction, const QString& stage = {});
    /// The progress bar (range 0..1000; busy indicator until the first report).
    QProgressBar* progressBar() const { return m_bar; }
    /// The Cancel button.
    QPushButton* cancelButton() const { return m_cancel; }

private:
    void onStarted(JobRunner* runner, const QString& title);
    void onProgress(JobRunner* runner, double fraction, const QString& stage);
    void onCancelClicked();
    void refresh();
    void updateLabel();

    QLabel* m_label;
    QProgressBar* m_bar;
    QPushButton* m_cancel;
    QList<QPointer<JobRunner>> m_runners;
    QPointer<JobRunner> m_shown;
    QTimer* m_tick;
    QElapsedTimer m_clock;
    QString m_stage;
    double m_fraction = -1.0;  ///< -1 until the first report
};

} // namespace bitlens::widgets
