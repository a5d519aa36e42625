#include "comparison_table_model.h"

#include "chart_json.h"
#include "chart_throughput.h"

#include "export/report_figures.h"

#include <QBrush>
#include <QColor>

#include <algorithm>
#include <cmath>
#include <limits>

namespace bitlens::widgets {

ChangeUnit changeUnitOf(const QString& metricName)
{
    return metricInfoOf(metricName).change;
}

analysis::MetricInfo metricInfoOf(const QString& name)
{
    return analysis::metricInfo(name.toStdString());
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
                        row.change = analysis::metricChange(metricInfoOf(name), *row.metric,
                                                            *reference);
                    if (metricName.isEmpty())
                        metricName = name;
                }
                row.meanKld = exporting::reportFigure(run, "kld_mean");
                row.kldP99 = exporting::reportFigure(run, "kld_p99");
                row.sameTop = exporting::reportFigure(run, "same_top");
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
    m_rowsHaveDivergence = std::any_of(rows.begin(), rows.end(), [](const Row& row) {
        return row.meanKld || row.kldP99 || row.sameTop;
    });
    m_rows = std::move(rows);
    m_metricName = metricName;
    m_error = error;
    endResetModel();
}

void ComparisonTableModel::setDefaultMetric(const QString& metricName)
{
    if (metricName == m_defaultMetric)
        return;
    // A reset, not headerDataChanged: which columns a view shows (hasDivergence) may change.
    beginResetModel();
    m_defaultMetric = metricName;
    endResetModel();
}

bool ComparisonTableModel::hasDivergence() const
{
    if (!m_rows.empty())
        return m_rowsHaveDivergence;
    return analysis::metricHasDivergence(metricInfoOf(metricName()).name);
}

std::optional<analysis::MetricInfo> ComparisonTableModel::columnFigure(int column) const
{
    switch (column) {
    case Metric: return metricInfoOf(metricName());
    case MeanKld: return analysis::metricInfo("kld_mean");
    case KldP99: return analysis::metricInfo("kld_p99");
    case SameTop: return analysis::metricInfo("same_top");
    default: return std::nullopt;
    }
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
    case MeanKld: return number(row.meanKld);
    case KldP99: return number(row.kldP99);
    case SameTop: return number(row.sameTop);
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
    if ((role == Qt::ForegroundRole || role == Qt::ToolTipRole) && column == Change &&
        row.change && *row.change != 0.0) {
        // Worse or better than float in the metric's own direction: +5 % perplexity is worse,
        // +0.5 points of top-1 better.
        const analysis::MetricInfo info = metricInfoOf(metricName());
        const bool worse = info.lowerIsBetter ? *row.change > 0 : *row.change < 0;
        if (role == Qt::ToolTipRole)
            return worse ? tr("Worse than float32 (%1: %2 is better)")
                               .arg(QString::fromStdString(info.title),
                                    info.lowerIsBetter ? tr("lower") : tr("higher"))
                         : tr("Better than float32 (%1: %2 is better)")
                               .arg(QString::fromStdString(info.title),
                                    info.lowerIsBetter ? tr("lower") : tr("higher"));
        return QBrush(worse ? QColor(0xb0, 0x20, 0x20) : QColor(0x1b, 0x7a, 0x2e));
    }
    if (role != Qt::DisplayRole)
        return {};
    const QString none = QStringLiteral("–");
    switch (column) {
    case Scheme: return row.scheme;
    case Metric: return row.metric ? QString::number(*row.metric, 'f', 4) : none;
    case Change:
        return row.change ? (*row.change >= 0 ? QStringLiteral("+") : QString())
                                + QString::number(*row.change, 'f',
                                                  changeUnitOf(metricName()) == ChangeUnit::Same
                                                      ? 4
                                                      : 2)
                          : none;
    case MeanKld: return row.meanKld ? QString::number(*row.meanKld, 'f', 5) : none;
    case KldP99: return row.kldP99 ? QString::number(*row.kldP99, 'f', 4) : none;
    case SameTop: return row.sameTop ? QString::number(*row.sameTop, 'f', 4) : none;
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
    if (orientation != Qt::Horizontal)
        return QAbstractTableModel::headerData(section, orientation, role);
    const analysis::MetricInfo metric = metricInfoOf(metricName());
    const std::optional<analysis::MetricInfo> figure = columnFigure(section);
    if (role == Qt::InitialSortOrderRole) {
        // A first click on a header puts the best rows on top, in the column's own direction.
        bool ascending = false;
        switch (section) {
        case Scheme:
        case Size: ascending = true; break;
        case Change: ascending = metric.lowerIsBetter; break;
        case MinSqnr:
        case Throughput:
        case Kernels: ascending = false; break;
        default: ascending = figure && figure->lowerIsBetter; break;
        }
        return int(ascending ? Qt::AscendingOrder : Qt::DescendingOrder);
    }
    if (role == Qt::ToolTipRole && (figure || section == Change)) {
        const analysis::MetricInfo& info = figure ? *figure : metric;
        return tr("%1: %2 is better").arg(headerData(section, orientation).toString(),
                                          info.lowerIsBetter ? tr("lower") : tr("higher"));
    }
    if (role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (figure && section != Metric)
        return QString::fromStdString(figure->axisTitle());
    switch (section) {
    case Scheme: return tr("Scheme");
    case Metric: return QString::fromStdString(metric.title);
    case Change:
        switch (metric.change) {
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
