// Export from the window (issue #6): File > Export Quantized Model… writes the run on screen as
// ONNX QDQ / safetensors / GGUF through the core's export front as a job, verifies the file and
// shows the verdict in the Export tab; Cancel at any moment leaves no file; a format that cannot
// hold the scheme is an error and the window stays usable; a file that does not match the run
// is a loud failure. Runs on the fashion-cnn demo model (skips when it is not built).

#include "export_dialog.h"
#include "export_view.h"
#include "job_runner.h"
#include "main_window_messages.h"
#include "main_window.h"
#include "quant_job.h"
#include "report_view.h"

#include "zoo/zoo.h"

#include <QAction>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

using bitlens::widgets::ExportDialog;
using bitlens::widgets::ExportView;
using bitlens::widgets::MainWindow;

class TestExportDialog : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void extensionsFollowTheFormat();
    void onnxSaturationAdviceFollowsTheScheme();
    void interopOptionsAreNamedWithTheirDefaults();
    void exportOnnxAndVerifyThroughTheDialog();
    void verifyExistingFileAndLoudMismatch();
    void cancelAtAnyMomentLeavesNoFile();
    void earlierRunWithOverridesIsPreparedAgain();
    void unsupportedPairingIsAnErrorAndWindowStaysUsable();
    void targetsThatAreNotFilesAreRefusedAndLinksWrittenThrough();
    void sequenceModelFiguresAreShown();
    void defaultFormatFollowsTheScheme();

private:
    bool runAndWait(const QString& scheme);
    bool exportAndWait(const QString& format, const QString& path, bool verify = true);
    /// Files in the temporary folder (hidden ones too: staging files must not stay).
    QStringList filesInDir() const;

    QTemporaryDir m_dir;
    std::unique_ptr<MainWindow> m_window;
};

void TestExportDialog::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens")).clear();
    QVERIFY(m_dir.isValid());
    if (!bitlens::zoo::isBuilt("fashion-cnn"))
        QSKIP("fashion-cnn is not built (bitlens-cli zoo build fashion-cnn)");
    m_window = std::make_unique<MainWindow>();
    m_window->setDialogsEnabled(false);
    m_window->show();
    QSignalSpy loaded(m_window.get(), &MainWindow::modelLoaded);
    m_window->openModel(QStringLiteral("fashion-cnn"));
    QVERIFY(loaded.wait(60000));
    // Nothing to export before a run.
    auto* action = m_window->findChild<QAction*>(QStringLiteral("actionExport"));
    QVERIFY(action);
    QVERIFY(!action->isEnabled());
    QVERIFY(runAndWait(QStringLiteral("static-int8")));
    QVERIFY(action->isEnabled());
}

bool TestExportDialog::runAndWait(const QString& scheme)
{
    QSignalSpy shown(m_window.get(), &MainWindow::reportShown);
    QSignalSpy errors(m_window.get(), &MainWindow::errorShown);
    m_window->runScheme(scheme);
    const bool ok = shown.wait(120000) && errors.isEmpty();
    if (!errors.isEmpty())
        qWarning("%s", qPrintable(errors.front().front().toString()));
    return ok;
}

bool TestExportDialog::exportAndWait(const QString& format, const QString& path, bool verify)
{
    QSignalSpy shown(m_window.get(), &MainWindow::exportShown);
    QSignalSpy stopped(m_window.get(), &MainWindow::quantizationStopped);
    if (!m_window->exportRun(format, path, verify))
        return false;
    for (int i = 0; i < 1200 && shown.isEmpty() && stopped.isEmpty(); ++i)
        shown.wait(100);
    return !shown.isEmpty();
}

