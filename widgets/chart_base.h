#pragma once
// Shared setup of every BitLens chart: antialiasing, theme and readable fonts, a "No data"
// message instead of an empty plot, hover tooltips, text items that follow the plot area, and a
// context menu that exports the chart as PNG or SVG.

#include <QChartView>
#include <QString>

#include <vector>

QT_BEGIN_NAMESPACE
class QAbstractAxis;
class QAbstractSeries;
class QBarSeries;
class QBarSet;
class QGraphicsItem;
class QGraphicsSimpleTextItem;
class QGraphicsLineItem;
class QLogValueAxis;
class QBarCategoryAxis;
class QScrollBar;
class QScatterSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Base of the report charts: a QChartView with the house look and common behaviour.
class ChartBase : public QChartView {
    Q_OBJECT

public:
    /// Creates an empty chart showing "No data".
    explicit ChartBase(QWidget* parent = nullptr);
    ~ChartBase() override;

    /// True when the chart shows data, false when it shows a message ("No data ...") instead.
    bool hasData() const { return m_hasData; }
    /// The message shown instead of data ("No data" or "No data: <reason>"); empty with data.
    QString message() const { return m_message; }
    /// The text of the most recent hover tooltip; empty after the pointer left an item.
    QString lastToolTip() const { return m_lastToolTip; }
    /// Writes the chart as it is shown to `path`: ".png" or ".svg" (see exportChart).
    bool exportTo(const QString& path);

    QSize sizeHint() const override;

    /// Per-layer bars (addLayerBars): how many layers the chart has, how many show at once and
    /// the first shown. With more layers than fit at a readable width the chart scrolls (wheel,
    /// the scroll bar under it) and zooms (Ctrl+wheel, zoomLayers()).
    int layerCount() const { return static_cast<int>(m_layerLabels.size()); }
    int visibleLayerCount() const { return m_visibleLayers; }
    int firstVisibleLayer() const { return m_firstLayer; }
    /// True when not every layer fits: the scroll bar shows.
    bool isScrollable() const { return m_visibleLayers < layerCount(); }
    /// The width in pixels of one bar (one set of one layer) as drawn now.
    double barPixelWidth() const;
    /// The short labels on the layer axis ("17.q"), in graph order.
    QStringList layerLabels() const { return m_layerLabels; }
    /// Shows `count` layers at once (clamped so bars stay at least a few pixels wide).
    void zoomLayers(int count);
    /// Scrolls so that layer `first` is the first shown.
    void scrollToLayer(int first);
    /// Scrolls (when needed) so that layer `index` is shown, about in the middle.
    void ensureLayerVisible(int index);
    /// True when the value axis is logarithmic (one bar dwarfs the rest).
    bool logScale() const { return m_logScale; }

protected:
    /// Removes every series, axis and overlay text; the title stays.
    void clearChart();
    /// Clears the chart and shows `text` in the middle of it ("No data" for a missing report).
    void showMessage(const QString& text);
    /// Marks the chart as showing data and hides the message.
    void markHasData();
    /// Shows `text` as a tooltip at the pointer and remembers it for tests.
    void showToolTip(const QString& text);
    /// Hides the tooltip.
    void hideToolTip();
    /// Hovering a point of `series` shows "<b>name</b>: x" (x to `digits` significant
    /// digits); leaving it hides the tooltip.
    void showXOnHover(QScatterSeries* series, const QString& name, int digits = 6);
    /// A value axis with the house fonts and `title` (which names the unit), attached to the
    /// chart at `alignment`.
    QValueAxis* addValueAxis(const QString& title, Qt::Alignment alignment);
    /// Grouped bars, one category per layer (graph order) on a "Layer (graph order)" axis, and
    /// a value axis titled `valueTitle` (with its unit) returned through `valueAxis`; the sets
    /// become the series' bar sets in order. Returns the series, owned by the chart.
    /// The axis shows short labels (shortLayerLabels) and a window of the layers when they do
    /// not all fit. With `logAxis` the value axis is a base-10 log axis returned there (and
    /// *valueAxis is nullptr).
    QBarSeries* addLayerBars(const QStringList& layers, const std::vector<QBarSet*>& sets,
                             const QString& valueTitle, QValueAxis** valueAxis,
                             QLogValueAxis** logAxis = nullptr);
    /// Places the layer window after a resize or zoom; layoutOverlays() follows.
    void updateLayerWindow();
    /// Applies the house fonts to `axis` and sets its title.
    void styleAxis(QAbstractAxis* axis, const QString& title) const;
    /// A text item drawn over the chart (so it is exported too); removed by clearChart().
    /// A thin grey line owned like the overlay texts (hidden until positioned).
    QGraphicsLineItem* addOverlayLine();
    QGraphicsSimpleTextItem* addOverlayText(const QString& text);
    /// Called whenever the plot area moves or resizes: place overlay text there.
    virtual void layoutOverlays() {}
    /// Shrinks the chart title's and the layer axis title's fonts until they fit (resize,
    /// new title).
    void fitTitles();
    /// Sets `axis` to [lo, hi] with ticks at round multiples (1, 2, 2.5 or 5 × 10^k) so that
    /// about `targetTicks` labels show, with as many decimals as the step needs.
    static void setRoundTicks(QValueAxis* axis, double lo, double hi, int targetTicks = 8);
    /// Sets the chart title in the house font.
    void setChartTitle(const QString& title);

    void contextMenuEvent(QContextMenuEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;

private:
    void placeMessage();
    /// layoutOverlays() now and once more after the chart's own deferred layout.
    void scheduleOverlayLayout();
    bool m_overlayLayoutPending = false;
    void exportWithDialog(const QString& suffix);

    QGraphicsSimpleTextItem* m_messageItem = nullptr;
    QBarCategoryAxis* m_layerAxis = nullptr;
    QBarSeries* m_layerSeries = nullptr;
    QScrollBar* m_layerScroll = nullptr;
    QStringList m_layerLabels;
    int m_visibleLayers = 0;
    int m_firstLayer = 0;
    int m_zoomLayers = 0;  ///< 0: as many as fit with readable labels
    int m_pendingCenter = -1;  ///< the selected layer kept centred until the user scrolls
    bool m_inLayerWindow = false;
    bool m_logScale = false;
    std::vector<QGraphicsItem*> m_overlays;
    QString m_message;
    QString m_lastToolTip;
    bool m_hasData = false;
};

/// A colour-blind-safe palette (Okabe-Ito) used for series across all charts.
QColor chartColor(int index);

} // namespace bitlens::widgets
