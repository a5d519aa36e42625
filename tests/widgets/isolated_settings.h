#pragma once
// Force-included into every GUI test (tests/CMakeLists.txt): each test process gets a settings
// folder of its own, so tests that ctest runs side by side (-j2, -j4) never see each other's
// recent files, presets or window state. QStandardPaths' test mode alone is not enough: it
// sends every test process to the same ~/.qttest/config.

#include <QCoreApplication>
#include <QDir>
#include <QSettings>
#include <QStandardPaths>
#include <QString>

#include <cstdlib>

namespace bitlens::testing {

/// Points QSettings (native and INI, user scope) at a fresh folder for this process, removed
/// when the application object goes away.
inline void isolateSettings()
{
    QStandardPaths::setTestModeEnabled(true);
    static QString folder;
    folder = QDir::tempPath() + QStringLiteral("/bitlens-gui-test-%1-%2")
                                    .arg(QCoreApplication::applicationName())
                                    .arg(QCoreApplication::applicationPid());
    QDir(folder).removeRecursively();
    QDir().mkpath(folder);
    QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, folder);
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, folder);
    qputenv("XDG_CONFIG_HOME", folder.toLocal8Bit());
    qAddPostRoutine([] { QDir(folder).removeRecursively(); });
}

} // namespace bitlens::testing

namespace {
/// Q_COREAPP_STARTUP_FUNCTION needs an unqualified name.
inline void bitlensIsolateSettings() { bitlens::testing::isolateSettings(); }
} // namespace
Q_COREAPP_STARTUP_FUNCTION(bitlensIsolateSettings)
