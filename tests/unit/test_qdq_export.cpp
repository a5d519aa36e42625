// ONNX quantization ops and QDQ export: QuantizeLinear / DequantizeLinear /
// DynamicQuantizeLinear against onnxruntime bit for bit (tests/data/qdq, made by
// make_qdq_golden.py), INT4 initializers through the reader and writer, the QDQ graph of each
// exportable scheme, verification (and that it catches a corrupted file), refusals of what ONNX
// cannot hold, and atomic writes.

#include "temp_dir.h"

#include "exec/executor.h"
#include "export/consumer.h"
#include "export/export.h"
#include "export/onnx_qdq.h"
#include "io/dataset.h"
#include "io/onnx.h"
#include "io/protobuf.h"
#include "model/hf_builders.h"
#include "quant/engine.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

using namespace bitlens;
namespace fs = std::filesystem;

namespace {

std::string golden(const std::string& name)
{
    return std::string(BITLENS_TEST_DATA) + "/qdq/" + name;
}

/// Bit-level equality (float outputs compared by their bits, so -0 != +0 and NaN == NaN).
::testing::AssertionResult sameBits(const at::Tensor& got, const at::Tensor& want)
{
    if (got.scalar_type() != want.scalar_type())
        return ::testing::AssertionFailure()
               << "dtype " << got.scalar_type() << ", expected " << want.scalar_type();
    if (got.sizes() != want.sizes())
        return ::testing::AssertionFailure()
               << "shape " << got.sizes() << ", expected " << want.sizes();
    const at::Tensor a = got.contiguous();
    const at::Tensor b = want.contiguous();
    const auto* pa = static_cast<const std::uint8_t*>(a.data_ptr());
    const auto* pb = static_cast<const std::uint8_t*>(b.data_ptr());
    const std::size_t elem = a.element_size();
    for (std::int64_t i = 0; i < a.numel(); ++i) {
        if (std::memcmp(pa + i * elem, pb + i * elem, elem) != 0) {
            const at::Tensor fa = a.reshape({-1}).to(at::kDouble);
            const at::Tensor fb = b.reshape({-1}).to(at::kDouble);
            return ::testing::AssertionFailure()
                   << "element " << i << " is " << fa[i].item<double>() << ", onnxruntime gives "
                   << fb[i].item<double>();
        }
    }
    return ::testing::AssertionSuccess();
}

// ---- The ops against onnxruntime ----------------------------------------------------------

class GoldenQdq : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenQdq, MatchesOnnxRuntimeBitForBit)
{
    const std::string name = GetParam();
    auto graph = io::readOnnxFile(golden(name + ".onnx"));
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    auto arrays = io::readNpz(golden(name + ".npz"));
    ASSERT_TRUE(arrays.ok()) << arrays.error().userMessage();
    exec::Executor executor(*graph);
    auto outputs = executor.run({arrays->at("x")});
    ASSERT_TRUE(outputs.ok()) << outputs.error().userMessage();
    ASSERT_EQ(outputs->size(), graph->outputs.size());
    for (std::size_t i = 0; i < outputs->size(); ++i) {
        const std::string key = "y" + std::to_string(i);
        ASSERT_TRUE(arrays->count(key)) << key;
        EXPECT_TRUE(sameBits((*outputs)[i], arrays->at(key))) << name << " output " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Ops, GoldenQdq,
                         ::testing::Values("q_u8_tensor", "q_i8_axis", "q_u8_nozp",
                                           "qdq_i4_blocked", "dq_i4_blocked", "dq_i4_raw",
                                           "dq_u4_axis", "dq_i8_conv", "qdq_f8", "dyn_mixed",
                                           "dyn_positive", "dyn_zero"));

TEST(QdqOps, Int4ZeroPointMakesQuantizeLinearInt4)
{
    // The zero point of qdq_i4_blocked's QuantizeLinear is an INT4 initializer: the reader
    // records output_dtype so the executor saturates at [-8, 7] and not at int8's range.
    auto graph = io::readOnnxFile(golden("qdq_i4_blocked.onnx"));
    ASSERT_TRUE(graph.ok());
    EXPECT_EQ(graph->initializerTypes.at("zp"), ir::DType::Int4);
    EXPECT_EQ(graph->nodes[0].attrs.getInt("output_dtype", 0), 22);
    EXPECT_EQ(graph->initializer("zp")->scalar_type(), at::kChar);
    ir::Node q = graph->nodes[0];
    const at::Tensor x = at::tensor({100.0f, -100.0f, 0.3f, -0.3f}).reshape({1, 4});
    const at::Tensor y =
        exec::runNode(q, {x, at::full({1, 1}, 0.1f), at::zeros({1, 1}, at::kChar)}, {}).front();
    EXPECT_TRUE(sameBits(y, at::tensor({7, -8, 3, -3}, at::kChar).reshape({1, 4})));
}

TEST(QdqOps, ShapeMismatchesNameTheNode)
{
    ir::Node q;
    q.name = "q1";
    q.op = ir::OpKind::QuantizeLinear;
    q.attrs.set("axis", std::int64_t{1});
    const at::Tensor x = at::zeros({2, 3});
    try {
        exec::runNode(q, {x, at::ones({4}), at::zeros({4}, at::kByte)}, {});
        FAIL() << "a 4-element scale for an axis of 3 must be refused";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "node 'q1' (QuantizeLinear): the scale has shape [4], which is neither a scalar "
                  "nor one value per element of axis 1 of an input [2, 3]");
    }
    q.attrs.set("block_size", std::int64_t{2});
    try {
        exec::runNode(q, {x, at::ones({2, 3}), at::zeros({2, 3}, at::kByte)}, {});
        FAIL() << "blocked scale with the wrong block count must be refused";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("need 2 in that dimension"), std::string::npos)
            << e.what();
    }
    ir::Node dq = q;
    dq.name = "dq1";
    dq.op = ir::OpKind::DequantizeLinear;
    dq.attrs = {};
    // The zero point's type differs from the input's.
    EXPECT_THROW(exec::runNode(dq, {at::zeros({3}, at::kChar), at::ones({}),
                                    at::zeros({}, at::kByte)},
                               {}),
                 std::runtime_error);
}

// ---- INT4 initializers through the writer and reader ------------------------------------

