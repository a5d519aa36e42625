#include "layer_table_model.h"

#include <QStringList>

#include <cstdlib>

namespace bitlens::widgets {

namespace {

QString inputShapesText(const LayerSummary& layer)
{
    QStringList parts;
    for (const auto& shape : layer.inputShapes)
        parts << shapeText(shape);
    return parts.join(QStringLiteral(", "));
}

qint64 elementCount(const std::vector<std::int64_t>& shape)
{
    qint64 count = 1;
    for (const std::int64_t dim : shape)
        count *= dim < 0 ? 1 : dim;
    return count;
}

} // namespace

QString formatCount(std::int64_t count)
{
    const bool negative = count < 0;
    QString digits = QString::number(negative ? -static_cast<qint64>(count) : count);
    for (qsizetype pos = digits.size() - 3; pos > 0; pos -= 3)
        digits.insert(pos, QLatin1Char(','));
    return negative ? QLatin1Char('-') + digits : digits;
}

QString shapeText(const std::vector<std::int64_t>& shape)
{
    return QString::fromStdString(formatShape(shape));
}

QString bytesText(std::int64_t bytes) { return QString::fromStdString(formatBytes(bytes)); }

LayerTableModel::LayerTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void LayerTableModel::setSummary(const ModelSummary& summary)
{
    beginResetModel();
    m_layers = summary.layers;
    endResetModel();
}

void LayerTableModel::clear()
{
    beginResetModel();
    m_layers.clear();
    endResetModel();
}

const LayerSummary* LayerTableModel::layer(int row) const
{
    if (row < 0 || row >= static_cast<int>(m_layers.size()))
        return nullptr;
    return &m_layers[static_cast<std::size_t>(row)];
}

int LayerTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_layers.size());
}

int LayerTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant LayerTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const LayerSummary& layer = m_layers[static_cast<std::size_t>(index.row())];
    const int column = index.column();
    switch (role) {
    case Qt::DisplayRole:
    case Qt::ToolTipRole:
        switch (column) {
        case Name: return QString::fromStdString(layer.name);
        case Op: return QString::fromStdString(layer.op);
        case InputShapes: return inputShapesText(layer);
        case OutputShape: return shapeText(layer.outputShape);
        case Params:
            return role == Qt::ToolTipRole
                       ? QStringLiteral("%1 parameters").arg(formatCount(layer.params))
                       : formatCount(layer.params);
        case Bytes:
            return role == Qt::ToolTipRole
                       ? QStringLiteral("%1 bytes").arg(formatCount(layer.bytes))
                       : bytesText(layer.bytes);
        default: return {};
        }
    case Qt::TextAlignmentRole:
        if (column == Params || column == Bytes)
            return int(Qt::AlignRight | Qt::AlignVCenter);
        return int(Qt::AlignLeft | Qt::AlignVCenter);
    case SortRole:
        switch (column) {
        case Name: return QString::fromStdString(layer.name);
        case Op: return QString::fromStdString(layer.op);
        case InputShapes:
            return layer.inputShapes.empty() ? qint64{0} : elementCount(layer.inputShapes.front());
        case OutputShape: return elementCount(layer.outputShape);
        case Params: return qint64{layer.params};
        case Bytes: return qint64{layer.bytes};
        default: return {};
        }
    default: return {};
    }
}

QVariant LayerTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation == Qt::Vertical) {
        if (role == Qt::DisplayRole && section >= 0 && section < rowCount())
            return section + 1;
        return {};
    }
    if (role == Qt::TextAlignmentRole && (section == Params || section == Bytes))
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case InputShapes: return tr("Shapes of the activation inputs, batch 1");
        case OutputShape: return tr("Shape of the first output, batch 1");
        case Params: return tr("Weight elements this layer reads");
        case Bytes: return tr("Bytes of this layer's weights as stored");
        default: return {};
        }
    }
    if (role != Qt::DisplayRole)
        return {};
    switch (section) {
    case Name: return tr("Name");
    case Op: return tr("Op");
    case InputShapes: return tr("Input shapes");
    case OutputShape: return tr("Output shape");
    case Params: return tr("Params");
    case Bytes: return tr("Bytes");
    default: return {};
    }
}

} // namespace bitlens::widgets
