// What the window says while and after it works (issue #22, items 2 and 3): the evaluation size
// in the scheme panel counts what the model reads under the CLI's names; the job indicator
// shows the time elapsed and an estimate of the time left; the summary says "Running…" instead
// of "No run yet"; "Compare all schemes" fills its table scheme by scheme while it runs; the
// scheme panel shows the scheme of the run on screen; the summary, the Throughput tab and the
// Compare table give one kernel count; the Help menu has the chart guide and an About with the
// versions and the CPU; the data panel names the zoo model's own data. Models and data are
// written by the test (no zoo build).

#include "chart_base.h"
#include "chart_pareto.h"
#include "chart_throughput.h"
#include "comparison_table_model.h"
#include "hardware_panel.h"
#include "help_dialogs.h"
#include "job_progress_widget.h"
#include "layer_table_model.h"
#include "job_runner.h"
#include "main_window.h"
#include "model_fixtures.h"
#include "quant_job.h"
#include "quant_panel.h"
#include "report_view.h"
#include "side_panels.h"
#include "window_fixtures.h"
#include "chart_sensitivity.h"

#include "jobs/step_clock.h"

#include <QChart>
#include <QValueAxis>
#include <QFontMetricsF>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QTableWidget>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>
#include <vector>

using bitlens::widgets::JobProgressWidget;
using bitlens::widgets::MainWindow;
using bitlens::widgets::QuantPanel;
using bitlens::widgets::ReportView;

class TestRunFeedback : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void init();
    void evaluationSizeFollowsTheModel();
    void timeLeftEstimate();
    void sweepTimeLeftFromLayerTimes();
    void sensitivityProgressCountsLayers();
    void progressShowsElapsedWhileRunning();
    void summarySaysRunning();
    void layerRowsBeforeTheMetric();
    void cancelAfterLayersKeepsTheRunBefore();
    void compareTableGrowsWhileRunning();
    void schemePanelShowsTheRunOnScreen();
    void oneKernelCount();
    void changeInTheMetricsUnit();
    void helpMenuTexts();
    void dataPanelNamesZooData();
    void sidePanelFitsItsColumn();
    void longChartTitlesShrinkToFit();
    void hardwareTableHeadersWhole();
    void emptyChartsSayWhatToDo();
    void compareTableSortsBySchemeName();
    void paretoOfOneRunHasAReadableSpan();
    void overrideCellIsWhole();

private:
    std::unique_ptr<MainWindow> openWindow();
    void runAndWait(MainWindow& window, const QString& scheme);

    QTemporaryDir m_dir;
    QString m_model;
    QString m_data;
};

void TestRunFeedback::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    m_model = m_dir.filePath(QStringLiteral("small.onnx"));
    const std::string error = bitlens::testing::writeSmallCnn(m_model, 4, "small-cnn");
    QVERIFY2(error.empty(), error.c_str());
    m_data = bitlens::testing::writeSmallLabelledIdx(m_dir.path(), 600);
    QVERIFY(!m_data.isEmpty());
}

void TestRunFeedback::init()
{
    QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens")).clear();
}

std::unique_ptr<MainWindow> TestRunFeedback::openWindow()
{
    return bitlens::testing::openWindowOn(m_model, m_data);
}

void TestRunFeedback::runAndWait(MainWindow& window, const QString& scheme)
{
    QVERIFY(bitlens::testing::runSchemeAndWait(window, scheme));
}

