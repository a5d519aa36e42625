#pragma once
// The layer table: one row per layer of the open model (name, op, input shapes, output shape,
// parameters, bytes). Numbers are right-aligned; SortRole gives raw values for sorting.

#include "model/model.h"

#include <QAbstractTableModel>
#include <QString>

#include <cstdint>
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
    enum Column { Name, Op, InputShapes, OutputShape, Params, Bytes, ColumnCount };
    /// Raw value for sorting: numbers as qint64, text as QString, shapes by element count.
    static constexpr int SortRole = Qt::UserRole + 1;

    explicit LayerTableModel(QObject* parent = nullptr);

    /// Shows the layers of `summary` (copied); replaces what was shown.
    void setSummary(const ModelSummary& summary);
    /// Shows no layers.
    void clear();
    /// The layer in `row`, or nullptr when out of range.
    const LayerSummary* layer(int row) const;

    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    int columnCount(const QModelIndex& parent = QModelIndex()) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    std::vector<LayerSummary> m_layers;
};

} // namespace bitlens::widgets
