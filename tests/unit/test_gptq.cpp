// GPTQ: the C++ against an independent torch implementation of the paper's reference code
// (tests/data/gptq/gptq_reference.py): same weight, same calibration rows -> the same Hessian
// and the same dequantized weight, bit for bit, over per-channel, grouped, static-group and
// act-order runs. Plus: an identity Hessian gives round-to-nearest, the engine's GPTQ layers
// beat round-to-nearest on the output they reconstruct, and their stored codes are GPTQ's.

#include "analysis/quant_report.h"
#include "float_files.h"
#include "python_oracle.h"
#include "quant/engine.h"
#include "quant/gptq.h"
#include "quant/scheme.h"
#include "temp_dir.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace bitlens;
using quant::Granularity;
using quant::QuantType;
using test::readFloats;
using test::sameBits;
using test::writeFloats;

namespace {

constexpr const char* kTestData = BITLENS_TEST_DATA;

/// Calibration rows whose features are correlated (what makes GPTQ's feedback matter), with
/// two inputs that never fire (dead columns).
at::Tensor correlatedRows(std::int64_t n, std::int64_t cols, std::uint64_t seed)
{
    // One mixing (the distribution), `seed` draws the samples.
    at::Generator mixing = at::detail::createCPUGenerator(99);
    const at::Tensor mix = at::randn({cols, cols}, mixing) * 0.3 + at::eye(cols);
    const at::Tensor gain = at::rand({1, cols}, mixing) * 2 + 0.1;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    at::Tensor x = at::randn({n, cols}, gen).matmul(mix) * gain;
    x.select(1, 5).zero_();
    x.select(1, cols - 3).zero_();
    return x.contiguous();
}

struct Case {
    std::string name;
    int bits;
    bool symmetric;
    std::int64_t group;  // -1: per channel
    bool actOrder;
    bool staticGroups;
    double damp;
};

} // namespace

TEST(Gptq, IdentityHessianIsRoundToNearest)
{
    // With H = I no error is fed forward (H^-1 is diagonal), so every column rounds as RTN.
    at::Generator gen = at::detail::createCPUGenerator(7);
    const at::Tensor w = at::randn({16, 96}, gen);
    for (const Granularity g : {Granularity::perChannel(0), Granularity::perGroup(1, 32)}) {
        auto r = quant::gptqQuantize(w, at::eye(96), QuantType::Int4, false, g, quant::CodeRange::Full, {});
        ASSERT_TRUE(r.ok()) << r.error().userMessage();
        auto [lo, hi] = quant::blockMinMax(w, g);
        const auto qp = quant::chooseQParams(lo, hi, QuantType::Int4, false, g);
        EXPECT_TRUE(sameBits(r->weight, quant::fakeQuantize(w, qp))) << g.describe();
        EXPECT_TRUE(at::equal(r->params.scale, qp.scale)) << g.describe();
        EXPECT_TRUE(at::equal(r->params.zeroPoint, qp.zeroPoint)) << g.describe();
    }
}

TEST(Gptq, MatchesTheReferenceAlgorithmBitForBit)
{
    BITLENS_PYTHON_OR_SKIP(python);
    c10::InferenceMode guard;
    // 200 inputs: a block of 128 and a short one of 72; groups of 32 end in a short group of 8.
    const std::int64_t rows = 48;
    const std::int64_t cols = 200;
    at::Generator gen = at::detail::createCPUGenerator(2026);
    const at::Tensor w = at::randn({rows, cols}, gen) * 0.05;
    const at::Tensor x = correlatedRows(600, cols, 11);
    quant::HessianAccumulator acc;
    acc.add(x.slice(0, 0, 300));
    acc.add(x.slice(0, 300));
    EXPECT_EQ(acc.samples(), 600);

    const std::vector<Case> cases = {
        {"int4_sym_channel", 4, true, -1, false, false, 0.01},
        {"int4_asym_g32", 4, false, 32, false, false, 0.01},
        {"int4_asym_g32_actorder", 4, false, 32, true, false, 0.01},
        {"int8_sym_channel_actorder", 8, true, -1, true, false, 0.05},
        {"int4_sym_g64_damp", 4, true, 64, false, false, 0.1},
    };
    test::TempDir dir;
    {
        std::ofstream meta(dir.file("meta.txt"));
        meta << rows << ' ' << cols << '\n';
        for (const auto& c : cases)
            meta << c.name << ' ' << c.bits << ' ' << c.symmetric << ' ' << c.group << ' '
                 << c.actOrder << ' ' << c.staticGroups << ' ' << c.damp << '\n';
    }
    writeFloats(dir.file("w.bin"), w);
    writeFloats(dir.file("x.bin"), x);
    std::ifstream script(std::string(kTestData) + "/gptq/gptq_reference.py");
    const std::string code((std::istreambuf_iterator<char>(script)),
                           std::istreambuf_iterator<char>());
    ASSERT_FALSE(code.empty());
    std::string output;
    ASSERT_EQ(test::runPython(python, dir.path(), code, "'" + dir.path() + "'", output), 0)
        << output;

    // The Hessian the engine accumulates is the reference's add_batch, bit for bit.
    const at::Tensor h = readFloats(dir.file("h.bin"), {cols, cols});
    ASSERT_TRUE(sameBits(acc.hessian(), h)) << "max |diff| "
                                            << (acc.hessian() - h).abs().max().item<float>();
    for (const auto& c : cases) {
        quant::GptqOptions options;
        options.damp = c.damp;
        options.actOrder = c.actOrder;
        const Granularity g =
            c.group < 0 ? Granularity::perChannel(0) : Granularity::perGroup(1, c.group);
        auto r = quant::gptqQuantize(w, h, c.bits == 8 ? QuantType::Int8 : QuantType::Int4,
                                     c.symmetric, g, quant::CodeRange::Full, options);
        ASSERT_TRUE(r.ok()) << c.name << ": " << r.error().userMessage();
        EXPECT_EQ(r->deadColumns, 2) << c.name;
        const at::Tensor ref = readFloats(dir.file(c.name + ".bin"), {rows, cols});
        const std::int64_t differ = at::ne(r->weight.view(at::kInt), ref.view(at::kInt))
                                        .sum()
                                        .item<std::int64_t>();
        EXPECT_EQ(differ, 0) << c.name << ": " << differ << " of " << rows * cols
                             << " weights differ from the reference";
        // The stored qparams reproduce GPTQ's weight: round-to-nearest of it is itself.
        EXPECT_TRUE(sameBits(quant::fakeQuantize(r->weight, r->params), r->weight)) << c.name;
        std::istringstream lines(output);
        std::string line;
        while (std::getline(lines, line))
            if (line.rfind(c.name + " loss ", 0) == 0)
                EXPECT_NEAR(r->loss, std::stod(line.substr(c.name.size() + 6)),
                            1e-6 * std::max(1.0, r->loss))
                    << c.name;
    }
}

