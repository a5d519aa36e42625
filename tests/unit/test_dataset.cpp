// Data set readers: IDX (plain and gzipped, generated here), image folders (tests/data/images,
// written by tests/data/npy/make_npy_golden.py), .npy/.npz through loadDataset, the checks a
// user relies on (label counts, NaN, limits), and the real Fashion-MNIST test set when the
// Debian package dataset-fashion-mnist is installed.

#include "io/dataset.h"

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

const std::string kDataDir = BITLENS_TEST_DATA;
const std::string kImagesDir = kDataDir + "/images";
const std::string kFashionMnist = "/usr/share/datasets/fashion-mnist";

// image_folder.cpp compiles stb_image in when its header is there (Debian libstb-dev); the
// same include path decides here whether the image-folder tests can run.
#if __has_include(<stb/stb_image.h>)
constexpr bool kHaveImageDecoder = true;
#else
constexpr bool kHaveImageDecoder = false;
#endif
#define SKIP_WITHOUT_IMAGE_DECODER()                                                             \
    if (!kHaveImageDecoder)                                                                      \
    GTEST_SKIP() << "built without stb_image (Debian libstb-dev)"

using Bytes = std::vector<std::uint8_t>;

/// A fresh folder per test, removed afterwards.
struct TempDir : bitlens::test::TempDir {
    TempDir() : bitlens::test::TempDir("bitlens_data") {}
};

void writeBytes(const std::string& path, const Bytes& bytes)
{
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
}

Bytes readBytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void putBe32(Bytes& b, std::uint32_t v)
{
    for (int shift = 24; shift >= 0; shift -= 8)
        b.push_back(static_cast<std::uint8_t>(v >> shift));
}

