// .npy / .npz: golden files written by numpy (tests/data/npy/make_npy_golden.py), writeNpy round
// trips, and corrupt files generated from an enum of defects.

#include "io/dataset.h"
#include "io/zip.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "temp_dir.h"
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>

namespace bitlens::io {
namespace {

namespace fs = std::filesystem;

const std::string kNpyDir = std::string(BITLENS_TEST_DATA) + "/npy/";

/// A fresh folder per test, removed afterwards.
struct TempDir : bitlens::test::TempDir {
    TempDir() : bitlens::test::TempDir("bitlens_npy") {}
};

std::vector<std::uint8_t> readBytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const std::string& path, const std::vector<std::uint8_t>& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
}

/// One dtype of the golden files: code, the ATen type it reads as, and its item size.
struct GoldenType {
    const char* code;
    at::ScalarType type;
    int itemSize;
};

constexpr GoldenType kGoldenTypes[] = {
    {"f2", at::kHalf, 2},  {"f4", at::kFloat, 4},  {"f8", at::kDouble, 8},   {"i1", at::kChar, 1},
    {"u1", at::kByte, 1},  {"i2", at::kShort, 2},  {"i4", at::kInt, 4},      {"i8", at::kLong, 8},
    {"u2", at::kUInt16, 2}, {"u4", at::kUInt32, 4}, {"b1", at::kBool, 1},
};

/// The (2, 3) values of make_npy_golden.py's VALUES, as double (floats) or int64 (the rest).
at::Tensor expectedValues(const std::string& code)
{
    constexpr std::int64_t kMin64 = std::numeric_limits<std::int64_t>::min();
    constexpr std::int64_t kMax64 = std::numeric_limits<std::int64_t>::max();
    auto d = [](std::vector<double> v) { return at::tensor(v, at::kDouble).reshape({2, 3}); };
    auto l = [](std::vector<std::int64_t> v) { return at::tensor(v, at::kLong).reshape({2, 3}); };
    if (code == "f2")
        return d({-1.5, 0.0, 0.25, 2.0, 65504.0, -0.125});
    if (code == "f4")
        return d({-1.5, 0.0, 3.25, 16777216.0, -0.0078125, 7.0});
    if (code == "f8")
        return d({-1.5, 0.0, 0.1, 1e300, -2.5, 7.0});
    if (code == "i1")
        return l({-128, -1, 0, 1, 2, 127});
    if (code == "u1")
        return l({0, 1, 2, 128, 254, 255});
    if (code == "i2")
        return l({-32768, -1, 0, 1, 258, 32767});
    if (code == "i4")
        return l({-2147483648LL, -1, 0, 1, 66051, 2147483647});
    if (code == "i8")
        return l({kMin64, -1, 0, 1, 72623859790382856LL, kMax64});
    if (code == "u2")
        return l({0, 1, 258, 32768, 65534, 65535});
    if (code == "u4")
        return l({0, 1, 66051, 2147483648LL, 4294967294LL, 4294967295LL});
    return l({1, 0, 1, 0, 0, 1});  // b1
}

/// Asserts `actual` has `type`, shape (2, 3), is a contiguous CPU tensor and holds the values.
void expectGolden(const at::Tensor& actual, const GoldenType& type)
{
    ASSERT_TRUE(actual.defined());
    EXPECT_EQ(actual.scalar_type(), type.type);
    EXPECT_EQ(actual.sizes(), at::IntArrayRef({2, 3}));
    EXPECT_TRUE(actual.is_contiguous());
    EXPECT_TRUE(actual.device().is_cpu());
    const at::Tensor expected = expectedValues(type.code);
    const at::Tensor got = actual.to(expected.scalar_type());
    EXPECT_TRUE(at::equal(got, expected)) << "got\n" << got << "\nexpected\n" << expected;
}

std::vector<std::string> goldenFiles(const GoldenType& type)
{
    if (type.itemSize == 1)
        return {std::string(type.code) + "_c.npy", std::string(type.code) + "_f.npy"};
    std::vector<std::string> files;
    for (const char* order : {"_le", "_be"})
        for (const char* layout : {"_c", "_f"})
            files.push_back(std::string(type.code) + order + layout + ".npy");
    return files;
}

TEST(NpyGolden, ReadsEveryDtypeInEitherByteOrderAndMemoryOrder)
{
    for (const GoldenType& type : kGoldenTypes) {
        for (const std::string& name : goldenFiles(type)) {
            SCOPED_TRACE(name);
            auto tensor = readNpy(kNpyDir + name);
            ASSERT_TRUE(tensor.ok()) << tensor.error().userMessage();
            expectGolden(*tensor, type);
        }
    }
}

TEST(NpyGolden, TransposesThreeDimensionalFortranOrder)
{
    auto cube = readNpy(kNpyDir + "cube_be_f.npy");
    ASSERT_TRUE(cube.ok()) << cube.error().userMessage();
    EXPECT_EQ(cube->scalar_type(), at::kFloat);
    EXPECT_TRUE(cube->is_contiguous());
    EXPECT_TRUE(at::equal(*cube, at::arange(24, at::kFloat).reshape({2, 3, 4})));
}

TEST(NpyGolden, ReadsZeroDimensionalEmptyAndOneDimensionalArrays)
{
    auto scalar = readNpy(kNpyDir + "scalar_f8.npy");
    ASSERT_TRUE(scalar.ok()) << scalar.error().userMessage();
    EXPECT_EQ(scalar->dim(), 0);
    EXPECT_EQ(scalar->item<double>(), 3.5);

    auto empty = readNpy(kNpyDir + "empty_f4.npy");
    ASSERT_TRUE(empty.ok()) << empty.error().userMessage();
    EXPECT_EQ(empty->sizes(), at::IntArrayRef({0, 3}));
    EXPECT_EQ(empty->scalar_type(), at::kFloat);

    auto vector = readNpy(kNpyDir + "vector_i8.npy");
    ASSERT_TRUE(vector.ok()) << vector.error().userMessage();
    EXPECT_TRUE(at::equal(*vector, at::tensor(std::vector<std::int64_t>{5, -6, 7, -8, 9})));
}

TEST(NpyGolden, ReadsFormatVersions2And3)
{
    for (const char* name : {"version2_f4.npy", "version3_f4.npy"}) {
        SCOPED_TRACE(name);
        auto tensor = readNpy(kNpyDir + name);
        ASSERT_TRUE(tensor.ok()) << tensor.error().userMessage();
        expectGolden(*tensor, kGoldenTypes[1]);
    }
}

TEST(NpyRoundTrip, EveryDtypeSurvivesWriteThenRead)
{
    TempDir dir;
    for (const GoldenType& type : kGoldenTypes) {
        SCOPED_TRACE(type.code);
        const at::Tensor original = expectedValues(type.code).to(type.type);
        const std::string path = dir.file(std::string(type.code) + ".npy");
        auto written = writeNpy(original, path);
        ASSERT_TRUE(written.ok()) << written.error().userMessage();
        auto back = readNpy(path);
        ASSERT_TRUE(back.ok()) << back.error().userMessage();
        expectGolden(*back, type);
    }
}

TEST(NpyRoundTrip, WritesTheSameBytesAsNumpy)
{
    // numpy's own v1.0 files for C-order little-endian arrays: header text, padding to 64
    // bytes and data must match byte for byte.
    TempDir dir;
    for (const GoldenType& type : kGoldenTypes) {
        SCOPED_TRACE(type.code);
        const std::string golden =
            kNpyDir + type.code + (type.itemSize == 1 ? "_c.npy" : "_le_c.npy");
        const std::string path = dir.file("mine.npy");
        ASSERT_TRUE(writeNpy(expectedValues(type.code).to(type.type), path).ok());
        EXPECT_EQ(readBytes(path), readBytes(golden));
    }
    ASSERT_TRUE(writeNpy(at::tensor(std::vector<std::int64_t>{5, -6, 7, -8, 9}),
                         dir.file("vector.npy"))
                    .ok());
    EXPECT_EQ(readBytes(dir.file("vector.npy")), readBytes(kNpyDir + "vector_i8.npy"));
    ASSERT_TRUE(writeNpy(at::scalar_tensor(3.5, at::kDouble), dir.file("scalar.npy")).ok());
    EXPECT_EQ(readBytes(dir.file("scalar.npy")), readBytes(kNpyDir + "scalar_f8.npy"));
    ASSERT_TRUE(writeNpy(at::zeros({0, 3}, at::kFloat), dir.file("empty.npy")).ok());
    EXPECT_EQ(readBytes(dir.file("empty.npy")), readBytes(kNpyDir + "empty_f4.npy"));
}

TEST(NpyRoundTrip, HeaderEndsOnA64ByteBoundary)
{
    TempDir dir;
    const std::string path = dir.file("h.npy");
    for (std::size_t dims = 0; dims <= 8; ++dims) {
        for (std::int64_t first : {0, 1, 10, 1000}) {
            SCOPED_TRACE(std::to_string(dims) + " dims, first " + std::to_string(first));
            std::vector<std::int64_t> shape(dims, 1);
            if (dims > 0)
                shape[0] = first;  // the header's length varies with the digits
            ASSERT_TRUE(writeNpy(at::zeros(shape, at::kFloat), path).ok());
            const auto bytes = readBytes(path);
            ASSERT_GE(bytes.size(), 10u);
            const std::size_t headerLen = bytes[8] | (bytes[9] << 8);
            EXPECT_EQ((10 + headerLen) % 64, 0u);
            EXPECT_EQ(bytes[10 + headerLen - 1], '\n');
            auto back = readNpy(path);
            ASSERT_TRUE(back.ok()) << back.error().userMessage();
            EXPECT_EQ(back->sizes(), at::IntArrayRef(shape));
        }
    }
}

TEST(NpyRoundTrip, NonContiguousInputIsWrittenInCOrder)
{
    TempDir dir;
    const at::Tensor t = at::arange(12, at::kInt).reshape({3, 4}).t();
    ASSERT_FALSE(t.is_contiguous());
    ASSERT_TRUE(writeNpy(t, dir.file("t.npy")).ok());
    auto back = readNpy(dir.file("t.npy"));
    ASSERT_TRUE(back.ok()) << back.error().userMessage();
    EXPECT_TRUE(at::equal(*back, t));
}

TEST(NpyWrite, RejectsTypesWithoutANumpyDtype)
{
    TempDir dir;
    auto bf16 = writeNpy(at::zeros({2}, at::kBFloat16), dir.file("b.npy"));
    ASSERT_FALSE(bf16.ok());
    EXPECT_EQ(bf16.error().code, ErrorCode::Unsupported);
    EXPECT_FALSE(fs::exists(dir.file("b.npy")));

    auto undefined = writeNpy(at::Tensor(), dir.file("u.npy"));
    ASSERT_FALSE(undefined.ok());
    EXPECT_EQ(undefined.error().code, ErrorCode::Usage);
}

TEST(NpyWrite, FailsCleanlyIntoAMissingFolder)
{
    TempDir dir;
    const std::string path = dir.file("missing/x.npy");
    auto result = writeNpy(at::zeros({2}), path);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().path, path);
    EXPECT_FALSE(fs::exists(path));
}

