// LayerTableModel: what the layer table shows for a model, checked by QAbstractItemModelTester
// and cell by cell, for a hand-made summary and for an ONNX file opened through the core.

#include "layer_table_model.h"
#include "model_fixtures.h"

#include "model/model.h"

#include <QAbstractItemModelTester>
#include <QFont>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTemporaryDir>
#include <QtTest>

using bitlens::LayerSummary;
using bitlens::ModelSummary;
using bitlens::widgets::LayerTableModel;

namespace {

ModelSummary handMadeSummary()
{
    ModelSummary summary;
    summary.name = "hand-made";
    summary.layers.push_back({"stem.conv", "Conv", {{1, 3, 32, 32}}, {1, 16, 32, 32}, 448, 1792});
    summary.layers.push_back({"stem.relu", "Relu", {{1, 16, 32, 32}}, {1, 16, 32, 32}, 0, 0});
    summary.layers.push_back({"head.add", "Add", {{1, 10}, {1, 10}}, {1, 10}, 0, 0});
    summary.layers.push_back(
        {"head.fc", "Gemm", {{1, 16384}}, {1, 10}, 163850, 655400});
    return summary;
}

QString cell(const QAbstractItemModel& model, int row, int column, int role = Qt::DisplayRole)
{
    return model.data(model.index(row, column), role).toString();
}

} // namespace

class TestLayerTable : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void formatsCounts_data();
    void formatsCounts();
    void emptyModel();
    void showsHandMadeSummary();
    void numbersAreRightAligned();
    void sortsByRawValues();
    void resetsWhenSummaryChanges();
    void showsOnnxModelLayers();
    void showsReportColumns();
    void heatBands_data();
    void heatBands();
    void showsOverrides();
};

void TestLayerTable::formatsCounts_data()
{
    QTest::addColumn<qint64>("count");
    QTest::addColumn<QString>("text");
    QTest::newRow("zero") << qint64{0} << QStringLiteral("0");
    QTest::newRow("three digits") << qint64{999} << QStringLiteral("999");
    QTest::newRow("thousand") << qint64{1000} << QStringLiteral("1,000");
    QTest::newRow("millions") << qint64{134515008} << QStringLiteral("134,515,008");
    QTest::newRow("negative") << qint64{-1234567} << QStringLiteral("-1,234,567");
}

void TestLayerTable::formatsCounts()
{
    QFETCH(qint64, count);
    QFETCH(QString, text);
    QCOMPARE(bitlens::widgets::formatCount(count), text);
}

void TestLayerTable::emptyModel()
{
    LayerTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(model.columnCount(), int(LayerTableModel::ColumnCount));
    QCOMPARE(model.layer(0), nullptr);
}

void TestLayerTable::showsHandMadeSummary()
{
    LayerTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSummary(handMadeSummary());

    QCOMPARE(model.rowCount(), 4);
    QCOMPARE(model.columnCount(), int(LayerTableModel::ColumnCount));
    const QStringList headers{"Name", "Op", "Input shapes", "Output shape", "Params", "Bytes"};
    for (int column = 0; column < headers.size(); ++column)
        QCOMPARE(model.headerData(column, Qt::Horizontal).toString(), headers[column]);
    QCOMPARE(model.headerData(0, Qt::Vertical).toInt(), 1);
    QCOMPARE(model.headerData(3, Qt::Vertical).toInt(), 4);

    QCOMPARE(cell(model, 0, LayerTableModel::Name), QStringLiteral("stem.conv"));
    QCOMPARE(cell(model, 0, LayerTableModel::Op), QStringLiteral("Conv"));
    QCOMPARE(cell(model, 0, LayerTableModel::InputShapes), QStringLiteral("[1, 3, 32, 32]"));
    QCOMPARE(cell(model, 0, LayerTableModel::OutputShape), QStringLiteral("[1, 16, 32, 32]"));
    QCOMPARE(cell(model, 0, LayerTableModel::Params), QStringLiteral("448"));
    QCOMPARE(cell(model, 0, LayerTableModel::Bytes), QStringLiteral("1.8 KiB"));
    QCOMPARE(cell(model, 0, LayerTableModel::Bytes, Qt::ToolTipRole),
             QStringLiteral("1,792 bytes"));
    // A layer with two activation inputs lists both shapes.
    QCOMPARE(cell(model, 2, LayerTableModel::InputShapes), QStringLiteral("[1, 10], [1, 10]"));
    QCOMPARE(cell(model, 1, LayerTableModel::Bytes), QStringLiteral("0 B"));
    QCOMPARE(cell(model, 3, LayerTableModel::Params), QStringLiteral("163,850"));
    QCOMPARE(cell(model, 3, LayerTableModel::Bytes), QStringLiteral("640.0 KiB"));
    QCOMPARE(model.layer(3)->name, std::string("head.fc"));
}

