// Run Sensitivity says what the sweep will cost before it starts, and lets the user make it
// cheaper (issue #47 item 3): the dialog's estimate follows the evaluation size and the layer
// filter chosen, and the window sweeps exactly what was chosen (or nothing, on Cancel).

#include "chart_sensitivity.h"
#include "job_runner.h"
#include "main_window.h"
#include "model_fixtures.h"
#include "report_view.h"
#include "sensitivity_cost_dialog.h"
#include "window_fixtures.h"

#include <QApplication>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <functional>

using bitlens::widgets::MainWindow;
using bitlens::widgets::SensitivityCostDialog;
using bitlens::workspace::SensitivityCost;

namespace {

/// smollm2-135m's shape: 30 blocks of 7 projections, 8 windows of 512 tokens, ~3.75 s a window
/// (what a pass took there on a 2-core AMD EPYC: ~30 s per layer at 8 windows).
SensitivityCost smollm2Like()
{
    SensitivityCost cost;
    for (int block = 0; block < 30; ++block)
        for (const char* p : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                              "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                              "mlp.down_proj"})
            cost.layerNames.push_back("model.layers." + std::to_string(block) + "." + p);
    cost.layers = 210;
    cost.evalUnits = 8;
    cost.unit = "windows of 512 tokens";
    cost.secondsPerUnit = 3.75;
    cost.measuredUnits = 1;
    return cost;
}

/// Calls `act` on the first SensitivityCostDialog shown (polled from the event loop).
void onCostDialog(std::function<void(SensitivityCostDialog&)> act, bool* seen)
{
    auto* timer = new QTimer;
    timer->setInterval(50);
    QObject::connect(timer, &QTimer::timeout, [timer, act, seen] {
        for (QWidget* w : QApplication::topLevelWidgets()) {
            auto* dialog = qobject_cast<SensitivityCostDialog*>(w);
            if (!dialog || !dialog->isVisible())
                continue;
            timer->stop();
            timer->deleteLater();
            *seen = true;
            act(*dialog);
            return;
        }
    });
    timer->start();
}

} // namespace

class TestSensitivityCost : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void estimateFollowsTheChoice();
    void windowSweepsWhatWasChosen();
    void cancelStartsNoSweep();

private:
    QTemporaryDir m_dir;
    QString m_model, m_data;
};

void TestSensitivityCost::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    m_model = m_dir.filePath(QStringLiteral("small.onnx"));
    const std::string error = bitlens::testing::writeSmallCnn(m_model, 4, "small-cnn");
    QVERIFY2(error.empty(), error.c_str());
    m_data = bitlens::testing::writeSmallLabelledIdx(m_dir.path(), 600);
}

