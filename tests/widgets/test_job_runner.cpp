// JobRunner: results come back on the GUI thread, the last request wins, Cancel drops the
// result and reaches the job's token, and failures inside a job become errors.

#include "job_runner.h"

#include <QSemaphore>
#include <QSignalSpy>
#include <QThread>
#include <QtTest>

#include <atomic>
#include <stdexcept>

using bitlens::CancelToken;
using bitlens::Error;
using bitlens::ErrorCode;
using bitlens::Progress;
using bitlens::Result;
using bitlens::widgets::JobRunner;

namespace {

/// Lets queued results and progress reach the runner once its workers are done.
void settle(JobRunner& runner)
{
    QVERIFY(runner.waitForWorkers(30000));
    QCoreApplication::processEvents();
    QTest::qWait(20);
}

} // namespace

class TestJobRunner : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void deliversOnGuiThread();
    void reportsProgress();
    void lastRequestWins();
    void cancelDropsResultAndReachesToken();
    void exceptionsBecomeErrors();
    void destructorCancelsAndWaits();
};

void TestJobRunner::deliversOnGuiThread()
{
    JobRunner runner;
    QSignalSpy finished(&runner, &JobRunner::finished);
    QThread* workerThread = nullptr;
    QThread* deliveryThread = nullptr;
    int value = 0;
    const quint64 id = runner.start(
        QStringLiteral("answer"),
        [&workerThread](Progress&, const CancelToken&) -> Result<int> {
            workerThread = QThread::currentThread();
            return 42;
        },
        [&](Result<int> result) {
            deliveryThread = QThread::currentThread();
            value = result.ok() ? result.value() : -1;
        });
    QVERIFY(runner.isRunning());
    QCOMPARE(runner.currentTitle(), QStringLiteral("answer"));
    QVERIFY(finished.wait(10000));
    QCOMPARE(finished.at(0).at(0).toULongLong(), id);
    QCOMPARE(value, 42);
    QCOMPARE(deliveryThread, QThread::currentThread());
    QVERIFY(workerThread != QThread::currentThread());
    QVERIFY(!runner.isRunning());
}

void TestJobRunner::reportsProgress()
{
    JobRunner runner;
    QSignalSpy progressed(&runner, &JobRunner::progressed);
    QSignalSpy finished(&runner, &JobRunner::finished);
    runner.start(
        QStringLiteral("steps"),
        [](Progress& progress, const CancelToken&) -> Result<int> {
            progress.report(0.25, "stage one");
            progress.report(0.5, "stage two");
            progress.report(1.0, "stage two");
            return 0;
        },
        [](Result<int>) {});
    QVERIFY(finished.wait(10000));
    QVERIFY(progressed.size() >= 3);
    QCOMPARE(progressed.at(0).at(1).toDouble(), 0.25);
    QCOMPARE(progressed.at(0).at(2).toString(), QStringLiteral("stage one"));
    QCOMPARE(progressed.last().at(1).toDouble(), 1.0);
}

void TestJobRunner::lastRequestWins()
{
    JobRunner runner;
    QSignalSpy dropped(&runner, &JobRunner::resultDropped);
    QSignalSpy cancelled(&runner, &JobRunner::cancelled);
    QSemaphore releaseFirst;
    std::atomic<bool> firstSawCancel{false};
    QStringList delivered;

    // The first job holds until the second one has been delivered, so its result surely
    // arrives after the newer request.
    const quint64 first = runner.start(
        QStringLiteral("first"),
        [&](Progress&, const CancelToken& cancel) -> Result<QString> {
            releaseFirst.acquire();
            firstSawCancel = cancel.cancelled();
            return QStringLiteral("first");
        },
        [&](Result<QString> result) { delivered << result.value(); });
    QSignalSpy finished(&runner, &JobRunner::finished);
    runner.start(
        QStringLiteral("second"),
        [](Progress&, const CancelToken&) -> Result<QString> { return QStringLiteral("second"); },
        [&](Result<QString> result) { delivered << result.value(); });
    QCOMPARE(cancelled.size(), 1);
    QCOMPARE(cancelled.at(0).at(0).toULongLong(), first);
    QVERIFY(finished.wait(10000));
    QCOMPARE(delivered, QStringList{QStringLiteral("second")});

    releaseFirst.release();
    settle(runner);
    QCOMPARE(delivered, QStringList{QStringLiteral("second")});
    QCOMPARE(dropped.size(), 1);
    QCOMPARE(dropped.at(0).at(0).toULongLong(), first);
    QVERIFY(firstSawCancel);
}

void TestJobRunner::cancelDropsResultAndReachesToken()
{
    JobRunner runner;
    QSignalSpy finished(&runner, &JobRunner::finished);
    QSignalSpy dropped(&runner, &JobRunner::resultDropped);
    std::atomic<int> batches{0};
    bool delivered = false;
    runner.start(
        QStringLiteral("long"),
        [&batches](Progress& progress, const CancelToken& cancel) -> Result<int> {
            // A job that would run for a minute unless it checks its token per batch.
            for (int batch = 0; batch < 60000; ++batch) {
                if (cancel.cancelled())
                    return Error::cancelled();
                progress.report(batch / 60000.0, "batch");
                ++batches;
                QThread::msleep(1);
            }
            return 1;
        },
        [&delivered](Result<int>) { delivered = true; });
    QTRY_VERIFY_WITH_TIMEOUT(batches > 0, 10000);
    runner.cancel();
    QVERIFY(!runner.isRunning());
    settle(runner);
    QVERIFY(!delivered);
    QCOMPARE(finished.size(), 0);
    QCOMPARE(dropped.size(), 1);
    QVERIFY(batches < 60000);
}

void TestJobRunner::exceptionsBecomeErrors()
{
    JobRunner runner;
    QSignalSpy finished(&runner, &JobRunner::finished);
    std::optional<Error> error;
    runner.start(
        QStringLiteral("throws"),
        [](Progress&, const CancelToken&) -> Result<int> {
            throw std::runtime_error("boom");
        },
        [&error](Result<int> result) {
            if (!result)
                error = result.error();
        });
    QVERIFY(finished.wait(10000));
    QVERIFY(error.has_value());
    QCOMPARE(error->code, ErrorCode::Runtime);
    QCOMPARE(error->message, std::string("boom"));
}

void TestJobRunner::destructorCancelsAndWaits()
{
    std::atomic<bool> stopped{false};
    std::atomic<bool> started{false};
    {
        JobRunner runner;
        runner.start(
            QStringLiteral("until cancelled"),
            [&](Progress&, const CancelToken& cancel) -> Result<int> {
                started = true;
                while (!cancel.cancelled())
                    QThread::msleep(1);
                stopped = true;
                return Error::cancelled();
            },
            [](Result<int>) { QFAIL("a destroyed runner must not deliver"); });
        QTRY_VERIFY_WITH_TIMEOUT(started, 10000);
    }
    QVERIFY(stopped);
    QCoreApplication::processEvents();
}

QTEST_MAIN(TestJobRunner)
#include "test_job_runner.moc"