void TestLayerTable::numbersAreRightAligned()
{
    LayerTableModel model;
    model.setSummary(handMadeSummary());
    const auto alignment = [&](int column) {
        return Qt::Alignment(model.data(model.index(0, column), Qt::TextAlignmentRole).toInt());
    };
    QVERIFY(alignment(LayerTableModel::Params) & Qt::AlignRight);
    QVERIFY(alignment(LayerTableModel::Bytes) & Qt::AlignRight);
    QVERIFY(alignment(LayerTableModel::Name) & Qt::AlignLeft);
    QVERIFY(Qt::Alignment(
                model.headerData(LayerTableModel::Bytes, Qt::Horizontal, Qt::TextAlignmentRole)
                    .toInt()) &
            Qt::AlignRight);
}

void TestLayerTable::sortsByRawValues()
{
    LayerTableModel model;
    model.setSummary(handMadeSummary());
    QSortFilterProxyModel proxy;
    QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    proxy.setSourceModel(&model);
    proxy.setSortRole(LayerTableModel::SortRole);
    // "1.8 KiB" < "640.0 KiB" as numbers but not as text: sorting must use the byte counts.
    proxy.sort(LayerTableModel::Bytes, Qt::DescendingOrder);
    QCOMPARE(cell(proxy, 0, LayerTableModel::Name), QStringLiteral("head.fc"));
    QCOMPARE(cell(proxy, 1, LayerTableModel::Name), QStringLiteral("stem.conv"));
    proxy.sort(LayerTableModel::Params, Qt::AscendingOrder);
    QCOMPARE(cell(proxy, 3, LayerTableModel::Name), QStringLiteral("head.fc"));
    // The vertical header keeps each layer's position in the graph.
    QCOMPARE(proxy.headerData(3, Qt::Vertical).toInt(), 4);
}

void TestLayerTable::resetsWhenSummaryChanges()
{
    LayerTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSummary(handMadeSummary());
    ModelSummary smaller;
    smaller.layers.push_back({"only", "Relu", {{1, 4}}, {1, 4}, 0, 0});
    model.setSummary(smaller);
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(cell(model, 0, LayerTableModel::Name), QStringLiteral("only"));
    model.clear();
    QCOMPARE(model.rowCount(), 0);
}

void TestLayerTable::showsOnnxModelLayers()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath(QStringLiteral("small.onnx"));
    const std::string written = bitlens::testing::writeSmallCnn(path);
    QVERIFY2(written.empty(), written.c_str());
    auto opened = bitlens::openModel(path.toStdString());
    QVERIFY2(opened.ok(), opened.ok() ? "" : opened.error().describe().c_str());

    LayerTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSummary(opened.value()->summary());
    QCOMPARE(model.rowCount(), 4);
    const QStringList names{"conv1", "relu1", "flatten", "fc"};
    const QStringList ops{"Conv", "Relu", "Flatten", "Gemm"};
    const QStringList inputs{"[1, 1, 8, 8]", "[1, 4, 6, 6]", "[1, 4, 6, 6]", "[1, 144]"};
    const QStringList outputs{"[1, 4, 6, 6]", "[1, 4, 6, 6]", "[1, 144]", "[1, 10]"};
    const QStringList params{"40", "0", "0", "1,450"};
    const QStringList bytes{"160 B", "0 B", "0 B", "5.7 KiB"};
    for (int row = 0; row < 4; ++row) {
        QCOMPARE(cell(model, row, LayerTableModel::Name), names[row]);
        QCOMPARE(cell(model, row, LayerTableModel::Op), ops[row]);
        QCOMPARE(cell(model, row, LayerTableModel::InputShapes), inputs[row]);
        QCOMPARE(cell(model, row, LayerTableModel::OutputShape), outputs[row]);
        QCOMPARE(cell(model, row, LayerTableModel::Params), params[row]);
        QCOMPARE(cell(model, row, LayerTableModel::Bytes), bytes[row]);
    }
}

namespace {

/// A report.json for the hand-made summary: stem.conv exact (SQNR null), head.fc at 22.5 dB
/// accumulated, and a layer the model does not have.
nlohmann::json handMadeReport()
{
    return nlohmann::json::parse(R"json({
      "layers": [
        {"name": "stem.conv", "weight_type": "int8", "act_type": "uint8", "sqnr_db": null,
         "sqnr_db_accumulated": null, "bytes_quantized": 576, "kernel": "simulated (fake-quant, float32)",
         "config": "int8 per-channel(0) sym / uint8 static minmax"},
        {"name": "head.fc", "weight_type": "int8", "act_type": "uint8", "sqnr_db": 31.24,
         "sqnr_db_accumulated": 22.5, "bytes_quantized": 163890,
         "kernel": "at::_int_mm (int8 x int8 -> int32)", "config": "int8"},
        {"name": "elsewhere", "sqnr_db": 3.0, "sqnr_db_accumulated": 3.0}
      ]})json");
}

} // namespace