void TestSensitivityCost::estimateFollowsTheChoice()
{
    SensitivityCostDialog dialog(smollm2Like(), QStringLiteral("w4-nf4"));
    auto* count = dialog.findChild<QLabel*>(QStringLiteral("sensitivityLayerCount"));
    auto* estimate = dialog.findChild<QLabel*>(QStringLiteral("sensitivityEstimate"));
    auto* units = dialog.findChild<QSpinBox*>(QStringLiteral("sensitivityUnits"));
    QVERIFY(count && estimate && units);
    // Every layer at 8 windows: 210 x 8 x 3.75 s = 6300 s.
    QCOMPARE(dialog.layers(), 210);
    QCOMPARE(dialog.evalUnits(), 8);
    QCOMPARE(dialog.seconds(), 6300.0);
    QCOMPARE(count->text(), QStringLiteral("210 of 210 quantized layers"));
    QVERIFY2(estimate->text().startsWith(QStringLiteral("about 1:45:00 on this machine: 210 "
                                                        "evaluation passes of 8 windows of 512 "
                                                        "tokens")),
             qPrintable(estimate->text()));
    QCOMPARE(units->maximum(), 8);
    // The down projections only: 30 layers; then one window: 30 x 3.75 = 112.5 s.
    dialog.setLayerFilter(QStringLiteral("down_proj"));
    QCOMPARE(dialog.layers(), 30);
    QCOMPARE(count->text(), QStringLiteral("30 of 210 quantized layers"));
    QVERIFY2(estimate->text().startsWith(QStringLiteral("about 15:00")), qPrintable(estimate->text()));
    dialog.setEvalUnits(1);
    QCOMPARE(dialog.seconds(), 112.5);
    QVERIFY2(estimate->text().startsWith(QStringLiteral("about 1:52")), qPrintable(estimate->text()));
    // Two filters, spaces allowed; a filter matching nothing disables Run.
    dialog.setLayerFilter(QStringLiteral(" down_proj , o_proj"));
    QCOMPARE(dialog.layerFilters(), (std::vector<std::string>{"down_proj", "o_proj"}));
    QCOMPARE(dialog.layers(), 60);
    dialog.setLayerFilter(QStringLiteral("attention.dense"));
    QCOMPARE(dialog.layers(), 0);
    QVERIFY(estimate->text().contains(QStringLiteral("nothing to sweep")));
    auto* run = dialog.findChild<QPushButton*>();
    bool runDisabled = false;
    for (auto* b : dialog.findChildren<QPushButton*>())
        if (b->text() == QStringLiteral("Run sweep"))
            runDisabled = !b->isEnabled();
    QVERIFY(run);
    QVERIFY(runDisabled);

    // KL divergence ranking: two passes per layer, and the float model's pass when unknown.
    SensitivityCost kld = smollm2Like();
    kld.byKld = true;
    kld.floatPassNeeded = true;
    QCOMPARE(kld.passes(210), 421);
    QCOMPARE(kld.seconds(1, 2), 3 * 2 * 3.75);
}

void TestSensitivityCost::windowSweepsWhatWasChosen()
{
    auto window = bitlens::testing::openWindowOn(m_model, m_data);
    QVERIFY(window);
    window->setDialogsEnabled(true);
    bool seen = false;
    QString firstLayer;
    std::int64_t allLayers = 0;
    onCostDialog(
        [&](SensitivityCostDialog& dialog) {
            allLayers = dialog.layers();
            // The first layer of the estimate by its full name, on 100 samples.
            const auto* count = dialog.findChild<QLabel*>(QStringLiteral("sensitivityLayerCount"));
            QVERIFY(count);
            auto* filter = dialog.findChild<QLineEdit*>(QStringLiteral("sensitivityLayerFilter"));
            QVERIFY(filter);
            firstLayer = QStringLiteral("conv");
            filter->setText(firstLayer);
            dialog.setEvalUnits(100);
            dialog.accept();
        },
        &seen);
    QSignalSpy done(window.get(), &MainWindow::sensitivityShown);
    QSignalSpy errors(window.get(), &MainWindow::errorShown);
    window->runSensitivity();
    QVERIFY(done.wait(120000));
    QVERIFY(seen);
    QVERIFY(errors.isEmpty());
    const auto ranked = window->reportView()->sensitivityChart()->rankedLayers();
    QVERIFY(allLayers > static_cast<std::int64_t>(ranked.size()));
    QVERIFY(!ranked.empty());
    for (const auto& layer : ranked)
        QVERIFY2(layer.contains(firstLayer), qPrintable(layer));
}

void TestSensitivityCost::cancelStartsNoSweep()
{
    auto window = bitlens::testing::openWindowOn(m_model, m_data);
    QVERIFY(window);
    window->setDialogsEnabled(true);
    bool seen = false;
    onCostDialog([](SensitivityCostDialog& dialog) { dialog.reject(); }, &seen);
    QSignalSpy started(window->quantJobs(), &bitlens::widgets::JobRunner::started);
    window->runSensitivity();
    QTRY_VERIFY_WITH_TIMEOUT(seen, 60000);
    QTRY_VERIFY_WITH_TIMEOUT(!window->quantJobs()->isRunning(), 10000);
    QCOMPARE(started.size(), 1);  // the estimate only
    QVERIFY(window->reportView()->sensitivityChart()->rankedLayers().empty());
}

QTEST_MAIN(TestSensitivityCost)
#include "test_sensitivity_cost.moc"
