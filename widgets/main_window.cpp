#include "main_window.h"

#include "export_dialog.h"
#include "export_view.h"
#include "hardware_panel.h"
#include "teaching_view.h"
#include "training_view.h"

#include "job_progress_widget.h"
#include "job_runner.h"
#include "layer_table_model.h"
#include "quant_job.h"
#include "quant_panel.h"
#include "report_view.h"
#include "side_panels.h"

#include "exec/device.h"
#include "zoo/zoo.h"

#include <QAction>
#include <QCheckBox>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QInputDialog>
#include <QSettings>
#include <QShortcut>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHeaderView>
#include <QKeySequence>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTableView>
#include <QUrl>
#include <QHBoxLayout>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <exception>
#include <utility>

namespace bitlens::widgets {

namespace {

constexpr int kMaxColumnWidth = 360;

/// The reason part of an error: its message plus the byte offset when known.
QString reasonText(const Error& error)
{
    QString reason = QString::fromStdString(error.message);
    if (error.offset)
        reason += MainWindow::tr(" (at byte %1)").arg(*error.offset);
    return reason;
}

/// "Could not open model “/x/y.onnx”: reason". When the error is about another file than the
/// one requested (a zoo model's training data), that file is named in the reason.
QString failureMessage(const QString& what, const QString& request, const Error& error)
{
    const QString errorPath = QString::fromStdString(error.path);
    QString reason = reasonText(error);
    if (!errorPath.isEmpty() && QFileInfo(errorPath) != QFileInfo(request))
        reason = errorPath + QStringLiteral(": ") + reason;
    return MainWindow::tr("Could not open %1 “%2”: %3").arg(what, request, reason);
}

/// Data sets are folders of IDX files or images, .npy/.npz arrays or IDX files; a folder that
/// holds a model file is a model.
bool looksLikeData(const QString& path)
{
    const QFileInfo info(path);
    if (info.isDir()) {
        const QDir dir(path);
        return dir.entryList({QStringLiteral("*.onnx"), QStringLiteral("*.safetensors"),
                              QStringLiteral("*.gguf")},
                             QDir::Files)
            .isEmpty();
    }
    const QString name = info.fileName().toLower();
    return name.endsWith(QLatin1String(".npy")) || name.endsWith(QLatin1String(".npz")) ||
           name.contains(QLatin1String("-ubyte")) || name.endsWith(QLatin1String(".idx")) ||
           name.endsWith(QLatin1String(".txt"));
}

/// Menu text for a recent entry: "model.onnx  (/home/me/models)" or "fashion-cnn (demo zoo)".
QString recentEntryText(int number, const QString& entry)
{
    const QFileInfo info(entry);
    const QString folder = QDir::toNativeSeparators(info.path());
    const QString label = info.isAbsolute()
                              ? QStringLiteral("%1  (%2)").arg(info.fileName(), folder)
                              : MainWindow::tr("%1 (demo zoo)").arg(entry);
    QString escaped = label;
    escaped.replace(QLatin1Char('&'), QLatin1String("&&"));
    return number < 10 ? QStringLiteral("&%1  %2").arg(number).arg(escaped)
                       : QStringLiteral("%1  %2").arg(number).arg(escaped);
}

/// What a recent list stores: an absolute path for files, the name itself for zoo models.
QString recentEntryFor(const QString& request)
{
    const QFileInfo info(request);
    return info.exists() ? info.absoluteFilePath() : request;
}

} // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), m_layerModel(new LayerTableModel(this)),
      m_proxy(new LayerFilterProxy(this)), m_table(new QTableView),
      m_modelInfo(new ModelInfoPanel), m_layerDetails(new LayerDetailsPanel),
      m_dataPanel(new DataSummaryPanel), m_modelJobs(new JobRunner(this)),
      m_dataJobs(new JobRunner(this)), m_quantJobs(new JobRunner(this)),
      m_quantPanel(new QuantPanel), m_reportView(new ReportView), m_teaching(new TeachingView),
      m_hardware(new HardwarePanel),
      m_recentModels(QStringLiteral("recentModels")),
      m_recentData(QStringLiteral("recentData"))
{
    setObjectName(QStringLiteral("mainWindow"));
    setAcceptDrops(true);
    resize(1280, 800);

    m_reportView->tabs()->addTab(m_teaching, tr("Teach"));
    m_reportView->tabs()->addTab(m_hardware, tr("Hardware"));
    m_training = new TrainingView;
    m_reportView->tabs()->addTab(m_training, tr("Training"));
    m_exportView = new ExportView;
    m_reportView->tabs()->addTab(m_exportView, tr("Export"));
    connect(m_exportView, &ExportView::exportRequested, this, &MainWindow::chooseExport);
    connect(m_exportView, &ExportView::verifyRequested, this, &MainWindow::chooseVerify);
    connect(m_reportView, &ReportView::reportChanged, this, &MainWindow::updateQuantState);
    connect(m_reportView, &ReportView::reportChanged, m_training,
            [this] { m_training->setReport(m_reportView->report()); });

    m_proxy->setSourceModel(m_layerModel);
    m_proxy->setSortRole(LayerTableModel::SortRole);
    m_table->setObjectName(QStringLiteral("layerTable"));
    m_table->setModel(m_proxy);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_table->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(m_table, &QWidget::customContextMenuRequested, this, &MainWindow::showLayerMenu);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setAlternatingRowColors(true);
    m_table->setWordWrap(false);
    m_table->setTextElideMode(Qt::ElideMiddle);
    m_table->verticalHeader()->setDefaultAlignment(Qt::AlignRight | Qt::AlignVCenter);
    m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
    m_table->horizontalHeader()->setSortIndicatorClearable(true);
    m_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
    m_table->horizontalHeader()->setHighlightSections(false);
    m_table->setSortingEnabled(true);
    // The last column (Kernel after a run) takes the width left over; names keep theirs.
    m_table->horizontalHeader()->setStretchLastSection(true);
    {
        // After a run the columns that answer "which layer hurts?" come right after the op.
        QHeaderView* header = m_table->horizontalHeader();
        int visual = LayerTableModel::Op + 1;
        for (const int column : {LayerTableModel::SqnrAccumulated, LayerTableModel::SqnrLocal,
                                 LayerTableModel::Scheme, LayerTableModel::BytesQuantized})
            header->moveSection(header->visualIndex(column), visual++);
        header->setToolTip(LayerTableModel::heatLegend());
    }
    showMetricColumns(false);
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            &MainWindow::onCurrentLayerChanged);

