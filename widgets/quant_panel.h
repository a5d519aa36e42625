#pragma once
// The scheme panel: preset, rounding method (RTN / GPTQ / AWQ), observer, weight granularity
// (group size), symmetric, calibration samples and evaluation size, composed into the scheme
// string the CLI takes (shown read-only),
// with Run / Cancel / Compare all schemes / Run sensitivity. Controls left at "preset default"
// add no option, so the string stays what a person would type: "static-int8:observer=mse".
// The evaluation size counts what the open model reads (images or rows, text lines, token
// windows) under the CLI's names (--limit, --tokens), which the panel shows beside it.

#include <QGroupBox>
#include <QString>
#include <QStringList>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;


namespace bitlens {
class Model;
}

namespace bitlens::widgets {

/// One line on what preset `preset` quantizes, to which type and how ("" for an unknown name):
/// the preset box's item tooltips and the line under it.
QString presetDescription(const QString& preset);

/// The scheme panel (see the file comment).
class QuantPanel : public QGroupBox {
    Q_OBJECT

public:
    explicit QuantPanel(QWidget* parent = nullptr);

    /// The scheme string the controls describe ("static-int8:per=tensor").
    QString schemeText() const;
    /// Sets the controls from a scheme string, so they show the scheme of the run on screen;
    /// options the controls cannot express (damp=, an unknown key) keep the string as typed
    /// (the CLI line), run as such, while the controls still show its preset, method and the
    /// options they can; an unknown preset leaves them as they are (its error comes from the
    /// core when it runs).
    void setSchemeText(const QString& text);
    /// What the evaluation size counts for the open model.
    enum class EvalUnit {
        Samples,  ///< images or array rows (0 = all of the file)
        Lines,    ///< encoder text, one line per row (0 = the model's default)
        Windows,  ///< language-model text, windows of `seqLen` tokens (0 = the model's default)
    };
    /// Sets the unit for a newly opened model and resets the size to that unit's default
    /// (kDefaultEvalSamples / kDefaultEvalLines / kDefaultEvalWindows). `seqLen`: tokens per
    /// window, for the wording.
    void setEvaluationUnit(EvalUnit unit, qint64 seqLen = 0);
    EvalUnit evaluationUnit() const { return m_unit; }
    /// setEvaluationUnit() for what `model` reads: token windows for a language model (of its
    /// default length), lines for another model with a tokenizer, samples otherwise.
    void setEvaluationFor(const Model& model);
    /// True when evaluation uses all of the data instead of the size set.
    bool evaluateAll() const;
    /// Sets whether evaluation uses all of the data.
    void setEvaluateAll(bool all);
    /// RunRequest::evalLimit: samples, lines or windows kept (0 = all samples / the model's
    /// default for text; "all" of a text is kAllText).
    qint64 evalLimit() const;
    /// RunRequest::evalTokens: a language model's token budget (0 = none; overrides windows).
    qint64 evalTokens() const;
    /// The evaluation size as bitlens-cli's flags ("--limit", "2000"), empty when it is the
    /// CLI's own default.
    QStringList evalCliFlags() const;
    /// Enables Run / Compare / Sensitivity (false while no model is open) .
    void setRunnable(bool runnable);
    /// Shows the running state: Cancel enabled, the run buttons disabled.
    void setRunning(bool running);

    /// Shows what a run of the scheme will hold against the memory available (from
    /// workspace::memoryForecast); `fits` false marks it as a run that will be refused.
    /// An empty text says to open a model first.
    void setMemoryForecast(const QString& text, bool fits);
    QLabel* memoryLabel() const { return m_memory; }

    /// Evaluation size used by default, for interactivity: runs of the zoo's models finish in
    /// about a minute on 2 cores (bench/RESULTS.md "The window's default run").
    static constexpr qint64 kDefaultEvalSamples = 2000;
    static constexpr qint64 kDefaultEvalLines = 500;
    static constexpr qint64 kDefaultEvalWindows = 8;
    /// "Evaluate on all" of a text file: more lines or windows than any text holds.
    static constexpr qint64 kAllText = 100000000;

