// TeachingView (quantization grid with live error, float formats, 4-bit grids) and the
// HardwarePanel, offscreen.

#include "chart_histogram.h"
#include "hardware_panel.h"
#include "model_fixtures.h"
#include "teaching_view.h"

#include "exec/device.h"
#include "kernels/cpu_features.h"
#include "kernels/lowbit.h"
#include "model/model.h"

#include <QElapsedTimer>
#include <QLabel>
#include <QFile>
#include <QLineSeries>
#include <QPushButton>
#include <QScatterSeries>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <random>

using namespace bitlens;
using namespace bitlens::widgets;

namespace {

constexpr unsigned kSeed = 20240611;

std::vector<float> gaussian(std::size_t n, float sigma = 0.05f, unsigned seed = kSeed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v)
        x = dist(rng);
    return v;
}

} // namespace

class TestTeaching : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { qInfo("seed %u", kSeed); }

    void formatsChangeDrawnCodePoints()
    {
        TeachingView view;
        QVERIFY(!view.gridChart()->hasData());
        view.setWeights(QStringLiteral("fc"), gaussian(4096));
        QVERIFY(view.gridChart()->hasData());
        // Symmetric int4 per-tensor view: k * clip / 7 for k in -7..7 (code -8 lies at
        // -8/7.5 × clip, outside the clip range), so 15 lie within [-clip, clip].
        view.setFormat(QStringLiteral("int4"));
        QCOMPARE(view.gridChart()->codePointCount(), 15);
        QCOMPARE(view.gridChart()->drawnCodePointCount(), 15);
        view.setFormat(QStringLiteral("nf4"));
        QCOMPARE(view.gridChart()->codePointCount(), 16);
        QCOMPARE(view.gridChart()->drawnCodePointCount(), 16);
        view.setFormat(QStringLiteral("fp4_e2m1"));
        QCOMPARE(view.gridChart()->codePointCount(), 15); // +-0 is one value
        // int8: 255 values, thinned to every 4th (quantGrid / HistogramChart's 64-line cap).
        view.setFormat(QStringLiteral("int8"));
        QCOMPARE(view.gridChart()->codePointCount(), 255);
        // Every 4th from the middle (index 127 = 0): indices 3, 7, ..., 251 = 63 lines.
        QCOMPARE(view.gridChart()->drawnCodePointCount(), 63);
        QVERIFY(view.gridChart()->drawnCodePointCount() <= HistogramChart::kMaxGridLines);
        QVERIFY(view.gridChart()->gridLabel().contains(QLatin1String("every 4th of 255")));
        // The bits slider: 3 bits -> 7 values, and the title names int3.
        view.setBits(3);
        QCOMPARE(view.gridChart()->codePointCount(), 7);
        QVERIFY(view.gridChart()->chart()->title().contains(QLatin1String("int3")));
    }

    void sqnrGrowsWithBitsAndMatchesTheory()
    {
        const std::vector<float> w = gaussian(16384);
        TeachingView view;
        view.setWeights(QStringLiteral("w"), w);
        view.setFormat(QStringLiteral("int8"));
        std::vector<double> sqnr;
        for (const int bits : {2, 3, 4, 5, 6, 7, 8}) {
            view.setBits(bits);
            QVERIFY(view.stats().valid);
            QVERIFY(std::isfinite(view.stats().sqnrDb));
            sqnr.push_back(view.stats().sqnrDb);
        }
        for (std::size_t i = 1; i < sqnr.size(); ++i)
            QVERIFY2(sqnr[i] > sqnr[i - 1], qPrintable(QStringLiteral("bits %1: %2 <= %3")
                                                           .arg(i + 2)
                                                           .arg(sqnr[i])
                                                           .arg(sqnr[i - 1])));
        // Uniform noise Δ²/12 with Δ = 2 max / 2^b: SQNR = 6.02 b + 4.77 - 20 log10(max / σ).
        double sum2 = 0.0;
        double maxAbs = 0.0;
        for (const float x : w) {
            sum2 += double(x) * x;
            maxAbs = std::max(maxAbs, std::abs(double(x)));
        }
        const double rms = std::sqrt(sum2 / double(w.size()));
        const double theory = 6.02 * 8 + 4.77 - 20.0 * std::log10(maxAbs / rms);
        qInfo("int8 SQNR %.2f dB, theory %.2f dB", sqnr.back(), theory);
        QVERIFY(std::abs(sqnr.back() - theory) < 1.0);
        QVERIFY(view.readoutText().contains(QLatin1String("SQNR")));
    }

    void clipFractionChangesError()
    {
        TeachingView view;
        view.setWeights(QStringLiteral("w"), gaussian(8192));
        view.setFormat(QStringLiteral("int4"));
        const QuantErrorStats full = view.stats();
        view.setClipFraction(0.5);
        const QuantErrorStats half = view.stats();
        QVERIFY(full.valid && half.valid);
        QVERIFY(full.mse != half.mse);
        // Half the range: the tails saturate, so the largest error grows past a quarter of max.
        QVERIFY(half.maxAbsError > full.maxAbsError);
        // The grid follows the clip: its ends are at ±0.5 max|w|.
        QCOMPARE(view.gridChart()->codePointCount(), 15);
    }

    void groupsHelpWhenScaleVaries()
    {
        // 64 groups of 32 whose scales span 10^-3 .. 1: one per-tensor scale rounds the small
        // groups to 0, a scale per group does not.
        std::vector<float> w = gaussian(2048, 1.0f);
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] *= float(std::pow(10.0, -3.0 * double((i / 32) % 4) / 3.0));
        TeachingView view;
        view.setWeights(QStringLiteral("w"), w);
        view.setFormat(QStringLiteral("int4"));
        const double perTensor = view.stats().sqnrDb;
        view.setGroupSize(32);
        const double perGroup = view.stats().sqnrDb;
        qInfo("int4 per-tensor %.2f dB, group 32 %.2f dB", perTensor, perGroup);
        QVERIFY(perGroup > perTensor + 1.0);
        QVERIFY(view.gridChart()->chart()->title().contains(QLatin1String("group size 32")));
        // Every offered format gives a finite error.
        for (const QString& format : TeachingView::formats()) {
            view.setFormat(format);
            QVERIFY2(view.stats().valid && std::isfinite(view.stats().sqnrDb),
                     qPrintable(format));
        }
    }

    void largeTensorsComputeInTheBackgroundLastRequestWins()
    {
        const std::vector<float> w = gaussian(500000);
        // Measured cost (documents TeachingView::kSyncLimit).
        for (const char* format : {"int8", "nf4", "fp8_e4m3"}) {
            TeachingSettings s;
            s.format = QString::fromLatin1(format);
            s.groupSize = 128;
            QElapsedTimer timer;
            timer.start();
            const QuantErrorStats stats = quantizationError(w, s);
            qInfo("500k %s per-group(128): %lld ms", format,
                  static_cast<long long>(timer.elapsed()));
            QVERIFY(stats.valid);
        }
        TeachingView view;
        view.setWeights(QStringLiteral("big"), w);
        QVERIFY(view.isComputing());
        view.setFormat(QStringLiteral("int4"));
        view.setClipFraction(0.8);
        view.setGroupSize(64);
        QTRY_VERIFY_WITH_TIMEOUT(!view.isComputing(), 20000);
        const QuantErrorStats expected = quantizationError(w, view.settings());
        QVERIFY(view.stats().valid);
        QCOMPARE(view.stats().sqnrDb, expected.sqnrDb);
    }

    void layerWeightsReadsTheInitializer()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("small.onnx"));
        QCOMPARE(QString::fromStdString(testing::writeSmallCnn(path)), QString());
        auto model = openModel(path.toStdString());
        QVERIFY(model);
        QCOMPARE(layerWeights(*model.value(), "conv1").size(), std::size_t(4 * 9));
        QCOMPARE(layerWeights(*model.value(), "fc").size(), std::size_t(10 * 4 * 36));
        QVERIFY(layerWeights(*model.value(), "relu1").empty());
        QVERIFY(layerWeights(*model.value(), "nope").empty());
    }

    void floatFormatsCountsFollowTheFormats()
    {
        TeachingView view;
        FloatFormatsChart* chart = view.floatFormatsChart();
        QVERIFY(chart->hasData());
        // E4M3FN: 7 subnormals (exponent 0, mantissa 1..7) + 15 exponents × 8 mantissas, less
        // the one NaN pattern S.1111.111 (no infinities) = 126; max 1.75 × 2^8 = 448.
        QCOMPARE(chart->e4m3Count(), 7 + 15 * 8 - 1);
        QCOMPARE(chart->e4m3Max(), 448.0);
        // E5M2: 3 subnormals + 30 exponents × 4 (exponent 31 is Inf/NaN) = 123; max
        // 1.75 × 2^15 = 57344.
        QCOMPARE(chart->e5m2Count(), 3 + 30 * 4);
        QCOMPARE(chart->e5m2Max(), 57344.0);
        QVERIFY(chart->e4m3Series()->name().contains(QLatin1String("8 per octave")));
        QVERIFY(chart->e5m2Series()->name().contains(QLatin1String("4 per octave")));

        const std::vector<int> rows = view.fourBitChart()->rowCounts();
        // NF4, int4 (-7..7), FP4 (+-0 one), MXFP4 (scale 2^-2: 6 and 4 x 2^-2 = 1.5 and 1, so
        // 1.5 is past max|w| = 1 and 13 remain), NVFP4 (E4M3 448 under amax / 2688: 15).
        QCOMPARE(rows, (std::vector<int>{16, 15, 15, 13, 15}));
        QVERIFY(view.fourBitChart()->densitySeries()->count() > 100);
    }

    void blockScalesShowTheSharedScaleAndItsGrid()
    {
        // 4 blocks of 32 whose max |w| is 0.41, 0.2, 0.05 and 0.9: MX scales 2^-4, 2^-5, 2^-7,
        // 2^-3 (floor(log2 amax) - 2).
        std::vector<float> w = gaussian(128, 0.01f);
        const float peaks[] = {-0.41f, 0.2f, 0.05f, 0.9f};
        for (int b = 0; b < 4; ++b)
            w[static_cast<std::size_t>(b * 32 + 5)] = peaks[b];
        TeachingView view;
        BlockScaleView* blocks = view.blockView();
        QVERIFY(!blocks->gridChart()->hasData());
        QVERIFY(blocks->gridChart()->message().contains(QLatin1String("choose a layer")));
        QVERIFY(view.tabs()->tabText(3).contains(QLatin1String("Block scales")));
        view.setWeights(QStringLiteral("fc1"), w);
        QCOMPARE(blocks->format(), QStringLiteral("mxfp4"));
        QVERIFY(blocks->gridChart()->hasData());
        QCOMPARE(blocks->block().scaleByte, 123);
        QCOMPARE(blocks->gridChart()->pointCount(), 32);
        QCOMPARE(blocks->gridChart()->gridCount(), 15);
        QVERIFY(blocks->readoutText().contains(QLatin1String("E8M0 0x7B = 2^-4")));
        QVERIFY(blocks->readoutText().contains(QLatin1String("saturates")));  // 0.41 > 6/16
        QVERIFY(blocks->gridChart()->chart()->title().contains(QLatin1String("block 0 of 4")));
        blocks->setBlockIndex(3);
        QCOMPARE(blocks->block().scaleByte, 124);
        QCOMPARE(blocks->staircaseChart()->blockCount(), 4);
        QCOMPARE(blocks->staircaseChart()->distinctScales(), 4);
        QVERIFY(blocks->staircaseChart()->chart()->title().contains(QLatin1String("whole octaves")));
        // NVFP4: 8 blocks of 16, E4M3 block scales under one float32 tensor scale (0.9 / 2688).
        view.setFormat(QStringLiteral("nvfp4"));  // the grid tab's combo drives this tab too
        QCOMPARE(blocks->format(), QStringLiteral("nvfp4"));
        QCOMPARE(blocks->staircaseChart()->blockCount(), 8);
        QVERIFY(blocks->readoutText().contains(QLatin1String("E4M3 0x")));
        QVERIFY(blocks->readoutText().contains(QLatin1String("tensor scale 0.0003348")));
        QVERIFY(std::abs(blocks->block().tensorScale - 0.9 / 2688.0) < 1e-9);
        // The grid tab: a block format's group is its block.
        QVERIFY(view.stats().valid);
        QVERIFY(view.gridChart()->chart()->title().contains(QLatin1String("blocks of 16")));
        blocks->setBlockIndex(99);  // clamped to the last block
        QCOMPARE(blocks->block().block, 7);
        for (const QString& format : BlockScaleView::formats()) {
            blocks->setFormat(format);
            QVERIFY2(blocks->block().valid && blocks->gridChart()->hasData(), qPrintable(format));
        }
    }

    void hardwarePanelListsCpuFlags()
    {
        // The panel's flags are cpuid's, as the kernels read them (not /proc/cpuinfo, which a
        // hypervisor may word differently).
        QStringList expected;
        for (const kernels::CpuFlag& flag : kernels::cpuFlags())
            if (flag.present)
                expected.push_back(QString::fromLatin1(flag.name));

        HardwarePanel panel;
        QCOMPARE(panel.cpuFlags(), expected);
        QTableWidget* flags = panel.flagTable();
        QCOMPARE(flags->rowCount(), int(HardwarePanel::knownFlags().size()));
        const kernels::CpuFeatures inForce = kernels::cpuFeatures();
        for (int r = 0; r < flags->rowCount(); ++r) {
            const QString flag = flags->item(r, 0)->text();
            QCOMPARE(flags->item(r, 1)->text(), expected.contains(flag) ? QStringLiteral("yes")
                                                                        : QStringLiteral("no"));
            // "Kernels use it" is what the kernels dispatch on at the level in force.
            if (flag == QLatin1String("avx512_vnni"))
                QCOMPARE(flags->item(r, 2)->text() == QLatin1String("yes"), inForce.avx512Vnni);
            if (flag == QLatin1String("avx_vnni"))
                QCOMPARE(flags->item(r, 2)->text() == QLatin1String("yes"), inForce.avxVnni);
        }
        // The int8 row's VNNI note agrees with the flag table and the kernels.
        const bool vnniUsed = inForce.avx512Vnni || inForce.avxVnni;
        const QString int8Note = panel.formatTable()->item(0, 3)->text();
        QCOMPARE(int8Note.contains(QLatin1String("VNNI present, used by the int8 kernels")),
                 vnniUsed);
        QCOMPARE(panel.facts().vnniUsed, vnniUsed);
        {
            // Capped at avx2 the same CPU keeps its VNNI flags, and the panel says the kernels
            // do not use them.
            const kernels::ScopedIsaLevel avx2(kernels::IsaLevel::Avx2);
            HardwarePanel capped;
            const QString note = capped.formatTable()->item(0, 3)->text();
            QVERIFY2(!note.contains(QLatin1String("used by the int8 kernels")), qPrintable(note));
            QCOMPARE(note.contains(QLatin1String("VNNI present, not used")),
                     capped.facts().vnniPresent);
            QCOMPARE(capped.cpuFlags(), expected);
        }
        if (!exec::cudaAvailable())
            QCOMPARE(panel.cudaText(), QStringLiteral("No CUDA device"));

        QCOMPARE(HardwarePanel::parseSmVersion(QStringLiteral("NVIDIA H200 (139 GiB, sm_90)")),
                 90);
        QCOMPARE(HardwarePanel::parseSmVersion(QStringLiteral("none")), 0);
        // The ISA line names the level in force and the int8 row that runs at it.
        QVERIFY(panel.isaLabel()->text().contains(
            QString::fromLatin1(kernels::isaName(kernels::isaLevel()))));
        QVERIFY(panel.isaLabel()->text().contains(
            QString::fromLatin1(kernels::int8GemmKernel().name)));
    }

    void measureShowsThreeRates()
    {
        HardwarePanel panel;
        QSignalSpy spy(&panel, &HardwarePanel::measured);
        QElapsedTimer timer;
        timer.start();
        panel.measure();
        QVERIFY(panel.isMeasuring());
        QVERIFY(spy.wait(30000));
        qInfo("measure took %lld ms", static_cast<long long>(timer.elapsed()));
        const auto rates = panel.rates();
        QCOMPARE(rates.size(), std::size_t(3));
        for (const MatmulRate& rate : rates) {
            qInfo("%s: %.1f %s %s", qPrintable(rate.name), rate.ratePerSec, qPrintable(rate.unit),
                  qPrintable(rate.error));
            QVERIFY2(rate.error.isEmpty(), qPrintable(rate.error));
            QVERIFY(std::isfinite(rate.ratePerSec) && rate.ratePerSec > 0.0);
        }
        panel.resize(1000, 720);
        QTest::qWait(50);
        QVERIFY(panel.grab().save(QStringLiteral("/tmp/teach-hardware.png")));
    }

    void screenshots()
    {
        TeachingView view;
        view.resize(1200, 720);
        view.setWeights(QStringLiteral("fc.weight"), gaussian(20000));
        view.setFormat(QStringLiteral("int4"));
        view.setClipFraction(0.7);
        const char* names[] = {"/tmp/teach-grid.png", "/tmp/teach-float.png",
                               "/tmp/teach-4bit.png"};
        for (int i = 0; i < 3; ++i) {
            view.tabs()->setCurrentIndex(i);
            QTest::qWait(50); // let the chart lay out title and legend
            QVERIFY(view.grab().save(QString::fromLatin1(names[i])));
        }
        view.setFormat(QStringLiteral("int8"));
        view.setClipFraction(1.0);
        view.tabs()->setCurrentIndex(0);
        QTest::qWait(50);
        QVERIFY(view.grab().save(QStringLiteral("/tmp/teach-grid-int8.png")));
        QVERIFY(view.gridChart()->exportTo(QStringLiteral("/tmp/teach-grid-export.svg")));
        // The block tab, MXFP4 then NVFP4 on the same weights.
        view.tabs()->setCurrentIndex(3);
        view.blockView()->setBlockIndex(5);
        for (const char* format : {"mxfp4", "nvfp4"}) {
            view.blockView()->setFormat(QString::fromLatin1(format));
            QTest::qWait(50);
            QVERIFY(view.grab().save(QStringLiteral("/tmp/teach-blocks-%1.png")
                                         .arg(QString::fromLatin1(format))));
        }
    }
};

QTEST_MAIN(TestTeaching)
#include "test_teaching.moc"
