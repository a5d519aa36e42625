#include "io/zip.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

namespace bitlens::io {

namespace {

constexpr std::uint32_t kLocalHeaderSig = 0x04034b50;
constexpr std::uint32_t kCentralHeaderSig = 0x02014b50;
constexpr std::uint32_t kEndOfCentralDirSig = 0x06054b50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50;
constexpr std::size_t kLocalHeaderBytes = 30;
constexpr std::size_t kCentralHeaderBytes = 46;
constexpr std::size_t kEndOfCentralDirBytes = 22;
constexpr std::size_t kZip64LocatorBytes = 20;
constexpr std::size_t kZip64EndBytes = 56;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
// Deflate cannot expand more than about 1032:1 (a 258-byte match costs at least two bits).
constexpr std::uint64_t kMaxDeflateRatio = 1032;
// zlib counts in 32-bit uInt; feed it at most this much at a time.
constexpr std::size_t kZlibChunk = 1u << 30;

std::uint16_t rd16(std::span<const std::uint8_t> b, std::uint64_t off)
{
    return static_cast<std::uint16_t>(b[off] | (b[off + 1] << 8));
}

std::uint32_t rd32(std::span<const std::uint8_t> b, std::uint64_t off)
{
    return static_cast<std::uint32_t>(b[off]) | (static_cast<std::uint32_t>(b[off + 1]) << 8) |
           (static_cast<std::uint32_t>(b[off + 2]) << 16) |
           (static_cast<std::uint32_t>(b[off + 3]) << 24);
}

std::uint64_t rd64(std::span<const std::uint8_t> b, std::uint64_t off)
{
    return static_cast<std::uint64_t>(rd32(b, off)) |
           (static_cast<std::uint64_t>(rd32(b, off + 4)) << 32);
}

std::string methodName(std::uint16_t method)
{
    switch (method) {
    case 12: return "12 (bzip2)";
    case 14: return "14 (LZMA)";
    case 93: return "93 (Zstandard)";
    case 95: return "95 (xz)";
    default: return std::to_string(method);
    }
}

/// Where inflate() should stop: a member's exact size, or a growing buffer up to a limit.
struct InflateTarget {
    bool exact = false;          ///< output must be exactly `size` bytes
    std::uint64_t size = 0;      ///< exact size, or the initial buffer size when growing
    std::uint64_t maxBytes = 0;  ///< growing only: the most output allowed
};

/// Runs zlib's inflate over `src` with `windowBits` (-15 raw deflate, 31 gzip). For gzip, a
/// second member directly after the first is decoded too, as gzip(1) does.
Result<std::vector<std::uint8_t>> inflateAll(std::span<const std::uint8_t> src, int windowBits,
                                             const InflateTarget& target,
                                             const std::string& path, const std::string& what,
                                             std::uint64_t srcOffset)
{
    z_stream zs{};
    if (inflateInit2(&zs, windowBits) != Z_OK)
        return Error::runtime("cannot initialise zlib", path);
    struct Closer {
        z_stream* s;
        ~Closer() { inflateEnd(s); }
    } closer{&zs};

    const bool gzip = windowBits > 15;
    // One spare byte in exact mode tells "more data than declared" from "exactly right".
    std::vector<std::uint8_t> out(static_cast<std::size_t>(target.size + (target.exact ? 1 : 0)));
    std::size_t outPos = 0;
    std::size_t inPos = 0;  // bytes of src handed to zlib so far
    std::uint8_t dummy = 0;
    zs.next_out = &dummy;
    zs.avail_out = 0;

    auto consumed = [&] { return inPos - zs.avail_in; };
    for (;;) {
        if (zs.avail_in == 0 && inPos < src.size()) {
            const std::size_t n = std::min(src.size() - inPos, kZlibChunk);
            zs.next_in = const_cast<Bytef*>(src.data() + inPos);
            zs.avail_in = static_cast<uInt>(n);
            inPos += n;
        }
        if (zs.avail_out == 0) {
            if (outPos == out.size() && !target.exact) {
                if (out.size() >= target.maxBytes)
                    return Error::badInput(path, what + " decompresses to more than " +
                                                     std::to_string(target.maxBytes) + " bytes");
                const std::uint64_t grown =
                    std::min<std::uint64_t>(std::max<std::uint64_t>(out.size() * 2, 1u << 16),
                                            target.maxBytes);
                out.resize(static_cast<std::size_t>(grown));
            }
            const std::size_t n = std::min(out.size() - outPos, kZlibChunk);
            zs.next_out = n > 0 ? out.data() + outPos : &dummy;
            zs.avail_out = static_cast<uInt>(n);
        }
        const uInt availInBefore = zs.avail_in;
        const uInt availOutBefore = zs.avail_out;
        const int rc = inflate(&zs, Z_NO_FLUSH);
        outPos += availOutBefore - zs.avail_out;
        if (target.exact && outPos > target.size)
            return Error::badInput(path, what + " decompresses to more than the " +
                                             std::to_string(target.size) +
                                             " bytes its header declares");
        if (rc == Z_STREAM_END) {
            const std::size_t rest = src.size() - consumed();
            if (gzip && rest >= 2 && src[consumed()] == 0x1f && src[consumed() + 1] == 0x8b) {
                inflateReset(&zs);
                continue;
            }
            // gzip(1) tolerates zero padding after the last member; so do we.
            const bool zeroPadding =
                gzip && std::all_of(src.begin() + static_cast<std::ptrdiff_t>(consumed()),
                                    src.end(), [](std::uint8_t b) { return b == 0; });
            if (rest > 0 && !zeroPadding)
                return Error::badInput(path, what + " has " + std::to_string(rest) +
                                                 (rest == 1 ? " unexpected byte" :
                                                              " unexpected bytes") +
                                                 " after the compressed data",
                                       srcOffset + consumed());
            break;
        }
        if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_STREAM_ERROR)
            return Error::badInput(path,
                                   what + " is corrupt: " + (zs.msg ? zs.msg : "bad deflate data"),
                                   srcOffset + consumed());
        if (rc == Z_MEM_ERROR)
            return Error::runtime("out of memory while decompressing " + what, path);
        if (zs.avail_in == availInBefore && zs.avail_out == availOutBefore &&
            zs.avail_in == 0 && inPos == src.size())
            return Error::badInput(path, what + " ends early (truncated file?)",
                                   srcOffset + src.size());
    }
    if (target.exact && outPos != target.size)
        return Error::badInput(path, what + " decompresses to " + std::to_string(outPos) +
                                         " bytes but its header declares " +
                                         std::to_string(target.size));
    out.resize(outPos);
    out.shrink_to_fit();
    return out;
}

/// Reads the zip64 extra field of a central directory entry: each value saved as 0xFFFFFFFF
/// in the fixed header is stored there as 64 bits, in the order usize, csize, offset.
Result<void> applyZip64Extra(std::span<const std::uint8_t> b, std::uint64_t extraOff,
                             std::uint64_t extraLen, std::uint32_t usize32,
                             std::uint32_t csize32, std::uint32_t offset32, ZipEntry& entry,
                             const std::string& path)
{
    std::uint64_t p = extraOff;
    const std::uint64_t end = extraOff + extraLen;
    while (p + 4 <= end) {
        const std::uint16_t id = rd16(b, p);
        const std::uint16_t len = rd16(b, p + 2);
        if (p + 4 + len > end)
            return Error::badInput(path, "extra field of member '" + entry.name +
                                             "' runs past its end", p);
        if (id == kZip64ExtraId) {
            std::uint64_t q = p + 4;
            const std::uint64_t qEnd = q + len;
            auto take = [&](std::uint64_t& field) -> bool {
                if (q + 8 > qEnd)
                    return false;
                field = rd64(b, q);
                q += 8;
                return true;
            };
            if ((usize32 == 0xffffffffu && !take(entry.uncompressedSize)) ||
                (csize32 == 0xffffffffu && !take(entry.compressedSize)) ||
                (offset32 == 0xffffffffu && !take(entry.localHeaderOffset)))
                return Error::badInput(path, "zip64 extra field of member '" + entry.name +
                                                 "' is too short", p);
        }
        p += 4 + len;
    }
    return {};
}

} // namespace