TEST(NpyNpz, ReadsStoredAndDeflatedArchives)
{
    const at::Tensor x = (at::arange(16, at::kFloat) / 8).reshape({4, 1, 2, 2});
    const at::Tensor y = at::tensor(std::vector<std::int64_t>{0, 1, 2, 1});
    for (const char* name : {"stored.npz", "deflated.npz"}) {
        SCOPED_TRACE(name);
        auto arrays = readNpz(kNpyDir + name);
        ASSERT_TRUE(arrays.ok()) << arrays.error().userMessage();
        ASSERT_EQ(arrays->size(), 2u);
        ASSERT_TRUE(arrays->count("x") && arrays->count("y"));
        EXPECT_TRUE(at::equal(arrays->at("x"), x));
        EXPECT_TRUE(at::equal(arrays->at("y"), y));
    }
}

TEST(NpyNpz, PositionalArrayIsNamedArr0)
{
    auto arrays = readNpz(kNpyDir + "single.npz");
    ASSERT_TRUE(arrays.ok()) << arrays.error().userMessage();
    ASSERT_EQ(arrays->size(), 1u);
    EXPECT_TRUE(at::equal(arrays->at("arr_0"),
                          at::tensor(std::vector<std::int32_t>{1, 2, 3, 4}).reshape({2, 2})));
}

