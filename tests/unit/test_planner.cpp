// The memory planner (analysis/planner.h): parameter counts against the published totals,
// byte counts worked out by hand from each config's numbers, the BLOOM-176B figures people
// quote (8 A100-80GB to serve it), config.json and cards-file errors as a user sees them.

#include "analysis/planner.h"

#include "temp_dir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

namespace bitlens::analysis {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Accelerator card(double gib, double bandwidth, double fp8 = 0, double fp4 = 0,
                 std::optional<double> price = std::nullopt)
{
    Accelerator a;
    a.id = "test";
    a.name = "Test card";
    a.memoryGib = gib;
    a.bandwidthGBs = bandwidth;
    a.bf16Tflops = 100;
    a.fp8Tflops = fp8;
    a.fp4Tflops = fp4;
    a.priceUsd = price;
    return a;
}

PlanRequest request(const std::string& preset, PlanUse use, const std::string& weights,
                    const Accelerator& accelerator)
{
    PlanRequest r;
    r.model = *findModelPreset(preset);
    r.use = use;
    r.weights = *findPlanPrecision(weights);
    r.kvCache = *findPlanPrecision("bf16");
    r.activations = *findPlanPrecision("bf16");
    r.card = accelerator;
    return r;
}

double partBytes(const Plan& plan, const std::string& key)
{
    for (const auto& p : plan.parts)
        if (p.key == key)
            return p.bytes;
    ADD_FAILURE() << "no part " << key;
    return -1;
}

bool hasPart(const Plan& plan, const std::string& key)
{
    for (const auto& p : plan.parts)
        if (p.key == key)
            return true;
    return false;
}

void writeFile(const std::filesystem::path& path, const std::string& text)
{
    std::ofstream(path) << text;
}

TEST(Planner, EveryPresetCountsWithinOnePointFivePercentOfItsPublishedTotal)
{
    ASSERT_EQ(modelPresets().size(), 9u);
    for (const auto& m : modelPresets()) {
        ASSERT_GT(m.publishedParams, 0) << m.name;
        const double rel = std::abs(static_cast<double>(m.params()) - m.publishedParams) /
                           static_cast<double>(m.publishedParams);
        EXPECT_LT(rel, 0.015) << m.name << ": " << m.params() << " vs " << m.publishedParams;
    }
}

TEST(Planner, SmolLm2CountWorkedByHand)
{
    // h 576, 30 layers, 9 heads of 64, 3 kv heads, I 1536, vocab 49152, tied embeddings.
    // Per layer: q + o 2·576·576 = 663552; k + v 2·576·192 = 221184; norms 1152;
    // MLP 3·576·1536 = 2654208 -> 3540096. x30 = 106202880; embedding 49152·576 = 28311552;
    // final norm 576: 134515008 (the model card's 134,515,008).
    EXPECT_EQ(findModelPreset("smollm2-135m")->params(), 134515008);
}

TEST(Planner, BloomCountWorkedByHand)
{
    // 12h² + 13h per layer at h 14336: 2466250752 + 186368 = 2466437120; x70 = 172650598400;
    // embedding 250880·14336 = 3596615680; embedding and final LayerNorm 4h = 57344.
    EXPECT_EQ(findModelPreset("bloom-176b")->params(), 176247271424);
}

TEST(Planner, MixtureOfExpertsCountsTheRoutedExpertsOnlyAsActive)
{
    const auto mixtral = *findModelPreset("mixtral-8x7b");
    // Mistral's "12.9B active" for 2 of 8 experts.
    EXPECT_NEAR(static_cast<double>(mixtral.activeParams()), 12.9e9, 0.015 * 12.9e9);
    // Dense model: active = all.
    const auto llama = *findModelPreset("llama-3.1-8b");
    EXPECT_EQ(llama.activeParams(), llama.params());
    // qwen3-30b-a3b by hand: attention 2·2048·4096 + 2·2048·512 = 18874368, q/k norms 256,
    // norms 4096, router 2048·128 = 262144, 8 experts 8·3·2048·768 = 37748736
    // -> 56889600 x48 = 2730700800; embedding + lm_head 2·151936·2048 = 622329856; norm 2048.
    EXPECT_EQ(findModelPreset("qwen3-30b-a3b")->activeParams(), 3353032704);
}

TEST(Planner, BlockFormatsPayForTheirScales)
{
    EXPECT_DOUBLE_EQ(findPlanPrecision("nf4")->bitsPerValue, 4.5);     // 4 + 32/64
    EXPECT_DOUBLE_EQ(findPlanPrecision("mxfp4")->bitsPerValue, 4.25);  // 4 + 8/32
    EXPECT_DOUBLE_EQ(findPlanPrecision("nvfp4")->bitsPerValue, 4.5);   // 4 + 8/16
    EXPECT_DOUBLE_EQ(findPlanPrecision("fp4")->bitsPerValue, 4.5);
    EXPECT_DOUBLE_EQ(findPlanPrecision("int4")->bitsPerValue, 4.15625); // 4 + 20/128
    EXPECT_DOUBLE_EQ(findPlanPrecision("bf16")->bitsPerValue, 16.0);
    EXPECT_FALSE(findPlanPrecision("int3").has_value());
}

TEST(Planner, BloomInferenceInBf16NeedsEightA100s)
{
    auto plan = computePlan(request("bloom-176b", PlanUse::Inference, "bf16", card(80, 2039)));
    ASSERT_TRUE(plan) << plan.error().describe();
    // 176247271424 params x 2 B.
    EXPECT_DOUBLE_EQ(partBytes(*plan, "weights"), 352494542848.0);
    // 2 (K, V) x 70 layers x 112 heads x 128 x 2048 tokens x 1 sequence x 2 B.
    EXPECT_DOUBLE_EQ(partBytes(*plan, "kv_cache"), 8220835840.0);
    // (352.5 + 8.2 + ~1) GB = 336.8 GiB over 80 GiB cards: 4.2 -> 5, tensor parallel 8.
    EXPECT_EQ(plan->minGpus, 5);
    EXPECT_EQ(plan->tensorParallel, 8);
    EXPECT_NE(plan->gpuLine.find("8 x Test card"), std::string::npos) << plan->gpuLine;
    EXPECT_NE(plan->gpuLine.find("is 5 x 80 GiB"), std::string::npos) << plan->gpuLine;
    EXPECT_FALSE(hasPart(*plan, "gradients"));
    EXPECT_FALSE(hasPart(*plan, "optimizer_states"));
}

TEST(Planner, BloomFullFineTuneShowsSixteenBytesPerParameterAndActivations)
{
    auto plan = computePlan(request("bloom-176b", PlanUse::FineTune, "bf16", card(80, 2039)));
    ASSERT_TRUE(plan) << plan.error().describe();
    const double P = 176247271424.0;
    EXPECT_DOUBLE_EQ(partBytes(*plan, "weights"), 2 * P);
    EXPECT_DOUBLE_EQ(partBytes(*plan, "gradients"), 2 * P);
    EXPECT_DOUBLE_EQ(partBytes(*plan, "master_weights"), 4 * P);
    EXPECT_DOUBLE_EQ(partBytes(*plan, "optimizer_states"), 8 * P);
    // 70 layers x 2048 tokens x 16h (16·14336 = 229376 values) x 2 B = 65766686720, plus fp32
    // logits 2048 x 250880 x 4 B = 2055208960.
    EXPECT_DOUBLE_EQ(partBytes(*plan, "activations"), 67821895680.0);
    EXPECT_FALSE(hasPart(*plan, "kv_cache"));
    // 16·P + activations = 2887778238464 B = 33.6 x 80 GiB -> 34, tensor parallel 64.
    EXPECT_DOUBLE_EQ(plan->totalBytes, 16 * P + 67821895680.0);
    EXPECT_EQ(plan->minGpus, 34);
    EXPECT_EQ(plan->tensorParallel, 64);
    EXPECT_DOUBLE_EQ(plan->bytesPerDecodeStep, 0.0);
}

TEST(Planner, Fp32FineTuneHasNoMasterCopy)
{
    auto plan = computePlan(request("smollm2-135m", PlanUse::FineTune, "fp32", card(24, 1008)));
    ASSERT_TRUE(plan);
    EXPECT_FALSE(hasPart(*plan, "master_weights"));
    EXPECT_DOUBLE_EQ(partBytes(*plan, "gradients"), 134515008.0 * 4);
}

TEST(Planner, CheckpointingKeepsOnlyLayerInputs)
{
    auto r = request("smollm2-135m", PlanUse::FineTune, "bf16", card(24, 1008));
    r.batch = 2;
    r.context = 1024;
    r.checkpointing = true;
    auto plan = computePlan(r);
    ASSERT_TRUE(plan);
    // Values per token and layer: attention 576 + 2·576 + 2·192 = 2112; MLP 576 + 4·1536 =
    // 6720; norms 1152 -> 9984. Layer inputs 30 x 2048 tokens x 576 x 2 B = 70778880; one layer
    // 2048 x 9984 x 2 B = 40894464; logits 2048 x 49152 x 4 B = 402653184.
    EXPECT_DOUBLE_EQ(partBytes(*plan, "activations"), 70778880.0 + 40894464.0 + 402653184.0);
}

TEST(Planner, LoraAdaptersOnEveryLinearLayerByHand)
{
    auto r = request("smollm2-135m", PlanUse::Lora, "bf16", card(24, 1008));
    r.loraRank = 8;
    auto plan = computePlan(r);
    ASSERT_TRUE(plan) << plan.error().describe();
    // Per layer r·(in + out): q 576+576, k 576+192, v 576+192, o 576+576 -> 3840; gate, up,
    // down 3·(576 + 1536) = 6336: 8 x 10176 = 81408; x30 = 2442240 params, fp32.
    EXPECT_DOUBLE_EQ(partBytes(*plan, "lora_adapters"), 2442240.0 * 4);
    EXPECT_DOUBLE_EQ(partBytes(*plan, "gradients"), 2442240.0 * 4);
    EXPECT_DOUBLE_EQ(partBytes(*plan, "optimizer_states"), 2442240.0 * 8);
    EXPECT_DOUBLE_EQ(partBytes(*plan, "weights"), 134515008.0 * 2);  // frozen, bf16
    EXPECT_FALSE(hasPart(*plan, "master_weights"));
}

TEST(Planner, QloraWantsFourBitWeightsAndFullFineTuneSixteen)
{
    auto qlora = computePlan(request("llama-3.1-8b", PlanUse::Qlora, "bf16", card(24, 1008)));
    ASSERT_FALSE(qlora);
    EXPECT_EQ(qlora.error().code, ErrorCode::Usage);
    EXPECT_NE(qlora.error().message.find("4-bit"), std::string::npos);
    auto full = computePlan(request("llama-3.1-8b", PlanUse::FineTune, "nf4", card(24, 1008)));
    ASSERT_FALSE(full);
    EXPECT_EQ(full.error().code, ErrorCode::Usage);
    auto ok = computePlan(request("llama-3.1-8b", PlanUse::Qlora, "nf4", card(24, 1008)));
    ASSERT_TRUE(ok);
    EXPECT_DOUBLE_EQ(partBytes(*ok, "weights"), 8030261248.0 * 4.5 / 8);
}

TEST(Planner, DecodeBoundIsBandwidthOverBytesPerStep)
{
    auto plan = computePlan(request("llama-3.1-8b", PlanUse::Inference, "bf16", card(80, 3350)));
    ASSERT_TRUE(plan);
    // Weights 8030261248 x 2 = 16060522496 B; KV 2·32·8·128·2048·2 = 268435456 B; one card:
    // 3350e9 / 16328957952 = 205.16 tokens/s.
    EXPECT_DOUBLE_EQ(plan->bytesPerDecodeStep, 16328957952.0);
    EXPECT_EQ(plan->minGpus, 1);
    EXPECT_NEAR(plan->decodeTokensPerSecMin, 205.157, 0.01);
}

TEST(Planner, MixtureOfExpertsDecodeReadsActiveWeightsOnly)
{
    auto plan = computePlan(request("mixtral-8x7b", PlanUse::Inference, "bf16", card(80, 2000)));
    ASSERT_TRUE(plan);
    // Active 12879925248 x 2 B + KV 2·32·8·128·2048·2 = 268435456 B.
    EXPECT_DOUBLE_EQ(plan->bytesPerDecodeStep, 12879925248.0 * 2 + 268435456.0);
    // But every expert is held: 46702792704 x 2 B.
    EXPECT_DOUBLE_EQ(partBytes(*plan, "weights"), 46702792704.0 * 2);
}

TEST(Planner, DollarsPerTflopFromThePrice)
{
    auto priced = computePlan(
        request("llama-3.1-8b", PlanUse::Inference, "fp8", card(32, 1792, 419, 1676, 1999)));
    ASSERT_TRUE(priced);
    ASSERT_TRUE(priced->usdPerFp8Tflop.has_value());
    EXPECT_NEAR(*priced->usdPerFp8Tflop, 1999.0 / 419.0, 1e-9);   // 4.77
    EXPECT_NEAR(*priced->usdPerFp4Tflop, 1999.0 / 1676.0, 1e-9);  // 1.19
    auto unpriced =
        computePlan(request("llama-3.1-8b", PlanUse::Inference, "bf16", card(80, 2039)));
    ASSERT_TRUE(unpriced);
    EXPECT_FALSE(unpriced->usdPerFp8Tflop.has_value());
    EXPECT_NE(unpriced->priceLine.find("no price"), std::string::npos);
}

TEST(Planner, ParameterCountAloneGivesWeightsButNoCache)
{
    PlanRequest r = request("smollm2-135m", PlanUse::Inference, "int8", card(24, 1008));
    r.model = shapeFromParamCount("model.onnx", 1000000);
    auto plan = computePlan(r);
    ASSERT_TRUE(plan);
    EXPECT_DOUBLE_EQ(partBytes(*plan, "weights"), 1000000.0);
    EXPECT_FALSE(hasPart(*plan, "kv_cache"));
    EXPECT_NE(plan->notes.front().find("no layer shape"), std::string::npos);
}

TEST(Planner, ReadsHuggingFaceConfigs)
{
    test::TempDir dir;
    const auto path = std::filesystem::path(dir.path()) / "config.json";
    // Qwen3-30B-A3B's config.json (the fields the planner reads).
    writeFile(path, R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48,
        "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
        "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": false})");
    auto shape = readHfConfigShape(path.string());
    ASSERT_TRUE(shape) << shape.error().describe();
    EXPECT_EQ(shape->params(), findModelPreset("qwen3-30b-a3b")->params());
    EXPECT_EQ(shape->activeParams(), 3353032704);
    // BLOOM's own key names.
    writeFile(path, R"({"model_type": "bloom", "n_embed": 14336, "n_layer": 70, "n_head": 112,
        "vocab_size": 250880})");
    auto bloom = readHfConfigShape(path.string());
    ASSERT_TRUE(bloom);
    EXPECT_EQ(bloom->params(), 176247271424);
    // A folder (or a model file) with a config.json beside it.
    auto beside = shapeForModelFile((std::filesystem::path(dir.path()) / "model.safetensors").string(), 0);
    ASSERT_TRUE(beside);
    EXPECT_EQ(beside->params(), 176247271424);
    // A multimodal config keeps the language model in "text_config"; "num_experts": 0 is dense.
    writeFile(path, R"({"model_type": "some_vlm", "text_config": {"hidden_size": 576,
        "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
        "intermediate_size": 1536, "vocab_size": 49152, "tie_word_embeddings": true,
        "num_experts": 0}, "vision_config": {"hidden_size": 1152}})");
    auto vlm = readHfConfigShape(path.string());
    ASSERT_TRUE(vlm) << vlm.error().describe();
    EXPECT_EQ(vlm->params(), 134515008);
    // A model file whose config does not count its weights (an encoder read as a decoder) is
    // planned by its own parameter count.
    auto mismatch = shapeForModelFile((std::filesystem::path(dir.path()) / "model.onnx").string(),
                                      22565379);
    ASSERT_TRUE(mismatch);
    EXPECT_FALSE(mismatch->hasShape());
    EXPECT_EQ(mismatch->params(), 22565379);
    EXPECT_NE(mismatch->source.find("not used"), std::string::npos) << mismatch->source;
    auto matching = shapeForModelFile((std::filesystem::path(dir.path()) / "model.onnx").string(),
                                      134515008 + 1000);
    ASSERT_TRUE(matching);
    EXPECT_TRUE(matching->hasShape());
}

