// The quantization workflow as a user drives it: open a model and labelled data, choose
// static-int8, Run -> the report arrives (summary line, table metric columns, SQNR chart), a
// layer picked in the table or the chart is selected everywhere (the histogram follows), "Keep
// in float32" on a layer and re-run -> that layer is float32 in the report while data and the
// float metric are reused, Cancel keeps the previous results, a bad scheme string is reported and
// keeps the results, and the GUI thread keeps serving events while a run works. Models and data
// are written by the test (no zoo build).

#include "chart_histogram.h"
#include "chart_memory.h"
#include "chart_pareto.h"
#include "chart_sensitivity.h"
#include "chart_sqnr.h"
#include "chart_throughput.h"
#include "comparison_table_model.h"
#include "job_runner.h"
#include "layer_table_model.h"
#include "main_window.h"
#include "model_fixtures.h"
#include "quant_job.h"
#include "quant_panel.h"
#include "report_view.h"
#include "window_fixtures.h"

#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

using bitlens::widgets::LayerTableModel;
using bitlens::widgets::MainWindow;

namespace {

/// The layer names of a report.json, in order.
QStringList reportLayers(const nlohmann::json& report)
{
    QStringList names;
    for (const auto& layer : report["layers"])
        names << QString::fromStdString(layer["name"].get<std::string>());
    return names;
}

/// report.json's entry for `name`.
nlohmann::json reportLayer(const nlohmann::json& report, const QString& name)
{
    for (const auto& layer : report["layers"])
        if (layer["name"] == name.toStdString())
            return layer;
    return {};
}

QString cell(const MainWindow& window, const QString& layer, int column,
             int role = Qt::DisplayRole)
{
    LayerTableModel* model = window.layerModel();
    return model->data(model->index(model->rowOf(layer), column), role).toString();
}

/// The layer of the table's current row.
QString currentTableLayer(MainWindow& window)
{
    const auto* proxy = window.layerTable()->model();
    return proxy->data(proxy->index(window.layerTable()->currentIndex().row(), 0)).toString();
}

} // namespace

class TestQuantWorkflow : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void init();
    void runShowsReport();
    void selectionFollowsEverywhere();
    void keepFloatOverrideReruns();
    void cancelKeepsResults();
    void badSchemeKeepsResults();
    void sensitivityByKldNeedsLanguageModel();
    void eventLoopStaysResponsive();
    void openAndSaveReport();
    void panelComposesSchemeString();
    void memoryForecastBeforeARun();

private:
    /// A window with the small model and the labelled data open.
    std::unique_ptr<MainWindow> openWindow();
    /// Runs `scheme` and waits for the report.
    void runAndWait(MainWindow& window, const QString& scheme);

    QTemporaryDir m_dir;
    QString m_model;
    QString m_data;
};

/// Milliseconds this thread has spent runnable but waiting for a CPU (schedstat's run_delay);
/// 0 where the kernel does not report it.
qint64 runQueueDelayMs()
{
    QFile file(QStringLiteral("/proc/thread-self/schedstat"));
    if (!file.open(QIODevice::ReadOnly))
        return 0;
    const QList<QByteArray> fields = file.readAll().simplified().split(' ');
    return fields.size() >= 2 ? fields[1].toLongLong() / 1000000 : 0;
}

void TestQuantWorkflow::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    m_model = m_dir.filePath(QStringLiteral("small.onnx"));
    const std::string error = bitlens::testing::writeSmallCnn(m_model, 4, "small-cnn");
    QVERIFY2(error.empty(), error.c_str());
    m_data = bitlens::testing::writeSmallLabelledIdx(m_dir.path(), 3000);
    QVERIFY(!m_data.isEmpty());
}

void TestQuantWorkflow::init()
{
    QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens")).clear();
}

std::unique_ptr<MainWindow> TestQuantWorkflow::openWindow()
{
    return bitlens::testing::openWindowOn(m_model, m_data);
}

