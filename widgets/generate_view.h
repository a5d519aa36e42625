#pragma once
// The Generate tab: a prompt continued by the float model and by the quantized model of the
// scheme panel's scheme (its per-layer overrides included), in two columns that fill token by
// token while the job runs. Each quantized token is tinted by the KL divergence of the quantized
// model from the float model at that position (scored on the float model's tokens), a hover
// shows the token, its divergence and the top-5 of both models there; the first position where
// the two continuations differ is blue and underlined in both; each column says its prefill and
// decode tokens per second, live. The work is core's workspace::generateCompare, run by
// MainWindow on its quantization channel; the observer from begin() posts each event to this
// view with a queued call, so the GUI thread never waits for the model. It computes nothing.

#include "workspace/generate_run.h"

#include <QColor>
#include <QElapsedTimer>
#include <QString>
#include <QStringList>
#include <QTextEdit>
#include <QWidget>

#include <functional>
#include <optional>
#include <vector>

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace bitlens::widgets {

/// One column of the Generate tab: the prompt in grey, then the generated tokens, each a span
/// whose tooltip the view supplies (see the file comment).
class TokenColumn : public QTextEdit {
    Q_OBJECT

public:
    explicit TokenColumn(QWidget* parent = nullptr);

    /// Empties the column and writes `prompt` in grey.
    void start(const QString& prompt);
    /// Appends one token's text; returns its index.
    int append(const QString& token);
    /// Tokens appended since start().
    int count() const { return static_cast<int>(m_spans.size()); }
    /// The generated text (the tokens, without the prompt).
    QString generatedText() const;
    /// Background tint of token `index` (invisible: no tint).
    void setTint(int index, const QColor& color);
    QColor tint(int index) const;
    /// Marks token `index` as the first divergence (blue, bold, wavy underline); -1 unmarks.
    void markDivergence(int index);
    int divergence() const { return m_divergence; }
    /// The token under viewport point `pos`, or -1.
    int tokenAt(const QPoint& pos) const;
    /// A viewport point over the first character of token `index` (where a hover finds it).
    QPoint tokenPoint(int index) const;
    /// Supplies the tooltip of a token (index -> text).
    void setToolTipSource(std::function<QString(int)> source) { m_toolTip = std::move(source); }

protected:
    bool viewportEvent(QEvent* event) override;

private:
    struct Span {
        int begin = 0;
        int end = 0;
    };
    void restyle(int index);

    std::vector<Span> m_spans;
    std::vector<QColor> m_tints;
    int m_divergence = -1;
    std::function<QString(int)> m_toolTip;
};

/// The Generate tab (see the file comment).
class GenerateView : public QWidget {
    Q_OBJECT

public:
    explicit GenerateView(QWidget* parent = nullptr);

    /// No model open: the tab says what to do.
    void clearModel();
    /// A model `name` is open; `unsupported` (empty: it generates) is why it cannot generate.
    void setModel(const QString& name, const QString& unsupported);
    /// The scheme the quantized column will use, as the scheme panel has it, with the number of
    /// layer overrides.
    void setScheme(const QString& scheme, int overrides);
    /// The prompt, token count and sampling of the next generation (request.run left empty).
    workspace::GenerateRequest request() const;
    /// Sets the prompt box.
    void setPrompt(const QString& prompt);

    /// A generation of `scheme` starts now: the columns empty, and the returned observer (called
    /// on the worker) posts its events here; events of an earlier generation are dropped.
    workspace::GenerateObserver begin(const QString& scheme);
    /// The generation ended with `result`: final figures, divergence and scores.
    void finish(const workspace::GenerateComparison& result);
    /// The generation ended without a result: `message` says why (tokens shown so far stay).
    void stop(const QString& message);
    /// True between begin() and finish() / stop().
    bool isGenerating() const { return m_generating; }

    /// Tokens in a column so far (false: float, true: quantized), as core gave their text.
    QStringList tokens(bool quantized) const;
    /// Generated text of a column.
    QString generatedText(bool quantized) const;
    /// The tooltip of token `index` of a column.
    QString tokenToolTip(bool quantized, int index) const;
    /// The tint of quantized token `index` (invalid: none yet).
    QColor quantizedTint(int index) const;
    /// KL divergence of position `index` once scored, else nullopt.
    std::optional<double> kldAt(int index) const;
    /// The first divergence marked (-1: none, or not known yet).
    int divergence() const { return m_quant->divergence(); }
    /// Milliseconds from begin() to the first token on screen (-1: none yet).
    qint64 firstTokenMs() const { return m_firstTokenMs; }
    /// The status line, and a column's speed line ("prefill 310 tok/s · decode 41.2 tok/s").
    QString statusText() const;
    QString speedText(bool quantized) const;
    /// The tint of a KL divergence in nats (invalid colour: below the first band, no tint).
    static QColor tintOfKld(double kld);

    QPlainTextEdit* promptEdit() const { return m_prompt; }
    QSpinBox* maxTokensBox() const { return m_maxTokens; }
    QCheckBox* greedyBox() const { return m_greedy; }
    QDoubleSpinBox* temperatureBox() const { return m_temperature; }
    QSpinBox* seedBox() const { return m_seed; }
    QPushButton* generateButton() const { return m_generateButton; }
    QPushButton* cancelButton() const { return m_cancelButton; }
    TokenColumn* column(bool quantized) const { return quantized ? m_quant : m_float; }

Q_SIGNALS:
    /// Generate was pressed (or Ctrl+Return in the prompt).
    void generateRequested();
    /// Cancel was pressed.
    void cancelRequested();

private:
    struct Side {
        std::vector<workspace::GeneratedToken> tokens;
        std::optional<workspace::Continuation> done;  ///< final figures once it finished
    };
    void addToken(const workspace::GeneratedToken& token);
    void addScore(const workspace::ScoredToken& score);
    void endSide(const workspace::Continuation& continuation, bool quantized);
    void setDivergence(int index);
    void updateSpeed(bool quantized);
    void updateButtons();
    QString toolTipOf(bool quantized, int index) const;

    QLabel* m_status;
    QLabel* m_schemeLine;
    QPlainTextEdit* m_prompt;
    QSpinBox* m_maxTokens;
    QCheckBox* m_greedy;
    QDoubleSpinBox* m_temperature;
    QSpinBox* m_seed;
    QPushButton* m_generateButton;
    QPushButton* m_cancelButton;
    QLabel* m_floatTitle;
    QLabel* m_quantTitle;
    QLabel* m_floatSpeed;
    QLabel* m_quantSpeed;
    TokenColumn* m_float;
    TokenColumn* m_quant;
    QLabel* m_legend;

    Side m_sides[2];
    std::vector<std::optional<workspace::ScoredToken>> m_scores;
    QString m_scheme;
    QString m_runScheme;  ///< the scheme of the generation on screen
    QString m_modelName;
    QString m_unsupported;
    bool m_hasModel = false;
    bool m_generating = false;
    quint64 m_generation = 0;
    QElapsedTimer m_clock;
    qint64 m_firstTokenMs = -1;
};

} // namespace bitlens::widgets
