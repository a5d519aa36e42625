#include "comparison_table_model.h"

#include "chart_json.h"
#include "chart_throughput.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace bitlens::widgets {

ChangeUnit changeUnitOf(const QString& metricName)
{
    if (metricName == QLatin1String("perplexity"))
        return ChangeUnit::Percent;
    if (metricName.isEmpty() || metricName == QLatin1String("top1") ||
        metricName == QLatin1String("output_agreement"))
        return ChangeUnit::Points;
    return ChangeUnit::Same;
}

namespace rj = reportjson;

ComparisonTableModel::ComparisonTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void ComparisonTableModel::setComparison(const nlohmann::json& comparison)
{
    std::vector<Row> rows;
    QString metricName;
    QString error;
    try {
        const nlohmann::json* runs = rj::array(comparison, "runs");
        if (!runs) {
            error = tr("No data: not a compare file (no \"runs\" list)");
        } else {
            for (const nlohmann::json& run : *runs) {
                if (!run.is_object())
                    continue;
                Row row;
                row.scheme = rj::schemeName(run);
                if (const nlohmann::json* metric = rj::object(run, "metric")) {
                    row.metric = rj::number(*metric, "quantized");
                    const auto reference = rj::number(*metric, "float");
                    const QString name = rj::text(*metric, "name");
                    if (row.metric && reference)
                        switch (changeUnitOf(name)) {
                        case ChangeUnit::Points:
                            row.change = 100.0 * (*row.metric - *reference);
                            break;
                        case ChangeUnit::Percent:
                            if (*reference != 0.0)
                                row.change = 100.0 * (*row.metric / *reference - 1.0);
                            break;
                        case ChangeUnit::Same: row.change = *row.metric - *reference; break;
                        }
                    if (metricName.isEmpty())
                        metricName = name;
                }
                if (const nlohmann::json* size = rj::object(run, "size_bytes")) {
                    row.sizeBytes = rj::number(*size, "quantized");
                    const auto total = rj::number(*size, "float");
                    if (row.sizeBytes && total && *total > 0)
                        row.sizeRatio = *row.sizeBytes / *total;
                }
                if (const nlohmann::json* layers = rj::array(run, "layers")) {
                    std::optional<double> smallest;
                    bool anyExact = false;
                    for (const nlohmann::json& layer : *layers) {
                        const nlohmann::json* value = rj::member(layer, "sqnr_db_accumulated");
                        if (!value)
                            continue;
                        if (value->is_null())
                            anyExact = true;
                        else if (const auto db = rj::asNumber(*value))
                            smallest = std::min(smallest.value_or(*db), *db);
                    }
                    if (smallest)
                        row.minSqnrDb = smallest;
                    else if (anyExact)
                        row.minSqnrDb = std::numeric_limits<double>::infinity();
                }
                if (const nlohmann::json* throughput = rj::object(run, "throughput")) {
                    row.samplesPerS = rj::number(*throughput, "quantized_samples_per_s");
                    row.floatSamplesPerS = rj::number(*throughput, "float_samples_per_s");
                    row.why = rj::text(*throughput, "why");
                    if (rj::object(*throughput, "kernels")) {
                        const KernelCount count = kernelCount(run);
                        row.kernelLayers = count.layers;
                        row.realKernels = count.real;
                    }
                }
                rows.push_back(row);
            }
            if (rows.empty())
                error = tr("No data: the compare file has no runs");
        }
    } catch (const std::exception& e) {
        rows.clear();
        error = tr("No data: malformed compare file (%1)").arg(QString::fromUtf8(e.what()));
    }
    beginResetModel();
    m_rows = std::move(rows);
    m_metricName = metricName;
    m_error = error;
    endResetModel();
}

int ComparisonTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int ComparisonTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ComparisonTableModel::rawValue(const Row& row, int column) const
{
    const auto number = [](const std::optional<double>& v) {
        return v ? QVariant(*v) : QVariant();
    };
    switch (column) {
    case Scheme: return row.scheme;
    case Metric: return number(row.metric);
    case Change: return number(row.change);
    case Size: return number(row.sizeBytes);
    case MinSqnr: return number(row.minSqnrDb);
    case Throughput: return number(row.samplesPerS);
    case Kernels:
        return row.kernelLayers > 0 ? QVariant(double(row.realKernels) / row.kernelLayers)
                                    : QVariant();
    default: return {};
    }
}

