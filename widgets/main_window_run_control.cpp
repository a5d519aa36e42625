// MainWindow's run control: a run, a comparison of every preset or a sensitivity sweep starts
// as a job on the quantization runner (widgets/quant_job.h) with the scheme panel's scheme, the
// layer overrides and the data on screen; Cancel stops it (QAT first ends training and keeps
// the best checkpoint); a result goes to the report view, the layer table and the history, a
// failure to one error message. Also which of Run / Cancel / Export are enabled.
#include "main_window.h"

#include "export_control.h"
#include "export_view.h"
#include "generate_view.h"
#include "job_progress_widget.h"
#include "job_runner.h"
#include "layer_table_model.h"
#include "main_window_messages.h"
#include "quant_job.h"
#include "quant_panel.h"
#include "report_view.h"
#include "sensitivity_cost_dialog.h"
#include "training_view.h"

#include <QAction>
#include <QDateTime>
#include <QElapsedTimer>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QStatusBar>

#include <memory>

namespace bitlens::widgets {

using window_text::reasonText;

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
    request.evalTokens = m_quantPanel->evalTokens();
    QSettings().setValue(QStringLiteral("quant/scheme"), scheme);
    return true;
}

bool MainWindow::askToReplaceRun(const QString& next)
{
    if (!m_quantJobs->isRunning())
        return true;
    const QString running = m_quantJobs->currentTitle();
    if (!m_dialogsEnabled) {
        showError(tr("%1 is still running: cancel it first (Esc), or wait for it to end.")
                      .arg(running));
        return false;
    }
    QMessageBox box(QMessageBox::Question, tr("BitLens"), tr("%1 is still running.").arg(running),
                    QMessageBox::NoButton, this);
    box.setObjectName(QStringLiteral("replaceRunBox"));
    box.setInformativeText(tr("Cancel it and run %1 instead? What it has done so far is "
                              "dropped; the results on screen stay until the new run ends.")
                               .arg(next));
    QPushButton* replace = box.addButton(tr("Cancel It and Run"), QMessageBox::AcceptRole);
    replace->setObjectName(QStringLiteral("replaceRunButton"));
    QPushButton* keep = box.addButton(tr("Keep It Running"), QMessageBox::RejectRole);
    keep->setObjectName(QStringLiteral("keepRunButton"));
    box.setDefaultButton(keep);
    box.setEscapeButton(keep);
    box.exec();
    if (box.clickedButton() != replace)
        return false;
    // Cancelled here, so the run that follows does not ask again (a run that ended while the
    // question was open leaves nothing to cancel). Training stops too, keeping nothing: the
    // person asked for the new run, not for the best checkpoint (what Cancel alone gives).
    if (m_training->isTraining())
        m_training->finish(tr("Cancelled."));
    m_quantJobs->cancel();
    return true;
}