TEST(QdqIo, Int4InitializersRoundTripPackedLowNibbleFirst)
{
    ir::GraphBuilder b("int4");
    const auto x = b.input("x", {5});
    const auto w = b.constant("w", at::tensor({1, -2, 3, -8, 7}, at::kChar));
    const auto s = b.constant("s", at::scalar_tensor(0.5f));
    const auto zp = b.constant("zp", at::zeros({}, at::kChar));
    const auto wd = b.node("dq", ir::OpKind::DequantizeLinear, {w, s, zp});
    b.output(b.binary("add", ir::OpKind::Add, x, wd));
    auto graph = b.build();
    ASSERT_TRUE(graph.ok());
    graph->initializerTypes["w"] = ir::DType::Int4;
    graph->initializerTypes["zp"] = ir::DType::Int4;
    EXPECT_EQ(graph->initializerBytes("w", *graph->initializer("w")), 3);  // 5 codes, 3 bytes
    EXPECT_EQ(io::writtenOpset(*graph), 21);

    auto bytes = io::writeOnnx(*graph);
    ASSERT_TRUE(bytes.ok()) << bytes.error().userMessage();
    // {1, -2} -> 0xE1, {3, -8} -> 0x83, {7} -> 0x07.
    const std::vector<std::uint8_t> packed = {0xE1, 0x83, 0x07};
    EXPECT_NE(std::search(bytes->begin(), bytes->end(), packed.begin(), packed.end()),
              bytes->end());
    auto back = io::readOnnx(*bytes, "int4.onnx");
    ASSERT_TRUE(back.ok()) << back.error().userMessage();
    EXPECT_EQ(back->opsetVersion, 21);
    EXPECT_EQ(back->initializerTypes.at("w"), ir::DType::Int4);
    EXPECT_TRUE(sameBits(*back->initializer("w"), *graph->initializer("w")));
    exec::Executor executor(*back);
    auto y = executor.run({at::zeros({5})});
    ASSERT_TRUE(y.ok()) << y.error().userMessage();
    EXPECT_TRUE(sameBits(y->front(), at::tensor({0.5f, -1.0f, 1.5f, -4.0f, 3.5f})));

    // A value outside [-8, 7] cannot be an int4 code: refused, not wrapped.
    graph->initializers["w"] = at::tensor({1, 9, 3, 0, 0}, at::kChar);
    auto refused = io::writeOnnx(*graph);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message, "initializer 'w' holds 9, which is not a int4 code");
}

TEST(QdqIo, ShortInt4RawDataIsBadInput)
{
    // ModelProto { graph { initializer w: INT4 dims [5], raw_data of 2 bytes (needs 3) } }.
    io::pb::Writer m;
    m.writeInt64(1, 10);
    const auto g = m.beginMessage(7);
    const auto t = m.beginMessage(5);
    m.writeInt64(1, 5);
    m.writeInt64(2, 22);
    m.writeString(8, "w");
    const std::uint8_t raw[2] = {0x21, 0x43};
    m.writeBytes(9, raw, 2);
    m.endMessage(t);
    m.endMessage(g);
    const auto op = m.beginMessage(8);
    m.writeString(1, "");
    m.writeInt64(2, 21);
    m.endMessage(op);
    auto graph = io::readOnnx(m.take(), "short.onnx");
    ASSERT_FALSE(graph.ok());
    EXPECT_EQ(graph.error().code, ErrorCode::BadInput);
    EXPECT_NE(graph.error().message.find("has 2 bytes of raw_data, expected 3 for shape [5] int4"),
              std::string::npos)
        << graph.error().message;
}

// ---- QDQ export of the engine's schemes -------------------------------------------------

ir::Graph convNet(std::uint64_t seed, bool matmulHead = false)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    ir::GraphBuilder g("net");
    auto x = g.input("x", {-1, 1, 8, 8});
    x = g.conv2d("conv", x, at::randn({8, 1, 3, 3}, gen) * 0.5, std::nullopt, {1, 1, 1, 1});
    x = g.batchNorm("bn", x, at::rand({8}, gen) + 0.5, at::randn({8}, gen) * 0.1,
                    at::randn({8}, gen) * 0.1, at::rand({8}, gen) + 0.5);
    x = g.unary("relu", ir::OpKind::Relu, x);
    x = g.maxPool("pool", x, 2, 2);
    x = g.flatten("flat", x);
    x = g.linear("fc1", x, at::randn({32, 128}, gen) * 0.1, at::randn({32}, gen) * 0.1);
    x = g.unary("fc1.relu", ir::OpKind::Relu, x);
    if (matmulHead) {
        // A MatMul with a constant [in, out] weight: the transposed layouts.
        const auto w = g.constant("head.weight", at::randn({32, 4}, gen) * 0.2);
        x = g.matmul("head", x, w);
    } else {
        x = g.linear("fc2", x, at::randn({4, 32}, gen) * 0.2, at::zeros({4}));
    }
    g.output(x);
    return g.build().value();
}

io::Dataset samples(std::int64_t n, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    io::Dataset d;
    d.path = "samples";
    d.inputs = at::rand({n, 1, 8, 8}, gen);
    d.labels = at::randint(0, 4, {n}, gen);
    return d;
}

quant::QuantizedModel prepare(const ir::Graph& graph, const std::string& spec)
{
    auto scheme = quant::parseScheme(spec);
    EXPECT_TRUE(scheme.ok()) << spec;
    auto model = quant::prepare(graph, *scheme, samples(200, 7).inputs);
    EXPECT_TRUE(model.ok()) << spec << ": " << (model.ok() ? "" : model.error().userMessage());
    return std::move(model).value();
}

std::vector<std::string> opsOf(const ir::Graph& g)
{
    std::vector<std::string> ops;
    for (const auto& n : g.nodes)
        ops.emplace_back(ir::opKindName(n.op));
    return ops;
}

