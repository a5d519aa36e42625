#pragma once
// The window as the workflow tests drive it: opened on a model and data, and a scheme run to
// its report. Shared by the GUI tests that run quantizations (test_quant_workflow,
// test_reliability, test_run_feedback).

#include "job_runner.h"
#include "main_window.h"

#include <QSignalSpy>
#include <QString>

#include <memory>

namespace bitlens::testing {

/// A shown window (dialogs off) with `model` and `data` open, or null when either did not open
/// within 30 s.
inline std::unique_ptr<widgets::MainWindow> openWindowOn(const QString& model, const QString& data)
{
    auto window = std::make_unique<widgets::MainWindow>();
    window->setDialogsEnabled(false);
    window->show();
    QSignalSpy loaded(window.get(), &widgets::MainWindow::modelLoaded);
    QSignalSpy dataLoaded(window.get(), &widgets::MainWindow::dataLoaded);
    window->openModel(model);
    window->openData(data);
    if (loaded.isEmpty())
        loaded.wait(30000);
    if (dataLoaded.isEmpty())
        dataLoaded.wait(30000);
    if (!window->currentModel() || !window->currentData())
        return nullptr;
    return window;
}

/// Runs `scheme` and waits up to `timeoutMs` for its report; false (with the error as a
/// warning) when none came or an error was shown.
inline bool runSchemeAndWait(widgets::MainWindow& window, const QString& scheme,
                             int timeoutMs = 60000)
{
    QSignalSpy shown(&window, &widgets::MainWindow::reportShown);
    QSignalSpy errors(&window, &widgets::MainWindow::errorShown);
    window.runScheme(scheme);
    if (!window.quantJobs()->isRunning())
        return false;
    const bool ok = shown.wait(timeoutMs) && errors.isEmpty();
    if (!errors.isEmpty())
        qWarning("%s", qPrintable(errors.front().front().toString()));
    return ok;
}

} // namespace bitlens::testing