// ---- corrupt files -------------------------------------------------------------------------

/// Defects made from valid golden files; each must give BadInput (or Unsupported) naming the
/// file, never a crash.
enum class Defect {
    NpyEmpty,
    NpyTruncatedHeader,
    NpyBadMagic,
    NpyBadVersion,
    NpyHeaderLengthPastEnd,
    NpyHeaderGarbage,
    NpyHeaderNotADict,
    NpyUnknownKey,
    NpyMissingShape,
    NpyNegativeDimension,
    NpyHugeDimension,
    NpyShapeSizeMismatch,
    NpyTrailingData,
    NpyUnsupportedDtype,
    NpyStructuredDtype,
    ZipNotAZip,
    ZipTruncated,
    ZipCentralDirectoryPastEnd,
    ZipTooManyEntries,
    ZipLocalHeaderOffsetPastEnd,
    ZipLocalHeaderMissing,
    ZipMemberDataPastEnd,
    ZipCrcMismatch,
    ZipStoredSizeMismatch,
    ZipDeflateGarbage,
    ZipDeflateSizeLie,
    ZipUnsupportedMethod,
    ZipEncrypted,
    ZipMemberNotNpy,
};

const char* defectName(Defect d)
{
    switch (d) {
    case Defect::NpyEmpty: return "NpyEmpty";
    case Defect::NpyTruncatedHeader: return "NpyTruncatedHeader";
    case Defect::NpyBadMagic: return "NpyBadMagic";
    case Defect::NpyBadVersion: return "NpyBadVersion";
    case Defect::NpyHeaderLengthPastEnd: return "NpyHeaderLengthPastEnd";
    case Defect::NpyHeaderGarbage: return "NpyHeaderGarbage";
    case Defect::NpyHeaderNotADict: return "NpyHeaderNotADict";
    case Defect::NpyUnknownKey: return "NpyUnknownKey";
    case Defect::NpyMissingShape: return "NpyMissingShape";
    case Defect::NpyNegativeDimension: return "NpyNegativeDimension";
    case Defect::NpyHugeDimension: return "NpyHugeDimension";
    case Defect::NpyShapeSizeMismatch: return "NpyShapeSizeMismatch";
    case Defect::NpyTrailingData: return "NpyTrailingData";
    case Defect::NpyUnsupportedDtype: return "NpyUnsupportedDtype";
    case Defect::NpyStructuredDtype: return "NpyStructuredDtype";
    case Defect::ZipNotAZip: return "ZipNotAZip";
    case Defect::ZipTruncated: return "ZipTruncated";
    case Defect::ZipCentralDirectoryPastEnd: return "ZipCentralDirectoryPastEnd";
    case Defect::ZipTooManyEntries: return "ZipTooManyEntries";
    case Defect::ZipLocalHeaderOffsetPastEnd: return "ZipLocalHeaderOffsetPastEnd";
    case Defect::ZipLocalHeaderMissing: return "ZipLocalHeaderMissing";
    case Defect::ZipMemberDataPastEnd: return "ZipMemberDataPastEnd";
    case Defect::ZipCrcMismatch: return "ZipCrcMismatch";
    case Defect::ZipStoredSizeMismatch: return "ZipStoredSizeMismatch";
    case Defect::ZipDeflateGarbage: return "ZipDeflateGarbage";
    case Defect::ZipDeflateSizeLie: return "ZipDeflateSizeLie";
    case Defect::ZipUnsupportedMethod: return "ZipUnsupportedMethod";
    case Defect::ZipEncrypted: return "ZipEncrypted";
    case Defect::ZipMemberNotNpy: return "ZipMemberNotNpy";
    }
    return "?";
}

