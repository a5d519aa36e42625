#include "layer_table_model.h"

#include <QBrush>
#include <QFont>
#include <QStringList>

#include <algorithm>
#include <cmath>
#include <set>
#include <cstdlib>
#include <limits>

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

/// A report number that may be null (exact match, written as null in report.json).
std::optional<double> optionalNumber(const nlohmann::json& value)
{
    if (value.is_number())
        return value.get<double>();
    return std::nullopt;
}

QString dbText(std::optional<double> db)
{
    return db ? QString::number(*db, 'f', 1) : LayerTableModel::tr("exact");
}

bool isNumberColumn(int column)
{
    return column == LayerTableModel::Params || column == LayerTableModel::Bytes ||
           column == LayerTableModel::SqnrLocal || column == LayerTableModel::SqnrAccumulated ||
           column == LayerTableModel::BytesQuantized;
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

QColor LayerTableModel::heatColor(std::optional<double> sqnrDb)
{
    if (!sqnrDb || *sqnrDb > kSqnrGreen)
        return QColor(0x9b, 0xe0, 0x9b);
    if (*sqnrDb >= kSqnrRed)
        return QColor(0xff, 0xd0, 0x80);
    return QColor(0xf4, 0x9a, 0x9a);
}

QString LayerTableModel::heatLegend()
{
    return tr("Accumulated SQNR (everything up to this layer quantized): green above %1 dB or "
              "exact, amber %2-%1 dB, red below %2 dB. Higher is better; every 6 dB is one bit.")
        .arg(kSqnrGreen)
        .arg(kSqnrRed);
}

void LayerTableModel::setSummary(const ModelSummary& summary)
{
    beginResetModel();
    m_layers = summary.layers;
    m_quantizable = static_cast<int>(std::count_if(
        m_layers.begin(), m_layers.end(), [](const LayerSummary& l) { return isQuantizable(l); }));
    m_metrics.clear();
    m_overrides.clear();
    endResetModel();
}

void LayerTableModel::clear()
{
    beginResetModel();
    m_layers.clear();
    m_quantizable = 0;
    m_metrics.clear();
    m_overrides.clear();
    endResetModel();
}

int LayerTableModel::rowOf(const QString& name) const
{
    const std::string key = name.toStdString();
    for (std::size_t i = 0; i < m_layers.size(); ++i)
        if (m_layers[i].name == key)
            return static_cast<int>(i);
    return -1;
}

void LayerTableModel::setReport(const nlohmann::json& report)
{
    m_metrics.clear();
    if (report.is_object() && report.contains("layers") && report["layers"].is_array()) {
        for (const nlohmann::json& layer : report["layers"]) {
            if (!layer.is_object() || !layer.contains("name") || !layer["name"].is_string())
                continue;
            Metrics m;
            m.sqnrLocal = optionalNumber(layer.value("sqnr_db", nlohmann::json()));
            m.sqnrAccumulated =
                optionalNumber(layer.value("sqnr_db_accumulated", nlohmann::json()));
            m.bytesQuantized = layer.value("bytes_quantized", std::int64_t{0});
            m.kernel = layer.value("kernel", std::string());
            m.weightType = layer.value("weight_type", std::string());
            m.actType = layer.value("act_type", std::string());
            m.config = layer.value("config", std::string());
            // The Scheme tooltip also gives the layer's note, e.g. why an LM head stayed float.
            if (const std::string note = layer.value("note", std::string()); !note.empty())
                m.config += (m.config.empty() ? "" : "\n") + note;
            m_metrics[layer["name"].get<std::string>()] = std::move(m);
        }
    }
    emitMetricColumnsChanged();
}

bool LayerTableModel::hasMetrics(int row) const { return metrics(row) != nullptr; }

void LayerTableModel::setOverrides(const QMap<QString, QString>& overrides)
{
    m_overrides = overrides;
    emitMetricColumnsChanged();
}

const LayerTableModel::Metrics* LayerTableModel::metrics(int row) const
{
    const LayerSummary* l = layer(row);
    if (!l)
        return nullptr;
    const auto it = m_metrics.find(l->name);
    return it == m_metrics.end() ? nullptr : &it->second;
}

void LayerTableModel::emitMetricColumnsChanged()
{
    if (m_layers.empty())
        return;
    Q_EMIT dataChanged(index(0, Scheme), index(rowCount() - 1, ColumnCount - 1));
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
    const Metrics* m = metrics(index.row());
    const QString name = QString::fromStdString(layer.name);
    const auto override = m_overrides.constFind(name);
    const bool overridden = override != m_overrides.cend();
    if (column >= Scheme) {
        switch (role) {
        case Qt::DisplayRole:
            switch (column) {
            case Scheme:
                if (overridden)
                    return *override == QLatin1String("float") ? QStringLiteral("float32 (kept)")
                                                               : *override;
                if (m)
                    return QStringLiteral("%1 / %2").arg(QString::fromStdString(m->weightType),
                                                         QString::fromStdString(m->actType));
                return {};
            case SqnrLocal: return m ? dbText(m->sqnrLocal) : QVariant();
            case SqnrAccumulated: return m ? dbText(m->sqnrAccumulated) : QVariant();
            case BytesQuantized: return m ? bytesText(m->bytesQuantized) : QVariant();
            case Kernel: return m ? QString::fromStdString(m->kernel) : QVariant();
            default: return {};
            }
        case Qt::ToolTipRole:
            switch (column) {
            case Scheme:
                if (overridden)
                    return tr("Override: %1 (right-click to change or clear)").arg(*override);
                return m ? QString::fromStdString(m->config) : QVariant();
            case SqnrLocal:
                return m ? tr("%1 dB with only this layer quantized").arg(dbText(m->sqnrLocal))
                         : QVariant();
            case SqnrAccumulated:
                return m ? dbText(m->sqnrAccumulated) + QStringLiteral(" dB\n") + heatLegend()
                         : QVariant();
            case BytesQuantized:
                return m ? tr("%1 bytes").arg(formatCount(m->bytesQuantized)) : QVariant();
            case Kernel: return m ? QString::fromStdString(m->kernel) : QVariant();
            default: return {};
            }
        case Qt::BackgroundRole:
            if (column == SqnrAccumulated && m)
                return QBrush(heatColor(m->sqnrAccumulated));
            return {};
        case Qt::ForegroundRole:
            if (column == SqnrAccumulated && m)
                return QBrush(Qt::black);
            return {};
        case Qt::FontRole:
            if (column == Scheme && overridden) {
                QFont font;
                font.setBold(true);
                return font;
            }
            return {};
        case Qt::TextAlignmentRole:
            return isNumberColumn(column) ? int(Qt::AlignRight | Qt::AlignVCenter)
                                          : int(Qt::AlignLeft | Qt::AlignVCenter);
        case SortRole:
            switch (column) {
            case Scheme: return data(index, Qt::DisplayRole).toString();
            case SqnrLocal:
            case SqnrAccumulated: {
                if (!m)
                    return -std::numeric_limits<double>::infinity();
                const std::optional<double> db =
                    column == SqnrLocal ? m->sqnrLocal : m->sqnrAccumulated;
                return db ? *db : std::numeric_limits<double>::infinity();
            }
            case BytesQuantized: return m ? qint64{m->bytesQuantized} : qint64{-1};
            case Kernel: return m ? QString::fromStdString(m->kernel) : QString();
            default: return {};
            }
        default: return {};
        }
    }
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
    if (role == Qt::TextAlignmentRole && isNumberColumn(section))
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case InputShapes: return tr("Shapes of the activation inputs, batch 1");
        case OutputShape: return tr("Shape of the first output, batch 1");
        case Params: return tr("Weight elements this layer reads");
        case Bytes: return tr("Bytes of this layer's weights as stored");
        case Scheme: return tr("Types the layer runs with (weights / activations); overrides bold");
        case SqnrLocal: return tr("Signal-to-quantization-noise ratio of this layer's output "
                                  "with only this layer quantized (dB, higher is better)");
        case SqnrAccumulated: return heatLegend();
        case BytesQuantized: return tr("Bytes of this layer's weights as quantized");
        case Kernel: return tr("What ran the layer when throughput was measured");
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
    case Scheme: return tr("Scheme");
    case SqnrLocal: return tr("SQNR dB (local)");
    case SqnrAccumulated: return tr("SQNR dB (accum.)");
    case BytesQuantized: return tr("Bytes quantized");
    case Kernel: return tr("Kernel");
    default: return {};
    }
}

} // namespace bitlens::widgets

namespace bitlens::widgets {

bool LayerTableModel::isQuantizable(const LayerSummary& layer)
{
    static const std::set<std::string> ops = {"Conv", "Gemm", "MatMul", "LSTM", "GRU"};
    return layer.params > 0 && ops.count(layer.op) > 0;
}


LayerFilterProxy::LayerFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {}

void LayerFilterProxy::setShowAllNodes(bool all)
{
    if (all == m_showAll)
        return;
    m_showAll = all;
    invalidateRowsFilter();
}

int LayerFilterProxy::nodeCount() const
{
    return sourceModel() ? sourceModel()->rowCount() : 0;
}

int LayerFilterProxy::quantizableCount() const
{
    const auto* layers = qobject_cast<const LayerTableModel*>(sourceModel());
    return layers ? layers->quantizableCount() : 0;
}

bool LayerFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const
{
    if (m_showAll || sourceParent.isValid())
        return true;
    const auto* layers = qobject_cast<const LayerTableModel*>(sourceModel());
    if (!layers)
        return true;
    const LayerSummary* layer = layers->layer(sourceRow);
    return !layer || LayerTableModel::isQuantizable(*layer) || layers->quantizableCount() == 0;
}

} // namespace bitlens::widgets