void TestRunFeedback::evaluationSizeFollowsTheModel()
{
    QuantPanel panel;
    // Images: the first 2,000 samples, which the CLI takes as --limit 2000.
    QCOMPARE(panel.evaluationUnit(), QuantPanel::EvalUnit::Samples);
    QCOMPARE(panel.evalLimit(), QuantPanel::kDefaultEvalSamples);
    QCOMPARE(panel.evalCliFlags(),
             QStringList({QStringLiteral("--limit"), QStringLiteral("2000")}));
    QVERIFY(panel.evalCliLabel()->text().contains(QStringLiteral("--limit 2000")));
    QVERIFY(!panel.evalTokensBox()->isVisibleTo(&panel));
    panel.setEvaluateAll(true);
    QCOMPARE(panel.evalLimit(), 0);  // all of an image file
    QVERIFY(panel.evalCliFlags().isEmpty());
    QVERIFY(!panel.evalLimitBox()->isEnabled());
    panel.setEvaluateAll(false);

    // A language model: windows of its context, a short default, and a token budget.
    panel.setEvaluationUnit(QuantPanel::EvalUnit::Windows, 256);
    QCOMPARE(panel.evalLimit(), QuantPanel::kDefaultEvalWindows);
    QVERIFY2(panel.evalLimitBox()->suffix().contains(QStringLiteral("256 tokens")),
             qPrintable(panel.evalLimitBox()->suffix()));
    QVERIFY(panel.evalTokensBox()->isVisibleTo(&panel));
    QCOMPARE(panel.evalTokens(), 0);
    panel.evalTokensBox()->setValue(4096);
    QCOMPARE(panel.evalTokens(), 4096);
    QCOMPARE(panel.evalCliFlags(),
             QStringList({QStringLiteral("--tokens"), QStringLiteral("4096")}));
    QVERIFY(!panel.evalLimitBox()->isEnabled());  // the budget decides the windows
    panel.evalTokensBox()->setValue(0);
    panel.evalLimitBox()->setValue(0);
    // 0 is the model's own default, which the CLI takes with no flag.
    QVERIFY(panel.evalLimitBox()->text().contains(QStringLiteral("model default")));
    QVERIFY(panel.evalCliFlags().isEmpty());
    panel.setEvaluateAll(true);
    QCOMPARE(panel.evalLimit(), QuantPanel::kAllText);
    QCOMPARE(panel.evalTokens(), 0);
    panel.setEvaluateAll(false);

    // An encoder reads lines; a new model resets the size to its unit's default.
    panel.setEvaluationUnit(QuantPanel::EvalUnit::Lines);
    QCOMPARE(panel.evalLimit(), QuantPanel::kDefaultEvalLines);
    QVERIFY(!panel.evalTokensBox()->isVisibleTo(&panel));
    QCOMPARE(panel.evalTokens(), 0);
    QVERIFY(panel.evalLimitBox()->suffix().contains(QStringLiteral("lines")));
}

void TestRunFeedback::timeLeftEstimate()
{
    // No estimate before 2 s and 2 %: the first reports say little about the rest.
    QCOMPARE(JobProgressWidget::timeText(1500, 0.5), QStringLiteral("0:01 elapsed"));
    QCOMPARE(JobProgressWidget::timeText(20000, 0.01), QStringLiteral("0:20 elapsed"));
    QCOMPARE(JobProgressWidget::timeText(10000, 0.25),
             QStringLiteral("0:10 elapsed, about 0:30 left"));
    QCOMPARE(JobProgressWidget::timeText(3723000, 0.5),
             QStringLiteral("1:02:03 elapsed, about 1:02:03 left"));
    QCOMPARE(JobProgressWidget::timeText(65000, 1.0), QStringLiteral("1:05 elapsed"));
}