TEST(Planner, BadConfigsNameTheFileAndTheKey)
{
    test::TempDir dir;
    const auto path = std::filesystem::path(dir.path()) / "config.json";
    writeFile(path, R"({"model_type": "llama", "num_hidden_layers": 2})");
    auto missing = readHfConfigShape(path.string());
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::BadInput);
    EXPECT_EQ(missing.error().describe(), path.string() + ": missing \"hidden_size\"");
    writeFile(path, R"({"hidden_size": -4})");
    auto negative = readHfConfigShape(path.string());
    ASSERT_FALSE(negative);
    EXPECT_NE(negative.error().message.find("\"hidden_size\" must be a whole number"),
              std::string::npos);
    writeFile(path, "{not json");
    auto broken = readHfConfigShape(path.string());
    ASSERT_FALSE(broken);
    EXPECT_EQ(broken.error().describe(), path.string() + ": not valid JSON");
    auto absent = readHfConfigShape((std::filesystem::path(dir.path()) / "none.json").string());
    ASSERT_FALSE(absent);
    EXPECT_EQ(absent.error().code, ErrorCode::BadInput);
}

TEST(Planner, ShippedCardsLoadAndEveryFigureHasASource)
{
    auto path = defaultAcceleratorsPath();
    ASSERT_TRUE(path) << path.error().describe();
    auto cards = loadAccelerators(*path);
    ASSERT_TRUE(cards) << cards.error().describe();
    for (const char* id : {"a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "mi300x",
                           "mi355x", "l40s", "rtx-4090", "rtx-5090"})
        EXPECT_NE(findAccelerator(*cards, id), nullptr) << id;
    for (const auto& c : *cards) {
        std::vector<std::string> figures = {"memory_gib", "memory_bandwidth_gbps", "bf16_tflops",
                                            "fp8_tflops", "fp4_tflops"};
        if (c.priceUsd)
            figures.push_back("price_usd");
        for (const auto& f : figures) {
            bool found = false;
            for (const auto& [figure, text] : c.sources)
                found = found || (figure == f && !text.empty());
            EXPECT_TRUE(found) << c.id << " has no source for " << f;
        }
        // Native support and a rate go together.
        EXPECT_EQ(c.nativeFp8, c.fp8Tflops > 0) << c.id;
        EXPECT_EQ(c.nativeFp4, c.fp4Tflops > 0) << c.id;
    }
    // The datasheet's 80 GB, read as GiB.
    EXPECT_DOUBLE_EQ(findAccelerator(*cards, "a100-80gb")->memoryGib, 80.0);
    EXPECT_DOUBLE_EQ(findAccelerator(*cards, "h100-sxm")->fp8Tflops, 1978.9);
}

