#include "export_control.h"

#include "export_dialog.h"
#include "export_view.h"
#include "job_runner.h"
#include "main_window.h"
#include "main_window_messages.h"
#include "quant_job.h"
#include "quant_panel.h"
#include "report_view.h"

#include "io/file_util.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QPushButton>
#include <QSettings>

#include <algorithm>
#include <QStatusBar>

#include <iterator>
#include <utility>

namespace bitlens::widgets {

using window_text::reasonText;

namespace {

/// A file name part from a scheme string: "static-int8:observer=mse" -> "static-int8-observer-mse".
QString fileNamePart(QString text)
{
    for (QChar& c : text)
        if (!c.isLetterOrNumber() && c != QLatin1Char('-') && c != QLatin1Char('_') &&
            c != QLatin1Char('.'))
            c = QLatin1Char('-');
    return text;
}

/// Where an export job writes before the window moves the file into place: a hidden file
/// beside the target with the same extension.
QString stagingPathFor(const QString& target, int number)
{
    const QFileInfo info(target);
    const QString suffix = info.suffix().isEmpty() ? QString() : QLatin1Char('.') + info.suffix();
    // One arg() call: a "%2" in the file's name must stay text, not become an argument marker.
    return info.dir().filePath(QStringLiteral(".%1.bitlens-export-%2-%3%4")
                                   .arg(info.completeBaseName(),
                                        QString::number(QCoreApplication::applicationPid()),
                                        QString::number(number), suffix));
}

} // namespace

ExportController::ExportController(MainWindow& window, JobRunner* jobs)
    : QObject(&window), m_window(window), m_jobs(jobs)
{
    connect(m_jobs, &JobRunner::resultDropped, this, [this](quint64 id) {
        // An export cancelled after it had written: its staging file goes.
        if (m_staging.contains(id))
            discardExport(m_staging.take(id).toStdString());
    });
    connect(m_jobs, &JobRunner::cancelled, this, [this] { m_runningJob = 0; });
}

ExportController::~ExportController()
{
    // The window waited for the workers before its children go: no job writes any more.
    for (const QString& staging : std::as_const(m_staging))
        discardExport(staging.toStdString());
}

void ExportController::showError(const QString& message) { m_window.showError(message); }

bool ExportController::isRunning() const
{
    return m_runningJob != 0 && m_jobs->currentId() == m_runningJob;
}

bool ExportController::exportableRun(QuantRequest& run, QString& spec)
{
    if (!m_window.m_session) {
        showError(tr("Open a model and run a scheme first: export writes a run's quantized "
                     "model."));
        return false;
    }
    const nlohmann::json& report = m_window.m_reportView->report();
    if (report.is_null()) {
        showError(tr("Run a scheme first: export writes the quantized model of the run on "
                     "screen."));
        return false;
    }
    auto parsed = runOfReport(report);
    if (!parsed) {
        showError(tr("Cannot export the run on screen: %1").arg(reasonText(parsed.error())));
        return false;
    }
    // A report opened from a file may be of another model than the one open.
    const std::string reportModel =
        report.contains("model") && report["model"].is_object()
            ? report["model"].value("path", std::string())
            : std::string();
    if (!reportModel.empty() && reportModel != m_window.m_model->model->path()) {
        showError(tr("The run on screen quantized “%1”, not the open model “%2”: open that "
                     "model to export it.")
                      .arg(QString::fromStdString(reportModel),
                           QString::fromStdString(m_window.m_model->model->path())));
        return false;
    }
    run = std::move(parsed).value();
    if (m_window.m_data) {
        run.calibPath = m_window.m_data->path;
        run.evalPath = m_window.m_data->classes > 0 ? m_window.m_data->path : std::string();
    }
    run.evalLimit = m_window.m_quantPanel->evalLimit();
    run.evalTokens = m_window.m_quantPanel->evalTokens();
    spec = QString::fromStdString(report["scheme"].value("spec", run.scheme));
    return true;
}

void ExportController::chooseExport()
{
    QuantRequest run;
    QString spec;
    if (!exportableRun(run, spec))
        return;
    const QSettings settings;
    const QString folder = settings.value(QStringLiteral("export/folder"), QDir::homePath())
                               .toString();
    const QString base = QStringLiteral("%1-%2").arg(
        fileNamePart(QString::fromStdString(m_window.m_model->displayName)),
        fileNamePart(QString::fromStdString(run.scheme)));
    auto* dialog = new ExportDialog(
        tr("%1 on %2").arg(spec, QString::fromStdString(m_window.m_model->displayName)),
        QDir(folder).filePath(base),
        [run](const QString& format) {
            auto fits = checkExport(run, format.toStdString());
            return fits ? QString() : reasonText(fits.error());
        },
        &m_window);
    dialog->setAdvice([run](const QString& format) {
        return QString::fromStdString(exportAdvice(run, format.toStdString()));
    });
    dialog->setInteropOptions([run](const QString& format) {
        QStringList lines;
        for (const std::string& line :
             bitlens::widgets::exportInteropOptions(run, format.toStdString()))
            lines << QString::fromStdString(line);
        return lines;
    });
    // The format the run implies: the one chosen last time when it can hold the scheme, else
    // the first that can (a gguf-* scheme: GGUF, the only format of ggml's block types).
    const auto holds = [&run](const QString& format) {
        return static_cast<bool>(checkExport(run, format.toStdString()));
    };
    QString format = settings.value(QStringLiteral("export/format")).toString();
    if (format.isEmpty() || !exportFormats().contains(format) || !holds(format)) {
        const QStringList formats = exportFormats();
        const auto first = std::find_if(formats.begin(), formats.end(), holds);
        format = first != formats.end() ? *first : formats.front();
    }
    dialog->setFormat(format);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this, [this, dialog] {
        QSettings chosen;
        chosen.setValue(QStringLiteral("export/format"), dialog->format());
        chosen.setValue(QStringLiteral("export/folder"), QFileInfo(dialog->path()).absolutePath());
        exportRun(dialog->format(), dialog->path(), dialog->verifyAfterExport());
    });
    dialog->open();
}

