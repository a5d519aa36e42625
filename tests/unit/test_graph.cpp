// Graph structure checks and the builder.

#include "ir/graph.h"
#include "jobs/result.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

using namespace bitlens;
using ir::OpKind;

TEST(Graph, OpNamesRoundTripThroughOnnxSpelling)
{
    for (OpKind op : {OpKind::Conv, OpKind::Gemm, OpKind::BatchNorm, OpKind::GlobalAveragePool,
                      OpKind::Softmax, OpKind::Dropout}) {
        const auto back = ir::opKindFromName(ir::opKindName(op));
        ASSERT_TRUE(back.has_value());
        EXPECT_EQ(*back, op);
    }
    EXPECT_EQ(ir::opKindName(OpKind::BatchNorm), "BatchNormalization");
    EXPECT_FALSE(ir::opKindFromName("NonMaxSuppression").has_value());
    EXPECT_EQ(ir::opKindFromName("LSTM"), OpKind::LSTM);
    EXPECT_EQ(ir::opKindName(OpKind::RMSNorm), "RMSNormalization");
}

TEST(Graph, ValidateRejectsUseBeforeDefinition)
{
    ir::Graph graph;
    graph.inputs.push_back({"x", ir::DType::Float32, {1}});
    graph.nodes.push_back({"a", OpKind::Relu, {"y"}, {"z"}, {}});
    graph.outputs.push_back({"z", ir::DType::Float32, {}});
    auto r = graph.validate("m.onnx");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    EXPECT_EQ(r.error().userMessage(), "error: m.onnx: node 'a' (Relu) reads 'y', which no "
                                       "earlier node, input or initializer defines");
}

TEST(Graph, ValidateRejectsDuplicateValuesAndMissingOutputs)
{
    ir::Graph graph;
    graph.inputs.push_back({"x", ir::DType::Float32, {1}});
    graph.nodes.push_back({"a", OpKind::Relu, {"x"}, {"x"}, {}});
    graph.outputs.push_back({"x", ir::DType::Float32, {}});
    EXPECT_FALSE(graph.validate().ok());
    graph.nodes[0].outputs = {"y"};
    graph.outputs[0].name = "nowhere";
    auto r = graph.validate("m.onnx");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "graph output 'nowhere' is never computed");
}

TEST(Graph, ParameterCountsPerNodeAndTotal)
{
    ir::GraphBuilder g("t");
    auto x = g.input("x", {-1, 4});
    auto y = g.linear("fc", x, at::zeros({3, 4}), at::zeros({3}));
    y = g.reshape("r", y, {-1, 3});
    g.output(y);
    auto graph = g.build();
    ASSERT_TRUE(graph.ok());
    EXPECT_EQ(graph->parameterCount(), 15); // the int64 reshape target is not a parameter
    EXPECT_EQ(graph->parameterBytes(), 15 * 4 + 2 * 8);
    EXPECT_EQ(graph->nodeParameterCount(graph->nodes[0]), 15);
    EXPECT_EQ(graph->nodeParameterBytes(graph->nodes[0]), 60);
    EXPECT_EQ(graph->producerOf("fc"), std::optional<std::size_t>(0));
    EXPECT_FALSE(graph->producerOf("x").has_value());
}

TEST(Result, ErrorMessagesNameThePathAndOffset)
{
    EXPECT_EQ(Error::badInput("a.onnx", "truncated", 12).userMessage(),
              "error: a.onnx: truncated (at byte 12)");
    EXPECT_EQ(Error::usage("bad flag").userMessage(), "error: bad flag");
    EXPECT_EQ(exitCode(ErrorCode::Unsupported), 4);
    EXPECT_EQ(exitCode(ErrorCode::Cancelled), 5);
}
