#pragma once
// Texts the main window and its controllers show for failures, in one place so every part of
// the window words them alike: "Could not open model “/x.onnx”: reason (at byte 12)".

#include "jobs/result.h"

#include <QString>

namespace bitlens::widgets::window_text {

/// The reason part of an error: its message plus the byte offset when known.
QString reasonText(const Error& error);

/// "Could not open <what> “<request>”: reason". When the error is about another file than the
/// one requested (a zoo model's training data), that file is named in the reason.
QString failureMessage(const QString& what, const QString& request, const Error& error);

} // namespace bitlens::widgets::window_text
