// compressed-tensors export: every integer / fp8 / fp16 layout written and read back to exactly
// LayerQuant::weightFq (what --verify relies on), the config that vLLM-style loaders read, an
// independent numpy unpacking of the packed int4 words, and formats with no layout refused.

#include "export/safetensors_export.h"
#include "io/dataset.h"
#include "io/safetensors.h"
#include "quant/engine.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "python_oracle.h"
#include "graph_lookup.h"
#include "temp_dir.h"

#include <cmath>
#include <cstring>
#include <fstream>

using namespace bitlens;
using json = nlohmann::json;

namespace {

struct TempDir : test::TempDir {
    TempDir() : test::TempDir("bitlens_ct") {}
};

/// Conv (weights [8, 1, 3, 3]), Linear [32, 128] (Gemm transB = 1), MatMul with a constant
/// [32, 16] weight (stored [in, out]) and Linear [4, 16].
ir::Graph net()
{
    at::Generator gen = at::detail::createCPUGenerator(11);
    ir::GraphBuilder g("net");
    auto x = g.input("x", {-1, 1, 8, 8});
    x = g.conv2d("conv", x, at::randn({8, 1, 3, 3}, gen) * 0.5, at::randn({8}, gen) * 0.1,
                 {1, 1, 1, 1});
    x = g.unary("relu", ir::OpKind::Relu, x);
    x = g.maxPool("pool", x, 2, 2);
    x = g.flatten("flat", x);
    x = g.linear("fc1", x, at::randn({32, 128}, gen) * 0.1, at::randn({32}, gen) * 0.1);
    x = g.unary("fc1.relu", ir::OpKind::Relu, x);
    const auto w = g.constant("proj.weight", at::randn({32, 16}, gen) * 0.2);
    x = g.matmul("proj", x, w);
    x = g.linear("fc2", x, at::randn({4, 16}, gen) * 0.2, at::zeros({4}));
    g.output(x);
    return g.build().value();
}

/// `graph` prepared with `spec`, calibrated on `calib` (default: 64 random images for net()).
quant::QuantizedModel prepared(const ir::Graph& graph, const std::string& spec,
                               at::Tensor calib = at::Tensor())
{
    auto scheme = quant::parseScheme(spec);
    EXPECT_TRUE(scheme.ok()) << spec;
    if (!calib.defined()) {
        at::Generator gen = at::detail::createCPUGenerator(3);
        calib = at::rand({64, 1, 8, 8}, gen);
    }
    auto model = quant::prepare(graph, *scheme, calib);
    EXPECT_TRUE(model.ok()) << spec << ": " << (model.ok() ? "" : model.error().userMessage());
    return std::move(model).value();
}

bool sameBits(const at::Tensor& a, const at::Tensor& b)
{
    if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type())
        return false;
    const at::Tensor x = a.contiguous();
    const at::Tensor y = b.contiguous();
    return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

/// Linear layers only, every input count a multiple of 32 (the MX block): Linear [64, 128],
/// MatMul with a constant [64, 32] weight (stored [in, out]) and Linear [4, 32].
ir::Graph blockNet()
{
    at::Generator gen = at::detail::createCPUGenerator(12);
    ir::GraphBuilder g("blocks");
    auto x = g.input("x", {-1, 128});
    x = g.linear("fc1", x, at::randn({64, 128}, gen) * 0.1, at::randn({64}, gen) * 0.1);
    x = g.unary("fc1.relu", ir::OpKind::Relu, x);
    const auto w = g.constant("proj.weight", at::randn({64, 32}, gen) * 0.2);
    x = g.matmul("proj", x, w);
    x = g.linear("fc2", x, at::randn({4, 32}, gen) * 0.2, at::zeros({4}));
    g.output(x);
    return g.build().value();
}

quant::QuantizedModel preparedBlocks(const std::string& spec)
{
    at::Generator gen = at::detail::createCPUGenerator(4);
    return prepared(blockNet(), spec, at::randn({32, 128}, gen));
}

using test::nodeNamed;

} // namespace

