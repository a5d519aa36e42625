#pragma once
// Whole-file reads and atomic writes shared by every reader and writer.

#include "jobs/result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bitlens::io {

/// Reads a whole file, or BadInput naming it ("cannot open file: No such file or directory",
/// "is a directory", "file is larger than 16 GiB").
Result<std::vector<std::uint8_t>> readFileBytes(const std::string& path);
/// Writes bytes to `path` through a temporary file in the same folder and a rename, so a
/// failure never leaves a partial file behind.
Result<void> writeFileAtomic(const std::string& path, const std::vector<std::uint8_t>& bytes);
/// Same, from a buffer.
Result<void> writeFileAtomic(const std::string& path, const void* data, std::size_t size);

} // namespace bitlens::io
