#include "export_view.h"

#include "export_dialog.h"
#include "layer_table_model.h"

#include <QDir>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <string>

namespace bitlens::widgets {

namespace {

double numberOr(const nlohmann::json& j, const char* key, double fallback)
{
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

std::int64_t countOf(const nlohmann::json& j, const char* key)
{
    return j.contains(key) && j[key].is_number() ? j[key].get<std::int64_t>() : 0;
}

QString stringOf(const nlohmann::json& j, const char* key)
{
    return j.contains(key) && j[key].is_string() ? QString::fromStdString(j[key].get<std::string>())
                                                 : QString();
}

/// A difference as people read it: "0 (identical)", "1.91e-06".
QString diffText(double value)
{
    if (std::isnan(value))
        return ExportView::tr("n/a");
    if (value == 0.0)
        return ExportView::tr("0 (identical)");
    return QString::number(value, 'g', 3);
}

constexpr const char* kBannerStyle =
    "QLabel { font-size: %1pt; font-weight: bold; padding: 10px; border-radius: 4px; "
    "color: %2; background: %3; border: 2px solid %4; }";

} // namespace

ExportView::ExportView(QWidget* parent)
    : QWidget(parent), m_banner(new QLabel), m_form(new QFormLayout),
      m_exportButton(new QPushButton(tr("Export…"))),
      m_verifyButton(new QPushButton(tr("Verify File…")))
{
    setObjectName(QStringLiteral("exportView"));
    m_banner->setObjectName(QStringLiteral("exportVerdict"));
    m_banner->setWordWrap(true);
    m_banner->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_exportButton->setObjectName(QStringLiteral("exportViewExport"));
    m_verifyButton->setObjectName(QStringLiteral("exportViewVerify"));
    m_exportButton->setToolTip(tr("Write the quantized model of the run on screen to a file"));
    m_verifyButton->setToolTip(tr("Check an exported file against the run on screen"));
    m_form->setLabelAlignment(Qt::AlignRight);
    m_form->setHorizontalSpacing(16);

    auto* body = new QWidget;
    auto* bodyLayout = new QVBoxLayout(body);
    bodyLayout->addWidget(m_banner);
    bodyLayout->addLayout(m_form);
    bodyLayout->addStretch(1);
    auto* scroll = new QScrollArea;
    scroll->setWidget(body);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);

    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_exportButton);
    buttons->addWidget(m_verifyButton);
    buttons->addStretch(1);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(scroll, 1);
    layout->addLayout(buttons);

    connect(m_exportButton, &QPushButton::clicked, this, &ExportView::exportRequested);
    connect(m_verifyButton, &QPushButton::clicked, this, &ExportView::verifyRequested);
    clear();
}

void ExportView::clear()
{
    m_result = nlohmann::json();
    m_verdict = Verdict::None;
    clearRows();
    m_banner->setText(tr("Nothing exported yet. Run a scheme, then File > Export Quantized "
                         "Model… writes it as ONNX QDQ, safetensors (compressed-tensors) or "
                         "GGUF and checks the file against the in-app model."));
    m_banner->setStyleSheet(QStringLiteral("QLabel { padding: 10px; color: palette(text); }"));
}

QString ExportView::verdictText() const { return m_banner->text(); }

void ExportView::clearRows()
{
    while (m_form->rowCount() > 0)
        m_form->removeRow(0);
}

void ExportView::addRow(const QString& label, const QString& text, const QString& toolTip)
{
    auto* value = new QLabel(text);
    value->setObjectName(QStringLiteral("exportRow:") + label);
    value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    value->setWordWrap(true);
    value->setToolTip(toolTip);
    auto* name = new QLabel(label + QLatin1Char(':'));
    name->setToolTip(toolTip);
    m_form->addRow(name, value);
}

QString ExportView::rowText(const QString& label) const
{
    const auto* value = findChild<QLabel*>(QStringLiteral("exportRow:") + label);
    return value ? value->text() : QString();
}

