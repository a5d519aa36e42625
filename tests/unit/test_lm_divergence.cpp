// KL divergence of a quantized language model against its float model, as llama-perplexity
// --kl-divergence defines the statistics: checked against a torch reference (float64
// log-softmax over the logits BitLens's executor produced, numpy percentiles) on the tiny random
// llama of tests/data/hf, quantized w4-int4 and int8; and the perplexities of the shared pass
// must be evaluatePerplexity's own numbers, bit for bit.

#include "analysis/lm_metrics.h"
#include "analysis/quant_report.h"
#include "export/report_json.h"
#include "io/dataset.h"
#include "model/hf_builders.h"
#include "python_oracle.h"
#include "quant/engine.h"
#include "quant/scheme.h"
#include "temp_dir.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using namespace bitlens;
using nlohmann::json;

namespace {

const std::string kDir = std::string(BITLENS_TEST_DATA) + "/hf/";

struct TinyLlama {
    ir::Graph graph;
    at::Tensor windows;
    std::int64_t overlap = 0;
};

TinyLlama tinyLlama()
{
    TinyLlama t;
    std::ifstream in(kDir + "llama.json");
    const json config = json::parse(in);
    auto arrays = io::readNpz(kDir + "llama.npz");
    EXPECT_TRUE(arrays.ok()) << (arrays.ok() ? "" : arrays.error().userMessage());
    if (!arrays.ok())
        return t;
    std::map<std::string, at::Tensor> weights;
    for (auto& [key, v] : *arrays) {
        if (key == "__ppl_windows")
            t.windows = v;
        else if (key == "__ppl_overlap")
            t.overlap = v.item<std::int64_t>();
        else if (key.rfind("__", 0) != 0)
            weights[key] = v;
    }
    auto g = model::buildFromHfConfig(config, weights, "llama");
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().userMessage());
    if (g.ok())
        t.graph = std::move(*g);
    return t;
}

// Reads float.npy and quant.npy (logits [N, S, V]), windows.npy [N, S] and the overlap, and
// prints llama-perplexity's statistics over perplexity's scored tokens as JSON.
constexpr const char* kOracle = R"PY(
import json, sys
import numpy as np, torch
d, overlap = sys.argv[1], int(sys.argv[2])
lf = torch.from_numpy(np.load(d + "/float.npy")).double()
lq = torch.from_numpy(np.load(d + "/quant.npy")).double()
ids = torch.from_numpy(np.load(d + "/windows.npy")).long()
n, s, v = lf.shape
keep = torch.ones(n, s - 1, dtype=torch.bool)
if overlap > 0:
    pos = torch.arange(1, s)
    keep = (pos >= overlap).unsqueeze(0) | (torch.arange(n) == 0).unsqueeze(1)
lpf = torch.log_softmax(lf[:, :-1], -1)[keep]
lpq = torch.log_softmax(lq[:, :-1], -1)[keep]
tgt = ids[:, 1:][keep].unsqueeze(-1)
kld = (lpf.exp() * (lpf - lpq)).sum(-1).numpy()
pf = lpf.gather(1, tgt).squeeze(-1).exp()
pq = lpq.gather(1, tgt).squeeze(-1).exp()
dp = (pq - pf).numpy()
same = int((lf[:, :-1][keep].argmax(-1) == lq[:, :-1][keep].argmax(-1)).sum())
nllq = -lpq.gather(1, tgt).squeeze(-1).numpy()
nllf = -lpf.gather(1, tgt).squeeze(-1).numpy()
pct = lambda x, f: float(np.percentile(x, 100 * f, method="linear"))
print(json.dumps({
    "tokens": int(keep.sum()), "same_top": same / int(keep.sum()),
    "kld_mean": float(kld.mean()), "kld_median": float(np.median(kld)),
    "kld_p99": pct(kld, 0.99), "kld_p90": pct(kld, 0.90), "kld_p10": pct(kld, 0.10),
    "kld_max": float(kld.max()), "kld_min": float(kld.min()),
    "dp_mean": float(dp.mean()), "dp_rms": float(np.sqrt((dp * dp).mean())),
    "dp_median": float(np.median(dp)), "dp_p01": pct(dp, 0.01), "dp_p99": pct(dp, 0.99),
    "dp_p75": pct(dp, 0.75), "dp_max": float(dp.max()), "dp_min": float(dp.min()),
    "ln_ppl_ratio": float(nllq.mean() - nllf.mean()),
    "ppl_correlation": float(np.corrcoef(nllq, nllf)[0, 1]),
}))
)PY";