    auto* side = new QWidget;
    auto* sideLayout = new QVBoxLayout(side);
    sideLayout->addWidget(m_quantPanel);
    sideLayout->addWidget(m_modelInfo);
    sideLayout->addWidget(m_layerDetails);
    sideLayout->addWidget(m_dataPanel);
    sideLayout->addStretch(1);
    auto* sideScroll = new QScrollArea;
    sideScroll->setWidget(side);
    sideScroll->setWidgetResizable(true);
    sideScroll->setFrameShape(QFrame::NoFrame);
    sideScroll->setMinimumWidth(300);

    m_leftSplitter = new QSplitter(Qt::Vertical);
    m_leftSplitter->setObjectName(QStringLiteral("leftSplitter"));
    // Above the table: how many nodes are shown, and the switch between quantizable layers
    // (the default: an LLM's graph is mostly Gather / Slice / Cast / Shape helpers) and all.
    auto* tablePane = new QWidget;
    auto* tableLayout = new QVBoxLayout(tablePane);
    tableLayout->setContentsMargins(0, 0, 0, 0);
    tableLayout->setSpacing(2);
    auto* tableBar = new QHBoxLayout;
    tableBar->setContentsMargins(4, 0, 4, 0);
    m_layerCount = new QLabel;
    m_layerCount->setObjectName(QStringLiteral("layerCount"));
    m_showAllNodes = new QCheckBox(tr("Show all nodes"));
    m_showAllNodes->setObjectName(QStringLiteral("showAllNodes"));
    m_showAllNodes->setToolTip(tr("Also list the nodes BitLens does not quantize (activations, "
                                  "shape and index helpers)"));
    tableBar->addWidget(m_layerCount, 1);
    tableBar->addWidget(m_showAllNodes);
    tableLayout->addLayout(tableBar);
    tableLayout->addWidget(m_table, 1);
    connect(m_showAllNodes, &QCheckBox::toggled, this, [this](bool all) {
        const QModelIndex source = m_proxy->mapToSource(m_table->currentIndex());
        const LayerSummary* layer = source.isValid() ? m_layerModel->layer(source.row()) : nullptr;
        const QString current = layer ? QString::fromStdString(layer->name) : QString();
        m_proxy->setShowAllNodes(all);
        updateLayerCount();
        if (!current.isEmpty() && layerIndex(current).isValid())
            m_table->setCurrentIndex(layerIndex(current));
        else if (m_proxy->rowCount() > 0)
            m_table->setCurrentIndex(m_proxy->index(0, 0));
    });
    m_leftSplitter->addWidget(tablePane);
    m_leftSplitter->addWidget(m_reportView);
    m_leftSplitter->setStretchFactor(0, 2);
    m_leftSplitter->setStretchFactor(1, 3);
    m_leftSplitter->setSizes({260, 440});
    m_mainSplitter = new QSplitter(Qt::Horizontal);
    m_mainSplitter->setObjectName(QStringLiteral("mainSplitter"));
    m_mainSplitter->addWidget(m_leftSplitter);
    m_mainSplitter->addWidget(sideScroll);
    m_mainSplitter->setStretchFactor(0, 1);
    m_mainSplitter->setStretchFactor(1, 0);
    m_mainSplitter->setSizes({920, 360});
    setCentralWidget(m_mainSplitter);

    connect(m_quantPanel, &QuantPanel::runRequested, this, &MainWindow::runQuantization);
    connect(m_quantPanel, &QuantPanel::cancelRequested, this, &MainWindow::cancelQuantization);
    connect(m_quantPanel, &QuantPanel::compareRequested, this, &MainWindow::runComparison);
    connect(m_quantPanel, &QuantPanel::sensitivityRequested, this, &MainWindow::runSensitivity);
    connect(m_reportView, &ReportView::sensitivityRequested, this, &MainWindow::runSensitivity);
    connect(m_reportView, &ReportView::layerSelected, this, &MainWindow::selectLayer);
    connect(m_reportView, &ReportView::historyRunSelected, this, &MainWindow::showHistoryRun);
    connect(m_quantJobs, &JobRunner::started, this, &MainWindow::updateQuantState);
    connect(m_quantJobs, &JobRunner::finished, this, &MainWindow::updateQuantState);
    connect(m_quantJobs, &JobRunner::resultDropped, this, [this](quint64 id) {
        // An export cancelled after it had written: its staging file goes.
        if (m_exportStaging.contains(id))
            discardExport(m_exportStaging.take(id).toStdString());
    });
    connect(m_quantJobs, &JobRunner::cancelled, this, [this](quint64 id) {
        m_exportJob = 0;
        const bool exporting = m_exportStaging.contains(id);
        updateQuantState();
        statusBar()->showMessage(exporting ? tr("Export cancelled; no file was written")
                                           : tr("Cancelled; the results on screen are kept"),
                                 5000);
        Q_EMIT quantizationStopped();
    });

    createMenus();
    createStatusBar();
    updateTitle();
    detectDevice();
    restoreSettings();
    updateQuantState();
}

MainWindow::MainWindow(const QString& initialModel, QWidget* parent) : MainWindow(parent)
{
    openModel(initialModel);
}

MainWindow::~MainWindow()
{
    // Stop the jobs now; the runners (children) wait for their workers when destroyed.
    m_modelJobs->cancel();
    m_dataJobs->cancel();
    m_quantJobs->cancel();
    // The quantization workers hold the session; wait for them before members go.
    m_quantJobs->waitForWorkers();
    for (const QString& staging : std::as_const(m_exportStaging))
        discardExport(staging.toStdString());
}

