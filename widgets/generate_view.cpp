#include "generate_view.h"

#include <QCheckBox>
#include <QCoreApplication>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QScrollBar>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QTextCursor>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <utility>

namespace bitlens::widgets {

namespace {

/// One band of the quantized column's tint: KL divergences from `from` nats up to the next
/// band's `from`. Below the first band no tint: about what an int8 scheme gives per token of a
/// small LM, noise a reader should not look at. 0.1 nats is where the two models' top choices
/// start to disagree in probability by tens of percent; from 1 nat on the distributions are
/// different ones (the float model's token often outside the quantized model's top-5).
struct KldBand {
    double from;
    QColor color;
    QString label;
};

const std::vector<KldBand>& kldBands()
{
    static const std::vector<KldBand> bands = {
        {0.01, QColor(0xff, 0xec, 0x99), QStringLiteral("0.01–0.1")},
        {0.1, QColor(0xff, 0xb3, 0x66), QStringLiteral("0.1–1")},
        {1.0, QColor(0xf0, 0x6e, 0x6e), QStringLiteral("≥ 1")},
    };
    return bands;
}

/// A token as a reader can see it: quoted, a newline as ⏎ and a tab as →.
QString visible(const QString& token)
{
    QString out = token;
    out.replace(QLatin1Char('\n'), QStringLiteral("⏎"))
        .replace(QLatin1Char('\t'), QStringLiteral("→"));
    return QStringLiteral("“%1”").arg(out);
}

/// The first divergence's text and underline.
QColor divergenceColor() { return QColor(0x0b, 0x3e, 0xa8); }

QString rate(double perS)
{
    return QString::number(perS, 'f', perS >= 100.0 ? 0 : 1);
}

QString qs(const std::string& s) { return QString::fromStdString(s); }

} // namespace

// ---- TokenColumn ------------------------------------------------------------------------------

TokenColumn::TokenColumn(QWidget* parent) : QTextEdit(parent)
{
    setReadOnly(true);
    setUndoRedoEnabled(false);
    setAcceptRichText(false);
}

void TokenColumn::start(const QString& prompt)
{
    clear();
    m_spans.clear();
    m_tints.clear();
    m_divergence = -1;
    QTextCursor c(document());
    QTextCharFormat grey;
    grey.setForeground(palette().color(QPalette::Disabled, QPalette::Text));
    c.insertText(prompt, grey);
}

int TokenColumn::append(const QString& token)
{
    QScrollBar* bar = verticalScrollBar();
    const bool atEnd = bar->value() >= bar->maximum();
    QTextCursor c(document());
    c.movePosition(QTextCursor::End);
    const int begin = c.position();
    c.insertText(token, QTextCharFormat());
    m_spans.push_back({begin, c.position()});
    m_tints.emplace_back();
    if (atEnd)
        bar->setValue(bar->maximum());
    return count() - 1;
}

QString TokenColumn::generatedText() const
{
    if (m_spans.empty())
        return {};
    QTextCursor c(document());
    c.setPosition(m_spans.front().begin);
    c.setPosition(m_spans.back().end, QTextCursor::KeepAnchor);
    // QTextCursor gives paragraph separators for newlines.
    return c.selectedText().replace(QChar::ParagraphSeparator, QLatin1Char('\n'));
}

void TokenColumn::restyle(int index)
{
    if (index < 0 || index >= count())
        return;
    // The whole format of the span, built from its state (a merge could not take a mark off).
    QTextCharFormat f;
    const QColor& tint = m_tints[static_cast<std::size_t>(index)];
    if (tint.isValid()) {
        f.setBackground(tint);
        f.setForeground(Qt::black);  // readable on the tint under a dark theme too
    }
    if (index == m_divergence) {
        // Blue: it stays apart from every tint (yellow to red) it may sit on.
        f.setForeground(divergenceColor());
        f.setFontWeight(QFont::Bold);
        f.setUnderlineStyle(QTextCharFormat::WaveUnderline);
        f.setUnderlineColor(divergenceColor());
    }
    QTextCursor c(document());
    c.setPosition(m_spans[static_cast<std::size_t>(index)].begin);
    c.setPosition(m_spans[static_cast<std::size_t>(index)].end, QTextCursor::KeepAnchor);
    c.setCharFormat(f);
}

void TokenColumn::setTint(int index, const QColor& color)
{
    if (index < 0 || index >= count())
        return;
    m_tints[static_cast<std::size_t>(index)] = color;
    restyle(index);
}

QColor TokenColumn::tint(int index) const
{
    return index >= 0 && index < count() ? m_tints[static_cast<std::size_t>(index)] : QColor();
}

void TokenColumn::markDivergence(int index)
{
    if (m_divergence == index)
        return;
    const int before = m_divergence;
    m_divergence = index;
    restyle(before);
    restyle(index);
}

int TokenColumn::tokenAt(const QPoint& pos) const
{
    const QTextCursor c = cursorForPosition(pos);
    int p = c.position();
    // The cursor falls between characters: the one under the point is left of it when the
    // point is left of the cursor.
    if (pos.x() < cursorRect(c).left())
        --p;
    const auto it = std::upper_bound(m_spans.begin(), m_spans.end(), p,
                                     [](int x, const Span& s) { return x < s.begin; });
    if (it == m_spans.begin())
        return -1;
    const auto& span = *std::prev(it);
    return p < span.end ? static_cast<int>(std::prev(it) - m_spans.begin()) : -1;
}

QPoint TokenColumn::tokenPoint(int index) const
{
    if (index < 0 || index >= count())
        return {};
    QTextCursor c(document());
    const Span& span = m_spans[static_cast<std::size_t>(index)];
    c.setPosition(span.begin);
    const QRect left = cursorRect(c);
    c.setPosition(span.begin + 1);
    const QRect right = cursorRect(c);
    // Halfway across the first character (on its line: a wrap puts `right` on the next one).
    const int x = right.top() == left.top() ? (left.left() + right.left()) / 2 : left.left() + 2;
    return {x, left.center().y()};
}

bool TokenColumn::viewportEvent(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        const auto* help = static_cast<QHelpEvent*>(event);
        const int index = tokenAt(help->pos());
        if (index >= 0 && m_toolTip)
            QToolTip::showText(help->globalPos(), m_toolTip(index), viewport());
        else
            QToolTip::hideText();
        return true;
    }
    return QTextEdit::viewportEvent(event);
}

