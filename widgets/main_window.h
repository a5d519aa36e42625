#pragma once
// BitLens' main window: the layer table of the open model with per-layer results, the scheme
// panel, side panels (model, selected layer, data), result tabs under a one-line summary (with
// the run history of the open model and two runs side by side), a
// status bar (job progress with Cancel, model size, compute device) and the File menu. The
// Generate tab continues a prompt with the float and the quantized language model.
// Opening a model or data and quantizing run as cancellable jobs; the window only shows their
// results (for a run: exactly what report.json holds), and a job that fails or is cancelled
// never replaces what is on screen.
//
// The window's code, by concern: main_window.cpp (construction, layout, status bar, layer
// selection, error display), main_window_menus.cpp (menus, actions, the layer context menu and
// overrides, file dialogs), main_window_run_control.cpp (starting and cancelling runs, comparisons,
// sensitivity and generation; delivering results to the views), export_control.{h,cpp} (ExportController:
// the export / verify flow and its staging files), main_window_files.cpp (opening models, data,
// reports and projects, saving them, recent files, settings, drag-and-drop).

#include "model_loader.h"
#include "project/project.h"
#include "recent_files.h"

#include <nlohmann/json.hpp>

#include <QMainWindow>
#include <QMap>
#include <QString>

#include <memory>
#include <optional>

class QAction;
class QLabel;
class QScrollArea;
class QMenu;
class QCheckBox;
class QSortFilterProxyModel;
class QSplitter;
class QTableView;

namespace bitlens::widgets {

class DataSummaryPanel;
class ExportController;
class ExportView;
class GenerateView;
class HardwarePanel;
class PlanView;
class TeachingView;
class TrainingView;
class JobProgressWidget;
class JobRunner;
class LayerDetailsPanel;
class LayerFilterProxy;
class LayerTableModel;
class ModelInfoPanel;
class QuantPanel;
class QuantSession;
struct QuantRequest;
class ReportView;

/// The application window (see the file comment).
class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(QWidget* parent = nullptr);
    /// A window that starts opening `initialModel` (a path or a zoo name) right away; its
    /// result arrives through the event loop, so signals connected after construction see it.
    explicit MainWindow(const QString& initialModel, QWidget* parent = nullptr);
    ~MainWindow() override;

    /// Opens a model file or a zoo name in the background; a newer request supersedes it.
    void openModel(const QString& pathOrZooName);
    /// Loads a data set (file or folder) in the background and shows its summary.
    void openData(const QString& path);
    /// Quantizes the open model with the scheme panel's scheme and the layer overrides, in the
    /// background; the report replaces the one on screen when it arrives. A scheme string that
    /// does not parse is reported (errorShown) and nothing starts. While a job runs it asks
    /// first (askToReplaceRun), never restarting silently.
    void runQuantization();
    /// Sets the scheme panel to `scheme` and runs it (asking first while a job runs).
    void runScheme(const QString& scheme);
    /// Runs every preset and fills the Compare tab (asking first while a job runs).
    void runComparison();
    /// Runs the sensitivity sweep of the current scheme and fills the Sensitivity tab (asking
    /// first while a job runs). With dialogs on, the sweep's cost is measured first and a
    /// dialog offers fewer evaluation windows or samples and a subset of layers before it starts.
    void runSensitivity();
    /// The sweep of the current scheme as it is, without the cost dialog (the command line's
    /// --sensitivity, scripted screenshots).
    void runSensitivitySweep();
    /// Cancels the running quantization job; the results on screen stay.
    void cancelQuantization();
    /// Sets a layer override: "float" keeps the layer in float32, anything else is a scheme
    /// string whose layer configuration it runs with. An unparsable scheme is reported.
    bool setLayerOverride(const QString& layer, const QString& scheme);
    /// Removes a layer's override.
    void clearLayerOverride(const QString& layer);
    /// The layer overrides the next run uses.
    const QMap<QString, QString>& layerOverrides() const { return m_overrides; }
    /// Opens a saved report.json, compare or sensitivity file and shows it (no model needed).
    bool openReport(const QString& path);
    /// Shows run `row` of the history (0 = oldest) in the result tabs and the layer table;
    /// false when there is no such row.
    bool showHistoryRun(int row);
    /// Writes the report on screen (else the comparison) to `path` atomically.
    bool saveReport(const QString& path);
    /// Saves the session (model, data, scheme, layer overrides, every run of the history) as a
    /// .bitlens project, atomically; false (and errorShown) when it cannot be written.
    bool saveProject(const QString& path);
    /// Opens a .bitlens project: its model opens in the background, then its scheme, overrides,
    /// history and data are restored (projectLoaded()). False (errorShown) when the file cannot
    /// be read; what is on screen stays.
    bool openProject(const QString& path);
    /// File > Export Quantized Model…: asks for format, file and "Verify after export" (a
    /// window-modal ExportDialog, a child of the window), then calls exportRun.
    void chooseExport();
    /// Exports the quantized model of the run on screen to `path` in `format` ("onnx",
    /// "safetensors", "gguf") as a cancellable job on quantJobs(), reusing the model the run
    /// prepared when the session still keeps it, then (with `verify`) reloads the file and
    /// compares it with the in-app model. The file appears only when the job delivers (Cancel
    /// at any moment leaves none, and an existing file untouched). The result fills the Export
    /// tab (exportShown()); a failed verification is also an error dialog. False, with
    /// errorShown and nothing started, when there is no run or the format cannot hold its
    /// scheme.
    bool exportRun(const QString& format, const QString& path, bool verify = true);
    /// File > Verify Exported File…: checks an existing file (format by its extension) against
    /// the run on screen, as a job; the result fills the Export tab (exportShown()).
    bool verifyExportedFile(const QString& path);
    /// The Export tab.
    ExportView* exportView() const { return m_exportView; }
    /// Continues the Generate tab's prompt with the float model and with the scheme panel's
    /// scheme (layer overrides and the data on screen included) as a job on quantJobs(), the
    /// tokens streaming into the tab (asking first while a job runs). False, with errorShown
    /// and nothing started, when there is no model, it cannot generate, the prompt is empty or
    /// the scheme does not parse.
    bool runGenerate();
    /// Sets the Generate tab's prompt to `prompt` and runs it (runGenerate()).
    bool generate(const QString& prompt);
    /// The Generate tab.
    GenerateView* generateView() const { return m_generateView; }