void MainWindow::createMenus()
{
    QMenu* file = menuBar()->addMenu(tr("&File"));

    QAction* openModelAction =
        file->addAction(tr("&Open Model…"), this, &MainWindow::chooseModel);
    openModelAction->setShortcut(QKeySequence::Open);
    openModelAction->setObjectName(QStringLiteral("actionOpenModel"));

    QMenu* demo = file->addMenu(tr("Open &Demo Model"));
    demo->setToolTipsVisible(true);
    for (const zoo::ZooEntry& entry : zoo::list()) {
        const QString name = QString::fromStdString(entry.name);
        QAction* action = demo->addAction(name, this, [this, name] { openModel(name); });
        action->setToolTip(QString::fromStdString(entry.description));
    }
    demo->setEnabled(!demo->actions().isEmpty());

    QAction* openDataAction =
        file->addAction(tr("Open &Data…"), this, [this] { chooseData(false); });
    openDataAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
    openDataAction->setObjectName(QStringLiteral("actionOpenData"));
    file->addAction(tr("Open Data &Folder…"), this, [this] { chooseData(true); });

    file->addSeparator();
    QAction* openReportAction =
        file->addAction(tr("Open &Report…"), this, &MainWindow::chooseReport);
    openReportAction->setObjectName(QStringLiteral("actionOpenReport"));
    QAction* saveReportAction =
        file->addAction(tr("&Save Report…"), this, &MainWindow::chooseSaveReport);
    saveReportAction->setShortcut(QKeySequence::Save);
    saveReportAction->setObjectName(QStringLiteral("actionSaveReport"));
    file->addAction(tr("Open Pro&ject…"), this, &MainWindow::chooseProject)
        ->setObjectName(QStringLiteral("actionOpenProject"));
    QAction* saveProjectAction =
        file->addAction(tr("Save Projec&t…"), this, &MainWindow::chooseSaveProject);
    saveProjectAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S));
    saveProjectAction->setObjectName(QStringLiteral("actionSaveProject"));

    file->addSeparator();
    m_exportAction =
        file->addAction(tr("&Export Quantized Model…"), this, &MainWindow::chooseExport);
    m_exportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    m_exportAction->setObjectName(QStringLiteral("actionExport"));
    m_exportAction->setToolTip(tr("Write the run on screen as ONNX QDQ, safetensors "
                                  "(compressed-tensors) or GGUF, and verify the file"));
    m_verifyAction =
        file->addAction(tr("&Verify Exported File…"), this, &MainWindow::chooseVerify);
    m_verifyAction->setObjectName(QStringLiteral("actionVerifyExport"));

    file->addSeparator();
    m_recentMenu = file->addMenu(tr("&Recent Files"));
    m_recentMenu->setObjectName(QStringLiteral("recentFilesMenu"));
    m_recentMenu->setToolTipsVisible(true);
    connect(m_recentMenu, &QMenu::aboutToShow, this, &MainWindow::rebuildRecentMenu);
    rebuildRecentMenu();

    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);
    quit->setMenuRole(QAction::QuitRole);

    QMenu* quantize = menuBar()->addMenu(tr("&Quantize"));
    QAction* run = quantize->addAction(tr("&Run"), this, &MainWindow::runQuantization);
    run->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    run->setObjectName(QStringLiteral("actionRun"));
    QAction* cancel = quantize->addAction(tr("&Cancel"), this, &MainWindow::cancelQuantization);
    cancel->setShortcut(QKeySequence(Qt::Key_Escape));
    cancel->setShortcutContext(Qt::WindowShortcut);
    cancel->setObjectName(QStringLiteral("actionCancel"));
    quantize->addAction(tr("Compare &All Schemes"), this, &MainWindow::runComparison);
    quantize->addAction(tr("Run &Sensitivity"), this, &MainWindow::runSensitivity);
}

void MainWindow::createStatusBar()
{
    m_jobProgress = new JobProgressWidget;
    m_jobProgress->watch(m_modelJobs);
    m_jobProgress->watch(m_dataJobs);
    m_jobProgress->watch(m_quantJobs);
    m_modelSizeLabel = new QLabel(tr("No model"));
    m_modelSizeLabel->setObjectName(QStringLiteral("modelSizeLabel"));
    m_deviceLabel = new QLabel(tr("Device: detecting…"));
    m_deviceLabel->setObjectName(QStringLiteral("deviceLabel"));
    for (QLabel* label : {m_modelSizeLabel, m_deviceLabel}) {
        label->setFrameShape(QFrame::StyledPanel);
        label->setContentsMargins(6, 0, 6, 0);
    }
    statusBar()->addPermanentWidget(m_jobProgress);
    statusBar()->addPermanentWidget(m_modelSizeLabel);
    statusBar()->addPermanentWidget(m_deviceLabel);
}

void MainWindow::detectDevice()
{
    // cudaAvailable() may initialise the CUDA driver (seconds): never on the GUI thread.
    auto* watcher = new QFutureWatcher<QStringList>(this);
    connect(watcher, &QFutureWatcher<QStringList>::finished, this, [this, watcher] {
        const QStringList info = watcher->result();
        m_deviceLabel->setText(tr("Device: %1").arg(info.value(0)));
        m_deviceLabel->setToolTip(tr("Available devices: %1").arg(info.value(1)));
        watcher->deleteLater();
    });
    watcher->setFuture(QtConcurrent::run([]() -> QStringList {
        try {
            const std::string device = exec::cudaAvailable() ? "cuda" : "cpu";
            QStringList devices;
            for (const std::string& name : exec::availableDevices())
                devices << QString::fromStdString(name);
            return {QString::fromStdString(exec::deviceDescription(device)),
                    devices.join(QStringLiteral(", "))};
        } catch (const std::exception& e) {
            return {QStringLiteral("CPU"), QString::fromUtf8(e.what())};
        }
    }));
}

bool MainWindow::isBusy() const
{
    return m_modelJobs->isRunning() || m_dataJobs->isRunning() || m_quantJobs->isRunning();
}

const nlohmann::json& MainWindow::currentReport() const { return m_reportView->report(); }

bool MainWindow::prepareRun(QuantRequest& request)
{
    if (!m_session) {
        showError(tr("Open a model first (File > Open Model)."));
        return false;
    }
    const QString scheme = m_quantPanel->schemeText();
    if (auto checked = checkScheme(scheme.toStdString()); !checked) {
        showError(tr("Invalid scheme “%1”: %2").arg(scheme, reasonText(checked.error())));
        return false;
    }
    request.scheme = scheme.toStdString();
    for (auto it = m_overrides.cbegin(); it != m_overrides.cend(); ++it)
        request.overrides[it.key().toStdString()] = it.value().toStdString();
    if (m_data) {
        request.calibPath = m_data->path;
        request.evalPath = m_data->classes > 0 ? m_data->path : std::string();
    }
    request.evalLimit = m_quantPanel->evalLimit();
    QSettings().setValue(QStringLiteral("quant/scheme"), scheme);
    return true;
}

