// Run while a run is in progress (issue #47 item 4): the window asks whether to cancel the
// running job and start the new one or to keep it, and never restarts silently; after a
// replacement the status bar holds one message (the new job's progress), not "Cancelled; the
// results on screen are kept" over it. With dialogs off (automation) the running job is kept
// and errorShown says so. The running job is one that waits for its cancel token, so every
// question comes while it surely runs; the model and data are written by the test.

#include "job_runner.h"
#include "main_window.h"
#include "model_fixtures.h"
#include "quant_panel.h"
#include "window_fixtures.h"

#include <QApplication>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <chrono>
#include <memory>
#include <thread>

using bitlens::widgets::JobRunner;
using bitlens::widgets::MainWindow;

namespace {

const QString kRunning = QStringLiteral("Quantizing with w4-int4");

/// Starts a job on the window's quantization channel that runs until it is cancelled (at most
/// 60 s), as a long quantization does.
void startLongJob(MainWindow& window)
{
    window.quantJobs()->start(
        kRunning,
        [](bitlens::Progress&, const bitlens::CancelToken& cancel) -> bitlens::Result<int> {
            for (int i = 0; i < 6000 && !cancel.cancelled(); ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            return bitlens::Error::cancelled();
        },
        [](bitlens::Result<int>) {});
}

/// Whether the question came, and what it said.
struct Asked {
    bool shown = false;
    QString text;
};

/// Answers the next "replaceRunBox" question (within 3 s) with the button named `answer`.
std::shared_ptr<Asked> answerQuestion(const QString& answer)
{
    auto asked = std::make_shared<Asked>();
    auto* poll = new QTimer;
    poll->setInterval(10);
    auto tries = std::make_shared<int>(0);
    QObject::connect(poll, &QTimer::timeout, [poll, answer, asked, tries] {
        auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
        if (box && box->objectName() == QLatin1String("replaceRunBox")) {
            asked->shown = true;
            asked->text = box->text() + QLatin1Char('\n') + box->informativeText();
            if (auto* button = box->findChild<QPushButton*>(answer))
                button->click();
            else
                box->reject();
        } else if (++*tries < 300) {
            return;
        }
        poll->stop();
        poll->deleteLater();
    });
    poll->start();
    return asked;
}

} // namespace

class TestRunWhileRunning : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
        m_model = m_dir.filePath(QStringLiteral("small.onnx"));
        const std::string error = bitlens::testing::writeSmallCnn(m_model, 4, "small-cnn");
        QVERIFY2(error.empty(), error.c_str());
        m_data = bitlens::testing::writeSmallLabelledIdx(m_dir.path(), 200);
        QVERIFY(!m_data.isEmpty());
    }

    void runWhileRunningAsks()
    {
        auto window = bitlens::testing::openWindowOn(m_model, m_data);
        QVERIFY(window);
        window->setDialogsEnabled(true);
        window->quantPanel()->setSchemeText(QStringLiteral("static-int8"));
        startLongJob(*window);
        JobRunner* jobs = window->quantJobs();
        QVERIFY(jobs->isRunning());
        const quint64 running = jobs->currentId();
        QSignalSpy started(jobs, &JobRunner::started);
        QSignalSpy cancelled(jobs, &JobRunner::cancelled);

        // Keep it: nothing is cancelled, nothing starts.
        const auto keep = answerQuestion(QStringLiteral("keepRunButton"));
        window->quantPanel()->runButton()->click();
        QVERIFY2(keep->shown, "Run during a run asks");
        QVERIFY2(keep->text.contains(kRunning) &&
                     keep->text.contains(QStringLiteral("static-int8")),
                 qPrintable(keep->text));
        QCOMPARE(jobs->currentId(), running);
        QCOMPARE(started.size(), 0);
        QCOMPARE(cancelled.size(), 0);

        // Cancel it and run: the new run is the panel's scheme, and the status bar says one
        // thing (the new job's progress), not "Cancelled" as well.
        QSignalSpy shown(window.get(), &MainWindow::reportShown);
        const auto replace = answerQuestion(QStringLiteral("replaceRunButton"));
        window->quantPanel()->runButton()->click();
        QVERIFY(replace->shown);
        QCOMPARE(cancelled.size(), 1);
        QCOMPARE(started.size(), 1);
        QCOMPARE(jobs->currentTitle(), QStringLiteral("Quantizing with static-int8"));
        QVERIFY2(window->statusBar()->currentMessage().isEmpty(),
                 qPrintable(window->statusBar()->currentMessage()));
        QVERIFY(shown.wait(60000));
        QVERIFY(jobs->waitForWorkers(30000));
    }

    void runWithoutDialogsKeepsTheRunningJob()
    {
        auto window = bitlens::testing::openWindowOn(m_model, m_data);
        QVERIFY(window);
        startLongJob(*window);
        JobRunner* jobs = window->quantJobs();
        const quint64 running = jobs->currentId();
        QSignalSpy started(jobs, &JobRunner::started);
        QSignalSpy errors(window.get(), &MainWindow::errorShown);
        window->runScheme(QStringLiteral("w4-int4"));
        window->runComparison();
        QCOMPARE(jobs->currentId(), running);
        QCOMPARE(started.size(), 0);
        QCOMPARE(errors.size(), 2);
        QCOMPARE(errors.front().front().toString(),
                 QStringLiteral("Quantizing with w4-int4 is still running: cancel it first "
                                "(Esc), or wait for it to end."));
        window->cancelQuantization();
        QVERIFY(!jobs->isRunning());
        QVERIFY(jobs->waitForWorkers(30000));
    }

private:
    QTemporaryDir m_dir;
    QString m_model;
    QString m_data;
};

QTEST_MAIN(TestRunWhileRunning)
#include "test_run_while_running.moc"
