// The run history as a user relies on it: two runs on the open model give two History rows (the
// Pareto chart weighs both), selecting a row shows that run in the result tabs and the layer
// table, two rows side by side show both runs' SQNR per layer (four bar sets) and a per-layer
// table with exactly the reports' numbers, opening another model clears the history, and a
// report .json dropped on the window opens as a report. Models and data are written by the test.

#include "chart_pareto.h"
#include "history_model.h"
#include "job_runner.h"
#include "main_window.h"
#include "model_fixtures.h"
#include "quant_job.h"
#include "report_view.h"
#include "side_by_side_view.h"

#include <QAbstractItemModelTester>
#include <QBarSeries>
#include <QBarSet>
#include <QItemSelectionModel>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>

#include <cmath>

using bitlens::widgets::HistoryModel;
using bitlens::widgets::MainWindow;
using bitlens::widgets::SideBySideModel;

namespace {

constexpr auto kQtTestReporting = QAbstractItemModelTester::FailureReportingMode::QtTest;

/// The accumulated SQNR of `layer` in `report` (+inf for exact), NaN when absent.
double accumulatedSqnr(const nlohmann::json& report, const QString& layer)
{
    for (const auto& entry : report["layers"])
        if (entry["name"] == layer.toStdString()) {
            const auto& v = entry["sqnr_db_accumulated"];
            return v.is_null() ? INFINITY : v.get<double>();
        }
    return NAN;
}

/// bytes_quantized of `layer` in `report`, NaN when absent.
double bytesQuantized(const nlohmann::json& report, const QString& layer)
{
    for (const auto& entry : report["layers"])
        if (entry["name"] == layer.toStdString())
            return entry["bytes_quantized"].get<double>();
    return NAN;
}

QString currentTab(const MainWindow& window)
{
    const QTabWidget* tabs = window.reportView()->tabs();
    return tabs->tabText(tabs->currentIndex());
}

} // namespace

class TestHistory : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void twoRunsMakeTwoRows();
    void selectingRowShowsRun();
    void sideBySideShowsBothRuns();
    void droppedReportOpens();
    void comparisonLandsInHistory();
    void newModelClearsHistory();
    void cleanupTestCase();

private:
    void runAndWait(const QString& scheme);

    QTemporaryDir m_dir;
    QString m_model;
    QString m_data;
    std::unique_ptr<MainWindow> m_window;
    std::unique_ptr<QAbstractItemModelTester> m_historyTester;
    std::unique_ptr<QAbstractItemModelTester> m_diffTester;
};

void TestHistory::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens")).clear();
    QVERIFY(m_dir.isValid());
    m_model = m_dir.filePath(QStringLiteral("small.onnx"));
    const std::string error = bitlens::testing::writeSmallCnn(m_model, 4, "small-cnn");
    QVERIFY2(error.empty(), error.c_str());
    m_data = bitlens::testing::writeSmallLabelledIdx(m_dir.path(), 3000);
    QVERIFY(!m_data.isEmpty());

    m_window = std::make_unique<MainWindow>();
    m_window->setDialogsEnabled(false);
    m_window->show();
    m_historyTester = std::make_unique<QAbstractItemModelTester>(
        m_window->reportView()->historyModel(), kQtTestReporting);
    m_diffTester = std::make_unique<QAbstractItemModelTester>(
        m_window->reportView()->sideBySideView()->model(), kQtTestReporting);
    QSignalSpy loaded(m_window.get(), &MainWindow::modelLoaded);
    QSignalSpy dataLoaded(m_window.get(), &MainWindow::dataLoaded);
    m_window->openModel(m_model);
    m_window->openData(m_data);
    QVERIFY(!loaded.isEmpty() || loaded.wait(30000));
    QVERIFY(!dataLoaded.isEmpty() || dataLoaded.wait(30000));
}

void TestHistory::cleanupTestCase()
{
    m_historyTester.reset();
    m_diffTester.reset();
    m_window.reset();
}

