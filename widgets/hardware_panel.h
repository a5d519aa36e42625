#pragma once
// Which low-bit formats this machine runs natively: CPU feature flags from cpuid (core's
// analysis::probeHardware, the source the kernels dispatch on), which of them the own kernels
// use at the ISA level in force, what BitLens runs for each format there, the CUDA device and
// its tensor-core capabilities, and a measured (never quoted) matmul rate for float32, int8 and
// bf16 (analysis::measureMatmulRates, on a worker thread). The panel only shows them.

#include "analysis/hardware.h"

#include <QString>
#include <QStringList>
#include <QWidget>

#include <vector>

QT_BEGIN_NAMESPACE
class QLabel;
class QPushButton;
class QTableWidget;
QT_END_NAMESPACE

namespace bitlens::widgets {

/// One measured matmul rate (analysis::MatmulRate in Qt strings).
struct MatmulRate {
    QString name;        ///< "float32 (at::matmul)", "int8 -> int32 (at::_int_mm)", ...
    double ratePerSec = 0.0;  ///< GFLOP/s (float types) or GOP/s (int8), median of 3 runs
    QString unit;        ///< "GFLOP/s" or "GOP/s"
    QString error;       ///< why it could not run, empty on success
};

/// The hardware panel: a table of CPU flags, per-format support, the GPU and measured rates.
class HardwarePanel : public QWidget {
    Q_OBJECT

public:
    /// The flags the panel reports, in display order (kernels::cpuFlags(), Linux's names).
    static QStringList knownFlags();
    /// sm version (e.g. 90) from a device name "... sm_90)" (analysis::parseSmVersion), or 0.
    static int parseSmVersion(const QString& deviceName);

    /// Probes the CPU (cpuid, through core) and the CUDA device and fills the tables.
    explicit HardwarePanel(QWidget* parent = nullptr);
    ~HardwarePanel() override;

    /// Known flags found on this CPU (cpuid).
    QStringList cpuFlags() const { return m_flags; }
    /// What the panel shows, as core probed it.
    const analysis::HardwareFacts& facts() const { return m_facts; }
    /// The GPU line: "No CUDA device" or the device name.
    QString cudaText() const { return m_cudaText; }
    /// The table of formats (rows: int8, bf16, fp16, fp8, fp4; then GPU rows).
    QTableWidget* formatTable() const { return m_formats; }
    /// The line naming the ISA level the own kernels run at, and their rows.
    QLabel* isaLabel() const { return m_isaLabel; }
    /// The table of flags (flag, present, used by the own kernels now, meaning).
    QTableWidget* flagTable() const { return m_flagTable; }
    /// The measured matmul rates (empty until Measure).
    QTableWidget* rateTable() const { return m_rateTable; }
    /// Rates of the last measurement (empty before one finished).
    std::vector<MatmulRate> rates() const { return m_rates; }
    /// True while a measurement runs.
    bool isMeasuring() const { return m_measuring; }

public Q_SLOTS:
    /// Starts the micro-benchmark on a background thread (ignored while one runs).
    void measure();

Q_SIGNALS:
    /// A measurement finished; rates() holds it.
    void measured();

private:
    void fillFormats();
    void showRates();

    analysis::HardwareFacts m_facts;
    QStringList m_flags;
    QString m_cudaText;
    QTableWidget* m_flagTable = nullptr;
    QTableWidget* m_formats = nullptr;
    QTableWidget* m_rateTable = nullptr;
    QLabel* m_gpuLabel = nullptr;
    QLabel* m_isaLabel = nullptr;
    QPushButton* m_measureButton = nullptr;
    std::vector<MatmulRate> m_rates;
    bool m_measuring = false;
};

} // namespace bitlens::widgets
