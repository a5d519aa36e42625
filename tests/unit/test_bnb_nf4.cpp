// NF4 as bitsandbytes does it, checked against bitsandbytes itself (its CPU backend, in the
// venv): the 4-bit codes, the block absmax, and double quantization (compress_statistics) of
// the absmax values with the dynamic 8-bit map. The engine's weightFq for every 2-D weight view
// whose rows are whole blocks of 64 must be bit for bit bitsandbytes' dequantize_4bit of
// quantize_4bit of the same float weight. bitsandbytes blocks the flattened tensor, so a row
// length that 64 does not divide blocks differently (BitLens ends each row in a short block);
// those layers are counted and named, not compared.

#include "ir/graph.h"
#include "model/model.h"
#include "quant/engine.h"
#include "quant/scheme.h"
#include "temp_dir.h"
#include "float_files.h"
#include "python_oracle.h"
#include "zoo/zoo.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace bitlens;

namespace {

using test::writeFloats;

// Reads the layers listed in manifest.txt ("name rows cols dq" per line, float32 files
// <i>.w = the float weight view and <i>.fq = BitLens's dequantized one), quantizes each weight
// with bitsandbytes and prints one line per layer: "name OK" or "name DIFF <count> ...".
// It also prints the dynamic map, so the C++ table is checked against create_dynamic_map().
constexpr const char* kOracle = R"PY(
import sys, numpy as np, torch
import bitsandbytes.functional as F
d = sys.argv[1]
code = F.create_dynamic_map().numpy()
print("MAP", " ".join(repr(float(v)) for v in code))
for i, line in enumerate(open(d + "/manifest.txt")):
    name, rows, cols, dq = line.split()
    rows, cols, dq = int(rows), int(cols), dq == "1"
    w = torch.from_numpy(np.fromfile(f"{d}/{i}.w", dtype=np.float32).reshape(rows, cols))
    mine = np.fromfile(f"{d}/{i}.fq", dtype=np.float32).reshape(rows, cols)
    q, state = F.quantize_4bit(w, blocksize=64, quant_type="nf4", compress_statistics=dq)
    ref = F.dequantize_4bit(q, state).numpy()
    bad = (ref.view(np.uint32) != mine.view(np.uint32))
    if bad.any():
        j = np.flatnonzero(bad)[0]
        print(name, "DIFF", int(bad.sum()), "first", j, repr(float(ref.flat[j])),
              repr(float(mine.flat[j])))
    else:
        print(name, "OK")
)PY";

struct Layer {
    std::string name;
    at::Tensor weight;  ///< float view [rows, cols]
    at::Tensor fq;      ///< BitLens's dequantized view
    bool doubleQuant;
};

/// The layers of `model` whose weight rows are whole blocks of 64; `skipped` names the others.
std::vector<Layer> comparable(const quant::QuantizedModel& model, bool doubleQuant,
                              std::vector<std::string>& skipped)
{
    std::vector<Layer> out;
    for (const auto& [name, lq] : model.layers) {
        const ir::Node* node = nullptr;
        for (const auto& n : model.graph.nodes)
            if (n.name == name)
                node = &n;
        EXPECT_NE(node, nullptr) << name;
        if (!node)
            continue;
        const at::Tensor w = quant::weightView(*node, lq.weightFloat);
        if (w.size(1) % 64 != 0) {
            skipped.push_back(name + " (" + std::to_string(w.size(1)) + " inputs)");
            continue;
        }
        out.push_back({name, w, quant::weightView(*node, lq.weightFq), doubleQuant});
    }
    return out;
}

/// Runs bitsandbytes over `layers`; every layer must be OK. Returns the oracle's map line.
void expectBitsandbytes(const std::vector<Layer>& layers, const std::string& what)
{
    BITLENS_PYTHON_OR_SKIP(python);
    test::TempDir dir;
    {
        std::ofstream manifest(dir.file("manifest.txt"));
        for (std::size_t i = 0; i < layers.size(); ++i) {
            manifest << layers[i].name << ' ' << layers[i].weight.size(0) << ' '
                     << layers[i].weight.size(1) << ' ' << (layers[i].doubleQuant ? 1 : 0)
                     << '\n';
            writeFloats(dir.file(std::to_string(i) + ".w"), layers[i].weight);
            writeFloats(dir.file(std::to_string(i) + ".fq"), layers[i].fq);
        }
    }
    std::string output;
    const int status = test::runPython(python, dir.path(), kOracle, "'" + dir.path() + "'",
                                       output);
    ASSERT_EQ(status, 0) << output;
    std::istringstream lines(output);
    std::string line;
    std::size_t ok = 0;
    bool sawMap = false;
    while (std::getline(lines, line)) {
        if (line.rfind("MAP ", 0) == 0) {
            // create_dynamic_map() as bitsandbytes builds it, entry for entry.
            std::istringstream values(line.substr(4));
            const auto mine = quant::dynamicMap8Bit();
            double v = 0;
            for (std::size_t i = 0; i < mine.size(); ++i) {
                ASSERT_TRUE(values >> v) << "map entry " << i;
                EXPECT_EQ(mine[i], static_cast<float>(v)) << "map entry " << i;
            }
            sawMap = true;
            continue;
        }
        // Result lines end in " OK" or hold " DIFF "; bitsandbytes prints warnings of its own.
        const bool pass = line.size() > 3 && line.compare(line.size() - 3, 3, " OK") == 0;
        const bool diff = line.find(" DIFF ") != std::string::npos;
        EXPECT_FALSE(diff) << what << ": " << line;
        ok += pass;
    }
    EXPECT_TRUE(sawMap) << output;
    EXPECT_EQ(ok, layers.size()) << what << ":\n" << output;
}

