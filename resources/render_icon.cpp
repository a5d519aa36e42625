// bitlens_render_icon SVG OUTDIR SIZE...: renders the application icon SVG to OUTDIR/SIZE.png
// for each SIZE (square, transparent background) with Qt's own SVG renderer, the one the app
// links anyway, so the build needs no extra tool. Exit 1 when the SVG does not parse or a PNG
// cannot be written.

#include <QImage>
#include <QPainter>
#include <QString>
#include <QSvgRenderer>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv)
{
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s SVG OUTDIR SIZE...\n", argv[0]);
        return 2;
    }
    QSvgRenderer svg(QString::fromLocal8Bit(argv[1]));
    if (!svg.isValid()) {
        std::fprintf(stderr, "error: %s: not a valid SVG\n", argv[1]);
        return 1;
    }
    const QString outDir = QString::fromLocal8Bit(argv[2]);
    for (int i = 3; i < argc; ++i) {
        const int size = std::atoi(argv[i]);
        if (size <= 0 || size > 4096) {
            std::fprintf(stderr, "error: bad size '%s'\n", argv[i]);
            return 2;
        }
        QImage image(size, size, QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::transparent);
        {
            QPainter painter(&image);
            painter.setRenderHint(QPainter::Antialiasing);
            painter.setRenderHint(QPainter::SmoothPixmapTransform);
            svg.render(&painter, QRectF(0, 0, size, size));
        }
        const QString out = QStringLiteral("%1/%2.png").arg(outDir).arg(size);
        if (!image.save(out, "PNG")) {
            std::fprintf(stderr, "error: %s: cannot write\n", qPrintable(out));
            return 1;
        }
    }
    return 0;
}