// What --verify checks: reading the export back gives every quantized weight exactly as the
// engine fake-quantized it, in the layer's own layout, and every other tensor unchanged.
TEST(CompressedTensors, ReadBackEqualsWeightFqBitForBit)
{
    const auto graph = net();
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"static-int8", "int-quantized"},
        {"static-int8:weight=uint8,sym=false,per=tensor", "int-quantized"},
        {"dynamic-int8", "int-quantized"},
        {"w4-int4:group=16", "pack-quantized"},
        {"w4-int4:group=24", "pack-quantized"},  // 128 % 24 != 0: the writer alone keeps it
        {"w4-int4:weight=uint4,sym=true,per=channel", "pack-quantized"},
        {"w4-int4:weight=int4,sym=true,per=tensor", "pack-quantized"},
        {"w4-int4:weight=int2,group=16", "pack-quantized"},
        {"fp8-e4m3", "float-quantized"},
        {"fp16", "dense"},
        {"bf16", "dense"},
    };
    for (const auto& [spec, format] : cases) {
        TempDir dir;
        const auto model = prepared(graph, spec);
        const std::string path = dir.file("model.safetensors");
        auto summary = exporting::writeCompressedTensors(model, path);
        ASSERT_TRUE(summary.ok()) << spec << ": " << summary.error().userMessage();
        EXPECT_EQ(summary->format, format) << spec;
        EXPECT_EQ(summary->quantizedLayers, 4) << spec;
        auto back = exporting::readCompressedTensors(path);
        ASSERT_TRUE(back.ok()) << spec << ": " << back.error().userMessage();
        for (const auto& [layer, lq] : model.layers) {
            const ir::Node* node = nullptr;
            for (const auto& n : model.graph.nodes)
                if (n.name == layer)
                    node = &n;
            ASSERT_NE(node, nullptr);
            const std::string& weight = node->inputs[1];
            ASSERT_TRUE(back->count(weight)) << spec << ": " << weight;
            EXPECT_TRUE(sameBits(back->at(weight), lq.weightFq)) << spec << ": " << weight;
        }
        for (const auto& [name, t] : model.graph.initializers) {
            if (name.find("weight") != std::string::npos && name != "conv.bias")
                continue;
            ASSERT_TRUE(back->count(name)) << spec << ": " << name;
            EXPECT_TRUE(at::equal(back->at(name), t.to(at::kFloat))) << spec << ": " << name;
        }
    }
}

TEST(CompressedTensors, WritesTheConfigLoadersRead)
{
    TempDir dir;
    const auto model = prepared(net(), "w4-int4:group=16");
    const std::string path = dir.file("model.safetensors");
    {
        std::ofstream(dir.file("config.json")) << R"({"model_type": "tiny", "hidden_size": 16})";
    }
    auto summary = exporting::writeCompressedTensors(model, path);
    ASSERT_TRUE(summary.ok()) << summary.error().userMessage();
    std::ifstream in(dir.file("config.json"));
    const json cfg = json::parse(in);
    EXPECT_EQ(cfg["model_type"], "tiny");  // kept
    const json& qc = cfg["quantization_config"];
    EXPECT_EQ(qc["quant_method"], "compressed-tensors");
    EXPECT_EQ(qc["format"], "pack-quantized");
    EXPECT_EQ(qc["quantization_status"], "compressed");
    ASSERT_EQ(qc["config_groups"].size(), 1u);
    const json& g = qc["config_groups"]["group_0"];
    EXPECT_EQ(g["weights"]["num_bits"], 4);
    EXPECT_EQ(g["weights"]["type"], "int");
    EXPECT_EQ(g["weights"]["symmetric"], false);
    EXPECT_EQ(g["weights"]["strategy"], "group");
    EXPECT_EQ(g["weights"]["group_size"], 16);
    EXPECT_TRUE(g["input_activations"].is_null());
    EXPECT_EQ(g["targets"], json({"conv", "fc1", "proj", "fc2"}));

    auto file = io::readSafetensors(path);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(json::parse(file->metadata.at("quantization_config")), qc);
    const auto& t = file->tensors;
    EXPECT_EQ(t.at("fc1.weight_packed").scalar_type(), at::kInt);
    EXPECT_EQ(t.at("fc1.weight_packed").sizes(), at::IntArrayRef({32, 16}));  // 128 / 8 words
    EXPECT_TRUE(at::equal(t.at("fc1.weight_shape"), at::tensor({32, 128}, at::kInt)));
    EXPECT_EQ(t.at("fc1.weight_scale").sizes(), at::IntArrayRef({32, 8}));
    EXPECT_EQ(t.at("fc1.weight_zero_point").sizes(), at::IntArrayRef({4, 8}));  // packed rows
    EXPECT_EQ(t.at("conv.weight_packed").sizes(), at::IntArrayRef({8, 2}));      // [8, 9] view
    EXPECT_EQ(t.at("proj.weight_shape")[0].item<int>(), 16);                     // [out, in]
    EXPECT_EQ(t.count("fc1.weight"), 0u);
    EXPECT_EQ(t.at("fc1.bias").scalar_type(), at::kFloat);

    // Static W8A8: activation scales and the signed zero point of the uint8 activations.
    TempDir dir2;
    const auto w8a8 = prepared(net(), "static-int8");
    ASSERT_TRUE(exporting::writeCompressedTensors(w8a8, dir2.file("m.safetensors")).ok());
    auto f2 = io::readSafetensors(dir2.file("m.safetensors"));
    const json qc2 = json::parse(f2->metadata.at("quantization_config"));
    const json& act = qc2["config_groups"]["group_0"]["input_activations"];
    EXPECT_EQ(act["num_bits"], 8);
    EXPECT_EQ(act["dynamic"], false);
    EXPECT_EQ(act["strategy"], "tensor");
    EXPECT_EQ(f2->tensors.at("fc1.weight").scalar_type(), at::kChar);
    EXPECT_EQ(f2->tensors.at("fc1.input_scale").sizes(), at::IntArrayRef({1}));
    const auto& lq = w8a8.layers.at("fc1");
    EXPECT_EQ(f2->tensors.at("fc1.input_scale").item<float>(), lq.act->scale.item<float>());
    if (f2->tensors.count("fc1.input_zero_point"))
        EXPECT_EQ(f2->tensors.at("fc1.input_zero_point").item<int>(),
                  lq.act->zeroPoint.item<std::int64_t>() - 128);
}

