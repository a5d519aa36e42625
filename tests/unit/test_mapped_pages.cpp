// io::MappedFile::releasePages: the pages of a mapped range leave the process's resident set
// and read back the file's bytes; bytes outside every live mapping are left alone.

#include "io/file_util.h"
#include "io/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.h"

using namespace bitlens;

namespace {

/// Resident set of this process in bytes (VmRSS of /proc/self/status).
std::int64_t residentBytes()
{
    std::ifstream status("/proc/self/status");
    for (std::string key; status >> key;) {
        if (key == "VmRSS:") {
            std::int64_t kb = 0;
            status >> kb;
            return kb * 1024;
        }
        std::string rest;
        std::getline(status, rest);
    }
    return -1;
}

} // namespace

TEST(MappedPages, ReleasedPagesLeaveTheResidentSetAndReadBackTheFile)
{
    test::TempDir dir;
    const std::string path = dir.file("weights.bin");
    constexpr std::size_t kBytes = std::size_t{64} << 20;
    std::vector<std::uint8_t> bytes(kBytes);
    for (std::size_t i = 0; i < kBytes; ++i)
        bytes[i] = static_cast<std::uint8_t>(i * 2654435761u >> 24);
    ASSERT_TRUE(io::writeFileAtomic(path, bytes.data(), bytes.size()).ok());
    auto file = io::MappedFile::open(path);
    ASSERT_TRUE(file.ok());
    const std::uint8_t* data = (*file)->bytes().data();
    // Touch every page: the mapping becomes resident.
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < kBytes; i += 4096)
        sum += data[i];
    const std::int64_t touched = residentBytes();
    const std::size_t released = io::MappedFile::releasePages(data, kBytes);
    EXPECT_EQ(released, kBytes);  // the mapping is page-aligned: every page goes
    const std::int64_t after = residentBytes();
    EXPECT_LT(after, touched - static_cast<std::int64_t>(kBytes / 2))
        << "touched " << touched << " B, after release " << after << " B";
    // The bytes read back as the file's, faulted in again.
    std::uint64_t again = 0;
    for (std::size_t i = 0; i < kBytes; i += 4096)
        again += data[i];
    EXPECT_EQ(again, sum);
    EXPECT_EQ(data[12345], bytes[12345]);
    // A range that straddles no whole page releases nothing; memory outside every mapping
    // (this vector) is never touched.
    EXPECT_EQ(io::MappedFile::releasePages(data + 10, 100), 0u);
    EXPECT_EQ(io::MappedFile::releasePages(bytes.data(), bytes.size()), 0u);
    EXPECT_EQ(bytes[12345], data[12345]);
    // Past the mapping's end: refused as a whole.
    EXPECT_EQ(io::MappedFile::releasePages(data, kBytes + 4096), 0u);
}
