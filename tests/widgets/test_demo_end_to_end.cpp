// End to end on the demo model, as a user meets it: the window opens on fashion-cnn, one
// static-int8 run fills every chart, selecting a layer moves the histogram. Skips when the zoo
// model is not built (`make test` builds it before running the tests).

#include "chart_histogram.h"
#include "chart_latency.h"
#include "chart_memory.h"
#include "chart_sqnr.h"
#include "chart_throughput.h"
#include "job_runner.h"
#include "layer_table_model.h"
#include "main_window.h"
#include "report_view.h"

#include "zoo/zoo.h"

#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QtTest>

using bitlens::widgets::MainWindow;

class TestDemoEndToEnd : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens")).clear();
        if (!bitlens::zoo::isBuilt("fashion-cnn"))
            QSKIP("fashion-cnn is not built (bitlens-cli zoo build fashion-cnn)");
    }

    void staticInt8FillsEveryChartAndSelectionFollows()
    {
        MainWindow window(QStringLiteral("fashion-cnn"));
        window.setDialogsEnabled(false);
        QSignalSpy loaded(&window, &MainWindow::modelLoaded);
        window.show();
        if (!window.currentModel())
            QVERIFY(loaded.wait(60000));
        QCOMPARE(window.layerModel()->rowCount(), 12);

        QSignalSpy shown(&window, &MainWindow::reportShown);
        QSignalSpy errors(&window, &MainWindow::errorShown);
        window.runScheme(QStringLiteral("static-int8"));
        QVERIFY(shown.wait(120000));
        QVERIFY2(errors.isEmpty(), errors.isEmpty() ? "" : qPrintable(errors.front().front().toString()));

        bitlens::widgets::ReportView* view = window.reportView();
        QVERIFY(view->summaryText().startsWith(QStringLiteral("static-int8")));
        QVERIFY(view->summaryText().contains(QStringLiteral("(0.251)")));
        QVERIFY(view->sqnrChart()->hasData());
        QCOMPARE(view->sqnrChart()->layerNames(),
                 (QStringList{"block1.conv", "block2.conv", "fc1", "logits"}));
        QVERIFY(view->histogramChart()->hasData());
        QVERIFY(view->memoryChart()->hasData());
        QVERIFY(view->throughputChart()->hasData());
        QVERIFY(view->latencyChart()->hasData());

        QVERIFY(window.layerIndex(QStringLiteral("fc1")).isValid());
        window.layerTable()->setCurrentIndex(window.layerIndex(QStringLiteral("fc1")));
        QCOMPARE(view->histogramChart()->layer(), QStringLiteral("fc1"));
        QCOMPARE(view->sqnrChart()->selectedLayer(), QStringLiteral("fc1"));
    }
};

QTEST_MAIN(TestDemoEndToEnd)
#include "test_demo_end_to_end.moc"
