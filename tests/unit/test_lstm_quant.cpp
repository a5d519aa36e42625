// Quantized LSTM / GRU layers: the engine's quantized recurrence against a reference written
// here with plain torch ops (fake_quantize_per_channel_affine / per_tensor_affine, the gate
// equations), dynamic and static int8 close to float, weight-only schemes, the plan, the
// analysis rows and the exports that must refuse such layers.

#include "temp_dir.h"

#include "analysis/quant_report.h"
#include "exec/executor.h"
#include "export/export.h"
#include "export/onnx_qdq.h"
#include "io/dataset.h"
#include "ir/graph.h"
#include "quant/engine.h"
#include "quant/real_kernels.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace bitlens;

namespace {

constexpr std::int64_t kIn = 6;
constexpr std::int64_t kHidden = 8;

/// One LSTM (or GRU) node, batch-first: X [B, S, F] -> Y [B, S, 1, H]; weights U(-0.5, 0.5).
ir::Graph rnnGraph(ir::OpKind op, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const std::int64_t gates = op == ir::OpKind::LSTM ? 4 : 3;
    ir::Graph g;
    g.name = "rnn";
    g.inputs.push_back({"x", ir::DType::Float32, {-1, -1, kIn}});
    g.initializers["W"] = at::empty({1, gates * kHidden, kIn}).uniform_(-0.5, 0.5, gen);
    g.initializers["R"] = at::empty({1, gates * kHidden, kHidden}).uniform_(-0.5, 0.5, gen);
    g.initializers["B"] = at::empty({1, 2 * gates * kHidden}).uniform_(-0.2, 0.2, gen);
    ir::Node n;
    n.name = op == ir::OpKind::LSTM ? "lstm" : "gru";
    n.op = op;
    n.inputs = {"x", "W", "R", "B"};
    n.outputs = {"y"};
    n.attrs.set("hidden_size", kHidden);
    n.attrs.set("layout", std::int64_t{1});
    if (op == ir::OpKind::GRU)
        n.attrs.set("linear_before_reset", std::int64_t{1});
    g.nodes.push_back(n);
    g.outputs.push_back({"y", ir::DType::Float32, {}});
    g.metadata["task"] = "sequence";
    return g;
}

at::Tensor input(std::int64_t batch, std::int64_t seq, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return at::randn({batch, seq, kIn}, gen) * 1.5;
}

quant::QuantizedModel prepared(const ir::Graph& g, const std::string& spec,
                               const at::Tensor& calib = at::Tensor())
{
    auto scheme = quant::parseScheme(spec);
    EXPECT_TRUE(scheme.ok());
    auto model = quant::prepare(g, *scheme, calib);
    EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().userMessage());
    return std::move(model).value();
}

at::Tensor runWith(const ir::Graph& g, const at::Tensor& x,
                   std::shared_ptr<exec::NodeHook> hook = nullptr)
{
    exec::Executor executor(g);
    if (hook)
        executor.addHook(std::move(hook));
    auto out = executor.run({x});
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().userMessage());
    return out.ok() ? out->front() : at::Tensor();
}

// ---- The reference, in plain torch ops ---------------------------------------------------------

/// int8 symmetric per row: scale = max|w| / 127.5 (PyTorch's symmetric observer), zero point 0.
at::Tensor fakeQuantRows(const at::Tensor& w3)
{
    const at::Tensor w = w3.reshape({-1, w3.size(-1)});
    const at::Tensor scale = (w.abs().amax(1) / 127.5f).clamp_min(1.1920929e-07f);
    const at::Tensor zero = at::zeros({w.size(0)}, at::kInt);
    return at::fake_quantize_per_channel_affine(w, scale, zero, 0, -128, 127).reshape(w3.sizes());
}

/// uint8 asymmetric, one range for the whole tensor (range widened to include 0), in float32
/// as PyTorch's MinMaxObserver computes it.
at::Tensor fakeQuantDynamic(const at::Tensor& x)
{
    const float lo = std::min(x.min().item<float>(), 0.0f);
    const float hi = std::max(x.max().item<float>(), 0.0f);
    const float scale = std::max((hi - lo) / 255.0f, 1.1920929e-07f);
    const auto zero = static_cast<std::int64_t>(
        std::clamp(0.0f - std::nearbyint(lo / scale), 0.0f, 255.0f));
    return at::fake_quantize_per_tensor_affine(x, scale, zero, 0, 255);
}