TEST(Gptq, EngineLayersBeatRoundToNearestAndStoreTheirCodes)
{
    c10::InferenceMode guard;
    at::Generator gen = at::detail::createCPUGenerator(5);
    ir::GraphBuilder g("mlp");
    auto x = g.input("x", {-1, 96});
    x = g.linear("fc1", x, at::randn({64, 96}, gen) * 0.1, at::randn({64}, gen) * 0.1);
    x = g.unary("fc1.relu", ir::OpKind::Relu, x);
    x = g.linear("fc2", x, at::randn({32, 64}, gen) * 0.1, std::nullopt);
    g.output(x);
    const ir::Graph graph = g.build().value();
    const at::Tensor calib = correlatedRows(256, 96, 3);

    auto rtnScheme = quant::parseScheme("w4-int4:group=32");
    auto gptqScheme = quant::parseScheme("w4-int4:group=32,method=gptq,act-order=true");
    ASSERT_TRUE(gptqScheme.ok()) << gptqScheme.error().userMessage();
    auto rtn = quant::prepare(graph, *rtnScheme, calib);
    auto gptq = quant::prepare(graph, *gptqScheme, calib);
    ASSERT_TRUE(rtn.ok() && gptq.ok()) << (gptq.ok() ? "" : gptq.error().userMessage());
    EXPECT_EQ(gptq->calibSamples, 256);
    for (const std::string layer : {"fc1", "fc2"}) {
        const quant::LayerQuant& lq = gptq->layers.at(layer);
        EXPECT_EQ(lq.method, "gptq");
        EXPECT_LT(lq.methodLoss, lq.methodLossRtn) << layer;
        EXPECT_EQ(rtn->layers.at(layer).method, "rtn");
        // What the real kernels and exports store: round-to-nearest of codeSource() with the
        // layer's qparams, which must be GPTQ's weight again.
        const ir::Node* node = nullptr;
        for (const auto& n : gptq->graph.nodes)
            if (n.name == layer)
                node = &n;
        ASSERT_NE(node, nullptr);
        const at::Tensor view = quant::weightView(*node, quant::codeSource(lq));
        EXPECT_TRUE(sameBits(quant::dequantize(quant::quantize(view, lq.weight), lq.weight),
                             quant::weightView(*node, lq.weightFq)))
            << layer;
        EXPECT_FALSE(sameBits(lq.weightFq, rtn->layers.at(layer).weightFq)) << layer;
    }
    // On held-out inputs of the same distribution the GPTQ model is closer to float.
    const at::Tensor test = correlatedRows(256, 96, 4);
    exec::Executor ref(graph);
    const at::Tensor y = ref.run({test}).value().front();
    auto sqnr = [&](const quant::QuantizedModel& m) {
        exec::Executor q(m.graph);
        q.addHook(quant::makeQuantHook(m));
        return analysis::compareTensors(y, q.run({test}).value().front()).sqnrDb;
    };
    EXPECT_GT(sqnr(*gptq), sqnr(*rtn) + 0.5);

    // Without calibration data GPTQ has nothing to reconstruct.
    auto none = quant::prepare(graph, *gptqScheme, at::Tensor());
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("method=gptq reads each layer's inputs"),
              std::string::npos)
        << none.error().message;
}

TEST(Gptq, SchemeOptions)
{
    auto s = quant::parseScheme("w4-int4:method=gptq,group=128,act-order=true,damp=0.05");
    ASSERT_TRUE(s.ok()) << s.error().userMessage();
    EXPECT_EQ(s->config.method, quant::LayerConfig::Method::Gptq);
    EXPECT_TRUE(s->config.gptqActOrder);
    EXPECT_EQ(s->config.gptqDamp, 0.05);
    EXPECT_NE(s->config.describe().find("gptq act-order"), std::string::npos);
    EXPECT_EQ(quant::schemeToJson(*s)["config"]["method"], "gptq");
    // NF4 with GPTQ leaves the preset's double quantization behind; asked for, it is refused.
    auto nf4 = quant::parseScheme("w4-nf4:method=gptq");
    ASSERT_TRUE(nf4.ok());
    EXPECT_FALSE(nf4->config.doubleQuant);
    EXPECT_FALSE(quant::parseScheme("w4-nf4:method=gptq,double-quant=true").ok());
    for (const char* bad : {"fp8-e4m3:method=gptq", "llm-int8:method=gptq", "qat-int8:method=gptq",
                            "w4-int4:method=awesome", "w4-int4:damp=2", "w4-int4:act-order=true"}) {
        auto r = quant::parseScheme(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.error().code, ErrorCode::Usage) << bad;
    }
}
