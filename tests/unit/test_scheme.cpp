// Scheme strings, JSON scheme files with per-layer overrides, and plans.

#include "quant/scheme.h"

#include "io/file_util.h"
#include "ir/graph.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

using namespace bitlens;
using quant::ActMode;
using quant::QuantType;

namespace {

ir::Graph smallNet()
{
    ir::GraphBuilder g("net");
    auto x = g.input("x", {-1, 1, 6, 6});
    x = g.conv2d("conv", x, at::randn({4, 1, 3, 3}), std::nullopt, {1, 1, 1, 1});
    x = g.batchNorm("bn", x, at::ones({4}), at::zeros({4}), at::zeros({4}), at::ones({4}));
    x = g.unary("relu", ir::OpKind::Relu, x);
    x = g.flatten("flat", x);
    x = g.linear("fc", x, at::randn({3, 144}), at::zeros({3}));
    g.output(x);
    return g.build().value();
}

} // namespace

TEST(Scheme, EveryPresetParsesAndDescribesItself)
{
    for (const auto& name : quant::presetNames()) {
        auto s = quant::parseScheme(name);
        ASSERT_TRUE(s.ok()) << name << ": " << s.error().userMessage();
        EXPECT_EQ(s->preset, name);
        EXPECT_FALSE(s->config.describe().empty());
        EXPECT_EQ(quant::schemeToJson(*s)["preset"], name);
    }
}

TEST(Scheme, PresetDefaultsFollowTheirRecipes)
{
    auto st = quant::parseScheme("static-int8").value();
    EXPECT_EQ(st.config.weightType, QuantType::Int8);
    EXPECT_EQ(st.config.weightGranularity.kind, quant::Granularity::Kind::PerChannel);
    EXPECT_EQ(st.config.actMode, ActMode::Static);
    EXPECT_TRUE(st.foldBatchNorm);
    auto w4 = quant::parseScheme("w4-int4").value();
    EXPECT_EQ(w4.config.actMode, ActMode::Float);
    EXPECT_EQ(w4.config.weightGranularity.groupSize, 64);
    EXPECT_TRUE(quant::parseScheme("w4-nf4")->config.doubleQuant);
    EXPECT_EQ(quant::parseScheme("llm-int8")->config.outlierThreshold, 6.0);
    EXPECT_EQ(quant::parseScheme("smoothquant-int8")->config.smoothAlpha, 0.5);
    EXPECT_EQ(quant::parseScheme("bf16")->config.actMode, ActMode::Cast);
}

TEST(Scheme, OptionsOverrideDefaults)
{
    auto s = quant::parseScheme("static-int8:observer=percentile:99.99,per=tensor,calib=200");
    ASSERT_TRUE(s.ok()) << s.error().userMessage();
    EXPECT_EQ(s->config.observer, "percentile:99.99");
    EXPECT_EQ(s->config.weightGranularity.kind, quant::Granularity::Kind::PerTensor);
    EXPECT_EQ(s->calibSamples, 200);
    auto g = quant::parseScheme("w4-int4:group=128,sym=true");
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->config.weightGranularity.groupSize, 128);
    EXPECT_TRUE(g->config.weightSymmetric);
}

TEST(Scheme, ReduceRangePutsInt8WeightsOnSevenBits)
{
    for (const char* spec : {"static-int8:reduce-range=true", "dynamic-int8:reduce-range=true",
                             "smoothquant-int8:reduce-range=true", "llm-int8:reduce-range=true"}) {
        SCOPED_TRACE(spec);
        auto s = quant::parseScheme(spec);
        ASSERT_TRUE(s.ok()) << s.error().userMessage();
        EXPECT_TRUE(s->config.reduceRange);
        EXPECT_NE(s->config.describe().find("7-bit"), std::string::npos);
        EXPECT_EQ(quant::schemeToJson(*s)["config"].value("reduce_range", false), true)
            << quant::schemeToJson(*s).dump();
    }
    auto plain = quant::parseScheme("static-int8");
    ASSERT_TRUE(plain.ok());
    EXPECT_FALSE(plain->config.reduceRange);
    EXPECT_FALSE(quant::schemeToJson(*plain)["config"].contains("reduce_range"));
    // Only int8 weights have a reduced range; QAT fixes its own.
    auto w4 = quant::parseScheme("w4-int4:reduce-range=true");
    ASSERT_FALSE(w4.ok());
    EXPECT_EQ(w4.error().code, ErrorCode::Usage);
    EXPECT_NE(w4.error().message.find("applies to int8 weights"), std::string::npos);
    EXPECT_FALSE(quant::parseScheme("qat-int8:reduce-range=true").ok());
    EXPECT_FALSE(quant::parseScheme("static-int8:reduce-range=maybe").ok());
}

