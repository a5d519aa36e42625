// bitlens: the desktop app. `bitlens [MODEL] [--data DATA] [--screenshot FILE.png]`; MODEL is a
// model file or a demo zoo name (default fashion-cnn). With --screenshot the window is saved to
// FILE once the model (and data) are on screen, and the app quits (exit code 3 when something
// could not be opened; the screenshot is still written).

#include "main_window.h"

#include <QApplication>
#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QPixmap>
#include <QTimer>

#include <cstdio>
#include <memory>

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
    parser.process(app);

    const QStringList positional = parser.positionalArguments();
    if (positional.size() > 1) {
        std::fprintf(stderr, "error: expected at most one MODEL, got %lld\n",
                     static_cast<long long>(positional.size()));
        return 2;
    }
    const QString model = positional.isEmpty() ? QStringLiteral("fashion-cnn") : positional.front();
    const QString screenshot = parser.value(screenshotOption);

    // Results arrive through the event loop, so the connections below are made in time.
    bitlens::widgets::MainWindow window(model);
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
        QObject::connect(&window, &bitlens::widgets::MainWindow::errorShown, &window,
                         [saveWhenIdle, exitCode](const QString& message) {
                             std::fprintf(stderr, "%s\n", qPrintable(message));
                             *exitCode = kExitBadInput;
                             saveWhenIdle();
                         });
    }
    window.show();
    if (const QString data = parser.value(dataOption); !data.isEmpty())
        window.openData(data);
    return QApplication::exec();
}