/// Issue #49: the target is checked before the job (io::checkWritable); a FIFO or a missing
/// folder is refused and stays as it was, a symbolic link is written at its destination.
void TestExportDialog::targetsThatAreNotFilesAreRefusedAndLinksWrittenThrough()
{
    if (!m_window)
        QSKIP("no window");
    QVERIFY(runAndWait(QStringLiteral("static-int8")));
    QSignalSpy errors(m_window.get(), &MainWindow::errorShown);
    const QString fifo = m_dir.filePath(QStringLiteral("pipe.onnx"));
    QCOMPARE(::mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
    QVERIFY(!m_window->exportRun(QStringLiteral("onnx"), fifo, false));
    QCOMPARE(errors.size(), 1);
    QVERIFY2(errors.back().front().toString().contains(QStringLiteral("is a FIFO")),
             qPrintable(errors.back().front().toString()));
    QVERIFY(!m_window->isBusy());
    QVERIFY(QFileInfo(fifo).exists() && !QFileInfo(fifo).isFile());
    QVERIFY(QFile::remove(fifo));

    const QString nowhere = m_dir.filePath(QStringLiteral("missing/m.onnx"));
    QVERIFY(!m_window->exportRun(QStringLiteral("onnx"), nowhere, false));
    QCOMPARE(errors.size(), 2);
    QVERIFY2(errors.back().front().toString().contains(QStringLiteral("does not exist")),
             qPrintable(errors.back().front().toString()));
    QVERIFY(!QFileInfo::exists(m_dir.filePath(QStringLiteral("missing"))));

    const QString real = m_dir.filePath(QStringLiteral("real.onnx"));
    const QString link = m_dir.filePath(QStringLiteral("link.onnx"));
    {
        QFile old(real);
        QVERIFY(old.open(QIODevice::WriteOnly));
        old.write("old");
    }
    QVERIFY(QFile::link(real, link));
    QVERIFY(exportAndWait(QStringLiteral("onnx"), link, false));
    QCOMPARE(errors.size(), 2);
    QVERIFY(QFileInfo(link).isSymLink());
    QVERIFY(QFileInfo(real).size() > 1000);
    QVERIFY(QFile::remove(link));
    QVERIFY(QFile::remove(real));
}

QStringList TestExportDialog::filesInDir() const
{
    return QDir(m_dir.path()).entryList(QDir::Files | QDir::Hidden, QDir::Name);
}

void TestExportDialog::extensionsFollowTheFormat()
{
    using bitlens::widgets::withExportExtension;
    QCOMPARE(withExportExtension(QStringLiteral("/x/m-static-int8"), QStringLiteral("onnx")),
             QStringLiteral("/x/m-static-int8.onnx"));
    QCOMPARE(withExportExtension(QStringLiteral("/x/m.onnx"), QStringLiteral("gguf")),
             QStringLiteral("/x/m.gguf"));
    QCOMPARE(withExportExtension(QStringLiteral("/x/m.GGUF"), QStringLiteral("safetensors")),
             QStringLiteral("/x/m.safetensors"));

    QString asked;
    ExportDialog dialog(QStringLiteral("run"), QStringLiteral("/tmp/model"),
                        [&asked](const QString& format) {
                            asked = format;
                            return format == QLatin1String("gguf") ? QStringLiteral("no room")
                                                                   : QString();
                        });
    QCOMPARE(dialog.format(), QStringLiteral("onnx"));
    QCOMPARE(dialog.path(), QStringLiteral("/tmp/model.onnx"));
    QVERIFY(dialog.verifyAfterExport());
    QVERIFY(dialog.exportButton()->isEnabled());
    dialog.setFormat(QStringLiteral("gguf"));
    QCOMPARE(asked, QStringLiteral("gguf"));
    QCOMPARE(dialog.path(), QStringLiteral("/tmp/model.gguf"));
    QCOMPARE(dialog.problem(), QStringLiteral("no room"));
    QVERIFY(!dialog.exportButton()->isEnabled());
    dialog.setFormat(QStringLiteral("safetensors"));
    QCOMPARE(dialog.path(), QStringLiteral("/tmp/model.safetensors"));
    QVERIFY(dialog.problem().isEmpty());
    QVERIFY(dialog.exportButton()->isEnabled());
    dialog.setPath(QString());
    QVERIFY(!dialog.exportButton()->isEnabled());
}

void TestExportDialog::onnxSaturationAdviceFollowsTheScheme()
{
    // The core's advice: 8-bit int8 weights with u8 activations to ONNX get the note about
    // onnxruntime's saturation on CPUs without VNNI; reduce-range, weight-only schemes and other
    // formats do not.
    using bitlens::widgets::exportAdvice;
    bitlens::widgets::QuantRequest run;
    run.scheme = "static-int8";
    QVERIFY(QString::fromStdString(exportAdvice(run, "onnx")).contains(QLatin1String("reduce-range=true")));
    QVERIFY(exportAdvice(run, "safetensors").empty());
    run.scheme = "static-int8:reduce-range=true";
    QVERIFY(exportAdvice(run, "onnx").empty());
    run.scheme = "w4-int4";
    QVERIFY(exportAdvice(run, "onnx").empty());
    run.scheme = "dynamic-int8";
    QVERIFY(!exportAdvice(run, "onnx").empty());

    ExportDialog dialog(QStringLiteral("static-int8 on fashion-cnn"), QStringLiteral("/tmp/model"),
                        [](const QString&) { return QString(); });
    run.scheme = "static-int8";
    dialog.setAdvice([run](const QString& format) {
        return QString::fromStdString(exportAdvice(run, format.toStdString()));
    });
    dialog.show();
    auto* label = dialog.findChild<QLabel*>(QStringLiteral("exportAdvice"));
    QVERIFY(label);
    QCOMPARE(dialog.format(), QStringLiteral("onnx"));
    QVERIFY(label->isVisible());
    QVERIFY(label->text().contains(QLatin1String("without VNNI")));
    QVERIFY(dialog.exportButton()->isEnabled());  // advice, not a refusal
    dialog.setFormat(QStringLiteral("gguf"));
    QVERIFY(!label->isVisible());
    QVERIFY(dialog.advice().isEmpty());
}

/// Issue #37: the dialog names the interop options with their defaults (int8 weight range,
/// reduce-range) and the chosen format's rule for groups that do not divide a row.
void TestExportDialog::interopOptionsAreNamedWithTheirDefaults()
{
    using bitlens::widgets::exportInteropOptions;
    bitlens::widgets::QuantRequest run;
    run.scheme = "static-int8:wrange=127";
    const auto lines = exportInteropOptions(run, "onnx");
    QCOMPARE(lines.size(), std::size_t{3});
    QVERIFY2(QString::fromStdString(lines[0]).startsWith(QLatin1String("wrange = 127 (default 128)")),
             lines[0].c_str());
    QVERIFY2(QString::fromStdString(lines[1]).startsWith(
                 QLatin1String("reduce-range = false (default false)")),
             lines[1].c_str());
    if (!m_window)
        QSKIP("no window");
    // The window's run (static-int8): the defaults, and the rule follows the format.
    m_window->findChild<QAction*>(QStringLiteral("actionExport"))->trigger();
    auto* dialog = m_window->findChild<ExportDialog*>(QStringLiteral("exportDialog"));
    QVERIFY(dialog);
    auto* label = dialog->findChild<QLabel*>(QStringLiteral("exportInterop"));
    QVERIFY(label);
    dialog->setFormat(QStringLiteral("onnx"));
    QVERIFY(label->isVisible());
    QCOMPARE(dialog->interopOptions().size(), 3);
    QVERIFY2(label->text().contains(QLatin1String("wrange = 128 (default 128)")),
             qPrintable(label->text()));
    QVERIFY(label->text().contains(QLatin1String("[-127, 127]")));
    QVERIFY(label->text().contains(QLatin1String("reduce-range = false (default false)")));
    QVERIFY2(label->text().contains(QLatin1String("partial groups: int4 / int8 groups that do not "
                                                  "divide a row: kept, the last block shorter")),
             qPrintable(label->text()));
    dialog->setFormat(QStringLiteral("safetensors"));
    QVERIFY2(label->text().contains(QLatin1String("refused before writing")),
             qPrintable(label->text()));
    dialog->setFormat(QStringLiteral("gguf"));
    QVERIFY2(label->text().contains(QLatin1String("as llama-quantize does")),
             qPrintable(label->text()));
    dialog->reject();
    QTest::qWait(10);
}

void TestExportDialog::exportOnnxAndVerifyThroughTheDialog()
{
    if (!m_window)
        QSKIP("no window");
    const QString target = m_dir.filePath(QStringLiteral("fashion-static-int8.onnx"));
    QSignalSpy shown(m_window.get(), &MainWindow::exportShown);
    QSignalSpy errors(m_window.get(), &MainWindow::errorShown);
    m_window->findChild<QAction*>(QStringLiteral("actionExport"))->trigger();
    auto* dialog = m_window->findChild<ExportDialog*>(QStringLiteral("exportDialog"));
    QVERIFY(dialog);
    QVERIFY(dialog->isVisible());
    QVERIFY(dialog->verifyAfterExport());
    dialog->setFormat(QStringLiteral("onnx"));
    dialog->setPath(target);
    QVERIFY(dialog->problem().isEmpty());
    QVERIFY(dialog->exportButton()->isEnabled());
    dialog->exportButton()->click();
    QVERIFY(m_window->isBusy());
    QVERIFY(shown.wait(120000));
    QVERIFY2(errors.isEmpty(), errors.isEmpty() ? "" : qPrintable(errors.front().front().toString()));

    QVERIFY(QFileInfo(target).isFile());
    QCOMPARE(filesInDir(), QStringList{QStringLiteral("fashion-static-int8.onnx")});
    const ExportView* view = m_window->exportView();
    const nlohmann::json& result = view->result();
    QCOMPARE(QString::fromStdString(result["path"].get<std::string>()), target);
    QCOMPARE(result["format"].get<std::string>(), std::string("onnx"));
    QCOMPARE(result["bytes"].get<qint64>(), QFileInfo(target).size());
    // The run's own prepared model went out: nothing was calibrated again.
    QVERIFY(result["reused_run_model"].get<bool>());
    const nlohmann::json& verify = result["verify"];
    QVERIFY(verify.is_object());
    QVERIFY(verify["ok"].get<bool>());
    QCOMPARE(verify["max_abs_diff_same_rounding"].get<double>(), 0.0);
    QCOMPARE(verify["weights_checked"].get<int>(), 4);
    QCOMPARE(verify["weights_mismatched"].get<int>(), 0);
    QVERIFY(verify["samples"].get<qint64>() > 0);
    QVERIFY(verify["metric_app"].is_number() && verify["metric_file"].is_number());

    QCOMPARE(view->verdict(), ExportView::Verdict::Pass);
    QVERIFY(view->verdictText().startsWith(QStringLiteral("PASS")));
    QCOMPARE(view->rowText(QStringLiteral("Max |diff|, same rounding")),
             QStringLiteral("0 (identical) (allowed 0: bit for bit)"));
    QCOMPARE(view->rowText(QStringLiteral("Weights compared")),
             QStringLiteral("4 layers, 0 mismatched"));
    QVERIFY(view->rowText(QStringLiteral("File")).endsWith(QStringLiteral("fashion-static-int8.onnx")));
    QCOMPARE(m_window->reportView()->tabs()->tabText(m_window->reportView()->tabs()->currentIndex()),
             QStringLiteral("Export"));
    QVERIFY(!m_window->isBusy());
}

void TestExportDialog::verifyExistingFileAndLoudMismatch()
{
    if (!m_window)
        QSKIP("no window");
    const QString file = m_dir.filePath(QStringLiteral("fashion-static-int8.onnx"));
    QVERIFY(QFileInfo(file).isFile());
    QSignalSpy shown(m_window.get(), &MainWindow::exportShown);
    QSignalSpy errors(m_window.get(), &MainWindow::errorShown);

    // The file against the run it came from: PASS.
    QVERIFY(m_window->verifyExportedFile(file));
    QVERIFY(shown.wait(120000));
    QVERIFY(errors.isEmpty());
    QCOMPARE(m_window->exportView()->verdict(), ExportView::Verdict::Pass);
    QVERIFY(m_window->exportView()->result()["verified_only"].get<bool>());

    // The same file against another run: a loud failure (red verdict and an error dialog).
    QVERIFY(runAndWait(QStringLiteral("static-int8:observer=percentile")));
    shown.clear();
    QVERIFY(m_window->verifyExportedFile(file));
    QVERIFY(shown.wait(120000));
    QCOMPARE(m_window->exportView()->verdict(), ExportView::Verdict::Fail);
    QVERIFY(m_window->exportView()->verdictText().startsWith(QStringLiteral("FAIL")));
    QVERIFY(!m_window->exportView()->result()["verify"]["ok"].get<bool>());
    QCOMPARE(errors.size(), 1);
    QVERIFY(errors.front().front().toString().contains(QStringLiteral("Verification FAILED")));
    QVERIFY(m_window->currentModel());
    QVERIFY(!m_window->currentReport().is_null());

    // Back to the run the later tests export.
    QVERIFY(runAndWait(QStringLiteral("static-int8")));
}

void TestExportDialog::cancelAtAnyMomentLeavesNoFile()
{
    if (!m_window)
        QSKIP("no window");
    const QString target = m_dir.filePath(QStringLiteral("cancelled.onnx"));
    const QString existing = m_dir.filePath(QStringLiteral("existing.onnx"));
    {
        QFile f(existing);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("the user's own file");
    }
    const QStringList before = filesInDir();
    bitlens::widgets::JobRunner* jobs = m_window->quantJobs();
    // Cancel right away, at the first progress report, once verifying, and with a file of that
    // name already there: never a new file, never a staging file, the old file untouched.
    struct Moment {
        QString path;
        QString stage;  ///< cancel at the first progress whose stage contains this ("" = at once)
    };
    const QList<Moment> moments = {{target, QString()},
                                   {target, QStringLiteral("exporting")},
                                   {target, QStringLiteral("verifying")},
                                   {existing, QStringLiteral("verifying")}};
    for (const Moment& moment : moments) {
        QSignalSpy stopped(m_window.get(), &MainWindow::quantizationStopped);
        QSignalSpy shown(m_window.get(), &MainWindow::exportShown);
        bool cancelled = false;
        const auto connection = connect(
            jobs, &bitlens::widgets::JobRunner::progressed, this,
            [&](quint64, double, const QString& stage) {
                if (!cancelled && !moment.stage.isEmpty() && stage.contains(moment.stage)) {
                    cancelled = true;
                    m_window->cancelQuantization();
                }
            });
        QVERIFY(m_window->exportRun(QStringLiteral("onnx"), moment.path, true));
        if (moment.stage.isEmpty()) {
            cancelled = true;
            m_window->cancelQuantization();
        }
        for (int i = 0; i < 1200 && stopped.isEmpty() && shown.isEmpty(); ++i)
            stopped.wait(100);
        disconnect(connection);
        QVERIFY2(cancelled, qPrintable(moment.stage));
        QVERIFY2(shown.isEmpty(), qPrintable(moment.stage));
        // Let the cancelled worker finish and its dropped result arrive.
        QVERIFY(jobs->waitForWorkers(60000));
        QCoreApplication::processEvents();
        QCoreApplication::processEvents();
        QCOMPARE(filesInDir(), before);
        QVERIFY(!m_window->isBusy());
    }
    QFile f(existing);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), QByteArray("the user's own file"));
    QVERIFY(QFile::remove(existing));
}

