#include "job_progress_widget.h"

#include "job_runner.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>

#include <cmath>

namespace bitlens::widgets {

JobProgressWidget::JobProgressWidget(QWidget* parent)
    : QWidget(parent), m_label(new QLabel(this)), m_bar(new QProgressBar(this)),
      m_cancel(new QPushButton(tr("Cancel"), this))
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

void JobProgressWidget::onStarted(JobRunner* runner, const QString& title)
{
    m_shown = runner;
    m_label->setText(title);
    m_label->setToolTip(title);
    m_bar->setRange(0, 0); // busy until the first report
    show();
}

void JobProgressWidget::onProgress(JobRunner* runner, double fraction, const QString& stage)
{
    if (runner != m_shown)
        return;
    m_bar->setRange(0, 1000);
    m_bar->setValue(static_cast<int>(std::lround(fraction * 1000.0)));
    const QString title = runner->currentTitle();
    m_label->setText(stage.isEmpty() ? title : tr("%1: %2").arg(title, stage));
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
            m_label->setText(runner->currentTitle());
            m_bar->setRange(0, 0);
            return;
        }
    }
    hide();
}

} // namespace bitlens::widgets