// An independent reading of the packed layout: numpy unpacks the int32 words (value 8k + i of a
// row in bits 4i of word k, stored + 8), applies the packed zero points and group scales, and
// must land on the engine's weights.
TEST(CompressedTensors, NumpyUnpacksOurPackedWords)
{
    BITLENS_PYTHON_OR_SKIP(python);
    TempDir dir;
    const auto model = prepared(net(), "w4-int4:group=16");
    ASSERT_TRUE(exporting::writeCompressedTensors(model, dir.file("model.safetensors")).ok());
    const std::string code = R"(
import sys, json, numpy as np
from safetensors.numpy import load_file
from safetensors import safe_open
d = sys.argv[1]
t = load_file(d + "/model.safetensors")
with safe_open(d + "/model.safetensors", framework="np") as f:
    qc = json.loads(f.metadata()["quantization_config"])
args = qc["config_groups"]["group_0"]["weights"]
bits, gs = args["num_bits"], args["group_size"]
per = 32 // bits
def unpack(words, axis, n):
    w = words.astype(np.int64) & 0xffffffff
    if axis == 0:
        w = w.T
    vals = np.stack([(w >> (bits * i)) & ((1 << bits) - 1) for i in range(per)], axis=-1)
    vals = vals.reshape(w.shape[0], -1)[:, :n] - (1 << (bits - 1))
    return vals.T if axis == 0 else vals
out = {}
for name in t:
    if not name.endswith(".weight_packed"):
        continue
    m = name[: -len(".weight_packed")]
    rows, cols = t[m + ".weight_shape"]
    q = unpack(t[name], 1, cols).astype(np.float32)
    zp = unpack(t[m + ".weight_zero_point"], 0, rows).astype(np.float32)
    s = t[m + ".weight_scale"]
    zp = np.repeat(zp, gs, axis=1)[:, :cols]
    s = np.repeat(s, gs, axis=1)[:, :cols]
    out[m] = ((q - zp) * s).astype(np.float32)
np.savez(d + "/np.npz", **out)
print(sorted(out))
)";
    std::string output;
    ASSERT_EQ(test::runPython(python, dir.path(), code, dir.path(), output), 0) << output;
    auto np = io::readNpz(dir.file("np.npz"));
    ASSERT_TRUE(np.ok());
    ASSERT_EQ(np->size(), 4u) << output;
    for (const auto& node : model.graph.nodes) {
        auto it = model.layers.find(node.name);
        if (it == model.layers.end())
            continue;
        const std::string module = node.name;
        ASSERT_TRUE(np->count(module)) << module;
        const at::Tensor want = quant::weightView(node, it->second.weightFq).contiguous();
        EXPECT_TRUE(sameBits(np->at(module), want)) << module;
    }
}

