// safetensors: files written by the pip `safetensors` package (tests/data/safetensors/
// make_golden.py), sharded checkpoints, our writer read back by us and by the Python reader,
// zero-copy views that outlive the file object, and corrupt files generated from an enum of
// defects: each is refused with a message naming the file and the reason, never a crash.

#include "io/safetensors.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "python_oracle.h"
#include "temp_dir.h"

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace bitlens;

namespace {

namespace fs = std::filesystem;

const std::string kDir = std::string(BITLENS_TEST_DATA) + "/safetensors/";

struct TempDir : test::TempDir {
    TempDir() : test::TempDir("bitlens_st") {}
};

std::vector<std::uint8_t> readBytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const std::string& path, const std::vector<std::uint8_t>& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// A file from a header text and a data area.
std::vector<std::uint8_t> fileOf(const std::string& header, std::size_t dataBytes)
{
    std::vector<std::uint8_t> bytes(8 + header.size() + dataBytes, 0);
    const std::uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    std::memcpy(bytes.data() + 8, header.data(), header.size());
    return bytes;
}

/// The [2, 3] values make_golden.py stores for a dtype.
at::Tensor goldenValue(at::ScalarType type)
{
    at::Tensor base = at::arange(6, at::kDouble).reshape({2, 3});
    if (type == at::kBool)
        return at::remainder(at::arange(6).reshape({2, 3}), 2) == 0;
    if (type == at::kByte)
        return (base * 40).to(type);
    if (at::isFloatingType(type))
        return (base * 1.5 - 3).to(type);
    return (base * 7 - 20).to(type);
}

} // namespace

TEST(Safetensors, ReadsEveryDtypeWrittenByThePythonPackage)
{
    auto file = io::readSafetensors(kDir + "all_dtypes.safetensors");
    ASSERT_TRUE(file.ok()) << file.error().userMessage();
    const std::vector<std::pair<std::string, at::ScalarType>> expected = {
        {"f64", at::kDouble}, {"f32", at::kFloat},  {"f16", at::kHalf},
        {"bf16", at::kBFloat16}, {"i64", at::kLong}, {"i32", at::kInt},
        {"i16", at::kShort}, {"i8", at::kChar},     {"u8", at::kByte},
        {"bool", at::kBool}, {"f8_e4m3", at::kFloat8_e4m3fn}, {"f8_e5m2", at::kFloat8_e5m2}};
    for (const auto& [name, type] : expected) {
        ASSERT_TRUE(file->tensors.count(name)) << name;
        const at::Tensor& t = file->tensors.at(name);
        EXPECT_EQ(t.scalar_type(), type) << name;
        EXPECT_EQ(t.sizes(), at::IntArrayRef({2, 3})) << name;
        EXPECT_TRUE(at::equal(t.to(at::kDouble), goldenValue(type).to(at::kDouble))) << name;
    }
    EXPECT_EQ(file->tensors.at("empty").sizes(), at::IntArrayRef({0, 4}));
    EXPECT_EQ(file->tensors.at("scalar").dim(), 0);
    EXPECT_EQ(file->tensors.at("scalar").item<float>(), 2.5f);
    EXPECT_EQ(file->metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "golden"}}));
}

TEST(Safetensors, ReadsAShardedCheckpointFromItsIndexOrFolder)
{
    for (const std::string path : {kDir + "sharded/model.safetensors.index.json", kDir + "sharded"}) {
        auto file = io::readSafetensors(path);
        ASSERT_TRUE(file.ok()) << file.error().userMessage();
        EXPECT_EQ(file->shards.size(), 2u);
        ASSERT_EQ(file->tensors.size(), 3u);
        EXPECT_TRUE(at::equal(file->tensors.at("a.weight"), at::arange(16, at::kFloat).reshape({4, 4}) * 0.25 - 1));
        EXPECT_TRUE(at::equal(file->tensors.at("b.weight"), at::arange(8, at::kFloat).reshape({2, 4}) * 0.25 - 1));
        EXPECT_EQ(file->metadata.at("format"), "pt");
    }
}

TEST(Safetensors, ViewsOutliveTheFileObjectAndNeverWriteToTheFile)
{
    const std::string path = kDir + "all_dtypes.safetensors";
    const auto before = readBytes(path);
    at::Tensor f32;
    {
        auto file = io::readSafetensors(path);
        ASSERT_TRUE(file.ok());
        f32 = file->tensors.at("f32");
    }
    // The mapping is still alive through the view; an in-place op stays private to us.
    EXPECT_TRUE(at::equal(f32, goldenValue(at::kFloat)));
    f32.mul_(2);
    EXPECT_TRUE(at::equal(f32, goldenValue(at::kFloat) * 2));
    EXPECT_EQ(readBytes(path), before);
    auto again = io::readSafetensors(path);
    EXPECT_TRUE(at::equal(again->tensors.at("f32"), goldenValue(at::kFloat)));
}

