// Issue #47 item 5, "The window tells the truth about language models": what the window shows
// at its default size of 1280x800, and the words it uses.

#include "chart_throughput.h"
#include "help_dialogs.h"
#include "main_window.h"
#include "quant_panel.h"
#include "report_view.h"

#include "quant/scheme.h"
#include "report_fixtures.h"

#include <nlohmann/json.hpp>

#include <QAbstractAxis>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QChart>
#include <QComboBox>
#include <QLabel>
#include <QGraphicsTextItem>
#include <QTabBar>
#include <QTabWidget>
#include <QTest>
#include <QToolButton>

#include <fstream>
#include <string>

using namespace bitlens::widgets;

namespace {

using bitlens::testing::loadReport;

/// The text the chart draws as its title (Qt Charts cuts it to "..." when it does not fit).
QString drawnTitle(QChart* chart)
{
    for (QGraphicsItem* item : chart->childItems())
        if (auto* text = dynamic_cast<QGraphicsTextItem*>(item);
            text && text->toPlainText().startsWith(QLatin1String("Throughput")))
            return text->toPlainText();
    return {};
}

} // namespace

class TestWindowFit : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void everyTabFitsAtDefaultSize();
    void everyPresetSaysWhatItDoes();
    void chartGuideCoversEveryTab();
    void languageModelThroughputCountsWindows();
};

void TestWindowFit::everyTabFitsAtDefaultSize()
{
    MainWindow window;
    window.setDialogsEnabled(false);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTest::qWait(50);
    QCOMPARE(window.size(), QSize(1280, 800));
    QTabWidget* tabs = window.reportView()->tabs();
    QTabBar* bar = tabs->tabBar();
    qInfo("tab bar: %d px wanted of %d", bar->sizeHint().width(), bar->width());
    QStringList cut;
    for (int i = 0; i < bar->count(); ++i)
        if (!bar->rect().contains(bar->tabRect(i)))
            cut << bar->tabText(i);
    QVERIFY2(cut.isEmpty(), qPrintable(QStringLiteral("tabs outside the bar (%1 px, %2 wanted): %3")
                                           .arg(bar->width())
                                           .arg(bar->sizeHint().width())
                                           .arg(cut.join(QStringLiteral(", ")))));
    QVERIFY2(bar->sizeHint().width() <= bar->width(),
             qPrintable(QStringLiteral("%1 > %2").arg(bar->sizeHint().width()).arg(bar->width())));
    for (const QToolButton* arrow : bar->findChildren<QToolButton*>())
        QVERIFY2(!arrow->isVisible(), "the tab bar shows scroll arrows");

    // The Throughput title of a run at this size: whole, not cut to "...".
    const nlohmann::json report = loadReport("fashion-cnn-static-int8.json");
    QVERIFY(report.is_object());
    window.reportView()->setReport(report);
    QVERIFY(window.showResultTab(QStringLiteral("Throughput")));
    QTest::qWait(50);
    ThroughputChart* chart = window.reportView()->throughputChart();
    QVERIFY(chart->hasData());
    const QString title = drawnTitle(chart->chart());
    QVERIFY2(!title.isEmpty(), "no title drawn");
    QVERIFY2(!title.contains(QLatin1String("...")) && !title.contains(QChar(0x2026)),
             qPrintable(title));
    QVERIFY2(title.contains(QLatin1String("quantized / float")), qPrintable(title));
}

