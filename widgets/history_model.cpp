#include "history_model.h"

#include "chart_json.h"

#include "analysis/metric_info.h"
#include "export/report_figures.h"

#include <cmath>
#include <limits>

namespace bitlens::widgets {

namespace rj = reportjson;

double minAccumulatedSqnrDb(const nlohmann::json& report)
{
    double smallest = std::numeric_limits<double>::quiet_NaN();
    bool anyExact = false;
    if (const nlohmann::json* layers = rj::array(report, "layers")) {
        for (const nlohmann::json& layer : *layers) {
            const nlohmann::json* value = rj::member(layer, "sqnr_db_accumulated");
            if (!value)
                continue;
            if (value->is_null())
                anyExact = true;
            else if (const auto db = rj::asNumber(*value))
                smallest = std::isnan(smallest) ? *db : std::min(smallest, *db);
        }
    }
    if (std::isnan(smallest) && anyExact)
        return std::numeric_limits<double>::infinity();
    return smallest;
}

HistoryModel::HistoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void HistoryModel::addRun(HistoryRun run)
{
    // Named once here, not on every paint: an older report without scheme.display_name has its
    // name rebuilt by parsing its scheme.
    if (run.shown.isEmpty())
        run.shown = shownScheme(run);
    const int row = rowCount();
    beginInsertRows(QModelIndex(), row, row);
    m_runs.push_back(std::move(run));
    endInsertRows();
}

void HistoryModel::addComparison(const nlohmann::json& comparison, const QString& modelPath,
                                 const QDateTime& time)
{
    const nlohmann::json* runs = rj::array(comparison, "runs");
    if (!runs)
        return;
    for (const nlohmann::json& report : *runs) {
        if (!report.is_object())
            continue;
        QString scheme;
        if (const nlohmann::json* spec = rj::object(report, "scheme"))
            scheme = rj::text(*spec, "spec");
        if (scheme.isEmpty())
            scheme = rj::schemeName(report);
        addRun({report, scheme, time, modelPath});
    }
}

void HistoryModel::clear()
{
    beginResetModel();
    m_runs.clear();
    endResetModel();
}

nlohmann::json HistoryModel::comparison() const
{
    nlohmann::json runs = nlohmann::json::array();
    for (const HistoryRun& run : m_runs)
        runs.push_back(run.report);
    return nlohmann::json{{"runs", std::move(runs)}};
}

QString HistoryModel::shownScheme(const HistoryRun& entry)
{
    // The name every view gives it (method and options: "w4-int4 · GPTQ g128"); the scheme
    // string it ran is the tooltip. A report without a scheme shows the string.
    return rj::object(entry.report, "scheme") ? rj::schemeName(entry.report) : entry.scheme;
}

QString HistoryModel::runLabel(int row) const
{
    if (row < 0 || row >= rowCount())
        return {};
    const HistoryRun& entry = run(row);
    return tr("%1 (%2)").arg(entry.shown, entry.time.toString(QStringLiteral("hh:mm:ss")));
}

int HistoryModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_runs.size());
}

int HistoryModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant HistoryModel::rawValue(const HistoryRun& entry, int column) const
{
    const nlohmann::json& report = entry.report;
    const auto number = [](const std::optional<double>& v) {
        return v ? QVariant(*v) : QVariant();
    };
    const nlohmann::json* metric = rj::object(report, "metric");
    switch (column) {
    case Scheme: return entry.shown;
    case Metric: return metric ? number(rj::number(*metric, "quantized")) : QVariant();
    case Change: {
        // In the run's metric's own change unit: points of top-1, percent of perplexity.
        const auto q = metric ? rj::number(*metric, "quantized") : std::nullopt;
        const auto f = metric ? rj::number(*metric, "float") : std::nullopt;
        const auto change =
            q && f ? analysis::metricChange(
                         analysis::metricInfo(exporting::reportMetricName(report)), *q, *f)
                   : std::nullopt;
        return change ? QVariant(*change) : QVariant();
    }
    case SizeRatio: {
        const nlohmann::json* size = rj::object(report, "size_bytes");
        const auto q = size ? rj::number(*size, "quantized") : std::nullopt;
        const auto f = size ? rj::number(*size, "float") : std::nullopt;
        return q && f && *f > 0 ? QVariant(*q / *f) : QVariant();
    }
    case MinSqnr: {
        const double db = minAccumulatedSqnrDb(report);
        return std::isnan(db) ? QVariant() : QVariant(db);
    }
    case Speed: {
        const nlohmann::json* throughput = rj::object(report, "throughput");
        const auto q = throughput ? rj::number(*throughput, "quantized_samples_per_s")
                                  : std::nullopt;
        const auto f = throughput ? rj::number(*throughput, "float_samples_per_s")
                                  : std::nullopt;
        return q && f && *f > 0 ? QVariant(*q / *f) : QVariant();
    }
    case Time: return entry.time;
    default: return {};
    }
}

