// The method on every view that names a scheme (issue #47 item 4): after runs of
// w4-int4:group=128,method=gptq and w4-int4:method=awq the chart titles, the Layer map, the
// Scheme column of Compare and History and the Pareto labels say "w4-int4 · GPTQ g128" and
// "w4-int4 · AWQ", not "w4-int4" three times. The input is bitlens-cli's compare of kjv-llama
// (tests/data/reports/kjv-llama-compare-methods.json, written before reports carried
// scheme.display_name: the name is read back from the spec) and the same runs as report.json
// holds them now (with display_name).

#include "chart_histogram.h"
#include "chart_latency.h"
#include "chart_memory.h"
#include "chart_pareto.h"
#include "chart_sqnr.h"
#include "chart_throughput.h"
#include "comparison_table_model.h"
#include "history_model.h"
#include "layer_heatmap.h"
#include "report_view.h"

#include <nlohmann/json.hpp>

#include <QAbstractItemModelTester>
#include <QChart>
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

private:
    nlohmann::json m_compare;
};

QTEST_MAIN(TestMethodViews)
#include "test_method_views.moc"
