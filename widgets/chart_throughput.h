#pragma once
// Measured throughput: float vs quantized samples per second on one batch, with the kernel that
// ran each layer (a real LibTorch kernel or "simulated ...").

#include "chart_base.h"

#include <nlohmann/json.hpp>

#include <QStringList>

QT_BEGIN_NAMESPACE
class QBarSeries;
class QGraphicsSimpleTextItem;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// Bar chart of report.json throughput.float_samples_per_s / quantized_samples_per_s; for a
/// language model (perplexity, KL divergence) the samples are windows of text and say so.
class ThroughputChart : public ChartBase {
    Q_OBJECT

public:
    /// Creates an empty chart ("No data").
    explicit ThroughputChart(QWidget* parent = nullptr);

    /// Shows a report's throughput; "No data" without one. Never throws.
    void setReport(const nlohmann::json& report);
    /// The bar series (sets: float, quantized; one value each); nullptr without data.
    QBarSeries* barSeries() const { return m_series; }
    /// The kernel lines shown under the chart ("at::_int_mm (...): fc1, logits").
    QStringList kernelLines() const { return m_kernelLines; }
    /// Layers that ran on a real kernel / all layers in throughput.kernels.
    int realKernelCount() const { return m_realKernels; }
    /// Layers listed in throughput.kernels.
    int kernelLayerCount() const { return m_kernelLayers; }

protected:
    void layoutOverlays() override;

private:
    void build(const nlohmann::json& report);

    QBarSeries* m_series = nullptr;
    QGraphicsSimpleTextItem* m_kernelText = nullptr;
    QStringList m_kernelLines;
    QString m_unit;  ///< "samples/s", or "windows/s" for a language model
    double m_floatRate = 0.0;
    double m_quantizedRate = 0.0;
    int m_realKernels = 0;
    int m_kernelLayers = 0;
};

/// True when `kernel` (a throughput.kernels value) names a real low-bit kernel rather than
/// "simulated (fake-quant, float32)" or a layer kept in float.
bool isRealKernel(const QString& kernel);

/// How many of a report's layers ran on a real low-bit kernel: the one count the summary
/// line, the Throughput tab and the Compare table show.
struct KernelCount {
    int real = 0;
    int layers = 0;
};
/// From throughput.kernels, a layer kept in float32 (weight_type) never counting as real; from
/// the layers' "simulated" flags for a report that timed nothing.
KernelCount kernelCount(const nlohmann::json& report);

} // namespace bitlens::widgets
