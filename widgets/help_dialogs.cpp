#include "help_dialogs.h"

#include "analysis/hardware.h"
#include "kernels/cpu_features.h"

#include <QApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFile>
#include <QRegularExpression>
#include <QStringList>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <QtGlobal>

namespace bitlens::widgets {

QString aboutText()
{
    // cpuid only: probeHardware() would also wake the CUDA driver (seconds) on the GUI thread.
    QStringList present;
    for (const analysis::CpuFlagFact& flag : analysis::cpuFlagFacts())
        if (flag.present)
            present << QString::fromStdString(flag.name);
    const std::string model = kernels::cpuModelName();
    const QString cpu = model.empty() ? QObject::tr("(cpuid gives no model name)")
                                      : QString::fromStdString(model);
    const std::string isaNote = kernels::isaOverrideNote();
    return QObject::tr(
               "<h3>BitLens %1</h3>"
               "<p>A quantization explorer for neural networks: open a model and calibration "
               "data, pick a scheme (int8, 4-bit, FP8, MX / NVFP4, GGUF blocks...), and see "
               "per-layer error, histograms with the quantization grid, memory and the measured "
               "throughput of real low-bit kernels on this machine. The same core runs "
               "<tt>bitlens-cli</tt>.</p>"
               "<p><b>Built with</b> LibTorch %2 and Qt %3 (running on Qt %4).</p>"
               "<p><b>This CPU:</b> %5<br>flags: %6<br>own kernels at ISA level %7 of %8%9</p>"
               "<p><b>Licences:</b> BitLens's own licence is not chosen yet (the source has no "
               "LICENSE file). It uses LibTorch (BSD-3-Clause) and Qt 6 (LGPL-3.0).</p>"
               "<p>Help ▸ How to read the charts explains every chart (the README's section of "
               "that name).</p>")
        .arg(QApplication::applicationVersion().toHtmlEscaped(),
             QString::fromStdString(analysis::libtorchVersion()).toHtmlEscaped(),
             QStringLiteral(QT_VERSION_STR), QString::fromLatin1(qVersion()),
             cpu.toHtmlEscaped(),
             present.isEmpty() ? QObject::tr("none of the vector extensions")
                               : present.join(QStringLiteral(" ")),
             QString::fromLatin1(kernels::isaName(kernels::isaLevel())),
             QString::fromLatin1(kernels::isaName(kernels::hardwareIsaLevel())),
             isaNote.empty() ? QString()
                             : QStringLiteral(" (%1)").arg(
                                   QString::fromStdString(isaNote).toHtmlEscaped()));
}

QString chartGuideMarkdown()
{
    QFile file(QStringLiteral(":/doc/README.md"));
    if (!file.open(QIODevice::ReadOnly))
        return QObject::tr("The chart guide is the section “How to read the charts” of "
                           "README.md in BitLens's source.");
    const QString readme = QString::fromUtf8(file.readAll());
    const QString heading = QStringLiteral("### How to read the charts");
    const qsizetype begin = readme.indexOf(heading);
    if (begin < 0)
        return QObject::tr("README.md has no section “How to read the charts”.");
    // The section ends at the next heading of the same or a higher level.
    static const QRegularExpression next(QStringLiteral("\\n#{1,3} "));
    const QRegularExpressionMatch end = next.match(readme, begin + heading.size());
    QString section = readme.mid(begin, end.hasMatch() ? end.capturedStart() - begin : -1);
    // Screenshots are files of the source tree, not of the installed program.
    static const QRegularExpression image(QStringLiteral("\\n *!\\[[^\\n]*\\]\\([^\\n]*\\)"));
    section.remove(image);
    return section.replace(heading, QStringLiteral("## How to read the charts"));
}

QWidget* showChartGuide(QWidget* parent)
{
    auto* dialog = new QDialog(parent);
    dialog->setObjectName(QStringLiteral("chartGuide"));
    dialog->setWindowTitle(QObject::tr("How to read the charts"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    auto* text = new QTextBrowser;
    text->setObjectName(QStringLiteral("chartGuideText"));
    text->setOpenExternalLinks(true);
    text->setMarkdown(chartGuideMarkdown());
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
    QObject::connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::close);
    auto* layout = new QVBoxLayout(dialog);
    layout->addWidget(text, 1);
    layout->addWidget(buttons);
    dialog->resize(760, 640);
    dialog->show();
    return dialog;
}

} // namespace bitlens::widgets
