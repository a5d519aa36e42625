// bitlens-cli's output: errors, progress lines, and the text of a run and an export.

#include "cli.h"

#include "analysis/quant_report.h"
#include "export/export.h"
#include "model/model.h"

#include <cmath>
#include <cstdio>

namespace bitlens::cli {

using nlohmann::json;

int fail(const Error& error)
{
    std::fprintf(stderr, "%s\n", error.userMessage().c_str());
    return exitCode(error.code);
}

/// Prints progress to stderr when it is a terminal or a log: a line per stage change or 10 %.
Progress stderrProgress(bool quiet)
{
    if (quiet)
        return Progress();
    auto last = std::make_shared<std::pair<std::string, int>>("", -1);
    return Progress([last](double fraction, const std::string& stage) {
        const int tenth = static_cast<int>(fraction * 10.0);
        const std::string head = stage.substr(0, stage.find(','));
        if (head == last->first && tenth == last->second)
            return;
        last->first = head;
        last->second = tenth;
        std::fprintf(stderr, "[%3d%%] %s\n", static_cast<int>(fraction * 100.0), stage.c_str());
    });
}

json shapeJson(const std::vector<std::int64_t>& shape)
{
    json j = json::array();
    for (auto d : shape)
        j.push_back(d < 0 ? json("N") : json(d));
    return j;
}

std::string dbText(double db)
{
    if (!std::isfinite(db))
        return db > 0 ? "exact" : "-inf";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", db);
    return buf;
}

void printReport(const analysis::QuantReport& r)
{
    std::printf("scheme  %s\n", r.schemeSpec.c_str());
    std::printf("\n%-14s %-8s %-44s %9s %9s %10s %10s\n", "layer", "op", "config", "SQNR dB",
                "accum dB", "float", "quantized");
    for (const auto& l : r.layers)
        std::printf("%-14s %-8s %-44s %9s %9s %10s %10s\n", l.name.c_str(), l.op.c_str(),
                    l.config.substr(0, 44).c_str(), dbText(l.local.sqnrDb).c_str(),
                    dbText(l.accumulated.sqnrDb).c_str(), formatBytes(l.bytesFloat).c_str(),
                    formatBytes(l.bytesQuantized).c_str());
    if (r.qat)
        std::printf("\nqat         %d epoch(s), %lld steps, %s %.4f, held-out %s %.4f -> %.4f "
                    "(step %lld kept)%s, %.1f s\n",
                    r.qat->epochs, static_cast<long long>(r.qat->steps), r.qat->lossName.c_str(),
                    r.qat->finalLoss, r.qat->metricName.c_str(), r.qat->startMetric,
                    r.qat->bestMetric, static_cast<long long>(r.qat->bestStep),
                    r.qat->cancelled ? ", cancelled" : "", r.qat->seconds);
    std::printf("\nsize        %s -> %s (%.3f of float)\n", formatBytes(r.sizeFloat).c_str(),
                formatBytes(r.sizeQuantized).c_str(),
                static_cast<double>(r.sizeQuantized) / static_cast<double>(r.sizeFloat));
    if (r.metricFloat && r.metricQuantized) {
        if (r.metricFloat->name == "perplexity")
            std::printf("%-11s %.4f -> %.4f (%+.2f %%) on %lld tokens\n",
                        r.metricFloat->name.c_str(), r.metricFloat->value, r.metricQuantized->value,
                        100.0 * (r.metricQuantized->value / r.metricFloat->value - 1.0),
                        static_cast<long long>(r.metricQuantized->samples));
        else
            std::printf("%-11s %.4f -> %.4f (%+.2f points) on %lld samples\n",
                        r.metricFloat->name.c_str(), r.metricFloat->value,
                        r.metricQuantized->value,
                        100.0 * (r.metricQuantized->value - r.metricFloat->value),
                        static_cast<long long>(r.metricQuantized->samples));
    }
    if (r.divergence) {
        const analysis::LmDivergence& d = *r.divergence;
        std::printf("kl-div      mean %.6f +- %.6f, median %.6f, 99%% %.6f, max %.6f on %lld "
                    "tokens\n",
                    d.meanKld, d.meanKldUncertainty, d.medianKld, d.kldP99, d.maxKld,
                    static_cast<long long>(d.tokens));
        std::printf("same top p  %.3f +- %.3f %%; delta p mean %.3f %%, RMS %.3f %%, 1%% %.3f %%, "
                    "99%% %.3f %%\n",
                    100.0 * d.sameTop, 100.0 * d.sameTopUncertainty, 100.0 * d.meanDeltaP,
                    100.0 * d.rmsDeltaP, 100.0 * d.deltaPP01, 100.0 * d.deltaPP99);
    }
    if (!r.modelNote.empty())
        std::printf("note        %s\n", r.modelNote.c_str());
    if (r.engine == "block") {
        // The block engine never runs the whole model at once, so there is no speed to show.
        std::printf("engine      block: one decoder block at a time (%zu layers); throughput "
                    "not measured (bench MODEL --scheme S measures it where the model fits)\n",
                    r.layers.size());
        return;
    }
    int real = 0;
    for (const auto& l : r.layers)
        real += l.simulated || l.weightType == "float32" ? 0 : 1;
    std::printf("throughput  %.0f -> %.0f samples/s (%s, batch %lld; %d of %zu layers on real "
                "low-bit kernels)\n",
                r.throughput.floatSamplesPerS, r.throughput.quantizedSamplesPerS,
                r.throughput.device.c_str(), static_cast<long long>(r.throughput.batch), real,
                r.layers.size());
    for (const auto& l : r.layers)
        std::printf("  %-14s %s\n", l.name.c_str(), l.kernel.c_str());
}
void printExported(const workspace::Exported& exported)
{
    const exporting::ExportResult& written = *exported.written;
    const std::string opset = written.format == exporting::ExportFormat::Onnx
                                  ? ", opset " + std::to_string(written.opset)
                                  : std::string();
    std::printf("exported    %s (%s%s, %s; float weights %s, %d layers quantized, %d float)\n",
                written.path.c_str(), exporting::formatName(written.format).c_str(),
                opset.c_str(), formatBytes(written.bytes).c_str(),
                formatBytes(exported.bytesFloat).c_str(), written.quantizedLayers,
                written.floatLayers);
    if (written.format == exporting::ExportFormat::Gguf)
        for (const auto& note : written.notes)
            std::printf("note        %s\n", note.c_str());
}

} // namespace bitlens::cli