void MainWindow::runQuantization()
{
    QuantRequest request;
    if (!prepareRun(request))
        return;
    const QString scheme = QString::fromStdString(request.scheme);
    const bool training = isTrainingScheme(request.scheme);
    if (training) {
        // QAT: curves live in the Training tab; Cancel stops training and keeps the best.
        request.onTrainingStep = m_training->begin(scheme);
        request.stopTraining = m_training->stopToken();
        showResultTab(QStringLiteral("Training"));
    }
    m_quantJobs->start(
        tr("Quantizing with %1").arg(scheme),
        [session = m_session, request](Progress& progress, const CancelToken& cancel) {
            return bitlens::widgets::runQuantization(*session, request, progress, cancel);
        },
        [this, scheme, training, overrides = request.overrides.size()](
            Result<nlohmann::json> result) {
            updateQuantState();
            if (training && !result)
                m_training->finish(tr("%1: training ended without a result (%2).")
                                       .arg(scheme, QString::fromStdString(
                                                        result.error().userMessage())));
            if (!result) {
                onQuantFailed(result.error(), tr("Quantizing with “%1”").arg(scheme));
                return;
            }
            const QString ran =
                overrides == 0 ? scheme : tr("%1 (+%n override(s))", nullptr,
                                             static_cast<int>(overrides)).arg(scheme);
            m_reportView->addRun(
                {result.value(), ran, QDateTime::currentDateTime(), currentModelPath()});
            m_reportView->setReport(result.value());
            m_layerModel->setReport(result.value());
            showMetricColumns(true);
            statusBar()->showMessage(m_reportView->summaryText(), 10000);
            Q_EMIT reportShown();
        });
    updateQuantState();
}

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

bool MainWindow::exportableRun(QuantRequest& run, QString& spec)
{
    if (!m_session) {
        showError(tr("Open a model and run a scheme first: export writes a run's quantized "
                     "model."));
        return false;
    }
    const nlohmann::json& report = m_reportView->report();
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
    if (!reportModel.empty() && reportModel != m_model->model->path()) {
        showError(tr("The run on screen quantized “%1”, not the open model “%2”: open that "
                     "model to export it.")
                      .arg(QString::fromStdString(reportModel),
                           QString::fromStdString(m_model->model->path())));
        return false;
    }
    run = std::move(parsed).value();
    if (m_data) {
        run.calibPath = m_data->path;
        run.evalPath = m_data->classes > 0 ? m_data->path : std::string();
    }
    run.evalLimit = m_quantPanel->evalLimit();
    spec = QString::fromStdString(report["scheme"].value("spec", run.scheme));
    return true;
}

void MainWindow::chooseExport()
{
    QuantRequest run;
    QString spec;
    if (!exportableRun(run, spec))
        return;
    const QSettings settings;
    const QString folder = settings.value(QStringLiteral("export/folder"), QDir::homePath())
                               .toString();
    const QString base = QStringLiteral("%1-%2").arg(
        fileNamePart(QString::fromStdString(m_model->displayName)),
        fileNamePart(QString::fromStdString(run.scheme)));
    auto* dialog = new ExportDialog(
        tr("%1 on %2").arg(spec, QString::fromStdString(m_model->displayName)),
        QDir(folder).filePath(base),
        [run](const QString& format) {
            auto fits = checkExport(run, format.toStdString());
            return fits ? QString() : reasonText(fits.error());
        },
        this);
    const QString format = settings.value(QStringLiteral("export/format")).toString();
    if (!format.isEmpty())
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

bool MainWindow::exportRun(const QString& format, const QString& path, bool verify)
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
    const QString target = QFileInfo(path.trimmed()).absoluteFilePath();
    const QString staging = stagingPathFor(target, ++m_exportCount);
    ExportRequest request;
    request.run = run;
    request.format = format.toStdString();
    request.path = target.toStdString();
    request.stagingPath = staging.toStdString();
    request.verify = verify;
    const quint64 id = m_quantJobs->start(
        tr("Exporting %1 to %2").arg(spec, QFileInfo(target).fileName()),
        [session = m_session, request](Progress& progress, const CancelToken& cancel) {
            return bitlens::widgets::runExport(*session, request, progress, cancel);
        },
        [this, target, staging](Result<nlohmann::json> result) {
            for (auto it = m_exportStaging.begin(); it != m_exportStaging.end();)
                it = it.value() == staging ? m_exportStaging.erase(it) : std::next(it);
            m_exportJob = 0;
            updateQuantState();
            if (!result) {
                onQuantFailed(result.error(), tr("Exporting to “%1”").arg(target));
                return;
            }
            if (auto moved = commitExport(staging.toStdString(), target.toStdString()); !moved) {
                Q_EMIT quantizationStopped();
                showError(tr("Exporting to “%1” failed: %2")
                              .arg(target, reasonText(moved.error())));
                return;
            }
            showExportResult(result.value());
        });
    m_exportStaging.insert(id, staging);
    m_exportJob = id;
    updateQuantState();
    return true;
}

bool MainWindow::verifyExportedFile(const QString& path)
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
    m_exportJob = m_quantJobs->start(
        tr("Verifying %1 against %2").arg(QFileInfo(file).fileName(), spec),
        [session = m_session, request](Progress& progress, const CancelToken& cancel) {
            return bitlens::widgets::runVerify(*session, request, progress, cancel);
        },
        [this, file](Result<nlohmann::json> result) {
            m_exportJob = 0;
            updateQuantState();
            if (!result) {
                onQuantFailed(result.error(), tr("Verifying “%1”").arg(file));
                return;
            }
            showExportResult(result.value());
        });
    updateQuantState();
    return true;
}

void MainWindow::chooseVerify()
{
    const QString folder =
        QSettings().value(QStringLiteral("export/folder"), QDir::homePath()).toString();
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Verify Exported File"), folder,
        tr("Exported models (*.onnx *.safetensors *.gguf);;All files (*)"));
    if (!path.isEmpty())
        verifyExportedFile(path);
}

