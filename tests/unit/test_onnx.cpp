// ONNX reader and writer: round trips of builder graphs (structure, attributes, weight bytes and
// executor outputs), a golden model written by the `onnx` Python package, and corrupt files
// generated from an enum of defects, each of which must come back as a clean Error.

#include "exec/executor.h"
#include "io/dataset.h"
#include "io/onnx.h"
#include "io/protobuf.h"
#include "ir/graph.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace bitlens;
using ir::OpKind;

namespace {

using Bytes = std::vector<std::uint8_t>;

at::Tensor randn(std::vector<std::int64_t> shape, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return at::randn(shape, gen);
}

/// conv > bn > relu > pool, then flatten and reshape of the same value, concatenated, then a
/// linear layer and softmax: every op kind the zoo's CNNs use, plus concat and reshape.
ir::Graph makeCnn()
{
    ir::GraphBuilder g("roundtrip_cnn");
    const auto x = g.input("image", {-1, 1, 8, 8});
    auto y = g.conv2d("conv1", x, randn({4, 1, 3, 3}, 1), randn({4}, 2), {1, 1, 1, 1});
    y = g.batchNorm("bn1", y, randn({4}, 3).abs() + 0.5, randn({4}, 4), randn({4}, 5) * 0.1,
                    randn({4}, 6).abs() + 0.5, 1e-5);
    y = g.unary("relu1", OpKind::Relu, y);
    y = g.maxPool("pool1", y, 2, 2);
    const auto flat = g.flatten("flatten", y, 1);
    const auto reshaped = g.reshape("reshape", y, {-1, 64});
    const auto both = g.concat("concat", {flat, reshaped}, 1);
    const auto logits = g.linear("fc", both, randn({10, 128}, 7), randn({10}, 8));
    g.output(g.softmax("softmax", logits, 1));
    auto graph = g.build();
    EXPECT_TRUE(graph.ok()) << graph.error().userMessage();
    return graph.value();
}

void expectSameTensor(const at::Tensor& a, const at::Tensor& b, const std::string& name)
{
    ASSERT_TRUE(b.defined()) << name;
    EXPECT_EQ(a.scalar_type(), b.scalar_type()) << name;
    ASSERT_EQ(a.sizes(), b.sizes()) << name;
    const at::Tensor ca = a.contiguous();
    const at::Tensor cb = b.contiguous();
    ASSERT_EQ(ca.nbytes(), cb.nbytes()) << name;
    if (ca.nbytes() > 0)  // an empty tensor's data pointer may be null (memcmp's UB)
        EXPECT_EQ(std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()), 0)
            << name << ": bytes differ";
}

/// Same names, types and shapes; an unknown (empty) shape in `a` may have been filled in `b`.
void expectSameValueInfos(const std::vector<ir::ValueInfo>& a,
                          const std::vector<ir::ValueInfo>& b)
{
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].name, b[i].name);
        EXPECT_EQ(a[i].dtype, b[i].dtype) << a[i].name;
        if (!a[i].shape.empty()) {
            EXPECT_EQ(a[i].shape, b[i].shape) << a[i].name;
        }
    }
}

void expectSameGraph(const ir::Graph& a, const ir::Graph& b)
{
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.opsetVersion, b.opsetVersion);
    EXPECT_EQ(a.metadata, b.metadata);
    expectSameValueInfos(a.inputs, b.inputs);
    expectSameValueInfos(a.outputs, b.outputs);
    ASSERT_EQ(a.nodes.size(), b.nodes.size());
    for (std::size_t i = 0; i < a.nodes.size(); ++i) {
        const auto& na = a.nodes[i];
        const auto& nb = b.nodes[i];
        EXPECT_EQ(na.name, nb.name);
        EXPECT_EQ(na.op, nb.op) << na.name;
        EXPECT_EQ(na.inputs, nb.inputs) << na.name;
        EXPECT_EQ(na.outputs, nb.outputs) << na.name;
        EXPECT_TRUE(na.attrs.all() == nb.attrs.all()) << na.name << ": attributes differ";
    }
    ASSERT_EQ(a.initializers.size(), b.initializers.size());
    for (const auto& [name, tensor] : a.initializers) {
        const at::Tensor* other = b.initializer(name);
        ASSERT_NE(other, nullptr) << name;
        expectSameTensor(tensor, *other, name);
    }
}

Bytes writeOrFail(const ir::Graph& graph)
{
    auto bytes = io::writeOnnx(graph);
    EXPECT_TRUE(bytes.ok()) << bytes.error().userMessage();
    return bytes.ok() ? bytes.value() : Bytes{};
}

ir::Graph readOrFail(const Bytes& bytes, const std::string& path = "roundtrip.onnx")
{
    auto graph = io::readOnnx(bytes, path);
    EXPECT_TRUE(graph.ok()) << graph.error().userMessage();
    return graph.ok() ? graph.value() : ir::Graph{};
}

at::Tensor runFirst(const ir::Graph& graph, const std::vector<at::Tensor>& inputs)
{
    exec::Executor executor(graph);
    auto out = executor.run(inputs);
    EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().userMessage());
    return out.ok() ? out->front() : at::Tensor();
}

// ---- A test-side ONNX encoder with knobs for every defect ----------------------------------

struct TensorSpec {
    std::string name;
    std::vector<std::int64_t> dims;
    std::int64_t dataType = 1;
    std::optional<Bytes> raw;
    std::vector<float> floatData;
    bool unpackedFloats = false;
    std::vector<std::int64_t> int32Data;
    std::vector<std::int64_t> int64Data;
    std::optional<std::int64_t> dataLocation;
};

