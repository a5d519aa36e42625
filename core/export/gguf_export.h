#pragma once
// Export of a quantized llama-family model as a GGUF v3 file llama.cpp loads, and its
// verification by reloading the file with BitLens' own GGUF reader and llama builder.
//
// Only the gguf-* schemes (weight-only, ggml's block round trip, see LayerConfig::ggmlType)
// and float layers can be written: then the file holds exactly the weights the in-app model
// runs with. Tensors are named as llama.cpp's converter names them (token_embd.weight,
// blk.N.attn_norm / attn_q / attn_k / attn_v / attn_output / ffn_norm / ffn_gate / ffn_up /
// ffn_down.weight, output_norm.weight, output.weight); attn_q / attn_k rows get llama.cpp's
// rope permutation back (the builder removed it on import). Each projection is stored in its
// layer's ggml type (the fallback type for a row its block does not divide, as the engine
// chose), norms in F32, float layers in F32. BitLens does not quantize the token embedding
// (a Gather), so token_embd is stored in the first of (scheme type, Q8_0, F16, F32) that
// reproduces the in-app embedding bit for bit, and output.weight is written whenever the LM
// head is quantized (tied models too).

#include "export/export.h"

#include <string>
#include <vector>

namespace bitlens::exporting {

/// Why a GGUF file cannot hold layers quantized with `config` (naming the gguf-* presets), or
/// nothing when it can (a gguf-* type or float).
std::optional<std::string> ggufLimitation(const quant::LayerConfig& config);

/// What writeGguf wrote.
struct GgufSummary {
    int quantizedLayers = 0;
    int floatLayers = 0;
    std::int64_t tensors = 0;
    std::string tokenEmbeddingType;   ///< the ggml type token_embd was stored in
    std::vector<std::string> notes;   ///< fallbacks, tokenizer, embedding type
};

/// Writes `model` (a llama graph from model::buildFromHfConfig or buildLlamaFromGguf) to
/// `path` as GGUF v3, atomically; `source` names the opened model and its tokenizer (a GGUF
/// source's tokenizer.* keys are copied; a tokenizer.json byte-level BPE is converted; other
/// tokenizers are left out with a note). Unsupported for other architectures and for layers
/// that are not gguf-* or float; Cancelled leaves no file.
Result<GgufSummary> writeGguf(const quant::QuantizedModel& model, const std::string& path,
                              const ExportSource& source, Progress& progress,
                              const CancelToken& cancel);

/// Reopens `path` as BitLens opens any GGUF llama, compares every tensor with the in-app
/// model bit for bit (dequantized weights with weightFq, the rest with the graph's own), and
/// runs both on `data`: on the CPU the outputs must be identical.
Result<VerifyResult> verifyGguf(const std::string& path, const quant::QuantizedModel& model,
                                const io::Dataset& data, const VerifyOptions& options,
                                Progress& progress, const CancelToken& cancel);

} // namespace bitlens::exporting