TEST(CompressedTensors, FormatsWithoutALayoutAreRefused)
{
    const auto graph = net();
    for (const std::string spec : {"w4-nf4", "w4-fp4", "fp8-e5m2", "smoothquant-int8"}) {
        TempDir dir;
        const auto model = prepared(graph, spec);
        const std::string path = dir.file("model.safetensors");
        auto r = exporting::writeCompressedTensors(model, path);
        ASSERT_FALSE(r.ok()) << spec;
        EXPECT_EQ(r.error().code, ErrorCode::Unsupported) << spec;
        EXPECT_NE(r.error().message.find("layer '"), std::string::npos) << r.error().message;
        EXPECT_FALSE(std::filesystem::exists(path)) << spec;
    }
}

TEST(CompressedTensors, ReaderRefusesAFileWithoutConfig)
{
    TempDir dir;
    const std::string path = dir.file("plain.safetensors");
    ASSERT_TRUE(io::writeSafetensors({{"a.weight_scale", at::ones({1})}, {"a.weight", at::ones({2, 2}, at::kChar)}},
                                     {}, path)
                    .ok());
    auto r = exporting::readCompressedTensors(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "no quantization_config in the file's metadata and no config.json beside it");
}

// compressed-tensors' MX / NVFP4 layouts (NVFP4A16, MXFP4A16, MXFP8A16 as llm-compressor writes
// them): E2M1 codes two per byte (even column low), E4M3 or E8M0 block scales [out, in / block],
// NVFP4's weight_global_scale = 1 / tensor scale. Read back, MX weights are the engine's bit for
// bit; NVFP4's differ at most by the reciprocal's rounding (the file's rule divides by it).
TEST(CompressedTensors, BlockFormatsWriteLlmCompressorsLayoutAndReadBack)
{
    struct Case {
        std::string spec, format, scaleDtype;
        std::int64_t block;
    };
    const std::vector<Case> cases = {
        {"nvfp4-w", "nvfp4-pack-quantized", "torch.float8_e4m3fn", 16},
        {"mxfp4-w", "mxfp4-pack-quantized", "torch.uint8", 32},
        {"mxfp4-w:scale=rceil", "mxfp4-pack-quantized", "torch.uint8", 32},
        {"mxfp8-e4m3-w", "mxfp8-quantized", "torch.uint8", 32},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.spec);
        TempDir dir;
        const auto model = preparedBlocks(c.spec);
        const std::string path = dir.file("model.safetensors");
        auto summary = exporting::writeCompressedTensors(model, path);
        ASSERT_TRUE(summary.ok()) << summary.error().userMessage();
        EXPECT_EQ(summary->format, c.format);
        EXPECT_EQ(summary->quantizedLayers, 3);
        auto file = io::readSafetensors(path);
        ASSERT_TRUE(file.ok());
        const json qc = json::parse(file->metadata.at("quantization_config"));
        ASSERT_EQ(qc["config_groups"].size(), 1u);
        const json& g = qc["config_groups"]["group_0"];
        EXPECT_EQ(g["format"], c.format);
        EXPECT_EQ(g["weights"]["type"], "float");
        EXPECT_EQ(g["weights"]["group_size"], c.block);
        EXPECT_EQ(g["weights"]["strategy"], c.block == 16 ? "tensor_group" : "group");
        EXPECT_EQ(g["weights"]["scale_dtype"], c.scaleDtype);
        EXPECT_TRUE(g["input_activations"].is_null());
        const auto& t = file->tensors;
        const auto& fc1 = model.layers.at("fc1");
        if (c.block == 16) {
            EXPECT_EQ(t.at("fc1.weight_packed").scalar_type(), at::kByte);
            EXPECT_EQ(t.at("fc1.weight_packed").sizes(), at::IntArrayRef({64, 64}));
            EXPECT_EQ(t.at("fc1.weight_scale").scalar_type(), at::kFloat8_e4m3fn);
            EXPECT_EQ(t.at("fc1.weight_scale").sizes(), at::IntArrayRef({64, 8}));
            EXPECT_EQ(t.at("fc1.weight_global_scale").item<float>(),
                      1.0f / fc1.weight.tensorScale);
        } else {
            EXPECT_EQ(t.at("fc1.weight_scale").scalar_type(), at::kByte);
            EXPECT_EQ(t.at("fc1.weight_scale").sizes(), at::IntArrayRef({64, 4}));
            EXPECT_TRUE(at::equal(t.at("fc1.weight_scale"), fc1.weight.blockScale));
            EXPECT_EQ(t.count("fc1.weight_global_scale"), 0u);
            if (c.format == "mxfp8-quantized")
                EXPECT_EQ(t.at("fc1.weight").scalar_type(), at::kFloat8_e4m3fn);
            else
                EXPECT_EQ(t.at("fc1.weight_packed").sizes(), at::IntArrayRef({64, 64}));
        }
        // The packing by hand: element 2k of a row in the low nibble of byte k.
        if (c.format != "mxfp8-quantized") {
            const ir::Node& node = nodeNamed(model.graph, "fc1");
            const at::Tensor codes =
                quant::quantize(quant::weightView(node, quant::codeSource(fc1)).to(at::kFloat),
                                fc1.weight)
                    .to(at::kInt);
            const at::Tensor p = t.at("fc1.weight_packed").to(at::kInt);
            EXPECT_TRUE(at::equal(p.bitwise_and(15), codes.slice(1, 0, 128, 2)));
            EXPECT_TRUE(at::equal(p.bitwise_right_shift(4), codes.slice(1, 1, 128, 2)));
        }
        auto back = exporting::readCompressedTensors(path);
        ASSERT_TRUE(back.ok()) << back.error().userMessage();
        for (const auto& [layer, lq] : model.layers) {
            const std::string& weight = nodeNamed(model.graph, layer).inputs[1];
            ASSERT_TRUE(back->count(weight)) << weight;
            const at::Tensor& got = back->at(weight);
            ASSERT_EQ(got.sizes(), lq.weightFq.sizes()) << weight;
            if (c.block == 16) {
                const double rel = ((got - lq.weightFq).abs() / lq.weightFq.abs().clamp_min(1e-30))
                                       .max()
                                       .item<double>();
                EXPECT_LE(rel, std::ldexp(1.0, -22)) << weight;
            } else {
                EXPECT_TRUE(sameBits(got, lq.weightFq)) << weight;
            }
        }
    }
}

