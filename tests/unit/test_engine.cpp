// The quantization engine on small graphs: every preset runs, static calibration, overrides,
// LLM.int8() outliers, SmoothQuant, bad calibration data, and the analysis report.

#include "analysis/quant_report.h"
#include "export/report_json.h"
#include "quant/engine.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

using namespace bitlens;

namespace {

ir::Graph convNet(std::uint64_t seed)
{
    // Each tensor is drawn in a statement of its own: the order in which a compiler evaluates
    // function arguments is unspecified (g++ goes right to left, clang++ left to right), and
    // drawn inside one call the net would differ between the two builds (CI's ASan pass is
    // clang's). The order below is the one g++ gave the one-call form.
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const at::Tensor convW = at::randn({8, 1, 3, 3}, gen) * 0.5;
    const at::Tensor bnVar = at::rand({8}, gen) + 0.5;
    const at::Tensor bnMean = at::randn({8}, gen) * 0.1;
    const at::Tensor bnBias = at::randn({8}, gen) * 0.1;
    const at::Tensor bnScale = at::rand({8}, gen) + 0.5;
    const at::Tensor fc1B = at::randn({32}, gen) * 0.1;
    const at::Tensor fc1W = at::randn({32, 128}, gen) * 0.1;
    const at::Tensor fc2W = at::randn({4, 32}, gen) * 0.2;
    ir::GraphBuilder g("net");
    auto x = g.input("x", {-1, 1, 8, 8});
    x = g.conv2d("conv", x, convW, std::nullopt, {1, 1, 1, 1});
    x = g.batchNorm("bn", x, bnScale, bnBias, bnMean, bnVar);
    x = g.unary("relu", ir::OpKind::Relu, x);
    x = g.maxPool("pool", x, 2, 2);
    x = g.flatten("flat", x);
    x = g.linear("fc1", x, fc1W, fc1B);
    x = g.unary("fc1.relu", ir::OpKind::Relu, x);
    x = g.linear("fc2", x, fc2W, at::zeros({4}));
    g.output(x);
    return g.build().value();
}

at::Tensor images(std::int64_t n, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return at::rand({n, 1, 8, 8}, gen);
}

double outputSqnr(const ir::Graph& graph, const quant::QuantizedModel& model, const at::Tensor& x)
{
    c10::InferenceMode guard;
    exec::Executor ref(graph);
    exec::Executor q(model.graph);
    q.addHook(quant::makeQuantHook(model));
    return analysis::compareTensors(ref.run({x}).value().front(), q.run({x}).value().front())
        .sqnrDb;
}

quant::QuantizedModel prepared(const ir::Graph& graph, const std::string& spec,
                               const at::Tensor& calib)
{
    auto scheme = quant::parseScheme(spec);
    EXPECT_TRUE(scheme.ok()) << spec;
    auto model = quant::prepare(graph, *scheme, calib);
    EXPECT_TRUE(model.ok()) << spec << ": " << (model.ok() ? "" : model.error().userMessage());
    return std::move(model).value();
}

} // namespace

TEST(Engine, EveryPresetRunsAndStaysCloseToFloat)
{
    const auto graph = convNet(1);
    const auto calib = images(200, 2);
    const auto x = images(32, 3);
    for (const auto& preset : quant::presetNames()) {
        const auto model = prepared(graph, preset, calib);
        const double sqnr = outputSqnr(graph, model, x);
        // 4-bit weights (and E5M2's 2 mantissa bits) lose more than 8-bit integers; 16-bit
        // floats almost nothing. mxfp4 / nvfp4 (without -w) quantize the inputs to 4 bits too.
        const bool coarse = preset.find("w4") != std::string::npos || preset == "static-w4a8" ||
                            preset.find("fp4") != std::string::npos ||
                            preset == "fp8-e5m2" || preset.find("gguf-q4") != std::string::npos;
        const double floor =
            coarse ? 10.0
                   : (preset == "fp16" || preset == "bf16" || preset == "gguf-f16" ? 35.0 : 18.0);
        EXPECT_GT(sqnr, floor) << preset;
        EXPECT_LT(model.bytesQuantized, model.bytesFloat) << preset;
    }
}