struct AttrSpec {
    std::string name;
    std::int64_t type = 0; ///< AttributeProto.type; 0 leaves the field out, as IR v1 did
    std::optional<std::int64_t> i;
    std::optional<float> f;
    std::vector<std::int64_t> ints;
    std::optional<TensorSpec> t;
    bool graph = false; ///< an (empty) GraphProto value
};

struct NodeSpec {
    std::string name;
    std::string opType;
    std::vector<std::string> inputs;
    std::vector<std::string> outputs;
    std::vector<AttrSpec> attrs;
    std::string domain;
};

struct ValueSpec {
    std::string name;
    std::vector<std::int64_t> dims; ///< -1 is written as dim_param "N"
    std::int64_t elemType = 1;
    bool sequence = false;          ///< a sequence type instead of a tensor type
};

struct ModelSpec {
    std::int64_t opset = 17;
    std::string opsetDomain;
    std::vector<ValueSpec> inputs;
    std::vector<ValueSpec> outputs;
    std::vector<NodeSpec> nodes;
    std::vector<TensorSpec> initializers;
    Bytes extraGraphBytes; ///< appended verbatim inside GraphProto
};

TensorSpec tensorSpec(std::string name, std::vector<std::int64_t> dims, std::int64_t dataType,
                      std::optional<Bytes> raw = std::nullopt)
{
    TensorSpec t;
    t.name = std::move(name);
    t.dims = std::move(dims);
    t.dataType = dataType;
    t.raw = std::move(raw);
    return t;
}

AttrSpec attrSpec(std::string name, std::int64_t type = 0)
{
    AttrSpec a;
    a.name = std::move(name);
    a.type = type;
    return a;
}

NodeSpec nodeSpec(std::string name, std::string opType, std::vector<std::string> inputs,
                  std::vector<std::string> outputs, std::vector<AttrSpec> attrs = {})
{
    NodeSpec n;
    n.name = std::move(name);
    n.opType = std::move(opType);
    n.inputs = std::move(inputs);
    n.outputs = std::move(outputs);
    n.attrs = std::move(attrs);
    return n;
}

ValueSpec valueSpec(std::string name, std::vector<std::int64_t> dims)
{
    ValueSpec v;
    v.name = std::move(name);
    v.dims = std::move(dims);
    return v;
}

Bytes floatBytes(const std::vector<float>& values)
{
    Bytes bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
}

void encodeTensor(io::pb::Writer& w, std::uint32_t field, const TensorSpec& t)
{
    const auto marker = w.beginMessage(field);
    for (const auto d : t.dims)
        w.writeInt64(1, d);
    w.writeInt64(2, t.dataType);
    if (t.unpackedFloats) {
        for (const float v : t.floatData)
            w.writeFloat(4, v);
    } else {
        w.writePackedFloats(4, t.floatData);
    }
    w.writePackedInt64s(5, t.int32Data);
    w.writePackedInt64s(7, t.int64Data);
    if (!t.name.empty())
        w.writeString(8, t.name);
    if (t.raw)
        w.writeBytes(9, t.raw->data(), t.raw->size());
    if (t.dataLocation) {
        const auto entry = w.beginMessage(13);
        w.writeString(1, "location");
        w.writeString(2, "weights.bin");
        w.endMessage(entry);
        w.writeInt64(14, *t.dataLocation);
    }
    w.endMessage(marker);
}

void encodeValue(io::pb::Writer& w, std::uint32_t field, const ValueSpec& v)
{
    const auto marker = w.beginMessage(field);
    w.writeString(1, v.name);
    const auto type = w.beginMessage(2);
    if (v.sequence) {
        const auto seq = w.beginMessage(4);
        w.endMessage(seq);
    } else {
        const auto tensor = w.beginMessage(1);
        w.writeInt64(1, v.elemType);
        const auto shape = w.beginMessage(2);
        for (const auto d : v.dims) {
            const auto dim = w.beginMessage(1);
            if (d < 0)
                w.writeString(2, "N");
            else
                w.writeInt64(1, d);
            w.endMessage(dim);
        }
        w.endMessage(shape);
        w.endMessage(tensor);
    }
    w.endMessage(type);
    w.endMessage(marker);
}

Bytes encode(const ModelSpec& m)
{
    io::pb::Writer w;
    w.writeInt64(1, 8);
    w.writeString(2, "test_onnx");
    const auto graph = w.beginMessage(7);
    for (const auto& n : m.nodes) {
        const auto node = w.beginMessage(1);
        for (const auto& in : n.inputs)
            w.writeString(1, in);
        for (const auto& out : n.outputs)
            w.writeString(2, out);
        w.writeString(3, n.name);
        w.writeString(4, n.opType);
        for (const auto& a : n.attrs) {
            const auto attr = w.beginMessage(5);
            w.writeString(1, a.name);
            if (a.f)
                w.writeFloat(2, *a.f);
            if (a.i)
                w.writeInt64(3, *a.i);
            if (a.t)
                encodeTensor(w, 5, *a.t);
            if (a.graph) {
                const auto g = w.beginMessage(6);
                w.writeString(2, "body");
                w.endMessage(g);
            }
            for (const auto v : a.ints)
                w.writeInt64(8, v);
            if (a.type != 0)
                w.writeInt64(20, a.type);
            w.endMessage(attr);
        }
        if (!n.domain.empty())
            w.writeString(7, n.domain);
        w.endMessage(node);
    }
    w.writeString(2, "spec");
    for (const auto& t : m.initializers)
        encodeTensor(w, 5, t);
    for (const auto& v : m.inputs)
        encodeValue(w, 11, v);
    for (const auto& v : m.outputs)
        encodeValue(w, 12, v);
    for (const auto b : m.extraGraphBytes)
        w.writeVarint(b); // bytes below 0x80 are their own varint
    w.endMessage(graph);
    const auto opset = w.beginMessage(8);
    w.writeString(1, m.opsetDomain);
    w.writeInt64(2, m.opset);
    w.endMessage(opset);
    return w.take();
}