TEST(CompressedTensors, BlockFormatsTheLayoutCannotHoldAreRefusedWithTheReason)
{
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"mxfp4", "activation block scales"},  // weights and activations
        {"nvfp4", "activation block scales"},
        {"mxfp6-e2m3-w", "hold nvfp4, mxfp4 and mxfp8_e4m3"},
        {"mxint8-w", "hold nvfp4, mxfp4 and mxfp8_e4m3"},
    };
    for (const auto& [spec, why] : cases) {
        TempDir dir;
        const auto model = preparedBlocks(spec);
        const std::string path = dir.file("model.safetensors");
        auto r = exporting::writeCompressedTensors(model, path);
        ASSERT_FALSE(r.ok()) << spec;
        EXPECT_EQ(r.error().code, ErrorCode::Unsupported) << spec;
        EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
        EXPECT_FALSE(std::filesystem::exists(path)) << spec;
    }
    // A convolution of 9 inputs per output is not a whole number of 16-element blocks.
    TempDir dir;
    const auto model = prepared(net(), "nvfp4-w");
    auto r = exporting::writeCompressedTensors(model, dir.file("model.safetensors"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("layer 'conv' has 9 inputs, not a multiple of the "
                                     "16-element block"),
              std::string::npos)
        << r.error().message;
}

