#pragma once
// The layer table: one row per layer of the open model (name, op, input shapes, output shape,
// parameters, bytes), the scheme each layer runs with (overrides marked), and after a run the
// report's per-layer numbers: SQNR local and accumulated, bytes quantized, kernel. The
// accumulated SQNR cell is a heat cell: red below 15 dB, amber to 30 dB, green above (an exact
// match is green). Numbers are right-aligned; SortRole gives raw values for sorting.

#include "model/model.h"

#include <nlohmann/json.hpp>

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <QColor>
#include <QMap>
#include <QString>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bitlens::widgets {

/// "1,234,567": a count with thousands separators, independent of the system locale.
QString formatCount(std::int64_t count);
/// "[1, 28, 28]" as a QString (core's formatShape).
QString shapeText(const std::vector<std::int64_t>& shape);
/// "5.8 KiB" as a QString (core's formatBytes).
QString bytesText(std::int64_t bytes);

/// Qt item model over ModelSummary::layers.
class LayerTableModel : public QAbstractTableModel {
    Q_OBJECT

public:
    /// Column order of the table.
    enum Column {
        Name,
        Op,
        InputShapes,
        OutputShape,
        Params,
        Bytes,
        Scheme,           ///< override ("float32", a scheme string) or the report's types
        SqnrLocal,        ///< dB, only this layer quantized
        SqnrAccumulated,  ///< dB, everything up to here quantized; the heat cell
        BytesQuantized,   ///< weight bytes as the quantized model stores them
        Kernel,           ///< what ran the layer when throughput was measured
        ColumnCount
    };
    /// Raw value for sorting: numbers as qint64, text as QString, shapes by element count.
    static constexpr int SortRole = Qt::UserRole + 1;

    /// SQNR heat bands (dB): below kSqnrRed is red, below kSqnrGreen amber, else green.
    static constexpr double kSqnrRed = 15.0;
    static constexpr double kSqnrGreen = 30.0;
    /// The heat colour of an accumulated SQNR (nullopt = exact match, green).
    static QColor heatColor(std::optional<double> sqnrDb);
    /// The heat legend shown in tooltips.
    static QString heatLegend();

    explicit LayerTableModel(QObject* parent = nullptr);

    /// Shows the layers of `summary` (copied); replaces what was shown.
    void setSummary(const ModelSummary& summary);
    /// Shows no layers.
    void clear();
    /// The layer in `row`, or nullptr when out of range.
    const LayerSummary* layer(int row) const;
    /// The row of the layer called `name`, or -1.
    int rowOf(const QString& name) const;
    /// True for a layer BitLens quantizes, from its summary: Conv, Gemm, MatMul, LSTM or GRU
    /// reading constant weights (core's quant::isQuantizable, which needs the graph).
    static bool isQuantizable(const LayerSummary& layer);
    /// Layers for which isQuantizable holds.
    int quantizableCount() const { return m_quantizable; }

    /// Shows the per-layer numbers of a report.json (layers matched by name; layers the report
    /// does not list stay blank). An empty or null JSON clears them.
    void setReport(const nlohmann::json& report);
    /// True when `row`'s layer has numbers from the report on screen.
    bool hasMetrics(int row) const;
    /// Shows per-layer overrides: layer name -> "float" or a scheme string.
    void setOverrides(const QMap<QString, QString>& overrides);
    /// The overrides shown.
    const QMap<QString, QString>& overrides() const { return m_overrides; }

    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    int columnCount(const QModelIndex& parent = QModelIndex()) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    /// One layer's numbers from report.json; SQNR nullopt means exact (infinite).
    struct Metrics {
        std::optional<double> sqnrLocal;
        std::optional<double> sqnrAccumulated;
        std::int64_t bytesQuantized = 0;
        std::string kernel;
        std::string weightType;
        std::string actType;
        std::string config;
    };
    const Metrics* metrics(int row) const;
    void emitMetricColumnsChanged();

    std::vector<LayerSummary> m_layers;
    int m_quantizable = 0;
    std::map<std::string, Metrics> m_metrics;
    QMap<QString, QString> m_overrides;
};

/// The layer table's sorting proxy. By default it shows only the quantizable layers (what
/// LayerTableModel::isQuantizable says): a language model's graph is mostly helper nodes
/// (Gather, Slice, Cast, Shape, ... ~1000 of them in SmolLM2-135M beside 211 projections).
/// setShowAllNodes(true) shows every node. A model without a quantizable layer shows all.
class LayerFilterProxy : public QSortFilterProxyModel {
    Q_OBJECT

public:
    explicit LayerFilterProxy(QObject* parent = nullptr);

    /// True when every node is shown, false when only quantizable layers are (the default).
    bool showAllNodes() const { return m_showAll; }
    void setShowAllNodes(bool all);
    /// Rows of the source model (all nodes) and how many of them are quantizable.
    int nodeCount() const;
    int quantizableCount() const;

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

private:
    bool m_showAll = false;
};

} // namespace bitlens::widgets
