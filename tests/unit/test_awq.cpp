// AWQ: the C++ against an independent torch implementation of the paper's objective and the
// reference code's searches (tests/data/awq/awq_reference.py): the same weight, calibration rows
// and Hessian give the same mean |x|, the same scale ratio, the same scales, clipping ranges and
// rounded weight, bit for bit. Plus: the engine's AWQ layers beat round-to-nearest on the output
// they reconstruct, their stored codes are AWQ's, and the scheme options parse and refuse.

#include "analysis/quant_report.h"
#include "exec/executor.h"
#include "float_files.h"
#include "python_oracle.h"
#include "quant/awq.h"
#include "quant/engine.h"
#include "quant/gptq.h"
#include "quant/scheme.h"
#include "temp_dir.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace bitlens;
using quant::Granularity;
using quant::QuantType;
using test::bitsDiffer;
using test::readFloats;
using test::writeFloats;

namespace {

constexpr const char* kTestData = BITLENS_TEST_DATA;

/// Calibration rows with a few outlier channels (what AWQ protects): every 16th input carries
/// activations ~15x the others.
at::Tensor outlierRows(std::int64_t n, std::int64_t cols, std::uint64_t seed)
{
    at::Generator mixing = at::detail::createCPUGenerator(41);
    at::Tensor gain = at::rand({1, cols}, mixing) + 0.5;
    gain.slice(1, 3, cols, 16).mul_(15.0);
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return (at::randn({n, cols}, gen) * gain).contiguous();
}

at::Tensor meanAbs(const at::Tensor& x)
{
    return (x.abs().to(at::kDouble).sum(0) / static_cast<double>(x.size(0))).to(at::kFloat);
}

struct Case {
    std::string name;
    int bits;
    bool symmetric;
    std::int64_t group;  // -1: per channel
    bool clip;
    std::int64_t grid;
};

} // namespace

TEST(Awq, MatchesTheReferenceAlgorithmBitForBit)
{
    BITLENS_PYTHON_OR_SKIP(python);
    c10::InferenceMode guard;
    const std::int64_t rows = 48;
    const std::int64_t cols = 128;
    const std::int64_t n = 400;
    at::Generator gen = at::detail::createCPUGenerator(2027);
    const at::Tensor w = at::randn({rows, cols}, gen) * 0.05;
    const at::Tensor x = outlierRows(n, cols, 12);
    quant::HessianAccumulator acc;
    acc.add(x);
    const at::Tensor h = acc.hessian();
    const at::Tensor xMean = meanAbs(x);

    const std::vector<Case> cases = {
        {"int4_asym_g32_clip", 4, false, 32, true, 20},
        {"int4_sym_g64_clip", 4, true, 64, true, 20},
        {"int4_asym_channel", 4, false, -1, false, 20},
        {"int2_asym_g32_grid10", 2, false, 32, true, 10},
        {"int8_sym_channel_clip", 8, true, -1, true, 20},
    };
    test::TempDir dir;
    {
        std::ofstream meta(dir.file("meta.txt"));
        meta << rows << ' ' << cols << ' ' << n << '\n';
        for (const auto& c : cases)
            meta << c.name << ' ' << c.bits << ' ' << c.symmetric << ' ' << c.group << ' '
                 << c.clip << ' ' << c.grid << '\n';
    }
    writeFloats(dir.file("w.bin"), w);
    writeFloats(dir.file("x.bin"), x);
    writeFloats(dir.file("h.bin"), h);
    std::ifstream script(std::string(kTestData) + "/awq/awq_reference.py");
    const std::string code((std::istreambuf_iterator<char>(script)),
                           std::istreambuf_iterator<char>());
    ASSERT_FALSE(code.empty());
    std::string output;
    ASSERT_EQ(test::runPython(python, dir.path(), code, "'" + dir.path() + "'", output), 0)
        << output;
    // The engine's activation statistic is the reference's mean |x|.
    EXPECT_EQ(bitsDiffer(readFloats(dir.file("xmean.bin"), {cols}), xMean), 0);

    for (const auto& c : cases) {
        quant::AwqOptions options;
        options.clip = c.clip;
        options.grid = c.grid;
        const Granularity g =
            c.group < 0 ? Granularity::perChannel(0) : Granularity::perGroup(1, c.group);
        const QuantType type = c.bits == 2   ? QuantType::Int2
                               : c.bits == 8 ? QuantType::Int8
                                             : QuantType::Int4;
        auto r = quant::awqQuantize(w, h, xMean, type, c.symmetric, g, quant::CodeRange::Full, options);
        ASSERT_TRUE(r.ok()) << c.name << ": " << r.error().userMessage();
        std::istringstream lines(output);
        std::string line;
        bool found = false;
        while (std::getline(lines, line)) {
            if (line.rfind(c.name + " ratio ", 0) != 0)
                continue;
            found = true;
            std::istringstream f(line.substr(c.name.size()));
            std::string word;
            double ratio = 0;
            double loss = 0;
            double rtn = 0;
            f >> word >> ratio >> word >> loss >> word >> rtn;
            EXPECT_DOUBLE_EQ(r->ratio, ratio) << c.name;
            EXPECT_NEAR(r->loss, loss, 1e-9 * std::max(1.0, loss)) << c.name;
            EXPECT_NEAR(r->lossRtn, rtn, 1e-9 * std::max(1.0, rtn)) << c.name;
            // The outlier channels are worth protecting: AWQ beats round-to-nearest.
            EXPECT_LT(r->loss, r->lossRtn) << c.name;
        }
        EXPECT_TRUE(found) << c.name << "\n" << output;
        EXPECT_EQ(bitsDiffer(r->scales, readFloats(dir.file(c.name + ".scales.bin"), {cols})), 0)
            << c.name;
        EXPECT_EQ(bitsDiffer(r->weight, readFloats(dir.file(c.name + ".q.bin"), {rows, cols})), 0)
            << c.name;
        if (c.clip) {
            const std::int64_t groups = c.group < 0 ? 1 : cols / c.group;
            ASSERT_TRUE(r->clipMax.defined()) << c.name;
            EXPECT_EQ(bitsDiffer(r->clipMax,
                                 readFloats(dir.file(c.name + ".clip.bin"), {rows, groups})),
                      0)
                << c.name;
        }
        // The stored qparams reproduce AWQ's weight: round-to-nearest of it is itself.
        EXPECT_EQ(bitsDiffer(quant::fakeQuantize(r->weight, r->params), r->weight), 0) << c.name;
    }
}

