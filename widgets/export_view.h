#pragma once
// The Export tab: what the last export or verification of the open model wrote and found — the
// file, its size, the largest output difference under ONNX's rounding and under BitLens' own,
// the weights compared and mismatched, top-1 in the app and from the file — under a verdict in
// words: PASS (green), FAIL (red) or not verified. It shows the JSON the export job returns
// (report.json's "export" object) and computes nothing.

#include <nlohmann/json.hpp>

#include <QString>
#include <QWidget>

class QFormLayout;
class QLabel;
class QPushButton;

namespace bitlens::widgets {

/// The Export tab (see the file comment).
class ExportView : public QWidget {
    Q_OBJECT

public:
    /// What the result on screen says.
    enum class Verdict {
        None,         ///< nothing exported yet
        NotVerified,  ///< written, not verified
        Pass,         ///< verified: the file reproduces the in-app model
        Fail,         ///< verified: the file does not match
        VerifyError,  ///< written, but the verification could not run
    };

    explicit ExportView(QWidget* parent = nullptr);

    /// Shows an export (or verification) result: report.json's "export" object, with the
    /// window's extras ("reused_run_model", "verify_error", "verified_only", "scheme").
    void setResult(const nlohmann::json& result);
    /// Back to "nothing exported yet".
    void clear();

    /// The result on screen (null when none).
    const nlohmann::json& result() const { return m_result; }
    Verdict verdict() const { return m_verdict; }
    /// The verdict line ("PASS — …", "FAIL — …").
    QString verdictText() const;
    /// The text of a row by its label ("File", "Max |diff|, same rounding", …); empty if none.
    QString rowText(const QString& label) const;
    /// "Export…" and "Verify File…" in the tab.
    QPushButton* exportButton() const { return m_exportButton; }
    QPushButton* verifyButton() const { return m_verifyButton; }

Q_SIGNALS:
    void exportRequested();
    void verifyRequested();

private:
    void addRow(const QString& label, const QString& text, const QString& toolTip = {});
    void clearRows();

    QLabel* m_banner;
    QFormLayout* m_form;
    QPushButton* m_exportButton;
    QPushButton* m_verifyButton;
    nlohmann::json m_result;
    Verdict m_verdict = Verdict::None;
};

} // namespace bitlens::widgets
