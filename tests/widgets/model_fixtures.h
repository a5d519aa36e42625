#pragma once
// Small models and data written by the GUI tests themselves (no zoo build needed).

#include "io/dataset.h"
#include "io/onnx.h"
#include "ir/graph.h"

#include <ATen/ATen.h>

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

} // namespace bitlens::testing