void TestExportDialog::earlierRunWithOverridesIsPreparedAgain()
{
    if (!m_window)
        QSKIP("no window");
    // A run with a layer kept in float, then another run: the first one's model is no longer
    // kept, so exporting it (selected in the history) prepares it again from the scheme and
    // overrides read back from its report, and the file still matches it bit for bit.
    QVERIFY(m_window->setLayerOverride(QStringLiteral("fc1"), QStringLiteral("float")));
    QVERIFY(runAndWait(QStringLiteral("static-int8")));
    const int overrideRow = m_window->reportView()->historyModel()->rowCount() - 1;
    m_window->clearLayerOverride(QStringLiteral("fc1"));
    QVERIFY(runAndWait(QStringLiteral("dynamic-int8")));
    QVERIFY(m_window->showHistoryRun(overrideRow));

    const QString target = m_dir.filePath(QStringLiteral("override.onnx"));
    QSignalSpy errors(m_window.get(), &MainWindow::errorShown);
    QVERIFY(exportAndWait(QStringLiteral("onnx"), target, true));
    QVERIFY2(errors.isEmpty(), errors.isEmpty() ? "" : qPrintable(errors.front().front().toString()));
    const nlohmann::json& result = m_window->exportView()->result();
    QVERIFY(!result["reused_run_model"].get<bool>());
    QCOMPARE(result["scheme"].get<std::string>(),
             std::string("static-int8 with overrides fc1=float"));
    QCOMPARE(result["quantized_layers"].get<int>(), 3);
    QCOMPARE(result["float_layers"].get<int>(), 1);
    QVERIFY(result["verify"]["ok"].get<bool>());
    QCOMPARE(result["verify"]["max_abs_diff_same_rounding"].get<double>(), 0.0);
    QCOMPARE(result["verify"]["weights_checked"].get<int>(), 3);
    QCOMPARE(m_window->exportView()->verdict(), ExportView::Verdict::Pass);
    QVERIFY(QFile::remove(target));
}

