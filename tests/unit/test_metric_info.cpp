// analysis::metricInfo (which way each figure is better, its unit), analysis::paretoFront and
// exporting::reportFigure: the front holds exactly the points no other beats on both cost and
// figure, in the figure's direction; on kjv-llama's compare of every 4-bit preset, by KLD.

#include "analysis/metric_info.h"
#include "export/report_figures.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

using bitlens::analysis::ChangeUnit;
using bitlens::analysis::metricChange;
using bitlens::analysis::metricInfo;
using bitlens::analysis::ParetoPoint;
using bitlens::analysis::paretoFront;

namespace {

/// True when `b` beats `a` on both: no more costly, at least as good, and better in one.
bool dominates(const ParetoPoint& b, const ParetoPoint& a, bool lowerIsBetter)
{
    const bool asGood = lowerIsBetter ? b.value <= a.value : b.value >= a.value;
    const bool better = lowerIsBetter ? b.value < a.value : b.value > a.value;
    return b.cost <= a.cost && asGood && (b.cost < a.cost || better);
}

/// Checks the front against the definition by brute force: no point on it is dominated, every
/// point off it is dominated by or equal to one on it, and it runs cheapest first.
void expectFrontIsNonDominatedSet(const std::vector<ParetoPoint>& points, bool lowerIsBetter)
{
    const std::vector<std::size_t> front = paretoFront(points, lowerIsBetter);
    const std::set<std::size_t> on(front.begin(), front.end());
    ASSERT_EQ(on.size(), front.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
        bool dominated = false;
        bool equalOnFront = false;
        for (std::size_t j = 0; j < points.size(); ++j) {
            if (j == i)
                continue;
            dominated = dominated || dominates(points[j], points[i], lowerIsBetter);
            equalOnFront = equalOnFront || (on.count(j) && points[j].cost == points[i].cost &&
                                            points[j].value == points[i].value);
        }
        if (on.count(i))
            EXPECT_FALSE(dominated) << "point " << i << " is on the front but dominated";
        else
            EXPECT_TRUE(dominated || equalOnFront) << "point " << i << " is off the front";
    }
    for (std::size_t k = 1; k < front.size(); ++k)
        EXPECT_LT(points[front[k - 1]].cost, points[front[k]].cost);
}

nlohmann::json loadReport(const std::string& name)
{
    std::ifstream in(std::string(BITLENS_TEST_DATA) + "/reports/" + name);
    if (!in)
        return nlohmann::json();
    return nlohmann::json::parse(in);
}

} // namespace

TEST(MetricInfo, DirectionAndUnitOfEachFigure)
{
    EXPECT_FALSE(metricInfo("top1").lowerIsBetter);
    EXPECT_FALSE(metricInfo("").lowerIsBetter);  // reports older than metric.name: top-1
    EXPECT_EQ(metricInfo("").name, "top1");
    EXPECT_TRUE(metricInfo("perplexity").lowerIsBetter);
    EXPECT_TRUE(metricInfo("kld_mean").lowerIsBetter);
    EXPECT_TRUE(metricInfo("kld_p99").lowerIsBetter);
    EXPECT_FALSE(metricInfo("same_top").lowerIsBetter);
    EXPECT_FALSE(metricInfo("embedding_cosine").lowerIsBetter);
    EXPECT_FALSE(metricInfo("output_agreement").lowerIsBetter);
    EXPECT_EQ(metricInfo("kld_mean").unit, "nats");
    EXPECT_EQ(metricInfo("kld_mean").axisTitle(), "Mean KL divergence (nats)");
    EXPECT_EQ(metricInfo("perplexity").axisTitle(), "Perplexity");
    EXPECT_EQ(metricInfo("top1").title, "Top-1 accuracy");
    EXPECT_EQ(metricInfo("top1").shortTitle, "Top-1");
    EXPECT_EQ(metricInfo("some_score").title, "some_score");
    EXPECT_EQ(*metricInfo("kld_mean").floatValue, 0.0);
    EXPECT_EQ(*metricInfo("same_top").floatValue, 1.0);
    EXPECT_FALSE(metricInfo("perplexity").floatValue);
    EXPECT_TRUE(metricInfo("perplexity").better(80.0, 81.0));
    EXPECT_TRUE(metricInfo("top1").better(0.92, 0.91));
}