/// ONNX LSTM (gates i, o, f, c), batch-first X [B, S, F] -> Y [B, S, 1, H], with the input
/// and the hidden state entering each recurrent product passed through `qx` / `qh`.
template <typename QX, typename QH>
at::Tensor referenceLstm(const ir::Graph& g, const at::Tensor& x, const at::Tensor& w,
                         const at::Tensor& r, QX qx, QH qh)
{
    const at::Tensor b = g.initializers.at("B")[0];
    const at::Tensor xs = qx(x).transpose(0, 1);  // [S, B, F]
    const at::Tensor xw = at::matmul(xs, w[0].t()) + b.narrow(0, 0, 4 * kHidden);
    at::Tensor h = at::zeros({x.size(0), kHidden});
    at::Tensor c = at::zeros({x.size(0), kHidden});
    std::vector<at::Tensor> ys;
    for (std::int64_t t = 0; t < xs.size(0); ++t) {
        const at::Tensor hr = at::matmul(qh(h), r[0].t()) + b.narrow(0, 4 * kHidden, 4 * kHidden);
        const auto gates = (xw[t] + hr).chunk(4, 1);
        const at::Tensor i = at::sigmoid(gates[0]);
        const at::Tensor f = at::sigmoid(gates[2]);
        c = f * c + i * at::tanh(gates[3]);
        h = at::sigmoid(gates[1]) * at::tanh(c);
        ys.push_back(h);
    }
    return at::stack(ys, 1).unsqueeze(2);  // [B, S, 1, H]
}

double maxAbs(const at::Tensor& a, const at::Tensor& b)
{
    EXPECT_EQ(a.sizes(), b.sizes());
    return (a - b).abs().max().item<double>();
}

double sqnrDb(const at::Tensor& ref, const at::Tensor& test)
{
    return 10.0 * std::log10(ref.pow(2).sum().item<double>() /
                             (ref - test).pow(2).sum().item<double>());
}

} // namespace

TEST(LstmQuant, RnnLayersArePlannedWithBothWeights)
{
    const ir::Graph g = rnnGraph(ir::OpKind::LSTM, 1);
    EXPECT_TRUE(quant::isQuantizable(g, g.nodes[0]));
    ir::Graph noConstR = g;
    noConstR.initializers.erase("R");
    noConstR.inputs.push_back({"R", ir::DType::Float32, {1, 4 * kHidden, kHidden}});
    EXPECT_FALSE(quant::isQuantizable(noConstR, noConstR.nodes[0]));

    const quant::QuantizedModel m = prepared(g, "dynamic-int8");
    ASSERT_EQ(m.layers.count("lstm"), 1u);
    const quant::LayerQuant& lq = m.layers.at("lstm");
    EXPECT_EQ(lq.params, 4 * kHidden * (kIn + kHidden));
    // int8 codes of W and R plus one float32 scale per gate row of each.
    EXPECT_EQ(lq.bytesQuantized, 4 * kHidden * (kIn + kHidden) + 2 * 4 * kHidden * 4);
    EXPECT_EQ(lq.weight.scale.numel(), 4 * kHidden);
    EXPECT_EQ(lq.recurrent.scale.numel(), 4 * kHidden);
    EXPECT_TRUE(at::equal(lq.weightFq, fakeQuantRows(g.initializers.at("W"))));
    EXPECT_TRUE(at::equal(lq.recurrentFq, fakeQuantRows(g.initializers.at("R"))));
    // Model size: W and R stored as int8, the bias as float.
    EXPECT_EQ(m.bytesQuantized, lq.bytesQuantized + 8 * kHidden * 4);

    auto scheme = quant::parseScheme("dynamic-int8");
    ASSERT_TRUE(scheme.ok());
    scheme->overrides["lstm"] = std::nullopt;
    auto kept = quant::prepare(g, *scheme, at::Tensor());
    ASSERT_TRUE(kept.ok());
    EXPECT_TRUE(kept->layers.at("lstm").config.keepFloat);
    EXPECT_EQ(kept->layers.at("lstm").params, 4 * kHidden * (kIn + kHidden));
    const at::Tensor x = input(3, 7, 2);
    EXPECT_TRUE(at::equal(runWith(g, x, quant::makeQuantHook(*kept)), runWith(g, x)));
}