    /// Selects `layer` in the table and every result view.
    void selectLayer(const QString& layer);
    /// Shows the result tab called `name` (case-insensitive); false when there is none.
    bool showResultTab(const QString& name);

    /// With dialogs disabled (tests) errors are only reported through errorShown().
    void setDialogsEnabled(bool enabled) { m_dialogsEnabled = enabled; }
    /// Whether errors open a (non-blocking) message box.
    bool dialogsEnabled() const { return m_dialogsEnabled; }

    /// The model on screen, or nullptr before the first one opened.
    const OpenedModel* currentModel() const { return m_model.get(); }
    /// The data set on screen, or nullptr.
    const DataInfo* currentData() const { return m_data ? &*m_data : nullptr; }
    /// The last error message shown ("Could not open model “/x.onnx”: reason").
    QString lastError() const { return m_lastError; }
    /// True while a model, data or quantization job is running.
    bool isBusy() const;
    /// The report on screen (null before the first run).
    const nlohmann::json& currentReport() const;

    /// The layer table's source model.
    LayerTableModel* layerModel() const { return m_layerModel; }
    /// The layer table view (its model is layerProxy(), sorting and filtering layerModel()).
    QTableView* layerTable() const { return m_table; }
    /// The table's proxy: quantizable layers only unless "Show all nodes" is checked.
    LayerFilterProxy* layerProxy() const { return m_proxy; }
    /// The "Show all nodes" check box above the table.
    QCheckBox* showAllNodesBox() const { return m_showAllNodes; }
    /// The line above the table: "211 quantizable layers of 1,007 nodes".
    QString layerCountText() const;
    /// The table's index of the layer `name` (column 0); invalid when it is filtered out.
    QModelIndex layerIndex(const QString& name) const;
    /// The selected layer's panel.
    LayerDetailsPanel* layerDetails() const { return m_layerDetails; }
    /// The open data set's panel.
    DataSummaryPanel* dataPanel() const { return m_dataPanel; }
    /// The status bar's job indicator.
    JobProgressWidget* jobProgress() const { return m_jobProgress; }
    /// The runner of model jobs (open model, build zoo model).
    JobRunner* modelJobs() const { return m_modelJobs; }
    /// The runner of data jobs.
    JobRunner* dataJobs() const { return m_dataJobs; }
    /// The runner of quantization jobs (run, compare, sensitivity).
    JobRunner* quantJobs() const { return m_quantJobs; }
    /// The scheme panel.
    QuantPanel* quantPanel() const { return m_quantPanel; }
    /// The "Plan" tab (memory and hardware planner).
    PlanView* planView() const { return m_plan; }
    /// The summary line and result tabs.
    ReportView* reportView() const { return m_reportView; }
    /// The open model's quantization session (cached data and float metric), or nullptr.
    const QuantSession* quantSession() const { return m_session.get(); }
    /// Status bar text about the model: "Model: 1,490 params · 5.8 KiB".
    QString modelSizeText() const;
    /// Status bar text about the device: "Device: CPU (2 threads)".
    QString deviceText() const;
    /// File > Recent Files.
    QMenu* recentFilesMenu() const { return m_recentMenu; }

Q_SIGNALS:
    /// A model finished opening and is on screen.
    void modelLoaded();
    /// A data set finished loading and its summary is on screen.
    void dataLoaded();
    /// An error was reported to the user (also shown in a message box when dialogs are enabled).
    void errorShown(const QString& message);
    /// A quantization report arrived (or was opened) and is on screen.
    void reportShown();
    /// A comparison of schemes arrived (or was opened) and is on screen.
    void comparisonShown();
    /// A sensitivity sweep arrived (or was opened) and is on screen.
    void sensitivityShown();
    /// A quantization job ended without a result (cancelled or failed).
    void quantizationStopped();
    /// A project's model opened and its scheme, overrides and history are on screen.
    void projectLoaded();
    /// A generation ended and its result is in the Generate tab (a failed or cancelled one
    /// emits quantizationStopped() instead).
    void generateShown();
    /// An export or verification result is in the Export tab (a failed or cancelled export
    /// job emits quantizationStopped() instead).
    void exportShown();

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void closeEvent(QCloseEvent* event) override;

private:
    /// Asks while a job runs, then fills `request` with the panel's run and the ranking; false
    /// when the user kept the running job or the scheme does not parse.
    bool prepareSensitivity(QuantRequest& request);
    /// Starts the sweep of `request` (runSensitivity after its choice).
    void startSensitivity(const QuantRequest& request);
    friend class ExportController;  ///< the export flow reads the run, model and data on screen