void MainWindow::showExportResult(const nlohmann::json& result)
{
    m_exportView->setResult(result);
    showResultTab(QStringLiteral("Export"));
    const QString path = QString::fromStdString(result.value("path", std::string()));
    switch (m_exportView->verdict()) {
    case ExportView::Verdict::Pass:
        statusBar()->showMessage(tr("Exported and verified %1: PASS").arg(path), 10000);
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
        statusBar()->showMessage(tr("Exported %1 (not verified)").arg(path), 10000);
        break;
    }
    Q_EMIT exportShown();
}

void MainWindow::showMetricColumns(bool shown)
{
    for (const int column : {LayerTableModel::SqnrAccumulated, LayerTableModel::SqnrLocal,
                             LayerTableModel::BytesQuantized, LayerTableModel::Kernel}) {
        const bool wasHidden = m_table->isColumnHidden(column);
        m_table->setColumnHidden(column, !shown);
        if (shown && wasHidden) {
            m_table->resizeColumnToContents(column);
            m_table->setColumnWidth(column,
                                    std::min(m_table->columnWidth(column) + 8, kMaxColumnWidth));
        }
    }
}

void MainWindow::runScheme(const QString& scheme)
{
    m_quantPanel->setSchemeText(scheme);
    runQuantization();
}

void MainWindow::runComparison()
{
    QuantRequest request;
    if (!prepareRun(request))
        return;
    m_quantJobs->start(
        tr("Comparing all schemes"),
        [session = m_session, request](Progress& progress, const CancelToken& cancel) {
            return bitlens::widgets::runComparison(*session, request, progress, cancel);
        },
        [this](Result<nlohmann::json> result) {
            updateQuantState();
            if (!result) {
                onQuantFailed(result.error(), tr("Comparing all schemes"));
                return;
            }
            m_reportView->setComparison(result.value());
            m_reportView->addComparisonRuns(result.value(), currentModelPath());
            showResultTab(QStringLiteral("Compare"));
            Q_EMIT comparisonShown();
        });
    updateQuantState();
}

void MainWindow::runSensitivity()
{
    QuantRequest request;
    if (!prepareRun(request))
        return;
    const QString scheme = QString::fromStdString(request.scheme);
    m_quantJobs->start(
        tr("Sensitivity of %1").arg(scheme),
        [session = m_session, request](Progress& progress, const CancelToken& cancel) {
            return bitlens::widgets::runSensitivity(*session, request, progress, cancel);
        },
        [this, scheme](Result<nlohmann::json> result) {
            updateQuantState();
            if (!result) {
                onQuantFailed(result.error(), tr("Sensitivity of “%1”").arg(scheme));
                return;
            }
            m_reportView->setSensitivity(result.value());
            showResultTab(QStringLiteral("Sensitivity"));
            Q_EMIT sensitivityShown();
        });
    updateQuantState();
}

void MainWindow::cancelQuantization()
{
    // During QAT, Cancel first ends training and keeps (and then shows) the best checkpoint;
    // pressed again, it cancels the analysis too.
    if (m_training->stopTraining()) {
        statusBar()->showMessage(tr("Stopping training: the best checkpoint so far is kept"),
                                 10000);
        return;
    }
    const bool exporting = m_exportJob != 0 && m_quantJobs->currentId() == m_exportJob;
    if (m_training->isTraining() || (m_quantJobs->isRunning() && !exporting))
        m_training->finish(tr("Cancelled."));
    m_quantJobs->cancel();
}

void MainWindow::onQuantFailed(const Error& error, const QString& what)
{
    Q_EMIT quantizationStopped();
    if (error.code == ErrorCode::Cancelled)
        return;
    QString reason = reasonText(error);
    if (!error.path.empty())
        reason = QString::fromStdString(error.path) + QStringLiteral(": ") + reason;
    showError(tr("%1 failed: %2").arg(what, reason));
}

void MainWindow::updateQuantState()
{
    m_quantPanel->setRunnable(m_session != nullptr);
    m_quantPanel->setRunning(m_quantJobs->isRunning());
    // Export needs a run on screen and a free job channel (a new job would cancel the running).
    const bool canExport =
        m_session != nullptr && !m_reportView->report().is_null() && !m_quantJobs->isRunning();
    if (m_exportAction) {
        m_exportAction->setEnabled(canExport);
        m_verifyAction->setEnabled(canExport);
    }
    m_exportView->exportButton()->setEnabled(canExport);
    m_exportView->verifyButton()->setEnabled(canExport);
}

bool MainWindow::setLayerOverride(const QString& layer, const QString& scheme)
{
    const QString value = scheme.trimmed();
    const bool keepFloat = value == QLatin1String("float") || value == QLatin1String("float32");
    if (!keepFloat) {
        if (auto checked = checkScheme(value.toStdString()); !checked) {
            showError(tr("Invalid scheme “%1” for layer %2: %3")
                          .arg(value, layer, reasonText(checked.error())));
            return false;
        }
    }
    m_overrides[layer] = keepFloat ? QStringLiteral("float") : value;
    m_layerModel->setOverrides(m_overrides);
    return true;
}

void MainWindow::clearLayerOverride(const QString& layer)
{
    m_overrides.remove(layer);
    m_layerModel->setOverrides(m_overrides);
}

QStringList MainWindow::selectedLayerNames() const
{
    QStringList names;
    for (const QModelIndex& index : m_table->selectionModel()->selectedRows()) {
        const QModelIndex source = m_proxy->mapToSource(index);
        if (const LayerSummary* layer = m_layerModel->layer(source.row()))
            names << QString::fromStdString(layer->name);
    }
    return names;
}

void MainWindow::showLayerMenu(const QPoint& pos)
{
    const QStringList layers = selectedLayerNames();
    if (layers.isEmpty())
        return;
    QMenu menu(this);
    const QString what =
        layers.size() == 1 ? layers.front() : tr("%1 layers").arg(layers.size());
    menu.addSection(what);
    menu.addAction(tr("Keep in float32"), this, [this, layers] {
        for (const QString& layer : layers)
            setLayerOverride(layer, QStringLiteral("float"));
    });
    menu.addAction(tr("Use scheme…"), this, [this, layers, what] {
        bool ok = false;
        const QString scheme = QInputDialog::getText(
            this, tr("Scheme for %1").arg(what),
            tr("Scheme string (as the CLI takes it), e.g. w4-int4:group=64:"), QLineEdit::Normal,
            m_overrides.value(layers.front(), m_quantPanel->schemeText()), &ok);
        if (!ok || scheme.trimmed().isEmpty())
            return;
        for (const QString& layer : layers)
            if (!setLayerOverride(layer, scheme))
                return;
    });
    QAction* clear = menu.addAction(tr("Clear override"), this, [this, layers] {
        for (const QString& layer : layers)
            clearLayerOverride(layer);
    });
    clear->setEnabled(std::any_of(layers.begin(), layers.end(), [this](const QString& layer) {
        return m_overrides.contains(layer);
    }));
    menu.exec(m_table->viewport()->mapToGlobal(pos));
}