/// x[N,4] @ w[4,4] -> Relu -> z.
ModelSpec baseModel()
{
    ModelSpec m;
    m.inputs = {valueSpec("x", {-1, 4})};
    m.outputs = {valueSpec("z", {-1, 4})};
    std::vector<float> w(16);
    for (std::size_t i = 0; i < w.size(); ++i)
        w[i] = 0.25f * static_cast<float>(i) - 2.0f;
    m.initializers = {tensorSpec("w", {4, 4}, 1, floatBytes(w))};
    m.nodes = {nodeSpec("mm", "MatMul", {"x", "w"}, {"y"}), nodeSpec("act", "Relu", {"y"}, {"z"})};
    return m;
}

} // namespace

// ---- Round trips -----------------------------------------------------------------------------

TEST(OnnxRoundTrip, BuilderCnnKeepsStructureAttributesAndWeightBytes)
{
    ir::Graph graph = makeCnn();
    graph.metadata["source"] = "test_onnx";
    graph.metadata["license"] = "MIT";
    const Bytes bytes = writeOrFail(graph);
    const ir::Graph back = readOrFail(bytes);
    expectSameGraph(graph, back);
    // Spot checks on values a reader could plausibly get wrong.
    ASSERT_EQ(back.nodes.size(), 9u);
    EXPECT_EQ(back.nodes[1].attrs.getFloat("epsilon", 0.0), 1e-5);
    EXPECT_EQ(back.nodes[0].attrs.getInts("pads", {}), (std::vector<std::int64_t>{1, 1, 1, 1}));
    EXPECT_EQ(back.nodes[7].attrs.getInt("transB", 0), 1);
    EXPECT_EQ(back.inputs[0].shape, (std::vector<std::int64_t>{-1, 1, 8, 8}));
    // The builder leaves output shapes unknown; the writer infers them (ONNX requires them),
    // keeping the batch dimension dynamic like the input's.
    ASSERT_TRUE(graph.outputs[0].shape.empty());
    EXPECT_EQ(back.outputs[0].shape, (std::vector<std::int64_t>{-1, 10}));
    // Writing what we read gives the same bytes: the writer is deterministic.
    EXPECT_EQ(writeOrFail(back), bytes);
}

TEST(OnnxRoundTrip, ExecutorOutputsAreBitIdentical)
{
    const ir::Graph graph = makeCnn();
    const ir::Graph back = readOrFail(writeOrFail(graph));
    const at::Tensor x = randn({3, 1, 8, 8}, 42);
    const at::Tensor expected = runFirst(graph, {x});
    const at::Tensor got = runFirst(back, {x});
    ASSERT_TRUE(expected.defined() && got.defined());
    EXPECT_EQ(got.sizes(), (std::vector<std::int64_t>{3, 10}));
    EXPECT_TRUE(at::equal(expected, got));
}

TEST(OnnxRoundTrip, EveryInitializerDtypeKeepsItsBytes)
{
    ir::GraphBuilder g("dtypes");
    g.output(g.unary("id", OpKind::Identity, g.input("x", {2})));
    const at::Tensor base = randn({2, 3}, 9) * 4;
    g.constant("f32", base);
    g.constant("f64", base.to(at::kDouble));
    g.constant("f16", base.to(at::kHalf));
    g.constant("bf16", base.to(at::kBFloat16));
    g.constant("f8e4m3", base.to(at::kFloat8_e4m3fn));
    g.constant("f8e5m2", base.to(at::kFloat8_e5m2));
    g.constant("i8", base.to(at::kChar));
    g.constant("u8", base.abs().to(at::kByte));
    g.constant("i32", base.to(at::kInt));
    g.constant("i64", base.to(at::kLong) * 1000000000000LL);
    g.constant("bool", base > 0);
    g.constant("scalar", at::scalar_tensor(3.5));
    g.constant("empty", at::empty({0, 3}));
    auto graph = g.build();
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    // A transposed (non-contiguous) weight is written in logical order.
    graph->initializers["transposed"] = base.t();
    const ir::Graph back = readOrFail(writeOrFail(*graph));
    expectSameGraph(*graph, back);
}

TEST(OnnxRoundTrip, SiluIsWrittenAsSigmoidTimesInput)
{
    ir::GraphBuilder g("silu");
    g.output(g.unary("act", OpKind::Silu, g.input("x", {-1, 5})));
    const auto graph = g.build();
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    const ir::Graph back = readOrFail(writeOrFail(*graph));
    ASSERT_EQ(back.nodes.size(), 2u);
    EXPECT_EQ(back.nodes[0].name, "act/sigmoid");
    EXPECT_EQ(back.nodes[0].op, OpKind::Sigmoid);
    EXPECT_EQ(back.nodes[0].inputs, (std::vector<std::string>{"x"}));
    EXPECT_EQ(back.nodes[1].name, "act");
    EXPECT_EQ(back.nodes[1].op, OpKind::Mul);
    EXPECT_EQ(back.nodes[1].inputs, (std::vector<std::string>{"x", back.nodes[0].outputs[0]}));
    EXPECT_EQ(back.nodes[1].outputs, (std::vector<std::string>{"act"}));
    const at::Tensor x = randn({4, 5}, 3);
    EXPECT_TRUE(at::allclose(runFirst(back, {x}), at::silu(x), 1e-6, 1e-7));
}