    void createMenus();
    void createStatusBar();
    void detectDevice();
    void onModelOpened(const QString& request, Result<OpenedModel> result);
    void onDataOpened(const QString& path, Result<DataInfo> result);
    void onCurrentLayerChanged();
    void showError(const QString& message);
    void updateTitle();
    void rebuildRecentMenu();
    void chooseModel();
    void chooseData(bool folder);
    void chooseReport();
    void chooseSaveReport();
    void chooseProject();
    void chooseSaveProject();
    void applyProject(project::Project project);
    void showLayerMenu(const QPoint& pos);
    QStringList selectedLayerNames() const;
    bool prepareRun(QuantRequest& request);
    /// Before a new job on the quantization channel: true when none runs. While one runs, a
    /// question ("replaceRunBox": Cancel It and Run `next` / Keep It Running) decides; true
    /// after the running job was cancelled on the person's word. With dialogs disabled the
    /// running job is kept and errorShown says so.
    bool askToReplaceRun(const QString& next);
    void onQuantFailed(const Error& error, const QString& what);
    void updateQuantState();
    /// The Memory line of the scheme panel for the current scheme and overrides.
    void updateMemoryForecast();
    /// Sets the scheme panel and the layer overrides to those of the report on screen, so the
    /// panel always shows the scheme of the run shown (a history row, an opened report).
    void showSchemeOfReport();
    /// A run that ended without its report (cancelled, failed) leaves what was on screen
    /// before it, not its partial layer rows.
    void keepResultsOfBefore();
    /// Makes the side column (scheme, model, layer and data panels) as wide as they need.
    void fitSidePanel();
    void showMetricColumns(bool shown);
    void fitLayerColumns();
    void updateLayerCount();
    QString currentModelPath() const;
    void saveSettings();
    void restoreSettings();

    LayerTableModel* m_layerModel;
    LayerFilterProxy* m_proxy;
    QCheckBox* m_showAllNodes = nullptr;
    QLabel* m_layerCount = nullptr;
    QTableView* m_table;
    ModelInfoPanel* m_modelInfo;
    LayerDetailsPanel* m_layerDetails;
    DataSummaryPanel* m_dataPanel;
    JobProgressWidget* m_jobProgress = nullptr;
    QLabel* m_modelSizeLabel = nullptr;
    QLabel* m_deviceLabel = nullptr;
    QMenu* m_recentMenu = nullptr;
    JobRunner* m_modelJobs;
    JobRunner* m_dataJobs;
    JobRunner* m_quantJobs;
    QuantPanel* m_quantPanel;
    ReportView* m_reportView;
    TeachingView* m_teaching;    ///< "Teach" tab: the selected layer's weights on a format grid
    HardwarePanel* m_hardware;   ///< "Hardware" tab: native low-bit formats, measured rates
    PlanView* m_plan = nullptr;  ///< "Plan" tab: memory per part, accelerators (planner.h)
    ExportView* m_exportView = nullptr;  ///< "Export" tab: the last export / verify result
    QAction* m_exportAction = nullptr;
    QAction* m_verifyAction = nullptr;
    ExportController* m_export = nullptr;  ///< the export / verify flow (a child)
    TrainingView* m_training = nullptr;  ///< "Training" tab: live QAT loss and metric curves
    GenerateView* m_generateView = nullptr;  ///< "Generate" tab: float vs quantized text
    quint64 m_generateJob = 0;  ///< the quantization channel's job id of the last generation
    QSplitter* m_mainSplitter = nullptr;
    QSplitter* m_leftSplitter = nullptr;

    std::shared_ptr<const OpenedModel> m_model;
    std::shared_ptr<QuantSession> m_session;
    QMap<QString, QString> m_overrides;
    QScrollArea* m_sideScroll = nullptr;
    bool m_selecting = false;
    std::optional<DataInfo> m_data;
    /// A project whose model is opening: restored when that model (`first`) is on screen.
    std::optional<std::pair<QString, project::Project>> m_pendingProject;
    RecentFiles m_recentModels;
    RecentFiles m_recentData;
    QString m_lastError;
    bool m_dialogsEnabled = true;
};

} // namespace bitlens::widgets
