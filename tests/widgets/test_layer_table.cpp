// LayerTableModel: what the layer table shows for a model, checked by QAbstractItemModelTester
// and cell by cell, for a hand-made summary and for an ONNX file opened through the core.

#include "layer_table_model.h"
#include "model_fixtures.h"

#include "model/model.h"

#include <QAbstractItemModelTester>
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
    QCOMPARE(model.columnCount(), 6);
    QCOMPARE(model.layer(0), nullptr);
}

void TestLayerTable::showsHandMadeSummary()
{
    LayerTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSummary(handMadeSummary());

    QCOMPARE(model.rowCount(), 4);
    QCOMPARE(model.columnCount(), 6);
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

QTEST_MAIN(TestLayerTable)
#include "test_layer_table.moc"