void TestExportDialog::unsupportedPairingIsAnErrorAndWindowStaysUsable()
{
    if (!m_window)
        QSKIP("no window");
    QVERIFY(runAndWait(QStringLiteral("fp8-e4m3")));
    const QStringList before = filesInDir();
    QSignalSpy errors(m_window.get(), &MainWindow::errorShown);
    const QString onnx = m_dir.filePath(QStringLiteral("fp8.onnx"));
    QVERIFY(!m_window->exportRun(QStringLiteral("onnx"), onnx, true));
    QCOMPARE(errors.size(), 1);
    const QString message = errors.front().front().toString();
    QVERIFY2(message.contains(QStringLiteral("cannot be exported to ONNX")), qPrintable(message));
    QVERIFY(!m_window->isBusy());
    QCOMPARE(filesInDir(), before);
    QVERIFY(m_window->currentModel());
    QVERIFY(!m_window->currentReport().is_null());

    // The dialog says so before anything runs, and Export stays disabled for that format.
    m_window->findChild<QAction*>(QStringLiteral("actionExport"))->trigger();
    auto* dialog = m_window->findChild<ExportDialog*>(QStringLiteral("exportDialog"));
    QVERIFY(dialog);
    dialog->setFormat(QStringLiteral("onnx"));
    QVERIFY(dialog->problem().contains(QStringLiteral("cannot be exported to ONNX")));
    QVERIFY(!dialog->exportButton()->isEnabled());
    // Every format is offered; one that cannot hold the scheme says why.
    QCOMPARE(dialog->findChild<QComboBox*>(QStringLiteral("exportFormat"))->count(), 3);
    dialog->reject();

    // The window is still usable: the same run exports to a format that holds FP8.
    const QString safetensors = m_dir.filePath(QStringLiteral("fp8.safetensors"));
    QVERIFY(exportAndWait(QStringLiteral("safetensors"), safetensors, true));
    QCOMPARE(errors.size(), 1);
    QVERIFY(QFileInfo(safetensors).isFile());
    QCOMPARE(m_window->exportView()->verdict(), ExportView::Verdict::Pass);
}

