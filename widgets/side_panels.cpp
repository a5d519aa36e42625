#include "side_panels.h"

#include "layer_table_model.h"

#include <QFileInfo>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QStringList>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace bitlens::widgets {

namespace {

QString tensorsText(const std::vector<TensorSummary>& tensors)
{
    QStringList lines;
    for (const TensorSummary& tensor : tensors)
        lines << QStringLiteral("%1 %2 %3")
                     .arg(QString::fromStdString(tensor.name), shapeText(tensor.shape),
                          QString::fromStdString(tensor.dtype));
    return lines.join(QLatin1Char('\n'));
}

} // namespace

FormPanel::FormPanel(const QString& title, QWidget* parent)
    : QGroupBox(title, parent), m_form(new QFormLayout), m_emptyHint(new QLabel(this))
{
    auto* layout = new QVBoxLayout(this);
    m_emptyHint->setWordWrap(true);
    m_emptyHint->setObjectName(QStringLiteral("emptyHint"));
    m_emptyHint->setForegroundRole(QPalette::PlaceholderText);
    layout->addWidget(m_emptyHint);
    m_form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    m_form->setRowWrapPolicy(QFormLayout::DontWrapRows);
    m_form->setLabelAlignment(Qt::AlignLeft | Qt::AlignTop);
    layout->addLayout(m_form);
}

QString FormPanel::value(const QString& key) const
{
    for (const auto& [name, label] : m_rows)
        if (name == key)
            return label->isHidden() ? QString() : label->text();
    return {};
}

void FormPanel::addRow(const QString& key)
{
    auto* label = new QLabel(this);
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label->setTextFormat(Qt::PlainText);
    label->setObjectName(key);
    m_form->addRow(key + QLatin1Char(':'), label);
    m_rows.append({key, label});
}

void FormPanel::setValue(const QString& key, const QString& text, const QString& toolTip)
{
    for (const auto& [name, label] : m_rows) {
        if (name != key)
            continue;
        label->setText(text);
        label->setToolTip(toolTip);
        m_form->setRowVisible(label, !text.isEmpty() && m_emptyHint->text().isEmpty());
        return;
    }
}

void FormPanel::setPlaceholder(const QString& text)
{
    m_emptyHint->setText(text);
    m_emptyHint->setVisible(!text.isEmpty());
    for (const auto& [name, label] : m_rows)
        m_form->setRowVisible(label, text.isEmpty() && !label->text().isEmpty());
}

ModelInfoPanel::ModelInfoPanel(QWidget* parent) : FormPanel(tr("Model"), parent)
{
    setObjectName(QStringLiteral("modelInfoPanel"));
    for (const QString& key : {tr("Name"), tr("Format"), tr("File"), tr("Task"), tr("Tokenizer"),
                               tr("Inputs"), tr("Outputs"), tr("Layers"), tr("Params"), tr("Size"),
                               tr("Note")})
        addRow(key);
    showModel(nullptr);
}

void ModelInfoPanel::showModel(const OpenedModel* opened)
{
    if (!opened || !opened->model) {
        setPlaceholder(tr("No model open. Use File ▸ Open Model… or drop a model file here."));
        return;
    }
    const ModelSummary& summary = opened->model->summary();
    const QString path = QString::fromStdString(opened->model->path());
    setValue(tr("Name"), QString::fromStdString(opened->displayName));
    setValue(tr("Format"), QString::fromStdString(summary.format));
    setValue(tr("File"), QFileInfo(path).fileName(), path);
    // Sequence models name their architecture and the metric their runs report.
    const QString task = summary.task.empty() || summary.task == "classification"
                             ? QString()
                             : QStringLiteral("%1 (%2)").arg(
                                   QString::fromStdString(summary.architecture.empty()
                                                              ? summary.task
                                                              : summary.architecture + ", " +
                                                                    summary.task),
                                   QString::fromStdString(summary.metric));
    setValue(tr("Task"), task);
    const QString tokenizer = QString::fromStdString(summary.tokenizerPath);
    setValue(tr("Tokenizer"), QFileInfo(tokenizer).fileName(), tokenizer);
    setValue(tr("Inputs"), tensorsText(summary.inputs));
    setValue(tr("Outputs"), tensorsText(summary.outputs));
    // The same words as the layer table's count: quantizable layers of all graph nodes.
    const auto quantizable = std::count_if(summary.layers.begin(), summary.layers.end(),
                                           &LayerTableModel::isQuantizable);
    setValue(tr("Layers"), tr("%1 quantizable of %2 nodes")
                               .arg(formatCount(static_cast<std::int64_t>(quantizable)),
                                    formatCount(static_cast<std::int64_t>(summary.layers.size()))));
    setValue(tr("Params"), formatCount(summary.params));
    setValue(tr("Size"), bytesText(summary.bytes),
             tr("%1 bytes of weights as stored").arg(formatCount(summary.bytes)));
    // The float-baseline caveat, then others such as "untrusted: TorchScript holds code;
    // BitLens only reads its tensors".
    QStringList notes;
    if (!summary.note.empty())
        notes << QString::fromStdString(summary.note);
    for (const auto& note : summary.notes)
        notes << QString::fromStdString(note);
    setValue(tr("Note"), notes.isEmpty() ? QString() : notes.first(), notes.join(QLatin1Char('\n')));
    setPlaceholder({});
}

