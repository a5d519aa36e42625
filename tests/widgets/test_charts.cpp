// The report charts, fed with reports that bitlens-cli wrote (tests/data/reports). Set
// BITLENS_CHART_SCREENSHOTS=<dir> to also save every chart at 900x500 for a look.

#include "chart_base.h"
#include "chart_export.h"
#include "chart_histogram.h"
#include "chart_latency.h"
#include "chart_memory.h"
#include "chart_pareto.h"
#include "chart_sensitivity.h"
#include "chart_throughput.h"
#include "chart_sqnr.h"
#include "report_fixtures.h"

#include <nlohmann/json.hpp>

#include <QAbstractAxis>
#include <QAreaSeries>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QLegend>
#include <QHorizontalStackedBarSeries>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>

#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QSet>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <sys/stat.h>

using namespace bitlens::widgets;

namespace {

using bitlens::testing::loadReport;

QStringList axisTitles(QChart* chart)
{
    QStringList titles;
    for (QAbstractAxis* axis : chart->axes())
        titles << axis->titleText();
    return titles;
}

bool anyContains(const QStringList& list, const QString& text)
{
    return std::any_of(list.begin(), list.end(),
                       [&](const QString& item) { return item.contains(text); });
}

/// Saves the chart where BITLENS_CHART_SCREENSHOTS points, for a person to look at.
void screenshot(ChartBase& chart, const QString& name)
{
    const QString dir = qEnvironmentVariable("BITLENS_CHART_SCREENSHOTS");
    if (dir.isEmpty())
        return;
    QDir().mkpath(dir);
    chart.resize(900, 500);
    QVERIFY(exportChart(&chart, dir + QLatin1Char('/') + name + QStringLiteral(".png")));
}

/// The malformed inputs every chart must survive: wrong types in every key it reads.
std::vector<nlohmann::json> malformedReports()
{
    using nlohmann::json;
    return {
        json(),
        json::array(),
        json("text"),
        json::object(),
        json{{"layers", 5}},
        json{{"layers", json::array({1, "x", nullptr})}},
        json{{"layers", json::array({json{{"name", 3}, {"sqnr_db", "high"}}})}},
        json{{"layers",
              json::array({json{{"name", "a"},
                                {"sqnr_db", json::array()},
                                {"bytes_float", "1"},
                                {"error_histogram", json{{"edges", "x"}, {"counts", 1}}},
                                {"weight_histogram",
                                 json{{"edges", json::array({0, 1})}, {"counts", json::array()}}},
                                {"weight_range", json::array({"a", "b"})},
                                {"act_clip", json{{"lo", "0"}, {"hi", nullptr}}}}})},
             {"throughput", json{{"float_samples_per_s", "fast"}, {"kernels", 3}}},
             {"size_bytes", json::array()},
             {"scheme", 7}},
        json{{"throughput", json{{"float_samples_per_s", 10.0},
                                 {"quantized_samples_per_s", 20.0},
                                 {"kernels", json{{"a", 1}}}}}},
    };
}

} // namespace

