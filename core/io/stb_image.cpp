#include "io/stb_image.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#ifdef BITLENS_HAVE_STB_IMAGE
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
#include <stb/stb_image.h>
#pragma GCC diagnostic pop
#endif

namespace bitlens::io::stb {

#ifdef BITLENS_HAVE_STB_IMAGE
namespace {

std::string failureReason()
{
    const char* reason = stbi_failure_reason();
    return reason ? reason : "unknown error";
}

/// Where a JPEG's SOI marker ends, or 0 when `b` is not a JPEG as stb sees one: fill bytes
/// (0xFF) and then 0xD8 (its marker reader skips the fill).
std::size_t jpegStart(const std::vector<std::uint8_t>& b)
{
    std::size_t pos = 0;
    while (pos < b.size() && b[pos] == 0xFF)
        ++pos;
    return pos == 0 || pos >= b.size() || b[pos] != 0xD8 ? 0 : pos + 1;
}

/// Checks what stb_image 2.27 (Debian's libstb, 2022) trusts in a JPEG's Huffman tables:
///  - a table (DHT) whose 16 code counts add up to more than 256 makes it write past its
///    257-entry size and 256-entry value arrays (found by fuzz_image; stb 2.28 checks it);
///  - a scan (SOS) that names a table no DHT defined makes it decode with uninitialised
///    memory: its code-to-symbol offsets are garbage and index the value array out of bounds
///    (found by fuzz_image: index -438). Baseline scans need both their DC and AC tables;
///    progressive ones the DC table in a first DC scan, the AC table in an AC scan.
/// Walks every marker segment, entropy-coded data skipped; an empty string when nothing is
/// wrong.
std::string jpegHuffmanProblem(const std::vector<std::uint8_t>& b)
{
    std::size_t pos = jpegStart(b);
    if (pos == 0)
        return {};  // not a JPEG
    bool defined[2][4] = {};  // [DC, AC][table id]
    bool progressive = false;
    while (pos + 4 <= b.size()) {
        if (b[pos] != 0xFF) {  // entropy-coded data between markers
            ++pos;
            continue;
        }
        const std::uint8_t marker = b[pos + 1];
        // Fill bytes, stuffed zeros, restart markers, TEM and SOI carry no length.
        if (marker == 0xFF || marker == 0x00 || marker == 0x01 || marker == 0xD8 ||
            (marker >= 0xD0 && marker <= 0xD7)) {
            pos += marker == 0xFF ? 1 : 2;
            continue;
        }
        if (marker == 0xD9)  // EOI
            break;
        const std::size_t length = (static_cast<std::size_t>(b[pos + 2]) << 8) | b[pos + 3];
        if (length < 2)
            break;  // stb refuses this segment itself
        if (marker == 0xC4) {  // DHT: tables of [class/id, 16 counts, values]
            // As stb reads it: tables until the segment length is used up, bytes past the end
            // of the file reading as 0 (so a table cut short by the end still counts).
            const std::size_t end = std::min(b.size(), pos + 2 + length);
            for (std::size_t t = pos + 4; t < end;) {
                std::size_t values = 0;
                for (std::size_t i = 1; i <= 16; ++i)
                    values += t + i < b.size() ? b[t + i] : 0;
                if (values > 256)
                    return "Huffman table of " + std::to_string(values) +
                           " codes (at most 256; corrupt JPEG)";
                const unsigned tableClass = b[t] >> 4;
                const unsigned id = b[t] & 15;
                if (tableClass < 2 && id < 4)
                    defined[tableClass][id] = true;  // others: stb refuses the table itself
                t += 17 + values;
            }
        } else if (marker == 0xC2) {  // SOF2: progressive
            progressive = true;
        } else if (marker == 0xDA && pos + 5 <= b.size()) {  // SOS: which tables decode it
            const std::size_t components = b[pos + 4];
            const std::size_t spectral = pos + 5 + 2 * components;
            if (spectral + 2 < b.size()) {
                const unsigned ss = b[spectral];
                const unsigned ah = b[spectral + 2] >> 4;
                const bool needDc = !progressive || (ss == 0 && ah == 0);
                const bool needAc = !progressive || ss > 0;
                for (std::size_t i = 0; i < components; ++i) {
                    const unsigned tables = b[pos + 6 + 2 * i];
                    const unsigned dc = tables >> 4;
                    const unsigned ac = tables & 15;
                    if (needDc && dc < 4 && !defined[0][dc])
                        return "scan uses DC Huffman table " + std::to_string(dc) +
                               ", which no DHT segment defines (corrupt JPEG)";
                    if (needAc && ac < 4 && !defined[1][ac])
                        return "scan uses AC Huffman table " + std::to_string(ac) +
                               ", which no DHT segment defines (corrupt JPEG)";
                }
            }
        }
        pos += 2 + length;
    }
    return {};
}

/// Checks a PNG's chunk structure before stb sees it: stb_image 2.27 trusts a chunk's length
/// and grows its IDAT buffer towards it, so 125 bytes claiming a 4 GB chunk took seconds of
/// allocation (fuzz_image). Every chunk must fit in the file (length, type, data, CRC).
std::string pngChunkProblem(const std::vector<std::uint8_t>& b)
{
    static constexpr std::uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (b.size() < 8 || !std::equal(kSignature, kSignature + 8, b.begin()))
        return {};  // not a PNG
    std::size_t pos = 8;
    while (pos + 8 <= b.size()) {
        const std::uint64_t length = (static_cast<std::uint64_t>(b[pos]) << 24) |
                                     (static_cast<std::uint64_t>(b[pos + 1]) << 16) |
                                     (static_cast<std::uint64_t>(b[pos + 2]) << 8) | b[pos + 3];
        const std::string type(reinterpret_cast<const char*>(&b[pos + 4]), 4);
        const std::uint64_t left = b.size() - pos - 8;
        if (length > left || left - length < 4)
            return "PNG chunk '" + type + "' at byte " + std::to_string(pos) + " claims " +
                   std::to_string(length) + " bytes, but only " +
                   std::to_string(left < 4 ? 0 : left - 4) +
                   " remain before its checksum (truncated or corrupt PNG)";
        if (type == "IEND")
            return {};
        pos += 12 + static_cast<std::size_t>(length);
    }
    return {};  // ends without IEND: stb reports what is missing
}

} // namespace
#endif

bool info(const std::vector<std::uint8_t>& bytes, int& width, int& height, int& channels,
          std::string& reason)
{
#ifdef BITLENS_HAVE_STB_IMAGE
    if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
        reason = "image file is larger than 2 GiB";
        return false;
    }
    if (reason = jpegHuffmanProblem(bytes); !reason.empty())
        return false;
    if (reason = pngChunkProblem(bytes); !reason.empty())
        return false;
    if (!stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height,
                               &channels)) {
        reason = failureReason();
        return false;
    }
    // stb decodes a JPEG whose data ends early as if the rest were zeros, so 200 bytes claiming
    // 64776 x 9736 pixels become a 630 MB image (and 2.5 GB as float) after seconds of work.
    // Every 8x8 block costs at least one bit (its DC code), so a JPEG holds at least
    // width * height / 512 bytes; less is a truncated or lying file, refused before decoding.
    const double minBytes = static_cast<double>(width) * height / 512.0;
    if (jpegStart(bytes) != 0 && static_cast<double>(bytes.size()) < minBytes) {
        reason = "JPEG of " + std::to_string(width) + "x" + std::to_string(height) +
                 " pixels in " + std::to_string(bytes.size()) + " bytes (at least " +
                 std::to_string(static_cast<long long>(minBytes)) +
                 " needed: truncated or corrupt)";
        return false;
    }
    return true;
#else
    (void)bytes, (void)width, (void)height, (void)channels;
    reason = "this build of BitLens has no image decoder (stb_image)";
    return false;
#endif
}

Pixels load(const std::vector<std::uint8_t>& bytes, int channels, int& width, int& height,
            std::string& reason)
{
#ifdef BITLENS_HAVE_STB_IMAGE
    auto release = [](void* p) { stbi_image_free(p); };
    int infoChannels = 0;
    if (!info(bytes, width, height, infoChannels, reason))
        return Pixels(nullptr, release);
    int comp = 0;
    Pixels pixels(stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width,
                                        &height, &comp, channels),
                  release);
    if (!pixels)
        reason = failureReason();
    return pixels;
#else
    (void)bytes, (void)channels, (void)width, (void)height;
    reason = "this build of BitLens has no image decoder (stb_image)";
    return Pixels(nullptr, [](void*) {});
#endif
}

} // namespace bitlens::io::stb