TEST(OnnxRoundTrip, GeluRaisesTheOpsetTo20)
{
    ir::GraphBuilder g("gelu");
    g.output(g.unary("act", OpKind::Gelu, g.input("x", {-1, 5})));
    auto graph = g.build();
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    graph->opsetVersion = 17;
    EXPECT_EQ(readOrFail(writeOrFail(*graph)).opsetVersion, 20);
    // Graphs that claim an older opset are written as opset 13, the oldest BitLens reads.
    ir::GraphBuilder h("relu");
    h.output(h.unary("act", OpKind::Relu, h.input("x", {-1, 5})));
    auto relu = h.build();
    ASSERT_TRUE(relu.ok());
    relu->opsetVersion = 11;
    EXPECT_EQ(readOrFail(writeOrFail(*relu)).opsetVersion, 13);
}

TEST(OnnxRoundTrip, WriterRejectsDtypesOnnxExportCannotHold)
{
    ir::Graph graph = makeCnn();
    graph.initializers["extra"] = at::zeros({2}, at::kShort);
    const auto bytes = io::writeOnnx(graph);
    ASSERT_FALSE(bytes.ok());
    EXPECT_EQ(bytes.error().code, ErrorCode::Unsupported);
    EXPECT_EQ(bytes.error().message,
              "initializer 'extra' has dtype Short, which BitLens cannot write to ONNX");
}

TEST(OnnxFile, WritesAtomicallyAndReadsBack)
{
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() /
                         ("bitlens_onnx_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir);
    const std::string path = (dir / "cnn.onnx").string();
    const ir::Graph graph = makeCnn();
    const auto written = io::writeOnnxFile(graph, path);
    ASSERT_TRUE(written.ok()) << written.error().userMessage();
    const auto back = io::readOnnxFile(path);
    ASSERT_TRUE(back.ok()) << back.error().userMessage();
    expectSameGraph(graph, *back);
    // Only the model itself is left in the folder: no temporary files.
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);

    const std::string missing = (dir / "no_such_dir" / "cnn.onnx").string();
    const auto failed = io::writeOnnxFile(graph, missing);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().path, missing);
    EXPECT_FALSE(fs::exists(missing));

    const auto notThere = io::readOnnxFile((dir / "absent.onnx").string());
    ASSERT_FALSE(notThere.ok());
    EXPECT_EQ(notThere.error().code, ErrorCode::BadInput);
    fs::remove_all(dir);
}

// ---- Files written by other tools --------------------------------------------------------------

TEST(OnnxGolden, ModelFromOnnxHelperMatchesTorchFunctional)
{
    const std::string dir = std::string(BITLENS_TEST_DATA) + "/onnx/";
    const auto graph = io::readOnnxFile(dir + "small_cnn.onnx");
    ASSERT_TRUE(graph.ok()) << graph.error().userMessage();
    EXPECT_EQ(graph->name, "small_cnn");
    EXPECT_EQ(graph->opsetVersion, 17);
    EXPECT_EQ(graph->metadata.at("source"), "make_onnx_golden.py");
    // conv1.weight was also listed as a graph input (old exporters did): not a real input.
    ASSERT_EQ(graph->inputs.size(), 1u);
    EXPECT_EQ(graph->inputs[0].name, "input");
    EXPECT_EQ(graph->inputs[0].shape, (std::vector<std::int64_t>{-1, 1, 8, 8}));
    ASSERT_EQ(graph->outputs.size(), 1u);
    EXPECT_EQ(graph->outputs[0].shape, (std::vector<std::int64_t>{-1, 3}));

    // The Constant node became the initializer fc.bias; the unnamed Relu got a name.
    std::vector<std::string> names;
    std::vector<OpKind> ops;
    for (const auto& node : graph->nodes) {
        names.push_back(node.name);
        ops.push_back(node.op);
    }
    EXPECT_EQ(names, (std::vector<std::string>{"conv1", "bn1", "Relu_0", "pool", "flatten", "fc",
                                               "softmax"}));
    EXPECT_EQ(ops, (std::vector<OpKind>{OpKind::Conv, OpKind::BatchNorm, OpKind::Relu,
                                        OpKind::MaxPool, OpKind::Flatten, OpKind::Gemm,
                                        OpKind::Softmax}));
    EXPECT_EQ(graph->initializers.size(), 8u);
    ASSERT_NE(graph->initializer("fc.bias"), nullptr);
    EXPECT_EQ(graph->initializer("fc.bias")->sizes(), (std::vector<std::int64_t>{3}));
    ASSERT_NE(graph->initializer("conv1.bias"), nullptr); // float_data encoded
    EXPECT_EQ(graph->initializer("conv1.bias")->sizes(), (std::vector<std::int64_t>{4}));
    const auto& conv = graph->nodes[0].attrs;
    EXPECT_EQ(conv.getInts("pads", {}), (std::vector<std::int64_t>{1, 1, 1, 1}));
    EXPECT_EQ(conv.getInts("strides", {}), (std::vector<std::int64_t>{2, 2}));
    EXPECT_EQ(graph->nodes[1].attrs.getFloat("epsilon", 0.0), 1e-3);
    EXPECT_EQ(graph->nodes[5].attrs.getInt("transB", 0), 1);

    const auto input = io::readNpy(dir + "small_cnn_input.npy");
    const auto expected = io::readNpy(dir + "small_cnn_expected.npy");
    ASSERT_TRUE(input.ok()) << input.error().userMessage();
    ASSERT_TRUE(expected.ok()) << expected.error().userMessage();
    const at::Tensor got = runFirst(*graph, {*input});
    ASSERT_TRUE(got.defined());
    EXPECT_TRUE(at::allclose(got, *expected, 1e-5, 1e-5))
        << "max abs diff " << (got - *expected).abs().max().item<float>();
}