// ---- GenerateView -----------------------------------------------------------------------------

GenerateView::GenerateView(QWidget* parent)
    : QWidget(parent), m_status(new QLabel), m_schemeLine(new QLabel),
      m_prompt(new QPlainTextEdit), m_maxTokens(new QSpinBox), m_greedy(new QCheckBox),
      m_temperature(new QDoubleSpinBox), m_seed(new QSpinBox),
      m_generateButton(new QPushButton(tr("Generate"))),
      m_cancelButton(new QPushButton(tr("Cancel"))), m_floatTitle(new QLabel),
      m_quantTitle(new QLabel), m_floatSpeed(new QLabel), m_quantSpeed(new QLabel),
      m_float(new TokenColumn), m_quant(new TokenColumn), m_legend(new QLabel)
{
    setObjectName(QStringLiteral("generateView"));
    m_prompt->setObjectName(QStringLiteral("generatePrompt"));
    m_prompt->setPlaceholderText(tr("A prompt, e.g. “Once upon a time, in a small village by the "
                                    "sea, there lived” (Ctrl+Return generates)"));
    m_prompt->setTabChangesFocus(true);
    m_prompt->setMaximumHeight(m_prompt->fontMetrics().lineSpacing() * 3 + 14);
    m_maxTokens->setObjectName(QStringLiteral("generateMaxTokens"));
    m_maxTokens->setRange(1, 2048);
    m_maxTokens->setValue(static_cast<int>(model::GenerateOptions().maxTokens));
    m_maxTokens->setToolTip(tr("Tokens each model generates at most (it may stop earlier at an "
                               "end-of-text token or the context length)"));
    m_greedy->setText(tr("Greedy"));
    m_greedy->setObjectName(QStringLiteral("generateGreedy"));
    m_greedy->setChecked(true);
    m_greedy->setToolTip(tr("Pick the most likely token each step; off: sample at the "
                            "temperature with the seed (both models draw the same stream)"));
    m_temperature->setObjectName(QStringLiteral("generateTemperature"));
    m_temperature->setRange(0.05, 5.0);
    m_temperature->setSingleStep(0.05);
    m_temperature->setValue(0.8);
    m_seed->setObjectName(QStringLiteral("generateSeed"));
    m_seed->setRange(0, 999'999);
    m_generateButton->setObjectName(QStringLiteral("generateButton"));
    m_generateButton->setDefault(true);
    m_cancelButton->setObjectName(QStringLiteral("generateCancel"));
    m_status->setObjectName(QStringLiteral("generateStatus"));
    m_status->setWordWrap(true);
    m_status->setTextFormat(Qt::PlainText);
    m_schemeLine->setObjectName(QStringLiteral("generateScheme"));
    m_float->setObjectName(QStringLiteral("generateFloat"));
    m_quant->setObjectName(QStringLiteral("generateQuantized"));
    m_float->setToolTipSource([this](int i) { return toolTipOf(false, i); });
    m_quant->setToolTipSource([this](int i) { return toolTipOf(true, i); });

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Max tokens")));
    controls->addWidget(m_maxTokens);
    controls->addSpacing(12);
    controls->addWidget(m_greedy);
    controls->addWidget(new QLabel(tr("Temperature")));
    controls->addWidget(m_temperature);
    controls->addWidget(new QLabel(tr("Seed")));
    controls->addWidget(m_seed);
    controls->addStretch(1);
    controls->addWidget(m_generateButton);
    controls->addWidget(m_cancelButton);

    auto columnOf = [](QLabel* title, QLabel* speed, TokenColumn* text) {
        auto* box = new QWidget;
        auto* layout = new QVBoxLayout(box);
        layout->setContentsMargins(0, 0, 0, 0);
        layout->setSpacing(2);
        auto* head = new QHBoxLayout;
        QFont bold = title->font();
        bold.setBold(true);
        title->setFont(bold);
        head->addWidget(title);
        head->addStretch(1);
        head->addWidget(speed);
        layout->addLayout(head);
        layout->addWidget(text, 1);
        return box;
    };
    m_floatSpeed->setObjectName(QStringLiteral("generateFloatSpeed"));
    m_quantSpeed->setObjectName(QStringLiteral("generateQuantizedSpeed"));
    auto* columns = new QSplitter(Qt::Horizontal);
    columns->addWidget(columnOf(m_floatTitle, m_floatSpeed, m_float));
    columns->addWidget(columnOf(m_quantTitle, m_quantSpeed, m_quant));
    columns->setChildrenCollapsible(false);

    QString swatches;
    for (const KldBand& band : kldBands())
        swatches += QStringLiteral(" <span style=\"background:%1; color:black; "
                                   "white-space:nowrap\">&nbsp;%2&nbsp;</span>")
                        .arg(band.color.name(), band.label);
    m_legend->setObjectName(QStringLiteral("generateLegend"));
    m_legend->setWordWrap(true);
    m_legend->setText(
        tr("Quantized token tint: KL(float ‖ quantized) at its position in nats, both models "
           "reading the float tokens: none below %1,%2. <span style=\"color:%3\"><b>Blue, "
           "underlined</b></span>: the first token where the two differ. Hover a token for its "
           "divergence and both models' top-5.")
            .arg(kldBands().front().from)
            .arg(swatches, divergenceColor().name()));
    m_legend->setToolTip(
        tr("KL divergence 0 means the quantized model predicts the float model's distribution "
           "exactly; below 0.01 nats is noise; above 1 nat the two predict different things."));

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_prompt);
    layout->addLayout(controls);
    // On a line of its own: beside the controls it would widen the window past 1280 px.
    layout->addWidget(m_schemeLine);
    layout->addWidget(m_status);
    layout->addWidget(columns, 1);
    layout->addWidget(m_legend);

    connect(m_generateButton, &QPushButton::clicked, this, &GenerateView::generateRequested);
    connect(m_cancelButton, &QPushButton::clicked, this, &GenerateView::cancelRequested);
    connect(m_prompt, &QPlainTextEdit::textChanged, this, &GenerateView::updateButtons);
    connect(m_greedy, &QCheckBox::toggled, this, &GenerateView::updateButtons);
    auto* shortcut = new QShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return), m_prompt);
    shortcut->setContext(Qt::WidgetShortcut);
    connect(shortcut, &QShortcut::activated, this, [this] {
        if (m_generateButton->isEnabled())
            Q_EMIT generateRequested();
    });
    clearModel();
}