bool ExportController::exportRun(const QString& format, const QString& path, bool verify)
{
    QuantRequest run;
    QString spec;
    if (!exportableRun(run, spec))
        return false;
    if (auto fits = checkExport(run, format.toStdString()); !fits) {
        showError(tr("Cannot export “%1” to %2: %3")
                      .arg(spec, exportFormatLabel(format), reasonText(fits.error())));
        return false;
    }
    if (path.trimmed().isEmpty()) {
        showError(tr("Choose a file to export to."));
        return false;
    }
    // The target is checked before the job starts (io::checkWritable, as bitlens-cli does): a
    // device, FIFO or missing folder is refused; a symbolic link is written at its destination
    // (the staging file goes beside that, the rename replaces that, the link stays).
    const QString chosen = QFileInfo(path.trimmed()).absoluteFilePath();
    const bool folderAllowed = format.compare(QStringLiteral("safetensors"),
                                              Qt::CaseInsensitive) == 0;
    auto writable = io::checkWritable(chosen.toStdString(), folderAllowed
                                                                ? io::OutputKind::FileOrFolder
                                                                : io::OutputKind::File);
    if (!writable) {
        showError(tr("Cannot export to “%1”: %2").arg(chosen, reasonText(writable.error())));
        return false;
    }
    const QString target = QString::fromStdString(*writable);
    const QString staging = stagingPathFor(target, ++m_count);
    ExportRequest request;
    request.run = run;
    request.format = format.toStdString();
    request.path = target.toStdString();
    request.stagingPath = staging.toStdString();
    request.verify = verify;
    const quint64 id = m_jobs->start(
        tr("Exporting %1 to %2").arg(spec, QFileInfo(target).fileName()),
        [session = m_window.m_session, request](Progress& progress, const CancelToken& cancel) {
            return bitlens::widgets::runExport(*session, request, progress, cancel);
        },
        [this, target, staging](Result<nlohmann::json> result) {
            for (auto it = m_staging.begin(); it != m_staging.end();)
                it = it.value() == staging ? m_staging.erase(it) : std::next(it);
            m_runningJob = 0;
            m_window.updateQuantState();
            if (!result) {
                m_window.onQuantFailed(result.error(), tr("Exporting to “%1”").arg(target));
                return;
            }
            if (auto moved = commitExport(staging.toStdString(), target.toStdString()); !moved) {
                Q_EMIT m_window.quantizationStopped();
                showError(tr("Exporting to “%1” failed: %2")
                              .arg(target, reasonText(moved.error())));
                return;
            }
            showExportResult(result.value());
        });
    m_staging.insert(id, staging);
    m_runningJob = id;
    m_window.updateQuantState();
    return true;
}

