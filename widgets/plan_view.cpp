#include "plan_view.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QLineEdit>
#include <QLineSeries>
#include <QLocale>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>

namespace bitlens::widgets {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QString text(const std::string& s)
{
    return QString::fromStdString(s);
}

/// The combo entry whose data is `value`; false (and nothing changed) when there is none.
bool selectData(QComboBox* combo, const QString& value)
{
    const int index = combo->findData(value);
    if (index < 0)
        return false;
    combo->setCurrentIndex(index);
    return true;
}

QComboBox* precisionCombo()
{
    auto* combo = new QComboBox;
    for (const auto& p : analysis::planPrecisions())
        combo->addItem(QObject::tr("%1 (%2 bits)").arg(text(p.name)).arg(p.bitsPerValue, 0, 'g', 4),
                       text(p.name));
    return combo;
}

/// The chart's legend name of a part (the table keeps the long label).
QString shortLabel(const std::string& key, const std::string& label)
{
    if (key == "master_weights")
        return QObject::tr("fp32 master");
    if (key == "optimizer_states")
        return QObject::tr("Adam m + v");
    if (key == "lora_adapters")
        return QObject::tr("LoRA adapters");
    if (key == "weights")
        return QObject::tr("Weights");
    if (key == "activations")
        return QObject::tr("Activations");
    return text(label);
}

// The model combo's data for the two entries that are not presets.
const QString kConfigEntry = QStringLiteral(":config");
const QString kOpenModelEntry = QStringLiteral(":open");

} // namespace

// ---------------------------------------------------------------------------------------------
PlanChart::PlanChart(QWidget* parent) : ChartBase(parent)
{
    setChartTitle(tr("Memory per part"));
    setMinimumHeight(220);
}

void PlanChart::clearPlan(const QString& message)
{
    m_bars = nullptr;
    m_line = nullptr;
    setChartTitle(tr("Memory per part"));
    showMessage(message);
}

void PlanChart::setPlan(const analysis::Plan& plan, const analysis::Accelerator& card)
{
    clearChart();
    markHasData();
    // One card's share at the minimum count and at the tensor-parallel size (an even split),
    // so every bar compares with the card's memory line; the title carries the whole plan.
    const int minGpus = std::max(1, plan.minGpus);
    const int tp = std::max(minGpus, plan.tensorParallel);
    std::vector<int> counts = {minGpus};
    if (tp != minGpus)
        counts.push_back(tp);
    setChartTitle(tr("%1 in all: %2 per card at TP %3")
                      .arg(text(analysis::planBytesText(plan.totalBytes)),
                           text(analysis::planBytesText(plan.totalBytes / tp)))
                      .arg(tp));
    m_bars = new QStackedBarSeries;
    int colour = 0;
    for (const auto& part : plan.parts) {
        auto* set = new QBarSet(shortLabel(part.key, part.label));
        set->setColor(chartColor(colour++));
        for (int n : counts)
            *set << part.bytes / n / kGiB;
        m_bars->append(set);
    }
    m_bars->setBarWidth(0.5);
    chart()->addSeries(m_bars);
    auto* axisX = new QBarCategoryAxis;
    QStringList categories;
    for (int n : counts)
        categories << (n == minGpus ? (n == 1 ? tr("1 card") : tr("%1 cards").arg(n)) : tr("TP %1").arg(n));
    axisX->append(categories);
    // No axis title: the category names say what each bar is, and the chart stays readable
    // at the height the tab gives it (1280x800 window).
    styleAxis(axisX, QString());
    chart()->addAxis(axisX, Qt::AlignBottom);
    m_bars->attachAxis(axisX);
    QValueAxis* axisY = addValueAxis(tr("GiB per card"), Qt::AlignLeft);
    m_bars->attachAxis(axisY);

    // The card's memory as a horizontal line across the bars (category x = 0, 1, ...).
    m_line = new QLineSeries;
    m_line->setName(tr("Card memory (%1 GiB)").arg(card.memoryGib));
    QPen pen(QColor(0xd5, 0x5e, 0x00));
    pen.setWidthF(2.5);
    pen.setStyle(Qt::DashLine);
    m_line->setPen(pen);
    m_line->append(-0.5, card.memoryGib);
    m_line->append(static_cast<double>(counts.size()) - 0.5, card.memoryGib);
    chart()->addSeries(m_line);
    m_line->attachAxis(axisX);
    m_line->attachAxis(axisY);

    const double top = std::max(plan.totalBytes / minGpus / kGiB, card.memoryGib) * 1.1;
    setRoundTicks(axisY, 0.0, top, 7);
    chart()->legend()->setVisible(true);
    chart()->legend()->setAlignment(Qt::AlignRight);
}

