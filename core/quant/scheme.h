#pragma once
// Schemes (recipes) and per-layer plans. A scheme is a preset name with options, as users type
// it ("static-int8:observer=percentile:99.99,per=channel", "w4-int4:group=64") or a JSON file;
// a plan maps every quantizable layer of a graph to the configuration it runs with, so "keep
// this layer in higher precision" is one line of JSON: {"overrides": {"fc1": "float"}}.

#include "ir/graph.h"
#include "jobs/result.h"
#include "formats/ggml_quants.h"
#include "quant/quant_type.h"

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bitlens::quant {

/// How activations (the inputs of quantized layers) are treated.
enum class ActMode {
    Float,    ///< not quantized (weight-only schemes)
    Static,   ///< scale calibrated once from calibration data by an observer
    Dynamic,  ///< scale computed from each batch (per tensor) or token (per row) at run time
    Cast,     ///< cast to a 16-bit float (fp16 / bf16 mixed precision)
};

/// What one layer runs with.
struct LayerConfig {
    bool keepFloat = false;                  ///< the layer stays float32
    QuantType weightType = QuantType::Int8;
    Granularity weightGranularity = Granularity::perChannel(0);
    bool weightSymmetric = true;
    bool doubleQuant = false;                ///< NF4: quantize the per-block scales to 8 bits
    /// Weight codes on 7 bits (int8 [-64, 64]), as onnxruntime's reduce_range (option
    /// reduce-range=true). Costs a bit of weight precision; in exchange CPUs without VNNI run
    /// the layer with the exact vpmaddubsw kernel (about 1.5x the 8-bit one on AVX2), and
    /// onnxruntime's u8 x s8 kernels cannot saturate on the export.
    bool reduceRange = false;
    /// Int8 weight range (option wrange=127|128): 128 = [-128, 127], PyTorch's observers and
    /// the default; 127 = [-127, 127], symmetric about 0, as TensorRT and onnxruntime's
    /// symmetric quantizer (a symmetric scale is then absmax / 127, not absmax / 127.5).
    /// reduce-range, when set, takes precedence (as in onnxruntime's get_qmin_qmax_for_qType).
    int weightRange = 128;
    /// The codes the weights are picked in: Reduced with reduce-range, Narrow with wrange=127
    /// on int8 weights, else Full.
    CodeRange weightCodeRange() const;
    ActMode actMode = ActMode::Float;
    QuantType actType = QuantType::UInt8;
    bool actSymmetric = false;
    Granularity actGranularity = Granularity::perTensor();
    std::string observer = "minmax";         ///< observer spec for ActMode::Static
    double outlierThreshold = 0.0;           ///< LLM.int8(): input columns with |x| above it stay 16-bit
    double smoothAlpha = 0.0;                ///< SmoothQuant migration strength (0 = off)
    /// The gguf-* presets: weights go through ggml's block quantizer and back (the bytes a
    /// GGUF file holds), blocks along the input dimension; weightType / weightGranularity
    /// then only describe it. A row length the block does not divide falls back
    /// (ggmlTypeForRow).
    std::optional<formats::GgmlType> ggmlType;
    /// How weights are rounded: to nearest (rtn), or by GPTQ (method=gptq: each column rounded
    /// in turn, the error spread over the columns not yet rounded through the inverse Hessian
    /// of the layer's calibration inputs; core/quant/gptq.h). GPTQ options: damp= (fraction of
    /// the mean Hessian diagonal added to it, 0.01), act-order= (columns in order of falling
    /// Hessian diagonal), static-groups= (group scales from the weight before any update;
    /// act-order with groups implies it).
    /// Or by AWQ (method=awq: a per-input-channel scale searched from the calibration
    /// activations, then a clipping range per group; core/quant/awq.h). AWQ option: awq-clip=
    /// (search the clipping range, true).
    enum class Method { Rtn, Gptq, Awq };
    Method method = Method::Rtn;
    bool awqClip = true;
    double gptqDamp = 0.01;
    bool gptqActOrder = false;
    bool gptqStaticGroups = false;
    /// MX types: how a block's shared E8M0 exponent is chosen (option scale=floor|rceil).
    MxScaleMode mxScale = MxScaleMode::Floor;

    /// "int8 per-channel(0) sym / uint8 static minmax", for tables and reports.
    std::string describe() const;

    bool operator==(const LayerConfig&) const = default;
};

/// Quantization-aware training settings of the qat-* presets (core/train/qat.h runs them).
/// Every field is a scheme option, spelled as in the comment.
struct QatOptions {
    enum class Optimizer { Adam, Sgd };
    enum class ActRange {
        Fixed,    ///< calibrated once by the observer, then kept (act-range=fixed)
        Ema,      ///< moving-average min/max of the fake-quantized model's inputs (ema)
        Learned,  ///< scale learned by gradient descent, LSQ (learned; lsq=true sets it)
    };
    int epochs = 1;                  ///< passes over `samples` training samples (epochs=)
    std::int64_t samples = 0;        ///< training samples per epoch, drawn anew each epoch;
                                     ///< 0 = all (samples=; the default: one full epoch
                                     ///< recovered 105 % of fashion-cnn's W4A8 gap on 5 seeds,
                                     ///< 24k samples 83 %)
    std::int64_t batchSize = 64;     ///< (batch=)
    double lr = 3e-4;                ///< peak learning rate (lr=)
    Optimizer optimizer = Optimizer::Adam;  ///< (optimizer=adam|sgd)
    double momentum = 0.9;           ///< SGD momentum (momentum=)
    double warmup = 0.05;            ///< fraction of the steps with a linear warm-up (warmup=),
                                     ///< then cosine decay to 0
    bool lsq = true;                 ///< learnable weight and activation scales (lsq=)
    ActRange actRange = ActRange::Learned;  ///< (act-range=fixed|ema|learned; lsq sets it)
    double emaMomentum = 0.01;       ///< EMA factor for act-range=ema (ema=)
    /// Loss: 1 = label-free distillation from the float model (KL on logits, MSE on other
    /// outputs; the default: it recovers more on fashion-cnn, see bench/RESULTS.md); -1 =
    /// cross-entropy with the data's labels (distill=false); 0 = labels when the data has them.
    int distill = 1;                 ///< (distill=true|false)
    double temperature = 1.0;        ///< distillation temperature (temperature=)
    /// Step after which BatchNorm statistics stop updating (folded with frozen running stats);
    /// -1 = half of the steps (freeze-bn=STEP). The default 0 keeps a trained model's
    /// statistics from the start: re-estimating them from batches of 64 costs accuracy when
    /// fine-tuning (bench/RESULTS.md).
    std::int64_t freezeBnStep = 0;
    std::int64_t evalEvery = 0;      ///< held-out evaluation every N steps; 0 = four times
                                     ///< an epoch (eval-every=)
    std::int64_t holdout = 2000;     ///< held-out samples (taken from the end of the data)
    bool keepBest = true;            ///< return the best held-out checkpoint, not the last
                                     ///< state (keep-best=)
    std::uint64_t seed = 1;          ///< sample order (seed=)
};

/// A parsed scheme: a preset with its options applied.
struct Scheme {
    std::string preset;         ///< "static-int8", ...
    std::string spec;           ///< what the user wrote
    LayerConfig config;         ///< applied to every quantizable layer
    bool foldBatchNorm = false; ///< fold BatchNorm into the preceding Conv first (static schemes)
    std::int64_t calibSamples = 1000;  ///< calibration samples used (static schemes)
    std::map<std::string, std::optional<LayerConfig>> overrides;  ///< layer -> config; nullopt = float
    std::optional<QatOptions> qat;     ///< set by the qat-* presets: train, then quantize
};

/// The ggml type a weight row of `rowLength` inputs is stored in when `wanted` is asked for:
/// `wanted` when its block divides the row, else what llama.cpp falls back to (Q4_K -> Q5_0,
/// Q6_K -> Q8_0, when 32 divides the row), else F16.
formats::GgmlType ggmlTypeForRow(formats::GgmlType wanted, std::int64_t rowLength);
/// What a layer's note says when ggmlTypeForRow falls back ("Q4_K blocks of 256 do not divide
/// the 576 inputs per output channel; stored as Q5_0 (as llama.cpp falls back)"); empty when
/// `wanted` divides the rows.
std::string ggmlFallbackNote(formats::GgmlType wanted, std::int64_t rowLength);

/// True when the scheme (or one of its overrides) quantizes with ggml's block types.
bool usesGgml(const Scheme& scheme);

/// Training samples a scheme reads from the calibration data: calibSamples, or for QAT
/// schemes the samples per epoch plus the held-out slice; 0 = all of them.
std::int64_t dataSamplesNeeded(const Scheme& scheme);

/// The preset names, in the order `compare` runs them.
const std::vector<std::string>& presetNames();
/// The presets without training (no qat-*): what `compare --schemes all` and the window's
/// "Compare all schemes" run, so a comparison stays a matter of seconds.
const std::vector<std::string>& postTrainingPresetNames();
/// Parses "PRESET[:key=value,...]" or a path to a JSON file ({"preset": ..., "options": {...},
/// "overrides": {"layer": "float" | "SCHEME"}}). Usage errors name the bad key or value.
Result<Scheme> parseScheme(const std::string& spec);
/// The scheme as JSON (what report.json's "scheme" holds; "display_name" is displayName).
nlohmann::json schemeToJson(const Scheme& scheme);
/// "RTN", "GPTQ" or "AWQ": a rounding method as the window names it.
const char* methodTitle(LayerConfig::Method method);
/// The scheme's name on every view that names it: the preset, then its method and the options
/// that differ from the preset's defaults, after a middle dot: "w4-int4 · GPTQ g128",
/// "w4-int4 · AWQ", "static-int8 · percentile:99.99 calib 256", "w4-int4 · head quantized".
/// A preset as it comes is its bare name ("w4-int4"; RTN is the default method).
std::string displayName(const Scheme& scheme);

/// True for nodes BitLens quantizes: Conv, Gemm and MatMul with a constant weight input, and
/// LSTM / GRU whose W and R are both constants.
bool isQuantizable(const ir::Graph& graph, const ir::Node& node);

/// Applies one per-layer override to `scheme`: "float" or "float32" keeps `layer` in float32,
/// any other value is a scheme string whose layer configuration `layer` runs with. Usage error
/// ("override of 'fc1': ...") when the value does not parse.
Result<void> applyOverride(Scheme& scheme, const std::string& layer, const std::string& value);
/// The configuration of each quantizable layer (overrides applied); layers missing from the
/// map run in float.
struct Plan {
    std::map<std::string, LayerConfig> layers;
};
/// Builds the plan of `scheme` for `graph`; an override naming no quantizable layer is a Usage
/// error naming it.
Result<Plan> makePlan(const ir::Graph& graph, const Scheme& scheme);

} // namespace bitlens::quant
