// Executor: each op against LibTorch's own functional ops, hooks, autograd, and error messages.

#include "exec/executor.h"
#include "ir/graph.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace bitlens;
using ir::OpKind;

namespace {

at::Tensor randn(std::vector<std::int64_t> shape, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return at::randn(shape, gen);
}

at::Tensor runSingle(const ir::Graph& graph, const std::vector<at::Tensor>& inputs)
{
    exec::Executor executor(graph);
    auto out = executor.run(inputs);
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().userMessage());
    return out.ok() ? out->front() : at::Tensor();
}

} // namespace

TEST(Executor, ConvBatchNormReluPoolMatchesAten)
{
    const auto w = randn({8, 3, 3, 3}, 1);
    const auto b = randn({8}, 2);
    const auto scale = randn({8}, 3).abs() + 0.5;
    const auto shift = randn({8}, 4);
    const auto mean = randn({8}, 5);
    const auto var = randn({8}, 6).abs() + 0.1;
    ir::GraphBuilder g("t");
    auto x = g.input("x", {-1, 3, 9, 9});
    auto y = g.conv2d("conv", x, w, b, {2, 1, 1, 1});
    y = g.batchNorm("bn", y, scale, shift, mean, var, 1e-3);
    y = g.unary("relu", OpKind::Relu, y);
    y = g.maxPool("pool", y, 2, 2);
    g.output(y);
    const auto graph = g.build();
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();

    const auto input = randn({2, 3, 9, 9}, 7);
    at::Tensor expected = at::conv2d(input, w, b, {2, 2}, {1, 1});
    expected = at::batch_norm(expected, scale, shift, mean, var, false, 0.1, 1e-3, false);
    expected = at::max_pool2d(at::relu(expected), {2, 2}, {2, 2});
    EXPECT_TRUE(at::allclose(runSingle(*graph, {input}), expected, 1e-5, 1e-6));
}

TEST(Executor, LinearGemmMatMulAndActivations)
{
    const auto w = randn({5, 4}, 11);
    const auto b = randn({5}, 12);
    ir::GraphBuilder g("t");
    auto x = g.input("x", {-1, 4});
    auto lin = g.linear("fc", x, w, b);
    auto gelu = g.unary("gelu", OpKind::Gelu, lin);
    auto silu = g.unary("silu", OpKind::Silu, lin);
    auto sig = g.unary("sig", OpKind::Sigmoid, lin);
    auto tanh = g.unary("tanh", OpKind::Tanh, lin);
    auto sum = g.binary("add", OpKind::Add, gelu, silu);
    auto prod = g.binary("mul", OpKind::Mul, sig, tanh);
    auto cat = g.concat("cat", {sum, prod}, 1);
    auto sm = g.softmax("softmax", cat, 1);
    g.output(sm);
    const auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    const auto input = randn({3, 4}, 13);
    const auto l = at::linear(input, w, b);
    const auto expected =
        at::softmax(at::cat({at::gelu(l) + at::silu(l), at::sigmoid(l) * at::tanh(l)}, 1), 1);
    EXPECT_TRUE(at::allclose(runSingle(*graph, {input}), expected, 1e-5, 1e-6));
}

TEST(Executor, FlattenReshapeTransposeGlobalPoolAvgPool)
{
    ir::GraphBuilder g("t");
    auto x = g.input("x", {-1, 2, 6, 6});
    auto avg = g.avgPool("avg", x, 3, 3);
    auto gap = g.globalAvgPool("gap", x);
    auto flat = g.flatten("flat", avg, 1);
    auto r = g.reshape("reshape", flat, {0, 2, -1});
    ir::Attributes perm;
    perm.set("perm", std::vector<std::int64_t>{0, 2, 1});
    auto t = g.node("transpose", OpKind::Transpose, {r}, perm);
    g.output(t);
    g.output(gap);
    const auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    const auto input = randn({2, 2, 6, 6}, 21);
    exec::Executor executor(*graph);
    auto out = executor.run({input});
    ASSERT_TRUE(out.ok());
    const auto expected = at::avg_pool2d(input, {3, 3}, {3, 3}).reshape({2, 2, -1}).permute({0, 2, 1});
    EXPECT_TRUE(at::equal((*out)[0], expected));
    EXPECT_TRUE(at::allclose((*out)[1], input.mean({2, 3}, true)));
}

TEST(Executor, AsymmetricConvPadsAreApplied)
{
    const auto w = randn({1, 1, 2, 2}, 31);
    ir::GraphBuilder g("t");
    auto x = g.input("x", {1, 1, 4, 4});
    ir::Attributes attrs;
    attrs.set("pads", std::vector<std::int64_t>{0, 0, 1, 1});
    auto y = g.node("conv", OpKind::Conv, {x, g.constant("w", w)}, attrs);
    g.output(y);
    const auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    const auto input = randn({1, 1, 4, 4}, 32);
    const auto expected = at::conv2d(at::constant_pad_nd(input, {0, 1, 0, 1}), w);
    const auto got = runSingle(*graph, {input});
    ASSERT_EQ(got.sizes(), expected.sizes());
    EXPECT_TRUE(at::allclose(got, expected, 1e-5, 1e-6));
}

