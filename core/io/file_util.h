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

/// What an output path is meant to name.
enum class OutputKind {
    File,          ///< a file written whole (report.json, an .onnx or .gguf export)
    Folder,        ///< a folder files are written into, created with its parents when missing
    FileOrFolder,  ///< either: an existing folder is written into, anything else is a file
};
/// Checks, before any work, that `path` can be written as an output of `kind`, and returns
/// where to write: `path` itself, or for a symbolic link its resolved destination (the writers
/// write there, so the link stays a link). Otherwise an error naming `path`, with the reason:
/// - BadInput (exit 3) when the path cannot name a file: empty, a missing parent folder
///   ("cannot write: folder X does not exist"), a parent that is a file ("X is not a folder"),
///   a new name ending in '/' where a file is meant;
/// - Runtime (exit 5) when the target exists and cannot be written or replaced: a character or
///   block device, FIFO or socket ("is a FIFO (named pipe), not a regular file: refusing to
///   replace it"), a folder where a file is meant ("is a directory, expected a file"), a
///   dangling symbolic link or a loop ("is a symbolic link to X, which does not exist", "...
///   Too many levels of symbolic links"), or a folder this process cannot write ("cannot write:
///   folder X: Read-only file system").
/// Creates and writes nothing.
Result<std::string> checkWritable(const std::string& path, OutputKind kind = OutputKind::File);

/// Reads a whole file, or BadInput naming it ("cannot open file: No such file or directory",
/// "is a directory", "file is larger than 16 GiB").
Result<std::vector<std::uint8_t>> readFileBytes(const std::string& path);
/// Writes bytes to `path` through a temporary file in the same folder and a rename, so a
/// failure never leaves a partial file behind. Goes through checkWritable first: a symbolic
/// link is written at its destination, a target that is not a regular file is refused.
Result<void> writeFileAtomic(const std::string& path, const std::vector<std::uint8_t>& bytes);
/// Same, from a buffer.
Result<void> writeFileAtomic(const std::string& path, const void* data, std::size_t size);

} // namespace bitlens::io
