// bitlens: the desktop app. `bitlens [MODEL] [--data DATA] [--scheme SCHEME]...
// [--compare | --sensitivity | --generate PROMPT] [--report FILE] [--tab NAME]
// [--screenshot FILE.png]`; MODEL is a model file or a demo zoo name (default fashion-cnn).
// --scheme runs SCHEME once the model (and data) are open (given twice or more: one after the
// other, each into the history); --compare then runs every preset, --sensitivity the
// sensitivity sweep of the scheme, --generate continues PROMPT in the Generate tab with the
// float model and the scheme (the last run's quantized model, reused; without --scheme the
// scheme panel's, nothing run before; "bitlens: first token on screen after X s"); --tab shows that
// result tab ("Side by side" shows the last two runs). Each job's wall time goes to stderr
// ("bitlens: static-int8 ran in 3.2 s"). With --screenshot the window is saved to FILE once every
// job has ended, and the app quits (exit code 3 when something could not be opened or run; the
// screenshot is still written). --export FILE (with --scheme) exports the last run to FILE
// (format by its extension) and verifies it; the Export tab shows the verdict. The files of
// --screenshot, --screenshot-tabs and --export are checked before the model opens
// (io::checkWritable): one that cannot be written exits at once, as bitlens-cli does (3 for a
// missing folder, 5 for a target that cannot be written or replaced).

#include "main_window.h"
#include "exec/omp_env.h"
#include "io/file_util.h"
#include "generate_view.h"
#include "report_view.h"

#include <QApplication>
#include <QCommandLineOption>
#include <QSize>
#include <QTabWidget>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QIcon>
#include <QPixmap>
#include <QTimer>

#include <cstdio>
#include <functional>
#include <memory>
#include <utility>

namespace {

constexpr int kExitBadInput = 3;
constexpr int kExitRuntime = 5;

/// The application icon, compiled in from resources/bitlens.qrc (PNGs rendered from
/// resources/bitlens.svg at build time): every window, the taskbar and QMessageBox::about use it.
QIcon applicationIcon()
{
    QIcon icon;
    for (const int size : {16, 32, 48, 64, 128, 256})
        icon.addFile(QStringLiteral(":/icons/bitlens/%1.png").arg(size), QSize(size, size));
    return icon;
}

} // namespace