void TestRunFeedback::sweepTimeLeftFromLayerTimes()
{
    // A sensitivity sweep's time left is the mean of its finished layers x the layers to go,
    // less the time already spent on the running one.
    QVERIFY(!bitlens::stepsSecondsLeft({}, 211).has_value());  // nothing measured yet
    QCOMPARE(*bitlens::stepsSecondsLeft({30.0, 32.0}, 211), 31.0 * 209);
    QCOMPARE(*bitlens::stepsSecondsLeft({30.0, 32.0}, 211, 10.0), 31.0 * 209 - 10.0);
    QCOMPARE(*bitlens::stepsSecondsLeft({20.0, 40.0, 30.0}, 10), 30.0 * 7);
    QCOMPARE(*bitlens::stepsSecondsLeft({10.0}, 2, 15.0), 0.0);  // the running one overran
    QCOMPARE(*bitlens::stepsSecondsLeft({10.0, 10.0}, 2), 0.0);
    QCOMPARE(bitlens::clockText(31.0 * 209 - 10.0), std::string("1:47:49"));
    QCOMPARE(bitlens::clockText(42.9), std::string("0:42"));

    bitlens::StepClock clock(211);
    QCOMPARE(clock.stage("layer", "layer.0.attn.q_proj"),
             std::string("layer 1 of 211 (layer.0.attn.q_proj), time left after the first layer"));
    clock.finishStep(30.0);
    clock.finishStep(32.0);
    QCOMPARE(clock.done(), std::size_t(2));
    const std::string stage = clock.stage("layer", "layer.0.attn.v_proj");
    // 31 x 209 = 6479 s, less the few microseconds since the second layer finished.
    QVERIFY2(stage.rfind("layer 3 of 211 (layer.0.attn.v_proj), about 1:47:5", 0) == 0,
             stage.c_str());
    QVERIFY(bitlens::stageHasTimeLeft(stage));

    // The issue's case: 2 of 211 layers after 1:30 (most of it the float model's metric) put
    // the whole job at 20.8 %; extrapolated from that fraction it read "about 5:43 left".
    const double fraction = 0.2 + 0.8 * 2.0 / 211.0;
    QCOMPARE(JobProgressWidget::timeText(90000, fraction),
             QStringLiteral("1:30 elapsed, about 5:43 left"));
    // With the sweep's own estimate in the stage, the bar shows only the elapsed time.
    QCOMPARE(JobProgressWidget::timeText(90000, fraction,
                                         QStringLiteral("Sensitivity of w4-int4: sensitivity: ") +
                                             QString::fromStdString(stage)),
             QStringLiteral("1:30 elapsed"));
}

void TestRunFeedback::sensitivityProgressCountsLayers()
{
    auto window = openWindow();
    QVERIFY(window);
    auto* bar = window->findChild<JobProgressWidget*>(QStringLiteral("jobProgress"));
    QVERIFY(bar);
    QStringList stages, shown;
    connect(window->quantJobs(), &bitlens::widgets::JobRunner::progressed, this,
            [&](quint64, double, const QString& stage) {
                stages << stage;
                shown << bar->text();
            });
    QSignalSpy done(window.get(), &MainWindow::sensitivityShown);
    window->runSensitivity();
    QVERIFY(done.wait(120000));
    const int layers = static_cast<int>(window->reportView()->sensitivityChart()->rankedLayers().size());
    QVERIFY(layers >= 2);
    const QRegularExpression count(QStringLiteral("^sensitivity: layer (\\d+) of (\\d+) \\("));
    QSet<int> seen;
    bool estimated = false;
    for (qsizetype i = 0; i < stages.size(); ++i) {
        const QRegularExpressionMatch m = count.match(stages[i]);
        if (!m.hasMatch())
            continue;
        QCOMPARE(m.captured(2).toInt(), layers);  // N counts the quantized layers only
        seen.insert(m.captured(1).toInt());
        estimated = estimated || stages[i].contains(QStringLiteral(", about "));
        // One estimate on screen, the sweep's: none of the bar's own from the job's fraction.
        QVERIFY2(shown[i].count(QStringLiteral(" left")) == 1, qPrintable(shown[i]));
        QVERIFY2(shown[i].contains(QStringLiteral("layer %1 of %2").arg(m.captured(1), m.captured(2))),
                 qPrintable(shown[i]));
    }
    QVERIFY2(seen.contains(1) && seen.contains(layers), qPrintable(stages.join(QLatin1Char('\n'))));
    QVERIFY(estimated);
}

