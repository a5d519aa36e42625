#pragma once
// BitLens' main window: the layer table of the open model, side panels (model, selected layer,
// data), a status bar (job progress with Cancel, model size, compute device) and the File menu.
// Opening a model or data runs as a cancellable job; the window only shows results, and a
// model that fails to open never replaces the one on screen.

#include "model_loader.h"
#include "recent_files.h"

#include <QMainWindow>
#include <QString>

#include <memory>
#include <optional>

class QLabel;
class QMenu;
class QSortFilterProxyModel;
class QTableView;

namespace bitlens::widgets {

class DataSummaryPanel;
class JobProgressWidget;
class JobRunner;
class LayerDetailsPanel;
class LayerTableModel;
class ModelInfoPanel;

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
    /// True while a model or data job is running.
    bool isBusy() const;

    /// The layer table's source model.
    LayerTableModel* layerModel() const { return m_layerModel; }
    /// The layer table view (its model is a sorting proxy over layerModel()).
    QTableView* layerTable() const { return m_table; }
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

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
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

    LayerTableModel* m_layerModel;
    QSortFilterProxyModel* m_proxy;
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

    std::shared_ptr<const OpenedModel> m_model;
    std::optional<DataInfo> m_data;
    RecentFiles m_recentModels;
    RecentFiles m_recentData;
    QString m_lastError;
    bool m_dialogsEnabled = true;
};

} // namespace bitlens::widgets