void TestHistory::runAndWait(const QString& scheme)
{
    QSignalSpy shown(m_window.get(), &MainWindow::reportShown);
    QSignalSpy errors(m_window.get(), &MainWindow::errorShown);
    m_window->runScheme(scheme);
    QVERIFY(shown.wait(30000));
    QVERIFY2(errors.isEmpty(),
             errors.isEmpty() ? "" : qPrintable(errors.front().front().toString()));
}

void TestHistory::twoRunsMakeTwoRows()
{
    HistoryModel* history = m_window->reportView()->historyModel();
    QCOMPARE(history->rowCount(), 0);
    runAndWait(QStringLiteral("static-int8"));
    const nlohmann::json first = m_window->currentReport();
    runAndWait(QStringLiteral("w4-int4"));
    const nlohmann::json second = m_window->currentReport();
    QCOMPARE(history->rowCount(), 2);
    QCOMPARE(history->run(0).report, first);
    QCOMPARE(history->run(1).report, second);
    QCOMPARE(history->data(history->index(0, HistoryModel::Scheme)).toString(),
             QStringLiteral("static-int8"));
    QCOMPARE(history->data(history->index(1, HistoryModel::Scheme)).toString(),
             QStringLiteral("w4-int4"));
    QCOMPARE(history->run(0).modelPath, m_model);
    QCOMPARE(history->data(history->index(1, HistoryModel::Metric), HistoryModel::SortRole)
                 .toDouble(),
             second["metric"]["quantized"].get<double>());
    QCOMPARE(history->data(history->index(0, HistoryModel::SizeRatio), HistoryModel::SortRole)
                 .toDouble(),
             first["size_bytes"]["quantized"].get<double>() /
                 first["size_bytes"]["float"].get<double>());
    // The Pareto chart weighs every run on the model, not only the last compare.
    QCOMPARE(m_window->reportView()->paretoChart()->runLabels(),
             QStringList({QStringLiteral("static-int8"), QStringLiteral("w4-int4")}));
    // The summary names how many samples the metric was measured on.
    QVERIFY2(m_window->reportView()->summaryText().contains(QStringLiteral("on 2,000 samples")),
             qPrintable(m_window->reportView()->summaryText()));
}

void TestHistory::selectingRowShowsRun()
{
    HistoryModel* history = m_window->reportView()->historyModel();
    QCOMPARE(history->rowCount(), 2);
    QVERIFY(m_window->showResultTab(QStringLiteral("History")));
    QTableView* table = m_window->reportView()->historyTable();
    table->selectRow(0);
    QCOMPARE(m_window->currentReport(), history->run(0).report);
    QVERIFY(m_window->reportView()->summaryText().startsWith(QStringLiteral("static-int8: ")));
    QCOMPARE(currentTab(*m_window), QStringLiteral("History"));  // the user stays in History
    table->selectRow(1);
    QCOMPARE(m_window->currentReport(), history->run(1).report);
    QVERIFY(m_window->reportView()->summaryText().startsWith(QStringLiteral("w4-int4: ")));
}