void TestExportDialog::sequenceModelFiguresAreShown()
{
    // Issue #37 item 2: a language model's verify shows perplexity app vs file, KLD and the
    // top-1 agreement per token position; an encoder's the embedding cosine.
    ExportView view;
    nlohmann::json lm = {{"format", "onnx"}, {"path", "/tmp/lm.onnx"}, {"bytes", 1000}};
    lm["verify"] = {{"ok", true},           {"samples", 2},
                    {"task", "lm"},         {"metric_name", "perplexity"},
                    {"metric_app", 12.5},   {"metric_file", 12.5125},
                    {"metric_tolerance", 0.002}, {"mean_kld", 1.5e-5},
                    {"top1_positions", 128}, {"argmax_disagreements", 3},
                    {"message", "ok"}};
    view.setResult(lm);
    QCOMPARE(view.verdict(), ExportView::Verdict::Pass);
    QCOMPARE(view.rowText(QStringLiteral("Perplexity in app vs file")),
             QStringLiteral("12.5000 vs 12.5125 (0.100 %; allowed 0.20 %), mean KLD 1.5e-05"));
    QCOMPARE(view.rowText(QStringLiteral("Top-1 disagreements")),
             QStringLiteral("3 of 128 token positions"));
    QVERIFY(view.rowText(QStringLiteral("Top-1 in app vs file")).isEmpty());

    nlohmann::json encoder = {{"format", "safetensors"}, {"path", "/tmp/m"}, {"bytes", 1000}};
    encoder["verify"] = {{"ok", true},          {"samples", 4},
                         {"task", "embedding"}, {"embedding_cosine_mean", 0.9985},
                         {"embedding_cosine_min", 0.997}, {"message", "ok"}};
    view.setResult(encoder);
    QCOMPARE(view.rowText(QStringLiteral("Embedding cosine, file vs app")),
             QStringLiteral("0.998500 (min 0.997000)"));
    QVERIFY(view.rowText(QStringLiteral("Top-1 disagreements")).isEmpty());
    QVERIFY(view.rowText(QStringLiteral("Perplexity in app vs file")).isEmpty());
}

