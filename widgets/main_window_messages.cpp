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
    // The core's messages are bitlens-cli's too, and advise with its flags; the window says the
    // same with its own controls (the memory refusal of an 8B model, a gguf-* scheme to ONNX).
    reason.replace(QStringLiteral("use --limit / --seq-len, a smaller model, or a machine with "
                                  "more memory"),
                   tr("evaluate on less data (Evaluate, Tokens in the Scheme panel), open a "
                      "smaller model, or use a machine with more memory"));
    reason.replace(QStringLiteral("which only --format gguf holds"),
                   tr("which only the GGUF format holds"));
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