TEST(OnnxReader, DecodesTypedDataFieldsConstantsAndUntypedAttributes)
{
    ModelSpec m = baseModel();
    TensorSpec i8 = tensorSpec("i8", {3}, 3);
    i8.int32Data = {-5, 7, -128};
    TensorSpec u8 = tensorSpec("u8", {1}, 2);
    u8.int32Data = {200};
    TensorSpec f16 = tensorSpec("f16", {2}, 10);
    f16.int32Data = {0x3C00, 0xC000}; // 1.0, -2.0 as float16 bit patterns
    TensorSpec flag = tensorSpec("flag", {2}, 9);
    flag.int32Data = {0, 3};
    TensorSpec i64 = tensorSpec("i64", {1}, 7);
    i64.int64Data = {-(std::int64_t{1} << 40)};
    TensorSpec unpacked = tensorSpec("unpacked", {2}, 1);
    unpacked.floatData = {1.5f, -0.25f};
    unpacked.unpackedFloats = true;
    for (auto* t : {&i8, &u8, &f16, &flag, &i64, &unpacked})
        m.initializers.push_back(*t);
    AttrSpec valueFloat = attrSpec("value_float", 1);
    valueFloat.f = 2.5f;
    AttrSpec valueInts = attrSpec("value_ints", 7);
    valueInts.ints = {1, -1};
    m.nodes.insert(m.nodes.begin(), {nodeSpec("c1", "Constant", {}, {"k1"}, {valueFloat}),
                                     nodeSpec("c2", "Constant", {}, {"k2"}, {valueInts})});
    AttrSpec untyped = attrSpec("axis");
    untyped.i = 1;
    AttrSpec alpha = attrSpec("alpha", 1);
    alpha.f = 0.1f;
    m.nodes.back().attrs = {untyped, alpha};

    const ir::Graph graph = readOrFail(encode(m), "typed.onnx");
    auto values = [&](const std::string& name) {
        const at::Tensor* t = graph.initializer(name);
        EXPECT_NE(t, nullptr) << name;
        return t ? t->to(at::kDouble) : at::Tensor();
    };
    auto doubles = [](const at::Tensor& t) {
        return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    };
    EXPECT_EQ(doubles(values("i8")), (std::vector<double>{-5, 7, -128}));
    EXPECT_EQ(doubles(values("u8")), (std::vector<double>{200}));
    EXPECT_EQ(doubles(values("f16")), (std::vector<double>{1.0, -2.0}));
    EXPECT_EQ(graph.initializer("flag")->scalar_type(), at::kBool);
    EXPECT_EQ(doubles(values("flag")), (std::vector<double>{0, 1}));
    EXPECT_EQ(graph.initializer("i64")->item<std::int64_t>(), -(std::int64_t{1} << 40));
    EXPECT_EQ(doubles(values("unpacked")), (std::vector<double>{1.5, -0.25}));
    EXPECT_EQ(graph.initializer("k1")->dim(), 0);
    EXPECT_EQ(graph.initializer("k1")->item<float>(), 2.5f);
    EXPECT_EQ(graph.initializer("k2")->scalar_type(), at::kLong);
    EXPECT_EQ(doubles(values("k2")), (std::vector<double>{1, -1}));
    ASSERT_EQ(graph.nodes.size(), 2u) << "Constant nodes become initializers";
    EXPECT_EQ(graph.nodes[1].attrs.getInt("axis", 0), 1) << "type inferred when absent";
    EXPECT_EQ(graph.nodes[1].attrs.getFloat("alpha", 0.0), 0.1) << "0.1f reads as 0.1";

    // The graph runs: z = relu(x @ w).
    const at::Tensor x = randn({2, 4}, 5);
    const at::Tensor w = *graph.initializer("w");
    EXPECT_TRUE(at::allclose(runFirst(graph, {x}), at::relu(at::matmul(x, w))));
}

// ---- Corrupt and unsupported files ------------------------------------------------------------