// compressed-tensors' own decompressors (NVFP4PackedCompressor, MXFP4PackedCompressor,
// MXFP8QuantizationCompressor, as transformers calls them) on the exported tensors and the
// scheme of the file's config: MX weights come out as the engine's; NVFP4's to bfloat16, the
// dtype compressed-tensors 0.20 unpacks E2M1 into.
TEST(CompressedTensors, CompressedTensorsDecompressesOurBlockLayouts)
{
    BITLENS_PYTHON_OR_SKIP(python);
    const std::vector<std::string> specs = {"nvfp4-w", "mxfp4-w", "mxfp8-e4m3-w"};
    TempDir dir;
    std::vector<quant::QuantizedModel> models;
    std::string folders;
    for (const std::string& spec : specs) {
        models.push_back(preparedBlocks(spec));
        const std::string folder = dir.file(spec);
        std::filesystem::create_directories(folder);
        ASSERT_TRUE(
            exporting::writeCompressedTensors(models.back(), folder + "/model.safetensors").ok());
        folders += " '" + folder + "'";
    }
    // One interpreter for the three folders (importing torch and compressed-tensors is most of
    // the time).
    const std::string code = R"(
import sys, json, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch
from safetensors import safe_open
from safetensors.torch import load_file
from compressed_tensors.compressors.base import BaseCompressor
from compressed_tensors.quantization import QuantizationScheme, QuantizationArgs
from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES
for d in sys.argv[1:]:
    t = load_file(d + "/model.safetensors")
    with safe_open(d + "/model.safetensors", framework="pt") as f:
        qc = json.loads(f.metadata()["quantization_config"])
    g = qc["config_groups"]["group_0"]
    args = QuantizationArgs(**g["weights"])
    preset = {"nvfp4-pack-quantized": "NVFP4A16", "mxfp4-pack-quantized": "MXFP4A16",
              "mxfp8-quantized": "MXFP8A16"}[g["format"]]
    want = PRESET_SCHEMES[preset]["weights"]
    assert args.model_dump() == want.model_dump(), (args.model_dump(), want.model_dump())
    scheme = QuantizationScheme(targets=g["targets"], weights=args)
    comp = BaseCompressor.load_from_registry(g["format"])
    out = {}
    for m in g["targets"]:
        sd = {k[len(m) + 1:]: v for k, v in t.items() if k.startswith(m + ".weight")}
        w = comp.decompress(sd, scheme)["weight"]
        out[m] = w.float().numpy()
        print(d, m, w.dtype)
    np.savez(d + "/ct.npz", **out)
)";
    std::string output;
    ASSERT_EQ(test::runPython(python, dir.path(), code, folders, output), 0) << output;
    for (std::size_t i = 0; i < specs.size(); ++i) {
        SCOPED_TRACE(specs[i]);
        auto ct = io::readNpz(dir.file(specs[i]) + "/ct.npz");
        ASSERT_TRUE(ct.ok());
        for (const auto& [layer, lq] : models[i].layers) {
            const ir::Node& node = nodeNamed(models[i].graph, layer);
            const std::string module = node.inputs[1].substr(0, node.inputs[1].size() - 7);
            ASSERT_TRUE(ct->count(module)) << module << output;
            const at::Tensor want = quant::weightView(node, lq.weightFq).contiguous();
            if (specs[i] == "nvfp4-w") {
                const double rel =
                    ((ct->at(module) - want).abs() / want.abs().clamp_min(1e-30)).max().item<double>();
                EXPECT_LE(rel, std::ldexp(1.0, -7)) << module << output;
            } else {
                EXPECT_TRUE(sameBits(ct->at(module), want)) << module << output;
            }
        }
    }
}

// A MatMul kept float32 (stored [in, out] in the graph) is written as a Linear's [out, in]
// weight under its module name and listed in "ignore"; BitLens reads it back in the graph's
// form, as it was.
TEST(CompressedTensors, AFloatMatMulIsWrittenAsALinearAndReadBackAsItWas)
{
    auto scheme = quant::parseScheme("nvfp4-w");
    ASSERT_TRUE(scheme.ok());
    scheme->overrides["proj"] = std::nullopt;
    at::Generator gen = at::detail::createCPUGenerator(4);
    const ir::Graph graph = blockNet();
    auto model = quant::prepare(graph, *scheme, at::randn({8, 128}, gen));
    ASSERT_TRUE(model.ok()) << model.error().userMessage();
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    auto summary = exporting::writeCompressedTensors(*model, path);
    ASSERT_TRUE(summary.ok()) << summary.error().userMessage();
    EXPECT_EQ(summary->quantizedLayers, 2);
    auto file = io::readSafetensors(path);
    ASSERT_TRUE(file.ok());
    const json qc = json::parse(file->metadata.at("quantization_config"));
    EXPECT_EQ(qc["ignore"], json({"proj"}));
    const at::Tensor* original = graph.initializer("proj.weight");
    ASSERT_NE(original, nullptr);
    EXPECT_EQ(file->tensors.at("proj.weight").sizes(), at::IntArrayRef({32, 64}));  // [out, in]
    EXPECT_TRUE(at::equal(file->tensors.at("proj.weight"), original->t()));
    auto back = exporting::readCompressedTensors(path);
    ASSERT_TRUE(back.ok()) << back.error().userMessage();
    EXPECT_TRUE(sameBits(back->at("proj.weight"), *original));
}