TEST(Scheme, WrangeChoosesTheInt8WeightRange)
{
    // wrange=127: [-127, 127] (TensorRT, onnxruntime's symmetric quantizer); 128 (the default):
    // [-128, 127], PyTorch's observers.
    for (const char* spec : {"static-int8:wrange=127", "dynamic-int8:wrange=127",
                             "smoothquant-int8:wrange=127", "llm-int8:wrange=127",
                             "w4-int4:weight=int8,wrange=127"}) {
        SCOPED_TRACE(spec);
        auto s = quant::parseScheme(spec);
        ASSERT_TRUE(s.ok()) << s.error().userMessage();
        EXPECT_EQ(s->config.weightRange, 127);
        EXPECT_EQ(s->config.weightCodeRange(), quant::CodeRange::Narrow);
        EXPECT_NE(s->config.describe().find("[-127, 127]"), std::string::npos)
            << s->config.describe();
        const auto j = quant::schemeToJson(*s);
        EXPECT_EQ(j["config"]["weight_range"], 127) << j.dump();
        EXPECT_EQ(j["config"]["weight_codes"], nlohmann::json({-127, 127})) << j.dump();
        EXPECT_NE(j["display_name"].get<std::string>().find("wrange 127"), std::string::npos)
            << j.dump();
    }
    auto plain = quant::parseScheme("static-int8");
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->config.weightRange, 128);
    EXPECT_EQ(plain->config.weightCodeRange(), quant::CodeRange::Full);
    EXPECT_EQ(quant::schemeToJson(*plain)["config"]["weight_codes"], nlohmann::json({-128, 127}));
    EXPECT_EQ(quant::displayName(*plain), "static-int8");
    auto explicitDefault = quant::parseScheme("static-int8:wrange=128");
    ASSERT_TRUE(explicitDefault.ok());
    EXPECT_EQ(explicitDefault->config, plain->config);
    EXPECT_EQ(quant::displayName(*explicitDefault), "static-int8");
    auto reduced = quant::parseScheme("static-int8:reduce-range=true");
    ASSERT_TRUE(reduced.ok());
    EXPECT_EQ(quant::schemeToJson(*reduced)["config"]["weight_codes"], nlohmann::json({-64, 64}));
    // Not int8 weights, a contradiction, QAT and a bad value: usage errors naming the option.
    const std::pair<const char*, const char*> refused[] = {
        {"w4-int4:wrange=127", "option wrange=127 applies to int8 weights"},
        {"static-int8:wrange=127,weight=uint8", "option wrange=127 applies to int8 weights"},
        {"static-int8:wrange=127,reduce-range=true", "ask for two weight ranges"},
        {"qat-int8:wrange=127", "not offered for the qat-* presets"},
        {"static-int8:wrange=126", "option wrange takes 127"},
        {"gguf-q8_0:wrange=127", "takes no options"},
    };
    for (const auto& [spec, why] : refused) {
        SCOPED_TRACE(spec);
        auto s = quant::parseScheme(spec);
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.error().code, ErrorCode::Usage);
        EXPECT_NE(s.error().message.find(why), std::string::npos) << s.error().message;
    }
}