void TestHistory::sideBySideShowsBothRuns()
{
    HistoryModel* history = m_window->reportView()->historyModel();
    QTableView* table = m_window->reportView()->historyTable();
    QPushButton* button = m_window->reportView()->sideBySideButton();
    table->selectRow(0);
    QVERIFY(!button->isEnabled());
    table->selectionModel()->select(history->index(1, 0), QItemSelectionModel::Select |
                                                              QItemSelectionModel::Rows);
    QVERIFY(button->isEnabled());
    button->click();
    QCOMPARE(currentTab(*m_window), QStringLiteral("Side by side"));

    auto* view = m_window->reportView()->sideBySideView();
    QVERIFY(view->chart()->hasData());
    QCOMPARE(view->chart()->barSeries()->count(), 4);
    QCOMPARE(view->chart()->layerNames(),
             QStringList({QStringLiteral("conv1"), QStringLiteral("fc")}));
    const nlohmann::json& a = history->run(0).report;
    const nlohmann::json& b = history->run(1).report;
    const QList<QBarSet*> sets = view->chart()->barSeries()->barSets();
    QCOMPARE(sets[1]->label(), QStringLiteral("A accumulated"));
    QCOMPARE(sets[1]->at(1), accumulatedSqnr(a, QStringLiteral("fc")));
    QCOMPARE(sets[3]->at(1), accumulatedSqnr(b, QStringLiteral("fc")));

    SideBySideModel* diff = view->model();
    QCOMPARE(diff->rowCount(), 2);
    for (int row = 0; row < diff->rowCount(); ++row) {
        const QString layer = diff->data(diff->index(row, SideBySideModel::Layer)).toString();
        const auto raw = [&](int column) {
            return diff->data(diff->index(row, column), SideBySideModel::RawRole).toDouble();
        };
        QCOMPARE(raw(SideBySideModel::SqnrA), accumulatedSqnr(a, layer));
        QCOMPARE(raw(SideBySideModel::SqnrB), accumulatedSqnr(b, layer));
        QCOMPARE(raw(SideBySideModel::Difference),
                 accumulatedSqnr(b, layer) - accumulatedSqnr(a, layer));
        QCOMPARE(raw(SideBySideModel::BytesA), bytesQuantized(a, layer));
        QCOMPARE(raw(SideBySideModel::BytesB), bytesQuantized(b, layer));
    }
    QVERIFY(view->headingText().contains(QStringLiteral("A = static-int8")));
    QVERIFY(view->headingText().contains(QStringLiteral("B = w4-int4")));
}

void TestHistory::droppedReportOpens()
{
    const QString path =
        QStringLiteral(BITLENS_TEST_DATA "/reports/fashion-cnn-static-int8.json");
    auto expected = bitlens::widgets::readJsonFile(path.toStdString());
    QVERIFY(expected.ok());
    QSignalSpy shown(m_window.get(), &MainWindow::reportShown);
    const int runsBefore = m_window->reportView()->historyModel()->rowCount();
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(path)});
    // As a drag does it: enter (the window accepts files), then drop.
    QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(m_window.get(), &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(m_window.get(), &drop);
    QCOMPARE(shown.size(), 1);
    QCOMPARE(m_window->currentReport(), expected.value());
    QVERIFY(!m_window->modelJobs()->isRunning());  // not opened as a model
    QCOMPARE(m_window->reportView()->historyModel()->rowCount(), runsBefore + 1);
}

void TestHistory::comparisonLandsInHistory()
{
    HistoryModel* history = m_window->reportView()->historyModel();
    const int before = history->rowCount();
    QSignalSpy shown(m_window.get(), &MainWindow::comparisonShown);
    m_window->runComparison();
    QVERIFY(shown.wait(30000));
    const nlohmann::json& runs = m_window->reportView()->comparison()["runs"];
    QCOMPARE(history->rowCount(), before + static_cast<int>(runs.size()));
    QCOMPARE(history->run(history->rowCount() - 1).report, runs.back());
    // The Pareto chart shows every distinct run: static-int8 and w4-int4 ran twice with the same
    // result (alone, then in the comparison) and count once; the dropped report is another model.
    QCOMPARE(m_window->reportView()->paretoChart()->runLabels().size(),
             static_cast<qsizetype>(runs.size()) + 1);
}

void TestHistory::newModelClearsHistory()
{
    QSignalSpy loaded(m_window.get(), &MainWindow::modelLoaded);
    m_window->openModel(m_model);
    QVERIFY(loaded.wait(30000));
    QCOMPARE(m_window->reportView()->historyModel()->rowCount(), 0);
    QVERIFY(!m_window->reportView()->sideBySideView()->chart()->hasData());
}

QTEST_MAIN(TestHistory)
#include "test_history.moc"