TEST(LstmQuant, DynamicInt8MatchesTheTorchReference)
{
    const ir::Graph g = rnnGraph(ir::OpKind::LSTM, 3);
    const quant::QuantizedModel m = prepared(g, "dynamic-int8");
    const at::Tensor x = input(4, 9, 4);
    const at::Tensor got = runWith(g, x, quant::makeQuantHook(m));
    // X: one range for the whole sequence batch; h: one range per step (PyTorch's dynamic LSTM).
    const at::Tensor ref = referenceLstm(g, x, fakeQuantRows(g.initializers.at("W")),
                                         fakeQuantRows(g.initializers.at("R")),
                                         fakeQuantDynamic, fakeQuantDynamic);
    EXPECT_LE(maxAbs(got, ref), 2e-6);
    const at::Tensor floatOut = runWith(g, x);
    EXPECT_LE(maxAbs(referenceLstm(g, x, g.initializers.at("W"), g.initializers.at("R"),
                                   [](const at::Tensor& t) { return t; },
                                   [](const at::Tensor& t) { return t; }),
                     floatOut),
              2e-6);
    // The quantized run is not the float one, and it is close to it.
    EXPECT_GT(maxAbs(got, floatOut), 1e-4);
    EXPECT_GT(sqnrDb(floatOut, got), 30.0);
    // Per step matters: quantizing h with one range over all steps is a different result.
    EXPECT_GT(maxAbs(got, referenceLstm(g, x, fakeQuantRows(g.initializers.at("W")),
                                        fakeQuantRows(g.initializers.at("R")), fakeQuantDynamic,
                                        [](const at::Tensor& t) { return t; })),
              1e-6);
}

TEST(LstmQuant, StaticInt8UsesTheCalibratedInputRangeAndAFixedHiddenRange)
{
    const ir::Graph g = rnnGraph(ir::OpKind::LSTM, 5);
    const at::Tensor calib = input(32, 6, 6);
    const quant::QuantizedModel m = prepared(g, "static-int8", calib);
    const quant::LayerQuant& lq = m.layers.at("lstm");
    ASSERT_TRUE(lq.act.has_value());
    ASSERT_TRUE(lq.hiddenAct.has_value());
    // min-max over the calibration inputs: scale (hi - lo) / 255.
    const float lo = calib.min().item<float>();
    const float hi = calib.max().item<float>();
    EXPECT_FLOAT_EQ(lq.act->scale.item<float>(), (hi - lo) / 255.0f);
    // [-1, 1] as torch's MinMaxObserver(quint8) chooses it: scale 2/255, zero point 127
    // (-1 / scale rounds to -127 in float32).
    EXPECT_FLOAT_EQ(lq.hiddenAct->scale.item<float>(), 2.0f / 255.0f);
    EXPECT_EQ(lq.hiddenAct->zeroPoint.item<std::int64_t>(), 127);

    const at::Tensor x = input(3, 8, 7);
    const float xs = lq.act->scale.item<float>();
    const auto xz = lq.act->zeroPoint.item<std::int64_t>();
    const at::Tensor ref = referenceLstm(
        g, x, fakeQuantRows(g.initializers.at("W")), fakeQuantRows(g.initializers.at("R")),
        [&](const at::Tensor& t) { return at::fake_quantize_per_tensor_affine(t, xs, xz, 0, 255); },
        [](const at::Tensor& t) {
            return at::fake_quantize_per_tensor_affine(t, 2.0f / 255.0f, 127, 0, 255);
        });
    const at::Tensor got = runWith(g, x, quant::makeQuantHook(m));
    EXPECT_LE(maxAbs(got, ref), 2e-6);
    EXPECT_GT(sqnrDb(runWith(g, x), got), 25.0);
}

