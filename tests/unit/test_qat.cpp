// Quantization-aware training on small graphs: the straight-through estimator, LSQ scale
// gradients, BatchNorm statistics frozen after the set step, QAT beating post-training
// quantization on a toy task, label-free distillation, and Cancel keeping the best checkpoint.

#include "analysis/error_stats.h"
#include "quant/engine.h"
#include "train/optimizer.h"
#include "train/qat.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

using namespace bitlens;

namespace {

/// Conv-BN-ReLU-pool, two dense layers; BN running stats deliberately off the data's.
ir::Graph convNet(std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    ir::GraphBuilder g("net");
    auto x = g.input("x", {-1, 1, 8, 8});
    // Every draw in its own statement: the order in which a call's arguments are evaluated
    // differs between compilers (GCC right to left, clang left to right), and the network must
    // be the same in the gcc and the clang (sanitizer) builds. This is the order GCC used.
    x = g.conv2d("conv", x, at::randn({8, 1, 3, 3}, gen) * 0.5, std::nullopt, {1, 1, 1, 1});
    const auto bnVar = at::rand({8}, gen) + 0.5;
    const auto bnMean = at::randn({8}, gen) * 0.1;
    const auto bnBias = at::randn({8}, gen) * 0.1;
    const auto bnScale = at::rand({8}, gen) + 0.5;
    x = g.batchNorm("bn", x, bnScale, bnBias, bnMean, bnVar);
    x = g.unary("relu", ir::OpKind::Relu, x);
    x = g.maxPool("pool", x, 2, 2);
    x = g.flatten("flat", x);
    const auto fc1Bias = at::randn({32}, gen) * 0.1;
    const auto fc1Weight = at::randn({32, 128}, gen) * 0.1;
    x = g.linear("fc1", x, fc1Weight, fc1Bias);
    x = g.unary("fc1.relu", ir::OpKind::Relu, x);
    x = g.linear("fc2", x, at::randn({4, 32}, gen) * 0.2, at::zeros({4}));
    g.output(x);
    return g.build().value();
}

at::Tensor floatOutputs(const ir::Graph& graph, const at::Tensor& x)
{
    c10::InferenceMode guard;
    exec::Executor e(graph);
    return e.run({x}).value().front();
}

at::Tensor quantizedOutputs(const quant::QuantizedModel& model, const at::Tensor& x)
{
    c10::InferenceMode guard;
    exec::Executor e(model.graph);
    e.addHook(quant::makeQuantHook(model));
    return e.run({x}).value().front();
}

/// Random images labelled by the float network itself: float top-1 is 1 by construction.
io::Dataset teacherLabelled(const ir::Graph& graph, std::int64_t n, std::uint64_t seed,
                            bool withLabels = true)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    io::Dataset d;
    d.path = "toy";
    d.inputs = at::rand({n, 1, 8, 8}, gen);
    if (withLabels)
        d.labels = floatOutputs(graph, d.inputs).argmax(1);
    return d;
}

double top1(const at::Tensor& logits, const at::Tensor& labels)
{
    return logits.argmax(1).eq(labels).to(at::kDouble).mean().item<double>();
}

quant::Scheme scheme(const std::string& spec)
{
    auto s = quant::parseScheme(spec);
    EXPECT_TRUE(s.ok()) << spec << ": " << (s.ok() ? "" : s.error().userMessage());
    return std::move(s).value();
}

quant::QuantizedModel trainScheme(const ir::Graph& graph, const std::string& spec,
                            const io::Dataset& data, const train::QatStepCallback& onStep = {},
                            const CancelToken& cancel = CancelToken())
{
    const quant::Scheme s = scheme(spec);
    auto m = train::trainQat(graph, s, data, *s.qat, Progress::none(), cancel, onStep);
    EXPECT_TRUE(m.ok()) << spec << ": " << (m.ok() ? "" : m.error().userMessage());
    return std::move(m).value();
}