namespace {

enum class Defect {
    Empty,
    NotProtobuf,
    VarintTooLong,
    LengthPastEnd,
    WrongWireType,
    WrongWireTypeNested,
    DeepGroups,
    NoGraph,
    NoDefaultOpset,
    Opset6,
    NegativeDim,
    RawDataTooShort,
    FloatDataTooShort,
    DimsOverflow,
    BytesOverflow,
    HugeShapeFewBytes,
    NoDataType,
    UnsupportedDType,
    ExternalData,
    DuplicateInitializer,
    UnknownOp,
    ForeignDomain,
    GraphAttribute,
    UndefinedInput,
    MissingInitializer,
    NodesOutOfOrder,
    SequenceInput,
};

struct DefectCase {
    Defect defect;
    const char* label;
    ErrorCode code;
    std::string message; ///< exact text when it is ours; else a fragment it must contain
    bool exact = true;
};

Bytes makeDefect(Defect defect)
{
    ModelSpec m = baseModel();
    TensorSpec& w = m.initializers[0];
    switch (defect) {
    case Defect::Empty: return {};
    case Defect::NotProtobuf: return {'P', 'K', 0x03, 0x04, 'z', 'i', 'p'};
    case Defect::VarintTooLong:
        return {0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01};
    case Defect::LengthPastEnd: return {0x3A, 0x64, 0x01, 0x02, 0x03};
    case Defect::WrongWireType: return {0x08, 0x08, 0x38, 0x05, 0x42, 0x02, 0x10, 0x11};
    case Defect::WrongWireTypeNested: m.extraGraphBytes = {0x10, 0x05}; break; // name = 5
    case Defect::DeepGroups: return Bytes(300, 0x0B);
    case Defect::NoGraph: return {0x08, 0x08};
    case Defect::NoDefaultOpset: m.opsetDomain = "com.microsoft"; break;
    case Defect::Opset6: m.opset = 6; break;
    case Defect::NegativeDim: w.dims = {4, -4}; break;
    case Defect::RawDataTooShort:
        m.initializers.push_back(tensorSpec("conv1.weight", {32, 1, 3, 3}, 1, Bytes(288)));
        break;
    case Defect::FloatDataTooShort:
        w.raw.reset();
        w.floatData = {1, 2, 3};
        break;
    case Defect::DimsOverflow: w.dims = {std::int64_t{1} << 32, std::int64_t{1} << 32}; break;
    case Defect::BytesOverflow: w.dims = {std::int64_t{1} << 31, std::int64_t{1} << 31}; break;
    case Defect::HugeShapeFewBytes: w.dims = {std::int64_t{1} << 20, std::int64_t{1} << 20}; break;
    case Defect::NoDataType: w.dataType = 0; break;
    case Defect::UnsupportedDType: w.dataType = 8; break;
    case Defect::ExternalData:
        w.raw.reset();
        w.dataLocation = 1;
        break;
    case Defect::DuplicateInitializer: m.initializers.push_back(w); break;
    case Defect::UnknownOp: m.nodes[1] = nodeSpec("nms_1", "NonMaxSuppression", {"y"}, {"z"}); break;
    case Defect::ForeignDomain: m.nodes[1].domain = "com.microsoft"; break;
    case Defect::GraphAttribute: {
        AttrSpec body = attrSpec("body", 5);
        body.graph = true;
        m.nodes[1].attrs = {body};
        break;
    }
    case Defect::UndefinedInput: m.nodes[0].inputs[0] = "missing"; break;
    case Defect::MissingInitializer: m.initializers.clear(); break;
    case Defect::NodesOutOfOrder: std::swap(m.nodes[0], m.nodes[1]); break;
    case Defect::SequenceInput: m.inputs[0].sequence = true; break;
    }
    return encode(m);
}

const std::vector<DefectCase>& defectCases()
{
    static const std::vector<DefectCase> cases{
        {Defect::Empty, "empty", ErrorCode::BadInput, "file is empty"},
        {Defect::NotProtobuf, "zip header", ErrorCode::BadInput,
         "invalid field number 0 in ModelProto"},
        {Defect::VarintTooLong, "varint too long", ErrorCode::BadInput,
         "varint longer than 10 bytes in ModelProto"},
        {Defect::LengthPastEnd, "length past end", ErrorCode::BadInput,
         "field 7 of ModelProto: length 100 runs past the end (3 bytes left)"},
        {Defect::WrongWireType, "graph as varint", ErrorCode::BadInput,
         "ModelProto.graph has wire type varint, expected length-delimited"},
        {Defect::WrongWireTypeNested, "graph name as varint", ErrorCode::BadInput,
         "GraphProto.name has wire type varint, expected length-delimited"},
        {Defect::DeepGroups, "deep groups", ErrorCode::BadInput,
         "groups nested deeper than 100 levels in ModelProto"},
        {Defect::NoGraph, "no graph", ErrorCode::BadInput,
         "no graph in the file (is it an ONNX model?)"},
        {Defect::NoDefaultOpset, "no default opset", ErrorCode::BadInput,
         "the model imports no opset for the default ONNX domain"},
        {Defect::Opset6, "opset 6", ErrorCode::Unsupported,
         "opset 6 is not supported; BitLens reads ONNX opset 7 and later (re-export the model "
         "with a newer opset)"},
        {Defect::NegativeDim, "negative dim", ErrorCode::BadInput,
         "tensor 'w' has a negative dimension in shape [4, -4]"},
        {Defect::RawDataTooShort, "raw_data too short", ErrorCode::BadInput,
         "tensor 'conv1.weight' has 288 bytes of raw_data, expected 1152 for shape [32, 1, 3, 3] "
         "float32"},
        {Defect::FloatDataTooShort, "float_data too short", ErrorCode::BadInput,
         "tensor 'w' has 3 values in float_data, expected 16 for shape [4, 4] float32"},
        {Defect::DimsOverflow, "element count overflow", ErrorCode::BadInput,
         "tensor 'w' has shape [4294967296, 4294967296], whose element count does not fit 64 "
         "bits"},
        {Defect::BytesOverflow, "byte count overflow", ErrorCode::BadInput,
         "tensor 'w' has shape [2147483648, 2147483648], whose size in bytes does not fit 64 "
         "bits"},
        {Defect::HugeShapeFewBytes, "huge shape, few bytes", ErrorCode::BadInput,
         "tensor 'w' has 64 bytes of raw_data, expected 4398046511104 for shape [1048576, "
         "1048576] float32"},
        {Defect::NoDataType, "no data type", ErrorCode::BadInput, "tensor 'w' has no data_type"},
        {Defect::UnsupportedDType, "string tensor", ErrorCode::Unsupported,
         "tensor 'w' has element type string, which BitLens does not support"},
        {Defect::ExternalData, "external data", ErrorCode::Unsupported,
         "tensor 'w' keeps its data in an external file, which BitLens does not support (save "
         "the model with its weights inside)"},
        {Defect::DuplicateInitializer, "duplicate initializer", ErrorCode::BadInput,
         "initializer 'w' appears twice"},
        {Defect::UnknownOp, "unknown op", ErrorCode::Unsupported,
         "unsupported op 'NonMaxSuppression' (opset 17) in node 'nms_1'"},
        {Defect::ForeignDomain, "foreign domain", ErrorCode::Unsupported,
         "unsupported op 'Relu' from domain 'com.microsoft' in node 'act'"},
        {Defect::GraphAttribute, "graph attribute", ErrorCode::Unsupported,
         "attribute 'body' of node 'act' has type GRAPH, which BitLens does not support"},
        // Structural errors come from ir::Graph::validate; match the value they name.
        {Defect::UndefinedInput, "undefined input", ErrorCode::BadInput, "'missing'", false},
        {Defect::MissingInitializer, "missing initializer", ErrorCode::BadInput, "'w'", false},
        {Defect::NodesOutOfOrder, "nodes out of order", ErrorCode::BadInput, "'y'", false},
        {Defect::SequenceInput, "sequence input", ErrorCode::Unsupported,
         "graph input 'x' is not a tensor (sequence, map or optional types are not supported)"},
    };
    return cases;
}

/// Reads `bytes` and checks it fails cleanly: an Error, never an exception, naming the path.
std::optional<Error> expectCleanFailure(const Bytes& bytes, const std::string& path,
                                        const std::string& label)
{
    std::optional<Result<ir::Graph>> result;
    EXPECT_NO_THROW(result.emplace(io::readOnnx(bytes, path))) << label;
    if (!result)
        return std::nullopt;
    EXPECT_FALSE(result->ok()) << label << ": accepted";
    if (result->ok())
        return std::nullopt;
    const Error& error = result->error();
    EXPECT_EQ(error.path, path) << label;
    EXPECT_EQ(error.userMessage().rfind("error: " + path + ": ", 0), 0u) << label;
    EXPECT_FALSE(error.message.empty()) << label;
    return error;
}

} // namespace