void TestLayerTable::showsReportColumns()
{
    LayerTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSummary(handMadeSummary());
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.setReport(handMadeReport());
    QCOMPARE(changed.size(), 1);
    QCOMPARE(model.headerData(LayerTableModel::SqnrAccumulated, Qt::Horizontal).toString(),
             QStringLiteral("SQNR dB (accum.)"));

    QCOMPARE(cell(model, 3, LayerTableModel::SqnrLocal), QStringLiteral("31.2"));
    QCOMPARE(cell(model, 3, LayerTableModel::SqnrAccumulated), QStringLiteral("22.5"));
    QCOMPARE(cell(model, 3, LayerTableModel::BytesQuantized), QStringLiteral("160.0 KiB"));
    QCOMPARE(cell(model, 3, LayerTableModel::Kernel),
             QStringLiteral("at::_int_mm (int8 x int8 -> int32)"));
    QCOMPARE(cell(model, 3, LayerTableModel::Scheme), QStringLiteral("int8 / uint8"));
    QCOMPARE(cell(model, 0, LayerTableModel::SqnrLocal), QStringLiteral("exact"));
    QCOMPARE(cell(model, 0, LayerTableModel::SqnrAccumulated), QStringLiteral("exact"));
    QVERIFY(model.hasMetrics(0));
    // Layers the report does not list (not quantizable) stay blank.
    QVERIFY(!model.hasMetrics(1));
    for (int column = LayerTableModel::Scheme; column < LayerTableModel::ColumnCount; ++column)
        QVERIFY(cell(model, 1, column).isEmpty());
    QVERIFY(!model.data(model.index(1, LayerTableModel::SqnrAccumulated), Qt::BackgroundRole)
                 .isValid());
    QVERIFY(cell(model, 3, LayerTableModel::SqnrAccumulated, Qt::ToolTipRole)
                .contains(LayerTableModel::heatLegend()));

    // Sorting by SQNR: exact sorts above every number, blank rows below.
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&model);
    proxy.setSortRole(LayerTableModel::SortRole);
    proxy.sort(LayerTableModel::SqnrAccumulated, Qt::DescendingOrder);
    QCOMPARE(cell(proxy, 0, LayerTableModel::Name), QStringLiteral("stem.conv"));
    QCOMPARE(cell(proxy, 1, LayerTableModel::Name), QStringLiteral("head.fc"));

    // A new summary (another model) forgets the report.
    model.setSummary(handMadeSummary());
    QVERIFY(!model.hasMetrics(0));
    QVERIFY(cell(model, 3, LayerTableModel::SqnrLocal).isEmpty());
    // An empty report clears the numbers too.
    model.setReport(handMadeReport());
    model.setReport(nlohmann::json());
    QVERIFY(!model.hasMetrics(3));
}

void TestLayerTable::heatBands_data()
{
    QTest::addColumn<QVariant>("sqnrDb");  // invalid = exact
    QTest::addColumn<QString>("band");
    QTest::newRow("exact") << QVariant() << QStringLiteral("green");
    QTest::newRow("45 dB") << QVariant(45.0) << QStringLiteral("green");
    QTest::newRow("30.5 dB") << QVariant(30.5) << QStringLiteral("green");
    QTest::newRow("30 dB") << QVariant(30.0) << QStringLiteral("amber");
    QTest::newRow("15 dB") << QVariant(15.0) << QStringLiteral("amber");
    QTest::newRow("14.9 dB") << QVariant(14.9) << QStringLiteral("red");
    QTest::newRow("-3 dB") << QVariant(-3.0) << QStringLiteral("red");
}

void TestLayerTable::heatBands()
{
    QFETCH(QVariant, sqnrDb);
    QFETCH(QString, band);
    const QColor color = LayerTableModel::heatColor(
        sqnrDb.isValid() ? std::optional<double>(sqnrDb.toDouble()) : std::nullopt);
    const QString actual = color.green() > color.red()   ? QStringLiteral("green")
                           : color.green() > 0xb0        ? QStringLiteral("amber")
                                                         : QStringLiteral("red");
    QCOMPARE(actual, band);
}

void TestLayerTable::showsOverrides()
{
    LayerTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSummary(handMadeSummary());
    model.setReport(handMadeReport());
    model.setOverrides({{QStringLiteral("head.fc"), QStringLiteral("float")},
                        {QStringLiteral("stem.conv"), QStringLiteral("w4-int4:group=32")}});
    QCOMPARE(cell(model, 3, LayerTableModel::Scheme), QStringLiteral("float32 (kept)"));
    QCOMPARE(cell(model, 0, LayerTableModel::Scheme), QStringLiteral("w4-int4:group=32"));
    QVERIFY(model.data(model.index(3, LayerTableModel::Scheme), Qt::FontRole)
                .value<QFont>()
                .bold());
    QCOMPARE(model.rowOf(QStringLiteral("head.fc")), 3);
    QCOMPARE(model.rowOf(QStringLiteral("nope")), -1);
    model.setOverrides({});
    QCOMPARE(cell(model, 3, LayerTableModel::Scheme), QStringLiteral("int8 / uint8"));
}

QTEST_MAIN(TestLayerTable)
#include "test_layer_table.moc"