/// Runs a test's small training loops on one intra-op thread (restored after): with tensors
/// this small, a second OpenMP thread only adds barriers, and on a busy machine much more.
struct OneThread {
    int saved = at::get_num_threads();
    OneThread() { at::set_num_threads(1); }
    ~OneThread() { at::set_num_threads(saved); }
};

} // namespace

TEST(Qat, StraightThroughGradientIsIdentityInsideTheClipRangeAndZeroOutside)
{
    // int8 symmetric, scale 0.1: representable [-12.8, 12.7].
    quant::QParams qp;
    qp.type = quant::QuantType::Int8;
    qp.scale = at::full({}, 0.1f);
    qp.zeroPoint = at::zeros({}, at::kLong);
    const at::Tensor x =
        at::tensor({-20.0f, -12.8f, -3.14f, 0.0f, 0.05f, 7.3f, 12.7f, 12.9f, 30.0f})
            .requires_grad_(true);
    const at::Tensor y = quant::fakeQuantize(x, qp);
    y.backward(at::ones_like(y));
    const at::Tensor expected = at::tensor({0.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f, 0.0f});
    EXPECT_TRUE(at::equal(x.grad(), expected)) << x.grad();

    // Per-group 4-bit weights, as qat-w4a8:group=4 trains them: the same rule per block.
    quant::QParams g;
    g.type = quant::QuantType::Int4;
    g.granularity = quant::Granularity::perGroup(1, 4);
    g.scale = at::tensor({0.5f, 0.01f}).reshape({1, 2});
    g.zeroPoint = at::zeros({1, 2}, at::kLong);
    const at::Tensor w =
        at::tensor({-3.0f, 3.5f, 4.0f, 0.1f, 0.05f, -0.08f, 0.2f, -0.0f}).reshape({1, 8})
            .requires_grad_(true);
    quant::fakeQuantize(w, g).sum().backward();
    // Block 0 holds [-4, 3.5]: 4.0 is outside; block 1 holds [-0.08, 0.07]: 0.2 is outside.
    EXPECT_TRUE(at::equal(w.grad().reshape({-1}),
                          at::tensor({1.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f, 0.0f, 1.0f})))
        << w.grad();
}

TEST(Qat, LsqScaleGetsAGradientAndXPassesStraightThrough)
{
    const at::Tensor x = at::tensor({0.02f, 0.31f, 0.97f, 1.6f, 2.55f, 3.0f}).requires_grad_(true);
    const at::Tensor scale = at::full({1}, 0.01f).requires_grad_(true);
    const at::Tensor zero = at::zeros({1});
    const at::Tensor y =
        at::_fake_quantize_learnable_per_tensor_affine(x, scale, zero, 0, 255, 1.0);
    // Forward equals the fixed-scale fake quantization bit for bit.
    quant::QParams qp;
    qp.type = quant::QuantType::UInt8;
    qp.symmetric = false;
    qp.scale = at::full({}, 0.01f);
    qp.zeroPoint = at::zeros({}, at::kLong);
    EXPECT_TRUE(at::equal(y.detach(), quant::fakeQuantize(x.detach(), qp)));
    // x: the straight-through estimator (3.0 lies beyond 255 * 0.01 = 2.55).
    y.backward(at::ones_like(y));
    EXPECT_TRUE(at::equal(x.grad().ne(0), at::tensor({1, 1, 1, 1, 1, 0}).to(at::kBool)))
        << x.grad();
    // The scale: d(sum (y - x)^2) / d scale < 0, since clipping 3.0 costs more than rounding.
    scale.mutable_grad().zero_();
    const at::Tensor y2 =
        at::_fake_quantize_learnable_per_tensor_affine(x.detach(), scale, zero, 0, 255, 1.0);
    (y2 - x.detach()).pow(2).sum().backward();
    ASSERT_TRUE(scale.grad().defined());
    EXPECT_LT(scale.grad().item<float>(), 0.0f);
}