void TestRunFeedback::progressShowsElapsedWhileRunning()
{
    bitlens::widgets::JobRunner runner;
    JobProgressWidget widget;
    widget.watch(&runner);
    std::atomic<bool> release{false};
    bool done = false;
    runner.start(
        QStringLiteral("Waiting"),
        [&release](bitlens::Progress& progress, const bitlens::CancelToken&) {
            progress.report(0.5, "halfway");
            while (!release.load())
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            return bitlens::Result<int>(1);
        },
        [&done](bitlens::Result<int>) { done = true; });
    QTRY_VERIFY_WITH_TIMEOUT(widget.text().contains(QStringLiteral("halfway")), 5000);
    QVERIFY2(widget.text().contains(QStringLiteral(" elapsed")), qPrintable(widget.text()));
    // The clock ticks without progress reports (a long stage sends none): 0:01, later 0:02.
    QTRY_VERIFY_WITH_TIMEOUT(widget.text().contains(QStringLiteral("0:02 elapsed")), 8000);
    release = true;
    QTRY_VERIFY_WITH_TIMEOUT(done, 5000);
    QTRY_VERIFY_WITH_TIMEOUT(widget.isHidden(), 5000);
}

void TestRunFeedback::summarySaysRunning()
{
    auto window = openWindow();
    QVERIFY(window);
    ReportView* view = window->reportView();
    QVERIFY(view->summaryText().startsWith(QStringLiteral("No run yet")));
    QSignalSpy shown(window.get(), &MainWindow::reportShown);
    window->runScheme(QStringLiteral("static-int8"));
    QVERIFY2(view->summaryText().startsWith(QStringLiteral("Running static-int8")),
             qPrintable(view->summaryText()));
    QVERIFY(shown.wait(60000));
    QVERIFY2(view->summaryText().startsWith(QStringLiteral("static-int8: ")),
             qPrintable(view->summaryText()));
    // A second run keeps the first on screen and says so.
    window->runScheme(QStringLiteral("w4-int4"));
    QVERIFY2(view->summaryText().startsWith(QStringLiteral("Running w4-int4… On screen until it "
                                                           "ends: static-int8: ")),
             qPrintable(view->summaryText()));
    QVERIFY(shown.wait(60000));
    QVERIFY(view->summaryText().startsWith(QStringLiteral("w4-int4")));
    // The second run reused the float metric of the first, and says so.
    QVERIFY2(view->summaryText().contains(QStringLiteral("float metric reused")),
             qPrintable(view->summaryText()));
}

void TestRunFeedback::layerRowsBeforeTheMetric()
{
    auto window = openWindow();
    QVERIFY(window);
    ReportView* view = window->reportView();
    // Each report shown while the job runs: its summary line and whether it has a metric.
    std::vector<std::pair<QString, bool>> whileRunning;
    connect(view, &ReportView::reportChanged, this, [&] {
        if (window->quantJobs()->isRunning())
            whileRunning.emplace_back(view->summaryText(),
                                      view->report()["metric"]["quantized"].is_number());
    });
    runAndWait(*window, QStringLiteral("static-int8"));
    QCOMPARE(whileRunning.size(), std::size_t{1});
    QVERIFY(!whileRunning.front().second);  // layers and throughput, no metric yet
    QVERIFY2(whileRunning.front().first.startsWith(
                 QStringLiteral("Running static-int8… the layer errors are in")),
             qPrintable(whileRunning.front().first));
    // The finished report replaces it, with its metric.
    QVERIFY(view->report()["metric"]["quantized"].is_number());
    QVERIFY(view->summaryText().startsWith(QStringLiteral("static-int8: top-1")));
    QCOMPARE(view->historyModel()->rowCount(), 1);  // the partial report is no run of its own
}