QVariant ComparisonTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Row& row = m_rows[static_cast<std::size_t>(index.row())];
    const int column = index.column();
    if (role == SortRole)
        return rawValue(row, column);
    if (role == Qt::TextAlignmentRole)
        return int((column == Scheme || column == Kernels ? Qt::AlignLeft : Qt::AlignRight)
                   | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && column == Size && row.sizeBytes)
        return tr("%1 bytes").arg(*row.sizeBytes, 0, 'f', 0);
    if (role == Qt::ToolTipRole && (column == Throughput || column == Kernels) && !row.why.isEmpty())
        return tr("Slower than float32: %1").arg(row.why);
    if (role != Qt::DisplayRole)
        return {};
    const QString none = QStringLiteral("–");
    switch (column) {
    case Scheme: return row.scheme;
    case Metric: return row.metric ? QString::number(*row.metric, 'f', 4) : none;
    case Change:
        return row.change ? (*row.change >= 0 ? QStringLiteral("+") : QString())
                                + QString::number(*row.change, 'f',
                                                  changeUnitOf(m_metricName) == ChangeUnit::Same
                                                      ? 4
                                                      : 2)
                          : none;
    case Size:
        if (!row.sizeBytes)
            return none;
        return row.sizeRatio ? tr("%1 (%2)")
                                   .arg(rj::bytesLabel(*row.sizeBytes))
                                   .arg(*row.sizeRatio, 0, 'f', 3)
                             : rj::bytesLabel(*row.sizeBytes);
    case MinSqnr:
        if (!row.minSqnrDb)
            return none;
        return std::isinf(*row.minSqnrDb) ? tr("exact") : QString::number(*row.minSqnrDb, 'f', 1);
    case Throughput:
        if (!row.samplesPerS)
            return none;
        if (row.floatSamplesPerS && *row.floatSamplesPerS > 0)
            return tr("%1 (%2x float)")
                .arg(QString::number(*row.samplesPerS, 'f', 0))
                .arg(*row.samplesPerS / *row.floatSamplesPerS, 0, 'f', 2);
        return QString::number(*row.samplesPerS, 'f', 0);
    case Kernels:
        return row.kernelLayers > 0
                   ? tr("%1 of %2 layers real").arg(row.realKernels).arg(row.kernelLayers)
                   : none;
    default: return {};
    }
}

QVariant ComparisonTableModel::headerData(int section, Qt::Orientation orientation,
                                          int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Scheme: return tr("Scheme");
    case Metric: return rj::metricTitle(m_metricName);
    case Change:
        switch (changeUnitOf(m_metricName)) {
        case ChangeUnit::Points: return tr("Change (points)");
        case ChangeUnit::Percent: return tr("Change (%)");
        case ChangeUnit::Same: return tr("Change");
        }
        return tr("Change");
    case Size: return tr("Size (quantized / float)");
    case MinSqnr: return tr("Min accumulated SQNR (dB)");
    case Throughput: return tr("Quantized samples/s");
    case Kernels: return tr("Kernels");
    default: return {};
    }
}

void ComparisonTableModel::sort(int column, Qt::SortOrder order)
{
    if (column < 0 || column >= ColumnCount)
        return;
    Q_EMIT layoutAboutToBeChanged({}, QAbstractItemModel::VerticalSortHint);
    const QModelIndexList before = persistentIndexList();
    std::vector<int> rowsBefore;
    for (const QModelIndex& index : before)
        rowsBefore.push_back(index.row());
    std::vector<std::size_t> permutation(m_rows.size());
    for (std::size_t i = 0; i < permutation.size(); ++i)
        permutation[i] = i;
    std::stable_sort(permutation.begin(), permutation.end(), [&](std::size_t a, std::size_t b) {
        const QVariant va = rawValue(m_rows[a], column);
        const QVariant vb = rawValue(m_rows[b], column);
        if (!va.isValid() || !vb.isValid())
            return va.isValid() && !vb.isValid(); // missing values last, either order
        const bool less = va.typeId() == QMetaType::QString
                              ? QString::compare(va.toString(), vb.toString(),
                                                 Qt::CaseInsensitive) < 0
                              : va.toDouble() < vb.toDouble();
        const bool greater = va.typeId() == QMetaType::QString
                                 ? QString::compare(vb.toString(), va.toString(),
                                                    Qt::CaseInsensitive) < 0
                                 : vb.toDouble() < va.toDouble();
        return order == Qt::AscendingOrder ? less : greater;
    });
    std::vector<Row> sorted;
    std::vector<int> newRowOf(m_rows.size());
    for (std::size_t i = 0; i < permutation.size(); ++i) {
        sorted.push_back(m_rows[permutation[i]]);
        newRowOf[permutation[i]] = static_cast<int>(i);
    }
    m_rows = std::move(sorted);
    QModelIndexList after;
    for (qsizetype i = 0; i < before.size(); ++i)
        after << index(newRowOf[static_cast<std::size_t>(rowsBefore[static_cast<std::size_t>(i)])],
                       before[i].column());
    changePersistentIndexList(before, after);
    Q_EMIT layoutChanged({}, QAbstractItemModel::VerticalSortHint);
}

} // namespace bitlens::widgets
