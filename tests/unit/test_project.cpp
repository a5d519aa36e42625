// .bitlens project files: round trip, atomic saves, and clear errors for broken files.

#include "temp_dir.h"

#include "project/project.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace bitlens::project {
namespace {

namespace fs = std::filesystem;

Project sampleProject()
{
    Project p;
    p.modelPath = "/models/fashion-cnn.onnx";
    p.dataPaths = {"/data/fashion-mnist", "/data/extra.npz"};
    p.scheme = "static-int8:observer=mse,calib=256";
    p.overrides = {{"conv1", "float"}, {"fc2", "w4-int4:group=32"}};
    p.runs.push_back({{{"scheme", {{"spec", "static-int8"}}},
                       {"metric", {{"float", 0.91}, {"quantized", 0.905}}},
                       {"layers", nlohmann::json::array({{{"name", "conv1"}, {"sqnr_db", 41.5}}})}},
                      "static-int8",
                      "2025-01-31T12:34:56",
                      "/models/fashion-cnn.onnx"});
    p.runs.push_back({{{"layers", nlohmann::json::array()}}, "w4-int4", "2025-01-31T12:40:00",
                      "/models/fashion-cnn.onnx"});
    return p;
}

std::string slurp(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& text)
{
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(Project, SavesAndRestoresEverything)
{
    test::TempDir dir;
    const std::string path = dir.file("session.bitlens");
    const Project saved = sampleProject();
    ASSERT_TRUE(saveProject(saved, path).ok());
    auto loaded = loadProject(path);
    ASSERT_TRUE(loaded.ok()) << loaded.error().userMessage();
    EXPECT_EQ(*loaded, saved);
    EXPECT_EQ(loaded->runs[0].report["metric"]["quantized"].get<double>(), 0.905);
    // What is on disk says what it is.
    const auto j = nlohmann::json::parse(slurp(path));
    EXPECT_EQ(j["format"], "bitlens-project");
    EXPECT_EQ(j["version"], kProjectVersion);
}

TEST(Project, EmptyProjectRoundTrips)
{
    test::TempDir dir;
    ASSERT_TRUE(saveProject(Project{}, dir.file("empty.bitlens")).ok());
    auto loaded = loadProject(dir.file("empty.bitlens"));
    ASSERT_TRUE(loaded.ok());
    EXPECT_EQ(*loaded, Project{});
}

TEST(Project, FailedSaveKeepsTheOldFileAndLeavesNoTemporary)
{
    test::TempDir dir;
    const std::string path = dir.file("session.bitlens");
    ASSERT_TRUE(saveProject(sampleProject(), path).ok());
    const std::string before = slurp(path);
    // A save into a missing folder fails cleanly...
    auto failed = saveProject(sampleProject(), dir.file("missing/session.bitlens"));
    ASSERT_FALSE(failed.ok());
    EXPECT_FALSE(failed.error().message.empty());
    // ...and a save over a read-only folder's file leaves the old bytes (skipped as root).
    fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
    Project changed = sampleProject();
    changed.scheme = "w4-nf4";
    const bool writable = saveProject(changed, path).ok();
    fs::permissions(dir.path(), fs::perms::owner_all);
    if (!writable)
        EXPECT_EQ(slurp(path), before);
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path()))
        ++files;
    EXPECT_EQ(files, 1u) << "a temporary file was left behind";
}

TEST(Project, RelativePathsResolveBesideTheProject)
{
    test::TempDir dir;
    fs::create_directories(dir.file("data"));
    spit(dir.file("model.onnx"), "x");
    Project p;
    p.modelPath = "model.onnx";
    p.dataPaths = {"data", "fashion-mnist-not-here"};
    ASSERT_TRUE(saveProject(p, dir.file("p.bitlens")).ok());
    auto loaded = loadProject(dir.file("p.bitlens"));
    ASSERT_TRUE(loaded.ok());
    EXPECT_EQ(loaded->modelPath, dir.file("model.onnx"));
    EXPECT_EQ(loaded->dataPaths[0], dir.file("data"));
    EXPECT_EQ(loaded->dataPaths[1], "fashion-mnist-not-here");  // a name, kept as written
}

TEST(Project, BrokenFilesGiveClearErrors)
{
    test::TempDir dir;
    const std::string path = dir.file("bad.bitlens");
    struct Case {
        std::string text;
        ErrorCode code;
        std::string reason;
    };
    const Case cases[] = {
        {"", ErrorCode::BadInput, "not valid JSON"},
        {"{\"format\": \"bitlens-project\", \"version\": 1, \"runs\": [", ErrorCode::BadInput,
         "not valid JSON"},
        {"[1, 2]", ErrorCode::BadInput, "not a BitLens project"},
        {"{\"model\": \"m.onnx\"}", ErrorCode::BadInput, "not a BitLens project"},
        {"{\"format\": \"bitlens-project\", \"version\": 99}", ErrorCode::Unsupported,
         "project version 99 was written by a newer BitLens"},
        {"{\"format\": \"bitlens-project\", \"version\": \"1\"}", ErrorCode::BadInput,
         "\"version\" is not an integer"},
        {"{\"format\": \"bitlens-project\", \"version\": 1, \"model\": 3}", ErrorCode::BadInput,
         "\"model\" is not a string"},
        {"{\"format\": \"bitlens-project\", \"version\": 1, \"data\": \"x\"}", ErrorCode::BadInput,
         "\"data\" is not an array of paths"},
        {"{\"format\": \"bitlens-project\", \"version\": 1, \"overrides\": {\"fc\": 1}}",
         ErrorCode::BadInput, "\"overrides.fc\" is not a scheme string"},
        {"{\"format\": \"bitlens-project\", \"version\": 1, \"runs\": [{\"scheme\": \"x\"}]}",
         ErrorCode::BadInput, "\"runs[0].report\" is not a report object"},
    };
    for (const Case& c : cases) {
        spit(path, c.text);
        auto loaded = loadProject(path);
        ASSERT_FALSE(loaded.ok()) << c.text;
        EXPECT_EQ(loaded.error().code, c.code) << c.text;
        EXPECT_EQ(loaded.error().path, path);
        EXPECT_NE(loaded.error().message.find(c.reason), std::string::npos)
            << c.text << " -> " << loaded.error().message;
    }
    auto missing = loadProject(dir.file("nope.bitlens"));
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().path, dir.file("nope.bitlens"));
}

} // namespace
} // namespace bitlens::project
