#pragma once
// File > Export Quantized Model…: which format (ONNX QDQ, safetensors compressed-tensors,
// GGUF) and which file the run on screen is written to, and whether the file is verified after
// it is written. It only gathers the choice; the window runs the export as a job. A format that
// cannot hold the run's scheme is said at once, in the core's words, and Export stays disabled.

#include <QDialog>
#include <QString>
#include <QStringList>

#include <functional>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace bitlens::widgets {

/// The export formats the dialog offers, in its order: "onnx", "safetensors", "gguf".
QStringList exportFormats();
/// "ONNX QDQ", "safetensors (compressed-tensors)", "GGUF".
QString exportFormatLabel(const QString& format);
/// The file extension of a format, with its dot: ".onnx".
QString exportExtension(const QString& format);
/// `path` with its extension changed to `format`'s when it has one of the export extensions
/// (or none); other names are kept and get the extension appended.
QString withExportExtension(const QString& path, const QString& format);

/// The export dialog (see the file comment).
class ExportDialog : public QDialog {
    Q_OBJECT

public:
    /// Says why `format` cannot hold the run's scheme, or returns an empty string.
    using FormatCheck = std::function<QString(const QString& format)>;

    /// `run` names the run exported ("static-int8, 12:01:33"); `path` is the proposed file.
    ExportDialog(const QString& run, const QString& path, FormatCheck check,
                 QWidget* parent = nullptr);

    /// The chosen format ("onnx", "safetensors", "gguf").
    QString format() const;
    /// Chooses a format; the file's extension follows.
    void setFormat(const QString& format);
    /// The chosen file.
    QString path() const;
    void setPath(const QString& path);
    /// "Verify after export" (checked by default).
    bool verifyAfterExport() const;
    void setVerifyAfterExport(bool verify);
    /// Why the chosen format cannot hold the run's scheme (empty when it can).
    QString problem() const { return m_problem; }
    /// Advice for a format that can hold the scheme (shown, not blocking: e.g. onnxruntime's
    /// saturation on CPUs without VNNI); the function returns "" when there is none.
    void setAdvice(FormatCheck advice);
    /// The advice shown for the chosen format ("" when none).
    QString advice() const { return m_advice; }
    /// The interop options of a format, one line each (workspace::exportInteropOptions):
    /// "wrange = 128 (default 128): ...", "reduce-range = false (default false): ...",
    /// "partial groups: ...". Shown under "Interop options" and followed on a format change.
    using FormatLines = std::function<QStringList(const QString& format)>;
    void setInteropOptions(FormatLines options);
    /// The interop option lines shown for the chosen format (empty when none were given).
    QStringList interopOptions() const { return m_interop; }
    /// The Export button (disabled while the format cannot hold the scheme or no file is set).
    QPushButton* exportButton() const { return m_exportButton; }

private:
    void onFormatChanged();
    void browse();
    void updateState();

    FormatCheck m_check;
    QComboBox* m_format;
    QLineEdit* m_path;
    QCheckBox* m_verify;
    QLabel* m_problemLabel;
    QPushButton* m_exportButton;
    QString m_problem;
    FormatCheck m_adviceCheck;
    QString m_advice;
    QLabel* m_adviceLabel = nullptr;
    FormatLines m_interopSource;
    QStringList m_interop;
    QLabel* m_interopLabel = nullptr;
    QString m_lastFormat;
};

} // namespace bitlens::widgets