void GenerateView::clearModel()
{
    m_hasModel = false;
    m_modelName.clear();
    m_unsupported.clear();
    m_status->setText(tr("Open a language model (File > Open Model, or a zoo name such as "
                         "smollm2-135m or kjv-llama), type a prompt and press Generate: the "
                         "float model and the scheme panel's quantized model continue it side "
                         "by side, token by token."));
    m_float->setPlaceholderText(tr("The float model's continuation appears here."));
    m_quant->setPlaceholderText(
        tr("The quantized model's continuation appears here, each token tinted by how far its "
           "prediction is from the float model's."));
    m_floatTitle->setText(tr("float32"));
    m_quantTitle->setText(tr("quantized"));
    updateButtons();
}

void GenerateView::setModel(const QString& name, const QString& unsupported)
{
    if (m_generating)
        stop(tr("The model changed."));
    m_hasModel = true;
    m_modelName = name;
    m_unsupported = unsupported;
    m_float->start(QString());
    m_quant->start(QString());
    m_sides[0] = {};
    m_sides[1] = {};
    m_scores.clear();
    m_floatSpeed->clear();
    m_quantSpeed->clear();
    if (!unsupported.isEmpty()) {
        m_status->setText(tr("“%1” cannot generate text: %2. The Generate tab works with the "
                             "language models BitLens builds (llama, mistral, qwen2, qwen3, "
                             "gemma2, gemma3, phi3, gpt2), e.g. the zoo's smollm2-135m or "
                             "kjv-llama; the other tabs work for this model as before.")
                              .arg(name, unsupported));
        m_float->setPlaceholderText(tr("(not a language model)"));
        m_quant->setPlaceholderText(tr("(not a language model)"));
    } else {
        m_status->setText(tr("Type a prompt and press Generate (Ctrl+Return): “%1” continues it "
                             "in float32 and with the scheme panel's scheme, side by side.")
                              .arg(name));
        m_float->setPlaceholderText(tr("The float model's continuation appears here."));
        m_quant->setPlaceholderText(
            tr("The quantized model's continuation appears here, each token tinted by how far "
               "its prediction is from the float model's."));
    }
    updateButtons();
}