Result<std::vector<ZipEntry>> listZipEntries(std::span<const std::uint8_t> b,
                                             const std::string& path)
{
    const std::uint64_t size = b.size();
    if (size < kEndOfCentralDirBytes)
        return Error::badInput(path, "not a zip archive: file is only " + std::to_string(size) +
                                         " bytes");
    // The end-of-central-directory record sits in the last 22 + 65535 (comment) bytes.
    std::uint64_t eocd = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t lowest =
        size > kEndOfCentralDirBytes + 0xffff ? size - kEndOfCentralDirBytes - 0xffff : 0;
    for (std::uint64_t p = size - kEndOfCentralDirBytes + 1; p-- > lowest;) {
        if (rd32(b, p) == kEndOfCentralDirSig &&
            p + kEndOfCentralDirBytes + rd16(b, p + 20) <= size) {
            eocd = p;
            break;
        }
    }
    if (eocd == std::numeric_limits<std::uint64_t>::max())
        return Error::badInput(path, "not a zip archive: no end of central directory record");

    std::uint64_t disk = rd16(b, eocd + 4);
    std::uint64_t cdDisk = rd16(b, eocd + 6);
    std::uint64_t entryCount = rd16(b, eocd + 10);
    std::uint64_t cdSize = rd32(b, eocd + 12);
    std::uint64_t cdOffset = rd32(b, eocd + 16);
    std::uint64_t fieldsOffset = eocd + 10;
    const bool saturated = entryCount == 0xffff || cdSize == 0xffffffffu ||
                           cdOffset == 0xffffffffu;
    if (saturated && eocd >= kZip64LocatorBytes &&
        rd32(b, eocd - kZip64LocatorBytes) == kZip64LocatorSig) {
        const std::uint64_t locator = eocd - kZip64LocatorBytes;
        const std::uint64_t z64 = rd64(b, locator + 8);
        if (z64 > size || size - z64 < kZip64EndBytes || rd32(b, z64) != kZip64EndSig)
            return Error::badInput(path, "zip64 end of central directory record at offset " +
                                             std::to_string(z64) + " is missing or truncated",
                                   locator + 8);
        disk = rd32(b, z64 + 16);
        cdDisk = rd32(b, z64 + 20);
        entryCount = rd64(b, z64 + 32);
        cdSize = rd64(b, z64 + 40);
        cdOffset = rd64(b, z64 + 48);
        fieldsOffset = z64 + 32;
    }
    if (disk != 0 || cdDisk != 0)
        return Error::unsupported(path, "multi-volume zip archives are not supported");
    if (cdOffset > size || cdSize > size - cdOffset)
        return Error::badInput(path, "central directory (offset " + std::to_string(cdOffset) +
                                         ", " + std::to_string(cdSize) +
                                         " bytes) lies past the end of the file (" +
                                         std::to_string(size) + " bytes)",
                               fieldsOffset);
    if (entryCount > cdSize / kCentralHeaderBytes)
        return Error::badInput(path, std::to_string(entryCount) + " members cannot fit in a " +
                                         std::to_string(cdSize) + "-byte central directory",
                               fieldsOffset);

    std::vector<ZipEntry> entries;
    entries.reserve(static_cast<std::size_t>(entryCount));
    const std::uint64_t cdEnd = cdOffset + cdSize;
    std::uint64_t p = cdOffset;
    for (std::uint64_t i = 0; i < entryCount; ++i) {
        if (cdEnd - p < kCentralHeaderBytes || rd32(b, p) != kCentralHeaderSig)
            return Error::badInput(path, "central directory entry " + std::to_string(i) +
                                             " is missing or damaged",
                                   p);
        const std::uint64_t nameLen = rd16(b, p + 28);
        const std::uint64_t extraLen = rd16(b, p + 30);
        const std::uint64_t commentLen = rd16(b, p + 32);
        if (cdEnd - p - kCentralHeaderBytes < nameLen + extraLen + commentLen)
            return Error::badInput(path, "central directory entry " + std::to_string(i) +
                                             " runs past the end of the directory",
                                   p);
        ZipEntry entry;
        entry.flags = rd16(b, p + 8);
        entry.method = rd16(b, p + 10);
        entry.crc32 = rd32(b, p + 16);
        const std::uint32_t csize32 = rd32(b, p + 20);
        const std::uint32_t usize32 = rd32(b, p + 24);
        const std::uint32_t offset32 = rd32(b, p + 42);
        entry.compressedSize = csize32;
        entry.uncompressedSize = usize32;
        entry.localHeaderOffset = offset32;
        entry.name.assign(reinterpret_cast<const char*>(b.data() + p + kCentralHeaderBytes),
                          static_cast<std::size_t>(nameLen));
        auto extra = applyZip64Extra(b, p + kCentralHeaderBytes + nameLen, extraLen, usize32,
                                     csize32, offset32, entry, path);
        if (!extra)
            return extra.error();
        if (entry.localHeaderOffset > cdOffset ||
            cdOffset - entry.localHeaderOffset < kLocalHeaderBytes)
            return Error::badInput(path, "member '" + entry.name + "' has its local header at "
                                             "offset " + std::to_string(entry.localHeaderOffset) +
                                             ", outside the member data",
                                   p + 42);
        entries.push_back(std::move(entry));
        p += kCentralHeaderBytes + nameLen + extraLen + commentLen;
    }
    return entries;
}

