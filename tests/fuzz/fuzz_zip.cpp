// libFuzzer target for the zip and gzip decoders: listZipEntries + extractZipEntry of every
// member on bytes, readNpz on the same bytes as a file (zip + .npy members), and gunzip.

#include "fuzz_common.h"
#include "io/dataset.h"
#include "io/zip.h"

#include <ATen/ATen.h>

namespace {
/// Caps what one input may decompress to, so a 1032:1 bomb stays inside the fuzzer's memory.
constexpr std::uint64_t kMaxOutput = 64ull << 20;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static bitlens::fuzz::ScratchCleanup cleanup;
    const std::span<const std::uint8_t> bytes(data, size);
    if (bitlens::io::isGzip(bytes)) {
        auto out = bitlens::io::gunzip(bytes, "fuzz.gz", kMaxOutput);
        if (!out.ok())
            bitlens::fuzz::checkError(out.error(), "fuzz.gz");
        return 0;
    }
    auto entries = bitlens::io::listZipEntries(bytes, "fuzz.zip");
    if (!entries.ok()) {
        bitlens::fuzz::checkError(entries.error(), "fuzz.zip");
        return 0;
    }
    for (const auto& entry : *entries) {
        auto member = bitlens::io::extractZipEntry(bytes, entry, "fuzz.zip");
        if (!member.ok())
            bitlens::fuzz::checkError(member.error(), "fuzz.zip");
    }
    const std::string path = bitlens::fuzz::writeScratch("data.npz", data, size);
    auto arrays = bitlens::io::readNpz(path);
    if (!arrays.ok())
        bitlens::fuzz::checkError(arrays.error(), path);
    return 0;
}