TEST(Awq, EngineLayersBeatRoundToNearestAndStoreTheirCodes)
{
    c10::InferenceMode guard;
    at::Generator gen = at::detail::createCPUGenerator(6);
    ir::GraphBuilder g("mlp");
    auto x = g.input("x", {-1, 128});
    const at::Tensor w1 = at::randn({64, 128}, gen) * 0.1;
    const at::Tensor b1 = at::randn({64}, gen) * 0.1;
    const at::Tensor w2 = at::randn({32, 64}, gen) * 0.1;
    x = g.linear("fc1", x, w1, b1);
    x = g.unary("fc1.relu", ir::OpKind::Relu, x);
    x = g.linear("fc2", x, w2, std::nullopt);
    g.output(x);
    const ir::Graph graph = g.build().value();
    const at::Tensor calib = outlierRows(256, 128, 3);

    auto rtnScheme = quant::parseScheme("w4-int4:group=32");
    auto awqScheme = quant::parseScheme("w4-int4:group=32,method=awq");
    ASSERT_TRUE(awqScheme.ok()) << awqScheme.error().userMessage();
    auto rtn = quant::prepare(graph, *rtnScheme, calib);
    auto awq = quant::prepare(graph, *awqScheme, calib);
    ASSERT_TRUE(rtn.ok() && awq.ok()) << (awq.ok() ? "" : awq.error().userMessage());
    EXPECT_EQ(awq->calibSamples, 256);
    for (const std::string layer : {"fc1", "fc2"}) {
        const quant::LayerQuant& lq = awq->layers.at(layer);
        EXPECT_EQ(lq.method, "awq") << lq.note;
        EXPECT_LT(lq.methodLoss, lq.methodLossRtn) << layer;
        ASSERT_TRUE(lq.smooth.defined()) << layer;
        EXPECT_NE(lq.note.find("AWQ scale ratio"), std::string::npos) << lq.note;
        const ir::Node* node = nullptr;
        for (const auto& n : awq->graph.nodes)
            if (n.name == layer)
                node = &n;
        ASSERT_NE(node, nullptr);
        // What the real kernels and exports store: round-to-nearest of codeSource() with the
        // layer's qparams, which must be AWQ's rounded (scaled) weight again.
        const at::Tensor view = quant::weightView(*node, quant::codeSource(lq));
        EXPECT_EQ(bitsDiffer(quant::dequantize(quant::quantize(view, lq.weight), lq.weight),
                             quant::weightView(*node, lq.weightFq)),
                  0)
            << layer;
    }
    // On held-out inputs of the same distribution the AWQ model is closer to float, through
    // the simulated hook (X / s times the rounded W diag(s)).
    const at::Tensor test = outlierRows(256, 128, 4);
    exec::Executor ref(graph);
    const at::Tensor y = ref.run({test}).value().front();
    auto sqnr = [&](const quant::QuantizedModel& m) {
        exec::Executor q(m.graph);
        q.addHook(quant::makeQuantHook(m));
        return analysis::compareTensors(y, q.run({test}).value().front()).sqnrDb;
    };
    EXPECT_GT(sqnr(*awq), sqnr(*rtn) + 0.3);

    auto none = quant::prepare(graph, *awqScheme, at::Tensor());
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("method=awq reads each layer's inputs"),
              std::string::npos)
        << none.error().message;
}

TEST(Awq, SchemeOptions)
{
    auto s = quant::parseScheme("w4-int4:method=awq,group=128");
    ASSERT_TRUE(s.ok()) << s.error().userMessage();
    EXPECT_EQ(s->config.method, quant::LayerConfig::Method::Awq);
    EXPECT_TRUE(s->config.awqClip);
    EXPECT_NE(s->config.describe().find(" awq"), std::string::npos);
    EXPECT_EQ(quant::schemeToJson(*s)["config"]["method"], "awq");
    auto noClip = quant::parseScheme("w4-nf4:method=awq,awq-clip=false");
    ASSERT_TRUE(noClip.ok()) << noClip.error().userMessage();
    EXPECT_FALSE(noClip->config.awqClip);
    EXPECT_FALSE(noClip->config.doubleQuant);  // NF4's double quantization is left behind
    for (const char* bad : {"fp8-e4m3:method=awq", "llm-int8:method=awq", "qat-int8:method=awq",
                            "mxfp4-w:method=awq", "w4-int4:awq-clip=false",
                            "w4-int4:method=awq,damp=0.1", "w4-nf4:method=awq,double-quant=true"}) {
        auto r = quant::parseScheme(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.error().code, ErrorCode::Usage) << bad;
    }
}
