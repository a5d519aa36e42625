// BatchNorm folding keeps the function of the network and removes the BN nodes.

#include "exec/executor.h"
#include "quant/bn_fold.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace bitlens;

TEST(BatchNormFold, FoldedGraphComputesTheSameFunction)
{
    at::Generator gen = at::detail::createCPUGenerator(7);
    ir::GraphBuilder g("net");
    auto x = g.input("x", {-1, 3, 8, 8});
    auto c = g.conv2d("conv", x, at::randn({5, 3, 3, 3}, gen), at::randn({5}, gen), {1, 1, 1, 1});
    c = g.batchNorm("bn", c, at::rand({5}, gen) + 0.5, at::randn({5}, gen), at::randn({5}, gen),
                    at::rand({5}, gen) + 0.1, 1e-3);
    auto r = g.unary("relu", ir::OpKind::Relu, c);
    // A BN whose input has a second reader cannot be folded and must stay.
    auto c2 = g.conv2d("conv2", r, at::randn({2, 5, 1, 1}, gen), std::nullopt);
    auto b2 = g.batchNorm("bn2", c2, at::ones({2}), at::zeros({2}), at::zeros({2}), at::ones({2}));
    auto sum = g.binary("add", ir::OpKind::Add, b2, c2);
    g.output(sum);
    const auto graph = g.build().value();

    std::vector<std::string> folded;
    const ir::Graph out = quant::foldBatchNorm(graph, &folded);
    ASSERT_TRUE(out.validate().ok());
    EXPECT_EQ(folded, std::vector<std::string>{"conv<-bn"});
    EXPECT_EQ(out.nodes.size(), graph.nodes.size() - 1);
    EXPECT_EQ(out.initializer("bn.running_mean"), nullptr);

    const at::Tensor input = at::randn({2, 3, 8, 8}, gen);
    exec::Executor a(graph);
    exec::Executor b(out);
    const auto ya = a.run({input}).value().front();
    const auto yb = b.run({input}).value().front();
    EXPECT_TRUE(at::allclose(ya, yb, 1e-4, 1e-5));
}