// ---------------------------------------------------------------------------------------------
PlanView::PlanView(QWidget* parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("planView"));
    // Inputs on the left, the chart beside them; the GPU line, the bound, the price and the
    // table of parts below at full width (the "how computed" lines are long).
    auto* layout = new QVBoxLayout(this);
    auto* top = new QSplitter(Qt::Horizontal);
    auto* inputs = new QWidget;
    auto* form = new QFormLayout(inputs);
    form->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
    form->setContentsMargins(0, 0, 0, 0);

    m_model = new QComboBox;
    for (const auto& m : analysis::modelPresets())
        m_model->addItem(tr("%1 (%2 B params)")
                             .arg(text(m.name))
                             .arg(static_cast<double>(m.params()) / 1e9, 0, 'f', 2),
                         text(m.name));
    m_model->addItem(tr("config.json…"), kConfigEntry);
    form->addRow(tr("Model:"), m_model);
    auto* configRow = new QHBoxLayout;
    m_configPath = new QLineEdit;
    m_configPath->setPlaceholderText(tr("path to a Hugging Face config.json"));
    configRow->addWidget(m_configPath, 1);
    m_browse = new QPushButton(tr("Browse…"));
    configRow->addWidget(m_browse);
    form->addRow(tr("config.json:"), configRow);

    m_weights = precisionCombo();
    m_kv = precisionCombo();
    m_act = precisionCombo();
    form->addRow(tr("Weights:"), m_weights);
    form->addRow(tr("KV cache:"), m_kv);
    form->addRow(tr("Activations:"), m_act);

    m_use = new QComboBox;
    m_use->addItem(tr("Inference"), QStringLiteral("inference"));
    m_use->addItem(tr("Full fine-tuning (Adam, mixed precision)"), QStringLiteral("finetune"));
    m_use->addItem(tr("LoRA"), QStringLiteral("lora"));
    m_use->addItem(tr("QLoRA (4-bit base)"), QStringLiteral("qlora"));
    form->addRow(tr("Use:"), m_use);
    auto* sizeRow = new QHBoxLayout;
    m_batch = new QSpinBox;
    m_batch->setRange(1, 1 << 20);
    m_batch->setValue(1);
    m_context = new QSpinBox;
    m_context->setRange(1, 1 << 24);
    m_context->setValue(2048);
    m_context->setSingleStep(1024);
    sizeRow->addWidget(m_batch);
    sizeRow->addWidget(new QLabel(tr("sequences of")));
    sizeRow->addWidget(m_context);
    sizeRow->addWidget(new QLabel(tr("tokens")));
    sizeRow->addStretch(1);
    form->addRow(tr("Batch:"), sizeRow);
    auto* trainRow = new QHBoxLayout;
    m_rank = new QSpinBox;
    m_rank->setRange(1, 4096);
    m_rank->setValue(16);
    m_checkpointing = new QCheckBox(tr("activation checkpointing"));
    trainRow->addWidget(m_rank);
    trainRow->addWidget(m_checkpointing);
    trainRow->addStretch(1);
    form->addRow(tr("LoRA rank:"), trainRow);

    auto* cardRow = new QHBoxLayout;
    m_card = new QComboBox;
    cardRow->addWidget(m_card, 1);
    m_cardsButton = new QPushButton(tr("Cards file…"));
    cardRow->addWidget(m_cardsButton);
    form->addRow(tr("Accelerator:"), cardRow);
    top->addWidget(inputs);
    m_chart = new PlanChart;
    top->addWidget(m_chart);
    top->setStretchFactor(0, 2);
    top->setStretchFactor(1, 3);
    layout->addWidget(top, 0);

    m_error = new QLabel;
    m_error->setObjectName(QStringLiteral("planError"));
    m_error->setStyleSheet(QStringLiteral("color: #b00020;"));
    m_error->setWordWrap(true);
    m_error->setVisible(false);
    layout->addWidget(m_error);
    m_gpu = new QLabel;
    m_gpu->setObjectName(QStringLiteral("planGpus"));
    m_gpu->setWordWrap(true);
    m_gpu->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_decode = new QLabel;
    m_decode->setWordWrap(true);
    m_decode->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_price = new QLabel;
    m_price->setWordWrap(true);
    m_notes = new QLabel;
    m_notes->setWordWrap(true);
    m_notes->setStyleSheet(QStringLiteral("color: #555;"));
    layout->addWidget(m_gpu);
    layout->addWidget(m_decode);
    layout->addWidget(m_price);

    m_parts = new QTableWidget(0, 3);
    m_parts->setObjectName(QStringLiteral("planParts"));
    m_parts->setHorizontalHeaderLabels({tr("Part"), tr("Memory"), tr("How computed")});
    m_parts->verticalHeader()->setVisible(false);
    m_parts->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_parts->horizontalHeader()->setStretchLastSection(true);
    m_parts->setWordWrap(false);
    m_parts->verticalHeader()->setDefaultSectionSize(m_parts->fontMetrics().height() + 6);
    // Room for the longest plan (fine-tuning: five parts and the total) without scrolling.
    m_parts->setMinimumHeight(m_parts->horizontalHeader()->sizeHint().height() +
                              6 * (m_parts->fontMetrics().height() + 6) + 4);
    layout->addWidget(m_parts, 1);
    layout->addWidget(m_notes);
    auto defaultCards = analysis::defaultAcceleratorsPath();
    if (defaultCards)
        loadCards(text(*defaultCards));
    else
        m_cardsButton->setToolTip(text(defaultCards.error().describe()));
    selectData(m_card, QStringLiteral("a100-80gb"));
    selectData(m_weights, QStringLiteral("bf16"));
    selectData(m_kv, QStringLiteral("bf16"));
    selectData(m_act, QStringLiteral("bf16"));

    auto recomputeOnChange = [this] { recompute(); };
    for (QComboBox* combo : {m_model, m_weights, m_kv, m_act, m_card})
        connect(combo, &QComboBox::currentIndexChanged, this, recomputeOnChange);
    connect(m_use, &QComboBox::currentIndexChanged, this, [this] {
        // The use decides what the weights may be: QLoRA's base is 4-bit, full fine-tuning
        // trains 16- or 32-bit weights. Switch to the usual format instead of an error.
        const QString use = m_use->currentData().toString();
        const auto bits = analysis::findPlanPrecision(m_weights->currentData().toString().toStdString());
        m_updating = true;
        if (use == QLatin1String("qlora") && bits && bits->bitsPerValue > 5)
            selectData(m_weights, QStringLiteral("nf4"));
        if (use == QLatin1String("finetune") && bits && bits->bitsPerValue < 16)
            selectData(m_weights, QStringLiteral("bf16"));
        m_updating = false;
        recompute();
    });
    for (QSpinBox* spin : {m_batch, m_context, m_rank})
        connect(spin, &QSpinBox::valueChanged, this, recomputeOnChange);
    connect(m_checkpointing, &QCheckBox::toggled, this, recomputeOnChange);
    connect(m_configPath, &QLineEdit::editingFinished, this, [this] {
        if (!m_configPath->text().isEmpty())
            selectData(m_model, kConfigEntry);
        recompute();
    });
    connect(m_browse, &QPushButton::clicked, this, &PlanView::chooseConfig);
    connect(m_cardsButton, &QPushButton::clicked, this, &PlanView::chooseCards);
    recompute();
}