TEST(Engine, StaticInt8FoldsBatchNormCalibratesAndShrinksToAQuarter)
{
    const auto graph = convNet(4);
    const auto model = prepared(graph, "static-int8", images(300, 5));
    EXPECT_EQ(model.foldedBatchNorms, std::vector<std::string>{"conv<-bn"});
    EXPECT_EQ(model.calibSamples, 300);
    ASSERT_EQ(model.layers.size(), 3u);
    for (const auto& [name, lq] : model.layers) {
        ASSERT_TRUE(lq.act.has_value()) << name;
        ASSERT_TRUE(lq.actClip.has_value()) << name;
        EXPECT_LT(lq.actClip->lo, lq.actClip->hi);
        EXPECT_EQ(lq.actClip->method, "minmax");
        // Every per-channel weight row takes at most 256 distinct values.
        const at::Tensor view = quant::weightView(*std::find_if(
            model.graph.nodes.begin(), model.graph.nodes.end(),
            [&layer = name](const ir::Node& n) { return n.name == layer; }), lq.weightFq);
        for (std::int64_t r = 0; r < view.size(0); ++r)
            EXPECT_LE(std::get<0>(at::_unique(view[r])).numel(), 256);
    }
    const double ratio =
        static_cast<double>(model.bytesQuantized) / static_cast<double>(model.bytesFloat);
    EXPECT_LT(ratio, 0.30);
}

TEST(Engine, KeepFloatOverrideLeavesThatLayerExact)
{
    const auto graph = convNet(6);
    auto scheme = quant::parseScheme("dynamic-int8").value();
    scheme.overrides["fc2"] = std::nullopt;
    auto model = quant::prepare(graph, scheme, at::Tensor());
    ASSERT_TRUE(model.ok());
    EXPECT_TRUE(model->layers.at("fc2").config.keepFloat);
    auto report = analysis::analyze(graph, *model, images(16, 7), nullptr, {});
    ASSERT_TRUE(report.ok()) << report.error().userMessage();
    for (const auto& l : report->layers) {
        if (l.name == "fc2") {
            EXPECT_EQ(l.weightType, "float32");
            EXPECT_TRUE(std::isinf(l.local.sqnrDb));
            EXPECT_EQ(l.bytesQuantized, l.bytesFloat);
        } else {
            EXPECT_TRUE(std::isfinite(l.local.sqnrDb)) << l.name;
        }
    }
}

TEST(Engine, CalibrationWithNaNNamesTheBatchAndLayer)
{
    const auto graph = convNet(8);
    auto calib = images(250, 9);
    calib[120][0][3][3] = std::numeric_limits<float>::quiet_NaN();
    auto scheme = quant::parseScheme("static-int8").value();
    auto model = quant::prepare(graph, scheme, calib);
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.error().code, ErrorCode::BadInput);
    EXPECT_EQ(model.error().message.rfind("calibration batch 2 (samples 100-199): input of layer "
                                          "'conv' contains NaN", 0),
              0u)
        << model.error().message;
}

TEST(Engine, StaticSchemeWithoutCalibrationDataIsAUsageError)
{
    auto scheme = quant::parseScheme("static-int8").value();
    auto model = quant::prepare(convNet(10), scheme, at::Tensor());
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.error().code, ErrorCode::Usage);
}

TEST(Engine, ConstantCalibrationDataGivesValidScales)
{
    const auto graph = convNet(11);
    const auto model = prepared(graph, "static-int8", at::zeros({50, 1, 8, 8}));
    for (const auto& [name, lq] : model.layers) {
        ASSERT_TRUE(lq.act.has_value());
        EXPECT_TRUE(at::all(lq.act->scale > 0).item<bool>()) << name;
        EXPECT_TRUE(at::all(at::isfinite(lq.weightFq)).item<bool>()) << name;
    }
    c10::InferenceMode guard;
    exec::Executor q(model.graph);
    q.addHook(quant::makeQuantHook(model));
    EXPECT_TRUE(at::all(at::isfinite(q.run({images(8, 12)}).value().front())).item<bool>());
}

TEST(Engine, GroupSizeThatDoesNotDivideEndsRowsInAShorterBlock)
{
    const auto model = prepared(convNet(13), "w4-int4:group=64", at::Tensor());
    const auto& conv = model.layers.at("conv");
    EXPECT_NE(conv.note.find("group 64 does not divide the 9 inputs"), std::string::npos);
    EXPECT_EQ(conv.weight.scale.sizes(), (at::IntArrayRef{8, 1}));  // one short block per row
    EXPECT_EQ(model.layers.at("fc1").weightGranularity.groupSize, 64);
    EXPECT_EQ(model.layers.at("fc1").weight.scale.sizes(), (at::IntArrayRef{32, 2}));
    EXPECT_TRUE(model.layers.at("fc1").note.empty());
}

TEST(Engine, LlmInt8KeepsOutlierColumnsInSixteenBits)
{
    at::Generator gen = at::detail::createCPUGenerator(14);
    ir::GraphBuilder g("mlp");
    auto x = g.input("x", {-1, 64});
    g.output(g.linear("fc", x, at::randn({16, 64}, gen) * 0.1, std::nullopt));
    const auto graph = g.build().value();
    at::Tensor input = at::randn({32, 64}, gen);
    input.select(1, 5).mul_(60.0);  // one outlier feature, as in large language models
    const auto with = prepared(graph, "llm-int8", at::Tensor());
    const auto without = prepared(graph, "llm-int8:threshold=1e9", at::Tensor());
    EXPECT_GT(outputSqnr(graph, with, input), outputSqnr(graph, without, input) + 6.0);
}

