#include "job_progress_widget.h"

#include "job_runner.h"

#include "jobs/step_clock.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QTimer>

#include <cmath>

namespace bitlens::widgets {

JobProgressWidget::JobProgressWidget(QWidget* parent)
    : QWidget(parent), m_label(new QLabel(this)), m_bar(new QProgressBar(this)),
      m_cancel(new QPushButton(tr("Cancel"), this)), m_tick(new QTimer(this))
{
    setObjectName(QStringLiteral("jobProgress"));
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_label->setObjectName(QStringLiteral("jobLabel"));
    m_bar->setObjectName(QStringLiteral("jobProgressBar"));
    m_bar->setRange(0, 1000);
    m_bar->setFixedWidth(160);
    m_bar->setTextVisible(false);
    m_cancel->setObjectName(QStringLiteral("jobCancel"));
    m_cancel->setToolTip(tr("Stop this job; the current model stays open"));
    layout->addWidget(m_label);
    layout->addWidget(m_bar);
    layout->addWidget(m_cancel);
    connect(m_cancel, &QPushButton::clicked, this, &JobProgressWidget::onCancelClicked);
    m_tick->setInterval(1000);
    connect(m_tick, &QTimer::timeout, this, &JobProgressWidget::updateLabel);
    hide();
}

void JobProgressWidget::watch(JobRunner* runner)
{
    m_runners.append(runner);
    connect(runner, &JobRunner::started, this,
            [this, runner](quint64, const QString& title) { onStarted(runner, title); });
    connect(runner, &JobRunner::progressed, this,
            [this, runner](quint64, double fraction, const QString& stage) {
                onProgress(runner, fraction, stage);
            });
    connect(runner, &JobRunner::finished, this, &JobProgressWidget::refresh);
    connect(runner, &JobRunner::cancelled, this, &JobProgressWidget::refresh);
}

QString JobProgressWidget::text() const { return isHidden() ? QString() : m_label->text(); }

namespace {

QString clockText(qint64 ms)
{
    return QString::fromStdString(bitlens::clockText(static_cast<double>(ms) / 1000.0));
}

} // namespace

QString JobProgressWidget::timeText(qint64 elapsedMs, double fraction, const QString& stage)
{
    const QString elapsed = tr("%1 elapsed").arg(clockText(elapsedMs));
    if (elapsedMs < 2000 || fraction < 0.02 || fraction >= 1.0 ||
        bitlens::stageHasTimeLeft(stage.toStdString()))
        return elapsed;
    const auto left = static_cast<qint64>(static_cast<double>(elapsedMs) * (1.0 - fraction) /
                                          fraction);
    return tr("%1, about %2 left").arg(elapsed, clockText(left));
}

void JobProgressWidget::onStarted(JobRunner* runner, const QString& title)
{
    m_shown = runner;
    m_stage.clear();
    m_fraction = -1.0;
    m_clock.start();
    m_tick->start();
    m_bar->setRange(0, 0); // busy until the first report
    updateLabel();
    show();
}

void JobProgressWidget::onProgress(JobRunner* runner, double fraction, const QString& stage)
{
    if (runner != m_shown)
        return;
    m_bar->setRange(0, 1000);
    m_bar->setValue(static_cast<int>(std::lround(fraction * 1000.0)));
    m_fraction = fraction;
    m_stage = stage;
    updateLabel();
}

void JobProgressWidget::updateLabel()
{
    if (!m_shown)
        return;
    const QString title = m_shown->currentTitle();
    const QString what = m_stage.isEmpty() ? title : tr("%1: %2").arg(title, m_stage);
    m_label->setText(tr("%1 · %2").arg(what, timeText(m_clock.elapsed(), m_fraction, m_stage)));
    m_label->setToolTip(m_label->text());
}

void JobProgressWidget::onCancelClicked()
{
    if (m_shown)
        m_shown->cancel();
}

void JobProgressWidget::refresh()
{
    if (m_shown && m_shown->isRunning())
        return;
    m_shown = nullptr;
    for (const auto& runner : m_runners) {
        if (runner && runner->isRunning()) {
            m_shown = runner;
            m_stage.clear();
            m_fraction = -1.0;
            m_bar->setRange(0, 0);
            updateLabel();
            return;
        }
    }
    m_tick->stop();
    hide();
}

} // namespace bitlens::widgets