TEST(QdqExport, StaticInt8GraphHasCalibratedQdqAndInt8PerChannelWeights)
{
    const auto model = prepare(convNet(1), "static-int8");
    auto g = exporting::buildQdqGraph(model);
    ASSERT_TRUE(g.ok()) << g.error().userMessage();
    const std::vector<std::string> want = {
        "QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv", "Relu", "MaxPool",
        "Flatten", "QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "Gemm", "Relu",
        "QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "Gemm"};
    EXPECT_EQ(opsOf(*g), want);  // BatchNormalization folded away
    // The folded conv weight (BN folding names it "conv.weight_folded") as int8 per channel.
    const at::Tensor* w = g->initializer("conv.weight_folded_quantized");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->scalar_type(), at::kChar);
    EXPECT_EQ(w->sizes(), (std::vector<std::int64_t>{8, 1, 3, 3}));
    ASSERT_NE(g->initializer("conv.weight_folded_scale"), nullptr);
    EXPECT_EQ(g->initializer("conv.weight_folded_scale")->sizes(), (std::vector<std::int64_t>{8}));
    ASSERT_NE(g->initializer("fc1.input_zero_point"), nullptr);
    EXPECT_EQ(g->initializer("fc1.input_zero_point")->scalar_type(), at::kByte);
    EXPECT_EQ(g->initializer("fc1.input_scale")->item<float>(),
              model.layers.at("fc1").act->scale.item<float>());
    EXPECT_EQ(g->initializer("conv.weight_folded"), nullptr);  // no float weights left behind
    EXPECT_EQ(g->initializer("fc1.weight"), nullptr);
    EXPECT_NE(g->initializer("fc1.bias"), nullptr);            // biases stay float
    EXPECT_EQ(g->metadata.at("bitlens.scheme"), "static-int8");
    // int8 codes: about a quarter of the float weights' bytes.
    EXPECT_LT(g->parameterBytes(), model.bytesFloat / 3);
}

TEST(QdqExport, DynamicInt8UsesDynamicQuantizeLinear)
{
    const auto model = prepare(convNet(2), "dynamic-int8");
    auto g = exporting::buildQdqGraph(model);
    ASSERT_TRUE(g.ok()) << g.error().userMessage();
    int dynamic = 0;
    for (const auto& n : g->nodes) {
        dynamic += n.op == ir::OpKind::DynamicQuantizeLinear;
        EXPECT_NE(n.op, ir::OpKind::QuantizeLinear) << n.name;
    }
    EXPECT_EQ(dynamic, 3);
}

TEST(QdqExport, W4Int4UsesBlockedInt4AndReshapesConvWeights)
{
    const auto model = prepare(convNet(3), "w4-int4:group=16");
    auto g = exporting::buildQdqGraph(model);
    ASSERT_TRUE(g.ok()) << g.error().userMessage();
    EXPECT_EQ(io::writtenOpset(*g), 21);
    ASSERT_EQ(g->initializerTypes.count("fc1.weight_quantized"), 1u);
    EXPECT_EQ(g->initializerTypes.at("fc1.weight_quantized"), ir::DType::Int4);
    EXPECT_EQ(g->initializerTypes.at("fc1.weight_zero_point"), ir::DType::Int4);  // asymmetric
    ASSERT_NE(g->initializer("fc1.weight_scale"), nullptr);
    EXPECT_EQ(g->initializer("fc1.weight_scale")->sizes(), (std::vector<std::int64_t>{32, 8}));
    // The conv's groups run over in * kh * kw = 9: stored 2-D, dequantized, reshaped.
    ASSERT_NE(g->initializer("conv.weight_quantized"), nullptr);
    EXPECT_EQ(g->initializer("conv.weight_quantized")->sizes(), (std::vector<std::int64_t>{8, 9}));
    bool reshaped = false;
    for (const auto& n : g->nodes) {
        if (n.op == ir::OpKind::DequantizeLinear && n.inputs[0] == "fc1.weight_quantized") {
            EXPECT_EQ(n.attrs.getInt("block_size", 0), 16);
            EXPECT_EQ(n.attrs.getInt("axis", -1), 1);
        }
        reshaped = reshaped || n.op == ir::OpKind::Reshape;
        EXPECT_NE(n.op, ir::OpKind::QuantizeLinear);  // weight-only: activations stay float
    }
    EXPECT_TRUE(reshaped);
    // 4-bit codes packed two per byte: under a sixth of the float bytes with group 16 scales.
    EXPECT_LT(g->parameterBytes(), model.bytesFloat / 4);
}

struct VerifyCase {
    const char* spec;
    bool matmulHead;
};

class ExportVerify : public ::testing::TestWithParam<VerifyCase> {};

TEST_P(ExportVerify, ReloadedFileMatchesTheInAppModel)
{
    test::TempDir dir;
    const auto [spec, matmulHead] = GetParam();
    const auto model = prepare(convNet(4, matmulHead), spec);
    const std::string path = dir.file("model.onnx");
    auto written = exporting::exportModel(model, exporting::ExportFormat::Onnx, path);
    ASSERT_TRUE(written.ok()) << written.error().userMessage();
    EXPECT_EQ(written->bytes, static_cast<std::int64_t>(fs::file_size(path)));
    EXPECT_EQ(written->quantizedLayers, 3);
    const io::Dataset data = samples(300, 11);
    auto v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model, data);
    ASSERT_TRUE(v.ok()) << v.error().userMessage();
    EXPECT_TRUE(v->ok) << v->message;
    EXPECT_EQ(v->weightsChecked, 3);
    EXPECT_EQ(v->weightsMismatched, 0);
    EXPECT_EQ(v->samples, 300);
    ASSERT_TRUE(v->metricApp && v->metricFile);
    const std::string s = spec;
    if (s.rfind("w4-int4", 0) == 0) {
        // Weight-only: the same dequantized weights through the same float ops, bit for bit.
        EXPECT_EQ(v->maxAbsDiff, 0.0) << v->message;
        EXPECT_EQ(v->metricApp->value, v->metricFile->value);
    } else {
        // Only rounding ties may differ as ONNX rounds: a handful of elements by one step.
        EXPECT_LE(v->argmaxDisagreements, 3) << v->message;
    }
    EXPECT_EQ(v->maxAbsDiffSameRounding, 0.0) << v->message;
}

INSTANTIATE_TEST_SUITE_P(Schemes, ExportVerify,
                         ::testing::Values(VerifyCase{"static-int8", false},
                                           VerifyCase{"dynamic-int8", false},
                                           VerifyCase{"w4-int4:group=16", false},
                                           VerifyCase{"static-w4a8", false},
                                           VerifyCase{"smoothquant-int8", false},
                                           VerifyCase{"static-int8:per=tensor", true},
                                           VerifyCase{"w4-int4:group=8", true},
                                           VerifyCase{"dynamic-int8", true}));