void TestQuantWorkflow::runAndWait(MainWindow& window, const QString& scheme)
{
    QVERIFY(bitlens::testing::runSchemeAndWait(window, scheme, 30000));
}

void TestQuantWorkflow::runShowsReport()
{
    auto window = openWindow();
    QVERIFY(window);
    QVERIFY(window->currentReport().is_null());
    runAndWait(*window, QStringLiteral("static-int8"));

    const nlohmann::json& report = window->currentReport();
    QCOMPARE(reportLayers(report), QStringList({QStringLiteral("conv1"), QStringLiteral("fc")}));
    QCOMPARE(report["metric"]["samples"].get<int>(), 2000);  // the interactive default
    const QString summary = window->reportView()->summaryText();
    QVERIFY2(summary.startsWith(QStringLiteral("static-int8: top-1 on 2,000 samples ")),
             qPrintable(summary));
    QVERIFY2(summary.contains(QStringLiteral("points), size 5.8 KiB -> ")), qPrintable(summary));
    QVERIFY2(summary.endsWith(QStringLiteral(" of 2 layers on real kernels")), qPrintable(summary));

    // Quantizable layers get the report's numbers; relu1 and flatten stay blank.
    const auto fc = reportLayer(report, QStringLiteral("fc"));
    QCOMPARE(cell(*window, QStringLiteral("fc"), LayerTableModel::SqnrAccumulated),
             QString::number(fc["sqnr_db_accumulated"].get<double>(), 'f', 1));
    QCOMPARE(cell(*window, QStringLiteral("fc"), LayerTableModel::BytesQuantized),
             bitlens::widgets::bytesText(fc["bytes_quantized"].get<std::int64_t>()));
    QCOMPARE(cell(*window, QStringLiteral("fc"), LayerTableModel::Kernel),
             QString::fromStdString(fc["kernel"].get<std::string>()));
    QCOMPARE(cell(*window, QStringLiteral("fc"), LayerTableModel::Scheme),
             QStringLiteral("int8 / uint8"));
    QVERIFY(!cell(*window, QStringLiteral("conv1"), LayerTableModel::SqnrLocal).isEmpty());
    QVERIFY(cell(*window, QStringLiteral("relu1"), LayerTableModel::SqnrLocal).isEmpty());
    QVERIFY(cell(*window, QStringLiteral("flatten"), LayerTableModel::Kernel).isEmpty());
    LayerTableModel* model = window->layerModel();
    const QVariant heat = model->data(
        model->index(model->rowOf(QStringLiteral("fc")), LayerTableModel::SqnrAccumulated),
        Qt::BackgroundRole);
    QCOMPARE(heat.value<QBrush>().color(),
             LayerTableModel::heatColor(fc["sqnr_db_accumulated"].get<double>()));

    QVERIFY(window->reportView()->sqnrChart()->hasData());
    QVERIFY(window->reportView()->histogramChart()->hasData());
    QVERIFY(window->reportView()->memoryChart()->hasData());
    QVERIFY(window->reportView()->throughputChart()->hasData());
    QCOMPARE(window->reportView()->sqnrChart()->layerNames(),
             QStringList({QStringLiteral("conv1"), QStringLiteral("fc")}));
}

