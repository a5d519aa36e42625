#pragma once
// The panels beside the layer table: the open model, the selected layer (with its weight
// tensors) and the open data set. Each shows plain, selectable text; none computes anything.

#include "model_loader.h"

#include <QGroupBox>

#include <vector>

class QFormLayout;
class QLabel;
class QTreeWidget;

namespace bitlens::widgets {

/// A titled group of "key: value" rows whose values are selectable, word-wrapped labels.
class FormPanel : public QGroupBox {
    Q_OBJECT

public:
    explicit FormPanel(const QString& title, QWidget* parent = nullptr);
    /// The text shown for the row called `key` (empty when the row is hidden).
    QString value(const QString& key) const;

protected:
    /// Adds a row; `key` is its label text and its lookup name.
    void addRow(const QString& key);
    /// Sets a row's text; an empty text hides the row.
    void setValue(const QString& key, const QString& text, const QString& toolTip = {});
    /// Shows `text` instead of the rows (empty text shows the rows).
    void setPlaceholder(const QString& text);

    QFormLayout* m_form;

private:
    QLabel* m_emptyHint;
    QList<QPair<QString, QLabel*>> m_rows;
};

/// The open model: name, format, file, inputs, outputs, layers, parameters, size.
class ModelInfoPanel : public FormPanel {
    Q_OBJECT

public:
    explicit ModelInfoPanel(QWidget* parent = nullptr);
    /// Shows `opened`; nullptr shows "No model open".
    void showModel(const OpenedModel* opened);
};

/// The selected layer: name, op, shapes, parameters, bytes and the weight tensors it reads.
class LayerDetailsPanel : public FormPanel {
    Q_OBJECT

public:
    explicit LayerDetailsPanel(QWidget* parent = nullptr);
    /// Shows `layer` with its `weights`; nullptr shows "Select a layer".
    void showLayer(const LayerSummary* layer, const std::vector<WeightInfo>& weights);
    /// The weight list (one row per tensor: name, dtype, shape, size).
    QTreeWidget* weightList() const { return m_weights; }

private:
    QTreeWidget* m_weights;
};

/// The open data set: path, kind, samples, sample shape, classes.
class DataSummaryPanel : public FormPanel {
    Q_OBJECT

public:
    explicit DataSummaryPanel(QWidget* parent = nullptr);
    /// Shows `data`; nullptr shows how to open data, or, with `zooModel` set, that runs use that
    /// zoo model's own calibration and evaluation data.
    void showData(const DataInfo* info, const QString& zooModel = QString());
};

} // namespace bitlens::widgets
