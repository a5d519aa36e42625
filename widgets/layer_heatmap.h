#pragma once
// Block x projection heatmap of a per-layer figure (SQNR local or accumulated, bytes, latency)
// for transformer-shaped layer names (layer_names.h): rows = blocks, columns = projections, each
// cell coloured on a colour bar with its unit and its value printed when it fits. Layers outside
// the grid (embeddings, lm_head) are listed beside it. Clicking a cell or a listed layer selects
// it (layerClicked, as the SQNR chart); the tooltip names the full layer and its value.

#include "layer_names.h"

#include <nlohmann/json.hpp>

#include <QString>
#include <QStringList>
#include <QWidget>

#include <optional>
#include <vector>

namespace bitlens::widgets {

/// Painted heatmap of one per-layer figure of a report.
class LayerHeatmap : public QWidget {
    Q_OBJECT

public:
    /// The figures it can show; each reads report.json layers[] (latency: throughput.layers_ms).
    enum class Metric { SqnrLocal, SqnrAccumulated, BytesQuantized, BytesFloat, LatencyQuantized,
                        LatencyFloat };

    explicit LayerHeatmap(QWidget* parent = nullptr);

    /// Shows the layers of a report; a message instead when the names form no grid. Never throws.
    void setReport(const nlohmann::json& report);
    /// Chooses the figure shown.
    void setMetric(Metric metric);
    Metric metric() const { return m_metric; }
    /// The metrics this report has values for, and their display names.
    static QString metricName(Metric metric);
    static std::vector<Metric> allMetrics();

    /// True when a grid is shown (at least 2 blocks x 2 projections).
    bool hasGrid() const { return m_grid.valid(); }
    /// The message shown instead of a grid; empty with one.
    QString message() const { return m_message; }
    /// Rows (blocks) and columns (projection keys) of the grid.
    int rowCount() const { return static_cast<int>(m_grid.blocks.size()); }
    int columnCount() const { return static_cast<int>(m_grid.columns.size()); }
    QStringList columnKeys() const { return m_grid.columns; }
    int blockAt(int row) const { return m_grid.blocks.at(static_cast<std::size_t>(row)); }
    /// The layer in a cell (empty for a hole) and the layers listed outside the grid.
    QString layerAt(int row, int column) const;
    QStringList outsideLayers() const;
    /// The text printed in a cell ("38.2"; empty when it does not fit or has no value).
    QString cellText(int row, int column) const;
    /// Where a cell / an outside entry is drawn, in widget coordinates.
    QRect cellRect(int row, int column) const;
    QRect outsideRect(int index) const;
    /// The layer under `pos`, empty when none.
    QString layerAtPoint(const QPoint& pos) const;
    /// The tooltip for `pos`: full layer name and value; empty off the cells.
    QString toolTipAt(const QPoint& pos) const;
    /// The chart title and the colour bar's caption (with the unit).
    QString title() const { return m_title; }
    QString colorBarTitle() const;
    /// The selected layer, empty when none.
    QString selectedLayer() const { return m_selected; }

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

public Q_SLOTS:
    /// Outlines layer `name`; an unknown name clears the outline.
    void setSelectedLayer(const QString& name);

Q_SIGNALS:
    /// The user clicked the cell or the listed entry of layer `name`.
    void layerClicked(const QString& name);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    void build();
    void layout();
    std::optional<double> value(int layer) const;
    QString valueText(int layer, bool withUnit) const;
    QColor colorFor(int layer) const;

    nlohmann::json m_report;
    Metric m_metric = Metric::SqnrLocal;
    QStringList m_names;
    // Per layer: local, accumulated SQNR (nullopt + exact flag), bytes, ms.
    std::vector<std::optional<double>> m_values;
    std::vector<bool> m_exact;
    LayerGrid m_grid;
    QString m_message;
    QString m_title;
    QString m_unit;
    double m_divisor = 1.0;
    double m_lo = 0.0;
    double m_hi = 1.0;
    bool m_higherIsBetter = true;
    bool m_logColor = false;
    QString m_selected;
    // Geometry, from layout().
    QRect m_gridRect;
    int m_cellW = 0;
    int m_cellH = 0;
    QRect m_barRect;
    QRect m_outsideRect;
    int m_outsideRowH = 18;
};

} // namespace bitlens::widgets