void TestQuantWorkflow::selectionFollowsEverywhere()
{
    auto window = openWindow();
    QVERIFY(window);
    runAndWait(*window, QStringLiteral("static-int8"));
    bitlens::widgets::ReportView* view = window->reportView();

    // The table drives the charts...
    window->layerTable()->setCurrentIndex(window->layerIndex(QStringLiteral("fc")));
    QCOMPARE(view->selectedLayer(), QStringLiteral("fc"));
    QCOMPARE(view->histogramLayer(), QStringLiteral("fc"));
    QCOMPARE(view->histogramChart()->layer(), QStringLiteral("fc"));
    QCOMPARE(view->sqnrChart()->selectedLayer(), QStringLiteral("fc"));
    view->histogramMode()->setCurrentIndex(1);
    QCOMPARE(view->histogramChart()->mode(), bitlens::widgets::HistogramChart::Mode::Weights);
    QCOMPARE(view->histogramChart()->layer(), QStringLiteral("fc"));

    // ...and a click on an SQNR bar drives the table and the histogram.
    view->sqnrChart()->onBarClicked(0);
    QCOMPARE(currentTableLayer(*window), QStringLiteral("conv1"));
    QCOMPARE(view->histogramLayer(), QStringLiteral("conv1"));
    QCOMPARE(view->histogramChart()->layer(), QStringLiteral("conv1"));

    // A layer the report does not list (not quantizable) shows no histogram.
    window->selectLayer(QStringLiteral("relu1"));
    QCOMPARE(currentTableLayer(*window), QStringLiteral("relu1"));
    QVERIFY(view->histogramLayer().isEmpty());
}

void TestQuantWorkflow::keepFloatOverrideReruns()
{
    auto window = openWindow();
    QVERIFY(window);
    runAndWait(*window, QStringLiteral("static-int8"));
    QCOMPARE(reportLayer(window->currentReport(), QStringLiteral("fc"))["weight_type"],
             "int8");
    const int loads = window->quantSession()->dataLoads();
    QCOMPARE(window->quantSession()->floatEvaluations(), 1);

    QVERIFY(window->setLayerOverride(QStringLiteral("fc"), QStringLiteral("float")));
    QCOMPARE(cell(*window, QStringLiteral("fc"), LayerTableModel::Scheme),
             QStringLiteral("float32 (kept)"));
    QSignalSpy shown(window.get(), &MainWindow::reportShown);
    window->runQuantization();
    QVERIFY(shown.wait(30000));
    const nlohmann::json& report = window->currentReport();
    QCOMPARE(reportLayer(report, QStringLiteral("fc"))["weight_type"], "float32");
    QCOMPARE(reportLayer(report, QStringLiteral("conv1"))["weight_type"], "int8");
    QCOMPARE(report["scheme"]["overrides"]["fc"], "float");
    // Only the quantized model was recomputed: data and the float metric came from the cache.
    QCOMPARE(window->quantSession()->dataLoads(), loads);
    QCOMPARE(window->quantSession()->floatEvaluations(), 1);
    // ...and only the overridden layer was quantized again: the others came from the last run.
    QVERIFY(report["reused_layers"].is_array());
    QCOMPARE(report["reused_layers"].size() + 1, report["layers"].size());
    for (const auto& name : report["reused_layers"])
        QVERIFY(name != "fc");

    // A scheme override that does not parse is refused and names the layer.
    QSignalSpy errors(window.get(), &MainWindow::errorShown);
    QVERIFY(!window->setLayerOverride(QStringLiteral("conv1"), QStringLiteral("w9-int9")));
    QCOMPARE(errors.size(), 1);
    QVERIFY(errors.front().front().toString().startsWith(
        QStringLiteral("Invalid scheme “w9-int9” for layer conv1: ")));
    window->clearLayerOverride(QStringLiteral("fc"));
    QVERIFY(window->layerOverrides().isEmpty());
    QCOMPARE(cell(*window, QStringLiteral("fc"), LayerTableModel::Scheme),
             QStringLiteral("float32 / float32"));
}