PlanView::~PlanView() = default;

void PlanView::fillCards()
{
    const QString previous = m_card->currentData().toString();
    m_updating = true;
    m_card->clear();
    for (const auto& c : m_cards) {
        m_card->addItem(tr("%1 (%2 GiB)").arg(text(c.name)).arg(c.memoryGib), text(c.id));
        QStringList sources;
        for (const auto& [figure, where] : c.sources)
            sources << tr("%1: %2").arg(text(figure), text(where));
        m_card->setItemData(m_card->count() - 1,
                            sources.isEmpty() ? tr("no sources given") : sources.join('\n'),
                            Qt::ToolTipRole);
    }
    if (!selectData(m_card, previous))
        m_card->setCurrentIndex(0);
    m_updating = false;
}

bool PlanView::loadCards(const QString& path)
{
    auto cards = analysis::loadAccelerators(path.toStdString());
    if (!cards) {
        m_error->setText(tr("Cards file: %1").arg(text(cards.error().describe())));
        m_error->setVisible(true);
        return false;
    }
    m_cards = std::move(cards.value());
    m_cardsPath = path;
    m_cardsButton->setToolTip(tr("Cards now from %1. Choose your own copy of accelerators.json "
                                 "(prices, other cards)").arg(path));
    fillCards();
    recompute();
    return true;
}