class TestCharts : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        m_report = loadReport("fashion-cnn-static-int8.json");
        QVERIFY(m_report.is_object());
        QCOMPARE(m_report["layers"].size(), std::size_t(4));
    }

    void sqnrChartShowsEveryLayerInGraphOrder()
    {
        SqnrChart chart;
        chart.setReport(m_report);
        QVERIFY(chart.hasData());
        QVERIFY(!chart.chart()->title().isEmpty());
        QVERIFY(chart.chart()->legend()->isVisible());
        QBarSeries* series = chart.barSeries();
        QVERIFY(series);
        QCOMPARE(series->count(), 2);
        for (QBarSet* set : series->barSets())
            QCOMPARE(set->count(), 4);
        QCOMPARE(chart.layerNames(), (QStringList{"block1.conv", "block2.conv", "fc1", "logits"}));
        auto* axisX = qobject_cast<QBarCategoryAxis*>(
            chart.chart()->axes(Qt::Horizontal).value(0));
        QVERIFY(axisX);
        QCOMPARE(axisX->categories().size(), 4);
        QVERIFY(anyContains(axisTitles(chart.chart()), "SQNR (dB)"));
        // Local vs accumulated of block2.conv from the report.
        QCOMPARE(series->barSets()[0]->at(1), 37.72708536407186);
        QCOMPARE(series->barSets()[1]->at(1), 34.61062014233835);
        screenshot(chart, "sqnr");
    }

    void sqnrBarClickEmitsLayerAndSelects()
    {
        SqnrChart chart;
        chart.setReport(m_report);
        QSignalSpy spy(&chart, &SqnrChart::layerClicked);
        Q_EMIT chart.barSeries()->barSets()[1]->clicked(2);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.takeFirst().at(0).toString(), QStringLiteral("fc1"));
        QCOMPARE(chart.selectedLayer(), QStringLiteral("fc1"));
        QVERIFY(chart.barSeries()->barSets()[0]->isBarSelected(2));
        QVERIFY(!chart.barSeries()->barSets()[0]->isBarSelected(1));
        chart.setSelectedLayer("block1.conv");
        QVERIFY(chart.barSeries()->barSets()[1]->isBarSelected(0));
        QVERIFY(!chart.barSeries()->barSets()[1]->isBarSelected(2));
        chart.onBarClicked(17); // out of range: nothing
        QCOMPARE(spy.count(), 0);
    }

    void sqnrHoverShowsExactValues()
    {
        SqnrChart chart;
        chart.setReport(m_report);
        Q_EMIT chart.barSeries()->barSets()[0]->hovered(true, 2);
        QVERIFY2(chart.lastToolTip().contains("54.06 dB"), qPrintable(chart.lastToolTip()));
        QVERIFY(chart.lastToolTip().contains("45.56 dB"));
        QVERIFY(chart.lastToolTip().contains("fc1"));
    }

    void sqnrExactLayerIsAClippedBar()
    {
        nlohmann::json report = m_report;
        report["layers"][3]["sqnr_db"] = nullptr; // logits kept float: exact
        report["layers"][3]["sqnr_db_accumulated"] = 41.0;
        SqnrChart chart;
        chart.setReport(report);
        QVERIFY(chart.hasData());
        const double clip = chart.exactBarHeightDb();
        QVERIFY(clip > 54.06); // above every finite bar
        QCOMPARE(chart.barSeries()->barSets()[0]->at(3), clip);
        QCOMPARE(chart.barSeries()->barSets()[1]->at(3), 41.0);
        Q_EMIT chart.barSeries()->barSets()[0]->hovered(true, 3);
        QVERIFY(chart.lastToolTip().contains("exact"));
        const QList<QGraphicsItem*> items = chart.chart()->childItems();
        const bool labelled = std::any_of(items.begin(), items.end(), [](QGraphicsItem* item) {
            auto* text = dynamic_cast<QGraphicsSimpleTextItem*>(item);
            return text && text->isVisible() && text->text() == QLatin1String("exact");
        });
        QVERIFY(labelled);
        screenshot(chart, "sqnr-exact");
    }

    void histogramErrorMode()
    {
        HistogramChart chart;
        chart.setReport(m_report);
        QCOMPARE(chart.layer(), QStringLiteral("block1.conv"));
        QCOMPARE(chart.mode(), HistogramChart::Mode::Error);
        QVERIFY(chart.hasData());
        QCOMPARE(chart.binCount(), 64);
        QVERIFY(chart.histogramSeries());
        QCOMPARE(chart.histogramSeries()->upperSeries()->count(), 128); // two points per bin
        QVERIFY(anyContains(axisTitles(chart.chart()), "Error (output units)"));
        QVERIFY(anyContains(axisTitles(chart.chart()), "Count"));
        QVERIFY(chart.chart()->title().contains("block1.conv"));
        Q_EMIT chart.histogramSeries()->hovered(QPointF(-0.065, 1.0), true);
        QVERIFY2(chart.lastToolTip().contains("count 2"), qPrintable(chart.lastToolTip()));
        screenshot(chart, "histogram-error");
    }

    void histogramWeightsDrawsCappedInt8Grid()
    {
        HistogramChart chart;
        chart.setReport(m_report);
        chart.setLayer("block2.conv");
        chart.setMode(HistogramChart::Mode::Weights);
        QVERIFY(chart.hasData());
        QCOMPARE(chart.gridLevelCount(), 255); // int8 symmetric: -127..127
        QCOMPARE(chart.gridStride(), 4);
        QVERIFY(chart.gridLineCount() <= HistogramChart::kMaxGridLines);
        // Every 4th value counted from 0 outwards: 0 and ±4k·scale for k = 1..31 (±124/127).
        QCOMPARE(chart.gridLineCount(), 63);
        QVERIFY(chart.gridLabel().contains("int8 grid (per-tensor view)"));
        QVERIFY(chart.gridLabel().contains("every 4th"));
        // The grid spans [-max|w|, max|w|] of weight_range [-0.381, 0.402].
        const auto lines = chart.chart()->series();
        double lo = 1e9;
        double hi = -1e9;
        for (QAbstractSeries* s : lines)
            if (auto* line = qobject_cast<QLineSeries*>(s); line && line->count() == 2) {
                lo = std::min(lo, line->at(0).x());
                hi = std::max(hi, line->at(0).x());
            }
        QVERIFY(hi <= 0.40213221311569214 + 1e-9);
        QVERIFY(lo >= -0.40213221311569214 - 1e-9);
        QVERIFY(hi > 0.39);
        screenshot(chart, "histogram-weights-int8");
    }

    void quantGridOfEachType()
    {
        QCOMPARE(quantGrid("int4", true, -1.0, 0.5).values.size(), std::size_t(15));
        QCOMPARE(quantGrid("int4", true, -1.0, 0.5).values.back(), 1.0);
        QCOMPARE(quantGrid("int4", false, -1.0, 0.5).values.size(), std::size_t(16));
        const QuantGrid nf4 = quantGrid("nf4", true, -0.5, 2.0);
        QCOMPARE(nf4.values.size(), std::size_t(16));
        QCOMPARE(nf4.values.front(), -2.0);
        QCOMPARE(nf4.values[7], 0.0);
        const QuantGrid fp4 = quantGrid("fp4_e2m1", true, -3.0, 1.0);
        QCOMPARE(fp4.values.size(), std::size_t(15)); // ±{0.5..6}/6 and 0
        QCOMPARE(fp4.values.back(), 3.0);
        QCOMPARE(fp4.values[8], 0.25); // 0.5 / 6 * 3
        QCOMPARE(quantGrid("fp8_e4m3", true, -448.0, 1.0).values.back(), 448.0);
        QCOMPARE(quantGrid("fp8_e4m3", true, -448.0, 1.0).values.size(), std::size_t(253));
        QVERIFY(quantGrid("bf16", true, -1.0, 1.0).values.empty());
        QVERIFY(quantGrid("int8", true, 0.0, 0.0).values.empty());
    }

    void histogramActivationsShowClipLines()
    {
        HistogramChart chart;
        chart.setReport(m_report);
        chart.setLayer("fc1");
        chart.setMode(HistogramChart::Mode::Activations);
        QVERIFY(chart.hasData());
        QCOMPARE(chart.clipLineCount(), 2);
        QVERIFY(chart.clipLabel().startsWith("minmax clip [0, 12.14"));
        QVERIFY(anyContains(axisTitles(chart.chart()), "Activation value"));
        screenshot(chart, "histogram-activations");
        chart.setLogScale(true);
        QVERIFY(anyContains(axisTitles(chart.chart()), "Count (log scale)"));
        screenshot(chart, "histogram-activations-log");
        chart.setMode(HistogramChart::Mode::Error);
        QCOMPARE(chart.clipLineCount(), 0);
    }

    void histogramActivationsShowEveryCalibrator()
    {
        nlohmann::json report = m_report;
        for (auto& layer : report["layers"])
            if (layer["name"] == "fc1")
                layer["calibrators"] = nlohmann::json::array(
                    {{{"method", "minmax"}, {"lo", 0.0}, {"hi", 9.46}, {"sqnr_db", 54.9}},
                     {{"method", "percentile:99.99"}, {"lo", 0.0}, {"hi", 7.4}, {"sqnr_db", 54.4}},
                     {{"method", "entropy"}, {"lo", 0.0}, {"hi", 5.84}, {"sqnr_db", 48.2}},
                     {{"method", "mse"}, {"lo", 0.0}, {"hi", 8.24}, {"sqnr_db", nullptr}}});
        HistogramChart chart;
        chart.setReport(report);
        chart.setLayer("fc1");
        chart.setMode(HistogramChart::Mode::Activations);
        QCOMPARE(chart.calibratorLineCount(), 4);
        QStringList names;
        for (auto* series : chart.chart()->series())
            names << series->name();
        QVERIFY(names.contains("entropy → 48.2 dB"));
        QVERIFY(names.contains("mse → exact"));
        screenshot(chart, "histogram-calibrators");
        chart.setMode(HistogramChart::Mode::Weights);
        QCOMPARE(chart.calibratorLineCount(), 0);
    }

    void latencyChartShowsFloatAndQuantizedPerLayer()
    {
        LayerLatencyChart empty;
        empty.setReport(m_report);  // a report without layers_ms (or from a CUDA run)
        QVERIFY(!empty.hasData());
        nlohmann::json report = m_report;
        report["throughput"]["layers_ms"] = {{"fc1", {{"float", 0.39}, {"quantized", 0.72}}},
                                             {"block1.conv", {{"float", 0.65}, {"quantized", 1.0}}}};
        LayerLatencyChart chart;
        chart.setReport(report);
        QVERIFY(chart.hasData());
        QCOMPARE(chart.layerNames(), (QStringList{"block1.conv", "fc1"}));  // graph order
        QCOMPARE(chart.barSeries()->count(), 2);
        QCOMPARE(chart.barSeries()->barSets()[1]->at(1), 0.72);
        QVERIFY(anyContains(axisTitles(chart.chart()), "Milliseconds per batch"));
        screenshot(chart, "latency");
    }

    void histogramWithoutActivationsSaysSo()
    {
        nlohmann::json report = m_report;
        report["layers"][0].erase("act_histogram");
        HistogramChart chart;
        chart.setMode(HistogramChart::Mode::Activations);
        chart.setReport(report);
        QVERIFY(!chart.hasData());
        QVERIFY(chart.message().startsWith("No data"));
        chart.setLayer("no.such.layer");
        QVERIFY(chart.message().contains("no.such.layer"));
    }

    void memoryChart()
    {
        MemoryChart chart;
        chart.setReport(m_report);
        QVERIFY(chart.hasData());
        QCOMPARE(chart.barSeries()->count(), 2);
        QCOMPARE(chart.barSeries()->barSets()[0]->count(), 4);
        QCOMPARE(chart.barSeries()->barSets()[0]->at(2), 1605632.0 / 1024.0);
        QVERIFY(anyContains(axisTitles(chart.chart()), "Bytes (KiB)"));
        QVERIFY2(chart.chart()->title().contains("model 1.61 MiB -> 413.4 KiB (0.251)"),
                 qPrintable(chart.chart()->title()));
        Q_EMIT chart.barSeries()->barSets()[1]->hovered(true, 2);
        QVERIFY(chart.lastToolTip().contains("401920 bytes"));
        screenshot(chart, "memory");
    }

    void throughputChart()
    {
        ThroughputChart chart;
        chart.setReport(m_report);
        QVERIFY(chart.hasData());
        QCOMPARE(chart.barSeries()->count(), 2);
        QCOMPARE(chart.barSeries()->barSets()[0]->at(0), 5764.267575499521);
        QCOMPARE(chart.barSeries()->barSets()[1]->at(0), 4265.884113925323);
        QVERIFY(chart.chart()->title().contains("CPU (2 threads)"));
        QVERIFY(chart.chart()->title().contains("batch 64"));
        QVERIFY(anyContains(axisTitles(chart.chart()), "Samples per second"));
        QCOMPARE(chart.realKernelCount(), 2);
        QCOMPARE(chart.kernelLayerCount(), 4);
        QVERIFY(anyContains(chart.kernelLines(),
                            "at::_int_mm (int8 x int8 -> int32):  fc1, logits"));
        QVERIFY(anyContains(chart.kernelLines(),
                            "simulated (fake-quant, float32):  block1.conv, block2.conv"));
        screenshot(chart, "throughput");
    }

    void paretoChartBySize()
    {
        const nlohmann::json compare = loadReport("fashion-cnn-compare.json");
        ParetoChart chart;
        chart.setComparison(compare);
        QVERIFY(chart.hasData());
        QCOMPARE(chart.runSeries()->count(), 5);
        QVERIFY(chart.floatSeries());
        QCOMPARE(chart.floatSeries()->count(), 1);
        QCOMPARE(chart.floatSeries()->at(0).y(), 0.924);
        QCOMPARE(chart.runLabels(),
                 (QStringList{"static-int8", "w4-int4", "w4-nf4", "fp8-e4m3", "bf16"}));
        QCOMPARE(chart.runSeries()->at(2).x(), 219568.0 / (1024.0 * 1024.0));
        // Front by size: w4-nf4 (0.209 MiB, 0.9195), static-int8 (0.404 MiB, 0.9235), bf16
        // (0.806 MiB, 0.9245); w4-int4, fp8-e4m3 and float (1.61 MiB, 0.924) are dominated.
        QLineSeries* front = chart.frontSeries();
        QVERIFY(front);
        QCOMPARE(front->count(), 3);
        QCOMPARE(front->at(0).y(), 0.9195);
        QCOMPARE(front->at(1).y(), 0.9235);
        QCOMPARE(front->at(2).y(), 0.9245);
        QVERIFY(anyContains(axisTitles(chart.chart()), "Model size (MiB)"));
        QVERIFY(anyContains(axisTitles(chart.chart()), "Top-1 accuracy"));
        QVERIFY(chart.chart()->legend()->isVisible());
        QSignalSpy spy(&chart, &ParetoChart::runClicked);
        Q_EMIT chart.runSeries()->clicked(chart.runSeries()->at(3));
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.takeFirst().at(0).toInt(), 3);
        screenshot(chart, "pareto-size");

        chart.setCostAxis(ParetoChart::Axis::Latency);
        QVERIFY(anyContains(axisTitles(chart.chart()), "Latency (ms per sample)"));
        QCOMPARE(chart.runSeries()->at(0).x(), 1000.0 / 5332.654753016012);
        QVERIFY(chart.floatSeries());
        screenshot(chart, "pareto-latency");
    }

    void crowdedParetoLabelsNeverOverlap()
    {
        // Twelve runs packed near one another (as compare-all gives on a small model): labels
        // of the front are always drawn, the others only where they fit, and none overlap.
        const nlohmann::json base = loadReport("fashion-cnn-compare.json");
        nlohmann::json crowded = {{"runs", nlohmann::json::array()}};
        for (int i = 0; i < 12; ++i) {
            nlohmann::json run = base["runs"][i % base["runs"].size()];
            run["scheme"]["spec"] = "scheme-" + std::to_string(i);
            run["scheme"]["preset"] = "scheme-" + std::to_string(i);
            run["metric"]["quantized"] = 0.915 + 0.0007 * (i % 7);
            run["size_bytes"]["quantized"] = 200000 + 9000 * i;
            crowded["runs"].push_back(run);
        }
        ParetoChart chart;
        chart.resize(640, 360);
        chart.setComparison(crowded);
        QVERIFY(chart.hasData());
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        QCoreApplication::processEvents();
        const std::vector<QRectF> rects = chart.visibleLabelRects();
        QVERIFY(rects.size() >= static_cast<std::size_t>(chart.frontSeries()->count()));
        QCOMPARE(static_cast<int>(rects.size()) + chart.hiddenLabelCount(), 13);  // + float32
        for (std::size_t i = 0; i < rects.size(); ++i)
            for (std::size_t j = 0; j < i; ++j)
                QVERIFY2(!rects[i].intersects(rects[j]),
                         qPrintable(QStringLiteral("labels %1 and %2 overlap").arg(i).arg(j)));
        screenshot(chart, "pareto-crowded");
    }

    void sensitivityChartRanksLayers()
    {
        SensitivityChart chart;
        chart.setSensitivity(loadReport("fashion-cnn-sensitivity-w4-int4.json"));
        QVERIFY(chart.hasData());
        QCOMPARE(chart.rankedLayers(),
                 (QStringList{"block1.conv", "fc1", "logits", "block2.conv"}));
        QCOMPARE(chart.changes().front(), -100.0 * 0.009500000000000064);
        QVERIFY(chart.chart()->title().contains("w4-int4"));
        QVERIFY(chart.chart()->title().contains("0.9240"));
        QVERIFY(anyContains(axisTitles(chart.chart()),
                            "Change in top-1 accuracy (points; below 0 is worse)"));
        QCOMPARE(chart.barSeries()->count(), 2);
        QCOMPARE(chart.barSeries()->barSets()[0]->count(), 4);
        // The top row (last category) is block1.conv, a drop: it is in the "worse" set.
        QCOMPARE(chart.barSeries()->barSets()[0]->at(3), -0.9500000000000064);
        QSignalSpy spy(&chart, &SensitivityChart::layerClicked);
        Q_EMIT chart.barSeries()->barSets()[0]->clicked(3);
        QCOMPARE(spy.takeFirst().at(0).toString(), QStringLiteral("block1.conv"));
        screenshot(chart, "sensitivity");
    }

    void sensitivityChartPlotsPerplexityChangeInPercent()
    {
        // kjv-llama's sweep as the CLI wrote it: perplexity, lower is better. A bar is the
        // change in % of the float perplexity, positive (to the right) when worse, not
        // -100 x the change in perplexity as if it were a share of samples.
        const nlohmann::json sweep = loadReport("kjv-llama-sensitivity-w4-int4.json");
        QVERIFY(sweep.is_object());
        const double floatPpl = sweep["metric"]["float"].get<double>();
        SensitivityChart chart;
        chart.setSensitivity(sweep);
        QVERIFY(chart.hasData());
        QVERIFY(chart.metric().lowerIsBetter);
        const auto& layers = sweep["layers"];
        const auto n = static_cast<int>(layers.size());
        QCOMPARE(static_cast<int>(chart.changes().size()), n);
        QStringList ranked = chart.rankedLayers();
        int worseCount = 0;
        for (const auto& layer : layers) {
            const int rank = ranked.indexOf(QString::fromStdString(layer["layer"]));
            QVERIFY(rank >= 0);
            const double expected = 100.0 * (layer["metric"].get<double>() / floatPpl - 1.0);
            QVERIFY2(std::abs(chart.changes()[static_cast<std::size_t>(rank)] - expected) < 1e-9,
                     qPrintable(QString::number(expected)));
            // The bar of that row (category n-1-rank) holds the same value, in the set that
            // matches the direction: a higher perplexity is worse.
            const int row = n - 1 - rank;
            const double worse = chart.barSeries()->barSets()[0]->at(row);
            const double better = chart.barSeries()->barSets()[1]->at(row);
            QCOMPARE(worse + better, expected);
            QCOMPARE(worse != 0.0, expected > 0.0);
            worseCount += expected > 0.0;
        }
        QVERIFY(worseCount > 0);
        // The worst layer is on top with the largest positive change: +0.073 % of 83.51.
        QCOMPARE(ranked.front(), QStringLiteral("layer.0.mlp.up_proj"));
        QVERIFY(chart.changes().front() > 0.07 && chart.changes().front() < 0.08);
        QVERIFY(anyContains(axisTitles(chart.chart()),
                            "Change in perplexity (% of float 83.51; above 0 is worse)"));
        QVERIFY(!anyContains(axisTitles(chart.chart()), "points"));
        const auto* axis = qobject_cast<QValueAxis*>(chart.chart()->axes(Qt::Horizontal).front());
        QVERIFY(axis && axis->max() >= chart.changes().front() && axis->max() < 0.2);
        screenshot(chart, "sensitivity-perplexity");
    }

    void sensitivityLabelsAreShortAndWhole_data()
    {
        QTest::addColumn<int>("blocks");
        QTest::addColumn<int>("width");
        QTest::addColumn<int>("height");
        // kjv-llama (4 blocks, 28 layers) and a smollm2-135m-shaped sweep (30 blocks, 210
        // layers) at the chart's size in the Sensitivity tab of the default 1280x800 window
        // (830x465, measured with `bitlens --size 1280x800 --screenshot`) and of 1600x1000.
        QTest::newRow("kjv-llama 1280x800") << 4 << 830 << 465;
        QTest::newRow("smollm2 1280x800") << 30 << 830 << 465;
        QTest::newRow("smollm2 1600x1000") << 30 << 1150 << 665;
    }

    void sensitivityLabelsAreShortAndWhole()
    {
        QFETCH(int, blocks);
        QFETCH(int, width);
        QFETCH(int, height);
        nlohmann::json sweep = loadReport("kjv-llama-sensitivity-w4-int4.json");
        QVERIFY(sweep.is_object());
        if (blocks != 4) {
            // The same keys, smollm2's names: model.layers.N.self_attn.q_proj ... mlp.down_proj.
            sweep["layers"] = nlohmann::json::array();
            const char* parts[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                   "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                   "mlp.down_proj"};
            int k = 0;
            for (int b = 0; b < blocks; ++b)
                for (const char* part : parts) {
                    const double drop = 0.001 * ((k * 37) % 101 - 30);
                    sweep["layers"].push_back(
                        {{"layer", "model.layers." + std::to_string(b) + "." + part},
                         {"metric", 16.87 + drop}, {"drop", drop}, {"sqnr_db", 20.0}});
                    ++k;
                }
            sweep["metric"] = {{"name", "perplexity"}, {"float", 16.87}};
        }
        SensitivityChart chart;
        chart.resize(width, height);
        chart.setSensitivity(sweep);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        QTest::qWait(50);
        const QStringList names = chart.rankedLayers();
        const QStringList labels = chart.rowLabels();
        QCOMPARE(labels.size(), names.size());
        QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), labels.size());
        for (qsizetype i = 0; i < labels.size(); ++i) {
            QVERIFY2(!labels[i].contains(QChar(0x2026)), qPrintable(labels[i]));
            QVERIFY2(labels[i].size() <= 8, qPrintable(labels[i]));
            QCOMPARE(chart.layerForLabel(labels[i]), names[i]);
        }
        // block.projection: layer.0.mlp.up_proj is "0.up".
        if (blocks == 4)
            QCOMPARE(chart.layerForLabel(QStringLiteral("0.up")),
                     QStringLiteral("layer.0.mlp.up_proj"));
        else
            QCOMPARE(chart.layerForLabel(QStringLiteral("29.down")),
                     QStringLiteral("model.layers.29.mlp.down_proj"));

        // As drawn: every shown row has its label, whole, left of the plot and inside the
        // view, and no two labels overlap.
        const QRectF plot = chart.chart()->plotArea();
        const QSet<QString> labelSet(labels.begin(), labels.end());
        std::vector<QRectF> drawn;
        for (QGraphicsItem* item : chart.scene()->items()) {
            auto* text = dynamic_cast<QGraphicsTextItem*>(item);
            if (!text || !text->isVisible())
                continue;
            const QString shown = text->toPlainText();
            QVERIFY2(!shown.contains(QChar(0x2026)), qPrintable(shown));
            if (!labelSet.contains(shown))
                continue;
            const QRectF rect = text->sceneBoundingRect();
            QVERIFY2(rect.left() >= 0 && rect.right() <= plot.left() + 1,
                     qPrintable(QStringLiteral("%1 at %2..%3, plot from %4")
                                    .arg(shown)
                                    .arg(rect.left())
                                    .arg(rect.right())
                                    .arg(plot.left())));
            drawn.push_back(rect.adjusted(0, 3, 0, -3));  // Qt's text items carry a margin
        }
        QCOMPARE(static_cast<int>(drawn.size()), chart.visibleRowCount());
        for (std::size_t i = 0; i < drawn.size(); ++i)
            for (std::size_t j = i + 1; j < drawn.size(); ++j)
                QVERIFY(!drawn[i].intersects(drawn[j]));
        // Rows that do not fit: the most sensitive on top, the wheel scrolls, the axis says so.
        const int n = static_cast<int>(names.size());
        QVERIFY(chart.visibleRowCount() >= std::min(n, 20));
        QCOMPARE(chart.firstVisibleRow(), 0);
        if (chart.visibleRowCount() < n) {
            QVERIFY(anyContains(axisTitles(chart.chart()), QStringLiteral("ranks 1 to %1 of %2")
                                                               .arg(chart.visibleRowCount())
                                                               .arg(n)));
            chart.scrollToRow(500);
            QCOMPARE(chart.firstVisibleRow(), n - chart.visibleRowCount());
            chart.scrollToRow(0);
        }
        // The full name on hover over a label: the top row's.
        const QPointF topLabel(plot.left() - 12, plot.top() + 0.5 * plot.height() /
                                                                chart.visibleRowCount());
        const QPoint at = chart.mapFromScene(topLabel);
        QCOMPARE(chart.rowAt(at), 0);
        QTest::mouseMove(chart.viewport(), QPoint(2, 2));  // a move, wherever the last one was
        QTest::mouseMove(chart.viewport(), at);
        QTRY_VERIFY2(chart.lastToolTip().contains(names.front()), qPrintable(chart.lastToolTip()));
        if (blocks == 30)
            screenshot(chart, "sensitivity-smollm2-shape");
    }

    void sensitivityChartRanksLayersByKld()
    {
        // A language model's sweep ranked by KL divergence (the keys sensitivityToJson writes).
        const nlohmann::json sweep = nlohmann::json::parse(R"({
            "scheme": {"spec": "w4-nf4", "preset": "w4-nf4"},
            "metric": {"name": "perplexity", "float": 16.87},
            "rank": "kld",
            "layers": [
                {"layer": "layer.0.mlp.down_proj", "metric": 17.41, "drop": 0.54, "sqnr_db": 19.2, "kld": 0.0312},
                {"layer": "layer.3.attn.v_proj", "metric": 16.99, "drop": 0.12, "sqnr_db": 20.1, "kld": 0.0041},
                {"layer": "layer.5.attn.q_proj", "metric": 16.86, "drop": -0.01, "sqnr_db": 20.7, "kld": 0.0007}
            ]})");
        SensitivityChart chart;
        chart.setSensitivity(sweep);
        QVERIFY(chart.hasData());
        QVERIFY(chart.rankedByKld());
        QCOMPARE(chart.rankedLayers(), (QStringList{"layer.0.mlp.down_proj", "layer.3.attn.v_proj",
                                                    "layer.5.attn.q_proj"}));
        // The bars are the KLDs themselves, not metric points, in one set (never "better").
        QCOMPARE(chart.changes().front(), 0.0312);
        QCOMPARE(chart.barSeries()->count(), 1);
        QCOMPARE(chart.barSeries()->barSets()[0]->at(2), 0.0312);
        QVERIFY(anyContains(axisTitles(chart.chart()), "KL divergence"));
        QVERIFY(anyContains(axisTitles(chart.chart()), "(nats)"));
        QVERIFY(chart.chart()->title().contains("KL divergence"));
        QVERIFY(chart.chart()->title().contains("w4-nf4"));
        const auto* axis = qobject_cast<QValueAxis*>(chart.chart()->axes(Qt::Horizontal).front());
        QVERIFY(axis && axis->max() >= 0.0312 && axis->max() < 0.05 && axis->min() <= 0.0);
        screenshot(chart, "sensitivity-kld");
    }

    void exportPngAndSvg()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        SqnrChart sqnr;
        sqnr.setReport(m_report);
        HistogramChart histogram;
        histogram.setReport(m_report);
        MemoryChart memory;
        memory.setReport(m_report);
        ThroughputChart throughput;
        throughput.setReport(m_report);
        ParetoChart pareto;
        pareto.setComparison(loadReport("fashion-cnn-compare.json"));
        SensitivityChart sensitivity;
        sensitivity.setSensitivity(loadReport("fashion-cnn-sensitivity-w4-int4.json"));
        int n = 0;
        for (ChartBase* chart : std::initializer_list<ChartBase*>{
                 &sqnr, &histogram, &memory, &throughput, &pareto, &sensitivity}) {
            QVERIFY(chart->hasData());
            chart->resize(640, 360);
            const QString png = dir.filePath(QStringLiteral("c%1.png").arg(n));
            const QString svg = dir.filePath(QStringLiteral("c%1.SVG").arg(n));
            QVERIFY(chart->exportTo(png));
            QVERIFY(exportChart(chart, svg));
            QVERIFY(QFileInfo(png).size() > 0);
            QVERIFY(QFileInfo(svg).size() > 0);
            const QImage image(png);
            QVERIFY(!image.isNull());
            QCOMPARE(image.size() / image.devicePixelRatio(), QSize(640, 360));
            QFile file(svg);
            QVERIFY(file.open(QIODevice::ReadOnly));
            QVERIFY(file.readAll().contains("<svg"));
            ++n;
        }
        QVERIFY(!exportChart(&sqnr, dir.filePath("chart.jpg")));
        QVERIFY(!QFileInfo::exists(dir.filePath("chart.jpg")));
        QVERIFY(!exportChart(nullptr, dir.filePath("x.png")));
        QVERIFY(!exportChart(&sqnr, QStringLiteral("/nonexistent-dir/chart.png")));
        // Issue #49: a FIFO is refused and stays a FIFO (a rename would replace it); a
        // symbolic link is written at its destination and stays a link.
        const QString fifo = dir.filePath(QStringLiteral("pipe.svg"));
        QCOMPARE(::mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
        QVERIFY(!exportChart(&sqnr, fifo));
        QVERIFY(!exportChart(&sqnr, dir.filePath(QStringLiteral("c0.png/x.png"))));
        QVERIFY(QFileInfo(fifo).exists() && !QFileInfo(fifo).isFile());
        const QString real = dir.filePath(QStringLiteral("real.svg"));
        const QString link = dir.filePath(QStringLiteral("link.svg"));
        {
            QFile old(real);
            QVERIFY(old.open(QIODevice::WriteOnly));
            old.write("old");
        }
        QVERIFY(QFile::link(real, link));
        QVERIFY(exportChart(&sqnr, link));
        QVERIFY(QFileInfo(link).isSymLink());
        QFile written(real);
        QVERIFY(written.open(QIODevice::ReadOnly));
        QVERIFY(written.readAll().contains("<svg"));
    }

    void emptyAndMalformedReportsShowNoData()
    {
        int i = 0;
        for (const nlohmann::json& bad : malformedReports()) {
            SqnrChart sqnr;
            ParetoChart pareto;
            SensitivityChart sensitivity;
            pareto.setComparison(bad);
            pareto.setComparison(nlohmann::json{{"runs", nlohmann::json::array({bad})}});
            sensitivity.setSensitivity(bad);
            QVERIFY(!pareto.hasData() && pareto.message().startsWith("No data"));
            QVERIFY(!sensitivity.hasData() && sensitivity.message().startsWith("No data"));
            HistogramChart histogram;
            MemoryChart memory;
            ThroughputChart throughput;
            sqnr.setReport(bad);
            memory.setReport(bad);
            for (auto mode : {HistogramChart::Mode::Error, HistogramChart::Mode::Weights,
                              HistogramChart::Mode::Activations}) {
                histogram.setMode(mode);
                histogram.setReport(bad);
                QVERIFY(histogram.message().startsWith("No data"));
            }
            throughput.setReport(bad);
            QVERIFY2(!sqnr.hasData() && sqnr.message().startsWith("No data"),
                     qPrintable(QString::number(i)));
            QVERIFY(!memory.hasData() && memory.message().startsWith("No data"));
            if (i != 8) // the last one has a usable throughput with a bad kernel entry
                QVERIFY(!throughput.hasData() && throughput.message().startsWith("No data"));
            else
                QVERIFY(anyContains(throughput.kernelLines(), "unknown"));
            ++i;
        }
        SqnrChart chart;
        chart.setReport(m_report);
        chart.setReport(nlohmann::json::object()); // data, then nothing: back to "No data"
        QCOMPARE(chart.chart()->series().size(), 0);
        QVERIFY(chart.message().startsWith("No data"));
        screenshot(chart, "no-data");
    }

private:
    nlohmann::json m_report;
};

QTEST_MAIN(TestCharts)
#include "test_charts.moc"
