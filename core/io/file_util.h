#pragma once
// Whole-file reads and atomic writes shared by every reader and writer.

#include "jobs/result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bitlens::io {

/// What kind of path a reader may open.
enum class PathKind { File, FileOrFolder };
/// Checks that `path` names something a reader can open without blocking: BadInput with the
/// system's own words otherwise ("cannot open file: no such file", "cannot open file: Too many
/// levels of symbolic links", "... File name too long", "... Permission denied"), and for a
/// FIFO, socket or device ("is a FIFO (named pipe), not a regular file"), a folder where only
/// a file will do ("is a directory, expected a file"), or a folder this process may not list
/// ("cannot open folder: Permission denied"). Never opens the path.
Result<void> checkOpenable(const std::string& path, PathKind kind = PathKind::File);

/// Reads a whole file, or BadInput naming it ("cannot open file: No such file or directory",
/// "is a directory", "file is larger than 16 GiB").
Result<std::vector<std::uint8_t>> readFileBytes(const std::string& path);
/// Writes bytes to `path` through a temporary file in the same folder and a rename, so a
/// failure never leaves a partial file behind.
Result<void> writeFileAtomic(const std::string& path, const std::vector<std::uint8_t>& bytes);
/// Same, from a buffer.
Result<void> writeFileAtomic(const std::string& path, const void* data, std::size_t size);

} // namespace bitlens::io