TEST(Executor, HooksSeeWeightsAndCanReplaceOutputs)
{
    struct Recorder : exec::NodeHook {
        std::vector<std::string> seen;
        void beforeNode(const ir::Node& node, std::vector<at::Tensor>& inputs) override
        {
            seen.push_back(node.name + ":" + std::to_string(inputs.size()));
        }
        void afterNode(const ir::Node& node, std::vector<at::Tensor>& outputs) override
        {
            if (node.name == "fc")
                outputs[0] = at::zeros_like(outputs[0]);
        }
    };
    ir::GraphBuilder g("t");
    auto x = g.input("x", {-1, 3});
    auto y = g.linear("fc", x, randn({2, 3}, 41), randn({2}, 42));
    y = g.unary("sig", OpKind::Sigmoid, y);
    g.output(y);
    const auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    exec::Executor executor(*graph);
    auto hook = std::make_shared<Recorder>();
    executor.addHook(hook);
    auto out = executor.run({randn({4, 3}, 43)});
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(hook->seen, (std::vector<std::string>{"fc:3", "sig:1"}));
    EXPECT_TRUE(at::allclose(out->front(), at::full({4, 2}, 0.5)));
}

TEST(Executor, AutogradFlowsToInitializers)
{
    ir::GraphBuilder g("t");
    auto x = g.input("x", {-1, 3});
    auto y = g.linear("fc", x, randn({2, 3}, 51), randn({2}, 52));
    g.output(y);
    auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    at::Tensor& weight = graph->initializers.at("fc.weight");
    weight.requires_grad_(true);
    exec::Executor executor(*graph, exec::ExecOptions{c10::Device(c10::kCPU), true});
    const auto input = randn({4, 3}, 53);
    executor.forward({input}).front().sum().backward();
    ASSERT_TRUE(weight.grad().defined());
    // d(sum(x W^T + b))/dW = column sums of x, for every output row.
    EXPECT_TRUE(at::allclose(weight.grad(), input.sum(0).unsqueeze(0).expand({2, 3})));
}

TEST(Executor, TrainingModeBatchNormUpdatesRunningStats)
{
    ir::GraphBuilder g("t");
    auto x = g.input("x", {-1, 2, 3, 3});
    auto y = g.batchNorm("bn", x, at::ones({2}), at::zeros({2}), at::zeros({2}), at::ones({2}));
    g.output(y);
    auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    exec::Executor executor(*graph, exec::ExecOptions{c10::Device(c10::kCPU), true, 0.5});
    const auto input = randn({4, 2, 3, 3}, 61) + 3.0;
    executor.forward({input});
    const auto batchMean = input.mean({0, 2, 3});
    EXPECT_TRUE(at::allclose(graph->initializers.at("bn.running_mean"), batchMean * 0.5));
}

TEST(Executor, InputShapeMismatchIsBadInputNamingTheInput)
{
    ir::GraphBuilder g("t");
    auto x = g.input("image", {-1, 1, 28, 28});
    g.output(g.unary("relu", OpKind::Relu, x));
    const auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    exec::Executor executor(*graph);
    auto out = executor.run({at::zeros({2, 3, 28, 28})});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().code, ErrorCode::BadInput);
    EXPECT_EQ(out.error().message,
              "input 'image' has shape [2, 3, 28, 28], the model expects [N, 1, 28, 28]");
}

TEST(Executor, LayerShapeMismatchNamesTheNode)
{
    ir::GraphBuilder g("t");
    auto x = g.input("x", {-1, -1});
    g.output(g.linear("fc", x, randn({2, 3}, 71), std::nullopt));
    const auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    exec::Executor executor(*graph);
    auto out = executor.run({at::zeros({2, 5})});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().message,
              "node 'fc' (Gemm): input has shape [2, 5], which does not fit weight [2, 3] "
              "(transposed)");
}

TEST(Executor, TraceShapesGivesBatchOneShapes)
{
    ir::GraphBuilder g("t");
    auto x = g.input("x", {-1, 1, 8, 8});
    auto y = g.conv2d("conv", x, randn({4, 1, 3, 3}, 81), std::nullopt, {1, 1, 1, 1});
    y = g.maxPool("pool", y, 2, 2);
    g.output(g.flatten("flat", y));
    const auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    auto shapes = exec::traceShapes(*graph);
    ASSERT_TRUE(shapes.ok());
    EXPECT_EQ(shapes->at("conv"), (std::vector<std::int64_t>{1, 4, 8, 8}));
    EXPECT_EQ(shapes->at("flat"), (std::vector<std::int64_t>{1, 64}));
}