/// An IDX file: magic 00 00 <type> <dims>, big-endian dims, then `data` as given.
Bytes makeIdx(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& data)
{
    Bytes b = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
    for (std::uint32_t d : dims)
        putBe32(b, d);
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

/// Big-endian bytes of each value, `width` bytes wide.
template <typename T>
Bytes bigEndian(const std::vector<T>& values)
{
    Bytes b;
    for (T v : values) {
        std::uint8_t raw[sizeof(T)];
        std::memcpy(raw, &v, sizeof(T));
        for (std::size_t i = sizeof(T); i-- > 0;)
            b.push_back(raw[i]);
    }
    return b;
}

/// gzip-compresses `data` with zlib (windowBits 31 = gzip wrapper).
Bytes gzip(const Bytes& data)
{
    z_stream zs{};
    EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
    Bytes out(deflateBound(&zs, static_cast<uLong>(data.size())) + 32);
    zs.next_in = const_cast<Bytef*>(data.data());
    zs.avail_in = static_cast<uInt>(data.size());
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

/// Three 2x3 uint8 images with pixel values 0, 10, ..., 170.
Bytes threeImages()
{
    Bytes pixels;
    for (int i = 0; i < 18; ++i)
        pixels.push_back(static_cast<std::uint8_t>(10 * i));
    return makeIdx(0x08, {3, 2, 3}, pixels);
}

Bytes labelsIdx(const Bytes& labels)
{
    return makeIdx(0x08, {static_cast<std::uint32_t>(labels.size())}, labels);
}

/// An 8-bit PNG (colour type 0 grey or 2 RGB) with every byte `value`.
Bytes makePng(int width, int height, int channels, std::uint8_t value)
{
    Bytes raw;
    for (int y = 0; y < height; ++y) {
        raw.push_back(0);  // filter: none
        raw.insert(raw.end(), static_cast<std::size_t>(width * channels), value);
    }
    uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
    Bytes z(zlen);
    EXPECT_EQ(compress(z.data(), &zlen, raw.data(), static_cast<uLong>(raw.size())), Z_OK);
    z.resize(zlen);
    Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    auto chunk = [&](const char* kind, const Bytes& data) {
        putBe32(png, static_cast<std::uint32_t>(data.size()));
        Bytes body(kind, kind + 4);
        body.insert(body.end(), data.begin(), data.end());
        png.insert(png.end(), body.begin(), body.end());
        putBe32(png, static_cast<std::uint32_t>(crc32(0, body.data(),
                                                      static_cast<uInt>(body.size()))));
    };
    Bytes ihdr;
    putBe32(ihdr, static_cast<std::uint32_t>(width));
    putBe32(ihdr, static_cast<std::uint32_t>(height));
    ihdr.insert(ihdr.end(), {8, static_cast<std::uint8_t>(channels == 3 ? 2 : 0), 0, 0, 0});
    chunk("IHDR", ihdr);
    chunk("IDAT", z);
    chunk("IEND", {});
    return png;
}

/// Appends little-endian fields, each `width` bytes wide.
void putLe(Bytes& b, int width, std::initializer_list<std::uint32_t> values)
{
    for (std::uint32_t v : values)
        for (int i = 0; i < width; ++i)
            b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

/// A zip of stored members, as numpy's savez writes them (sizes in the central directory).
/// With `zip64`, sizes and offsets live in zip64 extra fields and a zip64 end record, as for
/// archives over 4 GiB or 65535 members.
Bytes makeStoredZip(const std::vector<std::pair<std::string, Bytes>>& members,
                    bool zip64 = false)
{
    constexpr std::uint32_t kSaturated = 0xffffffff;
    Bytes zip;
    Bytes central;
    for (const auto& [name, data] : members) {
        const auto offset = static_cast<std::uint32_t>(zip.size());
        const auto crc =
            static_cast<std::uint32_t>(crc32(0, data.data(), static_cast<uInt>(data.size())));
        const auto size = static_cast<std::uint32_t>(data.size());
        const auto nameLen = static_cast<std::uint32_t>(name.size());
        // Local header: signature, version, flags, method, time, date | crc, sizes | lengths.
        putLe(zip, 4, {0x04034b50});
        putLe(zip, 2, {20, 0, 0, 0, 0});
        putLe(zip, 4, {crc, size, size});
        putLe(zip, 2, {nameLen, 0});
        zip.insert(zip.end(), name.begin(), name.end());
        zip.insert(zip.end(), data.begin(), data.end());
        // Central entry: signature, versions, flags, method, time, date | crc, sizes |
        // name, extra, comment lengths, disk, internal attributes | external, offset.
        putLe(central, 4, {0x02014b50});
        putLe(central, 2, {45, 45, 0, 0, 0, 0});
        if (zip64)
            putLe(central, 4, {crc, kSaturated, kSaturated});
        else
            putLe(central, 4, {crc, size, size});
        putLe(central, 2, {nameLen, zip64 ? 28u : 0u, 0, 0, 0});
        putLe(central, 4, {0, zip64 ? kSaturated : offset});
        central.insert(central.end(), name.begin(), name.end());
        if (zip64) {  // extra 0x0001: uncompressed size, compressed size, local header offset
            putLe(central, 2, {0x0001, 24});
            putLe(central, 4, {size, 0, size, 0, offset, 0});
        }
    }
    const auto cdOffset = static_cast<std::uint32_t>(zip.size());
    const auto cdSize = static_cast<std::uint32_t>(central.size());
    const auto count = static_cast<std::uint32_t>(members.size());
    zip.insert(zip.end(), central.begin(), central.end());
    if (zip64) {
        const auto recordOffset = static_cast<std::uint32_t>(zip.size());
        // Zip64 end record: signature, record size (8), versions, disks | counts, size, offset.
        putLe(zip, 4, {0x06064b50, 44, 0});
        putLe(zip, 2, {45, 45});
        putLe(zip, 4, {0, 0, count, 0, count, 0, cdSize, 0, cdOffset, 0});
        // Locator: signature, disk, record offset (8), total disks.
        putLe(zip, 4, {0x07064b50, 0, recordOffset, 0, 1});
    }
    putLe(zip, 4, {0x06054b50});
    putLe(zip, 2, {0, 0, zip64 ? 0xffffu : count, zip64 ? 0xffffu : count});
    putLe(zip, 4, {zip64 ? kSaturated : cdSize, zip64 ? kSaturated : cdOffset});
    putLe(zip, 2, {0});
    return zip;
}

/// The .npy bytes of `t` (through writeNpy).
Bytes npyBytes(const at::Tensor& t, const TempDir& dir)
{
    const std::string path = dir.file("tmp_member.npy");
    EXPECT_TRUE(writeNpy(t, path).ok());
    Bytes b = readBytes(path);
    fs::remove(path);
    return b;
}

std::string relative(std::string message, const TempDir& dir)
{
    for (auto at = message.find(dir.path()); at != std::string::npos;
         at = message.find(dir.path()))
        message.replace(at, dir.path().size(), "<dir>");
    return message;
}

// ---- IDX -----------------------------------------------------------------------------------

TEST(IdxRead, Uint8ImagesBecomeFloatNchwInZeroToOne)
{
    TempDir dir;
    writeBytes(dir.file("images-idx3-ubyte"), threeImages());
    auto images = readIdx(dir.file("images-idx3-ubyte"));
    ASSERT_TRUE(images.ok()) << images.error().userMessage();
    EXPECT_EQ(images->sizes(), at::IntArrayRef({3, 1, 2, 3}));
    EXPECT_EQ(images->scalar_type(), at::kFloat);
    EXPECT_TRUE(images->is_contiguous());
    for (int i = 0; i < 18; ++i)
        EXPECT_EQ(images->view({-1})[i].item<float>(), static_cast<float>(10 * i) / 255.0f);
}

TEST(IdxRead, LabelArraysBecomeInt64)
{
    TempDir dir;
    writeBytes(dir.file("labels"), labelsIdx({9, 0, 255}));
    auto labels = readIdx(dir.file("labels"));
    ASSERT_TRUE(labels.ok()) << labels.error().userMessage();
    EXPECT_EQ(labels->scalar_type(), at::kLong);
    EXPECT_TRUE(at::equal(*labels, at::tensor(std::vector<std::int64_t>{9, 0, 255})));

    writeBytes(dir.file("labels32"), makeIdx(0x0C, {2}, bigEndian<std::int32_t>({-7, 70000})));
    auto wide = readIdx(dir.file("labels32"));
    ASSERT_TRUE(wide.ok()) << wide.error().userMessage();
    EXPECT_TRUE(at::equal(*wide, at::tensor(std::vector<std::int64_t>{-7, 70000})));
}

TEST(IdxRead, EveryElementTypeIsBigEndianAndKeepsItsValue)
{
    TempDir dir;
    struct Case {
        const char* name;
        Bytes file;
        std::vector<float> expected;
    };
    const std::vector<Case> cases = {
        {"int8", makeIdx(0x09, {2, 2}, {0x80, 0xff, 0x00, 0x7f}), {-128, -1, 0, 127}},
        {"int16", makeIdx(0x0B, {2, 2}, bigEndian<std::int16_t>({-32768, -2, 258, 32767})),
         {-32768, -2, 258, 32767}},
        {"int32", makeIdx(0x0C, {2, 2}, bigEndian<std::int32_t>({-1, 66051, 0, 1 << 24})),
         {-1, 66051, 0, 16777216}},
        {"float32", makeIdx(0x0D, {1, 4}, bigEndian<float>({1.5f, -0.25f, 3e38f, 0.0f})),
         {1.5f, -0.25f, 3e38f, 0.0f}},
        {"float64", makeIdx(0x0E, {4, 1}, bigEndian<double>({0.5, -2.0, 1e-3, 7.0})),
         {0.5f, -2.0f, static_cast<float>(1e-3), 7.0f}},
        // uint8 arrays of two or more dimensions are pixels: scaled to [0, 1].
        {"uint8", makeIdx(0x08, {2, 2}, {0, 51, 255, 1}), {0.0f, 0.2f, 1.0f, 1.0f / 255.0f}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        writeBytes(dir.file(c.name), c.file);
        auto t = readIdx(dir.file(c.name));
        ASSERT_TRUE(t.ok()) << t.error().userMessage();
        EXPECT_EQ(t->scalar_type(), at::kFloat);
        EXPECT_EQ(t->dim(), 2);
        EXPECT_TRUE(at::equal(t->reshape({-1}), at::tensor(c.expected)))
            << *t;
    }
}

TEST(IdxRead, GzippedFilesReadTheSame)
{
    TempDir dir;
    writeBytes(dir.file("plain-images-idx3-ubyte"), threeImages());
    writeBytes(dir.file("zipped-images-idx3-ubyte.gz"), gzip(threeImages()));
    auto plain = readIdx(dir.file("plain-images-idx3-ubyte"));
    auto zipped = readIdx(dir.file("zipped-images-idx3-ubyte.gz"));
    ASSERT_TRUE(plain.ok() && zipped.ok());
    EXPECT_TRUE(at::equal(*plain, *zipped));

    // gzip(1) decodes concatenated members as one stream: so do we.
    const Bytes whole = labelsIdx({1, 2, 3, 4});
    Bytes twoMembers = gzip(Bytes(whole.begin(), whole.begin() + 7));
    const Bytes second = gzip(Bytes(whole.begin() + 7, whole.end()));
    twoMembers.insert(twoMembers.end(), second.begin(), second.end());
    writeBytes(dir.file("two.gz"), twoMembers);
    auto labels = readIdx(dir.file("two.gz"));
    ASSERT_TRUE(labels.ok()) << labels.error().userMessage();
    EXPECT_TRUE(at::equal(*labels, at::tensor(std::vector<std::int64_t>{1, 2, 3, 4})));
}

TEST(IdxRead, ZeroSamplesIsAnEmptyTensor)
{
    TempDir dir;
    writeBytes(dir.file("empty"), makeIdx(0x08, {0, 28, 28}, {}));
    auto t = readIdx(dir.file("empty"));
    ASSERT_TRUE(t.ok()) << t.error().userMessage();
    EXPECT_EQ(t->sizes(), at::IntArrayRef({0, 1, 28, 28}));
}

/// IDX defects; each must give BadInput naming the file, never a crash.
enum class IdxDefect {
    Empty,
    TruncatedHeader,
    BadMagic,
    UnknownType,
    ZeroDimensions,
    DimensionsPastEnd,
    DataPastEnd,
    HugeDimensions,
    TrailingBytes,
    GzipTruncated,
    GzipCorrupt,
    GzipTrailingGarbage,
    GzipOfBadMagic,
};

const char* idxDefectName(IdxDefect d)
{
    switch (d) {
    case IdxDefect::Empty: return "Empty";
    case IdxDefect::TruncatedHeader: return "TruncatedHeader";
    case IdxDefect::BadMagic: return "BadMagic";
    case IdxDefect::UnknownType: return "UnknownType";
    case IdxDefect::ZeroDimensions: return "ZeroDimensions";
    case IdxDefect::DimensionsPastEnd: return "DimensionsPastEnd";
    case IdxDefect::DataPastEnd: return "DataPastEnd";
    case IdxDefect::HugeDimensions: return "HugeDimensions";
    case IdxDefect::TrailingBytes: return "TrailingBytes";
    case IdxDefect::GzipTruncated: return "GzipTruncated";
    case IdxDefect::GzipCorrupt: return "GzipCorrupt";
    case IdxDefect::GzipTrailingGarbage: return "GzipTrailingGarbage";
    case IdxDefect::GzipOfBadMagic: return "GzipOfBadMagic";
    }
    return "?";
}

/// A part of the message each defect must produce: proof that it failed for that reason.
const char* expectedIdxReason(IdxDefect d)
{
    switch (d) {
    case IdxDefect::Empty: return "file is too short for an IDX header (0 bytes)";
    case IdxDefect::TruncatedHeader: return "file is too short for an IDX header (3 bytes)";
    case IdxDefect::BadMagic: return "not an IDX file: bad magic 0x1A000803";
    case IdxDefect::UnknownType: return "unknown IDX element type 0x0A";
    case IdxDefect::ZeroDimensions: return "IDX header declares 0 dimensions";
    case IdxDefect::DimensionsPastEnd: return "declares 3 dimensions but the file ends after 8";
    case IdxDefect::DataPastEnd: return "need 18 bytes of data but only 17 follow the header";
    case IdxDefect::HugeDimensions: return "IDX dimensions are too large";
    case IdxDefect::TrailingBytes: return "1 byte follows the 18 bytes";
    case IdxDefect::GzipTruncated: return "gzip data ends early";
    case IdxDefect::GzipCorrupt: return "gzip data is corrupt";
    case IdxDefect::GzipTrailingGarbage: return "gzip data has 1 unexpected byte after";
    case IdxDefect::GzipOfBadMagic: return "bad magic 0x00070803";
    }
    return "?";
}

Bytes corruptIdx(IdxDefect d)
{
    Bytes b = threeImages();  // 16-byte header + 18 bytes
    switch (d) {
    case IdxDefect::Empty: b.clear(); break;
    case IdxDefect::TruncatedHeader: b.resize(3); break;
    case IdxDefect::BadMagic: b[0] = 0x1a; break;
    case IdxDefect::UnknownType: b[2] = 0x0A; break;
    case IdxDefect::ZeroDimensions: b[3] = 0; break;
    case IdxDefect::DimensionsPastEnd: b.resize(8); break;
    case IdxDefect::DataPastEnd: b.resize(b.size() - 1); break;
    case IdxDefect::HugeDimensions:
        b = makeIdx(0x0E, {0xffffffff, 0xffffffff, 0xffffffff}, {1, 2, 3});
        break;
    case IdxDefect::TrailingBytes: b.push_back(0); break;
    case IdxDefect::GzipTruncated:
        b = gzip(b);
        b.resize(b.size() - 9);  // the 8-byte trailer and the last deflate byte
        break;
    case IdxDefect::GzipCorrupt: {
        b = gzip(b);
        for (std::size_t i = 10; i < 20 && i < b.size(); ++i)
            b[i] = 0xff;
        break;
    }
    case IdxDefect::GzipTrailingGarbage:
        b = gzip(b);
        b.push_back('!');
        break;
    case IdxDefect::GzipOfBadMagic:
        b[1] = 7;
        b = gzip(b);
        break;
    }
    return b;
}

class IdxCorrupt : public testing::TestWithParam<IdxDefect> {};

TEST_P(IdxCorrupt, GivesBadInputNamingTheFile)
{
    TempDir dir;
    const std::string path = dir.file(std::string(idxDefectName(GetParam())) + "-idx3-ubyte");
    writeBytes(path, corruptIdx(GetParam()));
    auto result = readIdx(path);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().code, ErrorCode::BadInput) << result.error().userMessage();
    EXPECT_EQ(result.error().path, path);
    EXPECT_NE(result.error().userMessage().find(path), std::string::npos);
    EXPECT_NE(result.error().message.find(expectedIdxReason(GetParam())), std::string::npos)
        << result.error().userMessage();
}

INSTANTIATE_TEST_SUITE_P(
    Idx, IdxCorrupt,
    testing::Values(IdxDefect::Empty, IdxDefect::TruncatedHeader, IdxDefect::BadMagic,
                    IdxDefect::UnknownType, IdxDefect::ZeroDimensions,
                    IdxDefect::DimensionsPastEnd, IdxDefect::DataPastEnd,
                    IdxDefect::HugeDimensions, IdxDefect::TrailingBytes,
                    IdxDefect::GzipTruncated, IdxDefect::GzipCorrupt,
                    IdxDefect::GzipTrailingGarbage, IdxDefect::GzipOfBadMagic),
    [](const testing::TestParamInfo<IdxDefect>& p) { return idxDefectName(p.param); });

TEST(IdxCorruptMessages, SayWhatIsWrongAndWhere)
{
    TempDir dir;
    auto message = [&](IdxDefect d) {
        const std::string path = dir.file("f");
        writeBytes(path, corruptIdx(d));
        auto r = readIdx(path);
        return r.ok() ? std::string("ok") : relative(r.error().userMessage(), dir);
    };
    EXPECT_EQ(message(IdxDefect::BadMagic),
              "error: <dir>/f: not an IDX file: bad magic 0x1A000803 (expected 0x000008DD to "
              "0x00000EDD) (at byte 0)");
    EXPECT_EQ(message(IdxDefect::DimensionsPastEnd),
              "error: <dir>/f: IDX header declares 3 dimensions but the file ends after 8 bytes "
              "(at byte 8)");
    EXPECT_EQ(message(IdxDefect::DataPastEnd),
              "error: <dir>/f: IDX dimensions 3 x 2 x 3 of uint8 need 18 bytes of data but only "
              "17 follow the header (at byte 16)");
    EXPECT_EQ(message(IdxDefect::TrailingBytes),
              "error: <dir>/f: 1 byte follows the 18 bytes that IDX dimensions 3 x 2 x 3 of "
              "uint8 describe (at byte 34)");
    EXPECT_EQ(message(IdxDefect::GzipOfBadMagic),
              "error: <dir>/f: not an IDX file: bad magic 0x00070803 (expected 0x000008DD to "
              "0x00000EDD) (at byte 0 of the decompressed data)");
    EXPECT_EQ(message(IdxDefect::GzipTruncated),
              "error: <dir>/f: gzip data ends early (truncated file?) (at byte " +
                  std::to_string(gzip(threeImages()).size() - 9) + ")");
}

TEST(IdxCorrupt, NeverCrashesOnAnyTruncationOrByteFlip)
{
    TempDir dir;
    const std::string path = dir.file("fuzz-idx3-ubyte");
    for (const Bytes& good : {threeImages(), gzip(threeImages())}) {
        for (std::size_t n = 0; n < good.size(); ++n) {
            Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
            writeBytes(path, cut);
            auto r = readIdx(path);
            EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes";
            Bytes flipped = good;
            flipped[n] ^= 0xff;
            writeBytes(path, flipped);
            auto f = readIdx(path);
            if (!f.ok()) {
                EXPECT_EQ(f.error().code, ErrorCode::BadInput) << f.error().userMessage();
            }
        }
    }
}

// ---- image folders -------------------------------------------------------------------------

TEST(ImageFolderRead, ClassesAreSortedSubfoldersAndPixelsAreExact)
{
    SKIP_WITHOUT_IMAGE_DECODER();
    auto data = readImageFolder(kImagesDir);
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    EXPECT_EQ(data->kind, "image-folder");
    EXPECT_EQ(data->classNames, (std::vector<std::string>{"circle", "square"}));
    // circle/a.png (RGB), circle/b.png (grey), square/c.jpg (grey), square/d.png (RGBA);
    // notes.txt is skipped. The first image is RGB, so channels = 3.
    ASSERT_EQ(data->inputs.sizes(), at::IntArrayRef({4, 3, 8, 8}));
    EXPECT_EQ(data->inputs.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(data->labels, at::tensor(std::vector<std::int64_t>{0, 0, 1, 1})));
    const at::Tensor& x = data->inputs;
    // a.png pixel (x=3, y=5) is (3 * 32, 5 * 32, 8 * 16).
    EXPECT_EQ(x[0][0][5][3].item<float>(), 96.0f / 255.0f);
    EXPECT_EQ(x[0][1][5][3].item<float>(), 160.0f / 255.0f);
    EXPECT_EQ(x[0][2][5][3].item<float>(), 128.0f / 255.0f);
    // b.png is grey x * 16 + y, copied into all three channels.
    for (int c = 0; c < 3; ++c)
        EXPECT_EQ(x[1][c][6][7].item<float>(), 118.0f / 255.0f);
    // c.jpg is a flat grey 144 block.
    EXPECT_TRUE(at::equal(x[2], at::full({3, 8, 8}, 144.0f / 255.0f)));
    // d.png is red with alpha 128: the alpha channel is dropped, colour kept.
    EXPECT_TRUE(at::equal(x[3][0], at::ones({8, 8})));
    EXPECT_TRUE(at::equal(x[3][1], at::zeros({8, 8})));
}

TEST(ImageFolderRead, GreyscaleOnRequest)
{
    SKIP_WITHOUT_IMAGE_DECODER();
    auto data = readImageFolder(kImagesDir, 1);
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    ASSERT_EQ(data->inputs.sizes(), at::IntArrayRef({4, 1, 8, 8}));
    EXPECT_EQ(data->inputs[1][0][6][7].item<float>(), 118.0f / 255.0f);
    EXPECT_TRUE(at::equal(data->inputs[2][0], at::full({8, 8}, 144.0f / 255.0f)));
    EXPECT_EQ(data->inputs[0][0][0][0].item<float>(), 0.0f);  // black stays black
}

TEST(ImageFolderRead, OddSizedImageNamesTheFileAndBothSizes)
{
    SKIP_WITHOUT_IMAGE_DECODER();
    TempDir dir;
    writeBytes(dir.file("cats/1.png"), makePng(4, 3, 3, 10));
    writeBytes(dir.file("dogs/2.png"), makePng(4, 3, 1, 20));
    writeBytes(dir.file("dogs/3.png"), makePng(5, 3, 3, 30));
    auto data = readImageFolder(dir.path());
    ASSERT_FALSE(data.ok());
    EXPECT_EQ(data.error().code, ErrorCode::BadInput);
    EXPECT_EQ(relative(data.error().userMessage(), dir),
              "error: <dir>/dogs/3.png: image is 5x3 pixels but <dir>/cats/1.png is 4x3; all "
              "images must share one size");
}

TEST(ImageFolderRead, BrokenImageIsNamed)
{
    SKIP_WITHOUT_IMAGE_DECODER();
    TempDir dir;
    writeBytes(dir.file("a/good.png"), makePng(2, 2, 1, 0));
    Bytes broken = makePng(2, 2, 1, 0);
    broken.resize(broken.size() - 20);
    writeBytes(dir.file("a/truncated.png"), broken);
    writeBytes(dir.file("b/noise.jpg"), Bytes(64, 0x5a));
    for (const char* bad : {"a/truncated.png", "b/noise.jpg"}) {
        SCOPED_TRACE(bad);
        auto data = readImageFolder(dir.path());
        ASSERT_FALSE(data.ok());
        EXPECT_EQ(data.error().code, ErrorCode::BadInput);
        EXPECT_EQ(data.error().path, dir.file(bad));
        EXPECT_TRUE(data.error().message.starts_with("cannot ")) << data.error().message;
        fs::remove(dir.file(bad));
    }
    EXPECT_FALSE(readImageFolder(dir.path()).ok());  // b/ is now an empty class
    fs::remove_all(dir.file("b"));
    EXPECT_TRUE(readImageFolder(dir.path()).ok());
}

TEST(ImageFolderRead, PngChunkLongerThanTheFileIsRefusedBeforeDecoding)
{
    SKIP_WITHOUT_IMAGE_DECODER();
    // fuzz_image's findings: 125 and 188 bytes whose chunk lengths run past the end of the file
    // made stb grow a buffer towards them for seconds.
    for (const char* name : {"image-timeout-png-ffffffff-chunk.png",
                             "image-slow-png-ffffffff-chunk.png"}) {
        SCOPED_TRACE(name);
        TempDir dir;
        fs::create_directories(dir.file("a"));
        fs::copy_file(std::string(BITLENS_TEST_DATA) + "/../fuzz/findings/" + name,
                      dir.file("a/x.png"));
        writeBytes(dir.file("b/good.png"), makePng(8, 8, 1, 0));
        auto data = readImageFolder(dir.path());
        ASSERT_FALSE(data.ok());
        EXPECT_EQ(data.error().code, ErrorCode::BadInput);
        EXPECT_EQ(data.error().path, dir.file("a/x.png"));
        EXPECT_NE(data.error().message.find("PNG chunk"), std::string::npos)
            << data.error().message;
    }
    // The chunk walk accepts what it should: a valid PNG with its chunks intact.
    TempDir ok;
    writeBytes(ok.file("a/one.png"), makePng(3, 5, 3, 7));
    EXPECT_TRUE(readImageFolder(ok.path()).ok());
}

TEST(ImageFolderRead, JpegScanWithAnUndefinedHuffmanTableIsRefused)
{
    SKIP_WITHOUT_IMAGE_DECODER();
    // fuzz_image's finding: a scan names AC table 0, which no DHT defines; stb 2.27 decoded it
    // with uninitialised tables and indexed its value array at -438.
    TempDir dir;
    fs::create_directories(dir.file("a"));
    fs::copy_file(std::string(BITLENS_TEST_DATA) +
                      "/../fuzz/findings/image-jpeg-undefined-huffman-table.jpg",
                  dir.file("a/x.jpg"));
    writeBytes(dir.file("b/good.png"), makePng(8, 8, 1, 0));
    auto data = readImageFolder(dir.path());
    ASSERT_FALSE(data.ok());
    EXPECT_EQ(data.error().path, dir.file("a/x.jpg"));
    EXPECT_NE(data.error().message.find("AC Huffman table 0, which no DHT segment defines"),
              std::string::npos)
        << data.error().message;
}

TEST(ImageFolderRead, FolderShapesThatCannotBeADataSet)
{
    SKIP_WITHOUT_IMAGE_DECODER();
    TempDir dir;
    auto none = readImageFolder(dir.path());
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(relative(none.error().userMessage(), dir),
              "error: <dir>: has no class subfolders (expected one folder of PNG or JPEG images "
              "per class)");
    fs::create_directories(dir.file("empty"));
    auto empty = readImageFolder(dir.path());
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(relative(empty.error().userMessage(), dir),
              "error: <dir>/empty: class folder holds no PNG or JPEG images");
    auto channels = readImageFolder(kImagesDir, 4);
    ASSERT_FALSE(channels.ok());
    EXPECT_EQ(channels.error().code, ErrorCode::Usage);
}

// ---- loadDataset ---------------------------------------------------------------------------

/// A folder of IDX files: train (3 samples, plain) and t10k (2 samples, gzipped).
void writeIdxFolder(const TempDir& dir)
{
    writeBytes(dir.file("train-images-idx3-ubyte"), threeImages());
    writeBytes(dir.file("train-labels-idx1-ubyte"), labelsIdx({1, 2, 3}));
    Bytes two = makeIdx(0x08, {2, 2, 3}, Bytes(12, 255));
    writeBytes(dir.file("t10k-images-idx3-ubyte.gz"), gzip(two));
    writeBytes(dir.file("t10k-labels-idx1-ubyte.gz"), gzip(labelsIdx({7, 8})));
}

TEST(DatasetLoad, IdxFolderPicksFilesBySplit)
{
    TempDir dir;
    writeIdxFolder(dir);
    for (const char* split : {"train", "calib"}) {
        SCOPED_TRACE(split);
        auto data = loadDataset(dir.path(), split);
        ASSERT_TRUE(data.ok()) << data.error().userMessage();
        EXPECT_EQ(data->kind, "idx");
        EXPECT_EQ(data->inputs.sizes(), at::IntArrayRef({3, 1, 2, 3}));
        EXPECT_TRUE(at::equal(data->labels, at::tensor(std::vector<std::int64_t>{1, 2, 3})));
    }
    for (const char* split : {"test", "eval"}) {
        SCOPED_TRACE(split);
        auto data = loadDataset(dir.path(), split);
        ASSERT_TRUE(data.ok()) << data.error().userMessage();
        EXPECT_EQ(data->inputs.sizes(), at::IntArrayRef({2, 1, 2, 3}));
        EXPECT_TRUE(at::equal(data->inputs, at::ones({2, 1, 2, 3})));
        EXPECT_TRUE(at::equal(data->labels, at::tensor(std::vector<std::int64_t>{7, 8})));
    }
    auto bogus = loadDataset(dir.path(), "validation");
    ASSERT_FALSE(bogus.ok());
    EXPECT_EQ(bogus.error().code, ErrorCode::Usage);
    EXPECT_EQ(bogus.error().userMessage(),
              "error: unknown data split 'validation' (expected train, calib, test or eval)");
}

TEST(DatasetLoad, TestPrefixAlsoNamesTheTestSplit)
{
    TempDir dir;
    writeBytes(dir.file("test-images-idx3-ubyte"), threeImages());
    writeBytes(dir.file("test-labels-idx1-ubyte"), labelsIdx({0, 1, 0}));
    auto data = loadDataset(dir.path(), "test");
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    EXPECT_EQ(data->size(), 3);
    auto train = loadDataset(dir.path(), "train");
    ASSERT_FALSE(train.ok());
    EXPECT_EQ(relative(train.error().userMessage(), dir),
              "error: <dir>: has no train-images* file for split 'train'");
}

TEST(DatasetLoad, ImagesFileFindsItsLabelsBeside)
{
    TempDir dir;
    writeIdxFolder(dir);
    auto data = loadDataset(dir.file("t10k-images-idx3-ubyte.gz"));
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    EXPECT_EQ(data->path, dir.file("t10k-images-idx3-ubyte.gz"));
    EXPECT_TRUE(at::equal(data->labels, at::tensor(std::vector<std::int64_t>{7, 8})));

    writeBytes(dir.file("digits-images.idx"), threeImages());
    writeBytes(dir.file("digits-labels.idx"), labelsIdx({4, 5, 6}));
    auto renamed = loadDataset(dir.file("digits-images.idx"));
    ASSERT_TRUE(renamed.ok()) << renamed.error().userMessage();
    EXPECT_TRUE(at::equal(renamed->labels, at::tensor(std::vector<std::int64_t>{4, 5, 6})));

    fs::remove(dir.file("train-labels-idx1-ubyte"));
    auto unlabelled = loadDataset(dir.file("train-images-idx3-ubyte"));
    ASSERT_TRUE(unlabelled.ok()) << unlabelled.error().userMessage();
    EXPECT_FALSE(unlabelled->labels.defined());
    EXPECT_EQ(summarize(*unlabelled).classes, 0);
}

TEST(DatasetLoad, LabelCountMismatchNamesBothFiles)
{
    TempDir dir;
    writeBytes(dir.file("train-images-idx3-ubyte"), threeImages());
    writeBytes(dir.file("train-labels-idx1-ubyte"), labelsIdx({1, 2}));
    auto data = loadDataset(dir.path(), "train");
    ASSERT_FALSE(data.ok());
    EXPECT_EQ(data.error().code, ErrorCode::BadInput);
    EXPECT_EQ(relative(data.error().userMessage(), dir),
              "error: <dir>/train-images-idx3-ubyte: has 3 samples but labels file "
              "<dir>/train-labels-idx1-ubyte has 2 labels");

    writeBytes(dir.file("mismatch.npz"),
               makeStoredZip({{"x.npy", npyBytes(at::zeros({4, 2}), dir)},
                              {"y.npy", npyBytes(at::zeros({3}, at::kLong), dir)}}));
    auto npz = loadDataset(dir.file("mismatch.npz"));
    ASSERT_FALSE(npz.ok());
    EXPECT_EQ(relative(npz.error().userMessage(), dir),
              "error: <dir>/mismatch.npz: array 'x' has 4 samples but 'y' has 3 labels");
}

TEST(DatasetLoad, NanOrInfInInputsIsRejectedWithTheSample)
{
    TempDir dir;
    at::Tensor x = at::rand({20, 3});
    x[17][1] = std::numeric_limits<float>::quiet_NaN();
    ASSERT_TRUE(writeNpy(x, dir.file("calib.npy")).ok());
    auto nan = loadDataset(dir.file("calib.npy"));
    ASSERT_FALSE(nan.ok());
    EXPECT_EQ(nan.error().code, ErrorCode::BadInput);
    EXPECT_EQ(relative(nan.error().userMessage(), dir),
              "error: <dir>/calib.npy: contains NaN at sample 17");

    x[17][1] = 0.5f;
    x[4][0] = -std::numeric_limits<float>::infinity();
    ASSERT_TRUE(writeNpy(x.to(at::kDouble), dir.file("calib.npy")).ok());
    auto inf = loadDataset(dir.file("calib.npy"));
    ASSERT_FALSE(inf.ok());
    EXPECT_EQ(relative(inf.error().userMessage(), dir),
              "error: <dir>/calib.npy: contains Inf at sample 4");

    // Samples past the limit are not the user's concern.
    auto limited = loadDataset(dir.file("calib.npy"), "test", 4);
    ASSERT_TRUE(limited.ok()) << limited.error().userMessage();
    EXPECT_EQ(limited->size(), 4);
}

TEST(DatasetLoad, NpyKeepsNumericValuesAsFloat32)
{
    TempDir dir;
    const at::Tensor bytes = at::tensor(std::vector<std::uint8_t>{0, 7, 255, 128}).reshape({2, 2});
    ASSERT_TRUE(writeNpy(bytes, dir.file("u8.npy")).ok());
    auto data = loadDataset(dir.file("u8.npy"));
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    EXPECT_EQ(data->kind, "npy");
    EXPECT_FALSE(data->labels.defined());
    EXPECT_EQ(data->inputs.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(data->inputs, bytes.to(at::kFloat)));

    auto scalar = loadDataset(kDataDir + "/npy/scalar_f8.npy");
    ASSERT_FALSE(scalar.ok());
    EXPECT_EQ(scalar.error().code, ErrorCode::BadInput);
}

TEST(DatasetLoad, NpzInputsAndLabelsByName)
{
    const at::Tensor x = (at::arange(16, at::kFloat) / 8).reshape({4, 1, 2, 2});
    const at::Tensor y = at::tensor(std::vector<std::int64_t>{0, 1, 2, 1});
    for (const char* name : {"stored.npz", "deflated.npz"}) {
        SCOPED_TRACE(name);
        auto data = loadDataset(kDataDir + "/npy/" + name);
        ASSERT_TRUE(data.ok()) << data.error().userMessage();
        EXPECT_EQ(data->kind, "npz");
        EXPECT_TRUE(at::equal(data->inputs, x));
        EXPECT_TRUE(at::equal(data->labels, y));
        const DatasetSummary summary = summarize(*data);
        EXPECT_EQ(summary.samples, 4);
        EXPECT_EQ(summary.sampleShape, (std::vector<std::int64_t>{1, 2, 2}));
        EXPECT_EQ(summary.classes, 3);
        EXPECT_EQ(summary.kind, "npz");
    }
    auto named = loadDataset(kDataDir + "/npy/inputs_labels.npz");
    ASSERT_TRUE(named.ok()) << named.error().userMessage();
    EXPECT_TRUE(at::equal(named->inputs, x.narrow(0, 0, 3)));
    EXPECT_TRUE(at::equal(named->labels, y.narrow(0, 0, 3)));

    auto single = loadDataset(kDataDir + "/npy/single.npz");
    ASSERT_TRUE(single.ok()) << single.error().userMessage();
    EXPECT_EQ(single->inputs.scalar_type(), at::kFloat);
    EXPECT_FALSE(single->labels.defined());
}

TEST(DatasetLoad, NpzWithoutRecognisableArraysSaysWhichItHas)
{
    TempDir dir;
    writeBytes(dir.file("two.npz"),
               makeStoredZip({{"a.npy", npyBytes(at::zeros({2}), dir)},
                              {"b.npy", npyBytes(at::zeros({2}), dir)}}));
    auto data = loadDataset(dir.file("two.npz"));
    ASSERT_FALSE(data.ok());
    EXPECT_EQ(relative(data.error().userMessage(), dir),
              "error: <dir>/two.npz: holds arrays 'a', 'b'; expected 'x' or 'inputs' (and "
              "optionally 'y' or 'labels')");

    writeBytes(dir.file("fractional.npz"),
               makeStoredZip({{"x.npy", npyBytes(at::zeros({2, 2}), dir)},
                              {"y.npy", npyBytes(at::tensor({0.5, 1.0}), dir)}}));
    auto fractional = loadDataset(dir.file("fractional.npz"));
    ASSERT_FALSE(fractional.ok());
    EXPECT_EQ(relative(fractional.error().userMessage(), dir),
              "error: <dir>/fractional.npz: array 'y' must be whole numbers (class indices)");
}

TEST(NpyZip64, ReadsZip64EndRecordAndExtraFields)
{
    TempDir dir;
    const at::Tensor x = at::arange(6, at::kFloat).reshape({3, 2});
    const at::Tensor y = at::tensor(std::vector<std::int64_t>{2, 0, 1});
    writeBytes(dir.file("zip64.npz"), makeStoredZip({{"x.npy", npyBytes(x, dir)},
                                                     {"y.npy", npyBytes(y, dir)}},
                                                    /*zip64=*/true));
    auto arrays = readNpz(dir.file("zip64.npz"));
    ASSERT_TRUE(arrays.ok()) << arrays.error().userMessage();
    EXPECT_TRUE(at::equal(arrays->at("x"), x));
    EXPECT_TRUE(at::equal(arrays->at("y"), y));
}

TEST(DatasetLoad, LimitKeepsTheFirstSamplesInTheirOwnMemory)
{
    TempDir dir;
    writeIdxFolder(dir);
    auto data = loadDataset(dir.path(), "train", 2);
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    ASSERT_EQ(data->size(), 2);
    EXPECT_TRUE(at::equal(data->labels, at::tensor(std::vector<std::int64_t>{1, 2})));
    EXPECT_EQ(data->inputs.storage().nbytes(), 2u * 6u * sizeof(float));
    EXPECT_EQ(data->inputs[1][0][0][0].item<float>(), 60.0f / 255.0f);
    auto all = loadDataset(dir.path(), "train", 100);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->size(), 3);
    auto negative = loadDataset(dir.path(), "train", -1);
    ASSERT_FALSE(negative.ok());
    EXPECT_EQ(negative.error().code, ErrorCode::Usage);
}

TEST(DatasetLoad, ImageFolderThroughLoadDataset)
{
    SKIP_WITHOUT_IMAGE_DECODER();
    auto data = loadDataset(kImagesDir);
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    const DatasetSummary summary = summarize(*data);
    EXPECT_EQ(summary.kind, "image-folder");
    EXPECT_EQ(summary.samples, 4);
    EXPECT_EQ(summary.sampleShape, (std::vector<std::int64_t>{3, 8, 8}));
    EXPECT_EQ(summary.classes, 2);
}

TEST(DatasetLoad, ReportsProgressAndHonoursCancel)
{
    SKIP_WITHOUT_IMAGE_DECODER();
    std::vector<double> fractions;
    Progress progress([&](double f, const std::string&) { fractions.push_back(f); });
    auto data = loadDataset(kImagesDir, "test", 0, progress);
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    ASSERT_FALSE(fractions.empty());
    EXPECT_EQ(fractions.back(), 1.0);

    CancelToken cancelled;
    cancelled.cancel();
    auto early = loadDataset(kImagesDir, "test", 0, Progress::none(), cancelled);
    ASSERT_FALSE(early.ok());
    EXPECT_EQ(early.error().code, ErrorCode::Cancelled);

    // Cancelled while reading: after the first image.
    CancelToken token;
    Progress cancelling([&](double, const std::string&) { token.cancel(); });
    auto midway = loadDataset(kImagesDir, "test", 0, cancelling, token);
    ASSERT_FALSE(midway.ok());
    EXPECT_EQ(midway.error().code, ErrorCode::Cancelled);
}

TEST(DatasetLoad, MissingOrUnknownPaths)
{
    TempDir dir;
    auto missing = loadDataset(dir.file("nope"));
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(relative(missing.error().userMessage(), dir),
              "error: <dir>/nope: no such file or folder");
    writeBytes(dir.file("notes.csv"), Bytes{'a', ',', 'b', '\n'});
    auto unknown = loadDataset(dir.file("notes.csv"));
    ASSERT_FALSE(unknown.ok());
    EXPECT_EQ(unknown.error().code, ErrorCode::BadInput);
    EXPECT_EQ(unknown.error().path, dir.file("notes.csv"));
}

TEST(DatasetFashionMnist, RealTestSetHasTenThousandLabelledImages)
{
    if (!fs::exists(kFashionMnist + "/t10k-images-idx3-ubyte.gz"))
        GTEST_SKIP() << "Debian package dataset-fashion-mnist is not installed";
    auto data = loadDataset(kFashionMnist, "test");
    ASSERT_TRUE(data.ok()) << data.error().userMessage();
    EXPECT_EQ(data->kind, "idx");
    ASSERT_EQ(data->inputs.sizes(), at::IntArrayRef({10000, 1, 28, 28}));
    ASSERT_EQ(data->labels.sizes(), at::IntArrayRef({10000}));
    EXPECT_EQ(data->inputs.min().item<float>(), 0.0f);
    EXPECT_EQ(data->inputs.max().item<float>(), 1.0f);
    EXPECT_EQ(data->labels.min().item<std::int64_t>(), 0);
    EXPECT_EQ(data->labels.max().item<std::int64_t>(), 9);
    // The test set is balanced: 1000 images per class. Its first image is an ankle boot (9).
    EXPECT_TRUE(at::equal(at::bincount(data->labels), at::full({10}, 1000, at::kLong)));
    EXPECT_EQ(data->labels[0].item<std::int64_t>(), 9);
    const DatasetSummary summary = summarize(*data);
    EXPECT_EQ(summary.classes, 10);
    EXPECT_EQ(summary.sampleShape, (std::vector<std::int64_t>{1, 28, 28}));

    auto file = loadDataset(kFashionMnist + "/t10k-images-idx3-ubyte.gz", "test", 100);
    ASSERT_TRUE(file.ok()) << file.error().userMessage();
    EXPECT_EQ(file->size(), 100);
    EXPECT_TRUE(at::equal(file->labels, data->labels.narrow(0, 0, 100)));
}

} // namespace
} // namespace bitlens::io