void TestRunFeedback::cancelAfterLayersKeepsTheRunBefore()
{
    auto window = openWindow();
    QVERIFY(window);
    runAndWait(*window, QStringLiteral("static-int8"));
    const nlohmann::json before = window->currentReport();
    const QString summaryBefore = window->reportView()->summaryText();
    // Cancel as soon as the new run's layer rows are on screen.
    bool cancelled = false;
    connect(window->reportView(), &ReportView::reportChanged, this, [&] {
        if (window->quantJobs()->isRunning() && !cancelled) {
            cancelled = true;
            window->cancelQuantization();
        }
    });
    QSignalSpy stopped(window.get(), &MainWindow::quantizationStopped);
    window->runScheme(QStringLiteral("w4-int4"));
    QVERIFY(stopped.wait(60000));
    QVERIFY(cancelled);
    QVERIFY(window->quantJobs()->waitForWorkers(30000));
    QTest::qWait(50);
    QCOMPARE(window->currentReport(), before);
    QCOMPARE(window->reportView()->summaryText(), summaryBefore);
    QCOMPARE(window->quantPanel()->schemeText(), QStringLiteral("static-int8"));
}

void TestRunFeedback::compareTableGrowsWhileRunning()
{
    auto window = openWindow();
    QVERIFY(window);
    auto* model = window->reportView()->comparisonModel();
    // Each reset of the table model while the job runs: (rows, still running).
    std::vector<std::pair<int, bool>> resets;
    connect(model, &QAbstractItemModel::modelReset, this, [&] {
        resets.emplace_back(model->rowCount(), window->quantJobs()->isRunning());
    });
    QSignalSpy shown(window.get(), &MainWindow::comparisonShown);
    window->runComparison();
    QVERIFY(window->quantJobs()->isRunning());
    const int total = bitlens::widgets::comparisonSize();
    QVERIFY(total > 3);
    QVERIFY2(window->reportView()->compareStatus()->text().contains(
                 QStringLiteral("Comparing %1 schemes").arg(total)),
             qPrintable(window->reportView()->compareStatus()->text()));
    QVERIFY(shown.wait(300000));
    int grewWhileRunning = 0;
    for (const auto& [rows, running] : resets)
        if (running && rows > 0 && rows < total)
            ++grewWhileRunning;
    QVERIFY2(grewWhileRunning >= total - 2,
             qPrintable(QStringLiteral("%1 partial tables of %2 schemes").arg(grewWhileRunning)
                            .arg(total)));
    QCOMPARE(model->rowCount(), total);
    QVERIFY2(window->reportView()->compareStatus()->text().startsWith(
                 QStringLiteral("Done: %1 schemes compared").arg(total)),
             qPrintable(window->reportView()->compareStatus()->text()));
}

void TestRunFeedback::schemePanelShowsTheRunOnScreen()
{
    auto window = openWindow();
    QVERIFY(window);
    runAndWait(*window, QStringLiteral("static-int8:observer=mse"));
    QVERIFY(window->setLayerOverride(QStringLiteral("fc"), QStringLiteral("float")));
    runAndWait(*window, QStringLiteral("w4-int4"));
    QCOMPARE(window->quantPanel()->schemeText(), QStringLiteral("w4-int4"));
    QCOMPARE(window->layerOverrides().value(QStringLiteral("fc")), QStringLiteral("float"));
    // The first run, picked in the history: the panel and the overrides follow it.
    QVERIFY(window->showHistoryRun(0));
    QCOMPARE(window->quantPanel()->schemeText(), QStringLiteral("static-int8:observer=mse"));
    QVERIFY(window->layerOverrides().isEmpty());
    QVERIFY(window->showHistoryRun(1));
    QCOMPARE(window->quantPanel()->schemeText(), QStringLiteral("w4-int4"));
    QCOMPARE(window->layerOverrides().value(QStringLiteral("fc")), QStringLiteral("float"));
}

