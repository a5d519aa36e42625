// bitlens: the desktop app. `bitlens [MODEL] [--data DATA] [--scheme SCHEME] [--report FILE]
// [--tab NAME] [--screenshot FILE.png]`; MODEL is a model file or a demo zoo name (default fashion-cnn).
// --scheme runs SCHEME once the model (and data) are open; --tab shows that result tab. With
// --screenshot the window is saved to FILE once every job (the run too) has ended, and the app
// quits (exit code 3 when something could not be opened or run; the screenshot is still
// written).

#include "main_window.h"

#include <QApplication>
#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QPixmap>
#include <QTimer>

#include <cstdio>
#include <memory>
#include <utility>

namespace {

constexpr int kExitBadInput = 3;
constexpr int kExitRuntime = 5;

} // namespace

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("BitLens"));
    QApplication::setApplicationName(QStringLiteral("BitLens"));
    QApplication::setApplicationVersion(QStringLiteral(BITLENS_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("BitLens: see what quantization does to a neural network."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("MODEL"),
                                 QStringLiteral("A model file or a demo zoo name "
                                                "(default: fashion-cnn)."),
                                 QStringLiteral("[MODEL]"));
    const QCommandLineOption screenshotOption(
        QStringLiteral("screenshot"),
        QStringLiteral("Once the model is on screen, save the window to FILE (PNG) and quit."),
        QStringLiteral("FILE"));
    parser.addOption(screenshotOption);
    const QCommandLineOption dataOption(
        QStringLiteral("data"),
        QStringLiteral("Also open DATA (an IDX, .npy/.npz file or an image folder)."),
        QStringLiteral("DATA"));
    parser.addOption(dataOption);
    const QCommandLineOption schemeOption(
        QStringLiteral("scheme"),
        QStringLiteral("Once the model (and data) are open, quantize with SCHEME "
                       "(e.g. static-int8, w4-int4:group=64)."),
        QStringLiteral("SCHEME"));
    parser.addOption(schemeOption);
    const QCommandLineOption tabOption(
        QStringLiteral("tab"),
        QStringLiteral("Show the result tab NAME (Layers, Memory, Throughput, Compare, "
                       "Sensitivity)."),
        QStringLiteral("NAME"));
    parser.addOption(tabOption);
    const QCommandLineOption reportOption(
        QStringLiteral("report"),
        QStringLiteral("Open a saved report.json, compare or sensitivity file."),
        QStringLiteral("FILE"));
    parser.addOption(reportOption);
    parser.process(app);

    const QStringList positional = parser.positionalArguments();
    if (positional.size() > 1) {
        std::fprintf(stderr, "error: expected at most one MODEL, got %lld\n",
                     static_cast<long long>(positional.size()));
        return 2;
    }
    const QString model = positional.isEmpty() ? QStringLiteral("fashion-cnn") : positional.front();
    const QString screenshot = parser.value(screenshotOption);
    const QString scheme = parser.value(schemeOption);
    const QString data = parser.value(dataOption);

    // Results arrive through the event loop, so the connections below are made in time.
    bitlens::widgets::MainWindow window(model);
    if (const QString tab = parser.value(tabOption); !tab.isEmpty() && !window.showResultTab(tab)) {
        std::fprintf(stderr, "error: no result tab called %s\n", qPrintable(tab));
        return 2;
    }
    if (const QString report = parser.value(reportOption); !report.isEmpty()) {
        // A model that opens clears the results on screen: open the report after it. Connected
        // before the screenshot handlers, so the report is on screen when they grab.
        const QString tab = parser.value(tabOption);
        auto opened = std::make_shared<bool>(false);
        QObject::connect(&window, &bitlens::widgets::MainWindow::modelLoaded, &window,
                         [&window, report, tab, opened] {
                             if (std::exchange(*opened, true))
                                 return;
                             window.openReport(report);
                             if (!tab.isEmpty())
                                 window.showResultTab(tab);
                         });
    }
    if (!scheme.isEmpty()) {
        // Run once the model is open and, when --data was given, the data too. Connected before
        // the screenshot handlers, so the run has started (window busy) when they look.
        auto started = std::make_shared<bool>(false);
        const auto runWhenReady = [&window, scheme, data, started] {
            if (*started || !window.currentModel() || (!data.isEmpty() && !window.currentData()))
                return;
            *started = true;
            window.runScheme(scheme);
        };
        QObject::connect(&window, &bitlens::widgets::MainWindow::modelLoaded, &window,
                         runWhenReady);
        QObject::connect(&window, &bitlens::widgets::MainWindow::dataLoaded, &window,
                         runWhenReady);
    }
    if (!screenshot.isEmpty()) {
        // A message box is a separate window that grab() would miss: report on stderr instead.
        window.setDialogsEnabled(false);
        auto exitCode = std::make_shared<int>(0);
        auto saved = std::make_shared<bool>(false);
        // Once every requested job ended, let the window lay out and paint, then grab it.
        const auto saveWhenIdle = [&window, screenshot, exitCode, saved] {
            if (window.isBusy() || *saved)
                return;
            *saved = true;
            QTimer::singleShot(300, &window, [&window, screenshot, exitCode] {
                if (!window.grab().save(screenshot, "PNG")) {
                    std::fprintf(stderr, "error: %s: cannot write the screenshot\n",
                                 qPrintable(screenshot));
                    QApplication::exit(kExitRuntime);
                    return;
                }
                QApplication::exit(*exitCode);
            });
        };
        QObject::connect(&window, &bitlens::widgets::MainWindow::modelLoaded, &window,
                         saveWhenIdle);
        QObject::connect(&window, &bitlens::widgets::MainWindow::dataLoaded, &window,
                         saveWhenIdle);
        QObject::connect(&window, &bitlens::widgets::MainWindow::reportShown, &window,
                         saveWhenIdle);
        QObject::connect(&window, &bitlens::widgets::MainWindow::quantizationStopped, &window,
                         saveWhenIdle);
        QObject::connect(&window, &bitlens::widgets::MainWindow::errorShown, &window,
                         [saveWhenIdle, exitCode](const QString& message) {
                             std::fprintf(stderr, "%s\n", qPrintable(message));
                             *exitCode = kExitBadInput;
                             saveWhenIdle();
                         });
    }
    window.show();
    if (!data.isEmpty())
        window.openData(data);

    return QApplication::exec();
}
