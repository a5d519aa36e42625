#include "chart_export.h"

#include "io/file_util.h"

#include <QChart>
#include <QChartView>
#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>
#include <QGraphicsLayout>
#include <QImage>
#include <QPainter>
#include <QGraphicsScene>
#include <QSaveFile>
#include <QSvgGenerator>

namespace bitlens::widgets {

namespace {

/// A view that was never shown has not sized and laid out its chart: the chart gets the view's
/// size here and its layout runs now, so the file shows what a user would see.
QRectF settleLayout(QChartView* view)
{
    view->ensurePolished();
    // Qt Charts removes the graphics items of replaced axes and series with deleteLater; without
    // an event loop turn (a test, a batch export) they would still be drawn.
    QCoreApplication::sendPostedEvents(nullptr, QEvent::DeferredDelete);
    QChart* chart = view->chart();
    if (!chart)
        return {};
    if (!view->isVisible() || chart->size().toSize() != view->size()) {
        chart->resize(view->size());
        if (chart->layout())
            chart->layout()->activate();
        QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
    }
    return chart->geometry();
}

/// Draws the chart (with its overlay items, which are its children in the scene) into `target`.
void renderChart(QChartView* view, QPainter& painter, const QRectF& source)
{
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setRenderHint(QPainter::TextAntialiasing);
    view->scene()->render(&painter, QRectF(QPointF(0, 0), view->size()), source,
                          Qt::IgnoreAspectRatio);
}

bool exportPng(QChartView* view, const QRectF& source, const QString& path)
{
    const qreal dpr = view->devicePixelRatioF();
    QImage image(view->size() * dpr, QImage::Format_ARGB32_Premultiplied);
    image.setDevicePixelRatio(dpr);
    image.fill(Qt::white);
    {
        QPainter painter(&image);
        renderChart(view, painter, source);
    }
    // QImage::save writes in place; a temp file plus rename leaves nothing half-written.
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly))
        return false;
    if (!image.save(&file, "PNG"))
        return false;
    return file.commit();
}

bool exportSvg(QChartView* view, const QRectF& source, const QString& path)
{
    const QString tmpPath = path + QStringLiteral(".part");
    {
        QSvgGenerator generator;
        generator.setFileName(tmpPath);
        generator.setSize(view->size());
        generator.setViewBox(QRect(QPoint(0, 0), view->size()));
        generator.setTitle(view->chart() ? view->chart()->title() : QString());
        generator.setDescription(QStringLiteral("Exported by BitLens"));
        QPainter painter;
        if (!painter.begin(&generator)) {
            QFile::remove(tmpPath);
            return false;
        }
        renderChart(view, painter, source);
        painter.end();
    }
    if (QFileInfo(tmpPath).size() <= 0) {
        QFile::remove(tmpPath);
        return false;
    }
    QFile::remove(path);
    if (!QFile::rename(tmpPath, path)) {
        QFile::remove(tmpPath);
        return false;
    }
    return true;
}

} // namespace

bool exportChart(QChartView* view, const QString& path)
{
    if (!view || view->size().isEmpty() || path.isEmpty())
        return false;
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix != QLatin1String("png") && suffix != QLatin1String("svg"))
        return false;
    // A device, FIFO or missing folder is refused; a symbolic link is written at its
    // destination (io::checkWritable), so the rename below never replaces the link.
    auto target = io::checkWritable(path.toStdString());
    if (!target)
        return false;
    const QString file = QString::fromStdString(*target);
    const QRectF source = settleLayout(view);
    if (source.isEmpty() || !view->scene())
        return false;
    return suffix == QLatin1String("png") ? exportPng(view, source, file)
                                          : exportSvg(view, source, file);
}

} // namespace bitlens::widgets
