// The run summary line of the window (reportSummary) from report.json: the metric change, and
// for language models the KL divergence statistics of the quantized next-token distributions.

#include "report_view.h"

#include <QtTest>
#include <nlohmann/json.hpp>

using bitlens::widgets::reportSummary;
using nlohmann::json;

class TestReportSummary : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void languageModelShowsKlDivergence();
    void classifierHasNoKlDivergence();
    void cosineChangesInItsOwnUnit();
};

namespace {

json lmReport()
{
    return {{"scheme", {{"spec", "w4-int4"}}},
            {"metric", {{"name", "perplexity"}, {"float", 10.0}, {"quantized", 11.0},
                        {"samples", 4064}}},
            {"size_bytes", {{"float", 4000}, {"quantized", 1000}}},
            {"layers", json::array({{{"name", "q_proj"}, {"simulated", false},
                                     {"weight_type", "int4"}}})},
            {"kl_divergence", {{"tokens", 4064},
                               {"kld", {{"mean", 0.123456}, {"p99", 0.98765}}},
                               {"same_top", {{"fraction", 0.8766}}}}}};
}

} // namespace

void TestReportSummary::languageModelShowsKlDivergence()
{
    const QString text = reportSummary(lmReport());
    QVERIFY2(text.startsWith(
                 QStringLiteral("w4-int4: perplexity on 4,064 tokens 10.000 -> 11.000 (+10.00 %)")),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral(
                 "KL divergence 0.12346 (99th percentile 0.9877), same top token 87.7 %")),
             qPrintable(text));
    // A report without a usable kl_divergence object says nothing about it.
    json broken = lmReport();
    broken["kl_divergence"]["same_top"] = "n/a";
    QVERIFY(!reportSummary(broken).contains(QStringLiteral("KL divergence")));
}

void TestReportSummary::classifierHasNoKlDivergence()
{
    json r = lmReport();
    r.erase("kl_divergence");
    r["metric"] = {{"name", "top1"}, {"float", 0.9}, {"quantized", 0.89}, {"samples", 1000}};
    const QString text = reportSummary(r);
    QVERIFY2(text.contains(QStringLiteral("90.00 % -> 89.00 % (-1.00 points)")), qPrintable(text));
    QVERIFY(!text.contains(QStringLiteral("KL divergence")));
    QVERIFY(!text.contains(QStringLiteral("reused")));
    // A second run on the same data says that it took the float figure from the first.
    r["metric"]["float_reused"] = true;
    QVERIFY2(reportSummary(r).contains(QStringLiteral("float metric reused")),
             qPrintable(reportSummary(r)));
}

void TestReportSummary::cosineChangesInItsOwnUnit()
{
    json r = lmReport();
    r.erase("kl_divergence");
    r["metric"] = {{"name", "embedding_cosine"}, {"float", 1.0}, {"quantized", 0.993},
                   {"samples", 500}};
    const QString text = reportSummary(r);
    // Not "(-0.70 points)": a cosine is no percentage.
    QVERIFY2(text.contains(QStringLiteral("1.0000 -> 0.9930 (-0.0070)")), qPrintable(text));
    QVERIFY(!text.contains(QStringLiteral("points")));
}

QTEST_MAIN(TestReportSummary)
#include "test_report_summary.moc"
