#pragma once
// The scheme panel: preset, observer, weight granularity (group size), symmetric, calibration
// samples and evaluation size, composed into the scheme string the CLI takes (shown read-only),
// with Run / Cancel / Compare all schemes / Run sensitivity. Controls left at "preset default"
// add no option, so the string stays what a person would type: "static-int8:observer=mse".

#include <QGroupBox>
#include <QString>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace bitlens::widgets {

/// The scheme panel (see the file comment).
class QuantPanel : public QGroupBox {
    Q_OBJECT

public:
    explicit QuantPanel(QWidget* parent = nullptr);

    /// The scheme string the controls describe ("static-int8:per=tensor").
    QString schemeText() const;
    /// Sets the controls from a scheme string; a string they cannot express (unknown preset
    /// or option) is kept as typed and run as such, so its error comes from the core.
    void setSchemeText(const QString& text);
    /// True when evaluation uses every sample instead of the first kDefaultEvalSamples.
    bool evaluateAll() const;
    /// Sets whether evaluation uses every sample.
    void setEvaluateAll(bool all);
    /// Evaluation samples kept (0 = all).
    qint64 evalLimit() const;
    /// Enables Run / Compare / Sensitivity (false while no model is open) .
    void setRunnable(bool runnable);
    /// Shows the running state: Cancel enabled, the run buttons disabled.
    void setRunning(bool running);

    /// Shows what a run of the scheme will hold against the memory available (from
    /// workspace::memoryForecast); `fits` false marks it as a run that will be refused.
    /// An empty text says to open a model first.
    void setMemoryForecast(const QString& text, bool fits);
    QLabel* memoryLabel() const { return m_memory; }

    /// Evaluation samples used by default, for interactivity.
    static constexpr qint64 kDefaultEvalSamples = 2000;

    QComboBox* presetBox() const { return m_preset; }
    QComboBox* observerBox() const { return m_observer; }
    QComboBox* granularityBox() const { return m_granularity; }
    QSpinBox* groupSizeBox() const { return m_groupSize; }
    QCheckBox* symmetricBox() const { return m_symmetric; }
    /// "7-bit weights (reduce-range)": int8 weight codes in [-64, 64].
    QCheckBox* reduceRangeBox() const { return m_reduceRange; }
    QSpinBox* calibSamplesBox() const { return m_calibSamples; }
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

    QComboBox* m_preset;
    QComboBox* m_observer;
    QComboBox* m_granularity;
    QSpinBox* m_groupSize;
    QCheckBox* m_symmetric;
    QCheckBox* m_reduceRange;
    QSpinBox* m_calibSamples;
    QLabel* m_memory;
    QCheckBox* m_evalAll;
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