void TestQuantWorkflow::cancelKeepsResults()
{
    auto window = openWindow();
    QVERIFY(window);
    runAndWait(*window, QStringLiteral("static-int8"));
    const nlohmann::json before = window->currentReport();
    const QString summaryBefore = window->reportView()->summaryText();

    QSignalSpy shown(window.get(), &MainWindow::reportShown);
    QSignalSpy stopped(window.get(), &MainWindow::quantizationStopped);
    window->quantPanel()->setEvaluateAll(true);
    window->runScheme(QStringLiteral("w4-int4"));
    QVERIFY(window->quantJobs()->isRunning());
    QVERIFY(window->quantPanel()->cancelButton()->isEnabled());
    QTest::keyClick(window.get(), Qt::Key_Escape);  // the Cancel shortcut
    QVERIFY(!window->quantJobs()->isRunning());
    QCOMPARE(stopped.size(), 1);
    QElapsedTimer stopping;
    stopping.start();
    QVERIFY(window->quantJobs()->waitForWorkers(10000));
    QVERIFY2(stopping.elapsed() < 1000, "the worker stops within a second");
    QTest::qWait(50);
    QCOMPARE(shown.size(), 0);
    QCOMPARE(window->currentReport(), before);
    QCOMPARE(window->reportView()->summaryText(), summaryBefore);
    QVERIFY(!window->quantPanel()->cancelButton()->isEnabled());
}

void TestQuantWorkflow::badSchemeKeepsResults()
{
    auto window = openWindow();
    QVERIFY(window);
    runAndWait(*window, QStringLiteral("static-int8"));
    const nlohmann::json before = window->currentReport();

    QSignalSpy errors(window.get(), &MainWindow::errorShown);
    window->runScheme(QStringLiteral("static-int8:bogus=1"));
    QVERIFY(!window->quantJobs()->isRunning());
    QCOMPARE(errors.size(), 1);
    const QString message = errors.front().front().toString();
    QVERIFY2(message.startsWith(QStringLiteral("Invalid scheme “static-int8:bogus=1”: "
                                               "unknown option 'bogus'")),
             qPrintable(message));
    QCOMPARE(window->lastError(), message);
    QCOMPARE(window->currentReport(), before);
    // The panel shows the string it could not express, as typed.
    QCOMPARE(window->quantPanel()->schemeLine()->text(), QStringLiteral("static-int8:bogus=1"));
}

void TestQuantWorkflow::sensitivityByKldNeedsLanguageModel()
{
    // The Sensitivity tab's "Rank by" reaches core's sweep: KL divergence ranking of a classifier
    // is refused with core's message in the window's error dialog; the report on screen stays.
    auto window = openWindow();
    QVERIFY(window);
    runAndWait(*window, QStringLiteral("w4-int4"));
    const nlohmann::json before = window->currentReport();
    auto* rank = window->reportView()->findChild<QComboBox*>(QStringLiteral("sensitivityRank"));
    QVERIFY(rank);
    QCOMPARE(rank->count(), 2);
    QVERIFY(!window->reportView()->sensitivityByKld());
    rank->setCurrentIndex(1);
    QVERIFY(window->reportView()->sensitivityByKld());
    QSignalSpy errors(window.get(), &MainWindow::errorShown);
    Q_EMIT window->reportView()->sensitivityRequested();
    QVERIFY(errors.wait(30000));
    const QString message = errors.front().front().toString();
    QVERIFY2(message.contains(QStringLiteral("KL divergence needs a language model")),
             qPrintable(message));
    QCOMPARE(window->currentReport(), before);
}