    QComboBox* presetBox() const { return m_preset; }
    /// The line under the preset box: presetDescription() of the selected preset.
    QLabel* presetDescriptionLabel() const { return m_presetNote; }
    /// How weights are rounded: RTN, GPTQ or AWQ (item data "rtn", "gptq", "awq"); a method the
    /// preset does not combine with is disabled, its tooltip saying why.
    QComboBox* methodBox() const { return m_method; }
    /// GPTQ's options (shown with GPTQ only): the Hessian damping as a fraction of its mean
    /// diagonal (damp=, default 0.01) and the columns in order of decreasing activation energy
    /// (act-order=).
    QDoubleSpinBox* dampBox() const { return m_damp; }
    QCheckBox* actOrderBox() const { return m_actOrder; }
    /// AWQ's clipping-range search (awq-clip=, on by default; shown with AWQ only).
    QCheckBox* awqClipBox() const { return m_awqClip; }
    QComboBox* observerBox() const { return m_observer; }
    QComboBox* granularityBox() const { return m_granularity; }
    QSpinBox* groupSizeBox() const { return m_groupSize; }
    QCheckBox* symmetricBox() const { return m_symmetric; }
    /// "7-bit weights (reduce-range)": int8 weight codes in [-64, 64].
    QCheckBox* reduceRangeBox() const { return m_reduceRange; }
    QSpinBox* calibSamplesBox() const { return m_calibSamples; }
    /// The evaluation size (samples / lines / windows).
    QSpinBox* evalLimitBox() const { return m_evalLimit; }
    /// A language model's evaluation token budget (shown for language models only).
    QSpinBox* evalTokensBox() const { return m_evalTokens; }
    /// The evaluation size as the CLI's flags.
    QLabel* evalCliLabel() const { return m_evalCli; }
    QLineEdit* schemeLine() const { return m_schemeLine; }
    QPushButton* runButton() const { return m_run; }
    QPushButton* cancelButton() const { return m_cancel; }
    QPushButton* compareButton() const { return m_compare; }
    QPushButton* sensitivityButton() const { return m_sensitivity; }

Q_SIGNALS:
    /// The scheme string changed (by a control or setSchemeText()).
    void schemeChanged(const QString& scheme);
    /// Run was clicked.
    void runRequested();
    /// Cancel was clicked.
    void cancelRequested();
    /// "Compare all schemes" was clicked.
    void compareRequested();
    /// "Run sensitivity" was clicked.
    void sensitivityRequested();

private:
    void controlsChanged();
    void updateSchemeLine();
    void updateEvaluation();
    void updateMethods();

    QComboBox* m_preset;
    QLabel* m_presetNote = nullptr;
    QComboBox* m_method;
    QDoubleSpinBox* m_damp;
    QCheckBox* m_actOrder;
    QCheckBox* m_awqClip;
    QWidget* m_methodOptions = nullptr;
    QComboBox* m_observer;
    QComboBox* m_granularity;
    QSpinBox* m_groupSize;
    QCheckBox* m_symmetric;
    QCheckBox* m_reduceRange;
    QSpinBox* m_calibSamples;
    QLabel* m_memory;
    QCheckBox* m_evalAll;
    QSpinBox* m_evalLimit;
    QSpinBox* m_evalTokens;
    QLabel* m_evalCli;
    EvalUnit m_unit = EvalUnit::Samples;
    QLineEdit* m_schemeLine;
    QPushButton* m_run;
    QPushButton* m_cancel;
    QPushButton* m_compare;
    QPushButton* m_sensitivity;
    QString m_custom;  ///< a scheme string the controls cannot express, run as typed
    bool m_updating = false;
    bool m_runnable = false;
    bool m_running = false;
};

} // namespace bitlens::widgets
