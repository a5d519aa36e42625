#pragma once
// safetensors: an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}),
// then the raw little-endian tensor bytes, offsets relative to the end of the header.
// Reading maps the file and hands out zero-copy views; every count, size and offset of the
// header is checked before anything is used. Sharded checkpoints
// (model.safetensors.index.json + model-0000k-of-0000n.safetensors) read as one.

#include "jobs/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bitlens::io {

/// The tensors and metadata of a safetensors file or sharded checkpoint.
struct SafetensorsFile {
    std::string path;                             ///< what was opened
    std::map<std::string, at::Tensor> tensors;    ///< CPU views into the mapped file(s)
    std::map<std::string, std::string> metadata;  ///< "__metadata__" (the first shard's)
    std::vector<std::string> shards;              ///< the .safetensors files read, in order
};

/// Largest header JSON accepted, in bytes.
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100ull << 20;

/// Reads a .safetensors file, a *.safetensors.index.json of a sharded checkpoint, or a folder
/// holding either (model.safetensors or model.safetensors.index.json). Tensors are zero-copy
/// views kept valid by the mapping (a tensor whose bytes are not aligned to its element size is
/// copied). Errors: BadInput naming the file and the reason ("tensor 'w': data_offsets [0, 8]
/// hold 8 bytes but shape [3] of F32 needs 12"), Unsupported for a dtype BitLens does not read.
Result<SafetensorsFile> readSafetensors(const std::string& path);

/// Writes `tensors` (any device, any layout; copied to contiguous CPU as needed) and `metadata`
/// atomically in the canonical layout: the header padded with spaces to a multiple of 8 bytes,
/// tensors ordered by element size (largest first) then name, so every tensor is aligned to its
/// element size. Unsupported for a dtype safetensors has no name for (complex, quantized).
Result<void> writeSafetensors(const std::map<std::string, at::Tensor>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& path);

/// The ATen type of a safetensors dtype name ("F32", "BF16", "F8_E4M3", ...), or nullopt.
std::optional<at::ScalarType> safetensorsDtype(std::string_view name);
/// The safetensors name of an ATen type, or nullopt when safetensors has none.
std::optional<std::string_view> safetensorsDtypeName(at::ScalarType type);

} // namespace bitlens::io