void GenerateView::setScheme(const QString& scheme, int overrides)
{
    m_scheme = scheme;
    m_schemeLine->setText(
        overrides == 0
            ? tr("Quantized: <b>%1</b> (scheme panel)").arg(scheme.toHtmlEscaped())
            : tr("Quantized: <b>%1</b> + %n layer override(s) (scheme panel)", nullptr, overrides)
                  .arg(scheme.toHtmlEscaped()));
    if (!m_generating)
        m_quantTitle->setText(scheme);
}

workspace::GenerateRequest GenerateView::request() const
{
    workspace::GenerateRequest r;
    r.prompt = m_prompt->toPlainText().toStdString();
    r.options.maxTokens = m_maxTokens->value();
    if (!m_greedy->isChecked())
        r.options.sampling.temperature = m_temperature->value();
    r.options.sampling.seed = static_cast<std::uint64_t>(m_seed->value());
    return r;
}

void GenerateView::setPrompt(const QString& prompt) { m_prompt->setPlainText(prompt); }

workspace::GenerateObserver GenerateView::begin(const QString& scheme)
{
    const quint64 generation = ++m_generation;
    m_generating = true;
    m_runScheme = scheme;
    m_firstTokenMs = -1;
    m_clock.start();
    m_sides[0] = {};
    m_sides[1] = {};
    m_scores.clear();
    const QString prompt = m_prompt->toPlainText();
    m_float->start(prompt);
    m_quant->start(prompt);
    m_floatTitle->setText(tr("float32"));
    m_quantTitle->setText(scheme);
    m_floatSpeed->setText(tr("prefill…"));
    m_quantSpeed->setText(tr("waits for float32"));
    m_status->setText(tr("Generating with float32…"));
    updateButtons();

    // Called on the worker: each event is posted to the GUI thread (the application object
    // outlives every view) and dropped there when the view is gone or a newer run has begun.
    QPointer<GenerateView> self(this);
    const auto post = [self, generation](std::function<void(GenerateView&)> apply) {
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [self, generation, apply = std::move(apply)] {
                if (self && self->m_generation == generation && self->m_generating)
                    apply(*self);
            },
            Qt::QueuedConnection);
    };
    workspace::GenerateObserver observer;
    observer.onToken = [post](const workspace::GeneratedToken& t) {
        post([t](GenerateView& v) { v.addToken(t); });
    };
    observer.onContinuation = [post](const workspace::Continuation& c, bool quantized) {
        post([c, quantized](GenerateView& v) { v.endSide(c, quantized); });
    };
    observer.onScored = [post](const workspace::ScoredToken& s) {
        post([s](GenerateView& v) { v.addScore(s); });
    };
    return observer;
}