/// Issue #47 item 5: the dialog opens on the format the run implies (a gguf-* scheme: GGUF, not
/// ONNX), its refusal of another format speaks of formats, not of the CLI's flags, and the
/// Export tab of a GGUF verification says nothing of ONNX's rounding.
void TestExportDialog::defaultFormatFollowsTheScheme()
{
    if (!m_window)
        QSKIP("no window");
    QSettings().setValue(QStringLiteral("export/format"), QStringLiteral("onnx"));
    QVERIFY(runAndWait(QStringLiteral("gguf-q4_0")));
    m_window->findChild<QAction*>(QStringLiteral("actionExport"))->trigger();
    auto* dialog = m_window->findChild<ExportDialog*>(QStringLiteral("exportDialog"));
    QVERIFY(dialog);
    QCOMPARE(dialog->format(), QStringLiteral("gguf"));
    QVERIFY(dialog->path().endsWith(QLatin1String(".gguf")));
    QVERIFY(dialog->problem().isEmpty());
    dialog->setFormat(QStringLiteral("onnx"));
    QVERIFY2(dialog->problem().contains(QLatin1String("only the GGUF format holds")),
             qPrintable(dialog->problem()));
    QVERIFY2(!dialog->problem().contains(QLatin1String("--")), qPrintable(dialog->problem()));
    dialog->reject();
    QTest::qWait(10);

    // A scheme ONNX holds keeps the format chosen last.
    QVERIFY(runAndWait(QStringLiteral("static-int8")));
    m_window->findChild<QAction*>(QStringLiteral("actionExport"))->trigger();
    dialog = m_window->findChild<ExportDialog*>(QStringLiteral("exportDialog"));
    QVERIFY(dialog);
    QCOMPARE(dialog->format(), QStringLiteral("onnx"));
    dialog->reject();
    QTest::qWait(10);

    ExportView view;
    view.setResult({{"path", "/tmp/m.gguf"},
                    {"format", "gguf"},
                    {"bytes", 1000},
                    {"verify",
                     {{"ok", true},
                      {"samples", 8},
                      {"max_abs_diff", 0.0},
                      {"max_abs_diff_same_rounding", 0.0},
                      {"output_abs_max", 3.5}}}});
    QVERIFY(view.rowText(QStringLiteral("Max |diff|, ONNX rounding")).isEmpty());
    QVERIFY(view.rowText(QStringLiteral("Max |diff|, file vs app")).startsWith(QLatin1String("0")));

    // The memory refusal (an 8B model on a small machine), in the window's words.
    const QString refusal = bitlens::widgets::window_text::reasonText(bitlens::Error::runtime(
        "quantize needs ~62.1 GB (float32 weights 32.1 GB), 21.9 GB available; use --limit / "
        "--seq-len, a smaller model, or a machine with more memory",
        "/models/llama-8b"));
    QVERIFY2(!refusal.contains(QLatin1String("--")), qPrintable(refusal));
    QVERIFY2(refusal.contains(QLatin1String("Evaluate, Tokens in the Scheme panel")),
             qPrintable(refusal));
}

QTEST_MAIN(TestExportDialog)
#include "test_export_dialog.moc"
