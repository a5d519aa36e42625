#pragma once
// Schemes (recipes) and per-layer plans. A scheme is a preset name with options, as users type
// it ("static-int8:observer=percentile:99.99,per=channel", "w4-int4:group=64") or a JSON file;
// a plan maps every quantizable layer of a graph to the configuration it runs with, so "keep
// this layer in higher precision" is one line of JSON: {"overrides": {"fc1": "float"}}.

#include "ir/graph.h"
#include "jobs/result.h"
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
    ActMode actMode = ActMode::Float;
    QuantType actType = QuantType::UInt8;
    bool actSymmetric = false;
    Granularity actGranularity = Granularity::perTensor();
    std::string observer = "minmax";         ///< observer spec for ActMode::Static
    double outlierThreshold = 0.0;           ///< LLM.int8(): input columns with |x| above it stay 16-bit
    double smoothAlpha = 0.0;                ///< SmoothQuant migration strength (0 = off)

    /// "int8 per-channel(0) sym / uint8 static minmax", for tables and reports.
    std::string describe() const;

    bool operator==(const LayerConfig&) const = default;
};

/// A parsed scheme: a preset with its options applied.
struct Scheme {
    std::string preset;         ///< "static-int8", ...
    std::string spec;           ///< what the user wrote
    LayerConfig config;         ///< applied to every quantizable layer
    bool foldBatchNorm = false; ///< fold BatchNorm into the preceding Conv first (static schemes)
    std::int64_t calibSamples = 1000;  ///< calibration samples used (static schemes)
    std::map<std::string, std::optional<LayerConfig>> overrides;  ///< layer -> config; nullopt = float
};

/// The preset names, in the order `compare` runs them.
const std::vector<std::string>& presetNames();
/// Parses "PRESET[:key=value,...]" or a path to a JSON file ({"preset": ..., "options": {...},
/// "overrides": {"layer": "float" | "SCHEME"}}). Usage errors name the bad key or value.
Result<Scheme> parseScheme(const std::string& spec);
/// The scheme as JSON (what report.json's "scheme" holds).
nlohmann::json schemeToJson(const Scheme& scheme);

/// True for nodes BitLens quantizes: Conv, Gemm and MatMul with a constant weight input, and
/// LSTM / GRU whose W and R are both constants.
bool isQuantizable(const ir::Graph& graph, const ir::Node& node);

/// The configuration of each quantizable layer (overrides applied); layers missing from the
/// map run in float.
struct Plan {
    std::map<std::string, LayerConfig> layers;
};
/// Builds the plan of `scheme` for `graph`; an override naming no quantizable layer is a Usage
/// error naming it.
Result<Plan> makePlan(const ir::Graph& graph, const Scheme& scheme);

} // namespace bitlens::quant
