#pragma once
// ONNX reader and writer for float models, on a protobuf wire-format codec of our own (no
// libprotobuf: it would clash with the copy inside LibTorch). Reads opset 7 and later (older
// files converted to opset-13 forms by io/onnx_import.h).

#include "ir/graph.h"
#include "jobs/result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bitlens::io {

/// Parses an ONNX ModelProto from memory. `path` only names the source in error messages.
/// Corrupt bytes -> BadInput with the byte offset; an op BitLens cannot run -> Unsupported
/// naming the node and its op_type.
Result<ir::Graph> readOnnx(const std::vector<std::uint8_t>& bytes, const std::string& path);
/// Reads an ONNX file (external data next to it is not supported: Unsupported).
Result<ir::Graph> readOnnxFile(const std::string& path);

/// The default-domain opset writeOnnx declares for `graph`: its opsetVersion (at least 13),
/// raised to what its contents need: 19 for QuantizeLinear / DequantizeLinear with float8
/// initializers, 20 for Gelu, 21 for int4 / uint4 initializers and blocked or output_dtype
/// quantization nodes.
std::int64_t writtenOpset(const ir::Graph& graph);
/// Serializes a graph as an ONNX ModelProto (weights as raw_data, ir_version 8).
Result<std::vector<std::uint8_t>> writeOnnx(const ir::Graph& graph);
/// Writes an ONNX file atomically (temporary file, then rename): never a partial file.
Result<void> writeOnnxFile(const ir::Graph& graph, const std::string& path);

} // namespace bitlens::io
