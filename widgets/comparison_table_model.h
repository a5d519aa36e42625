#pragma once
// The comparison table: one row per run of a compare file ({"runs": [report, ...]}), the
// numbers a person weighs when choosing a scheme. Display text is formatted; Qt::UserRole gives
// the raw number (or text) to sort by.

#include <nlohmann/json.hpp>

#include <QAbstractTableModel>
#include <QString>

#include <optional>
#include <vector>

namespace bitlens::widgets {

/// How a metric's change is shown: percentage points (shares of samples: top-1, agreement),
/// percent (perplexity changes by a ratio), or the metric's own unit (a cosine).
enum class ChangeUnit { Points, Percent, Same };
/// The unit of `metricName`'s change (report.json metric.name; "" is top-1's points).
ChangeUnit changeUnitOf(const QString& metricName);

/// Qt item model over the runs of `bitlens-cli compare --report`.
class ComparisonTableModel : public QAbstractTableModel {
    Q_OBJECT

public:
    /// Column order.
    enum Column {
        Scheme,        ///< scheme.preset (or spec)
        Metric,        ///< metric.quantized, e.g. top-1 accuracy
        Change,        ///< quantized - float in changeUnitOf(metric): points, % or its own unit
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
        std::optional<double> change;      // points
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
    QString m_error;

public:
    /// The metric of the comparison shown ("top1", "perplexity", ...; "" when none).
    QString metricName() const { return m_metricName; }
};

} // namespace bitlens::widgets