void MainWindow::selectLayer(const QString& layer)
{
    if (m_selecting)
        return;
    m_selecting = true;
    const int row = m_layerModel->rowOf(layer);
    if (row >= 0) {
        QModelIndex index = m_proxy->mapFromSource(m_layerModel->index(row, 0));
        if (!index.isValid()) {  // a node the filter hides: show all nodes to select it
            m_showAllNodes->setChecked(true);
            index = m_proxy->mapFromSource(m_layerModel->index(row, 0));
        }
        m_table->setCurrentIndex(index);
        m_table->scrollTo(index);
    }
    m_reportView->selectLayer(layer);
    m_selecting = false;
    // The table's currentRowChanged ran under the guard: update the details panel now.
    onCurrentLayerChanged();
}

bool MainWindow::showResultTab(const QString& name) { return m_reportView->showTab(name); }

bool MainWindow::openReport(const QString& path)
{
    auto json = readJsonFile(path.toStdString());
    if (!json) {
        showError(failureMessage(tr("report"), path, json.error()));
        return false;
    }
    const nlohmann::json& j = json.value();
    if (j.contains("runs") && j["runs"].is_array()) {
        m_reportView->setComparison(j);
        m_reportView->addComparisonRuns(j, path);
        if (!j["runs"].empty() && m_reportView->report().is_null()) {
            m_reportView->setReport(j["runs"].front());
            m_layerModel->setReport(j["runs"].front());
            showMetricColumns(true);
        }
        showResultTab(QStringLiteral("Compare"));
        Q_EMIT comparisonShown();
    } else if (j.contains("layers") && j["layers"].is_array() && !j["layers"].empty() &&
               j["layers"].front().is_object() && j["layers"].front().contains("drop")) {
        // A sensitivity file: {"metric", "layers": [{"layer", "metric", "drop", "sqnr_db"}]}.
        m_reportView->setSensitivity(j);
        showResultTab(QStringLiteral("Sensitivity"));
        Q_EMIT sensitivityShown();
    } else if (j.contains("layers") && j["layers"].is_array()) {
        const nlohmann::json* scheme = j.contains("scheme") && j["scheme"].is_object()
                                           ? &j["scheme"]
                                           : nullptr;
        const QString spec = scheme && (*scheme).value("spec", nlohmann::json()).is_string()
                                 ? QString::fromStdString((*scheme)["spec"].get<std::string>())
                                 : QFileInfo(path).fileName();
        m_reportView->addRun({j, spec, QDateTime::currentDateTime(), path});
        m_reportView->setReport(j);
        m_layerModel->setReport(j);
        showMetricColumns(true);
        Q_EMIT reportShown();
    } else {
        showError(tr("Could not open report “%1”: not a BitLens report, comparison or "
                     "sensitivity file")
                      .arg(path));
        return false;
    }
    statusBar()->showMessage(tr("Opened %1").arg(QFileInfo(path).fileName()), 5000);
    return true;
}

QString MainWindow::currentModelPath() const
{
    return m_model ? QString::fromStdString(m_model->model->path()) : QString();
}

bool MainWindow::showHistoryRun(int row)
{
    const HistoryModel* history = m_reportView->historyModel();
    if (row < 0 || row >= history->rowCount())
        return false;
    const nlohmann::json report = history->run(row).report;
    m_reportView->setReport(report);
    m_layerModel->setReport(report);
    showMetricColumns(true);
    return true;
}

bool MainWindow::saveReport(const QString& path)
{
    const nlohmann::json& report = m_reportView->report().is_null()
                                       ? m_reportView->comparison()
                                       : m_reportView->report();
    if (report.is_null()) {
        showError(tr("Nothing to save yet: run a scheme first."));
        return false;
    }
    if (auto written = writeJsonFile(path.toStdString(), report); !written) {
        showError(tr("Could not save “%1”: %2").arg(path, reasonText(written.error())));
        return false;
    }
    statusBar()->showMessage(tr("Saved %1").arg(path), 5000);
    return true;
}

bool MainWindow::saveProject(const QString& path)
{
    project::Project p;
    if (m_model)
        p.modelPath = !m_model->zooName.empty() ? m_model->zooName : m_model->model->path();
    if (m_data)
        p.dataPaths = {m_data->path};
    p.scheme = m_quantPanel->schemeText().toStdString();
    for (auto it = m_overrides.begin(); it != m_overrides.end(); ++it)
        p.overrides[it.key().toStdString()] = it.value().toStdString();
    const HistoryModel* history = m_reportView->historyModel();
    for (int row = 0; row < history->rowCount(); ++row) {
        const HistoryRun& run = history->run(row);
        p.runs.push_back({run.report, run.scheme.toStdString(),
                          run.time.toString(Qt::ISODate).toStdString(),
                          run.modelPath.toStdString()});
    }
    if (auto written = project::saveProject(p, path.toStdString()); !written) {
        showError(tr("Could not save project “%1”: %2").arg(path, reasonText(written.error())));
        return false;
    }
    statusBar()->showMessage(tr("Saved project %1").arg(path), 5000);
    return true;
}

bool MainWindow::openProject(const QString& path)
{
    auto loaded = project::loadProject(path.toStdString());
    if (!loaded) {
        showError(failureMessage(tr("project"), path, loaded.error()));
        return false;
    }
    if (loaded->modelPath.empty()) {
        applyProject(std::move(loaded.value()));
        return true;
    }
    // The rest needs the model on screen: it is restored when this model has opened.
    const QString model = QString::fromStdString(loaded->modelPath);
    m_pendingProject.emplace(model, std::move(loaded.value()));
    openModel(model);
    return true;
}

