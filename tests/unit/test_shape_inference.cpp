// ir::inferShapes (from the graph alone) against exec::traceShapes (a run on zeros): on every
// graph here, each shape inference derives equals the traced one, and on the graphs the ONNX
// writer fills output shapes for (built in code: CNNs, RNNs, the Hugging Face builders) it
// derives every value.
#include "exec/executor.h"
#include "io/dataset.h"
#include "io/onnx.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "model/hf_builders.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <limits>

using namespace bitlens;
using ir::OpKind;

namespace {

const std::string kData = std::string(BITLENS_TEST_DATA);

at::Tensor randn(std::vector<std::int64_t> shape, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return at::randn(shape, gen);
}

at::Tensor ints(std::vector<std::int64_t> values)
{
    return at::tensor(values, at::TensorOptions().dtype(at::kLong));
}

/// Every inferred shape equals the traced one; with `complete`, every traced value is inferred.
void expectMatchesTrace(const ir::Graph& graph, bool complete)
{
    auto traced = exec::traceShapes(graph);
    ASSERT_TRUE(traced.ok()) << traced.error().userMessage();
    auto inferred = ir::inferShapes(graph);
    ASSERT_TRUE(inferred.ok()) << inferred.error().userMessage();
    for (const auto& [name, shape] : *inferred) {
        if (auto it = traced->find(name); it != traced->end())
            EXPECT_EQ(shape, it->second) << "value '" << name << "'";
        else
            EXPECT_TRUE(graph.initializer(name)) << "value '" << name << "' was not traced";
    }
    for (const auto& out : graph.outputs)
        if (complete)
            EXPECT_TRUE(inferred->count(out.name)) << "output '" << out.name << "' not inferred";
    if (complete)
        for (const auto& [name, shape] : *traced)
            EXPECT_TRUE(inferred->count(name)) << "value '" << name << "' not inferred";
}

ir::Graph hfGraph(const std::string& name)
{
    std::ifstream in(kData + "/hf/" + name + ".json");
    const auto config = nlohmann::json::parse(in);
    auto arrays = io::readNpz(kData + "/hf/" + name + ".npz");
    EXPECT_TRUE(arrays.ok());
    std::map<std::string, at::Tensor> weights;
    if (arrays.ok())
        for (auto& [key, t] : *arrays)
            if (key.rfind("__", 0) != 0)
                weights[key] = t;
    auto graph = name == "lstm" || name == "gru" ? model::buildRnnFromTorch(config, weights, name)
                                                 : model::buildFromHfConfig(config, weights, name);
    EXPECT_TRUE(graph.ok()) << (graph.ok() ? "" : graph.error().userMessage());
    return graph.ok() ? std::move(graph).value() : ir::Graph();
}

} // namespace

TEST(ShapeInference, CnnOpsMatchTheTrace)
{
    ir::GraphBuilder g("cnn");
    auto x = g.input("x", {-1, 3, 11, 9});
    auto y = g.conv2d("conv", x, randn({8, 3, 3, 3}, 1), randn({8}, 2), {2, 1, 1, 1});
    ir::Attributes same;
    same.set("auto_pad", std::string("SAME_UPPER"));
    same.set("strides", std::vector<std::int64_t>{2, 2});
    y = g.node("same", OpKind::Conv, {y, g.constant("same.w", randn({4, 4, 3, 3}, 3))}, [&] {
        ir::Attributes a = same;
        a.set("group", std::int64_t{2});
        return a;
    }());
    ir::Attributes pool;
    pool.set("kernel_shape", std::vector<std::int64_t>{3, 3});
    pool.set("strides", std::vector<std::int64_t>{2, 2});
    pool.set("ceil_mode", std::int64_t{1});
    auto p = g.node("pool", OpKind::MaxPool, {y}, pool);
    ir::Attributes up;
    up.set("strides", std::vector<std::int64_t>{2, 2});
    up.set("output_padding", std::vector<std::int64_t>{1, 0});
    auto t = g.node("up", OpKind::ConvTranspose,
                    {p, g.constant("up.w", randn({4, 6, 2, 3}, 4))}, up);
    auto padded =
        g.node("pad", OpKind::Pad, {t, g.constant("pad.p", ints({0, 0, 1, 0, 0, 0, 0, 2}))});
    auto r = g.node("resize", OpKind::Resize,
                    {padded, "", g.constant("resize.s", at::tensor({1.0f, 1.0f, 2.0f, 0.5f}))});
    ir::Attributes split;
    split.set("axis", std::int64_t{1});
    g.node("split", OpKind::Split, {r}, split);
    auto gp = g.globalAvgPool("gap", r);
    auto f = g.flatten("flat", gp);
    auto l = g.linear("fc", f, randn({5, 6}, 5), randn({5}, 6));
    ir::Attributes keep;
    keep.set("keepdims", std::int64_t{0});
    auto m = g.node("mean", OpKind::ReduceSum, {r, g.constant("mean.axes", ints({2, 3}))}, keep);
    auto mm = g.node("mm", OpKind::MatMul, {m, g.constant("mm.w", randn({6, 3}, 7))});
    auto c = g.concat("cat", {l, mm}, 1);
    g.output(g.softmax("prob", c));
    auto graph = g.build();
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    // The Split node above has one output: ONNX splits into that many equal parts.
    expectMatchesTrace(*graph, true);
    auto shapes = ir::inferShapes(*graph);
    ASSERT_TRUE(shapes.ok());
    EXPECT_EQ(shapes->at("prob"), (std::vector<std::int64_t>{1, 8}));
}

