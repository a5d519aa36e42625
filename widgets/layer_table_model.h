#pragma once
// The layer table: one row per layer of the open model (name, op, input shapes, output shape,
// parameters, bytes), the scheme each layer runs with (overrides marked), and after a run the
// report's per-layer numbers: SQNR local and accumulated, bytes quantized, kernel. The
// accumulated SQNR cell is a heat cell: red below 15 dB, amber to 30 dB, green above (an exact
// match is green). Numbers are right-aligned; SortRole gives raw values for sorting.

#include "model/model.h"

#include <nlohmann/json.hpp>

#include <QAbstractTableModel>
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
    std::map<std::string, Metrics> m_metrics;
    QMap<QString, QString> m_overrides;
};

} // namespace bitlens::widgets
