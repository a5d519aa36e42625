#pragma once
// Export of a quantized model as safetensors in the compressed-tensors layout that vLLM and
// Hugging Face's compressed-tensors loader read, and a reader that turns such a file back into
// float tensors so `export --verify` can compare them with the quantized weights bit for bit.
//
// Per quantized layer (module name M = the weight's name without ".weight", else the layer):
//  - int8 / uint8 weights, format "int-quantized": M.weight int8 [out, in], M.weight_scale
//    float32, M.weight_zero_point int8 when the zero point is not 0;
//  - int4 / uint4 / int2 weights, format "pack-quantized": M.weight_packed int32
//    [out, ceil(in / (32 / bits))] (value 8k + i of a row in bits 4i.. of word k for 4 bits,
//    stored as q + 2^(bits-1)), M.weight_shape int32 [2] = [out, in], M.weight_scale, and for
//    a non-zero zero point M.weight_zero_point (packed the same way along the output dimension
//    for per-channel / per-group scales, int8 for a per-tensor one);
//  - fp8 e4m3 weights, format "float-quantized": M.weight float8_e4m3fn, M.weight_scale;
//  - fp16 / bf16 weights: M.weight in that dtype, no config group (dense);
//  - static activations: M.input_scale float32 [1] (and M.input_zero_point int8).
// Unsigned codes are stored shifted to the signed range (q - 2^(bits-1), same for the zero
// point), which dequantizes to the same values. Scales: [1] per tensor, [out, 1] per channel,
// [out, groups] per group. Conv weights are stored as their 2-D view [out, in * kh * kw];
// "bitlens.layouts" in the metadata records how to restore every layer's own layout.
// Everything else in the graph is written unchanged (float tensors as float32).

#include "jobs/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <filesystem>
#include <string>
#include <vector>

namespace bitlens::quant {
struct QuantizedModel;
enum class QuantType;
}

namespace bitlens::exporting {

/// What writeCompressedTensors wrote.
struct CompressedTensorsSummary {
    std::string path;                        ///< the .safetensors file
    std::string configPath;                  ///< config.json beside it
    std::string format;                      ///< "pack-quantized", ..., or "mixed-precision"
    std::string quantizationConfig;          ///< the "quantization_config" JSON text
    std::int64_t quantizedLayers = 0;
    std::int64_t tensors = 0;                ///< tensors in the file
    std::vector<std::string> notes;          ///< what was adapted, per layer
    /// Files written beside the weights: config.json, then the source's tokenizer and
    /// generation files (the Hugging Face model folder).
    std::vector<std::string> folderFiles;
};

/// The folder holding the Hugging Face files of a model opened from `modelPath` (the folder
/// itself, or the folder of a .safetensors file or shard index with config.json beside it), or
/// an empty path for models from elsewhere.
std::filesystem::path hfSourceFolder(const std::string& modelPath);
/// The tokenizer, generation and preprocessing files a Hugging Face folder may hold besides
/// config.json and the weights, copied into an export folder.
const std::vector<std::string>& hfCompanionFiles();

/// Writes `model` to `path` (a .safetensors file, atomically) with the quantization_config in
/// its __metadata__, and writes (or updates the "quantization_config" of) config.json in the
/// same folder. Unsupported, naming the layer, for weight formats compressed-tensors has no
/// layout for (nf4, fp4_e2m1, fp8_e5m2) and for SmoothQuant layers (their input divisor has no
/// place in the format).
Result<CompressedTensorsSummary> writeCompressedTensors(const quant::QuantizedModel& model,
                                                        const std::string& path,
                                                        const std::string& sourceModelPath = {});

/// Reads a compressed-tensors safetensors file back to float32: every quantized weight is
/// dequantized ((q - zero_point) * scale, as BitLens quantizes) and put back in its layer's own
/// layout under its original name when the file records it ("bitlens.layouts"), else as
/// "<module>.weight" [out, in]; other float tensors come back as float32, the rest unchanged;
/// the quantization side tensors (scales, zero points, shapes, input scales) are consumed. The
/// quantization_config comes from the file's metadata or from config.json beside it.
Result<std::map<std::string, at::Tensor>> readCompressedTensors(const std::string& path);

/// compressed-tensors' format name for weights of a block type ("nvfp4-pack-quantized",
/// "mxfp4-pack-quantized", "mxfp8-quantized"); empty for a type it has no block layout for.
std::string compressedTensorsBlockFormat(quant::QuantType type);

/// Metadata key of the graph tensors an export from a Hugging Face folder leaves out (a JSON
/// array of names); --verify takes those from the model.
inline constexpr const char* kOmittedTensorsKey = "bitlens.omitted";

} // namespace bitlens::exporting