QVariant HistoryModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const HistoryRun& entry = m_runs[static_cast<std::size_t>(index.row())];
    const int column = index.column();
    const QVariant raw = rawValue(entry, column);
    if (role == SortRole)
        return raw;
    if (role == Qt::TextAlignmentRole)
        return int((column == Scheme ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole) {
        if (column == Scheme)
            return tr("%1\nmodel: %2\nfinished %3")
                .arg(entry.scheme, entry.modelPath,
                     entry.time.toString(QStringLiteral("yyyy-MM-dd hh:mm:ss")));
        if (column == Speed)
            return tr("Quantized samples/s divided by float samples/s (above 1: faster)");
        if (column == MinSqnr)
            return tr("Smallest accumulated SQNR over the layers (dB)");
        return {};
    }
    if (role != Qt::DisplayRole)
        return {};
    const QString none = QStringLiteral("–");
    if (column == Scheme)
        return entry.shown;
    if (column == Time)
        return entry.time.toString(QStringLiteral("hh:mm:ss"));
    if (!raw.isValid())
        return none;
    const double value = raw.toDouble();
    switch (column) {
    case Metric: return QString::number(value, 'f', 4);
    case Change: {
        const bool ownUnit =
            analysis::metricInfo(exporting::reportMetricName(entry.report)).change ==
            analysis::ChangeUnit::Same;
        return (value >= 0 ? QStringLiteral("+") : QString()) +
               QString::number(value, 'f', ownUnit ? 4 : 2);
    }
    case SizeRatio: return QString::number(value, 'f', 3);
    case MinSqnr: return std::isinf(value) ? tr("exact") : QString::number(value, 'f', 1);
    case Speed: return tr("%1×").arg(value, 0, 'f', 2);
    default: return {};
    }
}

QVariant HistoryModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return QAbstractTableModel::headerData(section, orientation, role);
    // The metric of the runs (one model: one metric); top-1 before any run.
    std::string_view metricName;
    for (const HistoryRun& run : m_runs)
        if (metricName.empty())
            metricName = exporting::reportMetricName(run.report);
    const analysis::MetricInfo metric = analysis::metricInfo(metricName);
    const QString direction = metric.lowerIsBetter ? tr("lower is better")
                                                   : tr("higher is better");
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case Metric:
            return tr("%1 of the quantized model (%2)")
                .arg(QString::fromStdString(metric.title), direction);
        case Change:
            switch (metric.change) {
            case analysis::ChangeUnit::Points:
                return tr("Quantized minus float metric, in percentage points (%1)")
                    .arg(direction);
            case analysis::ChangeUnit::Percent:
                return tr("Quantized over float metric, change in percent (%1)").arg(direction);
            case analysis::ChangeUnit::Same:
                return tr("Quantized minus float metric (%1)").arg(direction);
            }
            return {};
        case SizeRatio: return tr("Quantized size divided by float size");
        case MinSqnr: return tr("Smallest accumulated SQNR over the layers, dB");
        case Speed: return tr("Quantized samples/s divided by float samples/s");
        default: return {};
        }
    }
    if (role != Qt::DisplayRole)
        return {};
    switch (section) {
    case Scheme: return tr("Scheme");
    case Metric: return QString::fromStdString(metric.shortTitle);
    case Change:
        switch (metric.change) {
        case analysis::ChangeUnit::Points: return tr("Change (pts)");
        case analysis::ChangeUnit::Percent: return tr("Change (%)");
        case analysis::ChangeUnit::Same: return tr("Change");
        }
        return tr("Change");
    case SizeRatio: return tr("Size ratio");
    case MinSqnr: return tr("Min SQNR (dB)");
    case Speed: return tr("Q/F speed");
    case Time: return tr("Time");
    default: return {};
    }
}

} // namespace bitlens::widgets