TEST(LstmQuant, WeightOnlySchemesQuantizeWAndRAndLeaveActivationsFloat)
{
    const ir::Graph g = rnnGraph(ir::OpKind::LSTM, 8);
    const quant::QuantizedModel m = prepared(g, "w4-int4:group=4");
    const quant::LayerQuant& lq = m.layers.at("lstm");
    EXPECT_EQ(lq.weight.scale.sizes(), (at::IntArrayRef{4 * kHidden, 2}));     // 6 inputs: 4 + 2
    EXPECT_EQ(lq.recurrent.scale.sizes(), (at::IntArrayRef{4 * kHidden, 2}));  // 8 = 4 + 4
    EXPECT_FALSE(lq.note.empty());  // group 4 does not divide the 6 inputs of W
    ir::Graph fq = g;
    fq.initializers["W"] = lq.weightFq;
    fq.initializers["R"] = lq.recurrentFq;
    const at::Tensor x = input(2, 5, 9);
    EXPECT_TRUE(at::equal(runWith(g, x, quant::makeQuantHook(m)), runWith(fq, x)));
    EXPECT_GT(maxAbs(runWith(fq, x), runWith(g, x)), 1e-4);
}

TEST(LstmQuant, GruDynamicInt8IsCloseToFloat)
{
    const ir::Graph g = rnnGraph(ir::OpKind::GRU, 11);
    const quant::QuantizedModel m = prepared(g, "dynamic-int8");
    EXPECT_EQ(m.layers.at("gru").params, 3 * kHidden * (kIn + kHidden));
    const at::Tensor x = input(4, 10, 12);
    const at::Tensor floatOut = runWith(g, x);
    const at::Tensor got = runWith(g, x, quant::makeQuantHook(m));
    EXPECT_GT(maxAbs(got, floatOut), 1e-4);
    EXPECT_GT(sqnrDb(floatOut, got), 30.0);
    // The real-kernel hook (throughput) has no LSTM / GRU kernel: it runs the same simulation.
    auto real = quant::makeRealKernelHook(m, c10::Device(c10::kCPU));
    EXPECT_TRUE(at::equal(runWith(g, x, real), got));
    EXPECT_EQ(real->kernelsRun().at("gru").rfind("simulated", 0), 0u);
}

TEST(LstmQuant, AnalysisRowsDescribeTheLstm)
{
    const ir::Graph g = rnnGraph(ir::OpKind::LSTM, 13);
    const at::Tensor calib = input(16, 12, 14);
    for (const char* spec : {"dynamic-int8", "static-int8", "w4-nf4:group=4"}) {
        SCOPED_TRACE(spec);
        const quant::QuantizedModel m = prepared(g, spec, calib);
        analysis::AnalysisOptions options;
        auto report = analysis::analyze(g, m, calib, nullptr, options);
        ASSERT_TRUE(report.ok()) << report.error().userMessage();
        ASSERT_EQ(report->layers.size(), 1u);
        const analysis::LayerReport& row = report->layers[0];
        EXPECT_EQ(row.op, "LSTM");
        EXPECT_EQ(row.params, 4 * kHidden * (kIn + kHidden));
        EXPECT_LT(row.bytesQuantized, row.bytesFloat / 2);  // 448 weights: the scales weigh
        EXPECT_TRUE(std::isfinite(row.local.sqnrDb));
        EXPECT_GT(row.local.sqnrDb, 15.0);
        // One layer: everything up to it quantized is the layer itself.
        EXPECT_NEAR(row.accumulated.sqnrDb, row.local.sqnrDb, 1e-9);
        EXPECT_GT(row.weight.sqnrDb, 15.0);
        double counted = 0.0;
        for (double c : row.weightHistogram.counts)
            counted += c;
        EXPECT_EQ(counted, static_cast<double>(row.params));  // W and R together
        const bool quantizedActs = std::string(spec) != "w4-nf4:group=4";
        EXPECT_EQ(row.actType, quantizedActs ? "uint8" : "float32");
        EXPECT_EQ(row.calibrators.size(), quantizedActs ? 4u : 0u);
        for (const auto& c : row.calibrators)
            EXPECT_TRUE(std::isfinite(c.sqnrDb)) << c.method;
        EXPECT_EQ(row.kernel.rfind("simulated", 0), 0u);
    }
}

TEST(LstmQuant, QdqExportRefusesAQuantizedLstm)
{
    const ir::Graph g = rnnGraph(ir::OpKind::LSTM, 17);
    const quant::QuantizedModel m = prepared(g, "dynamic-int8");
    auto qdq = exporting::buildQdqGraph(m);
    ASSERT_FALSE(qdq.ok());
    EXPECT_EQ(qdq.error().code, ErrorCode::Unsupported);
    EXPECT_NE(qdq.error().message.find("layer 'lstm' is an LSTM"), std::string::npos)
        << qdq.error().message;
}

