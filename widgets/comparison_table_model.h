#pragma once
// The comparison table: one row per run of a compare file ({"runs": [report, ...]}), the
// numbers a person weighs when choosing a scheme. Display text is formatted; Qt::UserRole gives
// the raw number (or text) to sort by.

#include "analysis/metric_info.h"

#include <nlohmann/json.hpp>

#include <QAbstractTableModel>
#include <QString>

#include <optional>
#include <vector>

namespace bitlens::widgets {

/// How a metric's change is shown (analysis::ChangeUnit): percentage points (shares of samples:
/// top-1, agreement), percent (perplexity changes by a ratio), or the metric's own unit.
using ChangeUnit = analysis::ChangeUnit;
/// The unit of `metricName`'s change (report.json metric.name; "" is top-1's points).
ChangeUnit changeUnitOf(const QString& metricName);
/// The direction, unit and titles of figure `name` (analysis::metricInfo).
analysis::MetricInfo metricInfoOf(const QString& name);

/// Qt item model over the runs of `bitlens-cli compare --report`.
class ComparisonTableModel : public QAbstractTableModel {
    Q_OBJECT

public:
    /// Column order.
    enum Column {
        Scheme,        ///< scheme.preset (or spec)
        Metric,        ///< metric.quantized, e.g. top-1 accuracy
        Change,        ///< quantized - float in changeUnitOf(metric): points, % or its own unit
        MeanKld,       ///< kl_divergence.kld.mean, nats (language models)
        KldP99,        ///< kl_divergence.kld.p99, nats (language models)
        SameTop,       ///< kl_divergence.same_top.fraction (language models)
        Size,          ///< size_bytes.quantized, with quantized / float
        MinSqnr,       ///< smallest layers[].sqnr_db_accumulated, dB (null = exact = infinite)
        Throughput,    ///< throughput.quantized_samples_per_s
        Kernels,       ///< "2 of 4 layers real"
        ColumnCount
    };
    /// The role that returns raw values for sorting (numbers as double, text as QString).
    static constexpr int SortRole = Qt::UserRole;

    explicit ComparisonTableModel(QObject* parent = nullptr);

    /// Shows the runs of a compare file; a file without runs (or malformed) shows no rows and
    /// sets errorText(). Never throws.
    void setComparison(const nlohmann::json& comparison);
    /// Why the last setComparison showed no rows ("No data: ..."), empty when it showed some.
    QString errorText() const { return m_error; }
    /// The open model's task metric ("perplexity"): the headers name it before any row has
    /// arrived (a comparison just begun, or none yet). "" is top-1.
    void setDefaultMetric(const QString& metricName);
    /// True when a row has KL divergence figures, or before any row when the default metric is
    /// perplexity: the mean KLD, KLD p99 and same-top columns are worth showing.
    bool hasDivergence() const;
    /// The figure of a column of figures (Metric, MeanKld, KldP99, SameTop) with its direction;
    /// nullopt for the other columns.
    std::optional<analysis::MetricInfo> columnFigure(int column) const;

    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    int columnCount(const QModelIndex& parent = QModelIndex()) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;
    /// Sorts the rows by the raw values of `column` (missing values last).
    void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;

private:
    struct Row {
        QString scheme;
        std::optional<double> metric;
        std::optional<double> change;      // in changeUnitOf(metric)
        std::optional<double> meanKld;
        std::optional<double> kldP99;
        std::optional<double> sameTop;
        std::optional<double> sizeBytes;
        std::optional<double> sizeRatio;
        std::optional<double> minSqnrDb;   // +inf when every layer is exact
        std::optional<double> samplesPerS;
        std::optional<double> floatSamplesPerS;
        QString why;                       // throughput.why: why slower than float, in words
        int realKernels = 0;
        int kernelLayers = 0;
    };
    QVariant rawValue(const Row& row, int column) const;

    std::vector<Row> m_rows;
    QString m_metricName;
    QString m_defaultMetric;
    bool m_rowsHaveDivergence = false;
    QString m_error;

public:
    /// The metric of the comparison shown ("top1", "perplexity", ...), else the default metric
    /// ("" when neither).
    QString metricName() const
    {
        return m_metricName.isEmpty() ? m_defaultMetric : m_metricName;
    }
};

} // namespace bitlens::widgets