TEST(ShapeInference, TransformerAndRnnBuildersAreInferredCompletely)
{
    for (const char* name : {"bert", "llama", "llama_tied", "gpt2", "lstm", "gru"}) {
        SCOPED_TRACE(name);
        expectMatchesTrace(hfGraph(name), true);
    }
}

TEST(ShapeInference, OnnxFilesAgreeWithTheTraceWhereverInferred)
{
    int graphs = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kData)) {
        if (entry.path().extension() != ".onnx")
            continue;
        SCOPED_TRACE(entry.path().string());
        auto graph = io::readOnnxFile(entry.path().string());
        if (!graph.ok() || !exec::traceShapes(*graph).ok())
            continue;  // files made to be refused
        expectMatchesTrace(*graph, false);
        ++graphs;
    }
    EXPECT_GE(graphs, 5);
}

TEST(ShapeInference, ShapesComputedFromDataAreLeftOut)
{
    ir::GraphBuilder g("dynamic");
    auto x = g.input("x", {-1, 6});
    auto shape = g.input("shape", {2}, ir::DType::Int64);
    auto y = g.node("reshape", OpKind::Reshape, {x, shape});
    g.output(g.unary("relu", OpKind::Relu, y));
    auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    auto shapes = ir::inferShapes(*graph);
    ASSERT_TRUE(shapes.ok());
    EXPECT_EQ(shapes->at("x"), (std::vector<std::int64_t>{1, 6}));
    EXPECT_FALSE(shapes->count("reshape"));
    EXPECT_FALSE(shapes->count("relu"));
}

TEST(ShapeInference, DynamicNonBatchDimensionOfAClassifierNeedsItsSize)
{
    ir::GraphBuilder g("t");
    g.output(g.unary("relu", OpKind::Relu, g.input("x", {-1, -1})));
    auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    auto shapes = ir::inferShapes(*graph);
    ASSERT_FALSE(shapes.ok());
    EXPECT_EQ(shapes.error().code, ErrorCode::Unsupported);
    EXPECT_EQ(exec::traceShapes(*graph).error().message, shapes.error().message);
    auto sized = ir::inferShapes(*graph, {{2, 7}});
    ASSERT_TRUE(sized.ok());
    EXPECT_EQ(sized->at("relu"), (std::vector<std::int64_t>{2, 7}));
}

// The fuzzer's finding (CI, fuzz.onnx: signed overflow in Reshape's product of dimensions) and
// its kin: shape arithmetic on hostile dimensions and values leaves the node unknown, never
// overflows int64 (UBSan aborts on that in the sanitizer build), and reads no value out of range.
TEST(ShapeInference, HostileShapeArithmeticLeavesTheNodeUnknown)
{
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
    ir::GraphBuilder g("hostile");
    auto x = g.input("x", {1, 2, 3});
    // Reshape to [2^62, 4, -1]: the product of the known dimensions overflows.
    auto reshaped =
        g.node("reshape", OpKind::Reshape, {x, g.constant("big", ints({1LL << 62, 4, -1}))});
    // Reshape to [-7, 6]: a negative dimension other than -1.
    auto negative =
        g.node("negative", OpKind::Reshape, {x, g.constant("neg", ints({-7, 6}))});
    // Integer arithmetic on values: INT64_MAX + 1, INT64_MIN * -1, INT64_MIN mod -1.
    auto maxv = g.constant("maxv", ints({kMax}));
    auto minv = g.constant("minv", ints({kMin}));
    auto one = g.constant("one", ints({1}));
    auto minus = g.constant("minus", ints({-1}));
    auto sum = g.node("sum", OpKind::Add, {maxv, one});
    auto product = g.node("product", OpKind::Mul, {minv, minus});
    auto mod = g.node("mod", OpKind::Mod, {minv, minus});
    auto mod2 = g.node("mod2", OpKind::Mod,
                       {g.constant("seven", ints({-7})), g.constant("three", ints({3}))});
    // Tile the dimension 2 by 2^62: it overflows.
    auto tiled = g.node("tile", OpKind::Tile, {x, g.constant("reps", ints({4, 1LL << 62, 1}))});
    // Range from INT64_MIN to INT64_MAX: the span overflows.
    auto range = g.node("range", OpKind::Range, {minv, maxv, one});
    // Slice with step INT64_MIN: negating it overflows.
    auto sliced = g.node("slice", OpKind::Slice,
                         {x, g.constant("starts", ints({-1})), g.constant("ends", ints({kMin})),
                          g.constant("axes", ints({2})), g.constant("steps", ints({kMin}))});
    // Unsqueeze with a repeated axis: more outputs than the input has dimensions to fill.
    auto unsqueezed =
        g.node("unsqueeze", OpKind::Unsqueeze, {x, g.constant("uaxes", ints({0, 0}))});
    for (const auto& v : {reshaped, negative, sum, product, mod, mod2, tiled, range, sliced,
                          unsqueezed})
        g.output(v);
    auto graph = g.build();
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    auto shapes = ir::inferShapes(*graph);
    ASSERT_TRUE(shapes.ok()) << shapes.error().userMessage();
    for (const char* unknown : {"reshape", "negative", "sum", "product", "tile", "range"})
        EXPECT_FALSE(shapes->count(unknown)) << unknown;
    // What can be known still is: INT64_MIN mod -1 is 0, -7 mod 3 is 2 (the divisor's sign), a
    // step of INT64_MIN from the last element takes one element.
    EXPECT_EQ(shapes->at("mod"), (std::vector<std::int64_t>{1}));
    EXPECT_EQ(shapes->at("mod2"), (std::vector<std::int64_t>{1}));
    EXPECT_EQ(shapes->at("slice"), (std::vector<std::int64_t>{1, 2, 1}));
    EXPECT_TRUE(ir::checkShapes(*graph, "hostile.onnx").ok());
}
