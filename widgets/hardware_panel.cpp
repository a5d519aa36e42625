#include "hardware_panel.h"

#include "exec/device.h"
#include "kernels/cpu_features.h"
#include "kernels/fake_quant.h"
#include "kernels/lowbit.h"

#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <exception>

namespace bitlens::widgets {

namespace {

/// What each reported flag lets the CPU do, in one line.
QString flagMeaning(const QString& flag)
{
    if (flag == QLatin1String("avx2"))
        return QObject::tr("256-bit SIMD: float32 kernels, int8 via 16-bit multiply-add");
    if (flag == QLatin1String("avx512f"))
        return QObject::tr("512-bit SIMD foundation");
    if (flag == QLatin1String("avx512_vnni"))
        return QObject::tr("int8 dot product in one instruction (VPDPBUSD, 512-bit)");
    if (flag == QLatin1String("avx_vnni"))
        return QObject::tr("int8 dot product in one instruction (VPDPBUSD, 256-bit)");
    if (flag == QLatin1String("avx512_bf16"))
        return QObject::tr("bf16 dot product to float32 (VDPBF16PS)");
    if (flag == QLatin1String("avx512_fp16"))
        return QObject::tr("fp16 arithmetic (not only conversion)");
    if (flag == QLatin1String("amx_tile"))
        return QObject::tr("AMX tile registers (matrix unit)");
    if (flag == QLatin1String("amx_int8"))
        return QObject::tr("AMX int8 tile matmul");
    if (flag == QLatin1String("amx_bf16"))
        return QObject::tr("AMX bf16 tile matmul");
    if (flag == QLatin1String("fma"))
        return QObject::tr("fused multiply-add: the AVX2 float kernels need it");
    if (flag == QLatin1String("f16c"))
        return QObject::tr("fp16 <-> float32 conversion only");
    return {};
}

QTableWidget* makeTable(const QStringList& headers)
{
    auto* table = new QTableWidget(0, static_cast<int>(headers.size()));
    table->setHorizontalHeaderLabels(headers);
    table->verticalHeader()->setVisible(false);
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->setSelectionMode(QAbstractItemView::NoSelection);
    table->horizontalHeader()->setStretchLastSection(true);
    table->setWordWrap(false);
    // Compact rows so every flag fits without scrolling.
    table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
    return table;
}

void addRow(QTableWidget* table, const QStringList& cells)
{
    const int row = table->rowCount();
    table->insertRow(row);
    for (int c = 0; c < cells.size(); ++c)
        table->setItem(row, c, new QTableWidgetItem(cells[c]));
}

QString yesNo(bool on)
{
    return on ? QObject::tr("yes") : QObject::tr("no");
}

double median3(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/// Times `reps` calls of `fn` three times after one warm-up; returns the median rate in
/// 10^9 operations per second for `opsPerCall` operations per call.
template <typename Fn>
double timeRate(Fn&& fn, double opsPerCall)
{
    using Clock = std::chrono::steady_clock;
    const auto w0 = Clock::now();
    fn();
    const double warmSec = std::chrono::duration<double>(Clock::now() - w0).count();
    // Keep the whole benchmark under ~2 s: about 60 ms per timed run, at least one call.
    const int reps = std::clamp(static_cast<int>(0.06 / std::max(warmSec, 1e-6)), 1, 20);
    std::vector<double> rates;
    for (int run = 0; run < 3; ++run) {
        const auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i)
            fn();
        const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
        rates.push_back(opsPerCall * reps / std::max(sec, 1e-9) / 1e9);
    }
    return median3(rates);
}

} // namespace

std::vector<MatmulRate> measureMatmulRates(int size)
{
    std::vector<MatmulRate> out;
    const double ops = 2.0 * double(size) * double(size) * double(size);
    const auto run = [&](const QString& name, const QString& unit, auto&& fn) {
        MatmulRate rate;
        rate.name = name;
        rate.unit = unit;
        try {
            c10::InferenceMode guard;
            rate.ratePerSec = timeRate(fn, ops);
        } catch (const std::exception& e) {
            rate.error = QString::fromUtf8(e.what()).section(QLatin1Char('\n'), 0, 0);
        }
        out.push_back(rate);
    };
    at::Tensor a;
    at::Tensor b;
    {
        c10::InferenceMode guard;
        a = at::randn({size, size});
        b = at::randn({size, size});
    }
    run(QStringLiteral("float32 (at::matmul)"), QStringLiteral("GFLOP/s"),
        [&] { (void)at::matmul(a, b); });
    at::Tensor a8;
    at::Tensor b8;
    at::Tensor a16;
    at::Tensor b16;
    {
        c10::InferenceMode guard;
        a8 = at::randint(-127, 128, {size, size}, at::kChar);
        b8 = at::randint(-127, 128, {size, size}, at::kChar);
        a16 = a.to(at::kBFloat16);
        b16 = b.to(at::kBFloat16);
    }
    run(QStringLiteral("int8 -> int32 (at::_int_mm)"), QStringLiteral("GOP/s"),
        [&] { (void)at::_int_mm(a8, b8); });
    run(QStringLiteral("bf16 (at::matmul)"), QStringLiteral("GFLOP/s"),
        [&] { (void)at::matmul(a16, b16); });
    return out;
}

QStringList HardwarePanel::knownFlags()
{
    QStringList names;
    for (const kernels::CpuFlag& flag : kernels::cpuFlags())
        names.push_back(QString::fromLatin1(flag.name));
    return names;
}

int HardwarePanel::parseSmVersion(const QString& deviceName)
{
    static const QRegularExpression sm(QStringLiteral("sm_(\\d+)"));
    const QRegularExpressionMatch match = sm.match(deviceName);
    return match.hasMatch() ? match.captured(1).toInt() : 0;
}

HardwarePanel::HardwarePanel(QWidget* parent) : QWidget(parent)
{
    QString modelName = QString::fromStdString(kernels::cpuModelName());
    if (modelName.isEmpty())
        modelName = tr("unknown CPU");
    for (const kernels::CpuFlag& flag : kernels::cpuFlags())
        if (flag.present)
            m_flags.push_back(QString::fromLatin1(flag.name));

    if (exec::cudaAvailable()) {
        const QString name = QString::fromStdString(kernels::cudaDeviceName());
        m_cudaText = name.isEmpty()
                         ? QString::fromStdString(exec::deviceDescription("cuda"))
                         : name;
        m_sm = parseSmVersion(m_cudaText);
    } else {
        m_cudaText = tr("No CUDA device");
    }

    auto* layout = new QVBoxLayout(this);
    auto* cpuLabel = new QLabel(tr("<b>CPU:</b> %1 &nbsp; (flags from cpuid, as the kernels see "
                                   "them)")
                                    .arg(modelName.toHtmlEscaped()));
    layout->addWidget(cpuLabel);
    const QString isaNote = QString::fromStdString(kernels::isaOverrideNote());
    m_isaLabel = new QLabel(
        tr("<b>Own kernels:</b> ISA level %1 of %2 (int8 GEMM: %3; 4-bit GEMV: %4)%5")
            .arg(QString::fromLatin1(kernels::isaName(kernels::isaLevel())),
                 QString::fromLatin1(kernels::isaName(kernels::hardwareIsaLevel())),
                 QString::fromLatin1(kernels::int8GemmKernel().name),
                 QString::fromLatin1(kernels::nibble4GemmKernel().name),
                 isaNote.isEmpty() ? QString() : QStringLiteral(" — ") + isaNote.toHtmlEscaped()));
    m_isaLabel->setToolTip(tr("Set BITLENS_ISA=scalar|avx2|avx-vnni|avx512 before starting "
                              "BitLens to compare the kernel levels this CPU has."));
    layout->addWidget(m_isaLabel);
    m_flagTable = makeTable({tr("Flag"), tr("Present"), tr("What it gives")});
    for (const QString& flag : knownFlags())
        addRow(m_flagTable, {flag, yesNo(m_flags.contains(flag)), flagMeaning(flag)});
    m_flagTable->resizeColumnsToContents();
    layout->addWidget(m_flagTable, 3);

    layout->addWidget(new QLabel(tr("<b>Formats</b>: native support and what BitLens runs")));
    m_formats = makeTable({tr("Device"), tr("Format"), tr("Native"), tr("What BitLens uses")});
    fillFormats();
    layout->addWidget(m_formats, 3);

    m_gpuLabel = new QLabel(tr("<b>GPU:</b> %1").arg(m_cudaText.toHtmlEscaped()));
    layout->addWidget(m_gpuLabel);

    auto* measureRow = new QHBoxLayout;
    m_measureButton = new QPushButton(tr("Measure"));
    m_measureButton->setToolTip(tr("Times 512×512×512 matmuls on the CPU (about 1–2 s)"));
    measureRow->addWidget(m_measureButton);
    measureRow->addWidget(new QLabel(
        tr("Measured here and now (CPU, median of 3 runs); no vendor peak figures are quoted.")));
    measureRow->addStretch(1);
    layout->addLayout(measureRow);
    m_rateTable = makeTable({tr("Matmul 512×512×512"), tr("Rate"), tr("Unit"), tr("vs float32")});
    layout->addWidget(m_rateTable, 2);
    connect(m_measureButton, &QPushButton::clicked, this, &HardwarePanel::measure);
}

HardwarePanel::~HardwarePanel() = default;

void HardwarePanel::fillFormats()
{
    const auto has = [this](const char* flag) { return m_flags.contains(QLatin1String(flag)); };
    const kernels::CpuFeatures f = kernels::cpuFeatures();
    const bool vnni = f.avx512Vnni || f.avxVnni;
    const bool amxInt8 = has("amx_int8");
    const kernels::KernelRow int8Row = kernels::int8GemmKernel();
    QString int8Note = int8Row.isReference()
                           ? tr("int8 GEMM: at::_int_mm (no own kernel at ISA level %1)")
                                 .arg(QString::fromLatin1(kernels::isaName(kernels::isaLevel())))
                           : tr("int8 GEMM: bitlens %1 kernel")
                                 .arg(QString::fromLatin1(int8Row.name));
    if (amxInt8)
        int8Note += tr("; AMX-INT8 present (not used by BitLens)");
    if (vnni)
        int8Note += tr("; VNNI present");
    if (!amxInt8 && !vnni)
        int8Note += tr("; no VNNI: 16-bit multiply-add, about 2x float32 at best");
    addRow(m_formats, {tr("CPU"), tr("int8 dot product"), yesNo(vnni || amxInt8), int8Note});
    const bool bf16 = has("avx512_bf16") || has("amx_bf16");
    addRow(m_formats, {tr("CPU"), tr("bf16"), yesNo(bf16),
                       bf16 ? tr("bf16 cast; matmul via oneDNN bf16 kernels")
                            : tr("bf16 cast; oneDNN converts to float32 to compute")});
    const bool fp16 = has("avx512_fp16");
    addRow(m_formats, {tr("CPU"), tr("fp16"), yesNo(fp16),
                       fp16 ? tr("fp16 cast; fp16 arithmetic available")
                            : (has("f16c") ? tr("fp16 cast; F16C converts, compute in float32")
                                           : tr("fp16 cast; compute in float32"))});
    addRow(m_formats, {tr("CPU"), tr("fp8 (E4M3, E5M2)"), yesNo(false),
                       tr("no CPU flag reports FP8: fake-quantized (scale, cast, dequantize)")});
    addRow(m_formats, {tr("CPU"), tr("fp4 / NF4"), yesNo(false),
                       tr("no CPU flag reports FP4: code tables, dequantized to float32")});
    if (m_sm == 0 && !exec::cudaAvailable()) {
        addRow(m_formats, {tr("GPU"), tr("all"), tr("—"), tr("No CUDA device")});
    } else {
        const QString sm = m_sm > 0 ? tr("sm_%1").arg(m_sm) : tr("unknown sm");
        addRow(m_formats, {tr("GPU %1").arg(sm), tr("int8 tensor cores (sm_75+)"),
                           yesNo(m_sm >= 75), tr("int8 GEMM: at::_int_mm via cuBLASLt")});
        addRow(m_formats, {tr("GPU %1").arg(sm), tr("FP8 tensor cores (sm_89+)"),
                           yesNo(m_sm >= 89), tr("FP8 fake-quantized; no FP8 GEMM yet")});
        addRow(m_formats, {tr("GPU %1").arg(sm), tr("FP4 tensor cores (sm_100+)"),
                           yesNo(m_sm >= 100), tr("FP4 fake-quantized; no FP4 GEMM yet")});
    }
    m_formats->resizeColumnsToContents();
}

void HardwarePanel::measure()
{
    if (m_measuring)
        return;
    m_measuring = true;
    m_measureButton->setEnabled(false);
    m_measureButton->setText(tr("Measuring…"));
    auto* watcher = new QFutureWatcher<std::vector<MatmulRate>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher] {
        m_rates = watcher->result();
        watcher->deleteLater();
        m_measuring = false;
        m_measureButton->setEnabled(true);
        m_measureButton->setText(tr("Measure"));
        showRates();
        Q_EMIT measured();
    });
    watcher->setFuture(QtConcurrent::run([] { return measureMatmulRates(512); }));
}

void HardwarePanel::showRates()
{
    m_rateTable->setRowCount(0);
    const double base = m_rates.empty() ? 0.0 : m_rates.front().ratePerSec;
    for (const MatmulRate& rate : m_rates) {
        const bool ok = rate.error.isEmpty();
        addRow(m_rateTable,
               {rate.name,
                ok ? QString::number(rate.ratePerSec, 'f', 1) : tr("failed: %1").arg(rate.error),
                rate.unit,
                ok && base > 0.0 ? tr("%1×").arg(rate.ratePerSec / base, 0, 'f', 2)
                                 : QString()});
    }
    m_rateTable->resizeColumnsToContents();
}

} // namespace bitlens::widgets