TEST(ExportVerify, CatchesAWrongActivationScale)
{
    test::TempDir dir;
    const auto model = prepare(convNet(5), "static-int8");
    auto g = exporting::buildQdqGraph(model);
    ASSERT_TRUE(g.ok());
    // One percent off in one layer's activation scale: the kind of slip an exporter makes.
    g->initializers["fc1.input_scale"] = g->initializers["fc1.input_scale"] * 1.01f;
    const std::string path = dir.file("bad.onnx");
    ASSERT_TRUE(io::writeOnnxFile(*g, path).ok());
    auto v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model, samples(300, 12));
    ASSERT_TRUE(v.ok()) << v.error().userMessage();
    EXPECT_FALSE(v->ok) << v->message;
    EXPECT_GT(v->maxAbsDiffSameRounding, 0.0);
    const Error e = exporting::mismatchError(path, *v);
    EXPECT_EQ(e.code, ErrorCode::Runtime);
    EXPECT_NE(e.message.find("max |diff|"), std::string::npos) << e.message;

    // A wrong weight is caught by the bit-for-bit weight check.
    g = exporting::buildQdqGraph(model);
    ASSERT_EQ(g->initializers.count("conv.weight_folded_quantized"), 1u);
    at::Tensor& codes = g->initializers["conv.weight_folded_quantized"];
    codes = codes.clone();
    codes.view({-1})[0].fill_(codes.view({-1})[0].item<int>() ^ 1);
    ASSERT_TRUE(io::writeOnnxFile(*g, path).ok());
    v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model, samples(50, 12));
    ASSERT_TRUE(v.ok());
    EXPECT_FALSE(v->ok);
    EXPECT_EQ(v->weightsMismatched, 1);
}

// ---- Verification of sequence models (issue #37 item 2) ----------------------------------

/// Token ids 1..15 [n, s] as floats (how text data sets hold them), the last two positions of
/// every other row padding (0).
io::Dataset tokenWindows(std::int64_t n, std::int64_t s, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    at::Tensor ids = at::randint(1, 16, {n, s}, gen).to(at::kFloat);
    for (std::int64_t i = 0; i < n; i += 2)
        ids[i].slice(0, s - 2, s).zero_();
    io::Dataset d;
    d.path = "windows";
    d.inputs = ids;
    return d;
}

/// A tiny sequence model over a 16-token vocabulary: embedding, a dense layer and, for a
/// language model, a head to logits [B, S, 16]; an encoder ("embedding") declares
/// attention_mask as its second input, as BERT does, and zeroes padded positions with it.
ir::Graph tinySequenceModel(bool languageModel)
{
    at::Generator gen = at::detail::createCPUGenerator(21);
    ir::GraphBuilder g(languageModel ? "lm" : "encoder");
    const auto ids = g.input("input_ids", {-1, -1}, ir::DType::Int64);
    const auto mask =
        languageModel ? std::string() : g.input("attention_mask", {-1, -1}, ir::DType::Int64);
    ir::Attributes axis0;
    axis0.set("axis", std::int64_t{0});
    auto x = g.node("embed", ir::OpKind::Gather,
                    {g.constant("embed.weight", at::randn({16, 8}, gen)), ids}, axis0);
    x = g.matmul("dense", x, g.constant("dense.weight", at::randn({8, 8}, gen) * 0.3));
    x = g.unary("dense.relu", ir::OpKind::Relu, x);
    if (languageModel) {
        x = g.matmul("head", x, g.constant("head.weight", at::randn({8, 16}, gen) * 0.5));
    } else {
        ir::Attributes toFloat;
        toFloat.set("to", std::int64_t{1});
        auto m = g.node("mask.float", ir::OpKind::Cast, {mask}, toFloat);
        m = g.node("mask.unsqueeze", ir::OpKind::Unsqueeze,
                   {m, g.constant("mask.axes", at::tensor({std::int64_t{-1}}))});
        x = g.binary("masked", ir::OpKind::Mul, x, m);
    }
    g.output(x);
    ir::Graph graph = g.build().value();
    graph.metadata["task"] = languageModel ? "lm" : "embedding";
    return graph;
}

quant::QuantizedModel prepareSequence(const ir::Graph& graph, const std::string& spec)
{
    auto scheme = quant::parseScheme(spec);
    EXPECT_TRUE(scheme.ok()) << spec;
    auto model = quant::prepare(graph, *scheme, tokenWindows(8, 12, 5).inputs);
    EXPECT_TRUE(model.ok()) << spec << ": " << (model.ok() ? "" : model.error().userMessage());
    return std::move(model).value();
}

TEST(ExportVerify, EncoderIsFedTheInputsItsGraphDeclares)
{
    test::TempDir dir;
    for (const std::string spec : {"dynamic-int8", "static-int8"}) {
        const auto model = prepareSequence(tinySequenceModel(false), spec);
        const std::string path = dir.file("encoder.onnx");
        ASSERT_TRUE(exporting::exportModel(model, exporting::ExportFormat::Onnx, path).ok());
        // It was "verification runs models with one input" (exit 4).
        auto v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model,
                                         tokenWindows(10, 12, 6));
        ASSERT_TRUE(v.ok()) << spec << ": " << v.error().userMessage();
        EXPECT_TRUE(v->ok) << v->message;
        EXPECT_EQ(v->task, "embedding");
        EXPECT_EQ(v->samples, 10);
        EXPECT_EQ(v->weightsChecked, 1);
        EXPECT_EQ(v->maxAbsDiffSameRounding, 0.0) << v->message;
        ASSERT_TRUE(v->embeddingCosineMean && v->embeddingCosineMin) << v->message;
        EXPECT_GT(*v->embeddingCosineMin, 0.999) << v->message;
        EXPECT_NE(v->message.find("embedding cosine file vs in-app"), std::string::npos)
            << v->message;
        EXPECT_EQ(v->top1Positions, 0);
        EXPECT_FALSE(v->metricApp);
    }
}