TEST(Qat, SgdMatchesTorchOptimSgdWithMomentum)
{
    // torch.optim.SGD([p], lr=0.1, momentum=0.9) on loss = sum(p^2), p = [1, -2]:
    // step 1: buf = g = [2, -4], p = [0.8, -1.6]; step 2: g = [1.6, -3.2],
    // buf = [3.4, -6.8], p = [0.46, -0.92].
    at::Tensor p = at::tensor({1.0f, -2.0f}).requires_grad_(true);
    train::Sgd sgd({p}, 0.1, 0.9);
    for (int i = 0; i < 2; ++i) {
        sgd.zeroGrad();
        p.pow(2).sum().backward();
        sgd.step();
    }
    EXPECT_TRUE(at::allclose(p.detach(), at::tensor({0.46f, -0.92f}), 1e-6, 1e-6)) << p;
}

TEST(Qat, BatchNormStatisticsUpdateUntilTheFreezeStepThenStayFrozen)
{
    OneThread oneThread;
    const auto graph = convNet(3);
    const auto data = teacherLabelled(graph, 400, 4);
    // A vanishing learning rate isolates the running statistics: the weights stay put.
    const std::string common = "qat-int8:lr=1e-12,batch=16,keep-best=false,holdout=40,warmup=0,lsq=false";
    auto ptq = quant::prepare(graph, scheme("static-int8"), data.inputs).value();
    const auto folded = [](const quant::QuantizedModel& m) {
        return *m.graph.initializer("conv.bias_folded");
    };
    const auto frozen0 = trainScheme(graph, common + ",samples=320,freeze-bn=0", data);
    const auto never = trainScheme(graph, common + ",samples=320,freeze-bn=1000", data);
    const auto at5Short = trainScheme(graph, common + ",samples=160,freeze-bn=5", data);
    const auto at5Long = trainScheme(graph, common + ",samples=320,freeze-bn=5", data);
    EXPECT_EQ(frozen0.qat->steps, 20);
    EXPECT_TRUE(at::allclose(folded(frozen0), folded(ptq), 1e-5, 1e-5));
    EXPECT_GT((folded(never) - folded(ptq)).abs().max().item<double>(), 1e-2);
    // Frozen after step 5: 10 and 20 steps (same first batches) leave the same statistics.
    EXPECT_TRUE(at::allclose(folded(at5Short), folded(at5Long), 1e-5, 1e-6));
    EXPECT_GT((folded(at5Long) - folded(ptq)).abs().max().item<double>(), 1e-3);
}

TEST(Qat, TrainingLowersTheLossAndBeatsPostTrainingQuantization)
{
    OneThread oneThread;
    const auto graph = convNet(5);
    const auto data = teacherLabelled(graph, 2400, 6);
    const auto test = teacherLabelled(graph, 1000, 7);
    // 4-bit weights and 8-bit inputs: post-training quantization loses ~10 points here.
    const std::string coarse = ":weight=int4,calib=400";
    auto ptq = quant::prepare(graph, scheme("static-int8" + coarse), data.inputs).value();
    std::vector<double> losses;
    const auto qat = trainScheme(graph, "qat-int8" + coarse + ",epochs=2,lr=3e-3,batch=32,holdout=400,lsq=false",
                           data, [&](const train::QatStep& s) {
                               if (s.step > 0)
                                   losses.push_back(s.loss);
                           });
    ASSERT_EQ(static_cast<std::int64_t>(losses.size()), qat.qat->steps);
    ASSERT_GE(losses.size(), 100u);
    const auto mean = [&](std::size_t from, std::size_t to) {
        double s = 0.0;
        for (std::size_t i = from; i < to; ++i)
            s += losses[i];
        return s / static_cast<double>(to - from);
    };
    EXPECT_LT(mean(losses.size() - 20, losses.size()), 0.7 * mean(0, 20));
    const double ptqTop1 = top1(quantizedOutputs(ptq, test.inputs), test.labels);
    const double qatTop1 = top1(quantizedOutputs(qat, test.inputs), test.labels);
    EXPECT_LT(ptqTop1, 0.92);
    EXPECT_GT(qatTop1, ptqTop1 + 0.02) << "PTQ " << ptqTop1 << ", QAT " << qatTop1;
    EXPECT_EQ(qat.qat->lossName, "kl_distill");
    EXPECT_EQ(qat.qat->metricName, "output_sqnr_db");
    EXPECT_EQ(qat.foldedBatchNorms, std::vector<std::string>{"conv<-bn"});
}