void PlanView::setOpenModel(const QString& path, qint64 params)
{
    m_openModelPath = path;
    m_openModelParams = params;
    const QString label = tr("Open model: %1").arg(QFileInfo(path).fileName());
    const int index = m_model->findData(kOpenModelEntry);
    if (index < 0)
        m_model->addItem(label, kOpenModelEntry);
    else
        m_model->setItemText(index, label);
    if (m_model->currentData().toString() == kOpenModelEntry)
        recompute();
}

bool PlanView::setPreset(const QString& name) { return selectData(m_model, name); }

bool PlanView::setConfigPath(const QString& path)
{
    m_configPath->setText(path);
    selectData(m_model, kConfigEntry);
    recompute();
    return m_plan.has_value();
}

bool PlanView::useOpenModel() { return selectData(m_model, kOpenModelEntry); }
bool PlanView::setWeightPrecision(const QString& name) { return selectData(m_weights, name); }
bool PlanView::setKvPrecision(const QString& name) { return selectData(m_kv, name); }
bool PlanView::setActivationPrecision(const QString& name) { return selectData(m_act, name); }
bool PlanView::setUse(const QString& name) { return selectData(m_use, name); }
void PlanView::setBatch(int batch) { m_batch->setValue(batch); }
void PlanView::setContext(int context) { m_context->setValue(context); }
bool PlanView::setCard(const QString& id) { return selectData(m_card, id); }

QString PlanView::gpuText() const { return m_gpu->text(); }
QString PlanView::decodeText() const { return m_decode->text(); }
QString PlanView::priceText() const { return m_price->text(); }
QString PlanView::errorText() const { return m_error->isHidden() ? QString() : m_error->text(); }

void PlanView::chooseConfig()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Hugging Face config.json"),
                                                      m_configPath->text(),
                                                      tr("config.json (*.json);;All files (*)"));
    if (!path.isEmpty())
        setConfigPath(path);
}

void PlanView::chooseCards()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Accelerators file"), m_cardsPath,
                                                      tr("JSON (*.json);;All files (*)"));
    if (!path.isEmpty())
        loadCards(path);
}

Result<analysis::ModelShape> PlanView::modelShape() const
{
    const QString choice = m_model->currentData().toString();
    if (choice == kConfigEntry) {
        if (m_configPath->text().isEmpty())
            return Error::usage("choose a config.json (Browse…)");
        return analysis::readHfConfigShape(m_configPath->text().toStdString());
    }
    if (choice == kOpenModelEntry)
        return analysis::shapeForModelFile(m_openModelPath.toStdString(), m_openModelParams);
    auto preset = analysis::findModelPreset(choice.toStdString());
    if (!preset)
        return Error::usage("unknown preset " + choice.toStdString());
    return *preset;
}