TEST(ExportVerify, LanguageModelReportsPerplexityKldAndTokenTop1)
{
    test::TempDir dir;
    const auto model = prepareSequence(tinySequenceModel(true), "dynamic-int8");
    const std::string path = dir.file("lm.onnx");
    ASSERT_TRUE(exporting::exportModel(model, exporting::ExportFormat::Onnx, path).ok());
    auto v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model,
                                     tokenWindows(10, 12, 7));
    ASSERT_TRUE(v.ok()) << v.error().userMessage();
    EXPECT_TRUE(v->ok) << v->message;
    EXPECT_EQ(v->task, "lm");
    EXPECT_EQ(v->tokens, 10 * 11);
    EXPECT_EQ(v->top1Positions, 10 * 12);
    EXPECT_GE(v->sameTop1Rate, 0.95) << v->message;
    ASSERT_TRUE(v->metricApp && v->metricFile && v->meanKld && v->maxKld);
    EXPECT_EQ(v->metricApp->name, "perplexity");
    EXPECT_FALSE(v->metricApp->higherIsBetter);
    EXPECT_GT(v->metricApp->value, 1.0);
    EXPECT_LE(std::abs(v->metricFile->value / v->metricApp->value - 1.0), v->metricTolerance);
    EXPECT_GE(*v->meanKld, 0.0);
    EXPECT_LE(*v->meanKld, *v->maxKld);
    EXPECT_LT(*v->maxKld, 1e-2) << v->message;
    EXPECT_NE(v->message.find("perplexity"), std::string::npos) << v->message;
    const auto j = exporting::exportToJson(exporting::ExportResult(), *v)["verify"];
    EXPECT_EQ(j["task"], "lm");
    EXPECT_EQ(j["metric_name"], "perplexity");
    EXPECT_EQ(j["tokens"], 110);
    EXPECT_DOUBLE_EQ(j["perplexity_app"].get<double>(), v->metricApp->value);
    EXPECT_TRUE(j["embedding_cosine_mean"].is_null());
}

// ---- Verification by the consumer (issue #37 item 3) --------------------------------------

TEST(ExportVerify, OnnxRuntimeRunsTheFileAndAgrees)
{
    test::TempDir dir;
    const auto model = prepare(convNet(4), "static-int8");
    const std::string path = dir.file("model.onnx");
    ASSERT_TRUE(exporting::exportModel(model, exporting::ExportFormat::Onnx, path).ok());
    auto v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model, samples(300, 13));
    ASSERT_TRUE(v.ok()) << v.error().userMessage();
    EXPECT_TRUE(v->ok) << v->message;
    // The bootstrap venv has onnxruntime (make test needs it): the consumer is asked, not
    // skipped.
    ASSERT_TRUE(v->consumer);
    EXPECT_EQ(v->consumer->runtime.rfind("onnxruntime ", 0), 0u)
        << v->consumer->runtime << v->consumer->skipped;
    EXPECT_EQ(v->consumer->samples, 256);  // the first batch of the verification
    EXPECT_TRUE(v->consumer->ok) << v->message;
    EXPECT_EQ(v->consumer->top1Positions, 256);
    EXPECT_GE(v->consumer->sameTop1Rate, 1.0 - 1.0 / 256) << v->message;
    EXPECT_GT(v->consumer->maxAbsDiff, 0.0);  // its own kernels: not bit for bit
    EXPECT_NE(v->message.find("onnxruntime "), std::string::npos) << v->message;
    const auto j = exporting::exportToJson(exporting::ExportResult(), *v)["verify"]["consumer"];
    EXPECT_EQ(j["runtime"], v->consumer->runtime);
    EXPECT_TRUE(j["skipped"].is_null());
    EXPECT_EQ(j["ok"], true);

    // Not asked where the user says so: a reason, no failure.
    ::setenv("BITLENS_CONSUMER", "off", 1);
    v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model, samples(20, 13));
    ::unsetenv("BITLENS_CONSUMER");
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok) << v->message;
    ASSERT_TRUE(v->consumer);
    EXPECT_TRUE(v->consumer->runtime.empty());
    EXPECT_EQ(v->consumer->skipped, "BITLENS_CONSUMER=off");
    EXPECT_NE(v->message.find("consumer not asked: BITLENS_CONSUMER=off"), std::string::npos);
}

TEST(ExportVerify, AFileTheConsumerRefusesFailsTheVerification)
{
    test::TempDir dir;
    const auto model = prepare(convNet(4), "static-int8");
    auto g = exporting::buildQdqGraph(model);
    ASSERT_TRUE(g.ok());
    // A graph BitLens runs but onnxruntime refuses: a QuantizeLinear scale of rank 2 (ONNX
    // allows a scalar or a 1-D per-axis scale only).
    const std::string path = dir.file("refused.onnx");
    bool changed = false;
    for (auto& [name, t] : g->initializers)
        if (!changed && name.find("input_scale") != std::string::npos && t.dim() == 0) {
            t = t.reshape({1, 1});
            changed = true;
        }
    ASSERT_TRUE(changed);
    ASSERT_TRUE(io::writeOnnxFile(*g, path).ok());
    auto graph = io::readOnnxFile(path);
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    const at::Tensor x = samples(4, 14).inputs;
    auto ran = exporting::runConsumer(exporting::ExportFormat::Onnx, path, *graph, {x});
    ASSERT_FALSE(ran.ok());
    EXPECT_EQ(ran.error().code, ErrorCode::Runtime);
    EXPECT_EQ(ran.error().path, path);
    EXPECT_NE(ran.error().message.find("onnxruntime"), std::string::npos)
        << ran.error().message;
}

TEST(ExportVerify, ASafetensorsFileOutsideAHuggingFaceFolderIsNotAskedOfTransformers)
{
    // transformers builds models from a config.json with a model_type; a convolutional net's
    // export has only the quantization_config there: the consumer is not asked, the verify
    // line says why, and the verification stands on BitLens's own checks.
    test::TempDir dir;
    const auto model = prepare(convNet(4), "static-int8");
    const std::string path = dir.file("model.safetensors");
    ASSERT_TRUE(exporting::exportModel(model, exporting::ExportFormat::Safetensors, path).ok());
    auto v = exporting::verifyExport(path, exporting::ExportFormat::Safetensors, model,
                                     samples(20, 13));
    ASSERT_TRUE(v.ok()) << v.error().userMessage();
    EXPECT_TRUE(v->ok) << v->message;
    ASSERT_TRUE(v->consumer);
    EXPECT_TRUE(v->consumer->runtime.empty());
    EXPECT_NE(v->consumer->skipped.find("names no model_type"), std::string::npos)
        << v->consumer->skipped;
    EXPECT_NE(v->message.find("consumer not asked: "), std::string::npos) << v->message;
}

/// The tiny Llama of tests/data/hf (2 layers, vocabulary 64) built as the app builds it.
ir::Graph tinyLlama()
{
    std::ifstream in(std::string(BITLENS_TEST_DATA) + "/hf/llama.json");
    const auto config = nlohmann::json::parse(in);
    auto arrays = io::readNpz(std::string(BITLENS_TEST_DATA) + "/hf/llama.npz");
    EXPECT_TRUE(arrays.ok());
    std::map<std::string, at::Tensor> weights;
    for (auto& [key, t] : *arrays)
        if (key.rfind("__", 0) != 0)
            weights[key] = t;
    auto graph = model::buildFromHfConfig(config, weights, "llama");
    EXPECT_TRUE(graph.ok()) << (graph.ok() ? "" : graph.error().userMessage());
    return std::move(graph).value();
}