at::Tensor logitsOf(const ir::Graph& graph, const at::Tensor& windows,
                    std::shared_ptr<exec::NodeHook> hook)
{
    exec::Executor executor(graph);
    if (hook)
        executor.addHook(hook);
    // In batches of SequenceMetricOptions' default 8 windows, as evaluateLmDivergence runs this
    // small-vocabulary model: the logits are then the same numbers.
    std::vector<at::Tensor> parts;
    for (std::int64_t start = 0; start < windows.size(0); start += 8) {
        auto out = executor.run(exec::inputsForBatch(
            graph, windows.slice(0, start, std::min(windows.size(0), start + 8)).to(at::kLong)));
        EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().userMessage());
        if (!out.ok())
            return at::Tensor();
        parts.push_back(out->front().to(at::kFloat));
    }
    return at::cat(parts).contiguous();
}

void expectClose(double actual, double expected, const char* what)
{
    EXPECT_NEAR(actual, expected, 1e-6 * std::abs(expected) + 1e-12) << what;
}

} // namespace

TEST(LmDivergence, StatisticsFollowLlamaPerplexityDefinitions)
{
    // 101 tokens with KLD 1..101 (shuffled) and dp = (i - 50) / 100.
    std::vector<double> kld, dp, nllQ, nllF;
    for (int i = 0; i < 101; ++i) {
        kld.push_back(static_cast<double>((i * 37) % 101 + 1));
        dp.push_back((i - 50) / 100.0);
        nllF.push_back(1.0 + 0.01 * i);
        nllQ.push_back(1.0 + 0.01 * i + 0.001 * (i % 7));
    }
    const analysis::LmDivergence d = analysis::summarizeDivergence(nllQ, nllF, kld, dp, 75);
    EXPECT_EQ(d.tokens, 101);
    EXPECT_DOUBLE_EQ(d.meanKld, 51.0);
    EXPECT_DOUBLE_EQ(d.medianKld, 51.0);
    EXPECT_DOUBLE_EQ(d.maxKld, 101.0);
    EXPECT_DOUBLE_EQ(d.minKld, 1.0);
    EXPECT_DOUBLE_EQ(d.kldP99, 100.0);   // 0.99 * 100 = index 99 of 1..101
    EXPECT_NEAR(d.kldP001, 1.1, 1e-12);  // 0.1 of the way from 1 to 2
    EXPECT_NEAR(d.kldP999, 100.9, 1e-9);
    EXPECT_NEAR(d.meanDeltaP, 0.0, 1e-15);
    EXPECT_NEAR(d.medianDeltaP, 0.0, 1e-15);
    EXPECT_NEAR(d.deltaPP25, -0.25, 1e-12);
    EXPECT_NEAR(d.sameTop, 75.0 / 101.0, 1e-15);
    EXPECT_NEAR(d.sameTopUncertainty, std::sqrt(d.sameTop * (1 - d.sameTop) / 100.0), 1e-15);
    // sqrt(var / (n - 1)) of 1..101: var = (101^2 - 1) / 12 = 850.
    EXPECT_NEAR(d.meanKldUncertainty, std::sqrt(850.0 / 100.0), 1e-9);
    double lnRatio = 0.0;
    for (int i = 0; i < 101; ++i)
        lnRatio += nllQ[i] - nllF[i];
    EXPECT_NEAR(d.lnPplRatio, lnRatio / 101.0, 1e-12);
    EXPECT_GT(d.pplCorrelation, 0.99);
}

TEST(LmDivergence, FloatAgainstItselfIsZero)
{
    const TinyLlama t = tinyLlama();
    ASSERT_TRUE(t.windows.defined());
    analysis::SequenceMetricOptions options;
    options.overlap = t.overlap;
    auto d = analysis::evaluateLmDivergence(t.graph, t.graph, nullptr, t.windows, options);
    ASSERT_TRUE(d.ok()) << d.error().userMessage();
    EXPECT_EQ(d->meanKld, 0.0);
    EXPECT_EQ(d->maxKld, 0.0);
    EXPECT_EQ(d->sameTop, 1.0);
    EXPECT_EQ(d->rmsDeltaP, 0.0);
    EXPECT_EQ(d->pplFloat, d->pplQuantized);
}

