#pragma once
// The main window's export flow (File > Export Quantized Model…, File > Verify Exported File…
// and the Export tab's buttons): checks that the run on screen can be written in a format,
// asks for format and file (ExportDialog), runs the export or verify job on the window's
// quantization runner (widgets/quant_job.h: runExport, runVerify), moves the staged file into
// place when the job delivers, and shows the result in the Export tab. It owns the staging
// files of exports not yet delivered: a job cancelled after writing leaves no file behind.

#include <nlohmann/json.hpp>

#include <QMap>
#include <QObject>
#include <QString>

namespace bitlens::widgets {

class JobRunner;
class MainWindow;
struct QuantRequest;

/// The export / verify controller of one MainWindow (a child of it; see the file comment).
class ExportController : public QObject {
    Q_OBJECT

public:
    /// Runs its jobs on `jobs` (the window's quantization runner).
    ExportController(MainWindow& window, JobRunner* jobs);
    /// Removes the staging files of exports that never delivered.
    ~ExportController() override;

    /// Asks for format, file and "Verify after export" (a window-modal ExportDialog), then
    /// calls exportRun.
    void chooseExport();
    /// MainWindow::exportRun (see there).
    bool exportRun(const QString& format, const QString& path, bool verify);
    /// Asks for an exported file, then calls verifyExportedFile.
    void chooseVerify();
    /// MainWindow::verifyExportedFile (see there).
    bool verifyExportedFile(const QString& path);
    /// True while the runner's current job is an export or verify started here.
    bool isRunning() const;
    /// True when job `id` is an export whose file has not been delivered.
    bool ownsExport(quint64 id) const { return m_staging.contains(id); }

private:
    bool exportableRun(QuantRequest& run, QString& spec);
    /// The window's error display (status bar, errorShown, message box).
    void showError(const QString& message);
    void showExportResult(const nlohmann::json& result);

    MainWindow& m_window;
    JobRunner* m_jobs;
    /// Staging files of export jobs not yet delivered, by job id: removed when a job's
    /// result is dropped (cancelled after it finished writing).
    QMap<quint64, QString> m_staging;
    quint64 m_runningJob = 0;  ///< id of the running export / verify job, 0 when none
    int m_count = 0;           ///< exports started: numbers the staging files
};

} // namespace bitlens::widgets