// onnxruntime refused BitLens's Llama exports on more than one window ("Inputs 'cos_cache'
// and 'sin_cache' are expected to have the same shape as input 'x', got 1 and 256"): the
// rotary tables are now [B, S, hd/2] as RotaryEmbedding-23 asks without position_ids.
TEST(ExportVerify, LlamaWindowsRunInOnnxRuntime)
{
    test::TempDir dir;
    const auto model = prepareSequence(tinyLlama(), "dynamic-int8");
    const std::string path = dir.file("llama.onnx");
    ASSERT_TRUE(exporting::exportModel(model, exporting::ExportFormat::Onnx, path).ok());
    auto v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model,
                                     tokenWindows(6, 12, 8));
    ASSERT_TRUE(v.ok()) << v.error().userMessage();
    EXPECT_TRUE(v->ok) << v->message;
    ASSERT_TRUE(v->consumer);
    EXPECT_EQ(v->consumer->runtime.rfind("onnxruntime ", 0), 0u) << v->consumer->skipped;
    EXPECT_EQ(v->consumer->samples, 6);
    ASSERT_TRUE(v->consumer->metricApp && v->consumer->metricFile && v->consumer->meanKld);
    EXPECT_LE(std::abs(v->consumer->metricFile->value / v->consumer->metricApp->value - 1.0),
              0.002)
        << v->message;
}

TEST(ExportVerify, InputsForBatchMakesAnEncodersInputsByName)
{
    ir::GraphBuilder g("bert");
    const auto ids = g.input("input_ids", {-1, -1}, ir::DType::Int64);
    const auto mask = g.input("attention_mask", {-1, -1}, ir::DType::Int64);
    const auto types = g.input("token_type_ids", {-1, -1}, ir::DType::Int64);
    g.input("position_ids", {-1, -1}, ir::DType::Int32);
    auto x = g.binary("a", ir::OpKind::Add, ids, mask);
    x = g.binary("b", ir::OpKind::Add, x, types);
    g.output(x);
    ir::Graph graph = g.build().value();
    graph.metadata["pad_token_id"] = "3";
    const at::Tensor batch = at::tensor({5.0f, 3.0f, 3.0f, 7.0f, 8.0f, 3.0f}).reshape({2, 3});
    const auto feeds = exec::inputsForBatch(graph, batch);
    ASSERT_EQ(feeds.size(), 4u);
    EXPECT_TRUE(at::equal(feeds[0], batch.to(at::kLong)));
    EXPECT_TRUE(at::equal(feeds[1], at::tensor({1, 0, 0, 1, 1, 0}, at::kLong).reshape({2, 3})));
    EXPECT_TRUE(at::equal(feeds[2], at::zeros({2, 3}, at::kLong)));
    EXPECT_EQ(feeds[3].scalar_type(), at::kInt);
    EXPECT_TRUE(at::equal(feeds[3], at::tensor({0, 1, 2, 0, 1, 2}, at::kInt).reshape({2, 3})));
    // An input it does not know: the batch alone (the run then names what is missing).
    graph.inputs[3].name = "past_key_values";
    EXPECT_EQ(exec::inputsForBatch(graph, batch).size(), 1u);
}

TEST(ExportRefusals, SchemesOnnxCannotHoldNameTheSchemeAndAlternatives)
{
    for (const std::string spec : {"w4-nf4", "w4-fp4", "llm-int8", "fp16", "bf16", "fp8-e4m3",
                                   "dynamic-int8:act-per=token", "static-int8:weight=int2",
                                   "static-int8:weight=fp8_e4m3,act=fp8_e4m3,act-sym=true"}) {
        auto scheme = quant::parseScheme(spec);
        ASSERT_TRUE(scheme.ok()) << spec;
        auto r = exporting::checkExportable(*scheme, exporting::ExportFormat::Onnx);
        ASSERT_FALSE(r.ok()) << spec;
        EXPECT_EQ(r.error().code, ErrorCode::Unsupported) << spec;
        EXPECT_EQ(r.error().message.rfind("scheme " + spec + " cannot be exported to ONNX: ", 0),
                  0u)
            << r.error().message;
    }
    auto nf4 = quant::parseScheme("w4-nf4");
    EXPECT_NE(exporting::checkExportable(*nf4, exporting::ExportFormat::Onnx)
                  .error()
                  .message.find("w4-int4"),
              std::string::npos);
    for (const std::string spec : {"static-int8", "dynamic-int8", "w4-int4", "static-w4a8",
                                   "smoothquant-int8", "w4-int4:group=128"}) {
        auto scheme = quant::parseScheme(spec);
        EXPECT_TRUE(exporting::checkExportable(*scheme, exporting::ExportFormat::Onnx).ok())
            << spec;
    }
    // A float override of an otherwise unsupported layer type is fine; an unsupported
    // override is named.
    auto scheme = quant::parseScheme("static-int8");
    scheme->overrides["fc1"] = scheme->config;
    scheme->overrides["fc1"]->weightType = quant::QuantType::NF4;
    auto r = exporting::checkExportable(*scheme, exporting::ExportFormat::Onnx);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("override of layer 'fc1'"), std::string::npos);
    EXPECT_EQ(exporting::checkExportable(*quant::parseScheme("static-int8"),
                                         exporting::ExportFormat::Gguf)
                  .error()
                  .code,
              ErrorCode::Unsupported);
    // compressed-tensors holds int8 but not NF4 or SmoothQuant's divisor.
    const auto st = exporting::ExportFormat::Safetensors;
    EXPECT_TRUE(exporting::checkExportable(*quant::parseScheme("static-int8"), st).ok());
    EXPECT_EQ(exporting::checkExportable(*quant::parseScheme("w4-nf4"), st).error().code,
              ErrorCode::Unsupported);
    EXPECT_EQ(exporting::checkExportable(*quant::parseScheme("smoothquant-int8"), st).error().code,
              ErrorCode::Unsupported);
}