TEST(LmDivergence, MatchesTorchReferenceAndPerplexityBitForBit)
{
    BITLENS_PYTHON_OR_SKIP(python);
    c10::InferenceMode guard;
    const TinyLlama t = tinyLlama();
    ASSERT_TRUE(t.windows.defined());
    for (const char* spec : {"w4-int4", "dynamic-int8"}) {
        SCOPED_TRACE(spec);
        auto scheme = quant::parseScheme(spec);
        ASSERT_TRUE(scheme.ok()) << scheme.error().userMessage();
        auto model = quant::prepare(t.graph, *scheme, t.windows.slice(0, 0, 2));
        ASSERT_TRUE(model.ok()) << model.error().userMessage();
        analysis::SequenceMetricOptions options;
        options.overlap = t.overlap;
        auto d = analysis::evaluateLmDivergence(t.graph, model->graph,
                                                quant::makeQuantHook(*model, {}), t.windows,
                                                options);
        ASSERT_TRUE(d.ok()) << d.error().userMessage();
        EXPECT_GT(d->meanKld, 0.0);  // the quantization moved the distributions

        // The shared pass's perplexities are evaluatePerplexity's, bit for bit.
        auto pf = analysis::evaluatePerplexity(t.graph, t.windows, options);
        ASSERT_TRUE(pf.ok());
        auto pq = analysis::evaluatePerplexity(model->graph, t.windows, options,
                                               quant::makeQuantHook(*model, {}));
        ASSERT_TRUE(pq.ok());
        EXPECT_EQ(d->pplFloat, pf->value);
        EXPECT_EQ(d->pplQuantized, pq->value);
        EXPECT_EQ(d->tokens, pf->samples);

        test::TempDir dir;
        ASSERT_TRUE(io::writeNpy(logitsOf(t.graph, t.windows, nullptr), dir.path() + "/float.npy").ok());
        ASSERT_TRUE(io::writeNpy(logitsOf(model->graph, t.windows, quant::makeQuantHook(*model, {})),
                                 dir.path() + "/quant.npy")
                        .ok());
        ASSERT_TRUE(io::writeNpy(t.windows.to(at::kLong), dir.path() + "/windows.npy").ok());
        std::string output;
        ASSERT_EQ(test::runPython(python, dir.path(), kOracle,
                                  "'" + dir.path() + "' " + std::to_string(t.overlap), output),
                  0)
            << output;
        const json ref = json::parse(output.substr(output.find('{')));
        EXPECT_EQ(d->tokens, ref["tokens"].get<std::int64_t>());
        EXPECT_DOUBLE_EQ(d->sameTop, ref["same_top"].get<double>());
        expectClose(d->meanKld, ref["kld_mean"], "mean KLD");
        expectClose(d->medianKld, ref["kld_median"], "median KLD");
        expectClose(d->kldP99, ref["kld_p99"], "99% KLD");
        expectClose(d->kldP90, ref["kld_p90"], "90% KLD");
        expectClose(d->kldP10, ref["kld_p10"], "10% KLD");
        expectClose(d->maxKld, ref["kld_max"], "max KLD");
        expectClose(d->minKld, ref["kld_min"], "min KLD");
        expectClose(d->meanDeltaP, ref["dp_mean"], "mean dp");
        expectClose(d->rmsDeltaP, ref["dp_rms"], "RMS dp");
        expectClose(d->medianDeltaP, ref["dp_median"], "median dp");
        expectClose(d->deltaPP01, ref["dp_p01"], "1% dp");
        expectClose(d->deltaPP99, ref["dp_p99"], "99% dp");
        expectClose(d->deltaPP75, ref["dp_p75"], "75% dp");
        expectClose(d->maxDeltaP, ref["dp_max"], "max dp");
        expectClose(d->minDeltaP, ref["dp_min"], "min dp");
        EXPECT_NEAR(d->lnPplRatio, ref["ln_ppl_ratio"].get<double>(), 1e-6);
        EXPECT_NEAR(d->pplCorrelation, ref["ppl_correlation"].get<double>(), 1e-6);
    }
}