bool ExportController::verifyExportedFile(const QString& path)
{
    QuantRequest run;
    QString spec;
    if (!exportableRun(run, spec))
        return false;
    const QString file = QFileInfo(path.trimmed()).absoluteFilePath();
    auto format = exportFormatOfPath(file.toStdString());
    if (!format) {
        showError(tr("Cannot verify “%1”: %2").arg(file, reasonText(format.error())));
        return false;
    }
    if (!QFileInfo(file).isFile()) {
        showError(tr("Cannot verify “%1”: no such file").arg(file));
        return false;
    }
    if (auto fits = checkExport(run, *format); !fits) {
        showError(tr("Cannot verify “%1” against “%2”: %3")
                      .arg(file, spec, reasonText(fits.error())));
        return false;
    }
    ExportRequest request;
    request.run = run;
    request.format = *format;
    request.path = file.toStdString();
    m_runningJob = m_jobs->start(
        tr("Verifying %1 against %2").arg(QFileInfo(file).fileName(), spec),
        [session = m_window.m_session, request](Progress& progress, const CancelToken& cancel) {
            return bitlens::widgets::runVerify(*session, request, progress, cancel);
        },
        [this, file](Result<nlohmann::json> result) {
            m_runningJob = 0;
            m_window.updateQuantState();
            if (!result) {
                m_window.onQuantFailed(result.error(), tr("Verifying “%1”").arg(file));
                return;
            }
            showExportResult(result.value());
        });
    m_window.updateQuantState();
    return true;
}

void ExportController::chooseVerify()
{
    const QString folder =
        QSettings().value(QStringLiteral("export/folder"), QDir::homePath()).toString();
    const QString path = QFileDialog::getOpenFileName(
        &m_window, tr("Verify Exported File"), folder,
        tr("Exported models (*.onnx *.safetensors *.gguf);;All files (*)"));
    if (!path.isEmpty())
        verifyExportedFile(path);
}

void ExportController::showExportResult(const nlohmann::json& result)
{
    m_window.m_exportView->setResult(result);
    m_window.showResultTab(QStringLiteral("Export"));
    const QString path = QString::fromStdString(result.value("path", std::string()));
    switch (m_window.m_exportView->verdict()) {
    case ExportView::Verdict::Pass:
        m_window.statusBar()->showMessage(tr("Exported and verified %1: PASS").arg(path), 10000);
        break;
    case ExportView::Verdict::Fail: {
        const nlohmann::json& v = result["verify"];
        showError(tr("Verification FAILED: “%1” does not match the in-app quantized model. "
                     "%2")
                      .arg(path, QString::fromStdString(v.value("message", std::string()))));
        break;
    }
    case ExportView::Verdict::VerifyError:
        showError(tr("“%1” was written, but verifying it failed: %2")
                      .arg(path, QString::fromStdString(
                                     result.value("verify_error", std::string()))));
        break;
    case ExportView::Verdict::NotVerified:
    case ExportView::Verdict::None:
        m_window.statusBar()->showMessage(tr("Exported %1 (not verified)").arg(path), 10000);
        break;
    }
    Q_EMIT m_window.exportShown();
}

} // namespace bitlens::widgets
