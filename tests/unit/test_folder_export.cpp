// Folder exports that are all-or-nothing (issue #49 item 3): the window's path (a finished
// staging folder moved onto the target by workspace::commitExport), the refusal of a folder
// that is not a BitLens export, and FolderExport's clean-up when it is not committed. The CLI's
// path (kills, failures, concurrent exports) is e2e.test_export_folder.

#include "export/folder_export.h"
#include "workspace/workspace.h"

#include <gtest/gtest.h>

#include "temp_dir.h"

#include <filesystem>
#include <fstream>
#include <set>

namespace bitlens {
namespace {

namespace fs = std::filesystem;

void writeText(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

std::string readText(const fs::path& path)
{
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A folder as a BitLens safetensors export leaves it, `tag` in its weights file.
void fakeExport(const fs::path& dir, const std::string& tag, bool withVocab)
{
    fs::create_directories(dir);
    writeText(dir / "config.json",
              R"({"quantization_config": {"producer": "bitlens 0.1", "format": "x"}})");
    writeText(dir / "model.safetensors", tag);
    if (withVocab)
        writeText(dir / "vocab.txt", "[PAD]\n");
}

std::set<std::string> entries(const fs::path& dir)
{
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
        names.insert(e.path().filename().string());
    return names;
}

TEST(FolderExport, WindowCommitReplacesAnEarlierExportWhole)
{
    test::TempDir dir("bitlens_fe");
    const fs::path target = dir.file("out");
    fakeExport(target, "old", true);
    const fs::path staging = dir.file(".out.bitlens-export-1-1");
    fakeExport(staging, "new", false);
    ASSERT_TRUE(workspace::commitExport(staging.string(), target.string()).ok());
    EXPECT_EQ(readText(target / "model.safetensors"), "new");
    // The earlier export's vocab.txt went with its folder; nothing is left beside the target.
    EXPECT_EQ(entries(target), (std::set<std::string>{"config.json", "model.safetensors"}));
    EXPECT_EQ(entries(dir.path()), (std::set<std::string>{"out"}));
}

TEST(FolderExport, AFolderThatIsNotABitLensExportIsRefusedUntouched)
{
    test::TempDir dir("bitlens_fe");
    const fs::path target = dir.file("model");
    fs::create_directories(target);
    writeText(target / "config.json", R"({"model_type": "llama"})");
    writeText(target / "model.safetensors", "source");
    const fs::path staging = dir.file(".model.bitlens-export-1-1");
    fakeExport(staging, "new", false);
    auto r = workspace::commitExport(staging.string(), target.string());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    EXPECT_NE(r.error().message.find("not a BitLens export"), std::string::npos)
        << r.error().message;
    EXPECT_EQ(readText(target / "model.safetensors"), "source");
    // The staging folder is gone, so is every lock or staging name.
    EXPECT_EQ(entries(dir.path()), (std::set<std::string>{"model"}));

    // A BitLens export holding a file an export never writes is refused too.
    const fs::path mixed = dir.file("mixed");
    fakeExport(mixed, "old", false);
    writeText(mixed / "notes.md", "mine");
    EXPECT_FALSE(exporting::checkReplaceableFolder(mixed, mixed.string()).ok());
    EXPECT_TRUE(exporting::checkReplaceableFolder(dir.file("missing"), "missing").ok());
}

TEST(FolderExport, NotCommittedLeavesTheOldFolderAndNoStaging)
{
    test::TempDir dir("bitlens_fe");
    const fs::path target = dir.file("out");
    fakeExport(target, "old", true);
    {
        auto stage = exporting::FolderExport::begin(target.string() + "/", Progress::none(),
                                                    CancelToken());
        ASSERT_TRUE(stage.ok()) << stage.error().message;
        EXPECT_EQ((*stage)->staging().parent_path(), fs::canonical(dir.path()));
        writeText((*stage)->staging() / "model.safetensors", "half");
    }
    EXPECT_EQ(readText(target / "model.safetensors"), "old");
    EXPECT_EQ(entries(dir.path()), (std::set<std::string>{"out"}));
}

} // namespace
} // namespace bitlens