void TestWindowFit::everyPresetSaysWhatItDoes()
{
    QuantPanel panel;
    QComboBox* box = panel.presetBox();
    QCOMPARE(box->count(), static_cast<int>(bitlens::quant::presetNames().size()));
    for (int i = 0; i < box->count(); ++i) {
        const QString preset = box->itemText(i);
        const QString tip = box->itemData(i, Qt::ToolTipRole).toString();
        QVERIFY2(!tip.isEmpty(), qPrintable(preset));
        // True to the scheme core parses: weight-only presets say their activations stay float,
        // the others do not; gguf-* name GGUF; the bit width of the weights is said.
        auto scheme = bitlens::quant::parseScheme(preset.toStdString());
        QVERIFY2(static_cast<bool>(scheme), qPrintable(preset));
        const bool floatActs = scheme->config.actMode == bitlens::quant::ActMode::Float;
        QVERIFY2(tip.contains(QLatin1String("float activations")) == floatActs,
                 qPrintable(preset + QStringLiteral(": ") + tip));
        QVERIFY2(tip.contains(QLatin1String("GGUF")) == preset.startsWith(QLatin1String("gguf-")),
                 qPrintable(tip));
        QVERIFY2(tip.contains(QLatin1String("Weight-only")) ==
                     (floatActs && !preset.startsWith(QLatin1String("gguf-"))),
                 qPrintable(tip));
    }
    QLabel* label = panel.presetDescriptionLabel();
    QVERIFY(label);
    QCOMPARE(label->text(), box->itemData(box->currentIndex(), Qt::ToolTipRole).toString());
    for (const char* preset : {"w4-nf4", "gguf-q4_k", "llm-int8"}) {
        box->setCurrentText(QLatin1String(preset));
        QCOMPARE(label->text(), presetDescription(QLatin1String(preset)));
    }
    panel.setSchemeText(QStringLiteral("mxfp4-w"));
    QVERIFY2(label->text().startsWith(QLatin1String("Weight-only OCP MXFP4")),
             qPrintable(label->text()));
}

void TestWindowFit::chartGuideCoversEveryTab()
{
    // Help > How to read the charts has an entry for every tab of the window: a bold
    // "**Title**" or "(Title tab)".
    const QString guide = chartGuideMarkdown();
    MainWindow window;
    QTabWidget* tabs = window.reportView()->tabs();
    QCOMPARE(tabs->count(), 14);
    QStringList missing;
    for (int i = 0; i < tabs->count(); ++i) {
        const QString title = tabs->tabText(i).remove(QLatin1Char('&'));
        if (!guide.contains(QStringLiteral("**%1**").arg(title)) &&
            !guide.contains(QStringLiteral("**%1** (").arg(title)) &&
            !guide.contains(QStringLiteral("(%1 tab)").arg(title)))
            missing << title;
    }
    QVERIFY2(missing.isEmpty(), qPrintable(missing.join(QStringLiteral(", "))));
}

void TestWindowFit::languageModelThroughputCountsWindows()
{
    // A language model's throughput is timed on one window of text (batch 1): it says windows,
    // never "samples/s, one batch of 1 samples".
    const nlohmann::json compare = loadReport("kjv-llama-compare-4bit.json");
    QVERIFY(compare.contains("runs") && !compare["runs"].empty());
    const auto texts = [](ThroughputChart& chart) {
        QStringList all{chart.chart()->title(), chart.barSeries()->labelsFormat()};
        for (QAbstractAxis* axis : chart.chart()->axes()) {
            all << axis->titleText();
            if (auto* categories = qobject_cast<QBarCategoryAxis*>(axis))
                all << categories->categories();
        }
        return all.join(QLatin1Char('\n'));
    };
    ThroughputChart lm;
    lm.resize(440, 500);
    lm.setReport(compare["runs"][0]);
    QVERIFY(lm.hasData());
    const QString lmText = texts(lm);
    QVERIFY2(!lmText.contains(QLatin1String("sample"), Qt::CaseInsensitive), qPrintable(lmText));
    QVERIFY2(lmText.contains(QLatin1String("windows/s")), qPrintable(lmText));
    QVERIFY2(lmText.contains(QLatin1String("Windows per second")), qPrintable(lmText));

    // An image classifier keeps its samples and batch.
    ThroughputChart cnn;
    cnn.setReport(loadReport("fashion-cnn-static-int8.json"));
    const QString cnnText = texts(cnn);
    QVERIFY2(cnnText.contains(QLatin1String("samples/s")), qPrintable(cnnText));
    QVERIFY2(cnnText.contains(QLatin1String("64 samples")), qPrintable(cnnText));
}

QTEST_MAIN(TestWindowFit)
#include "test_window_fit.moc"