/// A part of the message each defect must produce: proof that it failed for that reason.
const char* expectedReason(Defect d)
{
    switch (d) {
    case Defect::NpyEmpty: return "file is too short for a .npy header (0 bytes)";
    case Defect::NpyTruncatedHeader: return "npy header of 118 bytes runs past the end";
    case Defect::NpyBadMagic: return "not a .npy file (bad magic)";
    case Defect::NpyBadVersion: return ".npy format version 9.0 is not supported";
    case Defect::NpyHeaderLengthPastEnd: return "npy header of 65535 bytes runs past the end";
    case Defect::NpyHeaderGarbage: return "expected a non-negative integer in 'shape'";
    case Defect::NpyHeaderNotADict: return "npy header is malformed: expected '{'";
    case Defect::NpyUnknownKey: return "npy header is malformed: unexpected key 'shope'";
    case Defect::NpyMissingShape: return "npy header lacks 'shape'";
    case Defect::NpyNegativeDimension: return "expected a non-negative integer in 'shape'";
    case Defect::NpyHugeDimension: return "shape (99999999999999999, 99999999999, 3) is too large";
    case Defect::NpyShapeSizeMismatch: return "needs 24 bytes of data but the file has 20";
    case Defect::NpyTrailingData: return "needs 24 bytes of data but the file has 25";
    case Defect::NpyUnsupportedDtype: return "NumPy dtype '<c8' is not supported";
    case Defect::NpyStructuredDtype: return "structured NumPy dtypes are not supported";
    case Defect::ZipNotAZip: return "no end of central directory record";
    case Defect::ZipTruncated: return "no end of central directory record";
    case Defect::ZipCentralDirectoryPastEnd: return "lies past the end of the file";
    case Defect::ZipTooManyEntries: return "5000 members cannot fit";
    case Defect::ZipLocalHeaderOffsetPastEnd: return "has its local header at offset 2147483632";
    case Defect::ZipLocalHeaderMissing: return "no local header at offset 5";
    case Defect::ZipMemberDataPastEnd: return "its 1048576 bytes of data at offset 55 run past";
    case Defect::ZipCrcMismatch: return "fails its CRC-32 check";
    case Defect::ZipStoredSizeMismatch: return "is stored (uncompressed) but declares 192";
    case Defect::ZipDeflateGarbage: return "member 'x.npy' is corrupt: invalid block type";
    case Defect::ZipDeflateSizeLie: return "decompresses to 192 bytes but its header declares 202";
    case Defect::ZipUnsupportedMethod: return "uses compression method 14 (LZMA)";
    case Defect::ZipEncrypted: return "member 'x.npy' is encrypted";
    case Defect::ZipMemberNotNpy: return "member 'x.npy': not a .npy file (bad magic)";
    }
    return "?";
}

