#pragma once
// The run history of the open model: every finished run (its report.json, the scheme string it
// ran, when, and on which model) as one row, oldest first, with the numbers a person compares
// runs by. Display text is formatted; SortRole gives the raw number. It computes nothing beyond
// reading the reports.

#include <nlohmann/json.hpp>

#include <QAbstractTableModel>
#include <QDateTime>
#include <QString>

#include <vector>

namespace bitlens::widgets {

/// One finished run kept in the history.
struct HistoryRun {
    nlohmann::json report; ///< report.json as the run wrote it
    QString scheme;        ///< the scheme string it ran ("static-int8:observer=mse")
    QDateTime time;        ///< when it finished (local time)
    QString modelPath;     ///< the model file (or zoo name) it quantized
    QString shown;         ///< the name the views give it (shownScheme), set once by addRun
};

/// Qt item model over the runs of the open model (see the file comment).
class HistoryModel : public QAbstractTableModel {
    Q_OBJECT

public:
    /// Column order.
    enum Column {
        Scheme,    ///< the scheme's display name ("w4-int4 · GPTQ g128"); the string as tooltip
        Metric,    ///< metric.quantized (top-1, perplexity, ...)
        Change,    ///< quantized vs float in the metric's change unit (analysis::metricChange)
        SizeRatio, ///< size_bytes.quantized / size_bytes.float
        MinSqnr,   ///< smallest layers[].sqnr_db_accumulated, dB ("exact" when all are exact)
        Speed,     ///< throughput quantized / float samples per second (> 1: faster)
        Time,      ///< when the run finished, hh:mm:ss
        ColumnCount
    };
    /// The role that returns raw values (numbers as double, time as QDateTime).
    static constexpr int SortRole = Qt::UserRole;

    explicit HistoryModel(QObject* parent = nullptr);

    /// Appends a finished run (a row at the end).
    void addRun(HistoryRun run);
    /// Appends every run of a compare file ({"runs": [report, ...]}); `time` for all of them.
    void addComparison(const nlohmann::json& comparison, const QString& modelPath,
                       const QDateTime& time = QDateTime::currentDateTime());
    /// Forgets every run (another model opened).
    void clear();
    /// The run of `row` (0 = oldest); row must be in [0, rowCount()).
    const HistoryRun& run(int row) const { return m_runs.at(static_cast<std::size_t>(row)); }
    /// All runs as a compare file: {"runs": [report, ...]}, oldest first.
    nlohmann::json comparison() const;
    /// "static-int8 (07:12:31)", "w4-int4 · GPTQ g128 (07:12:31)": how views name a run.
    QString runLabel(int row) const;
    /// The Scheme column of `run`: its report's scheme display name (reportjson::schemeName).
    static QString shownScheme(const HistoryRun& run);

    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    int columnCount(const QModelIndex& parent = QModelIndex()) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    QVariant rawValue(const HistoryRun& run, int column) const;

    std::vector<HistoryRun> m_runs;
};

/// The smallest accumulated SQNR (dB) of a report's layers; +inf when every layer is exact,
/// NaN when the report has no SQNR.
double minAccumulatedSqnrDb(const nlohmann::json& report);

} // namespace bitlens::widgets
