// The method on every view that names a scheme (issue #47 item 4): after runs of
// w4-int4:group=128,method=gptq and w4-int4:method=awq the chart titles, the Layer map, the
// Scheme column of Compare and History and the Pareto labels say "w4-int4 · GPTQ g128" and
// "w4-int4 · AWQ", not "w4-int4" three times. The input is bitlens-cli's compare of kjv-llama
// (tests/data/reports/kjv-llama-compare-methods.json, written before reports carried
// scheme.display_name: the name is read back from the spec) and the same runs as report.json
// holds them now (with display_name). The scheme panel follows the run on screen: after a
// GPTQ run (or its report opened) its Preset box and Method control show it, and Run runs what
// they show; the Method control offers GPTQ and AWQ where the preset takes them.

#include "chart_histogram.h"
#include "chart_latency.h"
#include "chart_memory.h"
#include "chart_pareto.h"
#include "chart_sqnr.h"
#include "chart_throughput.h"
#include "comparison_table_model.h"
#include "history_model.h"
#include "job_runner.h"
#include "layer_heatmap.h"
#include "main_window.h"
#include "model_fixtures.h"
#include "quant_job.h"
#include "quant_panel.h"
#include "report_view.h"
#include "window_fixtures.h"

#include <nlohmann/json.hpp>

#include <QAbstractItemModelTester>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

using namespace bitlens::widgets;

namespace {

nlohmann::json loadReport(const char* name)
{
    std::ifstream in(std::string(BITLENS_TEST_DATA "/reports/") + name);
    if (!in)
        return nlohmann::json();
    return nlohmann::json::parse(in);
}

const QString kRtn = QStringLiteral("w4-int4");
const QString kGptq = QStringLiteral("w4-int4 · GPTQ g128");
const QString kAwq = QStringLiteral("w4-int4 · AWQ");

} // namespace