bool isZipDefect(Defect d) { return d >= Defect::ZipNotAZip; }

std::uint32_t get32(const std::vector<std::uint8_t>& b, std::size_t off)
{
    return b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) |
           (static_cast<std::uint32_t>(b[off + 3]) << 24);
}

void put16(std::vector<std::uint8_t>& b, std::size_t off, std::uint16_t v)
{
    b[off] = v & 0xff;
    b[off + 1] = v >> 8;
}

void put32(std::vector<std::uint8_t>& b, std::size_t off, std::uint32_t v)
{
    for (int i = 0; i < 4; ++i)
        b[off + i] = (v >> (8 * i)) & 0xff;
}

/// Replaces the text `from` in an npy header by `to` of the same length.
void patchHeader(std::vector<std::uint8_t>& b, const std::string& from, const std::string& to)
{
    ASSERT_EQ(from.size(), to.size());
    const std::string text(b.begin(), b.end());
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    std::memcpy(b.data() + at, to.data(), to.size());
}

/// A version 1.0 .npy with header dict `dict` (padded as numpy pads) and `dataBytes` zeros.
std::vector<std::uint8_t> npyWithHeader(std::string dict, std::size_t dataBytes)
{
    dict += std::string(63 - (10 + dict.size()) % 64, ' ') + "\n";
    std::string file("\x93NUMPY\x01\x00", 8);
    file += static_cast<char>(dict.size() & 0xff);
    file += static_cast<char>(dict.size() >> 8);
    file += dict;
    file.append(dataBytes, '\0');
    return std::vector<std::uint8_t>(file.begin(), file.end());
}

