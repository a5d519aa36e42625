// The Plan tab: BLOOM-176B in bf16 for inference on A100-80GB reads 8 GPUs (minimum 5), the
// table shows each part with its formula, the chart stacks the parts against the card's memory,
// and the tab sits in the main window. Set BITLENS_PLAN_SCREENSHOT=<file.png> to save the tab
// as it is shown (1280x800) for a look.

#include "main_window.h"
#include "plan_view.h"
#include "report_view.h"

#include <QBarSet>
#include <QChart>
#include <QComboBox>
#include <QLegend>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

using namespace bitlens::widgets;

class TestPlanView : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void bloomInferenceOnA100ReadsEight()
    {
        PlanView view;
        QVERIFY(view.setPreset(QStringLiteral("bloom-176b")));
        QVERIFY(view.setWeightPrecision(QStringLiteral("bf16")));
        QVERIFY(view.setUse(QStringLiteral("inference")));
        QVERIFY(view.setCard(QStringLiteral("a100-80gb")));
        QVERIFY2(view.errorText().isEmpty(), qPrintable(view.errorText()));
        QVERIFY(view.plan().has_value());
        QCOMPARE(view.plan()->tensorParallel, 8);
        QCOMPARE(view.plan()->minGpus, 5);
        QVERIFY2(view.gpuText().contains(QStringLiteral("8 x NVIDIA A100 80GB SXM")),
                 qPrintable(view.gpuText()));
        QVERIFY(view.gpuText().contains(QStringLiteral("is 5 x 80 GiB")));
        QVERIFY(view.decodeText().contains(QStringLiteral("tokens/s")));
        QVERIFY(view.priceText().contains(QStringLiteral("no price")));

        // Table: weights, KV cache, activations, then the total, each with its formula.
        QTableWidget* table = view.partsTable();
        QCOMPARE(table->rowCount(), 4);
        QCOMPARE(table->item(0, 0)->text(), QStringLiteral("Weights"));
        QCOMPARE(table->item(0, 1)->text(), QStringLiteral("328.3 GiB"));
        QCOMPARE(table->item(0, 2)->text(), QStringLiteral("176.247e9 params x 2 B (bf16)"));
        QCOMPARE(table->item(1, 0)->text(), QStringLiteral("KV cache"));
        QCOMPARE(table->item(3, 0)->text(), QStringLiteral("Total"));

        // Chart: one stacked set per part over two bars (a card's share of 5 and of 8), and
        // the card's memory line at 80 GiB.
        QVERIFY(view.chart()->hasData());
        QStackedBarSeries* bars = view.chart()->barSeries();
        QVERIFY(bars);
        QCOMPARE(bars->count(), 3);
        QCOMPARE(bars->barSets().at(0)->label(), QStringLiteral("Weights"));
        QCOMPARE(bars->barSets().at(0)->count(), 2);
        QVERIFY(qAbs(bars->barSets().at(0)->at(0) - 328.3 / 5) < 0.1);
        QVERIFY(qAbs(bars->barSets().at(0)->at(1) - 328.3 / 8) < 0.1);
        QLineSeries* line = view.chart()->memoryLine();
        QVERIFY(line);
        QCOMPARE(line->at(0).y(), 80.0);
        QCOMPARE(line->name(), QStringLiteral("Card memory (80 GiB)"));
        QVERIFY(view.chart()->chart()->legend()->isVisible());
        QCOMPARE(view.chart()->chart()->title(),
                 QStringLiteral("336.8 GiB in all: 42.1 GiB per card at TP 8"));
    }

    void fineTuneShowsEveryTerm()
    {
        PlanView view;
        view.setPreset(QStringLiteral("bloom-176b"));
        view.setCard(QStringLiteral("a100-80gb"));
        QVERIFY(view.setUse(QStringLiteral("finetune")));
        QStringList parts;
        for (int r = 0; r < view.partsTable()->rowCount(); ++r)
            parts << view.partsTable()->item(r, 0)->text();
        QCOMPARE(parts, (QStringList{QStringLiteral("Weights"), QStringLiteral("Gradients"),
                                     QStringLiteral("Master weights (fp32)"),
                                     QStringLiteral("Optimizer states (Adam m, v)"),
                                     QStringLiteral("Activations"), QStringLiteral("Total")}));
        QCOMPARE(view.plan()->minGpus, 34);
        QCOMPARE(view.plan()->tensorParallel, 64);
        QVERIFY(view.decodeText().isEmpty());
    }

    void qloraSwitchesTheBaseToFourBits()
    {
        PlanView view;
        view.setPreset(QStringLiteral("llama-3.1-70b"));
        view.setWeightPrecision(QStringLiteral("bf16"));
        QVERIFY(view.setUse(QStringLiteral("qlora")));
        QVERIFY2(view.errorText().isEmpty(), qPrintable(view.errorText()));
        QCOMPARE(view.partsTable()->item(0, 0)->text(), QStringLiteral("Weights (frozen)"));
        QVERIFY(view.partsTable()->item(0, 2)->text().contains(QStringLiteral("(nf4)")));
    }

    void configJsonAndItsErrors()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("config.json"));
        std::ofstream(path.toStdString())
            << R"({"model_type": "llama", "hidden_size": 576, "num_hidden_layers": 30,
                  "num_attention_heads": 9, "num_key_value_heads": 3,
                  "intermediate_size": 1536, "vocab_size": 49152, "tie_word_embeddings": true})";
        PlanView view;
        view.setCard(QStringLiteral("rtx-4090"));
        QVERIFY(view.setConfigPath(path));
        QCOMPARE(view.plan()->params, 134515008);
        QCOMPARE(view.plan()->minGpus, 1);
        std::ofstream(path.toStdString()) << "{";
        QVERIFY(!view.setConfigPath(path));
        QCOMPARE(view.errorText(), path + QStringLiteral(": not valid JSON"));
        QVERIFY(!view.chart()->hasData());
        QCOMPARE(view.partsTable()->rowCount(), 0);
    }

    void openModelWithoutConfigPlansWeightsOnly()
    {
        PlanView view;
        view.setOpenModel(QStringLiteral("/nowhere/model.onnx"), 2000000);
        QVERIFY(view.useOpenModel());
        QVERIFY2(view.errorText().isEmpty(), qPrintable(view.errorText()));
        QCOMPARE(view.partsTable()->rowCount(), 2);  // weights + total
        QCOMPARE(view.plan()->params, 2000000);
    }

    void mainWindowHasAPlanTab()
    {
        MainWindow window;
        QTabWidget* tabs = window.reportView()->tabs();
        int index = -1;
        for (int i = 0; i < tabs->count(); ++i)
            if (tabs->tabText(i) == QStringLiteral("Plan"))
                index = i;
        QVERIFY(index >= 0);
        QCOMPARE(tabs->widget(index), static_cast<QWidget*>(window.planView()));
        const QByteArray shot = qgetenv("BITLENS_PLAN_SCREENSHOT");
        if (!shot.isEmpty()) {
            PlanView* view = window.planView();
            view->setPreset(QStringLiteral("bloom-176b"));
            view->setCard(QStringLiteral("a100-80gb"));
            tabs->setCurrentIndex(index);
            window.resize(1280, 800);
            window.show();
            QVERIFY(QTest::qWaitForWindowExposed(&window));
            QTest::qWait(300);
            QVERIFY(window.grab().save(QString::fromLocal8Bit(shot)));
            view->chart()->exportTo(QString::fromLocal8Bit(shot) + QStringLiteral(".chart.png"));
            // The longest legend: full fine-tuning's five parts and the card line.
            view->setUse(QStringLiteral("finetune"));
            QTest::qWait(200);
            QVERIFY(window.grab().save(QString::fromLocal8Bit(shot) + QStringLiteral(".finetune.png")));
        }
    }
};

QTEST_MAIN(TestPlanView)
#include "test_plan_view.moc"