TEST(OnnxCorrupt, EveryDefectIsACleanErrorWithTheExpectedCode)
{
    ASSERT_TRUE(io::readOnnx(encode(baseModel()), "base.onnx").ok()) << "the base must be valid";
    for (const DefectCase& c : defectCases()) {
        const auto error = expectCleanFailure(makeDefect(c.defect), "defect.onnx", c.label);
        if (!error)
            continue;
        EXPECT_EQ(error->code, c.code) << c.label << ": " << error->message;
        if (c.exact) {
            EXPECT_EQ(error->message, c.message) << c.label;
        } else {
            EXPECT_NE(error->message.find(c.message), std::string::npos)
                << c.label << ": " << error->message;
        }
    }
}

TEST(OnnxCorrupt, ErrorsCarryTheByteOffset)
{
    const auto past = io::readOnnx(makeDefect(Defect::LengthPastEnd), "m.onnx");
    ASSERT_FALSE(past.ok());
    EXPECT_EQ(past.error().userMessage(),
              "error: m.onnx: field 7 of ModelProto: length 100 runs past the end (3 bytes left) "
              "(at byte 1)");
    // The offset of a nested error is absolute: it points at the bad field inside the graph.
    const Bytes nested = makeDefect(Defect::WrongWireTypeNested);
    const auto wrong = io::readOnnx(nested, "m.onnx");
    ASSERT_FALSE(wrong.ok());
    ASSERT_TRUE(wrong.error().offset.has_value());
    const std::size_t at = *wrong.error().offset;
    ASSERT_LT(at + 1, nested.size());
    EXPECT_EQ(nested[at], 0x10);
    EXPECT_EQ(nested[at + 1], 0x05);
    // raw_data errors point at the raw bytes, just after their tag (field 9) and length 288.
    const Bytes shortRaw = makeDefect(Defect::RawDataTooShort);
    const auto raw = io::readOnnx(shortRaw, "m.onnx");
    ASSERT_FALSE(raw.ok());
    ASSERT_TRUE(raw.error().offset.has_value());
    const std::size_t rawAt = *raw.error().offset;
    ASSERT_GE(rawAt, 3u);
    ASSERT_LE(rawAt + 288, shortRaw.size());
    EXPECT_EQ(Bytes(shortRaw.begin() + static_cast<std::ptrdiff_t>(rawAt) - 3,
                    shortRaw.begin() + static_cast<std::ptrdiff_t>(rawAt)),
              (Bytes{0x4A, 0xA0, 0x02}));
}