void TestRunFeedback::oneKernelCount()
{
    // fc kept in float32 runs at::linear: not a low-bit kernel, whatever the kernel string.
    const nlohmann::json report = {
        {"scheme", {{"spec", "static-int8"}}},
        {"layers",
         {{{"name", "conv1"}, {"weight_type", "int8"}, {"simulated", false}},
          {{"name", "fc"}, {"weight_type", "float32"}, {"simulated", false}}}},
        {"throughput",
         {{"float_samples_per_s", 100.0},
          {"quantized_samples_per_s", 150.0},
          {"kernels", {{"conv1", "bitlens avx2 int8 conv"}, {"fc", "at::linear (float32)"}}}}}};
    const auto count = bitlens::widgets::kernelCount(report);
    QCOMPARE(count.real, 1);
    QCOMPARE(count.layers, 2);
    QVERIFY(bitlens::widgets::reportSummary(report).contains(
        QStringLiteral("1 of 2 layers on real kernels")));
    bitlens::widgets::ComparisonTableModel table;
    table.setComparison({{"runs", {report}}});
    const QString cell = table.data(table.index(0, bitlens::widgets::ComparisonTableModel::Kernels))
                             .toString();
    QVERIFY2(cell.contains(QStringLiteral("1 of 2")), qPrintable(cell));
}

void TestRunFeedback::changeInTheMetricsUnit()
{
    using bitlens::widgets::ComparisonTableModel;
    const auto run = [](const char* metric, double f, double q) {
        return nlohmann::json{{"scheme", {{"spec", "w4-nf4"}}},
                              {"metric", {{"name", metric}, {"float", f}, {"quantized", q}}},
                              {"layers", nlohmann::json::array()}};
    };
    const auto change = [](const ComparisonTableModel& table) {
        return std::make_pair(
            table.headerData(ComparisonTableModel::Change, Qt::Horizontal).toString(),
            table.data(table.index(0, ComparisonTableModel::Change)).toString());
    };
    ComparisonTableModel table;
    table.setComparison({{"runs", {run("top1", 0.9, 0.89)}}});
    QCOMPARE(change(table), std::make_pair(QStringLiteral("Change (points)"),
                                           QStringLiteral("-1.00")));
    // Perplexity 84.61 -> 85.46 is +1.00 %, not "+85 points".
    table.setComparison({{"runs", {run("perplexity", 84.61, 85.4561)}}});
    QCOMPARE(change(table), std::make_pair(QStringLiteral("Change (%)"), QStringLiteral("+1.00")));
    table.setComparison({{"runs", {run("embedding_cosine", 1.0, 0.993)}}});
    QCOMPARE(change(table), std::make_pair(QStringLiteral("Change"), QStringLiteral("-0.0070")));
}

void TestRunFeedback::helpMenuTexts()
{
    const QString guide = bitlens::widgets::chartGuideMarkdown();
    QVERIFY2(guide.startsWith(QStringLiteral("## How to read the charts")),
             qPrintable(guide.left(200)));
    for (const char* chart : {"SQNR per layer", "Layer map", "Memory", "Throughput", "Compare",
                              "Sensitivity"})
        QVERIFY2(guide.contains(QLatin1String(chart)), chart);
    QVERIFY(!guide.contains(QStringLiteral("![")));  // screenshots are files of the source tree
    QVERIFY(!guide.contains(QStringLiteral("\n## ")));  // the section alone
    const QString about = bitlens::widgets::aboutText();
    for (const char* part : {"LibTorch", "Qt ", "ISA level", "Licences", "How to read the charts"})
        QVERIFY2(about.contains(QLatin1String(part)), part);
    MainWindow window;
    QVERIFY(window.findChild<QAction*>(QStringLiteral("actionChartGuide")));
    QVERIFY(window.findChild<QAction*>(QStringLiteral("actionAbout")));
}

void TestRunFeedback::dataPanelNamesZooData()
{
    bitlens::widgets::DataSummaryPanel panel;
    const auto texts = [&panel] {
        QStringList all;
        for (const QLabel* label : panel.findChildren<QLabel*>())
            if (label->isVisibleTo(&panel))
                all << label->text();
        return all.join(QLatin1Char('\n'));
    };
    QVERIFY(texts().contains(QStringLiteral("No data open")));
    panel.showData(nullptr, QStringLiteral("fashion-cnn"));
    QVERIFY2(texts().contains(QStringLiteral("fashion-cnn's own data")), qPrintable(texts()));
    QVERIFY(!texts().contains(QStringLiteral("No data open")));
}

