// The Compare tab on a language model (issue #47 items 1 and 2): the table's headers name
// perplexity and the KL divergence figures (before any row too, not "Top-1" / "Δ pts"), the
// Pareto chart weighs size against mean KLD by default and its front, for every figure, holds
// exactly the runs no other beats on both size and the figure in the figure's direction
// (lower perplexity and KLD are better). The input is bitlens-cli's compare of kjv-llama over
// every 4-bit preset (tests/data/reports/kjv-llama-compare-4bit.json).

#include "chart_pareto.h"
#include "comparison_table_model.h"
#include "report_view.h"
#include "report_fixtures.h"

#include <nlohmann/json.hpp>

#include <QAbstractItemModelTester>
#include <QAbstractAxis>
#include <QBrush>
#include <QChart>
#include <QComboBox>
#include <QLineSeries>
#include <QScatterSeries>
#include <QTableView>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>

using namespace bitlens::widgets;
using Model = ComparisonTableModel;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

using bitlens::testing::loadReport;

/// The value of `figure` in a run as report.json holds it, read here by hand (not through the
/// code under test).
double figureOf(const nlohmann::json& run, const std::string& figure)
{
    if (figure == "kld_mean")
        return run["kl_divergence"]["kld"]["mean"].get<double>();
    if (figure == "kld_p99")
        return run["kl_divergence"]["kld"]["p99"].get<double>();
    if (figure == "same_top")
        return run["kl_divergence"]["same_top"]["fraction"].get<double>();
    return run["metric"]["quantized"].get<double>();
}

struct Point {
    double sizeMiB;
    double value;
};

/// The runs (and float32) as (MiB, figure), and the points of them no other point beats on
/// both size and the figure, by brute force, cheapest first.
std::vector<Point> expectedFront(const nlohmann::json& compare, const std::string& figure,
                                 bool lowerIsBetter)
{
    std::vector<Point> all;
    for (const nlohmann::json& run : compare["runs"])
        all.push_back({run["size_bytes"]["quantized"].get<double>() / kMiB, figureOf(run, figure)});
    const nlohmann::json& first = compare["runs"][0];
    const double floatValue = figure == "kld_mean" || figure == "kld_p99" ? 0.0
                              : figure == "same_top" ? 1.0
                                                     : first["metric"]["float"].get<double>();
    all.push_back({first["size_bytes"]["float"].get<double>() / kMiB, floatValue});
    const auto better = [&](double a, double b) { return lowerIsBetter ? a < b : a > b; };
    std::vector<Point> front;
    for (std::size_t i = 0; i < all.size(); ++i) {
        bool beaten = false;
        for (std::size_t j = 0; j < all.size() && !beaten; ++j) {
            const bool asGood = !better(all[i].value, all[j].value);
            beaten = j != i && all[j].sizeMiB <= all[i].sizeMiB && asGood &&
                     (all[j].sizeMiB < all[i].sizeMiB || better(all[j].value, all[i].value));
            // Of points equal in both, the first stays.
            beaten = beaten || (j < i && all[j].sizeMiB == all[i].sizeMiB &&
                                all[j].value == all[i].value);
        }
        if (!beaten)
            front.push_back(all[i]);
    }
    std::sort(front.begin(), front.end(),
              [](const Point& a, const Point& b) { return a.sizeMiB < b.sizeMiB; });
    return front;
}

QStringList axisTitles(QChart* chart)
{
    QStringList titles;
    for (QAbstractAxis* axis : chart->axes())
        titles << axis->titleText();
    return titles;
}

QStringList shownHeaders(const QTableView* table)
{
    QStringList headers;
    const QAbstractItemModel* model = table->model();
    for (int c = 0; c < model->columnCount(); ++c)
        headers << model->headerData(c, Qt::Horizontal, Qt::DisplayRole).toString();
    return headers;
}

} // namespace

