#pragma once
// JobRunner runs core jobs (`Result<T> work(Progress&, const CancelToken&)`) on its own thread
// pool and hands their results back on the GUI thread through queued calls. One runner is one
// channel of requests: starting a job cancels the one before it, and a result that arrives after
// a newer request (or after Cancel) is dropped, so the last request always wins. Workers never
// touch widgets; they only post to the runner, which lives on the GUI thread.

#include "jobs/progress.h"
#include "jobs/result.h"

#include <QElapsedTimer>
#include <QMetaObject>
#include <QObject>
#include <QString>
#include <QThreadPool>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace bitlens::widgets {

/// Thins out progress reports from a worker so the GUI thread gets at most a few dozen a second:
/// a report passes when its stage changed, it moved by 1 %, it is the end, or 100 ms went by.
class ProgressThrottle {
public:
    /// True when (fraction, stage) should be posted; safe to call from any thread.
    bool pass(double fraction, const std::string& stage);

private:
    std::mutex m_mutex;
    QElapsedTimer m_timer;
    double m_lastFraction = -1.0;
    std::string m_lastStage;
    bool m_first = true;
};

/// Runs one channel of cancellable jobs off the GUI thread (see the file comment).
class JobRunner : public QObject {
    Q_OBJECT

public:
    explicit JobRunner(QObject* parent = nullptr);
    /// Cancels the running job and waits for every worker to return (the jobs check their
    /// token per layer or batch, so this is short).
    ~JobRunner() override;

    /// Starts `work(progress, cancel)` on the pool and cancels the job before it. When the job
    /// ends and is still the current one, `done(result)` runs on the GUI thread, then
    /// finished(id) is emitted. Exceptions from `work` become Error::runtime. Returns the job id.
    template <typename Work, typename Done>
    quint64 start(const QString& title, Work work, Done done);

    /// Cancels the current job: its token is set and whatever it returns is dropped.
    void cancel();
    /// True while a job was started and neither delivered nor cancelled.
    bool isRunning() const { return m_currentId != 0; }
    /// Id of the current job, 0 when none.
    quint64 currentId() const { return m_currentId; }
    /// Title of the current job ("Opening model.onnx"), empty when none.
    QString currentTitle() const { return m_currentTitle; }
    /// Blocks until no worker of this runner is busy (tests, shutdown); -1 waits forever.
    bool waitForWorkers(int msecs = -1);

Q_SIGNALS:
    /// A job was started.
    void started(quint64 id, const QString& title);
    /// The current job reported progress: fraction in [0, 1] and a stage text.
    void progressed(quint64 id, double fraction, const QString& stage);
    /// The current job's result was delivered to its `done` callback.
    void finished(quint64 id);
    /// The current job was cancelled by cancel() or by a newer start().
    void cancelled(quint64 id);
    /// A job's result arrived after it stopped being current, and was thrown away.
    void resultDropped(quint64 id);

private:
    quint64 begin(const QString& title, const CancelToken& token);
    void launch(std::function<void()> task);
    void postProgress(quint64 id, double fraction, const std::string& stage);
    void onProgress(quint64 id, double fraction, const QString& stage);
    bool accept(quint64 id);

    QThreadPool m_pool;
    quint64 m_nextId = 1;
    quint64 m_currentId = 0;
    QString m_currentTitle;
    CancelToken m_currentToken;
};

template <typename Work, typename Done>
quint64 JobRunner::start(const QString& title, Work work, Done done)
{
    using R = std::invoke_result_t<Work&, Progress&, const CancelToken&>;
    static_assert(std::is_constructible_v<R, Error>, "a job returns a Result<T>");
    const CancelToken token;
    const quint64 id = begin(title, token);
    launch([this, id, token, work = std::move(work), done = std::move(done)]() mutable {
        auto throttle = std::make_shared<ProgressThrottle>();
        Progress progress([this, id, throttle](double fraction, const std::string& stage) {
            if (throttle->pass(fraction, stage))
                postProgress(id, fraction, stage);
        });
        auto result = std::make_shared<std::optional<R>>();
        try {
            result->emplace(work(progress, token));
        } catch (const std::exception& e) {
            result->emplace(Error::runtime(e.what()));
        } catch (...) {
            result->emplace(Error::runtime("unknown failure"));
        }
        QMetaObject::invokeMethod(
            this,
            [this, id, result, done]() mutable {
                if (!accept(id))
                    return;
                done(std::move(**result));
                Q_EMIT finished(id);
            },
            Qt::QueuedConnection);
    });
    return id;
}

} // namespace bitlens::widgets