TEST(Planner, BadCardsFilesNameTheCard)
{
    test::TempDir dir;
    const auto path = std::filesystem::path(dir.path()) / "cards.json";
    writeFile(path, R"({"cards": [{"id": "x", "memory_bandwidth_gbps": 1, "bf16_tflops": 1}]})");
    auto missing = loadAccelerators(path.string());
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().describe(), path.string() + ": card 'x': missing \"memory_gib\"");
    writeFile(path, R"({"cards": [{"id": "x", "memory_gib": 8, "memory_bandwidth_gbps": 1,
        "bf16_tflops": 1, "price_usd": "cheap"}]})");
    auto price = loadAccelerators(path.string());
    ASSERT_FALSE(price);
    EXPECT_NE(price.error().message.find("\"price_usd\" must be a positive number"),
              std::string::npos);
    writeFile(path, R"({"cards": [{"id": "x", "memory_gib": 8, "memory_bandwidth_gbps": 1,
        "bf16_tflops": 1, "price_usd": null}]})");
    auto ok = loadAccelerators(path.string());
    ASSERT_TRUE(ok) << ok.error().describe();
    EXPECT_FALSE(ok->front().priceUsd.has_value());
    writeFile(path, R"([1, 2])");
    EXPECT_FALSE(loadAccelerators(path.string()));
}

} // namespace
} // namespace bitlens::analysis