/// The golden file behind a defect, corrupted.
std::vector<std::uint8_t> corrupt(Defect d)
{
    std::vector<std::uint8_t> b =
        readBytes(kNpyDir + (!isZipDefect(d)              ? "f4_le_c.npy"
                             : d == Defect::ZipDeflateGarbage || d == Defect::ZipDeflateSizeLie
                                 ? "deflated.npz"
                                 : "stored.npz"));
    // Zip layout: the end record is the last 22 bytes (numpy writes no comment); the first
    // central entry is at the offset it names; x.npy is the first member, at offset 0.
    const std::size_t eocd = b.size() - 22;
    const std::size_t central = isZipDefect(d) ? get32(b, eocd + 16) : 0;
    const std::size_t dataStart =
        isZipDefect(d) ? 30 + b[26] + (b[27] << 8) + b[28] + (b[29] << 8) : 0;
    switch (d) {
    case Defect::NpyEmpty: b.clear(); break;
    case Defect::NpyTruncatedHeader: b.resize(40); break;
    case Defect::NpyBadMagic: b[1] = 'X'; break;
    case Defect::NpyBadVersion: b[6] = 9; break;
    case Defect::NpyHeaderLengthPastEnd: put16(b, 8, 0xffff); break;
    case Defect::NpyHeaderGarbage: patchHeader(b, "(2, 3)", "(2, x)"); break;
    case Defect::NpyHeaderNotADict: b[10] = '['; break;
    case Defect::NpyUnknownKey: patchHeader(b, "'shape'", "'shope'"); break;
    case Defect::NpyMissingShape:
        b = npyWithHeader("{'descr': '<f4', 'fortran_order': False, }", 24);
        break;
    case Defect::NpyNegativeDimension: patchHeader(b, "(2, 3)", "(2,-3)"); break;
    case Defect::NpyHugeDimension:
        b = npyWithHeader("{'descr': '<f4', 'fortran_order': False, "
                          "'shape': (99999999999999999, 99999999999, 3), }",
                          24);
        break;
    case Defect::NpyShapeSizeMismatch: b.resize(b.size() - 4); break;
    case Defect::NpyTrailingData: b.push_back(0); break;
    case Defect::NpyUnsupportedDtype: patchHeader(b, "'<f4'", "'<c8'"); break;
    case Defect::NpyStructuredDtype:
        b = npyWithHeader("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }",
                          24);
        break;
    case Defect::ZipNotAZip: b.assign(100, 'z'); break;
    case Defect::ZipTruncated: b.resize(b.size() / 2); break;
    case Defect::ZipCentralDirectoryPastEnd: put32(b, eocd + 16, 0x7fff0000); break;
    case Defect::ZipTooManyEntries: put16(b, eocd + 10, 5000); break;
    case Defect::ZipLocalHeaderOffsetPastEnd: put32(b, central + 42, 0x7ffffff0); break;
    case Defect::ZipLocalHeaderMissing: put32(b, central + 42, 5); break;
    case Defect::ZipMemberDataPastEnd: put32(b, central + 20, 0x100000); break;
    case Defect::ZipCrcMismatch: b[dataStart + 100] ^= 0x01; break;
    case Defect::ZipStoredSizeMismatch: put32(b, central + 24, get32(b, central + 24) + 1); break;
    case Defect::ZipDeflateGarbage:
        for (std::size_t i = dataStart; i < dataStart + 16; ++i)
            b[i] = 0xff;
        break;
    case Defect::ZipDeflateSizeLie: put32(b, central + 24, get32(b, central + 24) + 10); break;
    case Defect::ZipUnsupportedMethod: put16(b, central + 10, 14); break;
    case Defect::ZipEncrypted: put16(b, central + 8, 1); break;
    case Defect::ZipMemberNotNpy: {
        // A valid zip whose member is not a .npy: fix the CRC so that the zip layer passes.
        b[dataStart + 1] = 'X';
        const std::uint32_t size = get32(b, central + 24);
        put32(b, central + 16,
              static_cast<std::uint32_t>(crc32(0, b.data() + dataStart, size)));
        break;
    }
    }
    return b;
}

