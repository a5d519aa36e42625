#pragma once
// In-memory zip and gzip decoding for the data readers (.npz members, gzipped IDX files).
// Every offset and size read from the archive is checked against the bytes present before it
// is used, so a corrupt or hostile file yields BadInput, never a crash or a huge allocation.

#include "jobs/result.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bitlens::io {

/// One member of a zip archive, as its central directory describes it.
struct ZipEntry {
    std::string name;                   ///< member name, e.g. "x.npy"
    std::uint16_t method = 0;           ///< 0 = stored, 8 = deflated
    std::uint16_t flags = 0;            ///< general purpose flags (bit 0: encrypted)
    std::uint32_t crc32 = 0;            ///< CRC-32 of the uncompressed bytes
    std::uint64_t compressedSize = 0;   ///< bytes of member data in the archive
    std::uint64_t uncompressedSize = 0; ///< bytes after decompression
    std::uint64_t localHeaderOffset = 0; ///< byte offset of the member's local header
};

/// Largest output gunzip() and extractZipEntry() produce (16 GiB, as readFileBytes).
inline constexpr std::uint64_t kMaxDecompressedBytes = 16ull << 30;

/// Lists the members of a zip archive held in `bytes` (zip64 records understood);
/// `path` names the archive in error messages.
Result<std::vector<ZipEntry>> listZipEntries(std::span<const std::uint8_t> bytes,
                                             const std::string& path);

/// Extracts one member (stored or deflated) and checks its size and CRC-32.
Result<std::vector<std::uint8_t>> extractZipEntry(std::span<const std::uint8_t> bytes,
                                                  const ZipEntry& entry,
                                                  const std::string& path);

/// True when `bytes` start with the gzip magic 1f 8b.
bool isGzip(std::span<const std::uint8_t> bytes);

/// Decompresses gzip data (one or more concatenated members) of at most `maxBytes` output.
Result<std::vector<std::uint8_t>> gunzip(std::span<const std::uint8_t> bytes,
                                         const std::string& path,
                                         std::uint64_t maxBytes = kMaxDecompressedBytes);

} // namespace bitlens::io
