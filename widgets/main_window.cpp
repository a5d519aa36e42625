#include "main_window.h"

#include "job_progress_widget.h"
#include "job_runner.h"
#include "layer_table_model.h"
#include "side_panels.h"

#include "exec/device.h"
#include "zoo/zoo.h"

#include <QAction>
#include <QApplication>
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
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTableView>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <exception>

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
           name.contains(QLatin1String("-ubyte")) || name.endsWith(QLatin1String(".idx"));
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
      m_proxy(new QSortFilterProxyModel(this)), m_table(new QTableView),
      m_modelInfo(new ModelInfoPanel), m_layerDetails(new LayerDetailsPanel),
      m_dataPanel(new DataSummaryPanel), m_modelJobs(new JobRunner(this)),
      m_dataJobs(new JobRunner(this)), m_recentModels(QStringLiteral("recentModels")),
      m_recentData(QStringLiteral("recentData"))
{
    setObjectName(QStringLiteral("mainWindow"));
    setAcceptDrops(true);
    resize(1280, 800);

    m_proxy->setSourceModel(m_layerModel);
    m_proxy->setSortRole(LayerTableModel::SortRole);
    m_table->setObjectName(QStringLiteral("layerTable"));
    m_table->setModel(m_proxy);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
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
    m_table->horizontalHeader()->setSectionResizeMode(LayerTableModel::Name, QHeaderView::Stretch);
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            &MainWindow::onCurrentLayerChanged);

    auto* side = new QWidget;
    auto* sideLayout = new QVBoxLayout(side);
    sideLayout->addWidget(m_modelInfo);
    sideLayout->addWidget(m_layerDetails);
    sideLayout->addWidget(m_dataPanel);
    sideLayout->addStretch(1);
    auto* sideScroll = new QScrollArea;
    sideScroll->setWidget(side);
    sideScroll->setWidgetResizable(true);
    sideScroll->setFrameShape(QFrame::NoFrame);
    sideScroll->setMinimumWidth(300);

    auto* splitter = new QSplitter(Qt::Horizontal);
    splitter->setObjectName(QStringLiteral("mainSplitter"));
    splitter->addWidget(m_table);
    splitter->addWidget(sideScroll);
    splitter->setStretchFactor(0, 1);
    splitter->setStretchFactor(1, 0);
    splitter->setSizes({880, 400});
    setCentralWidget(splitter);

    createMenus();
    createStatusBar();
    updateTitle();
    detectDevice();
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
    m_recentMenu = file->addMenu(tr("&Recent Files"));
    m_recentMenu->setObjectName(QStringLiteral("recentFilesMenu"));
    m_recentMenu->setToolTipsVisible(true);
    connect(m_recentMenu, &QMenu::aboutToShow, this, &MainWindow::rebuildRecentMenu);
    rebuildRecentMenu();

    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);
    quit->setMenuRole(QAction::QuitRole);
}

void MainWindow::createStatusBar()
{
    m_jobProgress = new JobProgressWidget;
    m_jobProgress->watch(m_modelJobs);
    m_jobProgress->watch(m_dataJobs);
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

bool MainWindow::isBusy() const { return m_modelJobs->isRunning() || m_dataJobs->isRunning(); }

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
        [target = request.toStdString()](Progress& progress, const CancelToken& cancel) {
            return openDataForGui(target, progress, cancel);
        },
        [this, request](Result<DataInfo> result) { onDataOpened(request, std::move(result)); });
}

void MainWindow::onModelOpened(const QString& request, Result<OpenedModel> result)
{
    if (!result) {
        if (result.error().code == ErrorCode::Cancelled)
            statusBar()->showMessage(tr("Cancelled opening %1").arg(request), 5000);
        else
            showError(failureMessage(tr("model"), request, result.error()));
        return;
    }
    m_model = std::make_shared<const OpenedModel>(std::move(result.value()));
    const ModelSummary& summary = m_model->model->summary();

    m_layerModel->setSummary(summary);
    m_table->resizeColumnsToContents();
    // The name column takes the width left over; the others fit their contents, with room.
    for (int column = LayerTableModel::Op; column < LayerTableModel::ColumnCount; ++column)
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
    m_recentData.add(recentEntryFor(path));
    rebuildRecentMenu();
    statusBar()->showMessage(
        tr("Loaded %1: %2 samples").arg(QFileInfo(path).fileName(), formatCount(m_data->samples)),
        5000);
    Q_EMIT dataLoaded();
}

void MainWindow::onCurrentLayerChanged()
{
    const QModelIndex source = m_proxy->mapToSource(m_table->currentIndex());
    const LayerSummary* layer = source.isValid() ? m_layerModel->layer(source.row()) : nullptr;
    static const std::vector<WeightInfo> kNoWeights;
    const auto row = static_cast<std::size_t>(source.row());
    const bool haveWeights = layer && m_model && row < m_model->layerWeights.size();
    m_layerDetails->showLayer(layer, haveWeights ? m_model->layerWeights[row] : kNoWeights);
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
        tr("Models (*.onnx *.safetensors *.gguf *.pt);;All files (*)"));
    if (!path.isEmpty())
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
                     tr("Data (*.npy *.npz *-ubyte *-ubyte.gz *.idx);;All files (*)"));
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
        if (looksLikeData(path))
            openData(path);
        else
            openModel(path);
        event->acceptProposedAction();
        return;
    }
}

} // namespace bitlens::widgets
