// MainWindow: construction and layout (layer table, side panels, result tabs, splitters),
// the status bar, the layer selection shared by the table and the result views, and error
// display. The other concerns live in main_window_menus.cpp, main_window_run_control.cpp,
// export_control.cpp and main_window_files.cpp (see main_window.h).
#include "main_window.h"

#include "export_control.h"
#include "export_view.h"
#include "generate_view.h"
#include "hardware_panel.h"
#include "plan_view.h"
#include "job_progress_widget.h"
#include "job_runner.h"
#include "layer_table_model.h"
#include "quant_job.h"
#include "quant_panel.h"
#include "report_view.h"
#include "side_panels.h"
#include "teaching_view.h"
#include "training_view.h"

#include "exec/device.h"

#include <QCheckBox>
#include <QDir>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QScrollArea>
#include <QStyle>
#include <QSplitter>
#include <QStatusBar>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <exception>

namespace bitlens::widgets {

namespace {

constexpr int kMaxColumnWidth = 360;

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
    m_plan = new PlanView;
    m_reportView->tabs()->addTab(m_plan, tr("Plan"));
    m_training = new TrainingView;
    m_reportView->tabs()->addTab(m_training, tr("Training"));
    m_exportView = new ExportView;
    m_reportView->tabs()->addTab(m_exportView, tr("Export"));
    m_generateView = new GenerateView;
    m_reportView->tabs()->addTab(m_generateView, tr("Generate"));
    connect(m_generateView, &GenerateView::generateRequested, this, &MainWindow::runGenerate);
    connect(m_generateView, &GenerateView::cancelRequested, this,
            &MainWindow::cancelQuantization);
    m_export = new ExportController(*this, m_quantJobs);
    connect(m_exportView, &ExportView::exportRequested, m_export, &ExportController::chooseExport);
    connect(m_exportView, &ExportView::verifyRequested, m_export, &ExportController::chooseVerify);
    connect(m_reportView, &ReportView::reportChanged, this, &MainWindow::updateQuantState);
    connect(m_reportView, &ReportView::reportChanged, m_training,
            [this] { m_training->setReport(m_reportView->report()); });

    m_proxy->setSourceModel(m_layerModel);
    m_proxy->setSortRole(LayerTableModel::SortRole);
    m_table->setObjectName(QStringLiteral("layerTable"));
    m_table->setModel(m_proxy);
    // The Scheme column follows what it shows: "nf4 / float32" after a run, "float32 (kept)"
    // for an override (was cut to "float…kept)").
    const auto fitScheme = [this] {
        m_table->resizeColumnToContents(LayerTableModel::Scheme);
        m_table->setColumnWidth(LayerTableModel::Scheme,
                                std::min(m_table->columnWidth(LayerTableModel::Scheme) + 16,
                                         kMaxColumnWidth));
    };
    connect(m_proxy, &QAbstractItemModel::dataChanged, this, fitScheme);
    connect(m_proxy, &QAbstractItemModel::modelReset, this, fitScheme);
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
    // As wide as the panels need (fitSidePanel): no horizontal scroll bar that hides the right
    // edge of the scheme panel (its group size and Cancel); only the vertical one scrolls.
    sideScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    sideScroll->setMinimumWidth(300);
    m_sideScroll = sideScroll;
    const int sideWidth = 360;

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
    m_mainSplitter->setSizes({1280 - std::max(360, sideWidth), std::max(360, sideWidth)});
    setCentralWidget(m_mainSplitter);

    connect(m_quantPanel, &QuantPanel::runRequested, this, &MainWindow::runQuantization);
    connect(m_quantPanel, &QuantPanel::schemeChanged, this, &MainWindow::updateMemoryForecast);
    connect(m_quantPanel, &QuantPanel::cancelRequested, this, &MainWindow::cancelQuantization);
    connect(m_quantPanel, &QuantPanel::compareRequested, this, &MainWindow::runComparison);
    connect(m_quantPanel, &QuantPanel::sensitivityRequested, this, &MainWindow::runSensitivity);
    connect(m_reportView, &ReportView::sensitivityRequested, this, &MainWindow::runSensitivity);
    connect(m_reportView, &ReportView::layerSelected, this, &MainWindow::selectLayer);
    connect(m_reportView, &ReportView::historyRunSelected, this, &MainWindow::showHistoryRun);
    connect(m_reportView, &ReportView::reportChanged, this, &MainWindow::showSchemeOfReport);
    connect(m_quantJobs, &JobRunner::started, this, &MainWindow::updateQuantState);
    // One status message at a time: a job's progress (the indicator on the right) replaces
    // what the bar said before, such as "Cancelled" of the run this one replaced.
    connect(m_quantJobs, &JobRunner::started, statusBar(), &QStatusBar::clearMessage);
    connect(m_quantJobs, &JobRunner::finished, this, &MainWindow::updateQuantState);
    connect(m_quantJobs, &JobRunner::cancelled, this, [this](quint64 id) {
        const bool exporting = m_export->ownsExport(id);
        if (id == m_generateJob)
            m_generateView->stop(tr("Cancelled; the tokens so far stay on screen."));
        m_reportView->setRunning(QString());
        keepResultsOfBefore();
        if (m_reportView->isComparing())
            m_reportView->endComparison(false, QString());
        updateQuantState();
        statusBar()->showMessage(exporting ? tr("Export cancelled; no file was written")
                                           : tr("Cancelled; the results on screen are kept"),
                                 5000);
        Q_EMIT quantizationStopped();
    });

    // Once the panels have their contents and fonts: the side column as wide as they need.
    QTimer::singleShot(0, this, &MainWindow::fitSidePanel);
    createMenus();
    createStatusBar();
    updateTitle();
    detectDevice();
    restoreSettings();
    updateQuantState();
}

void MainWindow::fitSidePanel()
{
    QWidget* side = m_sideScroll->widget();
    side->adjustSize();
    const int needed = std::max(side->minimumSizeHint().width(), side->sizeHint().width()) +
                       m_sideScroll->style()->pixelMetric(QStyle::PM_ScrollBarExtent) + 4;
    m_sideScroll->setMinimumWidth(std::max(300, needed));
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
    // The quantization workers hold the session; wait for them before members go (and before
    // the ExportController, a child, removes the staging files of undelivered exports).
    m_quantJobs->waitForWorkers();
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

QString MainWindow::modelSizeText() const { return m_modelSizeLabel->text(); }

QString MainWindow::deviceText() const { return m_deviceLabel->text(); }

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

void MainWindow::fitLayerColumns()
{
    m_table->resizeColumnsToContents();
    // Every column fits its contents, with room; the last one takes the width left over.
    for (int column = LayerTableModel::Name; column < LayerTableModel::ColumnCount; ++column)
        m_table->setColumnWidth(column,
                                std::min(m_table->columnWidth(column) + 16, kMaxColumnWidth));
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

bool MainWindow::showResultTab(const QString& name) { return m_reportView->showTab(name); }

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

bool MainWindow::exportRun(const QString& format, const QString& path, bool verify)
{
    return m_export->exportRun(format, path, verify);
}

bool MainWindow::verifyExportedFile(const QString& path)
{
    return m_export->verifyExportedFile(path);
}

void MainWindow::chooseExport() { m_export->chooseExport(); }

} // namespace bitlens::widgets
