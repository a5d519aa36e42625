#pragma once
// compressed-tensors safetensors files (as BitLens's safetensors export and llm-compressor
// write them) read back to float32.

#include "io/safetensors.h"
#include "jobs/result.h"

#include <ATen/core/Tensor.h>
#include <nlohmann/json_fwd.hpp>

#include <map>
#include <string>

namespace bitlens::io {

/// Reads a compressed-tensors safetensors file back to float32: every quantized weight is
/// dequantized ((q - zero_point) * scale, as BitLens quantizes) and put back in its layer's own
/// layout under its original name when the file records it ("bitlens.layouts"), else as
/// "<module>.weight" [out, in]; other float tensors come back as float32, the rest unchanged;
/// the quantization side tensors (scales, zero points, shapes, input scales) are consumed. The
/// quantization_config comes from the file's metadata or from config.json beside it.
Result<std::map<std::string, at::Tensor>> readCompressedTensors(const std::string& path);
/// The same of a file already read (`path` names it in errors and finds config.json). With
/// `recordedLayouts` false, "bitlens.layouts" is ignored: every weight comes back as the
/// Hugging Face "<module>.weight" [out, in] the file stores, as a model folder is built from.
Result<std::map<std::string, at::Tensor>> decodeCompressedTensors(const SafetensorsFile& file,
                                                                  const std::string& path,
                                                                  bool recordedLayouts = true);
/// True when a Hugging Face config.json holds a compressed-tensors quantization_config.
bool isCompressedTensorsConfig(const nlohmann::json& config);

} // namespace bitlens::io
