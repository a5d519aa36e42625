#pragma once
// The status bar's job indicator: what is running, a progress bar and a Cancel button. It
// watches one or more JobRunners and hides itself when none of them is running.

#include <QList>
#include <QPointer>
#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;

namespace bitlens::widgets {

class JobRunner;

/// Progress bar + Cancel button for the jobs of the runners it watches.
class JobProgressWidget : public QWidget {
    Q_OBJECT

public:
    explicit JobProgressWidget(QWidget* parent = nullptr);

    /// Starts watching `runner`; the widget shows the most recently started running job.
    void watch(JobRunner* runner);
    /// The text shown next to the bar ("Opening model.onnx: reading weights").
    QString text() const;
    /// The progress bar (range 0..1000; busy indicator until the first report).
    QProgressBar* progressBar() const { return m_bar; }
    /// The Cancel button.
    QPushButton* cancelButton() const { return m_cancel; }

private:
    void onStarted(JobRunner* runner, const QString& title);
    void onProgress(JobRunner* runner, double fraction, const QString& stage);
    void onCancelClicked();
    void refresh();

    QLabel* m_label;
    QProgressBar* m_bar;
    QPushButton* m_cancel;
    QList<QPointer<JobRunner>> m_runners;
    QPointer<JobRunner> m_shown;
};

} // namespace bitlens::widgets