class NpyCorrupt : public testing::TestWithParam<Defect> {};

TEST_P(NpyCorrupt, GivesAnErrorNamingTheFile)
{
    TempDir dir;
    const Defect defect = GetParam();
    const std::string path = dir.file(std::string(defectName(defect)) +
                                      (isZipDefect(defect) ? ".npz" : ".npy"));
    writeBytes(path, corrupt(defect));
    const Error error = isZipDefect(defect) ? [&] {
        auto r = readNpz(path);
        EXPECT_FALSE(r.ok());
        return r.ok() ? Error{} : r.error();
    }()
                                            : [&] {
        auto r = readNpy(path);
        EXPECT_FALSE(r.ok());
        return r.ok() ? Error{} : r.error();
    }();
    const bool unsupported = defect == Defect::NpyUnsupportedDtype ||
                             defect == Defect::NpyStructuredDtype ||
                             defect == Defect::NpyBadVersion ||
                             defect == Defect::ZipUnsupportedMethod ||
                             defect == Defect::ZipEncrypted;
    EXPECT_EQ(error.code, unsupported ? ErrorCode::Unsupported : ErrorCode::BadInput)
        << error.userMessage();
    EXPECT_EQ(error.path, path);
    EXPECT_NE(error.message.find(expectedReason(defect)), std::string::npos)
        << error.userMessage();
    EXPECT_NE(error.userMessage().find(path), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Npy, NpyCorrupt,
    testing::Values(Defect::NpyEmpty, Defect::NpyTruncatedHeader, Defect::NpyBadMagic,
                    Defect::NpyBadVersion, Defect::NpyHeaderLengthPastEnd,
                    Defect::NpyHeaderGarbage, Defect::NpyHeaderNotADict, Defect::NpyUnknownKey,
                    Defect::NpyMissingShape,
                    Defect::NpyNegativeDimension, Defect::NpyHugeDimension,
                    Defect::NpyShapeSizeMismatch, Defect::NpyTrailingData,
                    Defect::NpyUnsupportedDtype, Defect::NpyStructuredDtype, Defect::ZipNotAZip,
                    Defect::ZipTruncated, Defect::ZipCentralDirectoryPastEnd,
                    Defect::ZipTooManyEntries, Defect::ZipLocalHeaderOffsetPastEnd,
                    Defect::ZipLocalHeaderMissing, Defect::ZipMemberDataPastEnd,
                    Defect::ZipCrcMismatch, Defect::ZipStoredSizeMismatch,
                    Defect::ZipDeflateGarbage, Defect::ZipDeflateSizeLie,
                    Defect::ZipUnsupportedMethod, Defect::ZipEncrypted, Defect::ZipMemberNotNpy),
    [](const testing::TestParamInfo<Defect>& p) { return defectName(p.param); });

/// The message a user sees for a defect, with the temp folder replaced by "<dir>".
std::string userMessageFor(Defect defect)
{
    const std::string path = (fs::temp_directory_path() /
                              ("bitlens_npy_msg_" + std::to_string(::getpid()) +
                               (isZipDefect(defect) ? ".npz" : ".npy")))
                                 .string();
    writeBytes(path, corrupt(defect));
    std::string message;
    if (isZipDefect(defect)) {
        auto r = readNpz(path);
        message = r.ok() ? "ok" : r.error().userMessage();
    } else {
        auto r = readNpy(path);
        message = r.ok() ? "ok" : r.error().userMessage();
    }
    fs::remove(path);
    const auto at = message.find(path);
    if (at != std::string::npos)
        message.replace(at, path.size(), "<file>");
    return message;
}

TEST(NpyCorruptMessages, SayWhatIsWrongAndWhere)
{
    EXPECT_EQ(userMessageFor(Defect::NpyBadMagic),
              "error: <file>: not a .npy file (bad magic) (at byte 0)");
    EXPECT_EQ(userMessageFor(Defect::NpyShapeSizeMismatch),
              "error: <file>: shape (2, 3) of '<f4' needs 24 bytes of data but the file has 20 "
              "(at byte 128)");
    EXPECT_EQ(userMessageFor(Defect::NpyHeaderGarbage),
              "error: <file>: npy header is malformed: expected a non-negative integer in "
              "'shape' (at byte 64)");
    EXPECT_EQ(userMessageFor(Defect::NpyHeaderLengthPastEnd),
              "error: <file>: npy header of 65535 bytes runs past the end of the file (152 "
              "bytes) (at byte 8)");
    EXPECT_EQ(userMessageFor(Defect::NpyUnsupportedDtype),
              "error: <file>: NumPy dtype '<c8' is not supported (supported: f2 f4 f8 i1 u1 i2 "
              "i4 i8 u2 u4 u8 b1)");
    EXPECT_EQ(userMessageFor(Defect::ZipNotAZip),
              "error: <file>: not a zip archive: no end of central directory record");
    EXPECT_EQ(userMessageFor(Defect::ZipCrcMismatch),
              "error: <file>: member 'x.npy' fails its CRC-32 check (corrupt data) (at byte 55)");
    EXPECT_EQ(userMessageFor(Defect::ZipCentralDirectoryPastEnd),
              "error: <file>: central directory (offset 2147418112, 102 bytes) lies past the end "
              "of the file (586 bytes) (at byte 574)");
}

TEST(NpyCorrupt, NeverCrashesOnAnyTruncationOrByteFlip)
{
    // Every prefix and every single-byte flip of a .npy and of both .npz archives.
    for (const char* name : {"f8_be_f.npy", "stored.npz", "deflated.npz"}) {
        SCOPED_TRACE(name);
        const std::vector<std::uint8_t> good = readBytes(kNpyDir + name);
        const bool npz = std::string(name).ends_with(".npz");
        const std::string path = npz ? "fuzz.npz" : "fuzz.npy";
        auto check = [&](const std::vector<std::uint8_t>& bytes) {
            if (!npz) {
                auto r = parseNpy(bytes, path);
                if (!r.ok()) {
                    EXPECT_NE(r.error().code, ErrorCode::Runtime) << r.error().userMessage();
                }
                return;
            }
            // readNpz's steps, in memory: thousands of temp files would make this test slow.
            auto entries = listZipEntries(bytes, path);
            if (!entries.ok()) {
                EXPECT_NE(entries.error().code, ErrorCode::Runtime);
                return;
            }
            for (const ZipEntry& entry : *entries) {
                auto member = extractZipEntry(bytes, entry, path);
                if (!member.ok()) {
                    EXPECT_NE(member.error().code, ErrorCode::Runtime)
                        << member.error().userMessage();
                    continue;
                }
                auto r = parseNpy(*member, path);
                if (!r.ok()) {
                    EXPECT_NE(r.error().code, ErrorCode::Runtime) << r.error().userMessage();
                }
            }
        };
        for (std::size_t n = 0; n < good.size(); ++n) {
            auto cut = good;
            cut.resize(n);
            check(cut);
            auto flipped = good;
            flipped[n] ^= 0xff;
            check(flipped);
        }
    }
}

TEST(NpyZip, ListsMembersWithSizesFromTheCentralDirectory)
{
    const std::vector<std::uint8_t> bytes = readBytes(kNpyDir + "deflated.npz");
    auto entries = listZipEntries(bytes, "deflated.npz");
    ASSERT_TRUE(entries.ok()) << entries.error().userMessage();
    ASSERT_EQ(entries->size(), 2u);
    EXPECT_EQ((*entries)[0].name, "x.npy");
    EXPECT_EQ((*entries)[0].method, 8);
    EXPECT_EQ((*entries)[0].uncompressedSize, 192u);
    EXPECT_EQ((*entries)[1].name, "y.npy");
    auto member = extractZipEntry(bytes, (*entries)[1], "deflated.npz");
    ASSERT_TRUE(member.ok()) << member.error().userMessage();
    EXPECT_EQ(member->size(), 160u);
}

} // namespace
} // namespace bitlens::io