TEST(Qat, LsqLearnsScalesAndTheResultIsAnOrdinaryQuantizedModel)
{
    OneThread oneThread;
    const auto graph = convNet(8);
    const auto data = teacherLabelled(graph, 1200, 9);
    auto ptq = quant::prepare(graph, scheme("static-w4a8"), data.inputs).value();
    const auto qat = trainScheme(
        graph, "qat-w4a8:lsq=true,epochs=1,lr=1e-3,batch=32,holdout=200,keep-best=false", data);
    ASSERT_EQ(qat.layers.size(), ptq.layers.size());
    for (const auto& [name, lq] : qat.layers) {
        ASSERT_TRUE(lq.act.has_value()) << name;
        EXPECT_FALSE(at::equal(lq.act->scale, ptq.layers.at(name).act->scale)) << name;
        EXPECT_EQ(lq.actClip->method, "qat-lsq");
        EXPECT_EQ(lq.weight.scale.sizes(), ptq.layers.at(name).weight.scale.sizes());
        // The stored fake-quantized weight is the quantize-dequantize of the stored float
        // weight with the learned scales, which are not the weight's min-max scales.
        // (A named copy: clang 14 cannot capture a structured binding in a lambda.)
        const std::string& layerName = name;
        const ir::Node& node = *std::find_if(qat.graph.nodes.begin(), qat.graph.nodes.end(),
                                             [&](const ir::Node& n) { return n.name == layerName; });
        const at::Tensor view = quant::weightView(node, lq.weightFloat);
        EXPECT_TRUE(at::equal(lq.weightFq, quant::weightUnview(
                                               node, quant::fakeQuantize(view, lq.weight),
                                               lq.weightFloat)))
            << name;
        auto [lo, hi] = quant::blockMinMax(view, lq.weightGranularity);
        const auto minmax = quant::chooseQParams(lo, hi, lq.weight.type, lq.weight.symmetric,
                                                 lq.weightGranularity);
        EXPECT_FALSE(at::equal(minmax.scale, lq.weight.scale)) << name;
    }
    EXPECT_EQ(qat.bytesQuantized, ptq.bytesQuantized);
    EXPECT_FALSE(quantizedOutputs(qat, data.inputs.slice(0, 0, 8)).isnan().any().item<bool>());
}

TEST(Qat, LabelFreeDistillationWorksWithoutLabels)
{
    OneThread oneThread;
    const auto graph = convNet(10);
    const auto data = teacherLabelled(graph, 1200, 11, /*withLabels=*/false);
    auto ptq = quant::prepare(graph, scheme("static-int8:weight=int4,calib=400"), data.inputs)
                   .value();
    const auto qat = trainScheme(graph, "qat-int8:weight=int4,calib=400,epochs=2,lr=3e-3,batch=32,"
                                  "holdout=200,lsq=false",
                           data);
    EXPECT_EQ(qat.qat->lossName, "kl_distill");
    EXPECT_EQ(qat.qat->metricName, "output_sqnr_db");
    EXPECT_GT(qat.qat->bestMetric, qat.qat->startMetric + 1.0);
    const auto test = teacherLabelled(graph, 500, 12);
    const auto ref = floatOutputs(graph, test.inputs);
    EXPECT_GT(analysis::compareTensors(ref, quantizedOutputs(qat, test.inputs)).sqnrDb,
              analysis::compareTensors(ref, quantizedOutputs(ptq, test.inputs)).sqnrDb + 1.0);

    // Supervised QAT without labels is a clear error naming the data.
    const quant::Scheme s = scheme("qat-int8:distill=false");
    auto r = train::trainQat(graph, s, data, *s.qat);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    EXPECT_NE(r.error().userMessage().find("toy"), std::string::npos);
}