void ExportView::setResult(const nlohmann::json& result)
{
    m_result = result;
    clearRows();
    const QString path = stringOf(result, "path");
    const QString format = stringOf(result, "format");
    const bool verifiedOnly = result.value("verified_only", false);
    const nlohmann::json verify =
        result.contains("verify") && result["verify"].is_object() ? result["verify"]
                                                                  : nlohmann::json();
    const QString verifyError = stringOf(result, "verify_error");

    addRow(tr("File"), QDir::toNativeSeparators(path));
    QString formatText = exportFormatLabel(format);
    if (const auto opset = countOf(result, "opset"); opset > 0)
        formatText += tr(", opset %1").arg(opset);
    addRow(tr("Format"), formatText);
    const std::int64_t bytes = countOf(result, "bytes");
    addRow(tr("Size"), tr("%1 (%2 bytes)").arg(bytesText(bytes), formatCount(bytes)));
    if (const QString scheme = stringOf(result, "scheme"); !scheme.isEmpty())
        addRow(tr("Scheme"), scheme);
    addRow(tr("Layers"), tr("%1 quantized, %2 kept in float")
                             .arg(countOf(result, "quantized_layers"))
                             .arg(countOf(result, "float_layers")));
    if (result.contains("reused_run_model") && result["reused_run_model"].is_boolean())
        addRow(tr("In-app model"),
               result["reused_run_model"].get<bool>()
                   ? tr("the run's own quantized model (kept from the run)")
                   : tr("prepared again from the run's scheme and data (the run's model was "
                        "no longer kept)"));
    if (result.contains("notes") && result["notes"].is_array())
        for (const auto& note : result["notes"])
            if (note.is_string())
                addRow(tr("Note"), QString::fromStdString(note.get<std::string>()));

    QString fg = QStringLiteral("#444444"), bg = QStringLiteral("#f0f0f0"),
            border = QStringLiteral("#c0c0c0");
    QString banner;
    if (!verify.is_null()) {
        const bool ok = verify.value("ok", false);
        const std::int64_t samples = countOf(verify, "samples");
        addRow(tr("Samples compared"), formatCount(samples));
        const double tolerance = numberOr(verify, "same_rounding_tolerance", 0.0);
        const QString allowed =
            tolerance == 0.0 ? tr("0: bit for bit") : QString::number(tolerance, 'g', 3);
        if (format == QLatin1String("onnx")) {
            addRow(tr("Max |diff|, ONNX rounding"),
                   tr("%1 (outputs reach %2)")
                       .arg(diffText(numberOr(verify, "max_abs_diff", NAN)))
                       .arg(QString::number(numberOr(verify, "output_abs_max", NAN), 'g', 4)),
                   tr("The file run as ONNX defines its operators (x / scale, as onnxruntime "
                      "does); may differ by one activation step where a value lies within an "
                      "ulp of a rounding tie."));
            addRow(tr("Max |diff|, same rounding"),
                   tr("%1 (allowed %2)")
                       .arg(diffText(numberOr(verify, "max_abs_diff_same_rounding", NAN)))
                       .arg(allowed),
                   tr("The file run with BitLens' rounding rule (x * (1 / scale)): it must "
                      "reproduce the in-app outputs exactly."));
        } else {
            // GGUF and safetensors hold weights only: the file runs once, with the in-app
            // model's own activations; no operator of the file rounds differently.
            addRow(tr("Max |diff|, file vs app"),
                   tr("%1 (allowed %2; outputs reach %3)")
                       .arg(diffText(numberOr(verify, "max_abs_diff_same_rounding", NAN)))
                       .arg(allowed)
                       .arg(QString::number(numberOr(verify, "output_abs_max", NAN), 'g', 4)),
                   tr("The file read back by BitLens' own reader and run: it must reproduce the "
                      "in-app outputs."));
        }
        addRow(tr("Weights compared"),
               tr("%1 layers, %2 mismatched")
                   .arg(countOf(verify, "weights_checked"))
                   .arg(countOf(verify, "weights_mismatched")),
               tr("Dequantized weights of every quantized layer, compared bit for bit."));
        const double app = numberOr(verify, "metric_app", NAN);
        const double file = numberOr(verify, "metric_file", NAN);
        const bool perplexity = stringOf(verify, "metric_name") == QLatin1String("perplexity");
        if (perplexity)
            addRow(tr("Perplexity in app vs file"),
                   tr("%1 vs %2 (%3 %; allowed %4 %), mean KLD %5")
                       .arg(app, 0, 'f', 4)
                       .arg(file, 0, 'f', 4)
                       .arg(100.0 * (file / app - 1.0), 0, 'f', 3)
                       .arg(100.0 * numberOr(verify, "metric_tolerance", 0.0), 0, 'f', 2)
                       .arg(numberOr(verify, "mean_kld", NAN), 0, 'g', 3),
                   tr("Over every next-token prediction of the windows; KLD of the file's "
                      "distribution from the in-app one."));
        else if (!std::isnan(app) || !std::isnan(file))
            addRow(tr("Top-1 in app vs file"),
                   tr("%1 vs %2 (%3 points; allowed %4)")
                       .arg(app, 0, 'f', 4)
                       .arg(file, 0, 'f', 4)
                       .arg(100.0 * (file - app), 0, 'f', 2)
                       .arg(100.0 * numberOr(verify, "metric_tolerance", 0.0), 0, 'f', 2));
        const double cosine = numberOr(verify, "embedding_cosine_mean", NAN);
        if (!std::isnan(cosine))
            addRow(tr("Embedding cosine, file vs app"),
                   tr("%1 (min %2)")
                       .arg(cosine, 0, 'f', 6)
                       .arg(numberOr(verify, "embedding_cosine_min", NAN), 0, 'f', 6));
        const std::int64_t positions = countOf(verify, "top1_positions");
        const QString task = stringOf(verify, "task");
        if (task.isEmpty() || task == QLatin1String("classification"))
            addRow(tr("Top-1 disagreements"),
                   tr("%1 of %2 samples").arg(formatCount(countOf(verify, "argmax_disagreements")),
                                              formatCount(samples)));
        else if (positions > 0)
            addRow(tr("Top-1 disagreements"),
                   tr("%1 of %2 token positions")
                       .arg(formatCount(countOf(verify, "argmax_disagreements")),
                            formatCount(positions)));
        addRow(tr("Verifier"), stringOf(verify, "message"));
        if (ok) {
            m_verdict = Verdict::Pass;
            banner = tr("PASS — %1 reproduces the in-app quantized model: same weights, "
                        "same outputs.")
                         .arg(QDir::toNativeSeparators(path));
            fg = QStringLiteral("#14532d");
            bg = QStringLiteral("#dcf5e3");
            border = QStringLiteral("#2e9e55");
        } else {
            m_verdict = Verdict::Fail;
            banner = tr("FAIL — %1 does NOT match the in-app quantized model. Do not use this "
                        "file; the numbers below say where it differs.")
                         .arg(QDir::toNativeSeparators(path));
            fg = QStringLiteral("#7f0000");
            bg = QStringLiteral("#fde2e2");
            border = QStringLiteral("#d32f2f");
        }
    } else if (!verifyError.isEmpty()) {
        m_verdict = Verdict::VerifyError;
        addRow(tr("Verification"), verifyError);
        banner = tr("NOT VERIFIED — %1 was written, but checking it failed: %2")
                     .arg(QDir::toNativeSeparators(path), verifyError);
        fg = QStringLiteral("#7f0000");
        bg = QStringLiteral("#fde2e2");
        border = QStringLiteral("#d32f2f");
    } else {
        m_verdict = Verdict::NotVerified;
        banner = tr("Exported %1 (not verified: Verify File… checks it against this run).")
                     .arg(QDir::toNativeSeparators(path));
    }
    if (verifiedOnly)
        banner += tr(" (An existing file, checked against the run on screen.)");
    m_banner->setText(banner);
    const int points = m_verdict == Verdict::NotVerified ? font().pointSize()
                                                         : font().pointSize() + 3;
    m_banner->setStyleSheet(QString::fromLatin1(kBannerStyle)
                                .arg(std::max(points, 9))
                                .arg(fg, bg, border));
}

} // namespace bitlens::widgets
