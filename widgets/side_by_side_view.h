#pragma once
// Two runs of the history side by side: one chart with both runs' SQNR per layer (local and
// accumulated of run A, then of run B) and a table per layer with the accumulated SQNR of each
// run, their difference and each run's quantized bytes. It shows the two report.json it is given
// and computes nothing else.

#include "chart_base.h"

#include <nlohmann/json.hpp>

#include <QAbstractTableModel>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <optional>
#include <vector>

QT_BEGIN_NAMESPACE
class QBarSeries;
class QBarSet;
class QLabel;
class QTableView;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Per-layer numbers of two runs: the union of their layers, run A's order first.
struct LayerPair {
    QString layer;                     ///< layer name
    std::optional<double> localA;      ///< A's sqnr_db (nullopt: exact or absent)
    std::optional<double> accumA;      ///< A's sqnr_db_accumulated, dB
    std::optional<double> localB;      ///< B's sqnr_db, dB
    std::optional<double> accumB;      ///< B's sqnr_db_accumulated, dB
    bool exactLocalA = false;          ///< A's local SQNR is null: exact (infinite)
    bool exactAccumA = false;          ///< A's accumulated SQNR is exact
    bool exactLocalB = false;          ///< B's local SQNR is exact
    bool exactAccumB = false;          ///< B's accumulated SQNR is exact
    std::optional<double> bytesA;      ///< A's bytes_quantized
    std::optional<double> bytesB;      ///< B's bytes_quantized
};

/// The layers of reports `a` and `b` paired by name (layers without SQNR are left out).
std::vector<LayerPair> pairLayers(const nlohmann::json& a, const nlohmann::json& b);

/// Bar chart: per layer, A local, A accumulated, B local, B accumulated SQNR (dB).
class SideBySideChart : public ChartBase {
    Q_OBJECT

public:
    /// Creates an empty chart ("No data").
    explicit SideBySideChart(QWidget* parent = nullptr);
    /// Shows runs `a` and `b` named `labelA` and `labelB`. Never throws.
    void setRuns(const nlohmann::json& a, const QString& labelA, const nlohmann::json& b,
                 const QString& labelB);
    /// The bar series (sets: A local, A accumulated, B local, B accumulated); nullptr without data.
    QBarSeries* barSeries() const { return m_series; }
    /// Layer names on the category axis.
    QStringList layerNames() const { return m_names; }

private:
    QBarSeries* m_series = nullptr;
    QStringList m_names;
    std::vector<LayerPair> m_pairs;
};

/// Table model of the per-layer difference of two runs (see the file comment).
class SideBySideModel : public QAbstractTableModel {
    Q_OBJECT

public:
    /// Column order.
    enum Column {
        Layer,      ///< layer name
        SqnrA,      ///< A's accumulated SQNR, dB
        SqnrB,      ///< B's accumulated SQNR, dB
        Difference, ///< SqnrB - SqnrA, dB
        BytesA,     ///< A's bytes_quantized
        BytesB,     ///< B's bytes_quantized
        ColumnCount
    };
    /// The role that returns the raw number (double; +inf for exact SQNR) or the layer name.
    static constexpr int RawRole = Qt::UserRole;

    explicit SideBySideModel(QObject* parent = nullptr);
    /// Shows the layers of runs `a` and `b`.
    void setRuns(const nlohmann::json& a, const nlohmann::json& b);

    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    int columnCount(const QModelIndex& parent = QModelIndex()) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    QVariant rawValue(const LayerPair& pair, int column) const;

    std::vector<LayerPair> m_pairs;
};

/// The "Side by side" tab: a heading naming runs A and B, the chart and the difference table.
class SideBySideView : public QWidget {
    Q_OBJECT

public:
    explicit SideBySideView(QWidget* parent = nullptr);
    /// Shows runs `a` and `b` named `labelA` and `labelB`.
    void setRuns(const nlohmann::json& a, const QString& labelA, const nlohmann::json& b,
                 const QString& labelB);
    /// Shows nothing ("select two runs in History").
    void clear();

    /// The chart.
    SideBySideChart* chart() const { return m_chart; }
    /// The difference table's model.
    SideBySideModel* model() const { return m_model; }
    /// The difference table.
    QTableView* table() const { return m_table; }
    /// The heading ("A = static-int8 (07:12:31) · B = w4-int4 (07:13:02)").
    QString headingText() const;

private:
    QLabel* m_heading;
    SideBySideChart* m_chart;
    SideBySideModel* m_model;
    QTableView* m_table;
};

} // namespace bitlens::widgets