void GenerateView::addToken(const workspace::GeneratedToken& token)
{
    Side& side = m_sides[token.quantized ? 1 : 0];
    TokenColumn* column = token.quantized ? m_quant : m_float;
    if (token.index != static_cast<std::int64_t>(side.tokens.size()))
        return;  // out of order: never from one worker; finish() reconciles
    side.tokens.push_back(token);
    column->append(qs(token.token));
    if (m_firstTokenMs < 0)
        m_firstTokenMs = m_clock.elapsed();
    if (token.quantized && m_quant->divergence() < 0) {
        const auto& floats = m_sides[0].tokens;
        const auto i = static_cast<std::size_t>(token.index);
        if (i >= floats.size() || floats[i].id != token.id)
            setDivergence(static_cast<int>(token.index));
    }
    if (token.index == 0)
        m_status->setText(token.quantized ? tr("Generating with %1…").arg(m_runScheme)
                                          : tr("Generating with float32… (first token on "
                                               "screen after %1 s)")
                                                .arg(static_cast<double>(m_firstTokenMs) / 1000.0,
                                                     0, 'f', 2));
    updateSpeed(token.quantized);
}

void GenerateView::endSide(const workspace::Continuation& continuation, bool quantized)
{
    m_sides[quantized ? 1 : 0].done = continuation;
    updateSpeed(quantized);
    if (!quantized) {
        m_quantSpeed->setText(tr("preparing…"));
        m_status->setText(tr("float32 done (%1). Preparing and generating with %2…")
                              .arg(qs(continuation.stopReason), m_runScheme));
    } else {
        const auto& floats = m_sides[0].tokens;
        // A quantized continuation that stopped before the float one differs where it ended.
        if (m_quant->divergence() < 0 && floats.size() != m_sides[1].tokens.size())
            setDivergence(static_cast<int>(std::min(floats.size(), m_sides[1].tokens.size())));
        m_status->setText(tr("%1 done. Scoring %1 on the float32 tokens (KL divergence, "
                             "top-5)…")
                              .arg(m_runScheme));
    }
}

void GenerateView::addScore(const workspace::ScoredToken& score)
{
    const auto i = static_cast<std::size_t>(score.index);
    if (m_scores.size() <= i)
        m_scores.resize(i + 1);
    m_scores[i] = score;
    m_quant->setTint(static_cast<int>(i), tintOfKld(score.kld));
}

void GenerateView::setDivergence(int index)
{
    m_float->markDivergence(index);
    m_quant->markDivergence(index);
}