TEST(OnnxCorrupt, TruncationAtAnyOffsetIsBadInput)
{
    // No metadata, so the last top-level field is opset_import and no cut is a valid model.
    const std::vector<std::pair<std::string, Bytes>> models{
        {"base", encode(baseModel())}, {"cnn", writeOrFail(makeCnn())}};
    for (const auto& [name, bytes] : models) {
        ASSERT_TRUE(io::readOnnx(bytes, "full.onnx").ok()) << name;
        const std::size_t step = bytes.size() > 2000 ? 7 : 1;
        for (std::size_t size = 0; size < bytes.size(); size += step) {
            const Bytes cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
            const std::string label = name + " cut at " + std::to_string(size);
            const auto error = expectCleanFailure(cut, "cut.onnx", label);
            if (error) {
                EXPECT_EQ(error->code, ErrorCode::BadInput) << label << ": " << error->message;
            }
        }
    }
}

TEST(OnnxCorrupt, RandomBytesAndBitFlipsNeverCrash)
{
    const unsigned seed = 20240517;
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    for (int i = 0; i < 300; ++i) {
        Bytes bytes(1 + rng() % 512);
        for (auto& b : bytes)
            b = static_cast<std::uint8_t>(rng());
        const auto error = expectCleanFailure(bytes, "random.onnx", "random #" + std::to_string(i));
        if (error) {
            EXPECT_TRUE(error->code == ErrorCode::BadInput || error->code == ErrorCode::Unsupported)
                << error->message;
        }
    }
    // Flipping bytes of a valid model may still give a valid model; it must never throw, and
    // whatever is accepted passed validation.
    const Bytes valid = encode(baseModel());
    for (std::size_t at = 0; at < valid.size(); ++at) {
        Bytes flipped = valid;
        flipped[at] ^= static_cast<std::uint8_t>(1 + rng() % 255);
        std::optional<Result<ir::Graph>> result;
        EXPECT_NO_THROW(result.emplace(io::readOnnx(flipped, "flip.onnx"))) << at;
        if (result && result->ok()) {
            EXPECT_TRUE(result->value().validate().ok()) << at;
        }
    }
}

// ---- Older opsets: converted on import to the opset-13 forms ---------------------------------

TEST(OnnxImport, Opset7AttributesBecomeInputsAndSoftmaxFlattensTo2D)
{
    ModelSpec m = baseModel();
    m.opset = 7;
    m.outputs = {valueSpec("s", {-1, 4})};
    AttrSpec lo = attrSpec("min", 1);
    lo.f = -0.5f;
    AttrSpec hi = attrSpec("max", 1);
    hi.f = 0.75f;
    AttrSpec axes = attrSpec("axes", 7);
    axes.ints = {0};
    m.nodes = {nodeSpec("mm", "MatMul", {"x", "w"}, {"y"}),
               nodeSpec("clip", "Clip", {"y"}, {"c"}, {lo, hi}),
               nodeSpec("unsq", "Unsqueeze", {"c"}, {"u"}, {axes}),
               nodeSpec("sq", "Squeeze", {"u"}, {"z"}, {axes}),
               nodeSpec("softmax", "Softmax", {"z"}, {"s"})};
    // A value already called "clip.min" makes the import pick the next free name.
    m.initializers.push_back(tensorSpec("clip.min", {1}, 1, floatBytes({0.0f})));

    const ir::Graph graph = readOrFail(encode(m), "opset7.onnx");
    EXPECT_EQ(graph.opsetVersion, 13);
    std::vector<OpKind> ops;
    for (const auto& node : graph.nodes)
        ops.push_back(node.op);
    EXPECT_EQ(ops, (std::vector<OpKind>{OpKind::MatMul, OpKind::Clip, OpKind::Unsqueeze,
                                        OpKind::Squeeze, OpKind::Shape, OpKind::Flatten,
                                        OpKind::Softmax, OpKind::Reshape}));
    const ir::Node& clip = graph.nodes[1];
    EXPECT_EQ(clip.inputs, (std::vector<std::string>{"y", "clip.min_1", "clip.max"}));
    EXPECT_FALSE(clip.attrs.has("min"));
    ASSERT_NE(graph.initializer("clip.min_1"), nullptr);
    EXPECT_FLOAT_EQ(graph.initializer("clip.min_1")->item<float>(), -0.5f);
    EXPECT_EQ(graph.nodes[2].inputs, (std::vector<std::string>{"c", "unsq.axes"}));
    EXPECT_FALSE(graph.nodes[2].attrs.has("axes"));
    // Softmax-1..12 normalizes the 2-D coercion at axis 1: the op itself runs on the last axis.
    EXPECT_EQ(graph.nodes[5].attrs.getInt("axis", 0), 1);
    EXPECT_EQ(graph.nodes[6].name, "softmax");
    EXPECT_EQ(graph.nodes[6].attrs.getInt("axis", 0), -1);
    EXPECT_EQ(graph.nodes[7].outputs, (std::vector<std::string>{"s"}));

    // It writes back as opset-13 ONNX and runs the same.
    const ir::Graph back = readOrFail(writeOrFail(graph));
    EXPECT_EQ(back.opsetVersion, 13);
    const at::Tensor x = randn({3, 4}, 11);
    const at::Tensor want = at::softmax(at::clamp(at::matmul(x, *graph.initializer("w")), -0.5,
                                                  0.75),
                                        1);
    EXPECT_TRUE(at::allclose(runFirst(graph, {x}), want, 1e-6, 1e-6));
    EXPECT_TRUE(at::allclose(runFirst(back, {x}), want, 1e-6, 1e-6));
}