TEST(LmDivergence, ReportCarriesItForLanguageModels)
{
    c10::InferenceMode guard;
    const TinyLlama t = tinyLlama();
    ASSERT_TRUE(t.windows.defined());
    auto scheme = quant::parseScheme("w4-int4");
    ASSERT_TRUE(scheme.ok());
    auto model = quant::prepare(t.graph, *scheme, at::Tensor());
    ASSERT_TRUE(model.ok()) << model.error().userMessage();
    io::Dataset eval;
    eval.path = "windows.npy";
    eval.inputs = t.windows;
    analysis::AnalysisOptions options;
    options.sequence.overlap = t.overlap;
    auto report = analysis::analyze(t.graph, *model, t.windows.slice(0, 0, 2), &eval, options);
    ASSERT_TRUE(report.ok()) << report.error().userMessage();
    ASSERT_TRUE(report->divergence.has_value());
    ASSERT_TRUE(report->metricQuantized.has_value());
    EXPECT_EQ(report->metricQuantized->value, report->divergence->pplQuantized);
    EXPECT_EQ(report->metricFloat->value, report->divergence->pplFloat);
    const json j = exporting::reportToJson(*report);
    ASSERT_TRUE(j.contains("kl_divergence"));
    EXPECT_EQ(j["kl_divergence"]["kld"]["mean"].get<double>(), report->divergence->meanKld);
    EXPECT_EQ(j["kl_divergence"]["tokens"].get<std::int64_t>(), report->divergence->tokens);
    EXPECT_TRUE(j["kl_divergence"]["same_top"]["fraction"].is_number());
    EXPECT_TRUE(j["kl_divergence"]["delta_p"]["p99.9"].is_number());
}

// Sensitivity ranked by KL divergence: each layer quantized alone, its mean KLD the one
// evaluateLmDivergence gives for that layer, rows sorted by it; JSON says how it ranked; a
// classifier is refused with a usage error.
TEST(LmDivergence, SensitivityRanksLayersByKld)
{
    c10::InferenceMode guard;
    const TinyLlama t = tinyLlama();
    ASSERT_TRUE(t.windows.defined());
    auto scheme = quant::parseScheme("w4-int4");
    ASSERT_TRUE(scheme.ok());
    auto model = quant::prepare(t.graph, *scheme, at::Tensor());
    ASSERT_TRUE(model.ok()) << model.error().userMessage();
    io::Dataset eval;
    eval.path = "windows.npy";
    eval.inputs = t.windows.slice(0, 0, 2);
    analysis::AnalysisOptions options;
    options.sequence.overlap = t.overlap;
    auto floatMetric = analysis::evaluateMetric(t.graph, eval, c10::Device(c10::kCPU), 256,
                                                nullptr, options.sequence);
    ASSERT_TRUE(floatMetric.ok()) << floatMetric.error().userMessage();

    options.sensitivityByKld = true;
    auto rows = analysis::sensitivity(t.graph, *model, eval, t.windows.slice(0, 0, 1), options,
                                      *floatMetric);
    ASSERT_TRUE(rows.ok()) << rows.error().userMessage();
    ASSERT_GE(rows->size(), 3U);
    for (std::size_t i = 0; i < rows->size(); ++i) {
        const auto& r = (*rows)[i];
        ASSERT_TRUE(r.kld.has_value()) << r.layer;
        EXPECT_GT(*r.kld, 0.0) << r.layer;
        if (i > 0)
            EXPECT_GE(*(*rows)[i - 1].kld, *r.kld) << "rows are not sorted by KLD at " << r.layer;
    }
    // The top row's KLD and perplexity are the divergence pass's for that layer alone.
    const auto& top = rows->front();
    auto alone = analysis::evaluateLmDivergence(t.graph, model->graph,
                                                quant::makeQuantHook(*model, {top.layer}),
                                                eval.inputs, options.sequence);
    ASSERT_TRUE(alone.ok()) << alone.error().userMessage();
    EXPECT_EQ(*top.kld, alone->meanKld);
    EXPECT_EQ(top.metric, alone->pplQuantized);
    EXPECT_DOUBLE_EQ(top.drop, alone->pplQuantized - floatMetric->value);

    const json j = exporting::sensitivityToJson(*floatMetric, *rows);
    EXPECT_EQ(j["rank"], "kld");
    EXPECT_EQ(j["layers"][0]["kld"].get<double>(), *top.kld);

    // Ranked by the metric (the default), no KLD is measured or written.
    options.sensitivityByKld = false;
    auto byMetric = analysis::sensitivity(t.graph, *model, eval, t.windows.slice(0, 0, 1), options,
                                          *floatMetric);
    ASSERT_TRUE(byMetric.ok()) << byMetric.error().userMessage();
    EXPECT_FALSE(byMetric->front().kld.has_value());
    EXPECT_EQ(exporting::sensitivityToJson(*floatMetric, *byMetric)["rank"], "metric");
}