quant::QuantizedModel prepared(const ir::Graph& graph, const std::string& spec)
{
    auto scheme = quant::parseScheme(spec);
    EXPECT_TRUE(scheme.ok()) << spec;
    auto model = quant::prepare(graph, *scheme, at::Tensor());
    EXPECT_TRUE(model.ok()) << spec << ": " << (model.ok() ? "" : model.error().userMessage());
    return std::move(model).value();
}

/// Linear layers chosen to reach the corners of double quantization: 1 absmax value, a last
/// block of 256 cut short (3008 = 11 * 256 + 192 rows), rows whose magnitudes span five
/// decades (so some double-quantized absmax values fall to or below zero, as they do in
/// bitsandbytes), an all-zero row, and 4 blocks per row of a wide layer.
ir::Graph cornerNet()
{
    at::Generator gen = at::detail::createCPUGenerator(20261202);
    ir::GraphBuilder g("corners");
    auto x = g.input("x", {-1, 64});
    x = g.linear("one_block", x, at::randn({1, 64}, gen), std::nullopt);
    const at::Tensor rowScale = at::pow(10.0, at::rand({3008, 1}, gen) * 5.0 - 4.0);
    at::Tensor wide = at::randn({3008, 64}, gen) * rowScale;
    wide[17].zero_();
    x = g.linear("decades", x, wide, std::nullopt);
    x = g.linear("tall", x, at::randn({256, 3008}, gen) * 0.02, std::nullopt);
    x = g.linear("wide_rows", x, at::randn({96, 256}, gen) * 0.1 + 0.05, std::nullopt);
    g.output(x);
    return g.build().value();
}

} // namespace

TEST(BitsandbytesNf4, DoubleQuantWorkedExample)
{
    // The example in quant_type.h: absmax {1, 2, 3, 6} -> offset 3, centred {-2, -1, 0, 3},
    // codes {23, 47, 131, 255} as bitsandbytes 0.50 gives them (0 is not entry 127, the 0 of
    // the map, but 131: its search is coarse near 0).
    const auto dq = quant::doubleQuantizeAbsmax(at::tensor({1.0f, 2.0f, 3.0f, 6.0f}));
    EXPECT_EQ(dq.offset, 3.0f);
    ASSERT_EQ(dq.blockMax.numel(), 1);
    EXPECT_EQ(dq.blockMax.item<float>(), 3.0f);
    const at::Tensor codes = dq.codes.to(at::kLong);
    EXPECT_TRUE(at::equal(codes, at::tensor({23, 47, 131, 255}, at::kLong))) << codes;
    const auto map = quant::dynamicMap8Bit();
    EXPECT_EQ(map[127], 0.0f);
    EXPECT_EQ(dq.absmax[3].item<float>(), 6.0f);
    EXPECT_EQ(dq.absmax[2].item<float>(), map[131] * 3.0f + 3.0f);
    EXPECT_NEAR(dq.absmax[0].item<float>(), 0.9914f, 1e-4f);
    EXPECT_NEAR(dq.absmax[1].item<float>(), 2.0039f, 1e-4f);

    // 300 equal values: every block of centred values is 0, and they come back exactly.
    const auto flat = quant::doubleQuantizeAbsmax(at::full({300}, 0.25f));
    EXPECT_TRUE(at::equal(flat.absmax, at::full({300}, 0.25f)));
}

TEST(BitsandbytesNf4, CornerLayersMatchBitsandbytes)
{
    c10::InferenceMode guard;
    const ir::Graph graph = cornerNet();
    for (const bool dq : {true, false}) {
        const auto model =
            prepared(graph, dq ? "w4-nf4" : "w4-nf4:double-quant=false");
        std::vector<std::string> skipped;
        const auto layers = comparable(model, dq, skipped);
        EXPECT_TRUE(skipped.empty());
        ASSERT_EQ(layers.size(), 4u);
        expectBitsandbytes(layers, dq ? "w4-nf4" : "w4-nf4 without double quantization");
    }
}

TEST(BitsandbytesNf4, ZooLayersMatchBitsandbytes)
{
    c10::InferenceMode guard;
    // zoo-ensure builds both before ctest; offline (no registry) they may be missing.
    for (const std::string name : {"fashion-cnn", "minilm-l6"}) {
        if (!zoo::isBuilt(name))
            GTEST_SKIP() << "zoo model " << name << " is not built (scripts/zoo-ensure)";
    }
    for (const std::string name : {"fashion-cnn", "minilm-l6"}) {
        auto zm = zoo::ensure(name);
        ASSERT_TRUE(zm.ok()) << zm.error().userMessage();
        auto model = openModel(zm->modelPath);
        ASSERT_TRUE(model.ok()) << model.error().userMessage();
        for (const bool dq : {true, false}) {
            const auto q =
                prepared((*model)->graph(), dq ? "w4-nf4" : "w4-nf4:double-quant=false");
            std::vector<std::string> skipped;
            const auto layers = comparable(q, dq, skipped);
            // fashion-cnn's convolutions have 9 and 288 inputs per output channel; every
            // Linear of both models has whole blocks.
            std::string names;
            for (const auto& s : skipped)
                names += " " + s;
            if (name == "minilm-l6")
                EXPECT_TRUE(skipped.empty()) << names;
            EXPECT_GE(layers.size(), name == "minilm-l6" ? 36u : 2u) << names;
            expectBitsandbytes(layers, name + (dq ? " w4-nf4" : " w4-nf4:double-quant=false"));
        }
    }
}