TEST(Safetensors, WriterRoundTripsCanonicallyAndAligned)
{
    TempDir dir;
    std::map<std::string, at::Tensor> tensors;
    for (auto type : {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16, at::kLong, at::kInt,
                      at::kShort, at::kChar, at::kByte, at::kBool, at::kFloat8_e4m3fn,
                      at::kFloat8_e5m2})
        tensors[std::string("t_") + c10::toString(type)] = goldenValue(type);
    tensors["transposed"] = at::arange(12, at::kFloat).reshape({3, 4}).t();  // not contiguous
    tensors["empty"] = at::zeros({0, 3});
    tensors["scalar"] = at::scalar_tensor(-1.5);
    const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"who", "bitlens"}};
    const std::string path = dir.file("out.safetensors");
    ASSERT_TRUE(io::writeSafetensors(tensors, metadata, path).ok());

    const auto bytes = readBytes(path);
    std::uint64_t headerLen;
    std::memcpy(&headerLen, bytes.data(), 8);
    EXPECT_EQ(headerLen % 8, 0u);
    auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(headerLen));
    // Largest elements first: every tensor starts at a multiple of its element size.
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__")
            continue;
        const auto type = io::safetensorsDtype(entry["dtype"].get<std::string>());
        ASSERT_TRUE(type.has_value());
        EXPECT_EQ(entry["data_offsets"][0].get<std::uint64_t>() % c10::elementSize(*type), 0u) << name;
    }
    auto back = io::readSafetensors(path);
    ASSERT_TRUE(back.ok()) << back.error().userMessage();
    EXPECT_EQ(back->metadata, metadata);
    ASSERT_EQ(back->tensors.size(), tensors.size());
    for (const auto& [name, t] : tensors) {
        const at::Tensor& got = back->tensors.at(name);
        EXPECT_EQ(got.scalar_type(), t.scalar_type()) << name;
        EXPECT_EQ(got.sizes(), t.sizes()) << name;
        EXPECT_TRUE(at::equal(got.to(at::kDouble), t.to(at::kDouble))) << name;
    }
}

TEST(Safetensors, PythonReadsOurFileAndWeReadItsFile)
{
    BITLENS_PYTHON_OR_SKIP(python);
    TempDir dir;
    std::map<std::string, at::Tensor> tensors = {
        {"w", at::arange(24, at::kFloat).reshape({2, 3, 4}) * 0.5},
        {"h", goldenValue(at::kHalf)},
        {"b", goldenValue(at::kBFloat16)},
        {"q", goldenValue(at::kChar)},
        {"m", goldenValue(at::kBool)},
        {"e", goldenValue(at::kFloat8_e4m3fn)}};
    ASSERT_TRUE(io::writeSafetensors(tensors, {{"k", "v"}}, dir.file("ours.safetensors")).ok());
    // numpy, not torch: the Rust reader validates the whole header either way, and importing
    // torch would cost seconds. BF16 and F8 have no numpy dtype: their header entries are
    // checked through slices, which the reader validates without converting.
    const std::string code = R"(
import sys, numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file
d = sys.argv[1]
with safe_open(d + "/ours.safetensors", framework="numpy") as f:
    assert f.metadata() == {"k": "v"}, f.metadata()
    assert sorted(f.keys()) == ["b", "e", "h", "m", "q", "w"], sorted(f.keys())
    t = {k: f.get_tensor(k) for k in ["w", "h", "q", "m"]}
    assert f.get_slice("b").get_dtype() == "BF16" and f.get_slice("b").get_shape() == [2, 3]
    assert f.get_slice("e").get_dtype() == "F8_E4M3" and f.get_slice("e").get_shape() == [2, 3]
assert np.array_equal(t["w"], np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5)
base = np.arange(6, dtype=np.float64).reshape(2, 3)
assert t["h"].dtype == np.float16 and np.array_equal(t["h"].astype(np.float64), base * 1.5 - 3)
assert t["q"].dtype == np.int8 and np.array_equal(t["q"], (base * 7 - 20).astype(np.int8))
assert np.array_equal(t["m"], (np.arange(6).reshape(2, 3) % 2) == 0)
save_file({"x": t["w"] + 1, "y": t["h"]}, d + "/theirs.safetensors", metadata={"from": "python"})
print("ok")
)";
    std::string output;
    ASSERT_EQ(test::runPython(python, dir.path(), code, dir.path(), output), 0) << output;
    auto theirs = io::readSafetensors(dir.file("theirs.safetensors"));
    ASSERT_TRUE(theirs.ok()) << theirs.error().userMessage();
    EXPECT_TRUE(at::equal(theirs->tensors.at("x"), tensors["w"] + 1));
    EXPECT_TRUE(at::equal(theirs->tensors.at("y"), tensors["h"]));
    EXPECT_EQ(theirs->metadata.at("from"), "python");
}