class TestMethodViews : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        m_compare = loadReport("kjv-llama-compare-methods.json");
        QVERIFY2(m_compare.contains("runs") && m_compare["runs"].size() == 3,
                 "tests/data/reports/kjv-llama-compare-methods.json");
        QCOMPARE(QString::fromStdString(m_compare["runs"][1]["scheme"]["spec"].get<std::string>()),
                 QStringLiteral("w4-int4:group=128,method=gptq"));
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
        m_modelPath = m_dir.filePath(QStringLiteral("small.onnx"));
        const std::string error = bitlens::testing::writeSmallCnn(m_modelPath, 4, "small-cnn");
        QVERIFY2(error.empty(), error.c_str());
        m_dataPath = bitlens::testing::writeSmallLabelledIdx(m_dir.path(), 200);
        QVERIFY(!m_dataPath.isEmpty());
    }

    void compareColumnAndParetoLabelsNameTheMethod_data()
    {
        QTest::addColumn<bool>("withDisplayName");
        QTest::newRow("read back from the spec") << false;
        QTest::newRow("report.json's display_name") << true;
    }

    void compareColumnAndParetoLabelsNameTheMethod()
    {
        QFETCH(bool, withDisplayName);
        nlohmann::json compare = m_compare;
        if (withDisplayName) {
            compare["runs"][0]["scheme"]["display_name"] = kRtn.toStdString();
            compare["runs"][1]["scheme"]["display_name"] = kGptq.toStdString();
            compare["runs"][2]["scheme"]["display_name"] = kAwq.toStdString();
        }
        ComparisonTableModel model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setComparison(compare);
        QCOMPARE(model.rowCount(), 3);
        QStringList column;
        for (int row = 0; row < model.rowCount(); ++row)
            column << model.index(row, ComparisonTableModel::Scheme).data().toString();
        QCOMPARE(column, (QStringList{kRtn, kGptq, kAwq}));

        ParetoChart pareto;
        pareto.setComparison(compare);
        QCOMPARE(pareto.runLabels(), (QStringList{kRtn, kGptq, kAwq}));
    }

    void historyNamesTheMethodAndKeepsTheString()
    {
        HistoryModel history;
        QAbstractItemModelTester tester(&history,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        history.addComparison(m_compare, QStringLiteral("kjv-llama"));
        QCOMPARE(history.rowCount(), 3);
        QCOMPARE(history.index(1, HistoryModel::Scheme).data().toString(), kGptq);
        QCOMPARE(history.index(2, HistoryModel::Scheme).data().toString(), kAwq);
        QVERIFY(history.runLabel(1).startsWith(kGptq + QStringLiteral(" (")));
        // The string it ran is on hover, to copy into the CLI.
        QVERIFY(history.index(1, HistoryModel::Scheme)
                    .data(Qt::ToolTipRole)
                    .toString()
                    .startsWith(QStringLiteral("w4-int4:group=128,method=gptq\n")));
    }

    void chartTitlesAndLayerMapNameTheMethod()
    {
        ReportView view;
        view.setModelMetric(QStringLiteral("perplexity"));
        view.setReport(m_compare["runs"][1]);
        const auto title = [](ChartBase* chart) { return chart->chart()->title(); };
        for (const QString& shown :
             {title(view.sqnrChart()), title(view.memoryChart()), title(view.throughputChart()),
              title(view.latencyChart()), view.layerHeatmap()->title()})
            QVERIFY2(shown.contains(kGptq), qPrintable(shown));
        view.setReport(m_compare["runs"][2]);
        QVERIFY2(title(view.memoryChart()).contains(kAwq), qPrintable(title(view.memoryChart())));
        QVERIFY2(!title(view.memoryChart()).contains(QStringLiteral("GPTQ")),
                 qPrintable(title(view.memoryChart())));
        QVERIFY2(view.layerHeatmap()->title().contains(kAwq),
                 qPrintable(view.layerHeatmap()->title()));
    }

    void panelFollowsTheRunOnScreen()
    {
        // The window on a model, the run before it on w4-nf4 (the case), then a
        // report of a GPTQ run opened: the panel shows that run, and Run runs it.
        auto window = bitlens::testing::openWindowOn(m_modelPath, m_dataPath);
        QVERIFY(window);
        QuantPanel* panel = window->quantPanel();
        panel->setSchemeText(QStringLiteral("w4-nf4"));
        QVERIFY(window->openReport(writeRun(1, QStringLiteral("gptq.json"))));
        QCOMPARE(panel->presetBox()->currentText(), QStringLiteral("w4-int4"));
        QCOMPARE(panel->methodBox()->currentText(), QStringLiteral("GPTQ"));
        QCOMPARE(panel->granularityBox()->currentIndex(), 3);  // group
        QCOMPARE(panel->groupSizeBox()->value(), 128);
        QCOMPARE(panel->schemeText(), QStringLiteral("w4-int4:group=128,method=gptq"));
        QCOMPARE(panel->schemeLine()->text(), panel->schemeText());
        window->quantPanel()->runButton()->click();
        QCOMPARE(window->quantJobs()->currentTitle(),
                 QStringLiteral("Quantizing with w4-int4:group=128,method=gptq"));
        window->cancelQuantization();
        QVERIFY(window->quantJobs()->waitForWorkers(30000));

        // An AWQ run after static-int8.
        panel->setSchemeText(QStringLiteral("static-int8"));
        QVERIFY(window->openReport(writeRun(2, QStringLiteral("awq.json"))));
        QCOMPARE(panel->presetBox()->currentText(), QStringLiteral("w4-int4"));
        QCOMPARE(panel->methodBox()->currentText(), QStringLiteral("AWQ"));
        QCOMPARE(panel->schemeText(), QStringLiteral("w4-int4:method=awq"));
        // The RTN run: the method goes back.
        QVERIFY(window->openReport(writeRun(0, QStringLiteral("rtn.json"))));
        QCOMPARE(panel->methodBox()->currentText(), QStringLiteral("RTN"));
        QCOMPARE(panel->schemeText(), QStringLiteral("w4-int4"));
    }

    void methodControlOffersWhatThePresetTakes()
    {
        QuantPanel panel;
        QComboBox* method = panel.methodBox();
        QCOMPARE(method->count(), 3);
        QVERIFY(!method->toolTip().isEmpty());
        auto* items = qobject_cast<QStandardItemModel*>(method->model());
        QVERIFY(items);
        panel.presetBox()->setCurrentText(QStringLiteral("w4-int4"));
        method->setCurrentIndex(1);
        QCOMPARE(panel.schemeText(), QStringLiteral("w4-int4:method=gptq"));
        QVERIFY(bitlens::widgets::checkScheme(panel.schemeText().toStdString()).ok());
        method->setCurrentIndex(2);
        QCOMPARE(panel.schemeText(), QStringLiteral("w4-int4:method=awq"));
        // A preset GPTQ and AWQ do not combine with: they are disabled, saying why, and the
        // choice goes back to RTN.
        panel.presetBox()->setCurrentText(QStringLiteral("gguf-q4_0"));
        QCOMPARE(method->currentIndex(), 0);
        QCOMPARE(panel.schemeText(), QStringLiteral("gguf-q4_0"));
        QVERIFY(!items->item(1)->isEnabled());
        QVERIFY(!items->item(2)->isEnabled());
        QVERIFY2(items->item(1)->toolTip().startsWith(QStringLiteral("Not with gguf-q4_0: ")),
                 qPrintable(items->item(1)->toolTip()));
        panel.presetBox()->setCurrentText(QStringLiteral("w4-nf4"));
        QVERIFY(items->item(1)->isEnabled());
        // Options the controls cannot show run as typed, while the controls show the rest.
        panel.setSchemeText(QStringLiteral("w4-int4:method=gptq,damp=0.0125"));
        QCOMPARE(panel.presetBox()->currentText(), QStringLiteral("w4-int4"));
        QCOMPARE(method->currentText(), QStringLiteral("GPTQ"));
        QCOMPARE(panel.schemeText(), QStringLiteral("w4-int4:method=gptq,damp=0.0125"));
    }

    void methodOptionsFollowTheMethod()
    {
        QuantPanel panel;
        panel.show();
        QWidget* options = panel.findChild<QWidget*>(QStringLiteral("methodOptions"));
        QVERIFY(options);
        panel.presetBox()->setCurrentText(QStringLiteral("w4-int4"));
        // RTN has no options: the row is hidden.
        QVERIFY(!options->isVisible());
        // GPTQ: damping and act-order, written only when not the default.
        panel.methodBox()->setCurrentIndex(1);
        QVERIFY(panel.dampBox()->isVisible() && panel.actOrderBox()->isVisible());
        QVERIFY(!panel.awqClipBox()->isVisible());
        QCOMPARE(panel.dampBox()->value(), 0.01);
        QCOMPARE(panel.schemeText(), QStringLiteral("w4-int4:method=gptq"));
        panel.dampBox()->setValue(0.05);
        panel.actOrderBox()->setChecked(true);
        QCOMPARE(panel.schemeText(), QStringLiteral("w4-int4:method=gptq,damp=0.05,act-order=true"));
        QVERIFY(bitlens::widgets::checkScheme(panel.schemeText().toStdString()).ok());
        // AWQ: the clip search, on by default; GPTQ's options are not written for AWQ.
        panel.methodBox()->setCurrentIndex(2);
        QVERIFY(panel.awqClipBox()->isVisible() && !panel.dampBox()->isVisible());
        QCOMPARE(panel.schemeText(), QStringLiteral("w4-int4:method=awq"));
        panel.awqClipBox()->setChecked(false);
        QCOMPARE(panel.schemeText(), QStringLiteral("w4-int4:method=awq,awq-clip=false"));
        QVERIFY(bitlens::widgets::checkScheme(panel.schemeText().toStdString()).ok());
        // A run's scheme read back sets the options' controls (the panel follows the run).
        panel.setSchemeText(QStringLiteral("w4-nf4:method=gptq,damp=0.1,act-order=true"));
        QCOMPARE(panel.methodBox()->currentText(), QStringLiteral("GPTQ"));
        QCOMPARE(panel.dampBox()->value(), 0.1);
        QVERIFY(panel.actOrderBox()->isChecked());
        QVERIFY(panel.actOrderBox()->isEnabled());
        QCOMPARE(panel.schemeText(), QStringLiteral("w4-nf4:method=gptq,damp=0.1,act-order=true"));
        panel.setSchemeText(QStringLiteral("w4-int4:method=awq,awq-clip=false"));
        QVERIFY(!panel.awqClipBox()->isChecked());
        QCOMPARE(panel.schemeText(), QStringLiteral("w4-int4:method=awq,awq-clip=false"));
        panel.setSchemeText(QStringLiteral("w4-int4"));
        QVERIFY(!options->isVisible());
    }

private:
    /// Run `index` of the compare file as a report.json file called `name`; its path.
    QString writeRun(int index, const QString& name)
    {
        const QString path = m_dir.filePath(name);
        std::ofstream(path.toStdString()) << m_compare["runs"][index].dump();
        return path;
    }

    nlohmann::json m_compare;
    QTemporaryDir m_dir;
    QString m_modelPath;
    QString m_dataPath;
};

QTEST_MAIN(TestMethodViews)
#include "test_method_views.moc"
