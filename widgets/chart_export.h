#pragma once
// Export of a chart view to an image file: PNG (raster, the view's size) or SVG (vector).

#include <QString>

QT_BEGIN_NAMESPACE
class QChartView;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Writes what `view` shows to `path`; the format follows the suffix (".png" or ".svg", any
/// case). PNG is the view's size in device-independent pixels; SVG is the same size, vector.
/// Returns false (and leaves no file) for a null view, an empty view, an unknown suffix or a
/// write failure.
bool exportChart(QChartView* view, const QString& path);

} // namespace bitlens::widgets