TEST(ExportFiles, FormatsFromNamesAndExtensions)
{
    EXPECT_EQ(*exporting::parseFormat("ONNX"), exporting::ExportFormat::Onnx);
    EXPECT_EQ(*exporting::formatFromPath("a/b.gguf"), exporting::ExportFormat::Gguf);
    EXPECT_EQ(*exporting::formatFromPath("m.safetensors"), exporting::ExportFormat::Safetensors);
    EXPECT_EQ(exporting::formatFromPath("m.bin").error().code, ErrorCode::Usage);
    EXPECT_EQ(exporting::parseFormat("tflite").error().code, ErrorCode::Usage);
}

TEST(ExportFiles, FailuresAndCancellationLeaveNoFile)
{
    test::TempDir dir;
    const auto model = prepare(convNet(6), "static-int8");

    // A missing folder: BadInput naming it; nothing created.
    const std::string missing = dir.file("no/such/model.onnx");
    auto r = exporting::exportModel(model, exporting::ExportFormat::Onnx, missing);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    EXPECT_FALSE(fs::exists(missing));

    // Cancelled: no file, and an existing file at the path keeps its content.
    const std::string path = dir.file("model.onnx");
    { std::ofstream(path) << "previous"; }
    CancelToken cancel;
    cancel.cancel();
    r = exporting::exportModel(model, exporting::ExportFormat::Onnx, path, Progress::none(),
                               cancel);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
    std::ifstream in(path);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(content, "previous");

    // A read-only folder (not for root, who may write anywhere): Runtime, no file, no temp.
    if (::geteuid() != 0) {
        const std::string ro = dir.file("ro");
        fs::create_directories(ro);
        fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
        r = exporting::exportModel(model, exporting::ExportFormat::Onnx, ro + "/model.onnx");
        fs::permissions(ro, fs::perms::owner_all);
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.error().code, ErrorCode::Runtime);
        EXPECT_TRUE(fs::is_empty(ro));
    }

    // A folder sits at the path: refused before writing (io::checkWritable, issue #49), Runtime
    // with the reason, no temporary file, the folder untouched.
    const std::string taken = dir.file("taken.onnx");
    fs::create_directories(taken);
    r = exporting::exportModel(model, exporting::ExportFormat::Onnx, taken);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Runtime);
    EXPECT_NE(r.error().message.find("is a directory, expected a file"), std::string::npos)
        << r.error().message;
    EXPECT_TRUE(fs::is_directory(taken));
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path()))
        ++entries;
    EXPECT_EQ(entries, 2 + (::geteuid() != 0 ? 1 : 0));  // model.onnx, taken.onnx (and ro)

    // Unsupported formats write nothing.
    r = exporting::exportModel(model, exporting::ExportFormat::Gguf, dir.file("m.gguf"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_FALSE(fs::exists(dir.file("m.gguf")));
}

} // namespace

// ---- Interop options (issue #37 item 4) ---------------------------------------------------

/// wrange=127: the exported int8 weights stay in [-127, 127] with scale max|w| / 127 per
/// channel and zero point 0, and onnxruntime (the consumer) agrees with the in-app model.
TEST(ExportInterop, Wrange127WeightsAreNarrowInTheFileAndOnnxruntimeAgrees)
{
    test::TempDir dir;
    const auto graph = convNet(4);
    const auto model = prepare(graph, "static-int8:wrange=127");
    const quant::LayerQuant& fc1 = model.layers.at("fc1");
    EXPECT_EQ(fc1.weight.range, quant::CodeRange::Narrow);
    auto g = exporting::buildQdqGraph(model);
    ASSERT_TRUE(g.ok()) << g.error().userMessage();
    const at::Tensor* codes = g->initializer("fc1.weight_quantized");
    const at::Tensor* scale = g->initializer("fc1.weight_scale");
    const at::Tensor* zp = g->initializer("fc1.weight_zero_point");
    ASSERT_TRUE(codes && scale && zp);
    // int8 codes go to the file as INT8 by their own dtype (initializerTypes holds the packed
    // 4-bit types only).
    EXPECT_EQ(codes->scalar_type(), at::kChar);
    EXPECT_EQ(g->initializerTypes.count("fc1.weight_quantized"), 0u);
    EXPECT_GE(codes->min().item<std::int64_t>(), -127);
    EXPECT_EQ(codes->abs().amax(1).min().item<std::int64_t>(), 127);  // each row's extreme
    EXPECT_TRUE(at::all(*zp == 0).item<bool>());
    // The file's scale is max|w| / 127 per output channel, as onnxruntime's symmetric
    // quantizer (float32 division, bit for bit).
    const auto node = std::find_if(model.graph.nodes.begin(), model.graph.nodes.end(),
                                   [](const ir::Node& n) { return n.name == "fc1"; });
    ASSERT_NE(node, model.graph.nodes.end());
    const at::Tensor w = quant::weightView(*node, quant::codeSource(fc1));
    const at::Tensor absmax = w.abs().amax(1).to(at::kFloat);
    EXPECT_TRUE(at::equal(scale->to(at::kFloat).reshape({-1}), absmax / 127.0f));
    // The default range on the same weights: -128 is used or the scale is / 127.5.
    const auto full = prepare(graph, "static-int8");
    EXPECT_FALSE(at::equal(full.layers.at("fc1").weight.scale, fc1.weight.scale));

    const std::string path = dir.file("narrow.onnx");
    ASSERT_TRUE(exporting::exportModel(model, exporting::ExportFormat::Onnx, path).ok());
    auto v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model, samples(300, 13));
    ASSERT_TRUE(v.ok()) << v.error().userMessage();
    EXPECT_TRUE(v->ok) << v->message;
    EXPECT_EQ(v->weightsMismatched, 0);
    EXPECT_EQ(v->maxAbsDiffSameRounding, 0.0);
    ASSERT_TRUE(v->consumer);
    EXPECT_EQ(v->consumer->runtime.rfind("onnxruntime ", 0), 0u)
        << v->consumer->runtime << v->consumer->skipped;
    EXPECT_TRUE(v->consumer->ok) << v->message;
}