void TestQuantWorkflow::eventLoopStaysResponsive()
{
    // A responsiveness check of the GUI thread, not a timing of the computation: a 10 ms timer
    // must keep firing while the worker quantizes and analyzes, so no gap may exceed 100 ms.
    // On a shared, loaded machine the kernel may keep the GUI thread waiting for a core: the
    // time it spent runnable but not running (its run-queue delay, /proc schedstat) is not time
    // our code blocked the event loop, so it is taken out of each gap.
    auto window = openWindow();
    QVERIFY(window);
    window->quantPanel()->setEvaluateAll(true);
    QElapsedTimer clock;
    qint64 last = 0;
    qint64 lastDelay = runQueueDelayMs();
    qint64 largestGap = 0;
    qint64 largestWallGap = 0;
    int ticks = 0;
    QTimer probe;
    probe.setInterval(10);
    connect(&probe, &QTimer::timeout, this, [&] {
        const qint64 now = clock.elapsed();
        const qint64 delay = runQueueDelayMs();
        largestWallGap = std::max(largestWallGap, now - last);
        largestGap = std::max(largestGap, (now - last) - std::max<qint64>(0, delay - lastDelay));
        last = now;
        lastDelay = delay;
        ++ticks;
    });
    QSignalSpy shown(window.get(), &MainWindow::reportShown);
    clock.start();
    probe.start();
    window->runScheme(QStringLiteral("static-int8:observer=entropy"));
    QVERIFY(shown.wait(30000));
    QTest::qWait(30);  // the report's delivery (table, charts) is inside the measured time
    probe.stop();
    qInfo("run took %lld ms, %d ticks, largest gap %lld ms (%lld ms wall, run-queue waits "
          "included)",
          static_cast<long long>(last), ticks, static_cast<long long>(largestGap),
          static_cast<long long>(largestWallGap));
    QVERIFY(ticks >= 3);
    QVERIFY2(largestGap < 100, qPrintable(QStringLiteral("largest gap %1 ms").arg(largestGap)));
}

void TestQuantWorkflow::openAndSaveReport()
{
    // A saved report opens without a model (for teaching) and shows what it holds.
    MainWindow window;
    window.setDialogsEnabled(false);
    QVERIFY(window.openReport(QStringLiteral(BITLENS_TEST_DATA "/reports/fashion-cnn-static-int8.json")));
    QCOMPARE(window.reportView()->summaryText(),
             QStringLiteral("static-int8: top-1 on 10,000 samples 91.83 % -> 91.77 % "
                            "(-0.06 points), size 1.61 MiB -> 413.4 KiB (0.251), 2 of 4 layers "
                            "on real kernels"));
    QVERIFY(window.reportView()->sqnrChart()->hasData());

    const QString saved = m_dir.filePath(QStringLiteral("saved.json"));
    QVERIFY(window.saveReport(saved));
    auto reread = bitlens::widgets::readJsonFile(saved.toStdString());
    QVERIFY(reread.ok());
    QCOMPARE(reread.value(), window.currentReport());

    // A compare file fills the Compare tab; a sensitivity file the Sensitivity tab.
    QVERIFY(window.openReport(QStringLiteral(BITLENS_TEST_DATA "/reports/fashion-cnn-compare.json")));
    QVERIFY(window.reportView()->comparisonModel()->rowCount() > 0);
    QVERIFY(window.reportView()->paretoChart()->hasData());
    QCOMPARE(window.reportView()->tabs()->tabText(window.reportView()->tabs()->currentIndex()),
             QStringLiteral("Compare"));
    QVERIFY(window.openReport(
        QStringLiteral(BITLENS_TEST_DATA "/reports/fashion-cnn-sensitivity-w4-int4.json")));
    QVERIFY(window.reportView()->sensitivityChart()->hasData());
    QCOMPARE(reread.value(), window.currentReport());  // the report on screen stays

    QSignalSpy errors(&window, &MainWindow::errorShown);
    const QString notJson = m_dir.filePath(QStringLiteral("not.json"));
    QFile file(notJson);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("{ no");
    file.close();
    QVERIFY(!window.openReport(notJson));
    QCOMPARE(errors.size(), 1);
    QCOMPARE(errors.front().front().toString(),
             QStringLiteral("Could not open report “%1”: not valid JSON").arg(notJson));
    QCOMPARE(reread.value(), window.currentReport());
}