void MainWindow::applyProject(project::Project p)
{
    if (!p.scheme.empty())
        m_quantPanel->setSchemeText(QString::fromStdString(p.scheme));
    for (const auto& [layer, scheme] : p.overrides)
        setLayerOverride(QString::fromStdString(layer), QString::fromStdString(scheme));
    for (project::ProjectRun& run : p.runs)
        m_reportView->addRun({std::move(run.report), QString::fromStdString(run.scheme),
                              QDateTime::fromString(QString::fromStdString(run.time), Qt::ISODate),
                              QString::fromStdString(run.modelPath)});
    if (!p.runs.empty()) {
        showHistoryRun(m_reportView->historyModel()->rowCount() - 1);
        Q_EMIT reportShown();
    }
    if (!p.dataPaths.empty())
        openData(QString::fromStdString(p.dataPaths.front()));
    Q_EMIT projectLoaded();
}

void MainWindow::chooseProject()
{
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open Project"), QDir::homePath(), tr("BitLens projects (*.bitlens);;All files (*)"));
    if (!path.isEmpty())
        openProject(path);
}

void MainWindow::chooseSaveProject()
{
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save Project"), QDir::home().filePath(QStringLiteral("session.bitlens")),
        tr("BitLens projects (*.bitlens)"));
    if (!path.isEmpty())
        saveProject(path);
}

void MainWindow::chooseReport()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open Report"), QDir::homePath(),
                                                      tr("Reports (*.json);;All files (*)"));
    if (!path.isEmpty())
        openReport(path);
}

void MainWindow::chooseSaveReport()
{
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save Report"), QDir::home().filePath(QStringLiteral("report.json")),
        tr("Reports (*.json)"));
    if (!path.isEmpty())
        saveReport(path);
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    saveSettings();
    QMainWindow::closeEvent(event);
}

void MainWindow::saveSettings()
{
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    settings.setValue(QStringLiteral("window/mainSplitter"), m_mainSplitter->saveState());
    settings.setValue(QStringLiteral("window/leftSplitter"), m_leftSplitter->saveState());
    settings.setValue(QStringLiteral("quant/scheme"), m_quantPanel->schemeText());
    settings.setValue(QStringLiteral("quant/evaluateAll"), m_quantPanel->evaluateAll());
}

void MainWindow::restoreSettings()
{
    const QSettings settings;
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    m_mainSplitter->restoreState(settings.value(QStringLiteral("window/mainSplitter")).toByteArray());
    m_leftSplitter->restoreState(settings.value(QStringLiteral("window/leftSplitter")).toByteArray());
    const QString scheme = settings.value(QStringLiteral("quant/scheme")).toString();
    if (!scheme.isEmpty())
        m_quantPanel->setSchemeText(scheme);
    m_quantPanel->setEvaluateAll(settings.value(QStringLiteral("quant/evaluateAll")).toBool());
}

QString MainWindow::modelSizeText() const { return m_modelSizeLabel->text(); }

QString MainWindow::deviceText() const { return m_deviceLabel->text(); }

void MainWindow::openModel(const QString& pathOrZooName)
{
    const QString request = pathOrZooName.trimmed();
    const QFileInfo info(request);
    const bool zooBuild = !info.exists() && zoo::isZooName(request.toStdString()) &&
                          !zoo::isBuilt(request.toStdString());
    const QString shown = info.exists() ? info.fileName() : request;
    const QString title = zooBuild ? tr("Building %1 (trained once, takes minutes)").arg(shown)
                                   : tr("Opening %1").arg(shown);
    m_modelJobs->start(
        title,
        [target = request.toStdString()](Progress& progress, const CancelToken& cancel) {
            return openModelForGui(target, progress, cancel);
        },
        [this, request](Result<OpenedModel> result) {
            onModelOpened(request, std::move(result));
        });
}

void MainWindow::openData(const QString& path)
{
    const QString request = path.trimmed();
    m_dataJobs->start(
        tr("Loading %1").arg(QFileInfo(request).fileName()),
        [target = request.toStdString(), model = m_model ? m_model->model : nullptr](
            Progress& progress, const CancelToken& cancel) {
            return openDataForGui(target, progress, cancel, model);
        },
        [this, request](Result<DataInfo> result) { onDataOpened(request, std::move(result)); });
}

void MainWindow::onModelOpened(const QString& request, Result<OpenedModel> result)
{
    std::optional<project::Project> project;
    if (m_pendingProject && m_pendingProject->first == request)
        project = std::move(m_pendingProject->second);
    m_pendingProject.reset();
    if (!result) {
        if (result.error().code == ErrorCode::Cancelled)
            statusBar()->showMessage(tr("Cancelled opening %1").arg(request), 5000);
        else
            showError(failureMessage(tr("model"), request, result.error()));
        return;
    }
    m_model = std::make_shared<const OpenedModel>(std::move(result.value()));
    const ModelSummary& summary = m_model->model->summary();
    // A new model: its runs start afresh (the report of the old one no longer fits).
    m_quantJobs->cancel();
    m_session = std::make_shared<QuantSession>(m_model->model, m_model->zooName);
    m_overrides.clear();
    m_reportView->clear();
    m_exportView->clear();
    showMetricColumns(false);
    updateQuantState();

    m_layerModel->setSummary(summary);
    updateLayerCount();
    m_table->resizeColumnsToContents();
    // Every column fits its contents, with room; the last one takes the width left over.
    for (int column = LayerTableModel::Name; column < LayerTableModel::ColumnCount; ++column)
        m_table->setColumnWidth(column,
                                std::min(m_table->columnWidth(column) + 16, kMaxColumnWidth));
    m_modelInfo->showModel(m_model.get());
    if (m_proxy->rowCount() > 0)
        m_table->setCurrentIndex(m_proxy->index(0, 0));
    else
        onCurrentLayerChanged();

    m_modelSizeLabel->setText(tr("Model: %1 params · %2")
                                  .arg(formatCount(summary.params), bytesText(summary.bytes)));
    m_modelSizeLabel->setToolTip(tr("%1 parameters, %2 bytes of weights as stored")
                                     .arg(formatCount(summary.params), formatCount(summary.bytes)));
    updateTitle();
    m_recentModels.add(recentEntryFor(request));
    rebuildRecentMenu();
    statusBar()->showMessage(tr("Opened %1: %2 layers")
                                 .arg(QString::fromStdString(m_model->displayName))
                                 .arg(summary.layers.size()),
                             5000);
    Q_EMIT modelLoaded();
    if (project)
        applyProject(std::move(*project));
}

