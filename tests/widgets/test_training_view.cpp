// The Training tab: points fed directly and through the worker-thread sink become the loss and
// held-out metric series; points of an older run are dropped; Stop sets the token once; a report
// with a "qat" object draws its recorded curves and marks the kept checkpoint.

#include "training_view.h"

#include <nlohmann/json.hpp>

#include <QAbstractAxis>
#include <QChart>
#include <QLegend>
#include <QLineSeries>
#include <QPushButton>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QTest>

#include <cmath>
#include <limits>
#include <optional>
#include <thread>

using namespace bitlens::widgets;

namespace {

TrainingPoint point(std::int64_t step, double loss, std::optional<double> metric, double best)
{
    TrainingPoint p;
    p.step = step;
    p.steps = 100;
    p.epoch = 1;
    p.epochs = 1;
    p.loss = loss;
    p.lr = 1e-4;
    p.hasMetric = metric.has_value();
    p.metric = metric.value_or(0.0);
    p.bestMetric = best;
    p.metricName = "top1";
    p.lossName = "cross_entropy";
    return p;
}

QStringList axisTitles(QChart* chart)
{
    QStringList titles;
    for (QAbstractAxis* axis : chart->axes())
        titles << axis->titleText();
    return titles;
}

} // namespace

class TestTrainingView : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void startsEmpty()
    {
        TrainingView view;
        QVERIFY(!view.lossChart()->hasData());
        QVERIFY(!view.isTraining());
        QVERIFY(!view.stopTraining());
        QVERIFY(view.statusText().contains(QStringLiteral("qat-")));
    }

    void pointsBecomeSeriesWithTitlesAxesAndLegend()
    {
        TrainingView view;
        view.resize(1000, 420);
        view.begin(QStringLiteral("qat-w4a8"));
        QVERIFY(view.isTraining());
        view.addPoint(point(0, std::numeric_limits<double>::quiet_NaN(), 0.90, 0.90));
        for (int s = 1; s <= 50; ++s)
            view.addPoint(point(s, 1.0 / s, s % 25 == 0 ? std::optional<double>(0.90 + s / 1000.0)
                                                        : std::nullopt,
                                0.90 + (s / 25) * 25 / 1000.0));
        QCOMPARE(view.pointCount(), 51);
        // Step 0 carries no loss: 50 loss points, three held-out evaluations (0, 25, 50).
        QCOMPARE(view.lossSeries()->count(), 50);
        QCOMPARE(view.smoothedLossSeries()->count(), 50);
        QCOMPARE(view.lossSeries()->at(0), QPointF(1.0, 1.0));
        QCOMPARE(view.lossSeries()->at(49), QPointF(50.0, 1.0 / 50));
        QCOMPARE(view.metricSeries()->count(), 3);
        QCOMPARE(view.metricSeries()->at(2).y(), 95.0);  // percent
        QCOMPARE(view.bestSeries()->count(), 1);
        QCOMPARE(view.bestSeries()->at(0), QPointF(50.0, 95.0));
        QVERIFY(view.lossChart()->hasData());
        QCOMPARE(view.lossChart()->chart()->title(), QStringLiteral("Training loss"));
        QVERIFY(view.statusText().contains(QStringLiteral("qat-w4a8")));
        QVERIFY(axisTitles(view.lossChart()->chart()).contains(QStringLiteral("Optimizer step")));
        QVERIFY(axisTitles(view.lossChart()->chart()).join(' ').contains(QStringLiteral("nats")));
        QVERIFY(axisTitles(view.metricChart()->chart()).join(' ').contains(QStringLiteral("(%)")));
        QVERIFY(view.metricChart()->chart()->legend()->isVisible());
        QCOMPARE(view.bestSeries()->name(), QStringLiteral("best checkpoint (kept)"));
        QVERIFY(view.statusText().contains(QStringLiteral("step 50/100")));
    }

    void sinkDeliversFromAWorkerThreadAndDropsOldRuns()
    {
        TrainingView view;
        auto oldSink = view.begin(QStringLiteral("qat-int8"));
        auto sink = view.begin(QStringLiteral("qat-int8:lsq=true"));
        std::thread worker([&] {
            for (int s = 0; s <= 30; ++s) {
                sink(point(s, s == 0 ? std::numeric_limits<double>::quiet_NaN() : 2.0 - s / 30.0,
                           s % 10 == 0 ? std::optional<double>(0.8 + s / 300.0) : std::nullopt,
                           0.9));
                oldSink(point(s, 99.0, std::nullopt, 0.1));  // a stale run: dropped
            }
        });
        worker.join();
        QCOMPARE(view.pointCount(), 0);  // nothing touched the view off the GUI thread
        QTRY_COMPARE(view.pointCount(), 31);
        QCOMPARE(view.lossSeries()->count(), 30);
        QCOMPARE(view.metricSeries()->count(), 4);
        for (const QPointF& p : view.lossSeries()->points())
            QVERIFY(p.y() < 3.0);
    }

    void stopKeepsTheBestCheckpointAndTheReportShowsIt()
    {
        TrainingView view;
        QSignalSpy stopped(&view, &TrainingView::stopRequested);
        view.begin(QStringLiteral("qat-int8"));
        const bitlens::CancelToken token = view.stopToken();
        view.addPoint(point(0, std::numeric_limits<double>::quiet_NaN(), 0.91, 0.91));
        view.addPoint(point(1, 0.5, 0.93, 0.93));
        view.addPoint(point(2, 0.4, 0.92, 0.93));
        QVERIFY(view.findChild<QPushButton*>(QStringLiteral("trainingStop"))->isEnabled());
        QTest::mouseClick(view.findChild<QPushButton*>(QStringLiteral("trainingStop")),
                          Qt::LeftButton);
        QCOMPARE(stopped.count(), 1);
        QVERIFY(token.cancelled());
        QVERIFY(!view.stopTraining());  // once
        QVERIFY(view.statusText().contains(QStringLiteral("best checkpoint")));
        // The job returns the kept checkpoint (step 1) and its report reaches the view.
        nlohmann::json report = {
            {"scheme", {{"spec", "qat-int8"}}},
            {"qat",
             {{"epochs", 1}, {"steps", 2}, {"best_step", 1}, {"best_metric", 0.93},
              {"start_metric", 0.91}, {"final_loss", 0.45}, {"seconds", 3.5},
              {"cancelled", true}, {"loss", "cross_entropy"}, {"metric", "top1"}}}};
        view.setReport(report);
        QCOMPARE(view.bestSeries()->count(), 1);
        QCOMPARE(view.bestSeries()->at(0), QPointF(1.0, 93.0));
        QCOMPARE(view.lossSeries()->count(), 2);  // the live curves stay
        QVERIFY(view.statusText().contains(QStringLiteral("stopped after 2 steps")));
        QVERIFY(view.statusText().contains(QStringLiteral("step 1")));
    }

    void savedReportDrawsItsRecordedCurves()
    {
        TrainingView view;
        nlohmann::json report = {
            {"scheme", {{"spec", "qat-w4a8:distill=true"}}},
            {"qat",
             {{"epochs", 2}, {"steps", 40}, {"best_step", 40}, {"best_metric", 31.5},
              {"start_metric", 24.0}, {"final_loss", 0.02}, {"seconds", 12.0},
              {"cancelled", false}, {"loss", "kl_distill"}, {"metric", "output_sqnr_db"},
              {"loss_curve", {{"step", {10, 20, 30, 40}}, {"value", {0.2, 0.1, 0.05, 0.02}}}},
              {"metric_curve", {{"step", {0, 20, 40}}, {"value", {24.0, 29.0, 31.5}}}}}}};
        view.setReport(report);
        QCOMPARE(view.lossSeries()->count(), 4);
        QCOMPARE(view.metricSeries()->count(), 3);
        QCOMPARE(view.metricSeries()->at(2), QPointF(40.0, 31.5));  // dB, not percent
        QCOMPARE(view.bestSeries()->at(0), QPointF(40.0, 31.5));
        QVERIFY(axisTitles(view.metricChart()->chart()).join(' ').contains(QStringLiteral("dB")));
        QVERIFY(axisTitles(view.lossChart()->chart()).join(' ').contains(QStringLiteral("KL")));
        // A report without "qat" leaves the tab as it is.
        view.setReport(nlohmann::json{{"scheme", {{"spec", "static-int8"}}}});
        QCOMPARE(view.lossSeries()->count(), 4);
    }
};

QTEST_MAIN(TestTrainingView)
#include "test_training_view.moc"