LayerDetailsPanel::LayerDetailsPanel(QWidget* parent)
    : FormPanel(tr("Layer"), parent), m_weights(new QTreeWidget(this))
{
    setObjectName(QStringLiteral("layerDetailsPanel"));
    for (const QString& key : {tr("Name"), tr("Op"), tr("Inputs"), tr("Output"), tr("Params"),
                               tr("Bytes")})
        addRow(key);
    m_weights->setObjectName(QStringLiteral("weightList"));
    m_weights->setColumnCount(4);
    m_weights->setHeaderLabels({tr("Weight"), tr("Type"), tr("Shape"), tr("Size")});
    m_weights->setRootIsDecorated(false);
    m_weights->setUniformRowHeights(true);
    m_weights->setSelectionMode(QAbstractItemView::NoSelection);
    m_weights->header()->setStretchLastSection(false);
    m_weights->header()->setSectionResizeMode(0, QHeaderView::Stretch);
    for (int column = 1; column < 4; ++column)
        m_weights->header()->setSectionResizeMode(column, QHeaderView::ResizeToContents);
    m_weights->setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    m_weights->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_form->addRow(m_weights);
    showLayer(nullptr, {});
}

void LayerDetailsPanel::showLayer(const LayerSummary* layer, const std::vector<WeightInfo>& weights)
{
    m_weights->clear();
    if (!layer) {
        m_weights->hide();
        setPlaceholder(tr("Select a layer in the table to see its details."));
        return;
    }
    QStringList inputs;
    for (const auto& shape : layer->inputShapes)
        inputs << shapeText(shape);
    setValue(tr("Name"), QString::fromStdString(layer->name));
    setValue(tr("Op"), QString::fromStdString(layer->op));
    setValue(tr("Inputs"), inputs.isEmpty() ? tr("none") : inputs.join(QLatin1Char('\n')));
    setValue(tr("Output"), shapeText(layer->outputShape));
    setValue(tr("Params"), formatCount(layer->params));
    setValue(tr("Bytes"), layer->bytes < 1024 ? bytesText(layer->bytes)
                                               : tr("%1 (%2 B)").arg(bytesText(layer->bytes),
                                                                      formatCount(layer->bytes)));
    for (const WeightInfo& weight : weights) {
        auto* item = new QTreeWidgetItem(m_weights);
        item->setText(0, QString::fromStdString(weight.name));
        item->setToolTip(0, QString::fromStdString(weight.name));
        item->setText(1, QString::fromStdString(weight.dtype));
        item->setText(2, shapeText(weight.shape));
        item->setText(3, bytesText(weight.bytes));
        item->setTextAlignment(3, Qt::AlignRight | Qt::AlignVCenter);
    }
    // Fit the list to its rows (up to eight) instead of leaving an empty box.
    const int rows = std::min<int>(static_cast<int>(weights.size()), 8);
    const int rowHeight = weights.empty() ? 0 : m_weights->sizeHintForRow(0);
    m_weights->setFixedHeight(m_weights->header()->sizeHint().height() + rows * rowHeight +
                              2 * m_weights->frameWidth());
    m_weights->setVisible(!weights.empty());
    setPlaceholder({});
}

DataSummaryPanel::DataSummaryPanel(QWidget* parent) : FormPanel(tr("Data"), parent)
{
    setObjectName(QStringLiteral("dataSummaryPanel"));
    for (const QString& key :
         {tr("Path"), tr("Kind"), tr("Samples"), tr("Sample shape"), tr("Classes")})
        addRow(key);
    showData(nullptr);
}

void DataSummaryPanel::showData(const DataInfo* info, const QString& zooModel)
{
    if (!info && !zooModel.isEmpty()) {
        setPlaceholder(tr("Runs use %1's own data: its calibration and evaluation sets, as "
                          "bitlens-cli does for a zoo name. File ▸ Open Data… uses other data.")
                           .arg(zooModel));
        return;
    }
    if (!info) {
        setPlaceholder(tr("No data open. Use File ▸ Open Data… to load calibration or "
                          "evaluation data."));
        return;
    }
    const QString path = QString::fromStdString(info->path);
    setValue(tr("Path"), QFileInfo(path).fileName(), path);
    setValue(tr("Kind"), QString::fromStdString(info->kind));
    setValue(tr("Samples"), formatCount(info->samples));
    setValue(tr("Sample shape"), shapeText(info->sampleShape));
    setValue(tr("Classes"), info->classes > 0 ? formatCount(info->classes) : tr("unlabelled"));
    setPlaceholder({});
}

} // namespace bitlens::widgets