void MainWindow::runQuantization()
{
    if (!askToReplaceRun(m_quantPanel->schemeText()))
        return;
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
        [this, session = m_session, request](Progress& progress,
                                             const CancelToken& cancel) mutable {
            // The layer rows and charts fill in before the task metric (the long part of a
            // language model's run), while this run is still the current job.
            request.onLayers = [this, cancel](const nlohmann::json& partial) {
                if (cancel.cancelled())
                    return;
                QMetaObject::invokeMethod(
                    this,
                    [this, cancel, partial] {
                        if (cancel.cancelled())
                            return;
                        // The view last: a slot of its reportChanged may end this run.
                        m_layerModel->setReport(partial);
                        showMetricColumns(true);
                        m_reportView->showPartialReport(partial);
                    },
                    Qt::QueuedConnection);
            };
            return bitlens::widgets::runQuantization(*session, request, progress, cancel);
        },
        [this, scheme, training, overrides = request.overrides.size()](
            Result<nlohmann::json> result) {
            m_reportView->setRunning(QString());
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
    // After start(): starting cancels the job before, whose handler clears the running state.
    m_reportView->setRunning(scheme);
    updateQuantState();
}

void MainWindow::runScheme(const QString& scheme)
{
    if (!askToReplaceRun(scheme))
        return;
    m_quantPanel->setSchemeText(scheme);
    runQuantization();
}

void MainWindow::runComparison()
{
    if (!askToReplaceRun(tr("a comparison of all schemes")))
        return;
    QuantRequest request;
    if (!prepareRun(request))
        return;
    // The table grows scheme by scheme: each finished report is posted to this thread, where
    // it is shown only while this comparison is still the current job (its token not cancelled).
    auto clock = std::make_shared<QElapsedTimer>();
    clock->start();
    m_quantJobs->start(
        tr("Comparing all schemes"),
        [this, session = m_session, request](Progress& progress, const CancelToken& cancel) {
            const auto onRun = [this, cancel](const nlohmann::json& report) {
                if (cancel.cancelled())
                    return;
                QMetaObject::invokeMethod(
                    this,
                    [this, cancel, report] {
                        if (!cancel.cancelled())
                            m_reportView->addComparisonRun(report);
                    },
                    Qt::QueuedConnection);
            };
            return bitlens::widgets::runComparison(*session, request, progress, cancel, onRun);
        },
        [this, clock](Result<nlohmann::json> result) {
            m_reportView->setRunning(QString());
            updateQuantState();
            const QString elapsed = JobProgressWidget::timeText(clock->elapsed(), 1.0);
            if (!result) {
                m_reportView->endComparison(false, elapsed);
                onQuantFailed(result.error(), tr("Comparing all schemes"));
                return;
            }
            m_reportView->setComparison(result.value());
            m_reportView->endComparison(true, elapsed);
            m_reportView->addComparisonRuns(result.value(), currentModelPath());
            showResultTab(QStringLiteral("Compare"));
            Q_EMIT comparisonShown();
        });
    m_reportView->beginComparison(comparisonSize());
    m_reportView->setRunning(tr("a comparison of all schemes"));
    showResultTab(QStringLiteral("Compare"));
    updateQuantState();
}

bool MainWindow::prepareSensitivity(QuantRequest& request)
{
    if (!askToReplaceRun(tr("the sensitivity of %1").arg(m_quantPanel->schemeText())))
        return false;
    if (!prepareRun(request))
        return false;
    request.sensitivityByKld = m_reportView->sensitivityByKld();
    return true;
}

void MainWindow::runSensitivity()
{
    QuantRequest request;
    if (!prepareSensitivity(request))
        return;
    if (!m_dialogsEnabled) {
        // Tests with dialogs off sweep as asked.
        startSensitivity(request);
        return;
    }
    // What the sweep costs is measured first (one evaluation window or batch, timed), and the
    // user chooses before it starts: a smollm2-135m sweep is ~1:45:00 on 2 cores.
    const QString scheme = QString::fromStdString(request.scheme);
    m_quantJobs->start(
        tr("Estimating the sensitivity sweep of %1").arg(scheme),
        [session = m_session, request](Progress& progress, const CancelToken& cancel) {
            return bitlens::widgets::estimateSensitivity(*session, request, progress, cancel);
        },
        [this, request, scheme](Result<nlohmann::json> result) {
            m_reportView->setRunning(QString());
            updateQuantState();
            if (!result) {
                onQuantFailed(result.error(), tr("Sensitivity of “%1”").arg(scheme));
                return;
            }
            auto cost = workspace::sensitivityCostFromJson(result.value());
            if (!cost) {
                onQuantFailed(cost.error(), tr("Sensitivity of “%1”").arg(scheme));
                return;
            }
            SensitivityCostDialog dialog(*cost, scheme, this);
            if (dialog.exec() != QDialog::Accepted)
                return;
            QuantRequest chosen = request;
            if (dialog.evalUnits() < cost->evalUnits)
                chosen.evalLimit = dialog.evalUnits();
            chosen.sensitivityLayers = dialog.layerFilters();
            startSensitivity(chosen);
        });
    m_reportView->setRunning(tr("an estimate of the sensitivity sweep of %1").arg(scheme));
    updateQuantState();
}

void MainWindow::runSensitivitySweep()
{
    QuantRequest request;
    if (prepareSensitivity(request))
        startSensitivity(request);
}

void MainWindow::startSensitivity(const QuantRequest& request)
{
    const QString scheme = QString::fromStdString(request.scheme);
    m_quantJobs->start(
        tr("Sensitivity of %1").arg(scheme),
        [session = m_session, request](Progress& progress, const CancelToken& cancel) {
            return bitlens::widgets::runSensitivity(*session, request, progress, cancel);
        },
        [this, scheme](Result<nlohmann::json> result) {
            m_reportView->setRunning(QString());
            updateQuantState();
            if (!result) {
                onQuantFailed(result.error(), tr("Sensitivity of “%1”").arg(scheme));
                return;
            }
            m_reportView->setSensitivity(result.value());
            showResultTab(QStringLiteral("Sensitivity"));
            Q_EMIT sensitivityShown();
        });
    m_reportView->setRunning(tr("the sensitivity of %1").arg(scheme));
    updateQuantState();
}

bool MainWindow::generate(const QString& prompt)
{
    m_generateView->setPrompt(prompt);
    return runGenerate();
}

bool MainWindow::runGenerate()
{
    if (!m_session) {
        showError(tr("Open a language model first (File > Open Model)."));
        return false;
    }
    if (auto ok = workspace::checkGenerate(*m_session); !ok) {
        showError(tr("Generate failed: %1").arg(reasonText(ok.error())));
        return false;
    }
    workspace::GenerateRequest generate = m_generateView->request();
    if (QString::fromStdString(generate.prompt).trimmed().isEmpty()) {
        showError(tr("Type a prompt in the Generate tab first."));
        return false;
    }
    if (!askToReplaceRun(tr("generation with %1").arg(m_quantPanel->schemeText())))
        return false;
    QuantRequest request;
    if (!prepareRun(request))
        return false;
    generate.run = request;
    const QString scheme = QString::fromStdString(request.scheme);
    const QString label =
        request.overrides.empty()
            ? scheme
            : tr("%1 (+%n override(s))", nullptr, static_cast<int>(request.overrides.size()))
                  .arg(scheme);
    const workspace::GenerateObserver observer = m_generateView->begin(label);
    showResultTab(QStringLiteral("Generate"));
    m_generateJob = m_quantJobs->start(
        tr("Generating with %1").arg(scheme),
        [session = m_session, generate, observer](Progress& progress, const CancelToken& cancel) {
            return workspace::generateCompare(*session, generate, progress, cancel, observer);
        },
        [this, scheme](Result<workspace::GenerateComparison> result) {
            m_reportView->setRunning(QString());
            updateQuantState();
            if (!result) {
                const QString why = QString::fromStdString(result.error().userMessage());
                m_generateView->stop(tr("Generation stopped: %1").arg(why));
                onQuantFailed(result.error(), tr("Generating with “%1”").arg(scheme));
                return;
            }
            m_generateView->finish(result.value());
            statusBar()->showMessage(m_generateView->statusText(), 10000);
            Q_EMIT generateShown();
        });
    m_reportView->setRunning(tr("generation with %1").arg(label));
    updateQuantState();
    return true;
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
    const bool exporting = m_export->isRunning();
    if (m_training->isTraining() || (m_quantJobs->isRunning() && !exporting))
        m_training->finish(tr("Cancelled."));
    m_quantJobs->cancel();
}

void MainWindow::keepResultsOfBefore()
{
    if (!m_reportView->dropPartialReport())
        return;
    const nlohmann::json& report = m_reportView->report();
    if (report.is_null()) {
        m_layerModel->setReport(nlohmann::json());
        showMetricColumns(false);
    } else {
        m_layerModel->setReport(report);
    }
}

void MainWindow::onQuantFailed(const Error& error, const QString& what)
{
    keepResultsOfBefore();
    Q_EMIT quantizationStopped();
    if (error.code == ErrorCode::Cancelled)
        return;
    QString reason = reasonText(error);
    if (!error.path.empty())
        reason = QString::fromStdString(error.path) + QStringLiteral(": ") + reason;
    showError(tr("%1 failed: %2").arg(what, reason));
}

void MainWindow::updateMemoryForecast()
{
    m_generateView->setScheme(m_quantPanel->schemeText(), static_cast<int>(m_overrides.size()));
    if (!m_session) {
        m_quantPanel->setMemoryForecast(QString(), true);
        return;
    }
    std::map<std::string, std::string> overrides;
    for (auto it = m_overrides.cbegin(); it != m_overrides.cend(); ++it)
        overrides[it.key().toStdString()] = it.value().toStdString();
    // The graph only (never the session's data), so this is safe while a job runs.
    auto forecast =
        workspace::memoryForecast(*m_session, m_quantPanel->schemeText().toStdString(), overrides);
    if (!forecast) {
        m_quantPanel->setMemoryForecast(tr("(no estimate: %1)").arg(reasonText(forecast.error())),
                                        true);
        return;
    }
    m_quantPanel->setMemoryForecast(QString::fromStdString(forecast->text), forecast->fits);
}

void MainWindow::showSchemeOfReport()
{
    const nlohmann::json& report = m_reportView->report();
    if (report.is_null())
        return;
    auto run = runOfReport(report);
    if (!run)
        return;  // a report written by hand or by an older version: the panel stays as it is
    m_quantPanel->setSchemeText(QString::fromStdString(run->scheme));
    m_overrides.clear();
    for (const auto& [layer, value] : run->overrides)
        m_overrides[QString::fromStdString(layer)] = QString::fromStdString(value);
    m_layerModel->setOverrides(m_overrides);
    updateMemoryForecast();
}

void MainWindow::updateQuantState()
{
    updateMemoryForecast();
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

} // namespace bitlens::widgets