TEST(Qat, CancelReturnsTheBestCheckpointSoFar)
{
    OneThread oneThread;
    const auto graph = convNet(13);
    const auto data = teacherLabelled(graph, 1200, 14);
    CancelToken cancel;
    std::vector<std::pair<std::int64_t, double>> evals;
    const auto qat = trainScheme(graph, "qat-int8:weight=int2,epochs=5,lr=3e-3,batch=32,holdout=200,"
                                  "eval-every=5,distill=false,lsq=false",
                           data,
                           [&](const train::QatStep& s) {
                               if (s.metric)
                                   evals.emplace_back(s.step, *s.metric);
                               if (s.step == 23)
                                   cancel.cancel();
                           },
                           cancel);
    ASSERT_TRUE(qat.qat.has_value());
    EXPECT_TRUE(qat.qat->cancelled);
    EXPECT_EQ(qat.qat->steps, 23);
    ASSERT_EQ(evals.size(), 5u);  // steps 0, 5, 10, 15, 20
    const auto best = std::max_element(evals.begin(), evals.end(), [](auto a, auto b) {
        return a.second < b.second;
    });
    EXPECT_EQ(qat.qat->bestStep, best->first);
    EXPECT_DOUBLE_EQ(qat.qat->bestMetric, best->second);
    // The returned model is that checkpoint: its held-out top-1 is the recorded one.
    const at::Tensor holdX = data.inputs.slice(0, 1000);
    EXPECT_DOUBLE_EQ(top1(quantizedOutputs(qat, holdX), data.labels.slice(0, 1000)),
                     qat.qat->bestMetric);
}

TEST(Qat, SchemesParseTheirOptionsAndRejectBadOnes)
{
    const auto s = scheme("qat-w4a8:epochs=2,samples=0,lr=0.01,optimizer=sgd,lsq=true,"
                          "freeze-bn=100,distill=true");
    ASSERT_TRUE(s.qat.has_value());
    EXPECT_EQ(s.config.weightType, quant::QuantType::Int4);
    EXPECT_EQ(s.config.actMode, quant::ActMode::Static);
    EXPECT_EQ(s.qat->epochs, 2);
    EXPECT_EQ(s.qat->optimizer, quant::QatOptions::Optimizer::Sgd);
    EXPECT_EQ(s.qat->actRange, quant::QatOptions::ActRange::Learned);
    EXPECT_EQ(s.qat->distill, 1);
    EXPECT_EQ(quant::dataSamplesNeeded(s), 0);
    EXPECT_EQ(quant::dataSamplesNeeded(scheme("qat-int8:samples=500,holdout=100")), 1000);
    EXPECT_EQ(quant::dataSamplesNeeded(scheme("static-int8")), 1000);
    EXPECT_FALSE(scheme("static-int8").qat.has_value());
    for (const char* bad : {"qat-int8:epochs=0", "qat-int8:optimizer=rmsprop", "qat-int8:lr=-1",
                            "qat-int8:act-range=best", "static-int8:epochs=2"}) {
        auto r = quant::parseScheme(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.error().code, ErrorCode::Usage) << bad;
    }
    // Dynamic activations are not trainable: named, not crashed.
    const auto graph = convNet(1);
    const auto data = teacherLabelled(graph, 100, 2);
    auto dyn = scheme("qat-int8");
    dyn.config.actMode = quant::ActMode::Dynamic;
    auto r = train::trainQat(graph, dyn, data, *dyn.qat);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
}
