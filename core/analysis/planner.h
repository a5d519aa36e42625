#pragma once
// The memory and hardware planner (issue #20, item 4): how many bytes a language model needs for
// inference, full fine-tuning, LoRA or QLoRA at chosen precisions, part by part with the formula
// behind each number, and how many accelerators of a kind hold it. Arithmetic only: no model is
// opened or run, so the GUI calls it on its own thread. Torch-free header and source.
//
// Model shapes come from a named preset (the published config.json of each model, copied into
// the table in planner.cpp), from a Hugging Face config.json, or from a parameter count alone.
// Accelerator figures come from resources/hardware/accelerators.json (every figure with its
// source, a user-editable price), or from a copy the user names.

#include "jobs/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bitlens::analysis {

/// A storage format for one part of the plan, at its true cost per value.
struct PlanPrecision {
    std::string name;        ///< "bf16", "nf4", "mxfp4", ...
    double bitsPerValue = 0; ///< including block scales: nf4 (group 64, fp32 absmax) = 4.5
    std::string layout;      ///< how the bits add up: "4-bit codes + one fp32 absmax per 64"
};

/// Every precision the planner knows, in display order (fp32 first).
const std::vector<PlanPrecision>& planPrecisions();
/// The precision called `name` (case-sensitive), or nullopt.
std::optional<PlanPrecision> findPlanPrecision(const std::string& name);
/// The names of planPrecisions() joined with ", " (for usage errors).
std::string planPrecisionNames();

/// The shape of a decoder-only transformer, as its config.json gives it.
struct ModelShape {
    std::string name;                ///< "bloom-176b", or the config's path
    std::string family;              ///< "bloom" (LayerNorm, biases, 4h GeLU MLP) or "llama"
                                     ///< (RMSNorm, no biases, gated SiLU MLP); qwen3 = llama
    std::int64_t hidden = 0;         ///< hidden_size
    std::int64_t layers = 0;         ///< num_hidden_layers
    std::int64_t heads = 0;          ///< num_attention_heads
    std::int64_t kvHeads = 0;        ///< num_key_value_heads (= heads without GQA)
    std::int64_t headDim = 0;        ///< head_dim (hidden / heads unless the config says)
    std::int64_t intermediate = 0;   ///< intermediate_size of a dense MLP
    std::int64_t vocab = 0;          ///< vocab_size
    std::int64_t experts = 0;        ///< routed experts per layer; 0 for a dense model
    std::int64_t expertsPerToken = 0;///< experts each token passes through (MoE)
    std::int64_t expertIntermediate = 0; ///< intermediate size of one expert (MoE)
    bool tiedEmbeddings = false;     ///< lm_head shares the embedding matrix
    bool qkNorm = false;             ///< an RMSNorm on each head's q and k (qwen3)
    std::int64_t publishedParams = 0;///< the total the model card gives; 0 when unknown
    std::int64_t paramsOverride = 0; ///< a count without a shape (the open model): > 0 wins
    std::string source;              ///< where the shape was read

    /// All parameters, counted from the shape (or paramsOverride when set).
    std::int64_t params() const;
    /// Parameters one token passes through (MoE: k of the experts); = params() when dense.
    std::int64_t activeParams() const;
    /// True when layers / heads / hidden are known (KV cache and activations can be computed).
    bool hasShape() const { return paramsOverride <= 0; }
};

/// The named presets (bloom-176b, llama-3.1-8b, ..., smollm2-135m), in display order.
const std::vector<ModelShape>& modelPresets();
/// The preset called `name`, or nullopt.
std::optional<ModelShape> findModelPreset(const std::string& name);
/// The preset names joined with ", ".
std::string modelPresetNames();
/// The shape a Hugging Face config.json describes (model_type bloom, llama, mistral, mixtral,
/// qwen2, qwen3, qwen3_moe; another type with llama's keys is read as llama). BadInput naming
/// the file and the missing or bad key.
Result<ModelShape> readHfConfigShape(const std::string& path);
/// The shape of a model file: the config.json beside it (or inside a folder) when there is
/// one, else the count alone (shapeFromParamCount). For the open model in the GUI and a MODEL
/// path on the command line.
Result<ModelShape> shapeForModelFile(const std::string& path, std::int64_t params);
/// A model known only by its parameter count: weights and optimizer states can be planned,
/// KV cache and activations cannot (they say so).
ModelShape shapeFromParamCount(const std::string& name, std::int64_t params);

