#include "job_runner.h"

#include <QThread>

#include <algorithm>
#include <cmath>

namespace bitlens::widgets {

bool ProgressThrottle::pass(double fraction, const std::string& stage)
{
    std::lock_guard lock(m_mutex);
    const bool due = m_first || stage != m_lastStage || fraction >= 1.0 ||
                     std::abs(fraction - m_lastFraction) >= 0.01 ||
                     (fraction != m_lastFraction && m_timer.elapsed() >= 100);
    if (!due)
        return false;
    m_first = false;
    m_lastFraction = fraction;
    m_lastStage = stage;
    m_timer.start();
    return true;
}

JobRunner::JobRunner(QObject* parent) : QObject(parent)
{
    // A cancelled job may still be finishing its current batch while the next one starts.
    m_pool.setMaxThreadCount(std::max(4, QThread::idealThreadCount()));
}

JobRunner::~JobRunner()
{
    m_currentToken.cancel();
    m_pool.waitForDone();
}

void JobRunner::cancel()
{
    if (m_currentId == 0)
        return;
    const quint64 id = m_currentId;
    m_currentToken.cancel();
    m_currentId = 0;
    m_currentTitle.clear();
    Q_EMIT cancelled(id);
}

bool JobRunner::waitForWorkers(int msecs) { return m_pool.waitForDone(msecs); }

quint64 JobRunner::begin(const QString& title, const CancelToken& token)
{
    cancel();
    m_currentId = m_nextId++;
    m_currentTitle = title;
    m_currentToken = token;
    Q_EMIT started(m_currentId, title);
    return m_currentId;
}

void JobRunner::launch(std::function<void()> task) { m_pool.start(std::move(task)); }

void JobRunner::postProgress(quint64 id, double fraction, const std::string& stage)
{
    // Called on a worker thread: only post; the runner outlives its workers (see destructor).
    QMetaObject::invokeMethod(
        this,
        [this, id, fraction, text = QString::fromStdString(stage)] {
            onProgress(id, fraction, text);
        },
        Qt::QueuedConnection);
}

void JobRunner::onProgress(quint64 id, double fraction, const QString& stage)
{
    if (id == m_currentId)
        Q_EMIT progressed(id, fraction, stage);
}

bool JobRunner::accept(quint64 id)
{
    if (id != m_currentId) {
        Q_EMIT resultDropped(id);
        return false;
    }
    m_currentId = 0;
    m_currentTitle.clear();
    return true;
}

} // namespace bitlens::widgets
