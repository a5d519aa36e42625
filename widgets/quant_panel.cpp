#include "quant_panel.h"

#include "quant_job.h"

#include "model/data_defaults.h"
#include "model/model.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QHash>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>

#include <algorithm>
#include <cmath>

namespace bitlens::widgets {

namespace {

const QString kDefault = QStringLiteral("preset default");

} // namespace

QString presetDescription(const QString& preset)
{
    // What core/quant/scheme.cpp's presetDefaults sets for each preset, in one line.
    static const QHash<QString, const char*> kDescriptions = {
        {QStringLiteral("dynamic-int8"),
         QT_TR_NOOP("int8 weights per channel; uint8 activations scaled per tensor from each "
                    "batch at run time (no calibration)")},
        {QStringLiteral("static-int8"),
         QT_TR_NOOP("int8 weights per channel; uint8 activations with ranges calibrated on "
                    "sample data (minmax); BatchNorm folded into Conv")},
        {QStringLiteral("static-w4a8"),
         QT_TR_NOOP("int4 weights per channel; uint8 activations with calibrated ranges; "
                    "BatchNorm folded into Conv")},
        {QStringLiteral("w4-int4"),
         QT_TR_NOOP("Weight-only: asymmetric int4 weights in groups of 64 inputs; float "
                    "activations")},
        {QStringLiteral("w4-nf4"),
         QT_TR_NOOP("Weight-only: NF4 (4-bit NormalFloat) weights in groups of 64, scales "
                    "double-quantized to 8 bits; float activations")},
        {QStringLiteral("w4-fp4"),
         QT_TR_NOOP("Weight-only: FP4 (E2M1) weights in groups of 64; float activations")},
        {QStringLiteral("fp8-e4m3"),
         QT_TR_NOOP("FP8 E4M3 weights with one scale per tensor; activations cast to FP8 E4M3 "
                    "with a scale from each batch")},
        {QStringLiteral("fp8-e5m2"),
         QT_TR_NOOP("FP8 E5M2 weights with one scale per tensor; activations cast to FP8 E5M2 "
                    "with a scale from each batch")},
        {QStringLiteral("llm-int8"),
         QT_TR_NOOP("LLM.int8(): int8 weights per channel, int8 activations per token at run "
                    "time; input columns holding a value of magnitude above 6 stay 16-bit")},
        {QStringLiteral("smoothquant-int8"),
         QT_TR_NOOP("SmoothQuant (alpha 0.5) moves activation outliers into the weights; then "
                    "int8 weights per channel and calibrated int8 activations")},
        {QStringLiteral("fp16"),
         QT_TR_NOOP("Weights and activations cast to float16 (16-bit mixed precision)")},
        {QStringLiteral("bf16"),
         QT_TR_NOOP("Weights and activations cast to bfloat16 (16-bit mixed precision)")},
        {QStringLiteral("qat-int8"),
         QT_TR_NOOP("Quantization-aware training: fine-tunes through fake quantization, then "
                    "static int8 (int8 weights per channel, uint8 activations)")},
        {QStringLiteral("qat-w4a8"),
         QT_TR_NOOP("Quantization-aware training: fine-tunes through fake quantization, then "
                    "int4 weights per channel and uint8 activations")},
        {QStringLiteral("gguf-f16"),
         QT_TR_NOOP("GGUF F16: weights stored as float16, as llama.cpp; float activations")},
        {QStringLiteral("gguf-q8_0"),
         QT_TR_NOOP("GGUF Q8_0: 8-bit weights in blocks of 32 with one scale each (llama.cpp's "
                    "rounding); float activations")},
        {QStringLiteral("gguf-q4_0"),
         QT_TR_NOOP("GGUF Q4_0: symmetric 4-bit weights in blocks of 32 with one scale each; "
                    "float activations")},
        {QStringLiteral("gguf-q4_1"),
         QT_TR_NOOP("GGUF Q4_1: 4-bit weights in blocks of 32 with a scale and a minimum each; "
                    "float activations")},
        {QStringLiteral("gguf-q4_k"),
         QT_TR_NOOP("GGUF Q4_K: 4-bit k-quant weights in super-blocks of 256 (scales and "
                    "minimums per 32); float activations")},
        {QStringLiteral("gguf-q6_k"),
         QT_TR_NOOP("GGUF Q6_K: 6-bit k-quant weights in super-blocks of 256 (a scale per 16); "
                    "float activations")},
        {QStringLiteral("mxfp4"),
         QT_TR_NOOP("OCP MXFP4: FP4 (E2M1) weights and activations in blocks of 32 sharing a "
                    "power-of-two scale")},
        {QStringLiteral("mxfp4-w"),
         QT_TR_NOOP("Weight-only OCP MXFP4: FP4 (E2M1) weights in blocks of 32 sharing a "
                    "power-of-two scale; float activations")},
        {QStringLiteral("nvfp4"),
         QT_TR_NOOP("NVFP4: FP4 (E2M1) weights and activations in blocks of 16, each with an "
                    "FP8 E4M3 scale")},
        {QStringLiteral("nvfp4-w"),
         QT_TR_NOOP("Weight-only NVFP4: FP4 (E2M1) weights in blocks of 16 with FP8 E4M3 "
                    "scales; float activations")},
        {QStringLiteral("mxfp6-e2m3"),
         QT_TR_NOOP("OCP MXFP6 E2M3: 6-bit float weights and activations in blocks of 32 "
                    "sharing a power-of-two scale")},
        {QStringLiteral("mxfp6-e2m3-w"),
         QT_TR_NOOP("Weight-only OCP MXFP6 E2M3: 6-bit float weights in blocks of 32; float "
                    "activations")},
        {QStringLiteral("mxfp6-e3m2"),
         QT_TR_NOOP("OCP MXFP6 E3M2: 6-bit float weights and activations in blocks of 32 "
                    "sharing a power-of-two scale")},
        {QStringLiteral("mxfp6-e3m2-w"),
         QT_TR_NOOP("Weight-only OCP MXFP6 E3M2: 6-bit float weights in blocks of 32; float "
                    "activations")},
        {QStringLiteral("mxfp8-e4m3"),
         QT_TR_NOOP("OCP MXFP8 E4M3: 8-bit float weights and activations in blocks of 32 "
                    "sharing a power-of-two scale")},
        {QStringLiteral("mxfp8-e4m3-w"),
         QT_TR_NOOP("Weight-only OCP MXFP8 E4M3: 8-bit float weights in blocks of 32; float "
                    "activations")},
        {QStringLiteral("mxfp8-e5m2"),
         QT_TR_NOOP("OCP MXFP8 E5M2: 8-bit float weights and activations in blocks of 32 "
                    "sharing a power-of-two scale")},
        {QStringLiteral("mxfp8-e5m2-w"),
         QT_TR_NOOP("Weight-only OCP MXFP8 E5M2: 8-bit float weights in blocks of 32; float "
                    "activations")},
        {QStringLiteral("mxint8"),
         QT_TR_NOOP("OCP MXINT8: 8-bit integer weights and activations in blocks of 32 sharing "
                    "a power-of-two scale")},
        {QStringLiteral("mxint8-w"),
         QT_TR_NOOP("Weight-only OCP MXINT8: 8-bit integer weights in blocks of 32; float "
                    "activations")},
    };
    const auto it = kDescriptions.constFind(preset);
    return it == kDescriptions.constEnd() ? QString() : QuantPanel::tr(it.value());
}

QuantPanel::QuantPanel(QWidget* parent)
    : QGroupBox(tr("Scheme"), parent), m_preset(new QComboBox), m_method(new QComboBox),
      m_damp(new QDoubleSpinBox), m_actOrder(new QCheckBox(tr("act-order"))),
      m_awqClip(new QCheckBox(tr("clip search"))), m_observer(new QComboBox),
      m_granularity(new QComboBox), m_groupSize(new QSpinBox), m_symmetric(new QCheckBox),
      m_reduceRange(new QCheckBox(tr("7-bit weights (reduce-range)"))),
      m_calibSamples(new QSpinBox), m_evalAll(new QCheckBox(tr("Evaluate on all of the data"))),
      m_evalLimit(new QSpinBox), m_evalTokens(new QSpinBox), m_evalCli(new QLabel),
      m_schemeLine(new QLineEdit), m_run(new QPushButton(tr("Run"))),
      m_cancel(new QPushButton(tr("Cancel"))),
      m_compare(new QPushButton(tr("Compare all schemes"))),
      m_sensitivity(new QPushButton(tr("Run sensitivity")))
{
    setObjectName(QStringLiteral("quantPanel"));
    for (const std::string& name : schemePresets()) {
        const QString preset = QString::fromStdString(name);
        m_preset->addItem(preset);
        m_preset->setItemData(m_preset->count() - 1, presetDescription(preset), Qt::ToolTipRole);
    }
    m_preset->setCurrentText(QStringLiteral("static-int8"));
    m_preset->setToolTip(tr("The recipe: what is quantized to which type"));
    m_presetNote = new QLabel;
    m_presetNote->setObjectName(QStringLiteral("presetDescription"));
    m_presetNote->setWordWrap(true);
    // The text wraps to the column's width rather than widening the side panel.
    m_presetNote->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_presetNote->setForegroundRole(QPalette::PlaceholderText);
    m_method->setObjectName(QStringLiteral("methodBox"));
    m_method->addItem(tr("RTN"), QStringLiteral("rtn"));
    m_method->addItem(tr("GPTQ"), QStringLiteral("gptq"));
    m_method->addItem(tr("AWQ"), QStringLiteral("awq"));
    m_method->setToolTip(
        tr("How the weights are rounded. RTN: each to the nearest code (fast, no data). GPTQ: "
           "column by column, each rounding error spread over the columns not yet rounded "
           "(uses the calibration data). AWQ: input channels scaled by how large their "
           "activations are, and the clipping range searched (uses the calibration data). "
           "GPTQ and AWQ apply to presets with integer or NF4 weights on a grid (w4-int4, "
           "w4-nf4, static-w4a8, ...)."));
    m_damp->setObjectName(QStringLiteral("gptqDamp"));
    m_damp->setDecimals(3);
    m_damp->setRange(0.001, 0.5);
    m_damp->setSingleStep(0.005);
    m_damp->setValue(0.01);
    m_damp->setPrefix(tr("damp "));
    m_damp->setToolTip(tr("GPTQ: the damping added to the Hessian's diagonal, as a fraction of "
                          "its mean (0.01 as in GPTQ's reference code; raise it when a layer's "
                          "Hessian is ill-conditioned)"));
    m_actOrder->setObjectName(QStringLiteral("gptqActOrder"));
    m_actOrder->setToolTip(tr("GPTQ: round the columns in order of decreasing activation "
                              "energy (the Hessian's diagonal), as GPTQ's desc_act"));
    m_awqClip->setObjectName(QStringLiteral("awqClip"));
    m_awqClip->setChecked(true);
    m_awqClip->setToolTip(tr("AWQ: search each weight group's clipping range after the "
                             "channel scaling (on in AutoAWQ)"));
    m_observer->addItems({kDefault, QStringLiteral("minmax"), QStringLiteral("moving-average"),
                          QStringLiteral("percentile:99.99"), QStringLiteral("entropy"),
                          QStringLiteral("mse")});
    m_observer->setToolTip(tr("How static schemes choose the activation clip range from the "
                              "calibration data"));
    m_granularity->addItems({kDefault, tr("per-tensor"), tr("per-channel"), tr("group")});
    m_granularity->setToolTip(tr("One weight scale per tensor, per output channel, or per "
                                 "group of input elements"));
    m_groupSize->setRange(32, 256);
    m_groupSize->setSingleStep(32);
    m_groupSize->setValue(64);
    m_groupSize->setPrefix(tr("group "));
    m_symmetric->setText(tr("Symmetric weights"));
    m_symmetric->setTristate(true);
    m_symmetric->setCheckState(Qt::PartiallyChecked);
    m_symmetric->setToolTip(tr("Partly checked: as the preset says"));
    m_reduceRange->setToolTip(
        tr("int8 weight codes in [-64, 64], as onnxruntime's reduce_range. On CPUs without "
           "VNNI (AVX2 only) the int8 kernels then use the exact vpmaddubsw path, about 1.5x "
           "faster, and onnxruntime's kernels cannot saturate on the exported model. Costs one "
           "bit of weight precision. For the int8-weight presets (dynamic-int8, static-int8, "
           "smoothquant-int8, llm-int8)."));
    m_calibSamples->setRange(0, 60000);
    m_calibSamples->setSingleStep(100);
    m_calibSamples->setSpecialValueText(kDefault);
    m_calibSamples->setToolTip(tr("Calibration samples (static schemes)"));
    m_evalLimit->setObjectName(QStringLiteral("evalLimit"));
    m_evalLimit->setRange(0, static_cast<int>(kAllText));
    m_evalLimit->setAccelerated(true);
    m_evalTokens->setObjectName(QStringLiteral("evalTokens"));
    m_evalTokens->setRange(0, 100000000);
    m_evalTokens->setSingleStep(1024);
    m_evalTokens->setAccelerated(true);
    m_evalTokens->setSuffix(tr(" tokens"));
    m_evalTokens->setSpecialValueText(tr("no token budget"));
    m_evalTokens->setToolTip(tr("Language models: evaluate on this many tokens of the text "
                                "(--tokens); when set, it decides the number of windows"));
    m_evalCli->setObjectName(QStringLiteral("evalCli"));
    m_evalCli->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_evalCli->setToolTip(tr("The same evaluation size as bitlens-cli quantize takes it"));
    m_schemeLine->setReadOnly(true);
    m_schemeLine->setObjectName(QStringLiteral("schemeLine"));
    m_schemeLine->setToolTip(tr("The scheme as `bitlens-cli quantize --scheme` takes it"));
    m_run->setToolTip(tr("Quantize and analyze (Ctrl+R)"));
    m_cancel->setToolTip(tr("Stop the running job; the results on screen stay (Esc)"));
    m_run->setDefault(true);

    auto* form = new QFormLayout(this);
    form->addRow(tr("Preset"), m_preset);
    form->addRow(QString(), m_presetNote);
    form->addRow(tr("Method"), m_method);
    m_methodOptions = new QWidget;
    m_methodOptions->setObjectName(QStringLiteral("methodOptions"));
    auto* methodRow = new QHBoxLayout(m_methodOptions);
    methodRow->setContentsMargins(0, 0, 0, 0);
    methodRow->addWidget(m_damp);
    methodRow->addWidget(m_actOrder);
    methodRow->addWidget(m_awqClip);
    methodRow->addStretch(1);
    form->addRow(QString(), m_methodOptions);
    form->addRow(tr("Observer"), m_observer);
    auto* granularityRow = new QHBoxLayout;
    granularityRow->addWidget(m_granularity, 1);
    granularityRow->addWidget(m_groupSize);
    form->addRow(tr("Weights"), granularityRow);
    form->addRow(QString(), m_symmetric);
    form->addRow(QString(), m_reduceRange);
    form->addRow(tr("Calibration"), m_calibSamples);
    form->addRow(tr("Evaluate"), m_evalLimit);
    form->addRow(tr("Tokens"), m_evalTokens);
    form->addRow(QString(), m_evalAll);
    form->addRow(QString(), m_evalCli);
    form->addRow(tr("CLI"), m_schemeLine);
    m_memory = new QLabel;
    m_memory->setWordWrap(true);
    m_memory->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(tr("Memory"), m_memory);
    setMemoryForecast(QString(), true);
    auto* buttons = new QGridLayout;
    buttons->addWidget(m_run, 0, 0);
    buttons->addWidget(m_cancel, 0, 1);
    buttons->addWidget(m_compare, 1, 0);
    buttons->addWidget(m_sensitivity, 1, 1);
    form->addRow(buttons);

    const auto changed = [this] { controlsChanged(); };
    connect(m_preset, &QComboBox::currentIndexChanged, this, changed);
    connect(m_method, &QComboBox::currentIndexChanged, this, changed);
    connect(m_damp, &QDoubleSpinBox::valueChanged, this, changed);
    connect(m_actOrder, &QCheckBox::toggled, this, changed);
    connect(m_awqClip, &QCheckBox::toggled, this, changed);
    connect(m_observer, &QComboBox::currentIndexChanged, this, changed);
    connect(m_granularity, &QComboBox::currentIndexChanged, this, changed);
    connect(m_groupSize, &QSpinBox::valueChanged, this, changed);
    connect(m_symmetric, &QCheckBox::stateChanged, this, changed);
    connect(m_reduceRange, &QCheckBox::stateChanged, this, changed);
    connect(m_calibSamples, &QSpinBox::valueChanged, this, changed);
    const auto evaluation = [this] { updateEvaluation(); };
    connect(m_evalLimit, &QSpinBox::valueChanged, this, evaluation);
    connect(m_evalTokens, &QSpinBox::valueChanged, this, evaluation);
    connect(m_evalAll, &QCheckBox::toggled, this, evaluation);
    connect(m_run, &QPushButton::clicked, this, &QuantPanel::runRequested);
    connect(m_cancel, &QPushButton::clicked, this, &QuantPanel::cancelRequested);
    connect(m_compare, &QPushButton::clicked, this, &QuantPanel::compareRequested);
    connect(m_sensitivity, &QPushButton::clicked, this, &QuantPanel::sensitivityRequested);
    updateMethods();
    updateSchemeLine();
    setEvaluationUnit(EvalUnit::Samples);
    setRunning(false);
}

void QuantPanel::setEvaluationFor(const Model& model)
{
    if (model.summary().task == "lm")
        setEvaluationUnit(EvalUnit::Windows, defaultTextRowLength(model));
    else if (model.tokenizer())
        setEvaluationUnit(EvalUnit::Lines);
    else
        setEvaluationUnit(EvalUnit::Samples);
}

void QuantPanel::setEvaluationUnit(EvalUnit unit, qint64 seqLen)
{
    m_unit = unit;
    const QSignalBlocker blockLimit(m_evalLimit);
    const QSignalBlocker blockTokens(m_evalTokens);
    switch (unit) {
    case EvalUnit::Samples:
        m_evalLimit->setSuffix(tr(" samples"));
        m_evalLimit->setSpecialValueText(tr("all samples"));
        m_evalLimit->setSingleStep(500);
        m_evalLimit->setValue(static_cast<int>(kDefaultEvalSamples));
        m_evalLimit->setToolTip(tr("Evaluate the task metric on the first N samples of the "
                                   "evaluation data (--limit N); fewer run faster"));
        break;
    case EvalUnit::Lines:
        m_evalLimit->setSuffix(tr(" lines"));
        m_evalLimit->setSpecialValueText(
            tr("model default (%L1 lines)").arg(static_cast<qint64>(kEncoderEvalLines)));
        m_evalLimit->setSingleStep(100);
        m_evalLimit->setValue(static_cast<int>(kDefaultEvalLines));
        m_evalLimit->setToolTip(tr("Evaluate on the first N lines of the text, one line per "
                                   "sample (--limit N); fewer run faster"));
        break;
    case EvalUnit::Windows: {
        const QString tokens = seqLen > 0 ? tr(" of %1 tokens").arg(seqLen) : QString();
        m_evalLimit->setSuffix(tr(" windows%1").arg(tokens));
        m_evalLimit->setSpecialValueText(tr("model default (%1 windows%2)")
                                             .arg(static_cast<qint64>(kLmEvalWindows))
                                             .arg(tokens));
        m_evalLimit->setSingleStep(4);
        m_evalLimit->setValue(static_cast<int>(kDefaultEvalWindows));
        m_evalLimit->setToolTip(tr("Evaluate perplexity and KL divergence on the first N "
                                   "windows of the text (--limit N); fewer run faster"));
        break;
    }
    }
    m_evalTokens->setValue(0);
    if (auto* form = qobject_cast<QFormLayout*>(layout()))
        form->setRowVisible(m_evalTokens, unit == EvalUnit::Windows);
    updateEvaluation();
}

void QuantPanel::setMemoryForecast(const QString& text, bool fits)
{
    if (text.isEmpty()) {
        m_memory->setText(tr("Open a model to see the memory a run needs."));
        m_memory->setStyleSheet(QString());
        m_memory->setToolTip(QString());
        return;
    }
    m_memory->setText(fits ? text : tr("Will not fit: %1").arg(text));
    m_memory->setStyleSheet(fits ? QString() : QStringLiteral("color: #b00020;"));
    m_memory->setToolTip(
        fits ? tr("Peak memory of a run of this scheme, estimated before it starts")
             : tr("A run of this scheme would be refused before it allocates: quantize fewer "
                  "layers, use a smaller model, or plan with the Plan tab"));
}

QString QuantPanel::schemeText() const
{
    if (!m_custom.isEmpty())
        return m_custom;
    QStringList options;
    if (m_observer->currentIndex() > 0)
        options << QStringLiteral("observer=") + m_observer->currentText();
    switch (m_granularity->currentIndex()) {
    case 1: options << QStringLiteral("per=tensor"); break;
    case 2: options << QStringLiteral("per=channel"); break;
    case 3: options << QStringLiteral("group=%1").arg(m_groupSize->value()); break;
    default: break;
    }
    if (m_method->currentIndex() > 0)
        options << QStringLiteral("method=") + m_method->currentData().toString();
    const QString method = m_method->currentData().toString();
    if (method == QLatin1String("gptq") && std::abs(m_damp->value() - 0.01) > 1e-9)
        options << QStringLiteral("damp=") + QString::number(m_damp->value(), 'g', 4);
    if (method == QLatin1String("gptq") && m_actOrder->isChecked())
        options << QStringLiteral("act-order=true");
    if (method == QLatin1String("awq") && !m_awqClip->isChecked())
        options << QStringLiteral("awq-clip=false");
    if (m_symmetric->checkState() != Qt::PartiallyChecked)
        options << QStringLiteral("sym=%1")
                       .arg(m_symmetric->checkState() == Qt::Checked ? QStringLiteral("true")
                                                                     : QStringLiteral("false"));
    if (m_reduceRange->isChecked())
        options << QStringLiteral("reduce-range=true");
    if (m_calibSamples->value() > 0)
        options << QStringLiteral("calib=%1").arg(m_calibSamples->value());
    const QString preset = m_preset->currentText();
    return options.isEmpty() ? preset : preset + QLatin1Char(':') + options.join(QLatin1Char(','));
}

void QuantPanel::setSchemeText(const QString& text)
{
    const QString trimmed = text.trimmed();
    const qsizetype colon = trimmed.indexOf(QLatin1Char(':'));
    const QString preset = colon < 0 ? trimmed : trimmed.left(colon);
    const QStringList options =
        colon < 0 ? QStringList() : trimmed.mid(colon + 1).split(QLatin1Char(','));
    const bool knownPreset = m_preset->findText(preset) >= 0;
    bool expressible = knownPreset;
    int method = 0;
    double damp = 0.01;
    bool actOrder = false;
    bool awqClip = true;
    int observer = 0;
    int granularity = 0;
    int group = m_groupSize->value();
    Qt::CheckState symmetric = Qt::PartiallyChecked;
    bool reduceRange = false;
    int calib = 0;
    for (const QString& option : options) {
        const QString key = option.section(QLatin1Char('='), 0, 0);
        const QString value = option.section(QLatin1Char('='), 1);
        bool ok = true;
        if (key == QLatin1String("method")) {
            method = m_method->findData(value);
            ok = method >= 0;
            method = std::max(method, 0);
        } else if (key == QLatin1String("damp")) {
            damp = value.toDouble(&ok);
            // Only values the box can show (3 decimals); others run as typed.
            ok = ok && damp >= m_damp->minimum() && damp <= m_damp->maximum() &&
                 std::abs(std::round(damp * 1000.0) / 1000.0 - damp) < 1e-12;
        } else if ((key == QLatin1String("act-order") || key == QLatin1String("awq-clip")) &&
                   (value == QLatin1String("true") || value == QLatin1String("false"))) {
            (key == QLatin1String("act-order") ? actOrder : awqClip) =
                value == QLatin1String("true");
        } else if (key == QLatin1String("observer")) {
            observer = m_observer->findText(value);
            ok = observer > 0;
        } else if (key == QLatin1String("per") && value == QLatin1String("tensor")) {
            granularity = 1;
        } else if (key == QLatin1String("per") && value == QLatin1String("channel")) {
            granularity = 2;
        } else if (key == QLatin1String("group")) {
            group = value.toInt(&ok);
            ok = ok && group >= m_groupSize->minimum() && group <= m_groupSize->maximum();
            granularity = 3;
        } else if (key == QLatin1String("sym") &&
                   (value == QLatin1String("true") || value == QLatin1String("false"))) {
            symmetric = value == QLatin1String("true") ? Qt::Checked : Qt::Unchecked;
        } else if (key == QLatin1String("reduce-range") &&
                   (value == QLatin1String("true") || value == QLatin1String("false"))) {
            reduceRange = value == QLatin1String("true");
        } else if (key == QLatin1String("calib")) {
            calib = value.toInt(&ok);
            ok = ok && calib > 0 && calib <= m_calibSamples->maximum();
        } else {
            ok = false;
        }
        expressible = expressible && ok;
    }
    m_updating = true;
    // The controls show what they can of the string even when it must run as typed, so the
    // preset and method on screen are those of the run (never the ones of a scheme before).
    if (knownPreset) {
        m_preset->setCurrentText(preset);
        updateMethods();
        m_method->setCurrentIndex(method);
        m_damp->setValue(damp);
        m_actOrder->setChecked(actOrder);
        m_awqClip->setChecked(awqClip);
        m_observer->setCurrentIndex(observer);
        m_granularity->setCurrentIndex(granularity);
        m_groupSize->setValue(group);
        m_symmetric->setCheckState(symmetric);
        m_reduceRange->setChecked(reduceRange);
        m_calibSamples->setValue(calib);
    }
    m_custom = expressible ? QString() : trimmed;
    m_updating = false;
    updateSchemeLine();
}

bool QuantPanel::evaluateAll() const { return m_evalAll->isChecked(); }

void QuantPanel::setEvaluateAll(bool all) { m_evalAll->setChecked(all); }

qint64 QuantPanel::evalLimit() const
{
    if (evaluateAll())
        return m_unit == EvalUnit::Samples ? 0 : kAllText;
    return m_evalLimit->value();
}

qint64 QuantPanel::evalTokens() const
{
    return m_unit == EvalUnit::Windows && !evaluateAll() ? m_evalTokens->value() : 0;
}

QStringList QuantPanel::evalCliFlags() const
{
    QStringList flags;
    if (evalTokens() > 0)
        return {QStringLiteral("--tokens"), QString::number(evalTokens())};
    if (evalLimit() > 0)
        flags << QStringLiteral("--limit") << QString::number(evalLimit());
    return flags;
}

void QuantPanel::updateEvaluation()
{
    const bool all = evaluateAll();
    m_evalLimit->setEnabled(!all && evalTokens() == 0);
    m_evalTokens->setEnabled(!all);
    const QStringList flags = evalCliFlags();
    m_evalCli->setText(flags.isEmpty() ? tr("bitlens-cli: the default evaluation size")
                                       : tr("bitlens-cli: %1").arg(flags.join(QLatin1Char(' '))));
}

void QuantPanel::setRunnable(bool runnable)
{
    m_runnable = runnable;
    setRunning(m_running);
}

void QuantPanel::setRunning(bool running)
{
    m_running = running;
    m_run->setEnabled(m_runnable);
    m_compare->setEnabled(m_runnable && !running);
    m_sensitivity->setEnabled(m_runnable && !running);
    m_cancel->setEnabled(running);
}

void QuantPanel::controlsChanged()
{
    if (m_updating)
        return;
    m_custom.clear();
    updateMethods();
    updateSchemeLine();
}

void QuantPanel::updateMethods()
{
    // A method the preset cannot take (gguf-*, the float and block formats, QAT, SmoothQuant,
    // LLM.int8()) is disabled, with the core's reason; choosing such a preset goes back to RTN.
    auto* items = qobject_cast<QStandardItemModel*>(m_method->model());
    const QString preset = m_preset->currentText();
    for (int i = 1; i < m_method->count(); ++i) {
        const auto checked = checkScheme(
            (preset + QStringLiteral(":method=") + m_method->itemData(i).toString()).toStdString());
        if (QStandardItem* item = items ? items->item(i) : nullptr) {
            item->setEnabled(checked.ok());
            item->setToolTip(checked.ok() ? QString()
                                          : tr("Not with %1: %2")
                                                .arg(preset, QString::fromStdString(
                                                                 checked.error().message)));
        }
        if (!checked.ok() && m_method->currentIndex() == i) {
            const QSignalBlocker block(m_method);
            m_method->setCurrentIndex(0);
        }
    }
}

void QuantPanel::updateSchemeLine()
{
    // The method's own options, for the method chosen (GPTQ: damp, act-order; AWQ: clip).
    const QString method = m_method->currentData().toString();
    m_damp->setVisible(method == QLatin1String("gptq"));
    m_actOrder->setVisible(method == QLatin1String("gptq"));
    m_awqClip->setVisible(method == QLatin1String("awq"));
    m_methodOptions->setVisible(method != QLatin1String("rtn"));
    for (QWidget* w : {static_cast<QWidget*>(m_damp), static_cast<QWidget*>(m_actOrder),
                       static_cast<QWidget*>(m_awqClip)})
        w->setEnabled(m_custom.isEmpty());
    m_groupSize->setEnabled(m_custom.isEmpty() && m_granularity->currentIndex() == 3);
    m_presetNote->setText(presetDescription(m_preset->currentText()));
    const QString text = schemeText();
    m_schemeLine->setText(text);
    m_schemeLine->setCursorPosition(0);
    Q_EMIT schemeChanged(text);
}

} // namespace bitlens::widgets