TEST(Scheme, DoubleQuantIsBitsandbytesNf4Only)
{
    // bitsandbytes' compress_statistics quantizes NF4 absmax values; no other type has it.
    auto int4 = quant::parseScheme("w4-int4:double-quant=true");
    ASSERT_FALSE(int4.ok());
    EXPECT_EQ(int4.error().code, ErrorCode::Usage);
    EXPECT_NE(int4.error().message.find("applies to NF4 weights"), std::string::npos)
        << int4.error().message;
    // Changing the weight type of w4-nf4 leaves its double quantization behind.
    auto moved = quant::parseScheme("w4-nf4:weight=int4");
    ASSERT_TRUE(moved.ok()) << moved.error().userMessage();
    EXPECT_FALSE(moved->config.doubleQuant);
    EXPECT_FALSE(quant::schemeToJson(*moved)["config"].contains("double_quant"));
    auto plain = quant::parseScheme("w4-nf4:double-quant=false");
    ASSERT_TRUE(plain.ok());
    EXPECT_FALSE(plain->config.doubleQuant);
    EXPECT_TRUE(quant::schemeToJson(*quant::parseScheme("w4-nf4"))["config"]["double_quant"]);
}

TEST(Scheme, BadSpecsAreUsageErrorsNamingTheProblem)
{
    auto unknown = quant::parseScheme("int3-magic");
    ASSERT_FALSE(unknown.ok());
    EXPECT_EQ(unknown.error().code, ErrorCode::Usage);
    EXPECT_NE(unknown.error().message.find("unknown scheme 'int3-magic'"), std::string::npos);
    auto badKey = quant::parseScheme("static-int8:colour=blue");
    ASSERT_FALSE(badKey.ok());
    EXPECT_NE(badKey.error().message.find("unknown option 'colour'"), std::string::npos);
    auto badGroup = quant::parseScheme("w4-int4:group=abc");
    ASSERT_FALSE(badGroup.ok());
    EXPECT_EQ(badGroup.error().message, "option group takes a number, not 'abc'");
    EXPECT_FALSE(quant::parseScheme("w4-int4:group").ok());
    EXPECT_FALSE(quant::parseScheme("smoothquant-int8:alpha=2").ok());
}

TEST(Scheme, JsonFileWithOverridesKeepsALayerFloat)
{
    const auto dir = std::filesystem::temp_directory_path() / "bitlens_scheme_test";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "scheme.json").string();
    const std::string text = R"({"preset": "static-int8", "options": {"observer": "minmax"},
        "overrides": {"fc": "float", "conv": "w4-int4:group=8"}})";
    ASSERT_TRUE(io::writeFileAtomic(path, text.data(), text.size()).ok());
    auto s = quant::parseScheme(path);
    ASSERT_TRUE(s.ok()) << s.error().userMessage();
    EXPECT_FALSE(s->overrides.at("fc").has_value());
    EXPECT_EQ(s->overrides.at("conv")->weightType, QuantType::Int4);

    const auto graph = smallNet();
    auto plan = quant::makePlan(graph, *s);
    ASSERT_TRUE(plan.ok());
    EXPECT_TRUE(plan->layers.at("fc").keepFloat);
    EXPECT_EQ(plan->layers.at("conv").weightType, QuantType::Int4);
    EXPECT_EQ(plan->layers.size(), 2u);  // conv and fc; BN, ReLU, Flatten are not quantizable

    const std::string bad = R"({"preset": "static-int8", "overrides": {"relu": "float"}})";
    ASSERT_TRUE(io::writeFileAtomic(path, bad.data(), bad.size()).ok());
    auto badScheme = quant::parseScheme(path);
    ASSERT_TRUE(badScheme.ok());
    auto badPlan = quant::makePlan(graph, *badScheme);
    ASSERT_FALSE(badPlan.ok());
    EXPECT_NE(badPlan.error().message.find("'relu'"), std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST(Scheme, SplitIntoQuantizableLayers)
{
    const auto graph = smallNet();
    int quantizable = 0;
    for (const auto& node : graph.nodes)
        quantizable += quant::isQuantizable(graph, node) ? 1 : 0;
    EXPECT_EQ(quantizable, 2);
}

TEST(Scheme, LlmPresetsKeepALanguageModelsHeadFloat)
{
    auto plan = [](const ir::Graph& graph, const std::string& spec) {
        auto s = quant::parseScheme(spec);
        EXPECT_TRUE(s.ok()) << spec << ": " << s.error().userMessage();
        auto p = quant::makePlan(graph, *s);
        EXPECT_TRUE(p.ok()) << spec << ": " << p.error().userMessage();
        return p.value();
    };
    // Without task "lm" fc is a classifier's last layer, not an LM head: quantized as before.
    ir::Graph net = smallNet();
    for (const std::string spec : {"w4-nf4", "w4-int4", "w4-fp4", "llm-int8", "w4-nf4:head=quantize",
                                   "w4-nf4:head=float"})
        EXPECT_FALSE(plan(net, spec).layers.at("fc").keepFloat) << spec;

    // As a language model, the layer producing the graph output (the logits) is the head: the
    // weight-only and LLM.int8 presets keep it float32, as transformers + bitsandbytes do.
    net.metadata["task"] = "lm";
    for (const std::string spec : {"w4-nf4", "w4-int4", "w4-fp4", "llm-int8"}) {
        const auto p = plan(net, spec);
        EXPECT_TRUE(p.layers.at("fc").keepFloat) << spec;
        EXPECT_FALSE(p.layers.at("conv").keepFloat) << spec;
    }
    for (const std::string spec : {"dynamic-int8", "static-int8", "fp16"})
        EXPECT_FALSE(plan(net, spec).layers.at("fc").keepFloat) << spec;

    // head=quantize quantizes it with the scheme's final configuration (options after it count);
    // head=float keeps it float under any preset.
    const auto quantized = plan(net, "w4-int4:head=quantize,group=16");
    EXPECT_FALSE(quantized.layers.at("fc").keepFloat);
    EXPECT_EQ(quantized.layers.at("fc"), quantized.layers.at("conv"));
    EXPECT_EQ(quantized.layers.at("fc").weightGranularity.groupSize, 16);
    EXPECT_TRUE(plan(net, "dynamic-int8:head=float").layers.at("fc").keepFloat);
    EXPECT_FALSE(plan(net, "dynamic-int8:head=float").layers.at("conv").keepFloat);

    auto bad = quant::parseScheme("w4-nf4:head=maybe");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("head takes float or quantize"), std::string::npos);
}