void GenerateView::updateSpeed(bool quantized)
{
    const Side& side = m_sides[quantized ? 1 : 0];
    QLabel* label = quantized ? m_quantSpeed : m_floatSpeed;
    if (side.done) {
        const workspace::Continuation& c = *side.done;
        label->setText(tr("prefill %1 tok/s · decode %2 tok/s · %n token(s)", nullptr,
                          static_cast<int>(c.ids.size()))
                           .arg(rate(c.prefillTokensPerS), rate(c.decodeTokensPerS)));
        label->setToolTip(tr("Prompt pass: %1 tokens in %2 s; %3 one-token steps in %4 s")
                              .arg(c.promptTokens)
                              .arg(c.prefillSeconds, 0, 'f', 3)
                              .arg(c.decodeSteps)
                              .arg(c.decodeSeconds, 0, 'f', 3));
        return;
    }
    if (side.tokens.empty())
        return;
    // Live: the first token came after the prompt pass; each later one after one step.
    const auto& first = side.tokens.front();
    const auto& last = side.tokens.back();
    QString text = first.elapsedSeconds > 0
                       ? tr("prefill %1 tok/s").arg(rate(static_cast<double>(first.promptTokens) /
                                                         first.elapsedSeconds))
                       : tr("prefill");
    if (side.tokens.size() > 1 && last.elapsedSeconds > first.elapsedSeconds)
        text += tr(" · decode %1 tok/s")
                    .arg(rate(static_cast<double>(side.tokens.size() - 1) /
                              (last.elapsedSeconds - first.elapsedSeconds)));
    text += tr(" · %n token(s)", nullptr, static_cast<int>(side.tokens.size()));
    label->setText(text);
    label->setToolTip(QString());
}

void GenerateView::finish(const workspace::GenerateComparison& result)
{
    if (!m_generating)
        return;
    // Every event was posted before the result; whatever did not arrive is filled in here.
    const workspace::Continuation* runs[2] = {&result.floatRun, &result.quantRun};
    for (int q = 0; q < 2; ++q) {
        const auto& run = *runs[q];
        for (std::size_t i = m_sides[q].tokens.size(); i < run.ids.size(); ++i) {
            workspace::GeneratedToken t;
            t.quantized = q == 1;
            t.index = static_cast<std::int64_t>(i);
            t.id = run.ids[i];
            t.token = i < run.tokens.size() ? run.tokens[i] : std::string();
            t.promptTokens = run.promptTokens;
            addToken(t);
        }
        if (!m_sides[q].done)
            endSide(run, q == 1);
    }
    for (std::size_t i = 0; i < result.kld.size(); ++i) {
        if (i < m_scores.size() && m_scores[i])
            continue;
        workspace::ScoredToken s;
        s.index = static_cast<std::int64_t>(i);
        s.kld = result.kld[i];
        if (i < result.floatTop.size())
            s.floatTop = result.floatTop[i];
        if (i < result.quantTop.size())
            s.quantTop = result.quantTop[i];
        addScore(s);
    }
    setDivergence(result.firstDivergence ? static_cast<int>(*result.firstDivergence) : -1);
    m_generating = false;
    QString divergence;
    if (result.firstDivergence) {
        const auto i = static_cast<std::size_t>(*result.firstDivergence);
        const auto at = [i](const workspace::Continuation& c) {
            return i < c.tokens.size() ? visible(qs(c.tokens[i])) : tr("(end)");
        };
        divergence = tr("first divergence at token %1 (float32 %2, %3 %4)")
                         .arg(i)
                         .arg(at(result.floatRun), m_runScheme, at(result.quantRun));
    } else {
        divergence = tr("the same %n token(s), no divergence", nullptr,
                        static_cast<int>(result.floatRun.ids.size()));
    }
    m_status->setText(tr("Done: %1; KL(float32 ‖ %2) mean %3, max %4 nats. First token on "
                         "screen %5 s after Generate; %6 threads, kernels at %7 on %8.")
                          .arg(divergence, m_runScheme)
                          .arg(result.meanKld, 0, 'g', 3)
                          .arg(result.maxKld, 0, 'g', 3)
                          .arg(static_cast<double>(m_firstTokenMs) / 1000.0, 0, 'f', 2)
                          .arg(result.threads)
                          .arg(qs(result.isa), qs(result.cpu)));
    updateButtons();
}

void GenerateView::stop(const QString& message)
{
    if (!m_generating)
        return;
    m_generating = false;
    m_status->setText(message);
    if (!m_sides[1].done)
        m_quantSpeed->setText(m_sides[1].tokens.empty() ? tr("stopped") : m_quantSpeed->text());
    updateButtons();
}

void GenerateView::updateButtons()
{
    const bool canGenerate = m_hasModel && m_unsupported.isEmpty();
    m_prompt->setEnabled(canGenerate);
    m_maxTokens->setEnabled(canGenerate);
    m_greedy->setEnabled(canGenerate);
    m_temperature->setEnabled(canGenerate && !m_greedy->isChecked());
    m_seed->setEnabled(canGenerate && !m_greedy->isChecked());
    m_generateButton->setEnabled(canGenerate && !m_generating &&
                                 !m_prompt->toPlainText().trimmed().isEmpty());
    m_cancelButton->setEnabled(m_generating);
}

