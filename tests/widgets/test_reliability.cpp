// Work is never lost (issue #8): a .bitlens project saves and restores the session; Cancel at
// any moment of a run leaves the last results and the open model as they were; a job that fails
// becomes an error dialog while the window stays usable.

#include "history_model.h"
#include "job_runner.h"
#include "main_window.h"
#include "model_fixtures.h"
#include "quant_panel.h"
#include "report_view.h"
#include "window_fixtures.h"

#include "io/onnx.h"
#include "ir/graph.h"

#include <ATen/ATen.h>

#include <QFile>
#include <QMessageBox>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <limits>

using bitlens::widgets::MainWindow;

class TestReliability : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void init();
    void projectRoundTrip();
    void brokenProjectKeepsSession();
    void cancelAtAnyMomentKeepsResults();
    void failingJobBecomesDialog();

private:
    std::unique_ptr<MainWindow> openWindow(const QString& model);
    bool runAndWait(MainWindow& window, const QString& scheme);

    QTemporaryDir m_dir;
    QString m_model;
    QString m_nanModel;
    QString m_data;
};

void TestReliability::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    m_model = m_dir.filePath(QStringLiteral("small.onnx"));
    const std::string error = bitlens::testing::writeSmallCnn(m_model, 4, "small-cnn");
    QVERIFY2(error.empty(), error.c_str());
    m_data = bitlens::testing::writeSmallLabelledIdx(m_dir.path(), 3000);
    QVERIFY(!m_data.isEmpty());

    // The same network with a NaN among fc's weights: it opens and runs in float, but
    // quantizing it must fail with a reason instead of producing NaN scales.
    at::manual_seed(7);
    bitlens::ir::GraphBuilder builder("nan-cnn");
    const std::string x = builder.input("image", {-1, 1, 8, 8});
    const std::string conv =
        builder.conv2d("conv1", x, at::randn({4, 1, 3, 3}), at::randn({4}));
    const std::string relu = builder.unary("relu1", bitlens::ir::OpKind::Relu, conv);
    const std::string flat = builder.flatten("flatten", relu);
    at::Tensor fcWeight = at::randn({10, 144});
    fcWeight[3][17] = std::numeric_limits<float>::quiet_NaN();
    builder.output(builder.linear("fc", flat, fcWeight, at::randn({10})));
    auto graph = builder.build();
    QVERIFY(graph.ok());
    m_nanModel = m_dir.filePath(QStringLiteral("nan.onnx"));
    QVERIFY(bitlens::io::writeOnnxFile(graph.value(), m_nanModel.toStdString()).ok());
}

void TestReliability::init()
{
    QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens")).clear();
}

std::unique_ptr<MainWindow> TestReliability::openWindow(const QString& model)
{
    return bitlens::testing::openWindowOn(model, m_data);
}

bool TestReliability::runAndWait(MainWindow& window, const QString& scheme)
{
    return bitlens::testing::runSchemeAndWait(window, scheme);
}

void TestReliability::projectRoundTrip()
{
    auto window = openWindow(m_model);
    QVERIFY(window);
    QVERIFY(runAndWait(*window, QStringLiteral("static-int8")));
    QVERIFY(window->setLayerOverride(QStringLiteral("fc"), QStringLiteral("float")));
    QVERIFY(runAndWait(*window, QStringLiteral("w4-int4")));
    window->quantPanel()->setSchemeText(QStringLiteral("static-int8:observer=mse"));
    const auto* history = window->reportView()->historyModel();
    QCOMPARE(history->rowCount(), 2);

    const QString path = m_dir.filePath(QStringLiteral("session.bitlens"));
    QVERIFY(window->saveProject(path));
    QVERIFY(QFile::exists(path));

    MainWindow restored;
    restored.setDialogsEnabled(false);
    QSignalSpy projectLoaded(&restored, &MainWindow::projectLoaded);
    QSignalSpy dataLoaded(&restored, &MainWindow::dataLoaded);
    QSignalSpy errors(&restored, &MainWindow::errorShown);
    QVERIFY(restored.openProject(path));
    QVERIFY(projectLoaded.wait(30000));
    if (dataLoaded.isEmpty())
        QVERIFY(dataLoaded.wait(30000));
    QVERIFY2(errors.isEmpty(), errors.isEmpty() ? "" : qPrintable(errors.front().front().toString()));

    QVERIFY(restored.currentModel());
    QCOMPARE(QString::fromStdString(restored.currentModel()->model->path()), m_model);
    QVERIFY(restored.currentData());
    QCOMPARE(restored.currentData()->path, window->currentData()->path);
    // The panel shows the scheme of the run on screen (the last one, w4-int4 with fc kept in
    // float32), not the scheme composed after it.
    QCOMPARE(restored.quantPanel()->schemeText(), QStringLiteral("w4-int4"));
    QCOMPARE(restored.layerOverrides(), window->layerOverrides());
    const auto* restoredHistory = restored.reportView()->historyModel();
    QCOMPARE(restoredHistory->rowCount(), 2);
    for (int row = 0; row < 2; ++row) {
        QCOMPARE(restoredHistory->run(row).report, history->run(row).report);
        QCOMPARE(restoredHistory->run(row).scheme, history->run(row).scheme);
        QCOMPARE(restoredHistory->run(row).modelPath, history->run(row).modelPath);
    }
    // The last run is what is on screen, as it was when the project was saved.
    QCOMPARE(restored.currentReport(), window->currentReport());

    // And the restored session works on: another run adds a third row.
    QVERIFY(runAndWait(restored, QStringLiteral("static-int8")));
    QCOMPARE(restoredHistory->rowCount(), 3);
}