class TestLmCompare : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        m_compare = loadReport("kjv-llama-compare-4bit.json");
        QVERIFY2(m_compare.contains("runs") && m_compare["runs"].size() >= 10,
                 "tests/data/reports/kjv-llama-compare-4bit.json");
    }

    void headersBeforeRowsNameTheModelsMetric()
    {
        // A language model is open and its comparison has not delivered a row yet.
        ReportView view;
        view.setModelMetric(QStringLiteral("perplexity"));
        view.beginComparison(11);
        const QStringList headers = shownHeaders(view.comparisonTable());
        QCOMPARE(headers.mid(0, 6), (QStringList{"Scheme", "Perplexity", "Δ %", "KLD", "KLD p99",
                                                 "Same top"}));
        QVERIFY(!headers.contains(QStringLiteral("Top-1")));
        QVERIFY(!headers.contains(QStringLiteral("Δ pts")));
        QVERIFY2(view.paretoChart()->chart()->title().startsWith(
                     QStringLiteral("KLD vs model size (lower is better)")),
                 qPrintable(view.paretoChart()->chart()->title()));
        // A classifier: its metric, and no KL divergence columns.
        view.setModelMetric(QStringLiteral("top1"));
        QCOMPARE(shownHeaders(view.comparisonTable()),
                 (QStringList{"Scheme", "Top-1", "Δ pts", "Size (ratio)", "Min dB", "Samples/s",
                              "Kernels"}));
    }

    void tableShowsKlDivergenceColumns()
    {
        Model model;
        QAbstractItemModelTester tester(&model,
                                        QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setComparison(m_compare);
        QCOMPARE(model.rowCount(), int(m_compare["runs"].size()));
        QVERIFY(model.hasDivergence());
        const auto header = [&](int column) {
            return model.headerData(column, Qt::Horizontal).toString();
        };
        QCOMPARE(header(Model::Metric), QStringLiteral("Perplexity"));
        QCOMPARE(header(Model::Change), QStringLiteral("Change (%)"));
        QCOMPARE(header(Model::MeanKld), QStringLiteral("Mean KL divergence (nats)"));
        QCOMPARE(header(Model::KldP99), QStringLiteral("KL divergence, 99th percentile (nats)"));
        QCOMPARE(header(Model::SameTop), QStringLiteral("Same top token"));
        QVERIFY(model.headerData(Model::MeanKld, Qt::Horizontal, Qt::ToolTipRole)
                    .toString()
                    .endsWith(QStringLiteral("lower is better")));
        const nlohmann::json& run = m_compare["runs"][0];
        QCOMPARE(model.index(0, Model::MeanKld).data(Model::SortRole).toDouble(),
                 figureOf(run, "kld_mean"));
        QCOMPARE(model.index(0, Model::KldP99).data(Model::SortRole).toDouble(),
                 figureOf(run, "kld_p99"));
        QCOMPARE(model.index(0, Model::SameTop).data(Model::SortRole).toDouble(),
                 figureOf(run, "same_top"));
        QCOMPARE(model.index(0, Model::MeanKld).data().toString(),
                 QString::number(figureOf(run, "kld_mean"), 'f', 5));
        // The change is a percent of perplexity; higher perplexity is worse, shown so.
        const double f = run["metric"]["float"].get<double>();
        const double q = run["metric"]["quantized"].get<double>();
        QCOMPARE(model.index(0, Model::Change).data(Model::SortRole).toDouble(),
                 100.0 * (q / f - 1.0));
        if (q > f)
            QVERIFY(model.index(0, Model::Change)
                        .data(Qt::ToolTipRole)
                        .toString()
                        .startsWith(QStringLiteral("Worse than float32")));
        // A first click on a header sorts best first: perplexity and KLD ascending, same-top
        // descending.
        const auto initialOrder = [&](int column) {
            return model.headerData(column, Qt::Horizontal, Qt::InitialSortOrderRole).toInt();
        };
        QCOMPARE(initialOrder(Model::Metric), int(Qt::AscendingOrder));
        QCOMPARE(initialOrder(Model::Change), int(Qt::AscendingOrder));
        QCOMPARE(initialOrder(Model::MeanKld), int(Qt::AscendingOrder));
        QCOMPARE(initialOrder(Model::SameTop), int(Qt::DescendingOrder));
        QCOMPARE(initialOrder(Model::Size), int(Qt::AscendingOrder));
    }

    void paretoWeighsKldByDefault()
    {
        ParetoChart chart;
        chart.setComparison(m_compare);
        QVERIFY(chart.hasData());
        QCOMPARE(chart.figure(), QStringLiteral("kld_mean"));
        QCOMPARE(chart.figures(),
                 (QStringList{"perplexity", "kld_mean", "kld_p99", "same_top"}));
        QVERIFY(axisTitles(chart.chart()).contains(QStringLiteral("Mean KL divergence (nats)")));
        QCOMPARE(chart.runSeries()->count(), int(m_compare["runs"].size()));
        // float32 is 0 nats from itself, at the float model's size.
        QVERIFY(chart.floatSeries());
        QCOMPARE(chart.floatSeries()->at(0).y(), 0.0);
        checkFront(chart, "kld_mean", true);
    }

    void paretoFrontFollowsEachFiguresDirection()
    {
        ParetoChart chart;
        chart.setComparison(m_compare);
        for (const auto& [figure, lower] :
             std::vector<std::pair<std::string, bool>>{{"perplexity", true},
                                                       {"kld_p99", true},
                                                       {"same_top", false},
                                                       {"kld_mean", true}}) {
            chart.setFigure(QString::fromStdString(figure));
            QCOMPARE(chart.figure(), QString::fromStdString(figure));
            checkFront(chart, figure, lower);
        }
        QVERIFY(chart.chart()->title().endsWith(QStringLiteral("(lower is better)")));

        // The case on the real runs: the scheme with the highest perplexity is on the
        // perplexity front only when higher is taken as better; the cheapest run always is.
        chart.setFigure(QStringLiteral("perplexity"));
        const nlohmann::json& runs = m_compare["runs"];
        const auto worst = std::max_element(runs.begin(), runs.end(), [](const auto& a,
                                                                          const auto& b) {
            return figureOf(a, "perplexity") < figureOf(b, "perplexity");
        });
        const auto cheapest = std::min_element(runs.begin(), runs.end(), [](const auto& a,
                                                                             const auto& b) {
            return a["size_bytes"]["quantized"].template get<double>() <
                   b["size_bytes"]["quantized"].template get<double>();
        });
        QVERIFY(worst != cheapest);
        const QPointF worstPoint((*worst)["size_bytes"]["quantized"].get<double>() / kMiB,
                                 figureOf(*worst, "perplexity"));
        const QPointF cheapestPoint((*cheapest)["size_bytes"]["quantized"].get<double>() / kMiB,
                                    figureOf(*cheapest, "perplexity"));
        const QList<QPointF> front = chart.frontSeries()->points();
        QVERIFY2(!front.contains(worstPoint),
                 (*worst)["scheme"]["preset"].get<std::string>().c_str());
        QVERIFY(front.contains(cheapestPoint));
    }

    void perplexityFrontAvoidsTheWorstSchemes()
    {
        // The case: the two largest perplexities sit on the front only when higher
        // perplexity is taken as better. Three runs: a (1 MiB, 90), b (2 MiB, 95), c (3 MiB,
        // 80): lower is better, so the front is a then c; b is beaten by a on both.
        nlohmann::json compare = {{"runs", nlohmann::json::array()}};
        const std::vector<std::pair<double, double>> runs = {{1, 90}, {2, 95}, {3, 80}};
        for (std::size_t i = 0; i < runs.size(); ++i)
            compare["runs"].push_back(
                {{"scheme", {{"preset", "s" + std::to_string(i)}}},
                 {"metric",
                  {{"name", "perplexity"}, {"float", 79.0}, {"quantized", runs[i].second}}},
                 {"size_bytes", {{"float", 8 * kMiB}, {"quantized", runs[i].first * kMiB}}}});
        ParetoChart chart;
        chart.setComparison(compare);
        QCOMPARE(chart.figure(), QStringLiteral("perplexity"));  // no KLD in these runs
        QLineSeries* front = chart.frontSeries();
        QVERIFY(front);
        QCOMPARE(front->count(), 3);  // a, c, float32 (8 MiB, 79)
        QCOMPARE(front->at(0), QPointF(1, 90));
        QCOMPARE(front->at(1), QPointF(3, 80));
        QCOMPARE(front->at(2), QPointF(8, 79));
    }

    void compareTabOffersTheFigures()
    {
        ReportView view;
        view.setModelMetric(QStringLiteral("perplexity"));
        view.setComparison(m_compare);
        QComboBox* figure = view.paretoFigure();
        QCOMPARE(figure->count(), 4);
        QVERIFY(!figure->parentWidget()->isHidden());
        QCOMPARE(figure->currentData().toString(), QStringLiteral("kld_mean"));
        QCOMPARE(figure->currentText(), QStringLiteral("Mean KL divergence"));
        figure->setCurrentIndex(figure->findData(QStringLiteral("perplexity")));
        Q_EMIT figure->activated(figure->currentIndex());
        QCOMPARE(view.paretoChart()->figure(), QStringLiteral("perplexity"));
        QVERIFY(axisTitles(view.paretoChart()->chart()).contains(QStringLiteral("Perplexity")));
        // A classifier's comparison has one figure: no choice shown.
        nlohmann::json classifier = m_compare;
        for (nlohmann::json& run : classifier["runs"]) {
            run.erase("kl_divergence");
            run["metric"]["name"] = "top1";
        }
        view.setComparison(classifier);
        QCOMPARE(figure->count(), 1);
        QVERIFY(figure->parentWidget()->isHidden());
        QCOMPARE(view.paretoChart()->chart()->title(), QStringLiteral("Top-1 accuracy vs model size"));
    }

private:
    void checkFront(ParetoChart& chart, const std::string& figure, bool lowerIsBetter)
    {
        const std::vector<Point> expected = expectedFront(m_compare, figure, lowerIsBetter);
        QLineSeries* front = chart.frontSeries();
        QVERIFY(front);
        QCOMPARE(front->count(), int(expected.size()));
        for (int i = 0; i < front->count(); ++i) {
            QCOMPARE(front->at(i).x(), expected[static_cast<std::size_t>(i)].sizeMiB);
            QCOMPARE(front->at(i).y(), expected[static_cast<std::size_t>(i)].value);
        }
    }

    nlohmann::json m_compare;
};

QTEST_MAIN(TestLmCompare)
#include "test_lm_compare.moc"
