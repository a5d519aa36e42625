#pragma once
// Small models and data written by the GUI tests themselves (no zoo build needed).

#include "io/dataset.h"
#include "io/onnx.h"
#include "ir/graph.h"

#include <ATen/ATen.h>

#include <QDir>
#include <QFile>
#include <QString>

#include <cstdint>
#include <string>

namespace bitlens::testing {

/// Writes a 4-layer CNN for [N, 1, 8, 8] images to `path`:
///   conv1 (Conv, `hidden` 3x3 filters with bias) -> relu1 -> flatten -> fc (Gemm, 10 outputs).
/// Parameters: conv1 = 10 * hidden, fc = 10 * 36 * hidden + 10 (hidden 4: 40 + 1450 = 1490).
/// Returns an empty string on success, else the error.
inline std::string writeSmallCnn(const QString& path, std::int64_t hidden = 4,
                                 const std::string& graphName = "small-cnn")
{
    at::manual_seed(7);
    ir::GraphBuilder builder(graphName);
    const std::string x = builder.input("image", {-1, 1, 8, 8});
    const std::string conv = builder.conv2d("conv1", x, at::randn({hidden, 1, 3, 3}),
                                            at::randn({hidden}));
    const std::string relu = builder.unary("relu1", ir::OpKind::Relu, conv);
    const std::string flat = builder.flatten("flatten", relu);
    const std::string fc = builder.linear("fc", flat, at::randn({10, hidden * 36}),
                                          at::randn({10}));
    builder.output(fc);
    auto graph = builder.build();
    if (!graph)
        return graph.error().describe();
    auto written = io::writeOnnxFile(graph.value(), path.toStdString());
    return written ? std::string() : written.error().describe();
}

/// Writes `samples` random [1, 8, 8] images as a .npy file; empty string on success.
inline std::string writeSmallNpy(const QString& path, std::int64_t samples = 5)
{
    auto written = io::writeNpy(at::rand({samples, 1, 8, 8}), path.toStdString());
    return written ? std::string() : written.error().describe();
}

/// Writes `samples` random labelled 8x8 images (classes 0..9) as an IDX pair into `dir`:
/// small-images-idx3-ubyte and small-labels-idx1-ubyte (the loader finds the labels by name).
/// Returns the images file's path, or an empty string when a file could not be written.
inline QString writeSmallLabelledIdx(const QString& dir, std::int64_t samples = 200)
{
    at::manual_seed(11);
    const auto bigEndian = [](QByteArray& out, std::uint32_t value) {
        for (int shift = 24; shift >= 0; shift -= 8)
            out.append(static_cast<char>((value >> shift) & 0xff));
    };
    QByteArray images;
    bigEndian(images, 0x00000803);
    bigEndian(images, static_cast<std::uint32_t>(samples));
    bigEndian(images, 8);
    bigEndian(images, 8);
    const at::Tensor pixels = at::randint(0, 256, {samples * 64}, at::kByte).contiguous();
    images.append(reinterpret_cast<const char*>(pixels.data_ptr<std::uint8_t>()),
                  static_cast<qsizetype>(samples * 64));
    QByteArray labels;
    bigEndian(labels, 0x00000801);
    bigEndian(labels, static_cast<std::uint32_t>(samples));
    const at::Tensor classes = at::randint(0, 10, {samples}, at::kByte).contiguous();
    labels.append(reinterpret_cast<const char*>(classes.data_ptr<std::uint8_t>()),
                  static_cast<qsizetype>(samples));
    const QString imagesPath = QDir(dir).filePath(QStringLiteral("small-images-idx3-ubyte"));
    QFile imagesFile(imagesPath);
    QFile labelsFile(QDir(dir).filePath(QStringLiteral("small-labels-idx1-ubyte")));
    if (!imagesFile.open(QIODevice::WriteOnly) || imagesFile.write(images) != images.size() ||
        !labelsFile.open(QIODevice::WriteOnly) || labelsFile.write(labels) != labels.size())
        return {};
    return imagesPath;
}

} // namespace bitlens::testing