TEST(MetricInfo, ChangeInTheFiguresOwnUnit)
{
    // Top-1 0.9240 -> 0.9235: -0.05 points; perplexity 81.1768 -> 81.2315: +0.067 %.
    EXPECT_NEAR(*metricChange(metricInfo("top1"), 0.9235, 0.9240), -0.05, 1e-9);
    EXPECT_NEAR(*metricChange(metricInfo("perplexity"), 81.2315, 81.1768), 0.0673836, 1e-6);
    EXPECT_NEAR(*metricChange(metricInfo("embedding_cosine"), 0.9981, 1.0), -0.0019, 1e-12);
    EXPECT_EQ(metricInfo("perplexity").change, ChangeUnit::Percent);
    EXPECT_EQ(metricInfo("output_agreement").change, ChangeUnit::Points);
    EXPECT_FALSE(metricChange(metricInfo("perplexity"), 2.0, 0.0));
}

TEST(MetricInfo, LanguageModelsAreWeighedByKldByDefault)
{
    EXPECT_EQ(bitlens::analysis::defaultParetoFigure("perplexity", true), "kld_mean");
    EXPECT_EQ(bitlens::analysis::defaultParetoFigure("perplexity", false), "perplexity");
    EXPECT_EQ(bitlens::analysis::defaultParetoFigure("top1", false), "top1");
    EXPECT_EQ(bitlens::analysis::defaultParetoFigure("", false), "top1");
}

TEST(ParetoFront, HigherIsBetter)
{
    // (1, 0.90) (2, 0.95) (3, 0.93) (2, 0.94) (4, 0.96): 0.93 and 0.94 are beaten by (2, 0.95).
    const std::vector<ParetoPoint> points = {
        {1, 0.90}, {2, 0.95}, {3, 0.93}, {2, 0.94}, {4, 0.96}};
    EXPECT_EQ(paretoFront(points, false), (std::vector<std::size_t>{0, 1, 4}));
    expectFrontIsNonDominatedSet(points, false);
}

TEST(ParetoFront, LowerIsBetter)
{
    // Perplexity: the cheapest is also the lowest, so it beats every other: the front is it
    // alone (higher perplexity taken as better would join the two worst instead).
    const std::vector<ParetoPoint> points = {{1, 80.0}, {2, 95.0}, {3, 93.0}, {4, 96.0}};
    EXPECT_EQ(paretoFront(points, true), (std::vector<std::size_t>{0}));
    EXPECT_EQ(paretoFront(points, false), (std::vector<std::size_t>{0, 1, 3}));
    const std::vector<ParetoPoint> kld = {{3, 0.010}, {1, 0.090}, {2, 0.030}, {2, 0.050}};
    EXPECT_EQ(paretoFront(kld, true), (std::vector<std::size_t>{1, 2, 0}));
    expectFrontIsNonDominatedSet(kld, true);
}

TEST(ParetoFront, TiesAndNonFiniteValues)
{
    // Equal in both: one of them (the first) is on the front; equal cost: the better only.
    const std::vector<ParetoPoint> points = {
        {1, 0.5}, {1, 0.5}, {1, 0.7}, {2, NAN}, {INFINITY, 0.9}, {3, 0.7}};
    EXPECT_EQ(paretoFront(points, false), (std::vector<std::size_t>{2}));
    EXPECT_EQ(paretoFront(points, true), (std::vector<std::size_t>{0}));
    EXPECT_TRUE(paretoFront({}, true).empty());
}