int main(int argc, char** argv)
{
    // Before anything else: LibTorch's OpenMP threads sleep instead of spinning (exec/omp_env.h).
    bitlens::exec::usePassiveOpenMp(argv);
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("BitLens"));
    QApplication::setApplicationName(QStringLiteral("BitLens"));
    QApplication::setApplicationVersion(QStringLiteral(BITLENS_VERSION));
    QApplication::setWindowIcon(applicationIcon());
    // Matches the installed org.bitlens.BitLens.desktop, so desktops (and Wayland's app id)
    // tie the window to its menu entry and icon.
    QApplication::setDesktopFileName(QStringLiteral("org.bitlens.BitLens"));

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
                       "(e.g. static-int8, w4-int4:group=64); repeat to run several in turn."),
        QStringLiteral("SCHEME"));
    parser.addOption(schemeOption);
    const QCommandLineOption tabOption(
        QStringLiteral("tab"),
        QStringLiteral("Show the result tab NAME (Layers, \"Layer map\", Memory, Throughput, "
                       "Compare, Sensitivity, History, \"Side by side\", Teach, Hardware, Plan, "
                       "Training, Export, Generate)."),
        QStringLiteral("NAME"));
    parser.addOption(tabOption);
    const QCommandLineOption compareOption(
        QStringLiteral("compare"),
        QStringLiteral("Once the model is open (and the --scheme runs ended), run Compare all "
                       "schemes."));
    parser.addOption(compareOption);
    const QCommandLineOption sensitivityOption(
        QStringLiteral("sensitivity"),
        QStringLiteral("Once the model is open (and the --scheme runs ended), run the "
                       "sensitivity sweep of the scheme (unless --compare is given)."));
    parser.addOption(sensitivityOption);
    const QCommandLineOption generateOption(
        QStringLiteral("generate"),
        QStringLiteral("Once the model is open (and the --scheme runs ended), continue PROMPT "
                       "with the float and the quantized model in the Generate tab (unless "
                       "--compare or --sensitivity is given)."),
        QStringLiteral("PROMPT"));
    parser.addOption(generateOption);
    const QCommandLineOption reportOption(
        QStringLiteral("report"),
        QStringLiteral("Open a saved report.json, compare or sensitivity file."),
        QStringLiteral("FILE"));
    parser.addOption(reportOption);
    const QCommandLineOption exportOption(
        QStringLiteral("export"),
        QStringLiteral("Once the --scheme runs ended, export the last run to FILE (.onnx, "
                       ".safetensors or .gguf) and verify it."),
        QStringLiteral("FILE"));
    parser.addOption(exportOption);
    const QCommandLineOption sizeOption(
        QStringLiteral("size"),
        QStringLiteral("Window size WIDTHxHEIGHT in pixels (e.g. 1600x1000), for screenshots."),
        QStringLiteral("WxH"));
    parser.addOption(sizeOption);
    const QCommandLineOption tabsOption(
        QStringLiteral("screenshot-tabs"),
        QStringLiteral("Like --screenshot, but save every result tab, one PNG each, as "
                       "PREFIX-TAB.png (tab names in lower case, spaces as dashes)."),
        QStringLiteral("PREFIX"));
    parser.addOption(tabsOption);
    parser.process(app);

    const QStringList positional = parser.positionalArguments();
    if (positional.size() > 1) {
        std::fprintf(stderr, "error: expected at most one MODEL, got %lld\n",
                     static_cast<long long>(positional.size()));
        return 2;
    }
    const QString model = positional.isEmpty() ? QStringLiteral("fashion-cnn") : positional.front();
    const QString screenshot = parser.value(screenshotOption);
    const QString tabsPrefix = parser.value(tabsOption);
    QSize size;
    if (const QString text = parser.value(sizeOption); !text.isEmpty()) {
        const QStringList parts = text.split(QLatin1Char('x'));
        bool okW = false;
        bool okH = false;
        if (parts.size() == 2)
            size = QSize(parts[0].toInt(&okW), parts[1].toInt(&okH));
        if (!okW || !okH || size.width() < 320 || size.height() < 240) {
            std::fprintf(stderr, "error: --size takes WIDTHxHEIGHT (at least 320x240), got %s\n",
                         qPrintable(text));
            return 2;
        }
    }
    const QStringList schemes = parser.values(schemeOption);
    const QString data = parser.value(dataOption);
    const QString exportFile = parser.value(exportOption);
    if (!exportFile.isEmpty() && schemes.isEmpty()) {
        std::fprintf(stderr, "error: --export needs a --scheme run to export\n");
        return 2;
    }

    // Every file this run will write is checked before the model opens (io::checkWritable, as
    // bitlens-cli does): a missing folder, a device or a FIFO fails now, not after the jobs.
    // --screenshot-tabs writes PREFIX-<tab>.png: its folder is checked through one such name.
    int refusedExit = 0;
    const auto notWritable = [&refusedExit](const QString& file, bitlens::io::OutputKind kind) {
        auto checked = bitlens::io::checkWritable(file.toStdString(), kind);
        if (checked)
            return false;
        std::fprintf(stderr, "%s\n", checked.error().userMessage().c_str());
        refusedExit = bitlens::exitCode(checked.error().code);
        return true;
    };
    using bitlens::io::OutputKind;
    if ((!screenshot.isEmpty() && notWritable(screenshot, OutputKind::File)) ||
        (!tabsPrefix.isEmpty() &&
         notWritable(tabsPrefix + QStringLiteral("-layers.png"), OutputKind::File)) ||
        (!exportFile.isEmpty() &&
         notWritable(exportFile, QFileInfo(exportFile).suffix().toLower() ==
                                         QLatin1String("safetensors")
                                     ? OutputKind::FileOrFolder
                                     : OutputKind::File)))
        return refusedExit;

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
    const bool compare = parser.isSet(compareOption);
    const bool sensitivity = parser.isSet(sensitivityOption);
    const bool generate = parser.isSet(generateOption);
    const QString prompt = parser.value(generateOption);
    // True until the last requested job has been started (and so keeps the window busy): the
    // screenshot must not be taken in the idle moment between the model's open and the data's,
    // or between the data and the first run (it was, on a fast machine: no run on the picture).
    auto jobsPending =
        std::make_shared<bool>(!schemes.isEmpty() || compare || sensitivity || generate);
    if (!schemes.isEmpty() || compare || sensitivity || generate) {
        // Run once the model is open and, when --data was given, the data too; each report
        // starts the next scheme, the last one the comparison (--compare). Connected before the
        // screenshot handlers, so the next job has started (window busy) when they look.
        auto started = std::make_shared<bool>(false);
        auto next = std::make_shared<int>(0);
        auto clock = std::make_shared<QElapsedTimer>();
        const QString tab = parser.value(tabOption);
        const auto finish = [&window, compare, sensitivity, generate, prompt, clock, tab,
                             exportFile, jobsPending] {
            *jobsPending = false;
            if (!exportFile.isEmpty()) {
                const QString suffix = QFileInfo(exportFile).suffix().toLower();
                clock->start();
                window.exportRun(suffix, exportFile, true);
                return;
            }
            if (compare || sensitivity) {
                clock->start();
                if (compare)
                    window.runComparison();
                else
                    window.runSensitivitySweep();  // as asked: no cost dialog
                return;
            }
            if (generate) {
                clock->start();
                window.generate(prompt);  // a refusal is errorShown: the screenshot follows
                return;
            }
            const int runs = window.reportView()->historyModel()->rowCount();
            if (tab.compare(QStringLiteral("side by side"), Qt::CaseInsensitive) == 0 && runs >= 2)
                window.reportView()->showSideBySide(runs - 2, runs - 1);
        };
        const auto runNext = [&window, schemes, next, clock, finish] {
            if (*next >= schemes.size()) {
                finish();
                return;
            }
            clock->start();
            window.runScheme(schemes[(*next)++]);
        };
        const auto runWhenReady = [&window, data, started, runNext] {
            if (*started || !window.currentModel() || (!data.isEmpty() && !window.currentData()))
                return;
            *started = true;
            runNext();
        };
        QObject::connect(&window, &bitlens::widgets::MainWindow::reportShown, &window,
                         [schemes, next, clock, runNext] {
                             if (*next == 0 || !clock->isValid())
                                 return;
                             std::fprintf(stderr, "bitlens: %s ran in %.1f s\n",
                                          qPrintable(schemes[*next - 1]),
                                          static_cast<double>(clock->elapsed()) / 1000.0);
                             clock->invalidate();
                             runNext();
                         });
        const auto reportTime = [clock](const char* what) {
            if (!clock->isValid())
                return;
            std::fprintf(stderr, "bitlens: %s ran in %.1f s\n", what,
                         static_cast<double>(clock->elapsed()) / 1000.0);
            clock->invalidate();
        };
        QObject::connect(&window, &bitlens::widgets::MainWindow::comparisonShown, &window,
                         [reportTime] { reportTime("compare all schemes"); });
        QObject::connect(&window, &bitlens::widgets::MainWindow::sensitivityShown, &window,
                         [reportTime] { reportTime("sensitivity"); });
        QObject::connect(&window, &bitlens::widgets::MainWindow::exportShown, &window,
                         [reportTime] { reportTime("export and verify"); });
        QObject::connect(&window, &bitlens::widgets::MainWindow::generateShown, &window,
                         [&window, reportTime] {
                             std::fprintf(stderr, "bitlens: first token on screen after %.2f s\n",
                                          static_cast<double>(
                                              window.generateView()->firstTokenMs()) /
                                              1000.0);
                             reportTime("generate");
                         });
        QObject::connect(&window, &bitlens::widgets::MainWindow::modelLoaded, &window,
                         runWhenReady);
        QObject::connect(&window, &bitlens::widgets::MainWindow::dataLoaded, &window,
                         runWhenReady);
    }
    if (!screenshot.isEmpty() || !tabsPrefix.isEmpty()) {
        // A message box is a separate window that grab() would miss: report on stderr instead.
        window.setDialogsEnabled(false);
        auto exitCode = std::make_shared<int>(0);
        auto saved = std::make_shared<bool>(false);
        // Once every requested job ended, let the window lay out and paint, then grab it (or
        // each result tab in turn, 300 ms apart so that charts lay out).
        const auto saveWhenIdle = [&window, screenshot, tabsPrefix, exitCode, saved, jobsPending,
                                   data] {
            // An error ends the wait: what is on screen then is the picture asked for.
            const bool waiting = *exitCode == 0 &&
                                 (*jobsPending || (!data.isEmpty() && !window.currentData()));
            if (window.isBusy() || *saved || waiting)
                return;
            *saved = true;
            if (!tabsPrefix.isEmpty()) {
                QTabWidget* tabs = window.reportView()->tabs();
                auto index = std::make_shared<int>(0);
                auto step = std::make_shared<std::function<void()>>();
                // The step schedules itself through a weak reference (no ownership cycle); the
                // timers' copies keep it alive until the last tab.
                *step = [&window, tabs, tabsPrefix, exitCode, index,
                         self = std::weak_ptr<std::function<void()>>(step)] {
                    if (*index > 0) {
                        const QString name = tabs->tabText(*index - 1)
                                                 .remove(QLatin1Char('&'))
                                                 .toLower()
                                                 .replace(QLatin1Char(' '), QLatin1Char('-'));
                        const QString file = tabsPrefix + QLatin1Char('-') + name +
                                             QStringLiteral(".png");
                        if (!window.grab().save(file, "PNG")) {
                            std::fprintf(stderr, "error: %s: cannot write the screenshot\n",
                                         qPrintable(file));
                            QApplication::exit(kExitRuntime);
                            return;
                        }
                        std::fprintf(stderr, "bitlens: saved %s\n", qPrintable(file));
                    }
                    if (*index >= tabs->count()) {
                        QApplication::exit(*exitCode);
                        return;
                    }
                    tabs->setCurrentIndex((*index)++);
                    if (const auto next = self.lock())
                        QTimer::singleShot(300, &window, [next] { (*next)(); });
                };
                QTimer::singleShot(300, &window, [step] { (*step)(); });
                return;
            }
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
        QObject::connect(&window, &bitlens::widgets::MainWindow::comparisonShown, &window,
                         saveWhenIdle);
        QObject::connect(&window, &bitlens::widgets::MainWindow::sensitivityShown, &window,
                         saveWhenIdle);
        QObject::connect(&window, &bitlens::widgets::MainWindow::exportShown, &window,
                         saveWhenIdle);
        QObject::connect(&window, &bitlens::widgets::MainWindow::generateShown, &window,
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
    if (size.isValid())
        window.resize(size);
    window.show();
    if (!data.isEmpty()) {
        // Text data is cut by the model's tokenizer: open it once the model is there (a large
        // model's open takes a moment, and data opened before it would find no tokenizer).
        auto opened = std::make_shared<bool>(false);
        QObject::connect(&window, &bitlens::widgets::MainWindow::modelLoaded, &window,
                         [&window, data, opened] {
                             if (!std::exchange(*opened, true))
                                 window.openData(data);
                         });
        if (window.currentModel() && !std::exchange(*opened, true))
            window.openData(data);
    }

    return QApplication::exec();
}
