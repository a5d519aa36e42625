#include "export_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace bitlens::widgets {

QStringList exportFormats()
{
    return {QStringLiteral("onnx"), QStringLiteral("safetensors"), QStringLiteral("gguf")};
}

QString exportFormatLabel(const QString& format)
{
    if (format == QLatin1String("onnx"))
        return ExportDialog::tr("ONNX QDQ");
    if (format == QLatin1String("safetensors"))
        return ExportDialog::tr("safetensors (compressed-tensors)");
    if (format == QLatin1String("gguf"))
        return ExportDialog::tr("GGUF");
    return format;
}

QString exportExtension(const QString& format) { return QLatin1Char('.') + format; }

QString withExportExtension(const QString& path, const QString& format)
{
    if (path.isEmpty())
        return path;
    const QString extension = exportExtension(format);
    for (const QString& other : exportFormats()) {
        const QString old = exportExtension(other);
        if (path.endsWith(old, Qt::CaseInsensitive))
            return path.left(path.size() - old.size()) + extension;
    }
    return path + extension;
}

ExportDialog::ExportDialog(const QString& run, const QString& path, FormatCheck check,
                           QWidget* parent)
    : QDialog(parent), m_check(std::move(check)), m_format(new QComboBox),
      m_path(new QLineEdit), m_verify(new QCheckBox(tr("Verify after export"))),
      m_problemLabel(new QLabel)
{
    setObjectName(QStringLiteral("exportDialog"));
    setWindowTitle(tr("Export Quantized Model"));
    setMinimumWidth(560);

    for (const QString& format : exportFormats())
        m_format->addItem(QStringLiteral("%1  (%2)").arg(exportFormatLabel(format),
                                                         exportExtension(format)),
                          format);
    m_format->setObjectName(QStringLiteral("exportFormat"));
    m_path->setObjectName(QStringLiteral("exportPath"));
    m_path->setText(withExportExtension(path, format()));
    m_lastFormat = format();
    auto* browse = new QPushButton(tr("Browse…"));
    browse->setObjectName(QStringLiteral("exportBrowse"));
    auto* pathRow = new QHBoxLayout;
    pathRow->addWidget(m_path, 1);
    pathRow->addWidget(browse);
    m_verify->setObjectName(QStringLiteral("exportVerify"));
    m_verify->setChecked(true);
    m_verify->setToolTip(tr("Reload the written file with BitLens' reader and run it next to "
                            "the in-app quantized model on the evaluation data: weights bit for "
                            "bit, outputs, top-1."));

    auto* runLabel = new QLabel(run);
    runLabel->setObjectName(QStringLiteral("exportRun"));
    runLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    runLabel->setWordWrap(true);
    m_problemLabel->setObjectName(QStringLiteral("exportProblem"));
    m_problemLabel->setWordWrap(true);
    m_problemLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_problemLabel->setStyleSheet(QStringLiteral(
        "QLabel { color: #8a1010; background: #fdecec; border: 1px solid #e0a0a0; "
        "border-radius: 3px; padding: 6px; }"));
    m_problemLabel->hide();
    m_adviceLabel = new QLabel;
    m_adviceLabel->setObjectName(QStringLiteral("exportAdvice"));
    m_adviceLabel->setWordWrap(true);
    m_adviceLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_adviceLabel->setStyleSheet(QStringLiteral(
        "QLabel { background: #eef4fb; border: 1px solid #a8c4e0; border-radius: 3px; "
        "padding: 6px; }"));
    m_adviceLabel->hide();
    m_interopLabel = new QLabel;
    m_interopLabel->setObjectName(QStringLiteral("exportInterop"));
    m_interopLabel->setWordWrap(true);
    m_interopLabel->setTextFormat(Qt::PlainText);
    m_interopLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_interopLabel->setToolTip(tr("How the file meets the runtime that loads it. wrange and "
                                  "reduce-range are scheme options of the run "
                                  "(SCHEME:wrange=127,reduce-range=true; reduce-range is also "
                                  "the Quantize panel's 7-bit box); the partial-group rule "
                                  "belongs to the format."));
    m_interopLabel->hide();

    auto* form = new QFormLayout;
    form->addRow(tr("Run:"), runLabel);
    form->addRow(tr("Format:"), m_format);
    form->addRow(tr("File:"), pathRow);
    form->addRow(QString(), m_verify);
    form->addRow(tr("Interop options:"), m_interopLabel);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Cancel);
    m_exportButton = buttons->addButton(tr("Export"), QDialogButtonBox::AcceptRole);
    m_exportButton->setObjectName(QStringLiteral("exportButton"));
    m_exportButton->setDefault(true);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(m_problemLabel);
    layout->addWidget(m_adviceLabel);
    layout->addStretch(1);
    layout->addWidget(buttons);

    connect(m_format, &QComboBox::currentIndexChanged, this, &ExportDialog::onFormatChanged);
    connect(m_path, &QLineEdit::textChanged, this, &ExportDialog::updateState);
    connect(browse, &QPushButton::clicked, this, &ExportDialog::browse);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    onFormatChanged();
}

QString ExportDialog::format() const { return m_format->currentData().toString(); }

void ExportDialog::setFormat(const QString& format)
{
    const int index = m_format->findData(format);
    if (index >= 0)
        m_format->setCurrentIndex(index);
}

QString ExportDialog::path() const { return m_path->text().trimmed(); }

void ExportDialog::setPath(const QString& path) { m_path->setText(path); }

bool ExportDialog::verifyAfterExport() const { return m_verify->isChecked(); }

void ExportDialog::setVerifyAfterExport(bool verify) { m_verify->setChecked(verify); }

void ExportDialog::onFormatChanged()
{
    const QString chosen = format();
    if (chosen != m_lastFormat)
        m_path->setText(withExportExtension(path(), chosen));
    m_lastFormat = chosen;
    m_problem = m_check ? m_check(chosen) : QString();
    m_problemLabel->setText(m_problem.isEmpty()
                                ? QString()
                                : tr("Cannot export to %1: %2")
                                      .arg(exportFormatLabel(chosen), m_problem));
    m_problemLabel->setVisible(!m_problem.isEmpty());
    m_advice = m_problem.isEmpty() && m_adviceCheck ? m_adviceCheck(chosen) : QString();
    m_adviceLabel->setText(m_advice.isEmpty() ? QString() : tr("Note: %1.").arg(m_advice));
    m_adviceLabel->setVisible(!m_advice.isEmpty());
    m_interop = m_interopSource ? m_interopSource(chosen) : QStringList();
    m_interopLabel->setText(m_interop.join(QLatin1Char('\n')));
    m_interopLabel->setVisible(!m_interop.isEmpty());
    updateState();
}

void ExportDialog::setInteropOptions(FormatLines options)
{
    m_interopSource = std::move(options);
    onFormatChanged();
}

void ExportDialog::setAdvice(FormatCheck advice)
{
    m_adviceCheck = std::move(advice);
    onFormatChanged();
}

void ExportDialog::browse()
{
    const QString chosen = format();
    const QString filter = tr("%1 files (*%2)").arg(exportFormatLabel(chosen),
                                                    exportExtension(chosen));
    QString file = QFileDialog::getSaveFileName(this, tr("Export to"), path(), filter);
    if (file.isEmpty())
        return;
    if (!file.endsWith(exportExtension(chosen), Qt::CaseInsensitive))
        file = withExportExtension(file, chosen);
    m_path->setText(file);
}

void ExportDialog::updateState()
{
    m_exportButton->setEnabled(m_problem.isEmpty() && !path().isEmpty());
}

} // namespace bitlens::widgets
