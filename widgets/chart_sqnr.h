#pragma once
// Per-layer SQNR: local (this layer alone) next to accumulated (everything up to here), layers
// in graph order. An exact layer (SQNR null: infinite) is a bar clipped at the top, labelled
// "exact". Clicking a bar selects its layer.

#include "chart_base.h"

#include <nlohmann/json.hpp>

#include <QStringList>

#include <optional>
#include <vector>

QT_BEGIN_NAMESPACE
class QBarSeries;
class QBarSet;
class QGraphicsSimpleTextItem;
class QLineSeries;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Bar chart of report.json layers[].sqnr_db and sqnr_db_accumulated.
class SqnrChart : public ChartBase {
    Q_OBJECT

public:
    /// Creates an empty chart ("No data").
    explicit SqnrChart(QWidget* parent = nullptr);

    /// Shows the layers of a report; "No data" when it has none. Never throws.
    void setReport(const nlohmann::json& report);
    /// Layer names in graph order, as on the category axis.
    QStringList layerNames() const { return m_names; }
    /// The selected layer, empty when none.
    QString selectedLayer() const { return m_selected; }
    /// The bar series (sets: local, accumulated); nullptr without data.
    QBarSeries* barSeries() const { return m_series; }
    /// Shows or hides the reference lines at 20 and 40 dB (shown by default).
    void setReferenceLinesVisible(bool visible);
    /// The height (dB) at which infinite (exact) SQNR bars are clipped.
    double exactBarHeightDb() const { return m_exactHeight; }

public Q_SLOTS:
    /// Highlights the bars of layer `name`; an unknown name clears the highlight.
    void setSelectedLayer(const QString& name);
    /// What a click on bar `index` (either set) does: selects the layer, emits layerClicked.
    void onBarClicked(int index);

Q_SIGNALS:
    /// The user clicked a bar of layer `name`.
    void layerClicked(const QString& name);

protected:
    void layoutOverlays() override;

private:
    void build(const nlohmann::json& report);
    void onBarHovered(bool status, int index, QBarSet* set);

    struct ExactLabel {
        QGraphicsSimpleTextItem* item;
        int layer;
        int set;
    };
    QStringList m_names;
    std::vector<std::optional<double>> m_local;
    std::vector<std::optional<double>> m_accumulated;
    std::vector<QString> m_details;
    std::vector<ExactLabel> m_exactLabels;
    QBarSeries* m_series = nullptr;
    std::vector<QLineSeries*> m_referenceLines;
    QString m_selected;
    double m_exactHeight = 0.0;
    bool m_referenceVisible = true;
};

} // namespace bitlens::widgets
