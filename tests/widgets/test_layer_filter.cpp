// The layer table's filter: quantizable layers by default, every node on request, for a
// hand-made summary (LayerFilterProxy) and in the main window (the "Show all nodes" box).

#include "layer_table_model.h"
#include "main_window.h"
#include "model_fixtures.h"

#include "model/model.h"

#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

using bitlens::LayerSummary;
using bitlens::ModelSummary;
using bitlens::widgets::LayerFilterProxy;
using bitlens::widgets::LayerTableModel;
using bitlens::widgets::MainWindow;

namespace {

/// A transformer block's worth of nodes: two projections among index and shape helpers, and an
/// attention MatMul of two activations (no weights: not quantizable).
ModelSummary llmLikeSummary()
{
    ModelSummary summary;
    summary.layers.push_back({"embed", "Gather", {{1, 8}}, {1, 8, 16}, 1600, 6400});
    summary.layers.push_back({"shape", "Shape", {{1, 8, 16}}, {3}, 0, 0});
    summary.layers.push_back({"q_proj", "MatMul", {{1, 8, 16}}, {1, 8, 16}, 256, 1024});
    summary.layers.push_back({"scores", "MatMul", {{1, 8, 16}, {1, 16, 8}}, {1, 8, 8}, 0, 0});
    summary.layers.push_back({"slice", "Slice", {{1, 8, 16}}, {1, 4, 16}, 0, 0});
    summary.layers.push_back({"cast", "Cast", {{1, 8, 8}}, {1, 8, 8}, 0, 0});
    summary.layers.push_back({"lm_head", "MatMul", {{1, 8, 16}}, {1, 8, 100}, 1600, 6400});
    return summary;
}

QStringList names(const QAbstractItemModel& model)
{
    QStringList out;
    for (int row = 0; row < model.rowCount(); ++row)
        out << model.data(model.index(row, LayerTableModel::Name)).toString();
    return out;
}

} // namespace

class TestLayerFilter : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void quantizableLayersByDefault();
    void headNoteInSchemeTooltip();
    void modelWithoutQuantizableLayersShowsAll();
    void windowToggleShowsAllNodes();

private:
    QTemporaryDir m_dir;
    QString m_small;
};

void TestLayerFilter::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens")).clear();
    QVERIFY(m_dir.isValid());
    m_small = m_dir.filePath(QStringLiteral("small.onnx"));
    const std::string error = bitlens::testing::writeSmallCnn(m_small, 4, "small-cnn");
    QVERIFY2(error.empty(), error.c_str());
}

void TestLayerFilter::quantizableLayersByDefault()
{
    LayerTableModel layers;
    LayerFilterProxy proxy;
    QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    proxy.setSourceModel(&layers);
    layers.setSummary(llmLikeSummary());
    QCOMPARE(layers.rowCount(), 7);
    QCOMPARE(layers.quantizableCount(), 2);
    QCOMPARE(proxy.nodeCount(), 7);
    QCOMPARE(proxy.quantizableCount(), 2);
    QVERIFY(!proxy.showAllNodes());
    QCOMPARE(names(proxy), (QStringList{"q_proj", "lm_head"}));

    proxy.setShowAllNodes(true);
    QCOMPARE(proxy.rowCount(), 7);
    QCOMPARE(names(proxy).at(3), QStringLiteral("scores"));
    proxy.setShowAllNodes(false);
    QCOMPARE(names(proxy), (QStringList{"q_proj", "lm_head"}));

    // Sorting still works on the filtered rows (params, descending).
    proxy.setSortRole(LayerTableModel::SortRole);
    proxy.sort(LayerTableModel::Params, Qt::DescendingOrder);
    QCOMPARE(names(proxy), (QStringList{"lm_head", "q_proj"}));
}

void TestLayerFilter::headNoteInSchemeTooltip()
{
    LayerTableModel layers;
    layers.setSummary(llmLikeSummary());
    const auto report = nlohmann::json::parse(R"({"layers": [
        {"name": "q_proj", "weight_type": "nf4", "act_type": "float32", "config": "nf4 g64"},
        {"name": "lm_head", "weight_type": "float32", "act_type": "float32", "config": "float",
         "note": "output head kept float32 by this preset"}]})");
    layers.setReport(report);
    const int head = layers.rowOf(QStringLiteral("lm_head"));
    QCOMPARE(layers.data(layers.index(head, LayerTableModel::Scheme)).toString(),
             QStringLiteral("float32 / float32"));
    QCOMPARE(layers.data(layers.index(head, LayerTableModel::Scheme), Qt::ToolTipRole).toString(),
             QStringLiteral("float\noutput head kept float32 by this preset"));
    const int q = layers.rowOf(QStringLiteral("q_proj"));
    QCOMPARE(layers.data(layers.index(q, LayerTableModel::Scheme), Qt::ToolTipRole).toString(),
             QStringLiteral("nf4 g64"));
}

void TestLayerFilter::modelWithoutQuantizableLayersShowsAll()
{
    ModelSummary summary;
    summary.layers.push_back({"relu", "Relu", {{1, 4}}, {1, 4}, 0, 0});
    summary.layers.push_back({"add", "Add", {{1, 4}, {1, 4}}, {1, 4}, 0, 0});
    LayerTableModel layers;
    LayerFilterProxy proxy;
    proxy.setSourceModel(&layers);
    layers.setSummary(summary);
    QCOMPARE(layers.quantizableCount(), 0);
    QCOMPARE(proxy.rowCount(), 2);
}

void TestLayerFilter::windowToggleShowsAllNodes()
{
    MainWindow window(m_small);
    window.setDialogsEnabled(false);
    QSignalSpy loaded(&window, &MainWindow::modelLoaded);
    QVERIFY(loaded.wait(30000));

    // conv1 -> relu1 -> flatten -> fc: the table lists conv1 and fc.
    QAbstractItemModel* table = window.layerTable()->model();
    QCOMPARE(names(*table), (QStringList{"conv1", "fc"}));
    QCOMPARE(window.layerCountText(), QStringLiteral("2 quantizable layers of 4 nodes"));
    QVERIFY(!window.showAllNodesBox()->isChecked());
    QVERIFY(window.showAllNodesBox()->isEnabled());
    QVERIFY(!window.layerIndex(QStringLiteral("relu1")).isValid());

    // The selection follows the layer across the switch.
    window.layerTable()->setCurrentIndex(window.layerIndex(QStringLiteral("fc")));
    window.showAllNodesBox()->setChecked(true);
    QCOMPARE(names(*table), (QStringList{"conv1", "relu1", "flatten", "fc"}));
    QCOMPARE(window.layerTable()->currentIndex(), window.layerIndex(QStringLiteral("fc")));
    QCOMPARE(window.layerTable()->currentIndex().row(), 3);
    window.showAllNodesBox()->setChecked(false);
    QCOMPARE(window.layerTable()->currentIndex().row(), 1);

    // Selecting a hidden node (from elsewhere in the window) shows all nodes to select it.
    window.selectLayer(QStringLiteral("relu1"));
    QVERIFY(window.showAllNodesBox()->isChecked());
    QCOMPARE(window.layerTable()->currentIndex(), window.layerIndex(QStringLiteral("relu1")));
}

QTEST_MAIN(TestLayerFilter)
#include "test_layer_filter.moc"
