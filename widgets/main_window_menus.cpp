// MainWindow's menus and actions: the File and Quantize menus, File > Recent Files, the layer
// table's context menu with the per-layer overrides it sets, and the file dialogs behind the
// Open / Save actions (each hands its choice to the matching open / save call).
#include "main_window.h"

#include "export_control.h"
#include "help_dialogs.h"
#include "layer_table_model.h"
#include "main_window_messages.h"
#include "quant_job.h"
#include "quant_panel.h"

#include "zoo/zoo.h"

#include <QAction>
#include <QApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QKeySequence>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QTableView>

#include <algorithm>

namespace bitlens::widgets {

using window_text::reasonText;

namespace {

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

} // namespace

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
    m_exportAction = file->addAction(tr("&Export Quantized Model…"), m_export,
                                     &ExportController::chooseExport);
    m_exportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    m_exportAction->setObjectName(QStringLiteral("actionExport"));
    m_exportAction->setToolTip(tr("Write the run on screen as ONNX QDQ, safetensors "
                                  "(compressed-tensors) or GGUF, and verify the file"));
    m_verifyAction =
        file->addAction(tr("&Verify Exported File…"), m_export, &ExportController::chooseVerify);
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

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    QAction* guide = help->addAction(tr("How to &Read the Charts"), this,
                                     [this] { showChartGuide(this); });
    guide->setObjectName(QStringLiteral("actionChartGuide"));
    guide->setShortcut(QKeySequence::HelpContents);
    help->addSeparator();
    QAction* about = help->addAction(tr("&About BitLens"), this, [this] {
        // QMessageBox::about shows the application's window icon (set in app/gui/main.cpp).
        QMessageBox::about(this, tr("About BitLens"), aboutText());
    });
    about->setMenuRole(QAction::AboutRole);
    about->setObjectName(QStringLiteral("actionAbout"));
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
    updateMemoryForecast();
    return true;
}

void MainWindow::clearLayerOverride(const QString& layer)
{
    m_overrides.remove(layer);
    m_layerModel->setOverrides(m_overrides);
    updateMemoryForecast();
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

} // namespace bitlens::widgets
