// Issue #47 item 5, "The window tells the truth about language models": what the window shows
// at its default size of 1280x800, and the words it uses.

#include "chart_throughput.h"
#include "main_window.h"
#include "report_view.h"

#include <nlohmann/json.hpp>

#include <QChart>
#include <QGraphicsTextItem>
#include <QTabBar>
#include <QTabWidget>
#include <QTest>
#include <QToolButton>

#include <fstream>
#include <string>

using namespace bitlens::widgets;

namespace {

nlohmann::json loadReport(const char* name)
{
    std::ifstream in(std::string(BITLENS_TEST_DATA "/reports/") + name);
    if (!in)
        return nlohmann::json();
    return nlohmann::json::parse(in);
}

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

QTEST_MAIN(TestWindowFit)
#include "test_window_fit.moc"