void PlanView::recompute()
{
    if (m_updating)
        return;
    const bool configChosen = m_model->currentData().toString() == kConfigEntry;
    m_configPath->setEnabled(configChosen || m_configPath->text().isEmpty());
    m_rank->setEnabled(m_use->currentData().toString().contains(QLatin1String("lora")));
    m_checkpointing->setEnabled(m_use->currentData().toString() != QLatin1String("inference"));

    auto fail = [this](const QString& message) {
        m_plan.reset();
        m_error->setText(message);
        m_error->setVisible(true);
        m_gpu->clear();
        m_decode->clear();
        m_price->clear();
        m_notes->clear();
        m_parts->setRowCount(0);
        m_chart->clearPlan(tr("No data: %1").arg(message));
    };
    const analysis::Accelerator* card =
        analysis::findAccelerator(m_cards, m_card->currentData().toString().toStdString());
    if (!card)
        return fail(tr("no accelerator: load a cards file"));
    auto shape = modelShape();
    if (!shape)
        return fail(text(shape.error().describe()));
    analysis::PlanRequest request;
    request.model = *shape;
    request.use = analysis::parsePlanUse(m_use->currentData().toString().toStdString())
                      .value_or(analysis::PlanUse::Inference);
    request.weights = *analysis::findPlanPrecision(m_weights->currentData().toString().toStdString());
    request.kvCache = *analysis::findPlanPrecision(m_kv->currentData().toString().toStdString());
    request.activations = *analysis::findPlanPrecision(m_act->currentData().toString().toStdString());
    request.batch = m_batch->value();
    request.context = m_context->value();
    request.loraRank = m_rank->value();
    request.checkpointing = m_checkpointing->isChecked();
    request.card = *card;
    auto plan = analysis::computePlan(request);
    if (!plan)
        return fail(text(plan.error().describe()));

    m_error->setVisible(false);
    m_plan = std::move(plan.value());
    const QLocale locale(QLocale::English);
    QString modelText = tr("%1 params").arg(locale.toString(m_plan->params));
    if (m_plan->activeParams != m_plan->params)
        modelText += tr(", %1 per token").arg(locale.toString(m_plan->activeParams));
    if (shape->publishedParams > 0)
        modelText += tr(" (published %1)").arg(locale.toString(
            static_cast<qlonglong>(shape->publishedParams)));
    modelText += tr("; shape from %1").arg(text(shape->source));

    m_parts->setRowCount(0);
    auto addRow = [this](const QString& part, const QString& bytes, const QString& how, bool bold) {
        const int row = m_parts->rowCount();
        m_parts->insertRow(row);
        const QStringList cells = {part, bytes, how};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c == 1)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            if (bold) {
                QFont font = item->font();
                font.setBold(true);
                item->setFont(font);
            }
            item->setToolTip(cells[2]);
            m_parts->setItem(row, c, item);
        }
    };
    for (const auto& part : m_plan->parts)
        addRow(text(part.label), text(analysis::planBytesText(part.bytes)), text(part.how), false);
    addRow(tr("Total"), text(analysis::planBytesText(m_plan->totalBytes)),
           tr("sum of the parts above"), true);
    m_parts->resizeColumnsToContents();

    m_gpu->setText(tr("<b>GPUs:</b> %1").arg(text(m_plan->gpuLine).toHtmlEscaped()));
    m_decode->setText(m_plan->bytesPerDecodeStep > 0
                          ? tr("<b>Decode bound:</b> %1").arg(text(m_plan->decodeHow).toHtmlEscaped())
                          : QString());
    m_decode->setVisible(m_plan->bytesPerDecodeStep > 0);
    m_price->setText(tr("<b>$ per TFLOP:</b> %1").arg(text(m_plan->priceLine).toHtmlEscaped()));
    QStringList notes = {modelText};
    for (const auto& note : m_plan->notes)
        notes << text(note);
    m_notes->setText(notes.join(QStringLiteral(". ")));
    m_chart->setPlan(*m_plan, *card);
}

} // namespace bitlens::widgets