Result<std::vector<std::uint8_t>> extractZipEntry(std::span<const std::uint8_t> b,
                                                  const ZipEntry& entry, const std::string& path)
{
    const std::string what = "member '" + entry.name + "'";
    const std::uint64_t size = b.size();
    const std::uint64_t local = entry.localHeaderOffset;
    if (local > size || size - local < kLocalHeaderBytes || rd32(b, local) != kLocalHeaderSig)
        return Error::badInput(path, what + ": no local header at offset " +
                                         std::to_string(local),
                               local);
    if (entry.flags & 1u)
        return Error::unsupported(path, what + " is encrypted");
    if (entry.method != 0 && entry.method != 8)
        return Error::unsupported(path, what + " uses compression method " +
                                            methodName(entry.method) +
                                            "; only stored and deflated members are supported");
    // Sizes come from the central directory: writers that stream (numpy's savez among them)
    // leave 0 or 0xFFFFFFFF in the local header.
    const std::uint64_t dataStart = local + kLocalHeaderBytes + rd16(b, local + 26) +
                                    rd16(b, local + 28);
    if (dataStart > size || size - dataStart < entry.compressedSize)
        return Error::badInput(path, what + ": its " + std::to_string(entry.compressedSize) +
                                         " bytes of data at offset " + std::to_string(dataStart) +
                                         " run past the end of the file (" +
                                         std::to_string(size) + " bytes)",
                               dataStart);
    if (entry.uncompressedSize > kMaxDecompressedBytes)
        return Error::badInput(path, what + " declares " + std::to_string(entry.uncompressedSize) +
                                         " bytes, more than 16 GiB");
    const auto data = b.subspan(static_cast<std::size_t>(dataStart),
                                static_cast<std::size_t>(entry.compressedSize));

    std::vector<std::uint8_t> out;
    if (entry.method == 0) {
        if (entry.compressedSize != entry.uncompressedSize)
            return Error::badInput(path, what + " is stored (uncompressed) but declares " +
                                             std::to_string(entry.compressedSize) +
                                             " bytes in the archive and " +
                                             std::to_string(entry.uncompressedSize) + " bytes "
                                             "uncompressed",
                                   dataStart);
        out.assign(data.begin(), data.end());
    } else {
        if (entry.uncompressedSize > entry.compressedSize * kMaxDeflateRatio + 64)
            return Error::badInput(path, what + " claims " +
                                             std::to_string(entry.uncompressedSize) +
                                             " bytes from " +
                                             std::to_string(entry.compressedSize) +
                                             " compressed bytes, which deflate cannot produce",
                                   dataStart);
        InflateTarget target;
        target.exact = true;
        target.size = entry.uncompressedSize;
        auto inflated = inflateAll(data, -MAX_WBITS, target, path, what, dataStart);
        if (!inflated)
            return inflated.error();
        out = std::move(inflated.value());
    }
    const std::uint32_t crc =
        static_cast<std::uint32_t>(crc32_z(crc32_z(0, nullptr, 0), out.data(), out.size()));
    if (crc != entry.crc32)
        return Error::badInput(path, what + " fails its CRC-32 check (corrupt data)", dataStart);
    return out;
}

bool isGzip(std::span<const std::uint8_t> bytes)
{
    return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

Result<std::vector<std::uint8_t>> gunzip(std::span<const std::uint8_t> bytes,
                                         const std::string& path, std::uint64_t maxBytes)
{
    if (!isGzip(bytes))
        return Error::badInput(path, "not gzip data (no 1f 8b magic)", 0);
    InflateTarget target;
    target.maxBytes = maxBytes;
    // The trailer's ISIZE (size mod 2^32) is a good first guess; a lying trailer costs at most
    // what deflate could produce from these bytes.
    const std::uint64_t isize = bytes.size() >= 4 ? rd32(bytes, bytes.size() - 4) : 0;
    target.size = std::min({isize, maxBytes, bytes.size() * kMaxDeflateRatio});
    return inflateAll(bytes, 16 + MAX_WBITS, target, path, "gzip data", 0);
}

} // namespace bitlens::io
