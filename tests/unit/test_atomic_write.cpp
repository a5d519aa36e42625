// AtomicFileWriter (io/mapped_file.h): a write lands whole or not at all, and staging files a
// killed writer left behind are cleared by the next write of the same target.

#include "io/file_util.h"
#include "io/mapped_file.h"
#include "temp_dir.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

using namespace bitlens;
namespace fs = std::filesystem;

namespace {

void touch(const std::string& path)
{
    std::ofstream(path) << "partial";
}

} // namespace

TEST(AtomicWrite, ClearsStagingFilesOfDeadWritersAndKeepsLiveOnes)
{
    test::TempDir dir("atomic-stale");
    // A pid above any pid_max: no such process. The old form (no pid) counts as stale only
    // once it is ten minutes old.
    const std::string dead = dir.file(".m.onnx.tmp2147483000-42");
    const std::string live = dir.file(".m.onnx.tmp" + std::to_string(::getpid()) + "-7");
    const std::string oldForm = dir.file(".m.onnx.tmp123456");
    const std::string freshOldForm = dir.file(".m.onnx.tmp654321");
    const std::string otherTarget = dir.file(".n.onnx.tmp2147483000-1");
    for (const auto& p : {dead, live, oldForm, freshOldForm, otherTarget})
        touch(p);
    fs::last_write_time(oldForm, fs::file_time_type::clock::now() - std::chrono::hours(1));

    ASSERT_TRUE(io::writeFileAtomic(dir.file("m.onnx"), "abc", 3).ok());

    EXPECT_FALSE(fs::exists(dead));
    EXPECT_FALSE(fs::exists(oldForm));
    EXPECT_TRUE(fs::exists(live));
    EXPECT_TRUE(fs::exists(freshOldForm));
    EXPECT_TRUE(fs::exists(otherTarget));
    EXPECT_EQ(fs::file_size(dir.file("m.onnx")), 3u);
}

TEST(AtomicWrite, AnUncommittedWriterLeavesNothingAndTheOldFileStays)
{
    test::TempDir dir("atomic-abort");
    const std::string target = dir.file("r.json");
    ASSERT_TRUE(io::writeFileAtomic(target, "old", 3).ok());
    {
        auto writer = io::AtomicFileWriter::create(target);
        ASSERT_TRUE(writer.ok());
        (*writer)->write("new content", 11);
    }
    int entries = 0;
    for (const auto& e : fs::directory_iterator(dir.path())) {
        (void)e;
        ++entries;
    }
    EXPECT_EQ(entries, 1);
    EXPECT_EQ(fs::file_size(target), 3u);
}