void TestQuantWorkflow::panelComposesSchemeString()
{
    bitlens::widgets::QuantPanel panel;
    panel.presetBox()->setCurrentText(QStringLiteral("static-int8"));
    QCOMPARE(panel.schemeText(), QStringLiteral("static-int8"));
    panel.observerBox()->setCurrentText(QStringLiteral("percentile:99.99"));
    panel.granularityBox()->setCurrentIndex(3);
    panel.groupSizeBox()->setValue(128);
    panel.symmetricBox()->setCheckState(Qt::Unchecked);
    const QString expected =
        QStringLiteral("static-int8:observer=percentile:99.99,group=128,sym=false");
    QCOMPARE(panel.schemeText(), expected);
    QCOMPARE(panel.schemeLine()->text(), expected);
    QVERIFY(bitlens::widgets::checkScheme(expected.toStdString()).ok());

    // A string the controls can express sets them; the round trip is exact.
    bitlens::widgets::QuantPanel other;
    other.setSchemeText(QStringLiteral("w4-int4:group=64"));
    QCOMPARE(other.presetBox()->currentText(), QStringLiteral("w4-int4"));
    QCOMPARE(other.groupSizeBox()->value(), 64);
    QCOMPARE(other.schemeText(), QStringLiteral("w4-int4:group=64"));
    other.setSchemeText(expected);
    QCOMPARE(other.schemeText(), expected);
    // A custom string runs as typed while the controls show what they can of it; touching a
    // control then goes back to what the controls say.
    other.setSchemeText(QStringLiteral("w4-int4:weird=1,sym=true"));
    QCOMPARE(other.schemeText(), QStringLiteral("w4-int4:weird=1,sym=true"));
    QCOMPARE(other.presetBox()->currentText(), QStringLiteral("w4-int4"));
    QCOMPARE(other.observerBox()->currentIndex(), 0);
    QCOMPARE(other.symmetricBox()->checkState(), Qt::Checked);
    other.presetBox()->setCurrentText(QStringLiteral("dynamic-int8"));
    QCOMPARE(other.schemeText(), QStringLiteral("dynamic-int8:sym=true"));
}

void TestQuantWorkflow::memoryForecastBeforeARun()
{
    {
        MainWindow empty;
        QVERIFY(empty.quantPanel()->memoryLabel()->text().startsWith(
            QStringLiteral("Open a model")));
    }
    auto window = openWindow();
    QVERIFY(window);
    QLabel* memory = window->quantPanel()->memoryLabel();
    window->quantPanel()->setSchemeText(QStringLiteral("w4-int4"));
    QVERIFY2(memory->text().startsWith(QStringLiteral("~")), qPrintable(memory->text()));
    QVERIFY2(memory->text().contains(QStringLiteral(" available")), qPrintable(memory->text()));
    QVERIFY2(memory->text().contains(QStringLiteral("quantized copies")),
             qPrintable(memory->text()));
    runAndWait(*window, QStringLiteral("w4-int4"));
    const nlohmann::json before = window->currentReport();

    // A machine too small for the run: the panel says so before, and the run is refused with
    // the estimate while the results on screen stay.
    qputenv("BITLENS_MEMORY_AVAILABLE", "1000");
    window->quantPanel()->setSchemeText(QStringLiteral("dynamic-int8"));
    QVERIFY2(memory->text().startsWith(QStringLiteral("Will not fit: ~")),
             qPrintable(memory->text()));
    QSignalSpy errors(window.get(), &MainWindow::errorShown);
    window->runScheme(QStringLiteral("dynamic-int8"));
    if (errors.isEmpty())
        QVERIFY(errors.wait(30000));
    qunsetenv("BITLENS_MEMORY_AVAILABLE");
    const QString message = errors.front().front().toString();
    QVERIFY2(message.contains(QStringLiteral("quantize needs ~")) &&
                 message.contains(QStringLiteral("0 MB available")),
             qPrintable(message));
    QCOMPARE(window->currentReport(), before);
    window->quantPanel()->setSchemeText(QStringLiteral("w4-int4"));
    QVERIFY2(!memory->text().startsWith(QStringLiteral("Will not fit")),
             qPrintable(memory->text()));
}

QTEST_MAIN(TestQuantWorkflow)
#include "test_quant_workflow.moc"