void TestRunFeedback::sidePanelFitsItsColumn()
{
    // At the window's default size, the scheme panel's right edge (the group size, Cancel) is
    // not cut off by the side column: its contents are no wider than what shows of them.
    auto window = openWindow();
    QVERIFY(window);
    window->resize(1280, 800);
    QTest::qWait(100);
    QWidget* side = window->quantPanel()->parentWidget();
    QWidget* viewport = side->parentWidget();
    QVERIFY(side && viewport);
    QVERIFY2(side->width() <= viewport->width(),
             qPrintable(QStringLiteral("side panels %1 px in a %2 px column")
                            .arg(side->width())
                            .arg(viewport->width())));
    QVERIFY(window->quantPanel()->cancelButton()->geometry().right() <
            window->quantPanel()->width());
}

void TestRunFeedback::longChartTitlesShrinkToFit()
{
    bitlens::widgets::ThroughputChart chart;
    chart.resize(560, 360);
    chart.show();
    const nlohmann::json report = {
        {"scheme",
         {{"spec", "w4-int4:group=128,sym=true,method=gptq with overrides lm_head=float"}}},
        {"layers", nlohmann::json::array()},
        {"throughput",
         {{"device", "cpu"}, {"batch", 1}, {"float_samples_per_s", 100.0},
          {"quantized_samples_per_s", 120.0}, {"kernels", nlohmann::json::object()}}}};
    chart.setReport(report);
    QTest::qWait(50);
    const QString title = chart.chart()->title();
    const QFont font = chart.chart()->titleFont();
    QVERIFY2(font.pointSize() < 12, qPrintable(title));  // shrunk from the default 12 pt
    // Each line of it (the chart breaks the title at "<br>") fits the width.
    double widest = 0.0;
    for (const QString& line : title.split(QStringLiteral("<br>")))
        widest = std::max(widest, QFontMetricsF(font).horizontalAdvance(line));
    QVERIFY2(font.pointSize() == 8 || widest <= chart.width() - 24,
             qPrintable(QStringLiteral("%1 at %2 pt").arg(title).arg(font.pointSize())));
    // A short one stays at 12 pt.
    chart.resize(1400, 360);
    QTest::qWait(50);
    QVERIFY(chart.chart()->titleFont().pointSize() >
                font.pointSize() ||
            QFontMetricsF(chart.chart()->titleFont()).horizontalAdvance(title) <= 1400 - 24);
}

void TestRunFeedback::hardwareTableHeadersWhole()
{
    bitlens::widgets::HardwarePanel panel;
    panel.resize(1200, 900);
    panel.show();
    QTest::qWait(50);
    for (QTableWidget* table : {panel.flagTable(), panel.formatTable(), panel.rateTable()}) {
        QHeaderView* header = table->horizontalHeader();
        for (int c = 0; c < table->columnCount() - 1; ++c) {  // the last one stretches
            const QString text = table->horizontalHeaderItem(c)->text();
            const int needed = header->fontMetrics().horizontalAdvance(text);
            QVERIFY2(header->sectionSize(c) >= needed,
                     qPrintable(QStringLiteral("\"%1\": %2 px for %3").arg(text)
                                    .arg(header->sectionSize(c))
                                    .arg(needed)));
        }
    }
}

void TestRunFeedback::emptyChartsSayWhatToDo()
{
    // The window before any run: every chart says what fills it, not what a report lacks.
    MainWindow window;
    ReportView* view = window.reportView();
    using bitlens::widgets::ChartBase;
    const QList<ChartBase*> charts = view->findChildren<ChartBase*>();
    QVERIFY(charts.size() >= 7);
    for (const ChartBase* chart : charts) {
        if (chart->message().isEmpty())
            continue;  // a teaching chart that draws without a run
        QVERIFY2(chart->message().startsWith(QStringLiteral("No data yet: ")) ||
                     !chart->message().contains(QStringLiteral("has no")),
                 qPrintable(chart->objectName() + QStringLiteral(": ") + chart->message()));
    }
    for (const char* name : {"memoryChart", "latencyChart", "throughputChart", "sqnrChart"}) {
        const auto* chart = view->findChild<ChartBase*>(QLatin1String(name));
        QVERIFY2(chart, name);
        QVERIFY2(chart->message().startsWith(QStringLiteral("No data yet: run a scheme")),
                 qPrintable(chart->message()));
    }
}

