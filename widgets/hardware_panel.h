#pragma once
// Which low-bit formats this machine runs natively: CPU feature flags from /proc/cpuinfo, what
// BitLens runs for each format there, the CUDA device and its tensor-core capabilities, and a
// measured (never quoted) matmul rate for float32, int8 and bf16.

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

/// One measured matmul rate.
struct MatmulRate {
    QString name;        ///< "float32", "int8 (at::_int_mm)", "bf16"
    double ratePerSec = 0.0;  ///< GFLOP/s (float types) or GOP/s (int8), median of 3 runs
    QString unit;        ///< "GFLOP/s" or "GOP/s"
    QString error;       ///< why it could not run, empty on success
};

/// Runs a short (< 2 s) square matmul micro-benchmark on the CPU: float32, int8 x int8 -> int32
/// (at::_int_mm) and bf16, each 3 timed runs, median. Blocking: call it off the GUI thread.
std::vector<MatmulRate> measureMatmulRates(int size = 512);

/// The hardware panel: a table of CPU flags, per-format support, the GPU and measured rates.
class HardwarePanel : public QWidget {
    Q_OBJECT

public:
    /// The flags the panel reports, in display order (kernels::cpuFlags(), Linux's names).
    static QStringList knownFlags();
    /// sm version (e.g. 90) from kernels::cudaDeviceName() text "... sm_90)", or 0.
    static int parseSmVersion(const QString& deviceName);

    /// Reads the CPU features (cpuid, through core) and the CUDA device and fills the tables.
    explicit HardwarePanel(QWidget* parent = nullptr);
    ~HardwarePanel() override;

    /// Known flags found on this CPU.
    QStringList cpuFlags() const { return m_flags; }
    /// The GPU line: "No CUDA device" or the device name.
    QString cudaText() const { return m_cudaText; }
    /// The table of formats (rows: int8, bf16, fp16, fp8, fp4; then GPU rows).
    QTableWidget* formatTable() const { return m_formats; }
    /// The line naming the ISA level the own kernels run at, and their rows.
    QLabel* isaLabel() const { return m_isaLabel; }
    /// The table of flags (flag, present, meaning).
    QTableWidget* flagTable() const { return m_flagTable; }
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

    QStringList m_flags;
    QString m_cudaText;
    int m_sm = 0;
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