QStringList GenerateView::tokens(bool quantized) const
{
    QStringList out;
    for (const auto& t : m_sides[quantized ? 1 : 0].tokens)
        out << qs(t.token);
    return out;
}

QString GenerateView::generatedText(bool quantized) const
{
    return column(quantized)->generatedText();
}

QString GenerateView::tokenToolTip(bool quantized, int index) const
{
    return toolTipOf(quantized, index);
}

QColor GenerateView::quantizedTint(int index) const { return m_quant->tint(index); }

std::optional<double> GenerateView::kldAt(int index) const
{
    if (index < 0 || static_cast<std::size_t>(index) >= m_scores.size() ||
        !m_scores[static_cast<std::size_t>(index)])
        return std::nullopt;
    return m_scores[static_cast<std::size_t>(index)]->kld;
}

QString GenerateView::statusText() const { return m_status->text(); }

QString GenerateView::speedText(bool quantized) const
{
    return (quantized ? m_quantSpeed : m_floatSpeed)->text();
}

QColor GenerateView::tintOfKld(double kld)
{
    QColor tint;
    for (const KldBand& band : kldBands())
        if (kld >= band.from)
            tint = band.color;
    return tint;
}

QString GenerateView::toolTipOf(bool quantized, int index) const
{
    const auto& tokens = m_sides[quantized ? 1 : 0].tokens;
    if (index < 0 || static_cast<std::size_t>(index) >= tokens.size())
        return {};
    const auto& t = tokens[static_cast<std::size_t>(index)];
    const QString model = quantized ? m_runScheme : tr("float32");
    QString html = tr("<b>%1</b> token %2: <b>%3</b> (id %4)")
                       .arg(model.toHtmlEscaped())
                       .arg(index)
                       .arg(visible(qs(t.token)).toHtmlEscaped())
                       .arg(t.id);
    if (index == m_quant->divergence())
        html += tr("<br><span style=\"color:%1\">the first token where float32 and %2 "
                   "differ</span>")
                    .arg(divergenceColor().name(), m_runScheme.toHtmlEscaped());
    const auto score = static_cast<std::size_t>(index) < m_scores.size()
                           ? m_scores[static_cast<std::size_t>(index)]
                           : std::nullopt;
    if (!score) {
        html += tr("<br>KL divergence and top-5: once both continuations ended and %1 is scored "
                   "on the float32 tokens.")
                    .arg(m_runScheme.toHtmlEscaped());
        return html;
    }
    html += tr("<br>KL(float32 ‖ %1) at this position: <b>%2 nats</b>")
                .arg(m_runScheme.toHtmlEscaped())
                .arg(score->kld, 0, 'g', 3);
    html += tr("<br><i>both models read the prompt and float32's tokens before this one</i>");
    html += QStringLiteral("<table cellspacing=\"0\" cellpadding=\"2\"><tr><th></th><th "
                           "colspan=\"2\" align=\"left\">%1</th><th></th><th colspan=\"2\" "
                           "align=\"left\">%2</th></tr>")
                .arg(tr("float32"), m_runScheme.toHtmlEscaped());
    const std::size_t rows = std::max(score->floatTop.size(), score->quantTop.size());
    const auto cells = [](const std::vector<workspace::TokenProbability>& top, std::size_t r) {
        if (r >= top.size())
            return QStringLiteral("<td></td><td></td>");
        return QStringLiteral("<td>%1</td><td align=\"right\">%2 %</td>")
            .arg(visible(qs(top[r].token)).toHtmlEscaped())
            .arg(top[r].probability * 100.0, 0, 'f', 1);
    };
    for (std::size_t r = 0; r < rows; ++r)
        html += QStringLiteral("<tr><td>%1.</td>%2<td width=\"14\"></td>%3</tr>")
                    .arg(r + 1)
                    .arg(cells(score->floatTop, r), cells(score->quantTop, r));
    html += QStringLiteral("</table>");
    return html;
}

} // namespace bitlens::widgets