TEST(Safetensors, WriterRefusesWhatSafetensorsCannotHold)
{
    TempDir dir;
    const std::string path = dir.file("c.safetensors");
    auto r = io::writeSafetensors({{"z", at::zeros({2}, at::kComplexFloat)}}, {}, path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Unsupported);
    EXPECT_FALSE(fs::exists(path));
    auto missingDir = io::writeSafetensors({{"a", at::zeros({1})}}, {}, dir.file("no/such/x.safetensors"));
    EXPECT_FALSE(missingDir.ok());
}

namespace {

/// Defects a corrupt file can have; each must be refused cleanly.
enum class Defect {
    TooShort,
    LengthPastEnd,
    NotJson,
    NotObject,
    MetadataNotStrings,
    UnknownDtype,
    NegativeDim,
    ShapeOverflow,
    OffsetsReversed,
    OffsetsPastEnd,
    WrongByteCount,
    Overlap,
    DuplicateName,
    BoolNotZeroOrOne,
    MissingDtype,
};

struct DefectCase {
    Defect defect;
    std::vector<std::uint8_t> bytes;
    ErrorCode code;
    std::string message;  ///< expected reason (after "<path>: ")
};

std::vector<DefectCase> defectCases()
{
    const std::string f32 = R"("dtype":"F32","shape":[2],"data_offsets":)";
    return {
        {Defect::TooShort, {1, 0, 0}, ErrorCode::BadInput,
         "file is 3 bytes, too short for a safetensors header length"},
        {Defect::LengthPastEnd, [] { auto b = fileOf("{}", 0); b[0] = 200; return b; }(),
         ErrorCode::BadInput, "header length 200 runs past the end of the file (10 bytes)"},
        {Defect::NotJson, fileOf("{\"a\":", 0), ErrorCode::BadInput, "header is not valid JSON"},
        {Defect::NotObject, fileOf("[1, 2]  ", 0), ErrorCode::BadInput, "header is not a JSON object"},
        {Defect::MetadataNotStrings, fileOf(R"({"__metadata__":{"n":1}})", 0), ErrorCode::BadInput,
         "__metadata__ value 'n' is not a string"},
        {Defect::UnknownDtype, fileOf(R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 8),
         ErrorCode::Unsupported, "tensor 'w' has dtype 'F4', which BitLens does not read"},
        {Defect::NegativeDim, fileOf(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
         ErrorCode::BadInput, "tensor 'w': shape holds a value that is not a non-negative integer"},
        {Defect::ShapeOverflow,
         fileOf(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
         ErrorCode::BadInput, "tensor 'w': the shape's element count overflows"},
        {Defect::OffsetsReversed, fileOf("{\"w\":{" + f32 + "[8,0]}}", 8), ErrorCode::BadInput,
         "tensor 'w': data_offsets [8, 0] begin after they end"},
        {Defect::OffsetsPastEnd, fileOf("{\"w\":{" + f32 + "[0,8]}}", 4), ErrorCode::BadInput,
         "tensor 'w': data_offsets [0, 8] end past the end of the file (the data area holds 4 bytes)"},
        {Defect::WrongByteCount, fileOf("{\"w\":{" + f32 + "[0,12]}}", 12), ErrorCode::BadInput,
         "tensor 'w': data_offsets [0, 12] hold 12 bytes but shape [2] of F32 needs 8"},
        {Defect::Overlap, fileOf("{\"a\":{" + f32 + "[0,8]},\"b\":{" + f32 + "[4,12]}}", 12),
         ErrorCode::BadInput, "tensors 'a' and 'b' overlap in the data area"},
        {Defect::DuplicateName, fileOf("{\"a\":{" + f32 + "[0,8]},\"a\":{" + f32 + "[8,16]}}", 16),
         ErrorCode::BadInput, "tensor 'a' appears twice in the header"},
        {Defect::BoolNotZeroOrOne,
         [] {
             auto b = fileOf(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", 2);
             b.back() = 2;
             return b;
         }(),
         ErrorCode::BadInput, "tensor 'm': BOOL byte 2 is neither 0 nor 1"},
        {Defect::MissingDtype, fileOf(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8),
         ErrorCode::BadInput, "tensor 'w' has no dtype string"},
    };
}

} // namespace

TEST(Safetensors, CorruptFilesAreRefusedWithTheReason)
{
    TempDir dir;
    for (const DefectCase& c : defectCases()) {
        const std::string path = dir.file("bad.safetensors");
        writeBytes(path, c.bytes);
        auto r = io::readSafetensors(path);
        ASSERT_FALSE(r.ok()) << static_cast<int>(c.defect);
        EXPECT_EQ(r.error().code, c.code) << c.message;
        EXPECT_EQ(r.error().path, path);
        EXPECT_EQ(r.error().message, c.message);
    }
}

TEST(Safetensors, EveryTruncationIsRefused)
{
    TempDir dir;
    const auto bytes = readBytes(kDir + "all_dtypes.safetensors");
    const std::string path = dir.file("cut.safetensors");
    // Every cut through the length and the first part of the header, then every 7th byte.
    for (std::size_t n = 0; n < bytes.size(); n += n < 160 ? 1 : 7) {
        writeBytes(path, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(n)));
        auto r = io::readSafetensors(path);
        ASSERT_FALSE(r.ok()) << "truncated to " << n << " bytes";
        EXPECT_EQ(r.error().code, ErrorCode::BadInput);
    }
}

TEST(Safetensors, DeeplyNestedHeaderIsRefusedWithoutRecursion)
{
    TempDir dir;
    const std::string path = dir.file("deep.safetensors");
    const std::string header = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    writeBytes(path, fileOf(header, 0));
    auto r = io::readSafetensors(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "tensor 'a' is not described by a JSON object");
}

// A header whose length is not a multiple of 8 (other writers do not pad) leaves float data
// unaligned: those tensors are copied, and read the same.
TEST(Safetensors, MisalignedTensorsAreCopied)
{
    TempDir dir;
    const std::string path = dir.file("odd.safetensors");
    const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    ASSERT_NE((8 + header.size()) % 4, 0u);
    auto bytes = fileOf(header, 8);
    const float values[2] = {1.5f, -2.25f};
    std::memcpy(bytes.data() + 8 + header.size(), values, 8);
    writeBytes(path, bytes);
    auto r = io::readSafetensors(path);
    ASSERT_TRUE(r.ok()) << r.error().userMessage();
    EXPECT_TRUE(at::equal(r->tensors.at("w"), at::tensor({1.5f, -2.25f})));
}

TEST(Safetensors, HugeHeaderLengthIsRefusedBeforeReading)
{
    TempDir dir;
    const std::string path = dir.file("huge.safetensors");
    auto bytes = fileOf("{}", 0);
    const std::uint64_t claimed = 200ull << 20;
    std::memcpy(bytes.data(), &claimed, 8);
    writeBytes(path, bytes);
    fs::resize_file(path, claimed + 16);  // sparse: nothing is written
    auto r = io::readSafetensors(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "header length 209715200 exceeds the 100 MB limit");
}

TEST(Safetensors, BadShardedIndexesAreRefused)
{
    TempDir dir;
    fs::copy(kDir + "sharded", dir.path(), fs::copy_options::recursive);
    const std::string index = dir.file("model.safetensors.index.json");
    auto writeIndex = [&](const std::string& text) {
        std::ofstream(index, std::ios::trunc) << text;
        return io::readSafetensors(index);
    };
    auto escape = writeIndex(R"({"weight_map":{"a.weight":"../x.safetensors"}})");
    ASSERT_FALSE(escape.ok());
    EXPECT_EQ(escape.error().message,
              "weight_map entry 'a.weight' names '../x.safetensors', which is not a file in the index's folder");
    auto missing = writeIndex(R"({"weight_map":{"zzz":"model-00002-of-00002.safetensors"}})");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message, "tensor 'zzz' listed in the index is missing");
    auto absent = writeIndex(R"({"weight_map":{"a.weight":"nope.safetensors"}})");
    ASSERT_FALSE(absent.ok());
    EXPECT_EQ(absent.error().message, "cannot open file: no such file");
    auto noMap = writeIndex(R"({"metadata":{}})");
    ASSERT_FALSE(noMap.ok());
    EXPECT_EQ(noMap.error().message, "index has no \"weight_map\" object");
}

TEST(Safetensors, MissingFileAndFolderSayWhy)
{
    TempDir dir;
    auto none = io::readSafetensors(dir.file("none.safetensors"));
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.error().userMessage(), "error: " + dir.file("none.safetensors") + ": cannot open file: no such file");
    auto folder = io::readSafetensors(dir.path());
    ASSERT_FALSE(folder.ok());
    EXPECT_EQ(folder.error().message, "folder holds neither model.safetensors nor model.safetensors.index.json");
}
