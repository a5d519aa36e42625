#include "hardware_panel.h"

#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <utility>

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
    // Headers whole before any row arrives ("Matmul 512×512×512" was cut to ":mul 512×5…").
    table->resizeColumnsToContents();
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

QString text(const std::string& s)
{
    return QString::fromStdString(s);
}

} // namespace

QStringList HardwarePanel::knownFlags()
{
    QStringList names;
    for (const analysis::CpuFlagFact& flag : analysis::cpuFlagFacts())
        names.push_back(text(flag.name));
    return names;
}

int HardwarePanel::parseSmVersion(const QString& deviceName)
{
    return analysis::parseSmVersion(deviceName.toStdString());
}

HardwarePanel::HardwarePanel(QWidget* parent) : QWidget(parent), m_facts(analysis::probeHardware())
{
    QString modelName = text(m_facts.cpuModel);
    if (modelName.isEmpty())
        modelName = tr("unknown CPU");
    for (const analysis::CpuFlagFact& flag : m_facts.flags)
        if (flag.present)
            m_flags.push_back(text(flag.name));
    m_cudaText = m_facts.cudaAvailable ? text(m_facts.cudaDevice) : tr("No CUDA device");

    auto* layout = new QVBoxLayout(this);
    auto* cpuLabel = new QLabel(tr("<b>CPU:</b> %1 &nbsp; (flags from cpuid, as the kernels see "
                                   "them)")
                                    .arg(modelName.toHtmlEscaped()));
    layout->addWidget(cpuLabel);
    const QString isaNote = text(m_facts.isaNote);
    m_isaLabel = new QLabel(
        tr("<b>Own kernels:</b> ISA level %1 of %2 (int8 GEMM: %3; 4-bit GEMV: %4)%5")
            .arg(text(m_facts.isaLevel), text(m_facts.hardwareIsaLevel),
                 text(m_facts.int8GemmKernel), text(m_facts.nibble4GemmKernel),
                 isaNote.isEmpty() ? QString() : QStringLiteral(" — ") + isaNote.toHtmlEscaped()));
    m_isaLabel->setToolTip(tr("Set BITLENS_ISA=scalar|avx2|avx-vnni|avx512 before starting "
                              "BitLens to compare the kernel levels this CPU has."));
    layout->addWidget(m_isaLabel);
    m_flagTable =
        makeTable({tr("Flag"), tr("Present"), tr("Kernels use it"), tr("What it gives")});
    for (const analysis::CpuFlagFact& flag : m_facts.flags)
        addRow(m_flagTable, {text(flag.name), yesNo(flag.present), yesNo(flag.usedByKernels),
                             flagMeaning(text(flag.name))});
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
    const auto has = [this](const char* flag) { return m_facts.has(flag); };
    const bool amxInt8 = has("amx_int8");
    const QString level = text(m_facts.isaLevel);
    QString int8Note = m_facts.int8GemmIsReference
                           ? tr("int8 GEMM: at::_int_mm (no own kernel at ISA level %1)").arg(level)
                           : tr("int8 GEMM: bitlens %1 kernel").arg(text(m_facts.int8GemmKernel));
    if (amxInt8)
        int8Note += tr("; AMX-INT8 present (not used by BitLens)");
    // The same facts as the flag table's VNNI rows: present on the CPU, used at this level.
    if (m_facts.vnniUsed)
        int8Note += tr("; VNNI present, used by the int8 kernels");
    else if (m_facts.vnniPresent)
        int8Note += tr("; VNNI present, not used at ISA level %1").arg(level);
    if (!amxInt8 && !m_facts.vnniUsed)
        int8Note += tr("; no VNNI in use: 16-bit multiply-add, about 2x float32 at best");
    addRow(m_formats, {tr("CPU"), tr("int8 dot product"), yesNo(m_facts.vnniPresent || amxInt8),
                       int8Note});
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
    const int smVersion = m_facts.smVersion;
    if (!m_facts.cudaAvailable) {
        addRow(m_formats, {tr("GPU"), tr("all"), tr("—"), tr("No CUDA device")});
    } else {
        const QString sm = smVersion > 0 ? tr("sm_%1").arg(smVersion) : tr("unknown sm");
        addRow(m_formats, {tr("GPU %1").arg(sm), tr("int8 tensor cores (sm_75+)"),
                           yesNo(smVersion >= 75), tr("int8 GEMM: at::_int_mm via cuBLASLt")});
        addRow(m_formats, {tr("GPU %1").arg(sm), tr("FP8 tensor cores (sm_89+)"),
                           yesNo(smVersion >= 89), tr("FP8 fake-quantized; no FP8 GEMM yet")});
        addRow(m_formats, {tr("GPU %1").arg(sm), tr("FP4 tensor cores (sm_100+)"),
                           yesNo(smVersion >= 100), tr("FP4 fake-quantized; no FP4 GEMM yet")});
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
    watcher->setFuture(QtConcurrent::run([] {
        std::vector<MatmulRate> rates;
        for (analysis::MatmulRate& rate : analysis::measureMatmulRates(512))
            rates.push_back({text(rate.name), rate.ratePerSec, text(rate.unit), text(rate.error)});
        return rates;
    }));
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