/// A group that does not divide a row: ONNX keeps the shorter last block (DequantizeLinear
/// block_size, ceil(in / B) scales), BitLens's reader and onnxruntime give the in-app values.
TEST(ExportPartialGroups, OnnxKeepsTheShortLastBlockAndOnnxruntimeAgrees)
{
    test::TempDir dir;
    const auto graph = convNet(5);
    // fc1: 128 inputs, groups of 24: five whole and one of 8. conv: 9 inputs, one block of 9.
    auto scheme = quant::parseScheme("w4-int4:group=24");
    ASSERT_TRUE(scheme.ok());
    ASSERT_TRUE(exporting::checkExportableModel(graph, *scheme, exporting::ExportFormat::Onnx).ok());
    const auto model = prepare(graph, "w4-int4:group=24");
    auto g = exporting::buildQdqGraph(model);
    ASSERT_TRUE(g.ok()) << g.error().userMessage();
    ASSERT_NE(g->initializer("fc1.weight_scale"), nullptr);
    EXPECT_EQ(g->initializer("fc1.weight_scale")->sizes(), (std::vector<std::int64_t>{32, 6}));
    const std::string path = dir.file("partial.onnx");
    auto written = exporting::exportModel(model, exporting::ExportFormat::Onnx, path);
    ASSERT_TRUE(written.ok()) << written.error().userMessage();
    auto v = exporting::verifyExport(path, exporting::ExportFormat::Onnx, model, samples(300, 15));
    ASSERT_TRUE(v.ok()) << v.error().userMessage();
    EXPECT_TRUE(v->ok) << v->message;
    EXPECT_EQ(v->weightsMismatched, 0) << v->message;
    ASSERT_TRUE(v->consumer);
    EXPECT_EQ(v->consumer->runtime.rfind("onnxruntime ", 0), 0u)
        << v->consumer->runtime << v->consumer->skipped;
    EXPECT_TRUE(v->consumer->ok) << v->message;
    EXPECT_LT(v->consumer->maxAbsDiff, 1e-4 * std::max(1.0, v->outputAbsMax)) << v->message;
}

/// safetensors (compressed-tensors) cannot hold a shorter last group: refused before anything
/// is written (no file), naming the weight, its row length and the group size; before
/// calibration too (checkExportableModel); a dividing group is written.
TEST(ExportPartialGroups, SafetensorsRefusesBeforeWritingNamingTheTensor)
{
    test::TempDir dir;
    const auto graph = convNet(5);
    auto scheme = quant::parseScheme("w4-int4:group=24");
    ASSERT_TRUE(scheme.ok());
    auto early = exporting::checkExportableModel(graph, *scheme,
                                                 exporting::ExportFormat::Safetensors, "net.onnx");
    ASSERT_FALSE(early.ok());
    EXPECT_EQ(early.error().code, ErrorCode::Unsupported);
    EXPECT_EQ(exitCode(early.error().code), 4);
    const std::string& m = early.error().message;
    // The first layer in graph order whose rows 24 does not divide: the conv (9 inputs).
    EXPECT_NE(m.find("weight 'conv.weight' (layer 'conv') has rows of 9 inputs, which groups of "
                     "24 do not divide"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("Nothing was written"), std::string::npos) << m;
    EXPECT_NE(m.find("export to ONNX"), std::string::npos) << m;

    // Keep the conv float: fc1's 128 inputs are the next refusal, with a group that divides.
    auto noConv = quant::parseScheme("w4-int4:group=24");
    ASSERT_TRUE(noConv.ok());
    ASSERT_TRUE(quant::applyOverride(*noConv, "conv", "float").ok());
    early = exporting::checkExportableModel(graph, *noConv, exporting::ExportFormat::Safetensors);
    ASSERT_FALSE(early.ok());
    EXPECT_NE(early.error().message.find("weight 'fc1.weight' (layer 'fc1') has rows of 128 "
                                         "inputs, which groups of 24 do not divide (the last "
                                         "would hold 8)"),
              std::string::npos)
        << early.error().message;
    EXPECT_NE(early.error().message.find("Use group=16"), std::string::npos)
        << early.error().message;

    // The export front refuses too (a run prepared elsewhere), and leaves no file.
    const auto model = prepare(graph, "w4-int4:group=24");
    const std::string path = dir.file("partial.safetensors");
    auto r = exporting::exportModel(model, exporting::ExportFormat::Safetensors, path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_EQ(r.error().path, path);
    EXPECT_TRUE(fs::is_empty(dir.path()));
    const std::string folder = dir.file("folder/");
    r = exporting::exportModel(model, exporting::ExportFormat::Safetensors, folder);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(fs::is_empty(dir.path()));

    // A group that divides fc1's rows is written (the conv's 9 inputs kept float).
    auto divides = quant::parseScheme("w4-int4:group=16");
    ASSERT_TRUE(divides.ok());
    ASSERT_TRUE(quant::applyOverride(*divides, "conv", "float").ok());
    EXPECT_TRUE(exporting::checkExportableModel(graph, *divides,
                                                exporting::ExportFormat::Safetensors).ok());
    auto prepared = quant::prepare(graph, *divides, samples(200, 7).inputs);
    ASSERT_TRUE(prepared.ok());
    auto written = exporting::exportModel(*prepared, exporting::ExportFormat::Safetensors, path);
    ASSERT_TRUE(written.ok()) << written.error().userMessage();
    EXPECT_TRUE(fs::exists(path));
}

/// The interop options as the export dialog and `export --help` name them, with defaults.
TEST(ExportInterop, OptionsNameTheirDefaultsAndTheFormatsRule)
{
    const auto defaults = exporting::interopOptions(exporting::ExportFormat::Onnx);
    ASSERT_EQ(defaults.size(), 3u);
    EXPECT_EQ(defaults[0].key, "wrange");
    EXPECT_EQ(defaults[0].value, "128");
    EXPECT_EQ(defaults[0].defaultValue, "128");
    EXPECT_EQ(defaults[1].key, "reduce-range");
    EXPECT_EQ(defaults[1].defaultValue, "false");
    EXPECT_EQ(defaults[2].key, "partial groups");
    auto scheme = quant::parseScheme("static-int8:wrange=127");
    ASSERT_TRUE(scheme.ok());
    const auto lines = exporting::interopOptionLines(exporting::ExportFormat::Safetensors, &*scheme);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0].rfind("wrange = 127 (default 128): ", 0), 0u) << lines[0];
    EXPECT_EQ(lines[2], "partial groups: " +
                            exporting::partialGroupRule(exporting::ExportFormat::Safetensors));
    EXPECT_NE(exporting::partialGroupRule(exporting::ExportFormat::Onnx).find("kept"),
              std::string::npos);
    EXPECT_NE(exporting::partialGroupRule(exporting::ExportFormat::Safetensors).find("refused"),
              std::string::npos);
    EXPECT_NE(exporting::partialGroupRule(exporting::ExportFormat::Gguf).find("llama-quantize"),
              std::string::npos);
}