// wrange=127: int8 codes in [-127, 127], the range declared beside the groups (module ->
// [qmin, qmax]), and compressed-tensors' own int-quantized decompressor gives the in-app
// weights bit for bit. Its group dequantization refuses a row the group does not divide: the
// premise of exporting::checkPartialGroups.
TEST(CompressedTensors, Wrange127IsDeclaredAndDecompressedByCompressedTensors)
{
    const auto model = preparedBlocks("static-int8:wrange=127");
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    auto summary = exporting::writeCompressedTensors(model, path);
    ASSERT_TRUE(summary.ok()) << summary.error().userMessage();
    const json qc = json::parse(summary->quantizationConfig);
    ASSERT_TRUE(qc.contains("weight_code_range")) << qc.dump();
    EXPECT_EQ(qc["weight_code_range"]["fc1"], json({-127, 127}));
    EXPECT_EQ(qc["weight_code_range"].size(), 3u);
    const auto full = preparedBlocks("static-int8");
    auto fullSummary = exporting::writeCompressedTensors(full, dir.file("full.safetensors"));
    ASSERT_TRUE(fullSummary.ok());
    EXPECT_EQ(json::parse(fullSummary->quantizationConfig)["weight_code_range"]["fc1"],
              json({-128, 127}));
    auto file = io::readSafetensors(path);
    ASSERT_TRUE(file.ok());
    for (const char* module : {"fc1", "proj", "fc2"}) {
        const at::Tensor& codes = file->tensors.at(std::string(module) + ".weight");
        EXPECT_EQ(codes.scalar_type(), at::kChar) << module;
        EXPECT_GE(codes.min().item<int>(), -127) << module;
        EXPECT_EQ(codes.abs().max().item<int>(), 127) << module;
    }

    BITLENS_PYTHON_OR_SKIP(python);
    const std::string code = R"(
import sys, json, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch
from safetensors import safe_open
from safetensors.torch import load_file
from compressed_tensors.compressors.base import BaseCompressor
from compressed_tensors.quantization import QuantizationScheme, QuantizationArgs
from compressed_tensors.quantization.lifecycle.forward import dequantize
path = sys.argv[1]
t = load_file(path)
with safe_open(path, framework="pt") as f:
    qc = json.loads(f.metadata()["quantization_config"])
g = qc["config_groups"]["group_0"]
args = QuantizationArgs(**g["weights"])
scheme = QuantizationScheme(targets=g["targets"], weights=args)
comp = BaseCompressor.load_from_registry(g["format"])
out = {}
for m in g["targets"]:
    sd = {k[len(m) + 1:]: v for k, v in t.items() if k.startswith(m + ".weight")}
    out[m] = comp.decompress(sd, scheme)["weight"].float().numpy()
np.savez(sys.argv[2], **out)
# A group of 32 over rows of 40: compressed-tensors refuses to dequantize it.
ga = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=32)
try:
    dequantize(torch.zeros(4, 40, dtype=torch.int8), torch.ones(4, 2), torch.zeros(4, 2, dtype=torch.int8), ga)
    print("partial group: accepted")
except ValueError as e:
    print("partial group: refused:", e)
)";
    std::string output;
    ASSERT_EQ(test::runPython(python, dir.path(), code,
                              "'" + path + "' '" + dir.file("ct.npz") + "'", output),
              0)
        << output;
    EXPECT_NE(output.find("partial group: refused: tensor column shape must be divisble"),
              std::string::npos)
        << output;
    auto ct = io::readNpz(dir.file("ct.npz"));
    ASSERT_TRUE(ct.ok());
    for (const auto& [layer, lq] : model.layers) {
        const ir::Node& node = nodeNamed(model.graph, layer);
        const std::string module = node.inputs[1].substr(0, node.inputs[1].size() - 7);
        ASSERT_TRUE(ct->count(module)) << module << output;
        EXPECT_TRUE(sameBits(ct->at(module), quant::weightView(node, lq.weightFq).contiguous()))
            << module;
    }
}
