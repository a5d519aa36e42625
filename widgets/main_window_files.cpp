// MainWindow's files and settings: opening a model (file or zoo name), data, a saved report or a
// .bitlens project as jobs or directly, and showing what arrives; saving reports and projects;
// the recent-files lists; window and scheme settings; drag-and-drop of files onto the window.
#include "main_window.h"

#include "export_view.h"
#include "generate_view.h"
#include "job_runner.h"
#include "layer_table_model.h"
#include "main_window_messages.h"
#include "plan_view.h"
#include "quant_job.h"
#include "quant_panel.h"
#include "report_view.h"
#include "side_panels.h"

#include "zoo/zoo.h"

#include <QCloseEvent>
#include <QDateTime>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QLabel>
#include <QMimeData>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTableView>
#include <QUrl>

#include <algorithm>
#include <utility>

namespace bitlens::widgets {

using window_text::failureMessage;
using window_text::reasonText;

namespace {

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

/// What a recent list stores: an absolute path for files, the name itself for zoo models.
QString recentEntryFor(const QString& request)
{
    const QFileInfo info(request);
    return info.exists() ? info.absoluteFilePath() : request;
}

} // namespace

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
    // Before any run, the Compare tab names this model's metric (perplexity, not top-1).
    m_reportView->setModelMetric(QString::fromStdString(summary.metric));
    m_exportView->clear();
    {
        auto generates = workspace::checkGenerate(*m_session);
        m_generateView->setModel(QString::fromStdString(m_model->displayName),
                                 generates ? QString()
                                           : QString::fromStdString(generates.error().message));
    }
    showMetricColumns(false);
    updateQuantState();

    // The evaluation size counts what this model reads, with its default for interactivity.
    m_quantPanel->setEvaluationFor(*m_model->model);
    fitSidePanel();
    if (!m_data)
        m_dataPanel->showData(nullptr, QString::fromStdString(m_model->zooName));
    m_layerModel->setSummary(summary);
    updateLayerCount();
    fitLayerColumns();
    m_modelInfo->showModel(m_model.get());
    m_plan->setOpenModel(QString::fromStdString(summary.path), summary.params);
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

QString MainWindow::currentModelPath() const
{
    return m_model ? QString::fromStdString(m_model->model->path()) : QString();
}

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
