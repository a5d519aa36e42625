#include "export/report_json.h"

#include "quant/scheme.h"

#include <cmath>

namespace bitlens::exporting {

using nlohmann::json;

json number(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

namespace {

json histogramJson(const analysis::HistogramData& h)
{
    return {{"edges", h.edges}, {"counts", h.counts}};
}

json metricJson(const std::optional<analysis::MetricValue>& m)
{
    return m ? json(m->value) : json(nullptr);
}

json clipJson(const quant::ClipChoice& c)
{
    json cand = json::array();
    for (const auto& [threshold, criterion] : c.candidates)
        cand.push_back({number(threshold), number(criterion)});
    return {{"lo", c.lo},
            {"hi", c.hi},
            {"observed_min", c.observedMin},
            {"observed_max", c.observedMax},
            {"method", c.method},
            {"why", c.why},
            {"histogram", {{"edges", c.histogram.edges}, {"counts", c.histogram.counts}}},
            {"candidates", cand}};
}

json curveJson(const std::vector<std::pair<std::int64_t, double>>& points)
{
    json steps = json::array();
    json values = json::array();
    for (const auto& [step, value] : points) {
        steps.push_back(step);
        values.push_back(number(value));
    }
    return {{"step", steps}, {"value", values}};
}

json qatJson(const quant::QatSummary& q)
{
    return {{"epochs", q.epochs},
            {"steps", q.steps},
            {"best_step", q.bestStep},
            {"final_loss", number(q.finalLoss)},
            {"loss", q.lossName},
            {"metric", q.metricName},
            {"start_metric", number(q.startMetric)},
            {"best_metric", number(q.bestMetric)},
            {"holdout_samples", q.holdoutSamples},
            {"train_samples", q.trainSamples},
            {"seconds", q.seconds},
            {"cancelled", q.cancelled},
            {"loss_curve", curveJson(q.lossCurve)},
            {"metric_curve", curveJson(q.metricCurve)}};
}

} // namespace

json reportToJson(const analysis::QuantReport& r)
{
    json layers = json::array();
    for (const auto& l : r.layers) {
        json row = {{"name", l.name},
                    {"op", l.op},
                    {"weight_type", l.weightType},
                    {"act_type", l.actType},
                    {"config", l.config},
                    {"kernel", l.kernel},
                    {"simulated", l.simulated},
                    {"params", l.params},
                    {"bytes_float", l.bytesFloat},
                    {"bytes_quantized", l.bytesQuantized},
                    {"sqnr_db", number(l.local.sqnrDb)},
                    {"mse", l.local.mse},
                    {"cosine", l.local.cosine},
                    {"max_abs_err", l.local.maxAbsErr},
                    {"sqnr_db_accumulated", number(l.accumulated.sqnrDb)},
                    {"mse_accumulated", l.accumulated.mse},
                    {"cosine_accumulated", l.accumulated.cosine},
                    {"max_abs_err_accumulated", l.accumulated.maxAbsErr},
                    {"weight_sqnr_db", number(l.weight.sqnrDb)},
                    {"error_histogram", histogramJson(l.errorHistogram)},
                    {"weight_histogram", histogramJson(l.weightHistogram)},
                    {"weight_range", {l.weightMin, l.weightMax}},
                    {"act_histogram", histogramJson(l.actHistogram)}};
        if (!l.weightHash.empty())
            row["weight_hash"] = l.weightHash;
        if (!l.note.empty())
            row["note"] = l.note;
        if (l.method != "rtn")
            row["method"] = {{"name", l.method},
                             {"loss_rtn", number(l.methodLossRtn)},
                             {"loss", number(l.methodLoss)}};
        if (l.actClip)
            row["act_clip"] = clipJson(*l.actClip);
        if (!l.calibrators.empty()) {
            json cal = json::array();
            for (const auto& c : l.calibrators)
                cal.push_back({{"method", c.method},
                               {"lo", c.lo},
                               {"hi", c.hi},
                               {"sqnr_db", number(c.sqnrDb)},
                               {"why", c.why}});
            row["calibrators"] = cal;
        }
        layers.push_back(std::move(row));
    }
    const std::string metricName = r.metricFloat     ? r.metricFloat->name
                                   : r.metricQuantized ? r.metricQuantized->name
                                                       : "top1";
    json model = {{"path", r.modelPath}, {"format", r.modelFormat}, {"params", r.params}};
    if (!r.modelNote.empty())
        model["note"] = r.modelNote;
    json j = {{"bitlens_version", BITLENS_VERSION},
            {"model", model},
            {"scheme", quant::schemeToJson(r.scheme)},
            {"metric",
             {{"name", metricName},
              {"float", metricJson(r.metricFloat)},
              {"quantized", metricJson(r.metricQuantized)},
              {"samples", r.metricQuantized ? json(r.metricQuantized->samples) : json(nullptr)},
              {"float_reused", r.metricFloatReused}}},
            {"size_bytes", {{"float", r.sizeFloat}, {"quantized", r.sizeQuantized}}},
            {"layers", layers},
            {"throughput", throughputToJson(r.throughput)},
            {"folded_batchnorms", r.foldedBatchNorms},
            {"calib_samples", r.calibSamples},
            {"reused_layers", r.reusedLayers},
            {"analysis_samples", r.analysisSamples},
            {"seconds", r.seconds},
            {"engine", r.engine}};
    if (r.qat)
        j["qat"] = qatJson(*r.qat);
    if (r.divergence) {
        const analysis::LmDivergence& d = *r.divergence;
        // As llama-perplexity --kl-divergence reports them; delta p as fractions, not %.
        j["kl_divergence"] = {
            {"tokens", d.tokens},
            {"ppl_float", number(d.pplFloat)},
            {"ppl_quantized", number(d.pplQuantized)},
            {"ln_ppl_ratio", {{"mean", number(d.lnPplRatio)},
                              {"uncertainty", number(d.lnPplRatioUncertainty)}}},
            {"ppl_correlation", number(d.pplCorrelation)},
            {"kld", {{"mean", number(d.meanKld)},
                     {"uncertainty", number(d.meanKldUncertainty)},
                     {"max", number(d.maxKld)},
                     {"p99.9", number(d.kldP999)},
                     {"p99", number(d.kldP99)},
                     {"p95", number(d.kldP95)},
                     {"p90", number(d.kldP90)},
                     {"median", number(d.medianKld)},
                     {"p10", number(d.kldP10)},
                     {"p5", number(d.kldP05)},
                     {"p1", number(d.kldP01)},
                     {"p0.1", number(d.kldP001)},
                     {"min", number(d.minKld)}}},
            {"same_top", {{"fraction", number(d.sameTop)},
                          {"uncertainty", number(d.sameTopUncertainty)}}},
            {"delta_p", {{"mean", number(d.meanDeltaP)},
                         {"uncertainty", number(d.meanDeltaPUncertainty)},
                         {"rms", number(d.rmsDeltaP)},
                         {"rms_uncertainty", number(d.rmsDeltaPUncertainty)},
                         {"max", number(d.maxDeltaP)},
                         {"p99.9", number(d.deltaPP999)},
                         {"p99", number(d.deltaPP99)},
                         {"p95", number(d.deltaPP95)},
                         {"p90", number(d.deltaPP90)},
                         {"p75", number(d.deltaPP75)},
                         {"median", number(d.medianDeltaP)},
                         {"p25", number(d.deltaPP25)},
                         {"p10", number(d.deltaPP10)},
                         {"p5", number(d.deltaPP05)},
                         {"p1", number(d.deltaPP01)},
                         {"p0.1", number(d.deltaPP001)},
                         {"min", number(d.minDeltaP)}}}};
    }
    return j;
}

json throughputToJson(const analysis::Throughput& t)
{
    json kernels = json::object();
    for (const auto& [layer, kernel] : t.kernels)
        kernels[layer] = kernel;
    json layerMs = json::object();
    for (const auto& [layer, ms] : t.layerMs)
        layerMs[layer] = {{"float", ms.first}, {"quantized", ms.second}};
    json j = {{"device", t.device},
              {"isa", t.isa},
              {"cpu", t.cpu},
              {"batch", t.batch},
              {"float_samples_per_s", t.floatSamplesPerS},
              {"quantized_samples_per_s", t.quantizedSamplesPerS},
              {"kernels", kernels},
              {"layers_ms", layerMs},
              {"runs", t.runs},
              {"layer_runs", t.layerRuns}};
    if (!t.isaNote.empty())
        j["isa_note"] = t.isaNote;
    if (!t.notes.empty())
        j["notes"] = t.notes;
    if (const std::string why = analysis::throughputWhy(t); !why.empty())
        j["why"] = why;
    return j;
}

json sensitivityToJson(const analysis::MetricValue& floatMetric,
                       const std::vector<analysis::SensitivityRow>& rows)
{
    json layers = json::array();
    bool byKld = false;
    for (const auto& row : rows) {
        json layer = {{"layer", row.layer},
                      {"metric", row.metric},
                      {"drop", row.drop},
                      {"sqnr_db", number(row.sqnrDb)}};
        if (row.kld) {
            layer["kld"] = number(*row.kld);
            byKld = true;
        }
        layers.push_back(std::move(layer));
    }
    return {{"metric", {{"name", floatMetric.name}, {"float", floatMetric.value}}},
            {"rank", byKld ? "kld" : "metric"},
            {"layers", layers}};
}

} // namespace bitlens::exporting