TEST(ParetoFront, RandomPointsMatchTheDefinition)
{
    const unsigned seed = 20261206;
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> small(0, 6);  // few distinct values: many ties
    std::uniform_real_distribution<double> real(0.0, 1.0);
    for (int round = 0; round < 200; ++round) {
        std::vector<ParetoPoint> points(static_cast<std::size_t>(1 + round % 17));
        for (ParetoPoint& p : points)
            p = round % 2 ? ParetoPoint{double(small(gen)), double(small(gen))}
                          : ParetoPoint{real(gen), real(gen)};
        expectFrontIsNonDominatedSet(points, false);
        expectFrontIsNonDominatedSet(points, true);
    }
}

TEST(ReportFigure, ReadsTheTaskMetricAndTheDivergenceFigures)
{
    const nlohmann::json run = {
        {"metric", {{"name", "perplexity"}, {"float", 81.1768}, {"quantized", 81.2315}}},
        {"kl_divergence",
         {{"kld", {{"mean", 0.0123}, {"p99", 0.0871}}}, {"same_top", {{"fraction", 0.962}}}}}};
    using bitlens::exporting::reportFigure;
    using bitlens::exporting::reportFloatFigure;
    EXPECT_EQ(*reportFigure(run, "perplexity"), 81.2315);
    EXPECT_EQ(*reportFigure(run, ""), 81.2315);
    EXPECT_EQ(*reportFigure(run, "kld_mean"), 0.0123);
    EXPECT_EQ(*reportFigure(run, "kld_p99"), 0.0871);
    EXPECT_EQ(*reportFigure(run, "same_top"), 0.962);
    EXPECT_FALSE(reportFigure(run, "top1"));  // not this report's metric
    EXPECT_EQ(*reportFloatFigure(run, "perplexity"), 81.1768);
    EXPECT_EQ(*reportFloatFigure(run, "kld_mean"), 0.0);
    EXPECT_EQ(*reportFloatFigure(run, "same_top"), 1.0);
    EXPECT_TRUE(bitlens::exporting::hasDivergence(run));
    // Old reports (no metric.name) hold top-1; malformed values read as absent.
    EXPECT_EQ(*reportFigure({{"metric", {{"quantized", 0.9}}}}, "top1"), 0.9);
    EXPECT_FALSE(reportFigure({{"kl_divergence", {{"kld", {{"mean", "x"}}}}}}, "kld_mean"));
    EXPECT_FALSE(reportFigure(nlohmann::json(3), "kld_mean"));
    EXPECT_FALSE(bitlens::exporting::hasDivergence(nlohmann::json::array()));
}

TEST(ParetoFront, KjvLlamaFourBitPresetsByKld)
{
    // bitlens-cli compare kjv-llama over every 4-bit post-training preset
    // (tests/data/reports/README.md): the front by size and mean KLD holds exactly the schemes
    // no other scheme beats on both.
    const nlohmann::json compare = loadReport("kjv-llama-compare-4bit.json");
    ASSERT_TRUE(compare.contains("runs")) << "tests/data/reports/kjv-llama-compare-4bit.json";
    std::vector<ParetoPoint> points;
    std::vector<std::string> names;
    for (const nlohmann::json& run : compare["runs"]) {
        points.push_back({run["size_bytes"]["quantized"].get<double>(),
                          *bitlens::exporting::reportFigure(run, "kld_mean")});
        names.push_back(run["scheme"]["preset"].get<std::string>());
    }
    ASSERT_GE(points.size(), 10u);
    expectFrontIsNonDominatedSet(points, true);
    const std::vector<std::size_t> front = paretoFront(points, true);
    ASSERT_FALSE(front.empty());
    // The cheapest point on the front has the largest KLD of the front; each step up in size
    // buys a lower KLD.
    for (std::size_t k = 1; k < front.size(); ++k)
        EXPECT_LT(points[front[k]].value, points[front[k - 1]].value)
            << names[front[k]] << " after " << names[front[k - 1]];
}