TEST(Scheme, DisplayNameSaysTheMethodAndTheOptionsThatDifferFromThePreset)
{
    const auto name = [](const std::string& spec) {
        auto s = quant::parseScheme(spec);
        EXPECT_TRUE(s.ok()) << spec << ": " << s.error().userMessage();
        return s.ok() ? quant::displayName(*s) : std::string();
    };
    // Every preset as it comes is its bare name.
    for (const auto& preset : quant::presetNames())
        EXPECT_EQ(name(preset), preset);
    EXPECT_EQ(name("w4-int4:group=128,method=gptq"), "w4-int4 \u00b7 GPTQ g128");
    EXPECT_EQ(name("w4-int4:method=awq"), "w4-int4 \u00b7 AWQ");
    EXPECT_EQ(name("w4-int4:method=awq,awq-clip=false"), "w4-int4 \u00b7 AWQ no clip");
    EXPECT_EQ(name("w4-int4:method=gptq,act-order=true,damp=0.05"),
              "w4-int4 \u00b7 GPTQ act-order damp 0.05");
    // An option the preset already has, or one it implies, says nothing.
    EXPECT_EQ(name("w4-int4:group=64,method=rtn"), "w4-int4");
    EXPECT_EQ(name("w4-nf4:method=gptq"), "w4-nf4 \u00b7 GPTQ");
    EXPECT_EQ(name("w4-int4:head=float"), "w4-int4");
    EXPECT_EQ(name("w4-int4:head=quantize"), "w4-int4 \u00b7 head quantized");
    EXPECT_EQ(name("static-int8:observer=percentile:99.99,calib=256"),
              "static-int8 \u00b7 percentile:99.99 calib 256");
    // report.json carries it.
    EXPECT_EQ(quant::schemeToJson(*quant::parseScheme("w4-int4:method=awq"))["display_name"],
              "w4-int4 \u00b7 AWQ");
    EXPECT_STREQ(quant::methodTitle(quant::LayerConfig::Method::Gptq), "GPTQ");
}
