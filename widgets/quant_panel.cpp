#include "quant_panel.h"

#include "quant_job.h"

#include "model/data_defaults.h"
#include "model/model.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>

namespace bitlens::widgets {

namespace {

const QString kDefault = QStringLiteral("preset default");

} // namespace

QuantPanel::QuantPanel(QWidget* parent)
    : QGroupBox(tr("Scheme"), parent), m_preset(new QComboBox), m_observer(new QComboBox),
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
    for (const std::string& name : schemePresets())
        m_preset->addItem(QString::fromStdString(name));
    m_preset->setCurrentText(QStringLiteral("static-int8"));
    m_preset->setToolTip(tr("The recipe: what is quantized to which type"));
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
    bool expressible = m_preset->findText(preset) >= 0;
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
        if (key == QLatin1String("observer")) {
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
    if (expressible) {
        m_custom.clear();
        m_preset->setCurrentText(preset);
        m_observer->setCurrentIndex(observer);
        m_granularity->setCurrentIndex(granularity);
        m_groupSize->setValue(group);
        m_symmetric->setCheckState(symmetric);
        m_reduceRange->setChecked(reduceRange);
        m_calibSamples->setValue(calib);
    } else {
        m_custom = trimmed;
    }
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
    updateSchemeLine();
}

void QuantPanel::updateSchemeLine()
{
    m_groupSize->setEnabled(m_custom.isEmpty() && m_granularity->currentIndex() == 3);
    const QString text = schemeText();
    m_schemeLine->setText(text);
    m_schemeLine->setCursorPosition(0);
    Q_EMIT schemeChanged(text);
}

} // namespace bitlens::widgets
