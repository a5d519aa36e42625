// Per-layer views that scale (issue #22 item 1): layer-name parsing and short labels, the block x
// projection heatmap, scrolling bar charts, log scale on outliers, legends. Synthetic reports of
// 4, 36, 211 (smollm2-135m-shaped) and 1,000 layers; no model runs.
// BITLENS_CHART_SCREENSHOTS=<dir> saves PNGs of the views at 1600x1000 to look at.

#include "chart_latency.h"
#include "chart_memory.h"
#include "chart_sqnr.h"
#include "layer_heatmap.h"
#include "layer_names.h"
#include "report_view.h"

#include <nlohmann/json.hpp>

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QComboBox>
#include <QDir>
#include <QLegend>
#include <QLegendMarker>
#include <QLogValueAxis>
#include <QSet>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTest>

#include <cmath>

using namespace bitlens::widgets;
using nlohmann::json;

namespace {

const char* kProjections[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                              "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                              "mlp.down_proj"};

json layerJson(const std::string& name, int i, double bytesFloat)
{
    const double local = 30.0 + 10.0 * std::sin(i * 0.37);
    return json{{"name", name},
                {"op", "linear"},
                {"weight_type", "int8"},
                {"sqnr_db", local},
                {"sqnr_db_accumulated", local - 3.0 - 0.05 * i},
                {"bytes_float", bytesFloat},
                {"bytes_quantized", bytesFloat / 4 + 1024}};
}

json withThroughput(json report)
{
    json times = json::object();
    for (const json& layer : report["layers"]) {
        const double mib = layer["bytes_float"].get<double>() / (1024.0 * 1024.0);
        times[layer["name"].get<std::string>()] = {{"float", 0.05 + 0.2 * mib},
                                                   {"quantized", 0.03 + 0.1 * mib}};
    }
    report["throughput"] = {{"device", "cpu"}, {"layers_ms", times}};
    return report;
}

/// smollm2-135m's shape: `blocks` blocks x 7 projections, then lm_head (~108 MiB in float).
json transformerReport(int blocks, bool lmHead = true)
{
    json layers = json::array();
    int i = 0;
    for (int b = 0; b < blocks; ++b)
        for (const char* proj : kProjections) {
            const bool mlp = std::string(proj).rfind("mlp", 0) == 0;
            const bool kv = std::string(proj).find("k_proj") != std::string::npos ||
                            std::string(proj).find("v_proj") != std::string::npos;
            const double bytes = mlp ? 576.0 * 1536 * 4 : kv ? 576.0 * 192 * 4 : 576.0 * 576 * 4;
            layers.push_back(
                layerJson("model.layers." + std::to_string(b) + "." + proj, i++, bytes));
        }
    if (lmHead)
        layers.push_back(layerJson("lm_head", i++, 49152.0 * 576 * 4));
    return withThroughput(json{{"scheme", {{"preset", "static-int8"}}},
                               {"layers", layers},
                               {"size_bytes", {{"float", 538e6}, {"quantized", 140e6}}}});
}

json flatReport(int count)
{
    json layers = json::array();
    for (int i = 0; i < count; ++i)
        layers.push_back(layerJson("net.features." + std::to_string(i) + ".conv", i,
                                   4096.0 * (1 + i % 5)));
    return withThroughput(json{{"scheme", {{"preset", "w8-int8"}}}, {"layers", layers}});
}

json smallReport()
{
    json layers = json::array({layerJson("block1.conv", 0, 1152),
                               layerJson("block2.conv", 1, 73728),
                               layerJson("fc1", 2, 1605632), layerJson("logits", 3, 5120)});
    return withThroughput(json{{"scheme", {{"preset", "static-int8"}}}, {"layers", layers}});
}

QStringList legendTexts(QChart* chart)
{
    QStringList texts;
    for (QLegendMarker* marker : chart->legend()->markers())
        texts << marker->label();
    return texts;
}

void saveShot(QWidget& widget, const QString& name)
{
    const QString dir = qEnvironmentVariable("BITLENS_CHART_SCREENSHOTS");
    if (dir.isEmpty())
        return;
    QDir().mkpath(dir);
    QVERIFY(widget.grab().save(dir + QLatin1Char('/') + name + QStringLiteral(".png")));
}

} // namespace

class TestLayerViews : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void parsesTransformerNames()
    {
        const auto q = parseBlockLayer("model.layers.17.self_attn.q_proj");
        QVERIFY(q);
        QCOMPARE(q->block, 17);
        QCOMPARE(q->projection, QStringLiteral("q"));
        QCOMPARE(parseBlockLayer("model.layers.3.mlp.down_proj")->projection,
                 QStringLiteral("down"));
        QCOMPARE(parseBlockLayer("bert.encoder.layer.11.attention.self.query")->block, 11);
        QCOMPARE(parseBlockLayer("transformer.h.5.attn.c_attn")->projection,
                 QStringLiteral("c_attn"));
        QCOMPARE(parseBlockLayer("encoder.layers.0.fc1")->projection, QStringLiteral("fc1"));
        QVERIFY(!parseBlockLayer("lm_head"));
        QVERIFY(!parseBlockLayer("model.embed_tokens"));
        QVERIFY(!parseBlockLayer("block1.conv"));
        QVERIFY(!parseBlockLayer("features.3.conv"));  // no block word, no projection
        QVERIFY(!parseBlockLayer("model.layers.x.self_attn.q_proj"));
    }

