#pragma once
// The Help menu's texts: About BitLens (version, LibTorch, Qt, CPU and the kernels' ISA level,
// licences) and "How to read the charts", the README's section of that name, compiled into
// the library (qt_add_resources in widgets/CMakeLists.txt) so an installed BitLens shows the
// same words as the README on GitHub.

#include <QString>

class QWidget;

namespace bitlens::widgets {

/// The About dialog's text (HTML).
QString aboutText();
/// The README's "How to read the charts" section (Markdown, images left out), or a line saying
/// where to read it when the README is not compiled in.
QString chartGuideMarkdown();
/// Shows chartGuideMarkdown() in a non-modal, scrollable dialog; returns it.
QWidget* showChartGuide(QWidget* parent);

} // namespace bitlens::widgets
