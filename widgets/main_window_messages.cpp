#include "main_window_messages.h"

#include <QCoreApplication>
#include <QFileInfo>

namespace bitlens::widgets::window_text {

namespace {

QString tr(const char* text)
{
    return QCoreApplication::translate("bitlens::widgets::MainWindow", text);
}

} // namespace

QString reasonText(const Error& error)
{
    QString reason = QString::fromStdString(error.message);
    if (error.offset)
        reason += tr(" (at byte %1)").arg(*error.offset);
    return reason;
}

QString failureMessage(const QString& what, const QString& request, const Error& error)
{
    const QString errorPath = QString::fromStdString(error.path);
    QString reason = reasonText(error);
    if (!errorPath.isEmpty() && QFileInfo(errorPath) != QFileInfo(request))
        reason = errorPath + QStringLiteral(": ") + reason;
    return tr("Could not open %1 “%2”: %3").arg(what, request, reason);
}

} // namespace bitlens::widgets::window_text