void MainWindow::onDataOpened(const QString& path, Result<DataInfo> result)
{
    if (!result) {
        if (result.error().code == ErrorCode::Cancelled)
            statusBar()->showMessage(tr("Cancelled loading %1").arg(path), 5000);
        else
            showError(failureMessage(tr("data"), path, result.error()));
        return;
    }
    m_data = std::move(result.value());
    m_dataPanel->showData(&*m_data);
    updateQuantState();
    m_recentData.add(recentEntryFor(path));
    rebuildRecentMenu();
    statusBar()->showMessage(
        tr("Loaded %1: %2 samples").arg(QFileInfo(path).fileName(), formatCount(m_data->samples)),
        5000);
    Q_EMIT dataLoaded();
}

QModelIndex MainWindow::layerIndex(const QString& name) const
{
    const int row = m_layerModel->rowOf(name);
    return row < 0 ? QModelIndex() : m_proxy->mapFromSource(m_layerModel->index(row, 0));
}

QString MainWindow::layerCountText() const
{
    return m_layerCount->text();
}

void MainWindow::updateLayerCount()
{
    const int nodes = m_proxy->nodeCount();
    const int quantizable = m_proxy->quantizableCount();
    m_layerCount->setText(tr("%1 quantizable layers of %2 nodes")
                              .arg(formatCount(quantizable), formatCount(nodes)));
    // With no quantizable layer the filter shows every node anyway: nothing to switch.
    m_showAllNodes->setEnabled(quantizable > 0 && quantizable < nodes);
}

void MainWindow::onCurrentLayerChanged()
{
    const QModelIndex source = m_proxy->mapToSource(m_table->currentIndex());
    const LayerSummary* layer = source.isValid() ? m_layerModel->layer(source.row()) : nullptr;
    static const std::vector<WeightInfo> kNoWeights;
    const auto row = static_cast<std::size_t>(source.row());
    const bool haveWeights = layer && m_model && row < m_model->layerWeights.size();
    m_layerDetails->showLayer(layer, haveWeights ? m_model->layerWeights[row] : kNoWeights);
    if (layer && m_model && m_model->model && haveWeights && !m_model->layerWeights[row].empty())
        m_teaching->setWeights(QString::fromStdString(layer->name),
                               layerWeights(*m_model->model, layer->name));
    if (layer && !m_selecting) {
        m_selecting = true;
        m_reportView->selectLayer(QString::fromStdString(layer->name));
        m_selecting = false;
    }
}

void MainWindow::showError(const QString& message)
{
    m_lastError = message;
    statusBar()->showMessage(message, 10000);
    Q_EMIT errorShown(message);
    if (!m_dialogsEnabled)
        return;
    auto* box =
        new QMessageBox(QMessageBox::Warning, tr("BitLens"), message, QMessageBox::Ok, this);
    box->setObjectName(QStringLiteral("errorBox"));
    if (m_model)
        box->setInformativeText(
            tr("“%1” stays open.").arg(QString::fromStdString(m_model->displayName)));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

void MainWindow::updateTitle()
{
    if (!m_model) {
        setWindowTitle(tr("BitLens"));
        return;
    }
    const QString path = QString::fromStdString(m_model->model->path());
    setWindowTitle(tr("%1 — %2 — BitLens")
                       .arg(QString::fromStdString(m_model->displayName),
                            QDir::toNativeSeparators(path)));
}

void MainWindow::rebuildRecentMenu()
{
    m_recentMenu->clear();
    const QStringList models = m_recentModels.entries();
    const QStringList dataEntries = m_recentData.entries();
    if (models.isEmpty() && dataEntries.isEmpty()) {
        m_recentMenu->addAction(tr("(none)"))->setEnabled(false);
        return;
    }
    int number = 1;
    if (!models.isEmpty())
        m_recentMenu->addSection(tr("Models"));
    for (const QString& entry : models) {
        QAction* action = m_recentMenu->addAction(recentEntryText(number++, entry), this,
                                                  [this, entry] { openModel(entry); });
        action->setToolTip(entry);
        action->setData(entry);
    }
    if (!dataEntries.isEmpty())
        m_recentMenu->addSection(tr("Data"));
    for (const QString& entry : dataEntries) {
        QAction* action = m_recentMenu->addAction(recentEntryText(number++, entry), this,
                                                  [this, entry] { openData(entry); });
        action->setToolTip(entry);
        action->setData(entry);
    }
    m_recentMenu->addSeparator();
    m_recentMenu->addAction(tr("Clear Recent Files"), this, [this] {
        m_recentModels.clear();
        m_recentData.clear();
        rebuildRecentMenu();
    });
}

void MainWindow::chooseModel()
{
    const QString start =
        m_model ? QFileInfo(QString::fromStdString(m_model->model->path())).absolutePath()
                : QDir::homePath();
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open Model"), start,
        tr("Models (*.onnx *.safetensors *.gguf *.pt config.json);;All files (*)"));
    if (path.isEmpty())
        return;
    // A Hugging Face folder is opened through its config.json.
    if (QFileInfo(path).fileName() == QLatin1String("config.json"))
        openModel(QFileInfo(path).absolutePath());
    else
        openModel(path);
}

void MainWindow::chooseData(bool folder)
{
    const QString start = m_data ? QFileInfo(QString::fromStdString(m_data->path)).absolutePath()
                                 : QDir::homePath();
    const QString path =
        folder ? QFileDialog::getExistingDirectory(this, tr("Open Data Folder"), start)
               : QFileDialog::getOpenFileName(
                     this, tr("Open Data"), start,
                     tr("Data (*.npy *.npz *-ubyte *-ubyte.gz *.idx *.txt);;All files (*)"));
    if (!path.isEmpty())
        openData(path);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    const QList<QUrl> urls = event->mimeData()->urls();
    if (std::any_of(urls.begin(), urls.end(), [](const QUrl& url) { return url.isLocalFile(); }))
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    for (const QUrl& url : event->mimeData()->urls()) {
        if (!url.isLocalFile())
            continue;
        const QString path = url.toLocalFile();
        if (path.endsWith(QLatin1String(".json"), Qt::CaseInsensitive))
            openReport(path);
        else if (looksLikeData(path))
            openData(path);
        else
            openModel(path);
        event->acceptProposedAction();
        return;
    }
}

} // namespace bitlens::widgets