TEST(Engine, SmoothQuantHelpsActivationsWithAnOutlierChannel)
{
    at::Generator gen = at::detail::createCPUGenerator(15);
    ir::GraphBuilder g("mlp");
    auto x = g.input("x", {-1, 64});
    g.output(g.linear("fc", x, at::randn({16, 64}, gen) * 0.1, std::nullopt));
    const auto graph = g.build().value();
    at::Tensor data = at::randn({256, 64}, gen);
    data.select(1, 3).mul_(50.0);
    const auto smooth = prepared(graph, "smoothquant-int8", data);
    const auto plain = prepared(graph, "smoothquant-int8:alpha=0", data);
    ASSERT_TRUE(smooth.layers.at("fc").smooth.defined());
    const at::Tensor test = data.slice(0, 0, 64);
    EXPECT_GT(outputSqnr(graph, smooth, test), outputSqnr(graph, plain, test) + 3.0);
}

TEST(Engine, ReportJsonHasTheContractKeys)
{
    const auto graph = convNet(16);
    const auto model = prepared(graph, "static-int8", images(100, 17));
    io::Dataset eval;
    eval.path = "synthetic";
    eval.inputs = images(64, 18);
    eval.labels = at::randint(0, 4, {64}, at::TensorOptions().dtype(at::kLong));
    auto report = analysis::analyze(graph, model, eval.inputs, &eval, {});
    ASSERT_TRUE(report.ok()) << report.error().userMessage();
    const auto j = exporting::reportToJson(*report);
    for (const char* key : {"bitlens_version", "model", "scheme", "metric", "size_bytes",
                            "layers", "throughput"})
        EXPECT_TRUE(j.contains(key)) << key;
    for (const char* key : {"name", "float", "quantized"})
        EXPECT_TRUE(j["metric"].contains(key)) << key;
    ASSERT_EQ(j["layers"].size(), 3u);
    for (const char* key : {"name", "op", "weight_type", "act_type", "params", "bytes_float",
                            "bytes_quantized", "sqnr_db", "mse", "cosine", "max_abs_err",
                            "sqnr_db_accumulated", "error_histogram"})
        EXPECT_TRUE(j["layers"][0].contains(key)) << key;
    EXPECT_EQ(j["layers"][0]["error_histogram"]["edges"].size(),
              j["layers"][0]["error_histogram"]["counts"].size() + 1);
    for (const char* key : {"device", "batch", "float_samples_per_s", "quantized_samples_per_s",
                            "kernels"})
        EXPECT_TRUE(j["throughput"].contains(key)) << key;
    EXPECT_GT(j["throughput"]["float_samples_per_s"].get<double>(), 0.0);
    // The first layer sees float inputs either way, so its local and accumulated errors agree.
    EXPECT_NEAR(report->layers[0].local.sqnrDb, report->layers[0].accumulated.sqnrDb, 1e-6);
}

TEST(Engine, RePrepareAfterAnOverrideReusesUnchangedLayersAndMatchesAFreshRun)
{
    const auto graph = convNet(21);
    const auto calib = images(200, 22);
    const auto first = prepared(graph, "static-int8:observer=percentile:99.9", calib);
    EXPECT_TRUE(first.reusedLayers.empty());

    auto scheme = quant::parseScheme("static-int8:observer=percentile:99.9").value();
    scheme.overrides["fc1"] = quant::parseScheme("w4-int4").value().config;
    auto again = quant::prepare(graph, scheme, calib, Progress::none(), CancelToken(), &first);
    ASSERT_TRUE(again.ok()) << again.error().userMessage();
    EXPECT_EQ(again->reusedLayers, (std::vector<std::string>{"conv", "fc2"}));
    auto fresh = quant::prepare(graph, scheme, calib);
    ASSERT_TRUE(fresh.ok());
    ASSERT_EQ(again->layers.size(), fresh->layers.size());
    for (const auto& [name, lq] : fresh->layers) {
        const auto& r = again->layers.at(name);
        EXPECT_TRUE(at::equal(r.weightFq, lq.weightFq)) << name;
        ASSERT_EQ(r.act.has_value(), lq.act.has_value()) << name;
        if (lq.act) {
            EXPECT_TRUE(at::equal(r.act->scale, lq.act->scale)) << name;
            EXPECT_TRUE(at::equal(r.act->zeroPoint, lq.act->zeroPoint)) << name;
        }
    }
    EXPECT_EQ(again->bytesQuantized, fresh->bytesQuantized);
    EXPECT_EQ(again->calibSamples, fresh->calibSamples);
    const auto x = images(16, 23);
    EXPECT_DOUBLE_EQ(outputSqnr(graph, *again, x), outputSqnr(graph, *fresh, x));

    // Different calibration size: calibrated layers are not reused.
    auto fewer = quant::prepare(graph, scheme, calib.slice(0, 0, 100), Progress::none(),
                                CancelToken(), &first);
    ASSERT_TRUE(fewer.ok());
    EXPECT_TRUE(fewer->reusedLayers.empty());
}

