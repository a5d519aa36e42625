// ComparisonTableModel over the compare file bitlens-cli wrote (tests/data/reports).

#include "comparison_table_model.h"
#include "report_fixtures.h"

#include <nlohmann/json.hpp>

#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <QTest>

#include <fstream>

using namespace bitlens::widgets;
using Model = ComparisonTableModel;
constexpr auto kQtTestReporting = QAbstractItemModelTester::FailureReportingMode::QtTest;

namespace {

using bitlens::testing::loadReport;

} // namespace

class TestComparisonTable : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void rowsFromCompareFile()
    {
        Model model;
        QAbstractItemModelTester tester(&model, kQtTestReporting);
        model.setComparison(loadReport("fashion-cnn-compare.json"));
        QCOMPARE(model.rowCount(), 5);
        QCOMPARE(model.columnCount(), int(Model::ColumnCount));
        QVERIFY(model.errorText().isEmpty());
        const auto text = [&](int row, int column) {
            return model.index(row, column).data().toString();
        };
        QCOMPARE(text(0, Model::Scheme), QStringLiteral("static-int8"));
        QCOMPARE(text(0, Model::Metric), QStringLiteral("0.9235"));
        QCOMPARE(text(0, Model::Change), QStringLiteral("-0.05"));
        QCOMPARE(text(0, Model::Size), QStringLiteral("413.4 KiB (0.251)"));
        QCOMPARE(text(0, Model::MinSqnr), QStringLiteral("34.6"));
        QCOMPARE(text(0, Model::Throughput), QStringLiteral("5333 (0.72x float)"));
        // An old compare file has no throughput.why: no tooltip is made up.
        QVERIFY(model.index(0, Model::Throughput).data(Qt::ToolTipRole).isNull());
        QCOMPARE(text(0, Model::Kernels), QStringLiteral("2 of 4 layers real"));
        QCOMPARE(text(2, Model::Kernels), QStringLiteral("0 of 4 layers real")); // nf4
        QCOMPARE(text(4, Model::Change), QStringLiteral("+0.05"));              // bf16
        QCOMPARE(model.index(0, Model::Size).data(Model::SortRole).toDouble(), 423280.0);
        QCOMPARE(model.headerData(Model::Metric, Qt::Horizontal).toString(),
                 QStringLiteral("Top-1 accuracy"));
        QCOMPARE(model.headerData(Model::Change, Qt::Horizontal).toString(),
                 QStringLiteral("Change (points)"));
    }

    void slowerRowsSayWhy()
    {
        // throughput.why (core's analysis::throughputWhy) becomes the tooltip of the row's
        // throughput and kernel cells.
        nlohmann::json compare = loadReport("fashion-cnn-compare.json");
        compare["runs"][0]["throughput"]["why"] =
            "real kernel slower than float32 here: block1.conv (0.58 ms vs 0.53 ms per batch)";
        Model model;
        model.setComparison(compare);
        const QString tip = model.index(0, Model::Throughput).data(Qt::ToolTipRole).toString();
        QVERIFY2(tip.startsWith(QLatin1String("Slower than float32: real kernel slower")),
                 qPrintable(tip));
        QCOMPARE(model.index(0, Model::Kernels).data(Qt::ToolTipRole).toString(), tip);
        QVERIFY(model.index(1, Model::Throughput).data(Qt::ToolTipRole).isNull());
    }

    void sortsByRawNumbers()
    {
        Model model;
        QAbstractItemModelTester tester(&model, kQtTestReporting);
        model.setComparison(loadReport("fashion-cnn-compare.json"));
        QSortFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        proxy.setSortRole(Model::SortRole);
        proxy.sort(Model::Size, Qt::AscendingOrder);
        QCOMPARE(proxy.index(0, Model::Scheme).data().toString(), QStringLiteral("w4-nf4"));
        QCOMPARE(proxy.index(4, Model::Scheme).data().toString(), QStringLiteral("bf16"));
        // As text "844.9 KiB" < "240.2 KiB" would be wrong; the raw bytes sort right.
        model.sort(Model::Metric, Qt::DescendingOrder);
        QCOMPARE(model.index(0, Model::Scheme).data().toString(), QStringLiteral("bf16"));
        QCOMPARE(model.index(4, Model::Scheme).data().toString(), QStringLiteral("w4-int4"));
        model.sort(Model::Throughput, Qt::AscendingOrder);
        QCOMPARE(model.index(0, Model::Scheme).data().toString(), QStringLiteral("fp8-e4m3"));
    }

    void exactLayersAndMissingValues()
    {
        nlohmann::json run = loadReport("fashion-cnn-static-int8.json");
        for (auto& layer : run["layers"])
            layer["sqnr_db_accumulated"] = nullptr;
        run.erase("throughput");
        Model model;
        QAbstractItemModelTester tester(&model, kQtTestReporting);
        model.setComparison({{"runs", {run, nlohmann::json{{"scheme", {{"spec", "x"}}}}}}});
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(model.index(0, Model::MinSqnr).data().toString(), QStringLiteral("exact"));
        QCOMPARE(model.index(0, Model::Throughput).data().toString(), QStringLiteral("–"));
        QCOMPARE(model.index(1, Model::Scheme).data().toString(), QStringLiteral("x"));
        model.sort(Model::MinSqnr, Qt::DescendingOrder);
        QCOMPARE(model.index(1, Model::Scheme).data().toString(), QStringLiteral("x"));
    }

    void malformedShowsNoRows()
    {
        Model model;
        QAbstractItemModelTester tester(&model, kQtTestReporting);
        for (const nlohmann::json& bad :
             {nlohmann::json(), nlohmann::json::object(), nlohmann::json{{"runs", 3}},
              nlohmann::json{{"runs", {1, "a"}}},
              nlohmann::json{{"runs",
                              {{{"metric", "x"},
                                {"size_bytes", {1}},
                                {"layers", {{{"sqnr_db_accumulated", "a"}}}},
                                {"throughput", {{"kernels", {1, 2}}}}}}}}}) {
            model.setComparison(bad);
            if (model.rowCount() == 0)
                QVERIFY(model.errorText().startsWith("No data"));
        }
        QCOMPARE(model.rowCount(), 1);
        QCOMPARE(model.index(0, Model::Metric).data().toString(), QStringLiteral("–"));
    }
};

QTEST_MAIN(TestComparisonTable)
#include "test_comparison_table.moc"