TEST(LstmQuant, ExportOfAQuantizedLstmIsRefusedBeforeAnyCalibration)
{
    // What the CLI and the window ask once the model is open, before data or calibration.
    const ir::Graph g = rnnGraph(ir::OpKind::LSTM, 17);
    for (auto format : {exporting::ExportFormat::Onnx, exporting::ExportFormat::Safetensors}) {
        auto dynamic = quant::parseScheme("dynamic-int8").value();
        auto refused = exporting::checkExportableModel(g, dynamic, format, "m.pt");
        ASSERT_FALSE(refused.ok());
        EXPECT_EQ(refused.error().code, ErrorCode::Unsupported);
        EXPECT_EQ(refused.error().path, "m.pt");
        EXPECT_NE(refused.error().message.find("layer 'lstm' is an LSTM"), std::string::npos)
            << refused.error().message;
        // Kept float by an override, the LSTM is no obstacle.
        dynamic.overrides["lstm"] = std::nullopt;
        EXPECT_TRUE(exporting::checkExportableModel(g, dynamic, format).ok());
    }
    // GGUF holds llama-family language models only.
    auto gguf = exporting::checkExportableModel(g, quant::parseScheme("gguf-q8_0").value(),
                                                exporting::ExportFormat::Gguf, "m.pt");
    ASSERT_FALSE(gguf.ok());
    EXPECT_NE(gguf.error().message.find("llama-family models only"), std::string::npos);
}

TEST(LstmQuant, ExportVerifyOfAnLstmKeptFloatPassesInOnnxAndSafetensors)
{
    // Issue #37 item 2: an LSTM model verified where the format holds it: the LSTM kept float
    // by an override, its head (a MatMul to 10 classes per step) quantized. A sequence model:
    // top-1 compared per time step, in the metric's windows.
    ir::Graph g = rnnGraph(ir::OpKind::LSTM, 29);
    at::Generator gen = at::detail::createCPUGenerator(30);
    g.initializers["squeeze.axes"] = at::tensor({std::int64_t{2}});
    g.initializers["head.weight"] = at::randn({kHidden, 10}, gen);
    ir::Node squeeze;
    squeeze.name = "squeeze";
    squeeze.op = ir::OpKind::Squeeze;
    squeeze.inputs = {"y", "squeeze.axes"};
    squeeze.outputs = {"h"};
    ir::Node head;
    head.name = "head";
    head.op = ir::OpKind::MatMul;
    head.inputs = {"h", "head.weight"};
    head.outputs = {"logits"};
    g.nodes.push_back(squeeze);
    g.nodes.push_back(head);
    g.outputs = {{"logits", ir::DType::Float32, {}}};
    auto scheme = quant::parseScheme("dynamic-int8").value();
    scheme.overrides["lstm"] = std::nullopt;
    auto model = quant::prepare(g, scheme, input(4, 7, 31));
    ASSERT_TRUE(model.ok()) << model.error().userMessage();
    ASSERT_TRUE(model->layers.count("head") && !model->layers.at("head").config.keepFloat);
    io::Dataset data;
    data.path = "steps";
    data.inputs = input(12, 7, 32);
    test::TempDir dir;
    for (const auto& [format, path] :
         {std::pair{exporting::ExportFormat::Onnx, dir.file("lstm.onnx")},
          std::pair{exporting::ExportFormat::Safetensors, dir.file("lstm-st")}}) {
        ASSERT_TRUE(exporting::checkExportableModel(g, scheme, format).ok());
        auto written = exporting::exportModel(*model, format, path);
        ASSERT_TRUE(written.ok()) << written.error().userMessage();
        auto v = exporting::verifyExport(path, format, *model, data);
        ASSERT_TRUE(v.ok()) << path << ": " << v.error().userMessage();
        EXPECT_TRUE(v->ok) << v->message;
        EXPECT_EQ(v->task, "sequence");
        EXPECT_EQ(v->samples, 12);
        EXPECT_EQ(v->weightsMismatched, 0) << v->message;
        EXPECT_EQ(v->weightsChecked, 1) << v->message;  // the head; the LSTM is float
        EXPECT_EQ(v->maxAbsDiffSameRounding, 0.0) << v->message;
        EXPECT_EQ(v->top1Positions, 12 * 7) << v->message;
        EXPECT_GE(v->sameTop1Rate, 0.95) << v->message;
    }
}