/// One accelerator card from the data file. Figures are dense (not 2:4 sparse).
struct Accelerator {
    std::string id;                  ///< "a100-80gb"
    std::string name;                ///< "NVIDIA A100 80GB SXM"
    double memoryGib = 0;            ///< device memory, GiB (2^30 bytes)
    double bandwidthGBs = 0;         ///< memory bandwidth, 10^9 bytes/s
    double bf16Tflops = 0;           ///< dense FP16/BF16 tensor TFLOPS
    double fp8Tflops = 0;            ///< dense FP8 TFLOPS; 0 without native FP8
    double fp4Tflops = 0;            ///< dense FP4 TFLOPS; 0 without native FP4
    bool nativeFp8 = false;
    bool nativeFp4 = false;
    std::optional<double> priceUsd;  ///< the user's price per card; nullopt: no price
    std::vector<std::pair<std::string, std::string>> sources; ///< figure -> where it is from
};

/// Where the bundled accelerators.json is: $BITLENS_DATA_DIR/hardware/, then
/// <binary>/../share/bitlens/hardware/ (install and build tree), then <binary>/resources/hardware/,
/// then the source tree. NotFound is a BadInput naming every place looked at.
Result<std::string> defaultAcceleratorsPath();
/// Reads an accelerators file; BadInput naming the file and the card or key at fault.
Result<std::vector<Accelerator>> loadAccelerators(const std::string& path);
/// The card `id` in `cards`, or nullptr.
const Accelerator* findAccelerator(const std::vector<Accelerator>& cards, const std::string& id);

/// What the memory is for.
enum class PlanUse { Inference, FineTune, Lora, Qlora };
/// "inference", "finetune", "lora", "qlora".
const char* planUseName(PlanUse use);
/// The use called `name`, or nullopt.
std::optional<PlanUse> parsePlanUse(const std::string& name);

/// Everything a plan depends on.
struct PlanRequest {
    ModelShape model;
    PlanUse use = PlanUse::Inference;
    PlanPrecision weights;           ///< storage of the (base) weights
    PlanPrecision kvCache;           ///< K and V (inference)
    PlanPrecision activations;       ///< activations kept for the backward pass, or the
                                     ///< working set of a forward pass
    std::int64_t batch = 1;          ///< sequences
    std::int64_t context = 2048;     ///< tokens per sequence
    std::int64_t loraRank = 16;      ///< LoRA / QLoRA adapter rank
    bool checkpointing = false;      ///< training keeps only each layer's input (recomputes)
    Accelerator card;
};

/// One row of the plan.
struct PlanPart {
    std::string key;    ///< "weights", "kv_cache", "activations", "gradients",
                        ///< "optimizer_states", "master_weights", "lora_adapters"
    std::string label;  ///< "Weights", "KV cache", ...
    double bytes = 0;
    std::string how;    ///< one line: the formula with the numbers
};

/// The answer.
struct Plan {
    std::vector<PlanPart> parts;     ///< only the parts this use has
    double totalBytes = 0;
    std::int64_t params = 0;         ///< all parameters
    std::int64_t activeParams = 0;   ///< per token
    int minGpus = 0;                 ///< fewest cards whose memory holds totalBytes
    int tensorParallel = 0;          ///< smallest power of two >= minGpus
    std::string gpuLine;             ///< "8 x NVIDIA A100 80GB SXM (tensor parallel 8; 5 hold it)"
    /// Decode upper bound from bandwidth (inference only; 0 otherwise): tokens/s of one
    /// sequence when every step reads the active weights and the batch's KV cache once.
    double decodeTokensPerSecMin = 0;  ///< on minGpus cards
    double decodeTokensPerSecTp = 0;   ///< on tensorParallel cards
    double bytesPerDecodeStep = 0;
    std::string decodeHow;
    std::optional<double> usdPerFp8Tflop;  ///< price / dense FP8 TFLOPS of one card
    std::optional<double> usdPerFp4Tflop;
    std::string priceLine;            ///< "$/TFLOP: 4.77 (FP8), 1.19 (FP4)" or "no price"
    std::vector<std::string> notes;   ///< caveats (what the numbers leave out)
};

/// Computes the plan. Usage error for an impossible request (QLoRA with 16-bit weights,
/// batch or context < 1); never throws.
Result<Plan> computePlan(const PlanRequest& request);

/// Bytes as the planner prints them: "328.3 GiB", "512.0 MiB".
std::string planBytesText(double bytes);

} // namespace bitlens::analysis