void TestRunFeedback::compareTableSortsBySchemeName()
{
    ReportView view;
    nlohmann::json runs = nlohmann::json::array();
    for (const char* spec : {"w4-int4", "dynamic-int8", "fp16"})
        runs.push_back({{"scheme", {{"spec", spec}, {"preset", spec}}},
                        {"metric", {{"name", "top1"}, {"float", 0.9}, {"quantized", 0.89}}},
                        {"layers", nlohmann::json::array()}});
    view.setComparison({{"runs", runs}});
    QTableView* table = view.comparisonTable();
    const auto column = [table] {
        QStringList names;
        for (int r = 0; r < table->model()->rowCount(); ++r)
            names << table->model()->index(r, 0).data().toString();
        return names;
    };
    // As a click on the Scheme header does it.
    QVERIFY2(view.compareStatus()->text().startsWith(
                 QStringLiteral("3 schemes from a compare report")),
             qPrintable(view.compareStatus()->text()));
    table->horizontalHeader()->setSortIndicator(0, Qt::AscendingOrder);
    QCOMPARE(column(), QStringList({QStringLiteral("dynamic-int8"), QStringLiteral("fp16"),
                                    QStringLiteral("w4-int4")}));
    table->horizontalHeader()->setSortIndicator(0, Qt::DescendingOrder);
    QCOMPARE(column(), QStringList({QStringLiteral("w4-int4"), QStringLiteral("fp16"),
                                    QStringLiteral("dynamic-int8")}));
}

void TestRunFeedback::paretoOfOneRunHasAReadableSpan()
{
    bitlens::widgets::ParetoChart chart;
    chart.resize(600, 400);
    chart.setComparison(
        {{"runs",
          {{{"scheme", {{"spec", "static-int8"}, {"preset", "static-int8"}}},
            {"metric", {{"name", "top1"}, {"float", 0.9260}, {"quantized", 0.9260}}},
            {"size_bytes", {{"float", 1690000}, {"quantized", 423000}}},
            {"layers", nlohmann::json::array()}}}}});
    QVERIFY(chart.hasData());
    const auto axes = chart.chart()->axes(Qt::Vertical);
    QCOMPARE(axes.size(), 1);
    const auto* y = qobject_cast<QValueAxis*>(axes.front());
    QVERIFY(y);
    // One run (and the float point at the same accuracy): not 0.92590-0.92610.
    QVERIFY2(y->max() - y->min() >= 0.015,
             qPrintable(QStringLiteral("%1 to %2").arg(y->min()).arg(y->max())));
}

void TestRunFeedback::overrideCellIsWhole()
{
    auto window = openWindow();
    QVERIFY(window);
    QVERIFY(window->setLayerOverride(QStringLiteral("fc"), QStringLiteral("float")));
    using bitlens::widgets::LayerTableModel;
    LayerTableModel* model = window->layerModel();
    const QModelIndex cell =
        model->index(model->rowOf(QStringLiteral("fc")), LayerTableModel::Scheme);
    const QString text = cell.data().toString();
    QCOMPARE(text, QStringLiteral("float32 (kept)"));
    QFont font = window->layerTable()->font();
    font.setBold(true);  // overrides are bold
    const int needed = QFontMetrics(font).horizontalAdvance(text);
    QVERIFY2(window->layerTable()->columnWidth(LayerTableModel::Scheme) >= needed,
             qPrintable(QStringLiteral("%1 px for %2 px of text")
                            .arg(window->layerTable()->columnWidth(LayerTableModel::Scheme))
                            .arg(needed)));
}

QTEST_MAIN(TestRunFeedback)
#include "test_run_feedback.moc"