    void bertKeepsAmbiguousProjectionsApart()
    {
        QStringList names;
        for (int b = 0; b < 2; ++b)
            for (const char* tail : {"attention.self.query", "attention.self.key",
                                     "attention.output.dense", "intermediate.dense",
                                     "output.dense"})
                names << QStringLiteral("encoder.layer.%1.%2").arg(b).arg(QLatin1String(tail));
        const LayerGrid grid = layerGrid(names);
        QVERIFY(grid.valid());
        QCOMPARE(grid.columns, (QStringList{"query", "key", "attention.output.dense",
                                            "intermediate.dense", "output.dense"}));
        QVERIFY(grid.outside.empty());
        const QStringList labels = shortLayerLabels(names);
        QCOMPARE(labels[0], QStringLiteral("0.query"));
        QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), labels.size());
    }

    void shortLabelsAreShortAndUnique()
    {
        QStringList names;
        const json report = transformerReport(30);
        for (const json& layer : report["layers"])
            names << QString::fromStdString(layer["name"].get<std::string>());
        QCOMPARE(names.size(), 211);
        const QStringList labels = shortLayerLabels(names);
        QCOMPARE(labels.size(), 211);
        QCOMPARE(labels[17 * 7], QStringLiteral("17.q"));
        QCOMPARE(labels[17 * 7 + 6], QStringLiteral("17.down"));
        QCOMPARE(labels.back(), QStringLiteral("lm_head"));
        QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), labels.size());
        for (const QString& label : labels)
            QVERIFY2(label.size() <= 8, qPrintable(label));
        // Any model: the common prefix goes.
        const QStringList flat = shortLayerLabels({"net.features.0.conv", "net.features.1.conv",
                                                   "net.classifier"});
        QCOMPARE(flat, (QStringList{"features.0.conv", "features.1.conv", "classifier"}));
        QCOMPARE(shortLayerLabels({"fc1"}), QStringList{"fc1"});
        QCOMPARE(shortLayerLabels({"a.x", "b.x"}), (QStringList{"a.x", "b.x"}));
    }

    void outlierRule()
    {
        QVERIFY(!hasOutlier({1, 2, 3, 4}));
        QVERIFY(hasOutlier({1, 1, 1, 1, 50}));
        QCOMPARE(outlierRatio({1, 2, 3, 40}), 40.0 / 2.5);
    }

    void heatmapOf211Layers()
    {
        LayerHeatmap map;
        map.resize(1500, 800);
        map.setReport(transformerReport(30));
        QVERIFY(map.hasGrid());
        QCOMPARE(map.rowCount(), 30);
        QCOMPARE(map.columnCount(), 7);
        QCOMPARE(map.columnKeys(), (QStringList{"q", "k", "v", "o", "gate", "up", "down"}));
        QCOMPARE(map.outsideLayers(), QStringList{"lm_head"});
        for (int r = 0; r < 30; ++r)
            for (int c = 0; c < 7; ++c) {
                QCOMPARE(map.layerAt(r, c),
                         QStringLiteral("model.layers.%1.%2").arg(r).arg(kProjections[c]));
                // Every SQNR printed in its cell.
                QVERIFY2(!map.cellText(r, c).isEmpty(), qPrintable(map.layerAt(r, c)));
            }
        QCOMPARE(map.cellText(0, 0), QStringLiteral("30.0"));
        QVERIFY(map.colorBarTitle().contains("dB"));
        QVERIFY(map.title().contains("static-int8"));
        // The tooltip names the full layer and its value.
        const QString tip = map.toolTipAt(map.cellRect(17, 6).center());
        QVERIFY2(tip.contains("model.layers.17.mlp.down_proj") && tip.contains("dB"),
                 qPrintable(tip));
        QVERIFY(map.toolTipAt(map.outsideRect(0).center()).contains("lm_head"));
        QVERIFY(map.toolTipAt(QPoint(1, 1)).isEmpty());
        // Cells do not overlap the colour bar or the outside list.
        QVERIFY(map.cellRect(0, 6).right() < map.outsideRect(0).left());
        QVERIFY(map.outsideRect(0).right() <= map.width());

        map.setMetric(LayerHeatmap::Metric::BytesQuantized);
        QVERIFY(map.colorBarTitle().contains("KiB") || map.colorBarTitle().contains("MiB"));
        map.setMetric(LayerHeatmap::Metric::LatencyQuantized);
        QVERIFY(map.colorBarTitle().contains("Milliseconds"));
        QVERIFY(!map.cellText(3, 3).isEmpty());
    }

    void heatmapClickSelectsLayer()
    {
        LayerHeatmap map;
        map.resize(1500, 800);
        map.setReport(transformerReport(30));
        QSignalSpy spy(&map, &LayerHeatmap::layerClicked);
        QTest::mouseClick(&map, Qt::LeftButton, {}, map.cellRect(12, 2).center());
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.takeFirst().at(0).toString(),
                 QStringLiteral("model.layers.12.self_attn.v_proj"));
        QCOMPARE(map.selectedLayer(), QStringLiteral("model.layers.12.self_attn.v_proj"));
        QTest::mouseClick(&map, Qt::LeftButton, {}, map.outsideRect(0).center());
        QCOMPARE(spy.takeFirst().at(0).toString(), QStringLiteral("lm_head"));
        QTest::mouseClick(&map, Qt::LeftButton, {}, QPoint(2, 2));
        QCOMPARE(spy.count(), 0);
    }

    void heatmapFollowsAndDrivesTheReportView()
    {
        ReportView view;
        view.resize(1600, 1000);
        view.setReport(transformerReport(30));
        QVERIFY(view.showTab("Layer map"));
        QCOMPARE(view.layerHeatmap()->rowCount(), 30);
        QSignalSpy spy(&view, &ReportView::layerSelected);
        LayerHeatmap* map = view.layerHeatmap();
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        QTest::mouseClick(map, Qt::LeftButton, {}, map->cellRect(5, 4).center());
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.takeFirst().at(0).toString(), QStringLiteral("model.layers.5.mlp.gate_proj"));
        QCOMPARE(view.sqnrChart()->selectedLayer(), QStringLiteral("model.layers.5.mlp.gate_proj"));
        view.selectLayer("model.layers.9.self_attn.o_proj");
        QCOMPARE(map->selectedLayer(), QStringLiteral("model.layers.9.self_attn.o_proj"));
        view.heatmapMetric()->setCurrentIndex(1);
        QCOMPARE(map->metric(), LayerHeatmap::Metric::SqnrAccumulated);
        view.heatmapMetric()->setCurrentIndex(0);
        QTest::qWait(50);
        // The SQNR bars scrolled the selected layer (index 66) into their window.
        QVERIFY(view.showTab("Layers"));
        QTest::qWait(50);
        SqnrChart* bars = view.sqnrChart();
        QVERIFY2(bars->firstVisibleLayer() <= 66 &&
                     66 < bars->firstVisibleLayer() + bars->visibleLayerCount(),
                 qPrintable(QStringLiteral("%1 + %2").arg(bars->firstVisibleLayer())
                                .arg(bars->visibleLayerCount())));
        QVERIFY(view.showTab("Layer map"));
        QTest::qWait(50);
        saveShot(view, "report-view-layer-map-211");
        QVERIFY(view.showTab("Memory"));
        QTest::qWait(50);
        saveShot(view, "report-view-memory-211");
        QVERIFY(view.showTab("Layers"));
        QTest::qWait(50);
        saveShot(view, "report-view-layers-211");
    }

    void heatmapShowsExactLayersAndHoles()
    {
        json report = transformerReport(3);
        report["layers"][8]["sqnr_db"] = nullptr;  // 1.k kept in float: exact
        report["layers"].erase(report["layers"].begin() + 20);  // 2.down missing
        LayerHeatmap map;
        map.resize(1500, 800);
        map.setReport(report);
        QCOMPARE(map.rowCount(), 3);
        QCOMPARE(map.cellText(1, 1), QStringLiteral("exact"));
        QVERIFY(map.toolTipAt(map.cellRect(1, 1).center()).contains("exact (infinite"));
        QVERIFY(map.layerAt(2, 6).isEmpty());
        QVERIFY(map.toolTipAt(map.cellRect(2, 6).center()).isEmpty());
        QSignalSpy spy(&map, &LayerHeatmap::layerClicked);
        QTest::mouseClick(&map, Qt::LeftButton, {}, map.cellRect(2, 6).center());
        QCOMPARE(spy.count(), 0);  // a hole selects nothing
    }

    void heatmapWithoutGridSaysSo()
    {
        LayerHeatmap map;
        map.setReport(smallReport());
        QVERIFY(!map.hasGrid());
        QVERIFY(map.message().contains("grid"));
        map.setReport(json("junk"));
        QVERIFY(!map.hasGrid());
        map.setReport(json{{"layers", json::array({json{{"name", 3}}, 7})}});
        QVERIFY(!map.hasGrid());
    }

    void barsScrollAt1000Layers()
    {
        for (const int count : {36, 211, 1000}) {
            const json report = count == 211 ? transformerReport(30) : flatReport(count);
            SqnrChart chart;
            chart.resize(1600, 700);
            chart.setReport(report);
            QCoreApplication::processEvents();
            QCOMPARE(chart.layerCount(), count);
            QVERIFY(chart.barPixelWidth() >= 2.0 || chart.isScrollable());
            QVERIFY2(chart.barPixelWidth() >= 2.0,
                     qPrintable(QString::number(chart.barPixelWidth())));
            // Full names stay for tooltips and selection; the axis shows short labels.
            QCOMPARE(chart.layerNames().size(), count);
            Q_EMIT chart.barSeries()->barSets()[0]->hovered(true, 0);
            QVERIFY(chart.lastToolTip().contains(chart.layerNames()[0]));
            auto* axis =
                qobject_cast<QBarCategoryAxis*>(chart.chart()->axes(Qt::Horizontal).value(0));
            QVERIFY(axis);
            QCOMPARE(axis->categories(), chart.layerLabels());
            QVERIFY(!axis->truncateLabels());
        }
        SqnrChart chart;
        chart.resize(1600, 700);
        chart.setReport(flatReport(1000));
        QCoreApplication::processEvents();
        QVERIFY(chart.isScrollable());
        QVERIFY(chart.visibleLayerCount() < 1000);
        const int shown = chart.visibleLayerCount();
        chart.scrollToLayer(500);
        QCOMPARE(chart.firstVisibleLayer(), 500);
        auto* axis = qobject_cast<QBarCategoryAxis*>(chart.chart()->axes(Qt::Horizontal).value(0));
        QCOMPARE(axis->min(), chart.layerLabels()[500]);
        chart.scrollToLayer(5000);  // clamped
        QCOMPARE(chart.firstVisibleLayer(), 1000 - shown);
        chart.zoomLayers(100000);  // zoomed out as far as bars stay visible
        QVERIFY(chart.barPixelWidth() >= 2.0);
        chart.zoomLayers(10);
        QCOMPARE(chart.visibleLayerCount(), 10);
        // Selecting a layer out of the window scrolls to it.
        chart.setSelectedLayer("net.features.700.conv");
        QVERIFY(chart.firstVisibleLayer() <= 700 && 700 < chart.firstVisibleLayer() + 10);
        // Clicking a bar still names the full layer.
        QSignalSpy spy(&chart, &SqnrChart::layerClicked);
        chart.onBarClicked(999);
        QCOMPARE(spy.takeFirst().at(0).toString(), QStringLiteral("net.features.999.conv"));

        // A small report fits without scrolling.
        SqnrChart small;
        small.resize(900, 500);
        small.setReport(smallReport());
        QVERIFY(!small.isScrollable());
        QCOMPARE(small.visibleLayerCount(), 4);
    }

    void memoryGoesLogWithLmHead()
    {
        MemoryChart chart;
        chart.resize(1600, 700);
        chart.setReport(transformerReport(30));
        QVERIFY(chart.logScale());
        QVERIFY(qobject_cast<QLogValueAxis*>(chart.chart()->axes(Qt::Vertical).value(0)));
        QVERIFY2(chart.chart()->title().contains("log scale") &&
                     chart.chart()->title().contains("lm_head"),
                 qPrintable(chart.chart()->title()));
        const QStringList legend = legendTexts(chart.chart());
        QVERIFY2(legend.contains("Float32"), qPrintable(legend.join('|')));
        QVERIFY(legend.join('|').contains("Quantized"));
        QVERIFY(!legend.join('|').contains("bytes_float"));
        QVERIFY(chart.isScrollable() || chart.barPixelWidth() >= 2.0);
        saveShot(chart, "memory-211");

        // Without lm_head the blocks are alike: linear.
        MemoryChart blocks;
        blocks.setReport(transformerReport(5, false));
        QVERIFY(!blocks.logScale());
        QVERIFY(!blocks.chart()->title().contains("log scale"));

        LayerLatencyChart latency;
        latency.resize(1600, 700);
        latency.setReport(transformerReport(30));
        QVERIFY(latency.logScale());
        QVERIFY(latency.chart()->title().contains("log scale"));
        QVERIFY(!legendTexts(latency.chart()).join('|').contains("bytes_"));
        saveShot(latency, "latency-211");
    }

    void smallReportsStillReadAsBefore()
    {
        ReportView view;
        view.resize(1600, 1000);
        view.setReport(smallReport());
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        QCOMPARE(view.sqnrChart()->layerLabels(),
                 (QStringList{"block1.conv", "block2.conv", "fc1", "logits"}));
        QVERIFY(!view.sqnrChart()->isScrollable());
        // fc1 is 41x the median of these four: log scale, said in the title.
        QVERIFY(view.memoryChart()->logScale());
        QVERIFY(view.memoryChart()->chart()->title().contains("log scale: fc1 is 41x"));
        QTest::qWait(50);
        saveShot(view, "report-view-layers-4");
        QVERIFY(view.showTab("Memory"));
        QTest::qWait(50);
        saveShot(view, "report-view-memory-4");
        QVERIFY(view.showTab("Layer map"));
        QTest::qWait(50);
        saveShot(view, "report-view-layer-map-4");
        view.setReport(flatReport(1000));
        QVERIFY(view.showTab("Layers"));
        QTest::qWait(50);
        saveShot(view, "report-view-layers-1000");
    }
};

QTEST_MAIN(TestLayerViews)
#include "test_layer_views.moc"