TEST(Engine, BlockFormatsRefuseNonFiniteWeightsNamingTheLayer)
{
    // An MX or NVFP4 block holding NaN / Inf would get a NaN scale (torchao: a NaN block, or,
    // NVFP4, a NaN tensor scale for every block): refused before quantizing, layer named.
    for (const char* spec : {"mxfp4-w", "nvfp4", "mxint8", "mxfp8-e5m2-w:scale=rceil"}) {
        for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
            at::Generator gen = at::detail::createCPUGenerator(3);
            ir::GraphBuilder g("net");
            auto x = g.input("x", {-1, 64});
            at::Tensor w = at::randn({16, 64}, gen);
            w[5][40] = bad;
            x = g.linear("fc1", x, w, at::zeros({16}));
            g.output(x);
            const ir::Graph graph = g.build().value();
            auto scheme = quant::parseScheme(spec);
            ASSERT_TRUE(scheme.ok()) << spec;
            auto model = quant::prepare(graph, *scheme, at::rand({8, 64}, gen));
            ASSERT_FALSE(model.ok()) << spec;
            EXPECT_EQ(model.error().code, ErrorCode::BadInput);
            EXPECT_EQ(model.error().message,
                      std::string("weight of layer 'fc1' holds ") +
                          (std::isnan(bad) ? "NaN" : "Inf") + " (element 360 of 1024)")
                << spec;
        }
    }
}

TEST(Throughput, PlanFitsTheBudgetAndKeepsOneRunOfEach)
{
    // budget 0: the full protocol (3 rounds of the median of 3, 5 per-layer runs)
    const auto full = analysis::planThroughputRuns(0.5, 0.0);
    EXPECT_EQ(full.rounds * full.reps, 9);
    EXPECT_EQ(full.layerRuns, 5);
    // A cheap model fits the full protocol in the budget.
    const auto cheap = analysis::planThroughputRuns(0.01, 6.0);
    EXPECT_EQ(cheap.rounds, 3);
    EXPECT_EQ(cheap.reps, 3);
    EXPECT_EQ(cheap.layerRuns, 5);
    // smollm2-135m's ~0.8 s per float + quantized pair: 4 pairs for the totals, 3 per layer
    // (7 x 0.8 = 5.6 s, where the full protocol took ~11 s).
    const auto lm = analysis::planThroughputRuns(0.8, 6.0);
    EXPECT_EQ(lm.rounds * lm.reps, 3);
    EXPECT_EQ(lm.layerRuns, 3);
    EXPECT_LE((lm.rounds * lm.reps + lm.layerRuns) * 0.8, 6.0);
    // A model slower than the budget still gets one timed run of each.
    const auto huge = analysis::planThroughputRuns(30.0, 6.0);
    EXPECT_EQ(huge.rounds * huge.reps, 1);
    EXPECT_EQ(huge.layerRuns, 1);
}

TEST(Throughput, ReportsEachRunAndStopsWhenCancelled)
{
    const auto graph = convNet(21);
    const auto model = prepared(graph, "dynamic-int8", at::Tensor());
    analysis::AnalysisOptions options;
    std::vector<std::string> stages;
    Progress progress([&](double, const std::string& stage) { stages.push_back(stage); });
    auto t = analysis::measureThroughput(model, images(8, 22), options, progress);
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_GT(t->runs, 0);
    EXPECT_GT(t->quantizedSamplesPerS, 0.0);
    const int pairs = t->runs + t->layerRuns;
    EXPECT_EQ(stages.front(), "measuring throughput: warm-up");
    EXPECT_EQ(stages.back(), "measuring throughput: run " + std::to_string(pairs) + " of " +
                                 std::to_string(pairs));

    // Cancelled once the first run is reported: no further run, and the call says so.
    CancelToken cancel;
    int reported = 0;
    Progress cancelling([&](double, const std::string& stage) {
        if (stage.find(": run ") != std::string::npos && ++reported == 1)
            cancel.cancel();
    });
    auto stopped = analysis::measureThroughput(model, images(8, 22), options, cancelling, cancel);
    ASSERT_FALSE(stopped.ok());
    EXPECT_EQ(stopped.error().code, ErrorCode::Cancelled);
    EXPECT_EQ(reported, 1);
}