void TestReliability::brokenProjectKeepsSession()
{
    auto window = openWindow(m_model);
    QVERIFY(window);
    QVERIFY(runAndWait(*window, QStringLiteral("static-int8")));
    const nlohmann::json before = window->currentReport();
    const auto* modelBefore = window->currentModel();

    const QString broken = m_dir.filePath(QStringLiteral("broken.bitlens"));
    QFile file(broken);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("{\"format\": \"bitlens-project\", \"version\": 1, \"runs\": [");
    file.close();
    QSignalSpy errors(window.get(), &MainWindow::errorShown);
    QVERIFY(!window->openProject(broken));
    QCOMPARE(errors.size(), 1);
    QVERIFY2(errors.front().front().toString().contains(QStringLiteral("not valid JSON")),
             qPrintable(errors.front().front().toString()));
    QCOMPARE(window->currentModel(), modelBefore);
    QCOMPARE(window->currentReport(), before);

    // Saving into a folder that does not exist fails with a message and writes nothing.
    const QString nowhere = m_dir.filePath(QStringLiteral("missing/session.bitlens"));
    QVERIFY(!window->saveProject(nowhere));
    QCOMPARE(errors.size(), 2);
    QVERIFY(!QFile::exists(nowhere));
}

void TestReliability::cancelAtAnyMomentKeepsResults()
{
    auto window = openWindow(m_model);
    QVERIFY(window);
    QVERIFY(runAndWait(*window, QStringLiteral("static-int8")));
    const auto* modelBefore = window->currentModel();
    window->quantPanel()->setEvaluateAll(true);

    // Cancel at a spread of moments of a run: before it started working, while it reads the
    // data, while it calibrates, while it evaluates. A run that finished before its moment
    // shows its report (that is not a cancellation) and becomes the state to keep.
    QSignalSpy shown(window.get(), &MainWindow::reportShown);
    QSignalSpy errors(window.get(), &MainWindow::errorShown);
    int cancelled = 0;
    int finished = 0;
    for (int delayMs : {0, 1, 2, 5, 10, 20, 35, 50, 75, 100, 150, 200, 300, 400}) {
        const nlohmann::json before = window->currentReport();
        const int runsBefore = window->reportView()->historyModel()->rowCount();
        const qsizetype shownBefore = shown.size();
        window->runScheme(QStringLiteral("w4-int4"));
        QVERIFY(window->quantJobs()->isRunning());
        if (delayMs > 0)
            QTest::qWait(delayMs);
        if (!window->quantJobs()->isRunning()) {
            ++finished;  // done before this moment: nothing to cancel
            continue;
        }
        window->cancelQuantization();
        ++cancelled;
        QVERIFY(!window->quantJobs()->isRunning());
        QVERIFY(window->quantJobs()->waitForWorkers(30000));
        QTest::qWait(20);
        QCOMPARE(shown.size(), shownBefore);
        QCOMPARE(window->currentReport(), before);
        QCOMPARE(window->currentModel(), modelBefore);
        QCOMPARE(window->reportView()->historyModel()->rowCount(), runsBefore);
    }
    QVERIFY2(cancelled >= 5, "most moments fall inside a run");
    QCOMPARE(shown.size(), finished);
    QCOMPARE(errors.size(), 0);
    // The window still works after all that.
    const int runs = window->reportView()->historyModel()->rowCount();
    QVERIFY(runAndWait(*window, QStringLiteral("static-int8")));
    QCOMPARE(window->reportView()->historyModel()->rowCount(), runs + 1);
}

void TestReliability::failingJobBecomesDialog()
{
    auto window = openWindow(m_nanModel);
    QVERIFY(window);
    window->setDialogsEnabled(true);
    const auto* modelBefore = window->currentModel();
    QSignalSpy errors(window.get(), &MainWindow::errorShown);
    QSignalSpy stopped(window.get(), &MainWindow::quantizationStopped);
    window->runScheme(QStringLiteral("dynamic-int8"));
    QVERIFY(stopped.wait(60000));
    QCOMPARE(errors.size(), 1);
    const QString message = errors.front().front().toString();
    QVERIFY2(message.contains(QStringLiteral("weight of layer 'fc' holds NaN")), qPrintable(message));
    // The error is a (non-modal) dialog over a window that still has its model.
    auto* box = window->findChild<QMessageBox*>(QStringLiteral("errorBox"));
    QVERIFY(box);
    QVERIFY(box->text().contains(QStringLiteral("NaN")));
    QCOMPARE(window->currentModel(), modelBefore);
    QVERIFY(!window->isBusy());
    box->close();
    // The app is alive: the next model opens and quantizes in the same window.
    window->setDialogsEnabled(false);
    QSignalSpy loaded(window.get(), &MainWindow::modelLoaded);
    window->openModel(m_model);
    QVERIFY(loaded.wait(30000));
    QVERIFY(runAndWait(*window, QStringLiteral("dynamic-int8")));
}

QTEST_MAIN(TestReliability)
#include "test_reliability.moc"
