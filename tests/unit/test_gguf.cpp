// GGUF: a file written by gguf-py's GGUFWriter (tests/data/ggml/make_golden.py) read with every
// metadata type and tensor type, our writer read back by us and by gguf-py's GGUFReader (its
// dequantized tensors equal ours), and corrupt headers generated from an enum of defects.

#include "io/dataset.h"
#include "io/gguf.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "python_oracle.h"
#include "temp_dir.h"

#include <cstring>
#include <fstream>

using namespace bitlens;
using io::GgufType;
using io::GgufValue;
using formats::GgmlType;

namespace {

const std::string kDir = std::string(BITLENS_TEST_DATA) + "/ggml/";

struct TempDir : test::TempDir {
    TempDir() : test::TempDir("bitlens_gguf") {}
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

bool sameBits(const at::Tensor& a, const at::Tensor& b)
{
    if (a.sizes() != b.sizes())
        return false;
    const at::Tensor x = a.contiguous().to(at::kFloat);
    const at::Tensor y = b.contiguous().to(at::kFloat);
    return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

} // namespace

TEST(Gguf, ReadsEveryValueTypeWrittenByGgufPy)
{
    auto file = io::GgufFile::open(kDir + "golden.gguf");
    ASSERT_TRUE(file.ok()) << file.error().userMessage();
    EXPECT_EQ(file->version(), 3u);
    EXPECT_EQ(file->alignment(), 64u);
    EXPECT_EQ(file->dataOffset() % 64, 0u);
    EXPECT_EQ(file->getString("general.architecture").value(), "llama");
    EXPECT_EQ(file->getInt("test.u8").value(), 200);
    EXPECT_EQ(file->getInt("test.i8").value(), -100);
    EXPECT_EQ(file->getInt("test.u16").value(), 60000);
    EXPECT_EQ(file->getInt("test.i16").value(), -30000);
    EXPECT_EQ(file->getInt("test.u32").value(), 4000000000);
    EXPECT_EQ(file->getInt("test.i32").value(), -2000000000);
    EXPECT_EQ(file->getFloat("test.f32").value(), static_cast<double>(0.1f));
    EXPECT_EQ(file->getBool("test.bool").value(), true);
    EXPECT_EQ(file->getString("test.string").value(), "grüße, ggml");
    EXPECT_EQ(file->find("test.u64")->type, GgufType::UInt64);
    EXPECT_EQ(std::get<std::uint64_t>(file->find("test.u64")->data), 18000000000000000000ull);
    EXPECT_EQ(file->getInt("test.i64").value(), -9000000000000000000);
    EXPECT_EQ(file->getFloat("test.f64").value(), -2.5e300);
    EXPECT_EQ(file->getStringArray("test.strings").value(),
              (std::vector<std::string>{"a", "", "tokens ▁x"}));
    EXPECT_EQ(file->getIntArray("test.ints").value(), (std::vector<std::int64_t>{1, -2, 3}));
    EXPECT_EQ(file->getFloatArray("test.floats").value(), (std::vector<double>{0.5, -1.25}));
    EXPECT_EQ(file->getStringArray("tokenizer.ggml.tokens").value(),
              (std::vector<std::string>{"<s>", "</s>", "hello"}));
    const GgufValue* nested = file->find("test.nested");
    ASSERT_NE(nested, nullptr);
    EXPECT_EQ(nested->elementType, GgufType::Array);
    const auto& outer = std::get<std::vector<GgufValue>>(nested->data);
    ASSERT_EQ(outer.size(), 2u);
    EXPECT_EQ(std::get<std::vector<GgufValue>>(outer[0].data).size(), 2u);
    EXPECT_EQ(std::get<std::int64_t>(std::get<std::vector<GgufValue>>(outer[1].data)[0].data), 3);

    // Typed accessors name the file and the key.
    auto missing = file->getString("nope");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().userMessage(), "error: " + kDir + "golden.gguf: missing key 'nope'");
    auto wrong = file->getInt("test.string");
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.error().message, "key 'test.string' is string \"grüße, ggml\", expected an integer");
    EXPECT_FALSE(file->getInt("test.u64").ok());  // above INT64_MAX
    EXPECT_FALSE(file->getStringArray("test.ints").ok());
}

TEST(Gguf, DequantizesEveryTensorOfGgufPyFileAsGgmlDoes)
{
    auto file = io::GgufFile::open(kDir + "golden.gguf");
    ASSERT_TRUE(file.ok());
    auto expected = io::readNpz(kDir + "golden_tensors.npz");
    ASSERT_TRUE(expected.ok());
    ASSERT_EQ(file->tensors().size(), expected->size());
    for (const auto& [name, want] : *expected) {
        const io::GgufTensorInfo* info = file->findTensor(name);
        ASSERT_NE(info, nullptr) << name;
        auto got = file->dequantize(name);
        ASSERT_TRUE(got.ok()) << name << ": " << got.error().message;
        EXPECT_EQ(got->scalar_type(), at::kFloat);
        EXPECT_TRUE(sameBits(*got, want)) << name;
    }
    // ggml dims: ne = [64, 2] is torch [2, 64]; the 3-d tensor ne = [32, 3, 2] is [2, 3, 32].
    EXPECT_EQ(file->findTensor("q4_0")->ne, (std::vector<std::int64_t>{64, 2}));
    EXPECT_EQ(file->dequantize("q4_0")->sizes(), at::IntArrayRef({2, 64}));
    EXPECT_EQ(file->dequantize("cube_q8_0")->sizes(), at::IntArrayRef({2, 3, 32}));
    EXPECT_EQ(file->findTensor("q6_k")->type, GgmlType::Q6_K);
    // Plain types come as zero-copy views in their own dtype; block types as bytes per row.
    EXPECT_EQ(file->tensorView("f16")->scalar_type(), at::kHalf);
    EXPECT_EQ(file->tensorView("i32")->scalar_type(), at::kInt);
    EXPECT_EQ(file->tensorView("q4_k")->sizes(), at::IntArrayRef({2, 144}));
    EXPECT_FALSE(file->dequantize("nope").ok());
}

namespace {

/// A writer holding every metadata type and one tensor per type BitLens quantizes.
io::GgufWriter fullWriter(std::map<std::string, at::Tensor>& sources)
{
    io::GgufWriter w(64);
    w.set("general.architecture", GgufValue::string("llama"));
    w.set("t.u8", GgufValue::u8(7));
    w.set("t.i8", GgufValue::i8(-7));
    w.set("t.u16", GgufValue::u16(65535));
    w.set("t.i16", GgufValue::i16(-32768));
    w.set("t.u32", GgufValue::u32(4294967295u));
    w.set("t.i32", GgufValue::i32(-5));
    w.set("t.u64", GgufValue::u64(1ull << 63));
    w.set("t.i64", GgufValue::i64(-(1ll << 62)));
    w.set("t.f32", GgufValue::f32(1.5f));
    w.set("t.f64", GgufValue::f64(0.1));
    w.set("t.bool", GgufValue::boolean(false));
    w.set("t.str", GgufValue::string("hello"));
    w.set("tokenizer.ggml.tokens", GgufValue::stringArray({"<unk>", "a b", "é"}));
    w.set("tokenizer.ggml.merges", GgufValue::stringArray({"a b", "ab c"}));
    w.set("t.scores", GgufValue::f32Array({0.0f, -1.5f, 2.25f}));
    w.set("t.types", GgufValue::i32Array({1, 2, 3}));
    w.set("t.empty", GgufValue::array(GgufType::String, {}));
    w.set("t.nested", GgufValue::array(GgufType::Array,
                                       {GgufValue::i32Array({1, 2}), GgufValue::i32Array({})}));
    at::Generator gen = at::detail::createCPUGenerator(5);
    const std::vector<std::pair<std::string, GgmlType>> types = {
        {"f32", GgmlType::F32},   {"f16", GgmlType::F16},   {"bf16", GgmlType::BF16},
        {"q8_0", GgmlType::Q8_0}, {"q4_0", GgmlType::Q4_0}, {"q4_1", GgmlType::Q4_1},
        {"q5_0", GgmlType::Q5_0}, {"q5_1", GgmlType::Q5_1}, {"q2_k", GgmlType::Q2_K},
        {"q3_k", GgmlType::Q3_K}, {"q4_k", GgmlType::Q4_K}, {"q5_k", GgmlType::Q5_K},
        {"q6_k", GgmlType::Q6_K}};
    for (const auto& [name, type] : types) {
        const std::int64_t k = formats::ggmlTraits(type).blockSize == 256 ? 512 : 64;
        at::Tensor x = at::randn({3, k}, gen);
        sources[name] = x;
        EXPECT_TRUE(w.addTensor(name, x, type).ok()) << name;
    }
    sources["ids"] = at::arange(6, at::kInt).reshape({2, 3});
    EXPECT_TRUE(w.addTensor("ids", sources["ids"], GgmlType::I32).ok());
    return w;
}

} // namespace

TEST(Gguf, WriterRoundTripsMetadataAndTensors)
{
    TempDir dir;
    std::map<std::string, at::Tensor> sources;
    auto w = fullWriter(sources);
    const std::string path = dir.file("ours.gguf");
    ASSERT_TRUE(w.write(path).ok());
    auto file = io::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().userMessage();
    EXPECT_EQ(file->alignment(), 64u);
    EXPECT_EQ(file->find("t.u8")->type, GgufType::UInt8);
    EXPECT_EQ(file->getInt("t.i16").value(), -32768);
    EXPECT_EQ(std::get<std::uint64_t>(file->find("t.u64")->data), 1ull << 63);
    EXPECT_EQ(file->getFloat("t.f32").value(), 1.5);
    EXPECT_EQ(file->getFloat("t.f64").value(), 0.1);
    EXPECT_EQ(file->getBool("t.bool").value(), false);
    EXPECT_EQ(file->getStringArray("tokenizer.ggml.tokens").value(),
              (std::vector<std::string>{"<unk>", "a b", "é"}));
    EXPECT_TRUE(file->getStringArray("t.empty").value().empty());
    EXPECT_EQ(file->find("t.nested")->describe(), "array[2] of array");
    EXPECT_EQ(file->metadata().front().first, "general.alignment");
    for (const auto& [name, x] : sources) {
        const io::GgufTensorInfo* info = file->findTensor(name);
        ASSERT_NE(info, nullptr) << name;
        EXPECT_EQ(info->offset % 64, 0u) << name;
        if (name == "ids") {
            EXPECT_TRUE(at::equal(file->tensorView(name).value(), x));
            continue;
        }
        // Ours must equal dequantize(quantize(x)) computed directly.
        const at::Tensor xf = x.contiguous();
        auto q = formats::ggmlQuantize({xf.data_ptr<float>(), static_cast<std::size_t>(xf.numel())}, info->type);
        ASSERT_TRUE(q.ok());
        at::Tensor want = at::empty_like(xf);
        ASSERT_TRUE(formats::ggmlDequantize(*q, info->type,
                                          {want.data_ptr<float>(), static_cast<std::size_t>(want.numel())})
                        .ok());
        auto got = file->dequantize(name);
        ASSERT_TRUE(got.ok());
        EXPECT_TRUE(sameBits(*got, want)) << name;
        const auto bytes = file->tensorBytes(*info);
        EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), q->begin())) << name;
    }
}

// Version 2 differs from 3 only in what 3 added (big-endian files): the same bytes read.
TEST(Gguf, ReadsVersion2)
{
    TempDir dir;
    std::map<std::string, at::Tensor> sources;
    auto w = fullWriter(sources);
    ASSERT_TRUE(w.write(dir.file("v3.gguf")).ok());
    auto bytes = readBytes(dir.file("v3.gguf"));
    bytes[4] = 2;
    writeBytes(dir.file("v2.gguf"), bytes);
    auto file = io::GgufFile::open(dir.file("v2.gguf"));
    ASSERT_TRUE(file.ok()) << file.error().userMessage();
    EXPECT_EQ(file->version(), 2u);
    EXPECT_TRUE(sameBits(file->dequantize("q4_k").value(),
                         io::GgufFile::open(dir.file("v3.gguf"))->dequantize("q4_k").value()));
}

TEST(Gguf, GgufPyReadsOurFileAndDequantizesAsWeDo)
{
    BITLENS_PYTHON_OR_SKIP(python);
    TempDir dir;
    std::map<std::string, at::Tensor> sources;
    auto w = fullWriter(sources);
    ASSERT_TRUE(w.write(dir.file("ours.gguf")).ok());
    const std::string code = R"(
import sys, json, numpy as np, gguf
d = sys.argv[1]
r = gguf.GGUFReader(d + "/ours.gguf")
f = r.fields
assert f["general.alignment"].parts[-1][0] == 64
assert bytes(f["t.str"].parts[-1]).decode() == "hello"
assert [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data] == ["<unk>", "a b", "é"]
assert int(f["t.u64"].parts[-1][0]) == 1 << 63
assert float(f["t.f32"].parts[-1][0]) == 1.5
assert bool(f["t.bool"].parts[-1][0]) is False
out = {}
for t in r.tensors:
    if t.tensor_type == gguf.GGMLQuantizationType.I32:
        out[t.name] = t.data.astype(np.float32)
    else:
        out[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
    out[t.name + ".type"] = np.array(int(t.tensor_type))
np.savez(d + "/py.npz", **out)
print(len(r.tensors))
)";
    std::string output;
    ASSERT_EQ(test::runPython(python, dir.path(), code, dir.path(), output), 0) << output;
    auto py = io::readNpz(dir.file("py.npz"));
    ASSERT_TRUE(py.ok());
    auto file = io::GgufFile::open(dir.file("ours.gguf"));
    ASSERT_TRUE(file.ok());
    int compared = 0;
    for (const auto& info : file->tensors()) {
        ASSERT_TRUE(py->count(info.name)) << info.name;
        EXPECT_EQ(py->at(info.name + ".type").item<std::int64_t>(), static_cast<std::int64_t>(info.type));
        auto ours = file->dequantize(info.name);
        ASSERT_TRUE(ours.ok());
        EXPECT_TRUE(sameBits(*ours, py->at(info.name).reshape(ours->sizes()))) << info.name;
        ++compared;
    }
    EXPECT_EQ(compared, 14);
}

TEST(Gguf, WriterRefusesWhatGgufCannotHold)
{
    io::GgufWriter w;
    auto notBlocks = w.addTensor("w", at::ones({2, 100}), GgmlType::Q4_K);
    ASSERT_FALSE(notBlocks.ok());
    EXPECT_EQ(notBlocks.error().code, ErrorCode::Unsupported);
    EXPECT_EQ(notBlocks.error().message,
              "tensor 'w': rows of 100 values are not a whole number of Q4_K blocks of 256");
    at::Tensor nan = at::ones({1, 32});
    nan[0][3] = std::nanf("");
    auto withNan = w.addTensor("n", nan, GgmlType::Q8_0);
    ASSERT_FALSE(withNan.ok());
    EXPECT_EQ(withNan.error().code, ErrorCode::BadInput);
    ASSERT_TRUE(w.addTensor("a", at::ones({32}), GgmlType::Q8_0).ok());
    EXPECT_EQ(w.addTensor("a", at::ones({32}), GgmlType::Q8_0).error().code, ErrorCode::Usage);
    EXPECT_EQ(w.addTensor("iq", at::ones({256}), GgmlType::IQ2_XXS).error().code, ErrorCode::Unsupported);
    EXPECT_EQ(w.addTensor("five", at::ones({1, 1, 1, 1, 32}), GgmlType::F32).error().code,
              ErrorCode::Unsupported);
    w.set("bad", GgufValue::array(GgufType::Int32, {GgufValue::string("x")}));
    TempDir dir;
    auto written = w.write(dir.file("bad.gguf"));
    ASSERT_FALSE(written.ok());
    EXPECT_FALSE(std::filesystem::exists(dir.file("bad.gguf")));
}

namespace {

/// Raw GGUF bytes, assembled field by field for the defect cases.
struct Raw {
    std::vector<std::uint8_t> b;
    template <typename T>
    Raw& pod(T v)
    {
        const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
        b.insert(b.end(), p, p + sizeof v);
        return *this;
    }
    Raw& str(const std::string& s)
    {
        pod<std::uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Raw& header(std::uint64_t tensors, std::uint64_t kvs, std::uint32_t version = 3)
    {
        return pod<std::uint32_t>(0x46554747).pod(version).pod(tensors).pod(kvs);
    }
    /// A tensor info: name, dims, ggml type id, offset.
    Raw& tensor(const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type,
                std::uint64_t offset)
    {
        str(name).pod<std::uint32_t>(static_cast<std::uint32_t>(ne.size()));
        for (auto d : ne)
            pod(d);
        return pod(type).pod(offset);
    }
    Raw& padTo(std::size_t align)
    {
        b.resize((b.size() + align - 1) / align * align, 0);
        return *this;
    }
    Raw& zeros(std::size_t n)
    {
        b.resize(b.size() + n, 0);
        return *this;
    }
};

enum class Defect {
    Empty,
    BadMagic,
    Version1,
    BigEndian,
    HugeTensorCount,
    HugeKvCount,
    KeyLengthPastEnd,
    UnknownValueType,
    ArrayCountHuge,
    NestedTooDeep,
    BoolNotZeroOrOne,
    DuplicateKey,
    AlignmentNotPowerOfTwo,
    AlignmentWrongType,
    TooManyDims,
    DimsOverflow,
    UnknownGgmlType,
    RowNotWholeBlocks,
    OffsetMisaligned,
    TensorPastEnd,
    DuplicateTensor,
    Overlap,
};

struct DefectCase {
    Defect defect;
    std::vector<std::uint8_t> bytes;
    ErrorCode code;
    std::string message;
};

std::vector<DefectCase> defectCases()
{
    auto nested = [] {
        Raw r;
        r.header(0, 1).str("deep").pod<std::uint32_t>(9);
        for (int i = 0; i < 9; ++i)
            r.pod<std::uint32_t>(9).pod<std::uint64_t>(1);
        return r.pod<std::uint32_t>(0).pod<std::uint64_t>(1).pod<std::uint8_t>(1).b;
    };
    return {
        {Defect::Empty, {}, ErrorCode::BadInput, "file is too short for a GGUF header (0 bytes)"},
        {Defect::BadMagic, Raw().pod<std::uint32_t>(0x46554746).pod<std::uint32_t>(3).zeros(16).b,
         ErrorCode::BadInput, "not a GGUF file (bad magic)"},
        {Defect::Version1, Raw().header(0, 0, 1).b, ErrorCode::Unsupported,
         "GGUF version 1 is not supported (only 2 and 3)"},
        {Defect::BigEndian, Raw().header(0, 0, 0x03000000).b, ErrorCode::Unsupported,
         "big-endian GGUF files are not supported"},
        {Defect::HugeTensorCount, Raw().header(1ull << 40, 0).b, ErrorCode::BadInput,
         "header claims 1099511627776 tensors, more than the file can hold"},
        {Defect::HugeKvCount, Raw().header(0, 1ull << 40).b, ErrorCode::BadInput,
         "header claims 1099511627776 metadata entries, more than the file can hold"},
        {Defect::KeyLengthPastEnd, Raw().header(0, 1).pod<std::uint64_t>(1ull << 50).zeros(8).b,
         ErrorCode::BadInput, "metadata entry 0: key runs past the end of the file"},
        {Defect::UnknownValueType, Raw().header(0, 1).str("k").pod<std::uint32_t>(13).zeros(8).b,
         ErrorCode::BadInput, "metadata 'k' has unknown value type 13"},
        {Defect::ArrayCountHuge,
         Raw().header(0, 1).str("a").pod<std::uint32_t>(9).pod<std::uint32_t>(8).pod<std::uint64_t>(1ull << 40).zeros(8).b,
         ErrorCode::BadInput, "metadata 'a': array claims 1099511627776 items of string, more than the file can hold"},
        {Defect::NestedTooDeep, nested(), ErrorCode::BadInput,
         "metadata 'deep': arrays nested deeper than 8 levels"},
        {Defect::BoolNotZeroOrOne, Raw().header(0, 1).str("b").pod<std::uint32_t>(7).pod<std::uint8_t>(2).b,
         ErrorCode::BadInput, "metadata 'b': bool byte 2 is neither 0 nor 1"},
        {Defect::DuplicateKey,
         Raw().header(0, 2).str("k").pod<std::uint32_t>(0).pod<std::uint8_t>(1).str("k").pod<std::uint32_t>(0).pod<std::uint8_t>(2).b,
         ErrorCode::BadInput, "metadata key 'k' appears twice"},
        {Defect::AlignmentNotPowerOfTwo,
         Raw().header(0, 1).str("general.alignment").pod<std::uint32_t>(4).pod<std::uint32_t>(48).b,
         ErrorCode::BadInput, "general.alignment 48 is not a power of two"},
        {Defect::AlignmentWrongType,
         Raw().header(0, 1).str("general.alignment").pod<std::uint32_t>(8).str("32").b,
         ErrorCode::BadInput, "general.alignment is string \"32\", expected a uint32"},
        {Defect::TooManyDims, Raw().header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0).padTo(32).zeros(4).b,
         ErrorCode::BadInput, "tensor 't' has 5 dimensions (at most 4)"},
        {Defect::DimsOverflow, Raw().header(1, 0).tensor("t", {1ull << 32, 1ull << 32}, 0, 0).padTo(32).b,
         ErrorCode::BadInput, "tensor 't': dimensions overflow the element count"},
        {Defect::UnknownGgmlType, Raw().header(1, 0).tensor("t", {4}, 77, 0).padTo(32).zeros(32).b,
         ErrorCode::BadInput, "tensor 't' has unknown ggml type 77"},
        {Defect::RowNotWholeBlocks, Raw().header(1, 0).tensor("t", {33}, 8, 0).padTo(32).zeros(64).b,
         ErrorCode::BadInput, "tensor 't': ne[0] = 33 is not a multiple of the Q8_0 block size 32"},
        {Defect::OffsetMisaligned, Raw().header(1, 0).tensor("t", {4}, 0, 8).padTo(32).zeros(64).b,
         ErrorCode::BadInput, "tensor 't': offset 8 is not a multiple of the alignment 32"},
        {Defect::TensorPastEnd,
         Raw().header(1, 0).tensor("t", {1ull << 34}, 0, 0).padTo(32).zeros(64).b, ErrorCode::BadInput,
         "tensor 't' (offset 0, 68719476736 bytes) ends past the end of the file"},
        {Defect::DuplicateTensor,
         Raw().header(2, 0).tensor("t", {4}, 0, 0).tensor("t", {4}, 0, 32).padTo(32).zeros(64).b,
         ErrorCode::BadInput, "tensor 't' appears twice"},
        {Defect::Overlap,
         Raw().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).padTo(32).zeros(64).b,
         ErrorCode::BadInput, "tensors 'a' and 'b' overlap in the data section"},
    };
}

} // namespace

TEST(Gguf, CorruptHeadersAreRefusedWithTheReason)
{
    TempDir dir;
    for (const DefectCase& c : defectCases()) {
        const std::string path = dir.file("bad.gguf");
        writeBytes(path, c.bytes);
        auto r = io::GgufFile::open(path);
        ASSERT_FALSE(r.ok()) << static_cast<int>(c.defect);
        EXPECT_EQ(r.error().code, c.code) << c.message;
        EXPECT_EQ(r.error().path, path);
        EXPECT_EQ(r.error().message, c.message) << static_cast<int>(c.defect);
    }
}

TEST(Gguf, EveryTruncationIsRefused)
{
    TempDir dir;
    const auto bytes = readBytes(kDir + "golden.gguf");
    const std::string path = dir.file("cut.gguf");
    auto full = io::GgufFile::open(kDir + "golden.gguf");
    ASSERT_TRUE(full.ok());
    // Cuts through the header (every byte of the fixed part and the first entries, then every
    // 13th) and through the data up to the end of the last tensor; the padding after it may go.
    std::uint64_t end = 0;
    for (const auto& t : full->tensors())
        end = std::max(end, full->dataOffset() + t.offset + t.sizeBytes);
    for (std::size_t n = 0; n < end; n += n < 400 ? 1 : (n < full->dataOffset() ? 13 : 61)) {
        writeBytes(path, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(n)));
        auto r = io::GgufFile::open(path);
        ASSERT_FALSE(r.ok()) << "truncated to " << n << " bytes";
        EXPECT_EQ(r.error().code, ErrorCode::BadInput) << n;
    }
}

TEST(Gguf, UnsupportedTypesReadButDoNotDequantize)
{
    TempDir dir;
    const std::string path = dir.file("iq.gguf");
    io::GgufWriter w;
    ASSERT_TRUE(w.addRawTensor("iq", {256}, GgmlType::IQ2_XXS, std::vector<std::uint8_t>(66, 0)).ok());
    ASSERT_TRUE(w.write(path).ok());
    auto file = io::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().userMessage();
    EXPECT_EQ(file->tensorBytes(file->tensors()[0]).size(), 66u);
    auto deq = file->dequantize("iq");
    ASSERT_FALSE(deq.ok());
    EXPECT_EQ(deq.error().code, ErrorCode::Unsupported);
    EXPECT_EQ(deq.error().message, "tensor 'iq' has ggml type IQ2_XXS, which BitLens cannot dequantize");
}

TEST(Gguf, AnEmptyTensorWhoseShapeOverflowsIsBadInputNotACrash)
{
    // A fuzz finding (kept as a seed of fuzz_gguf): a tensor of 0 bytes with dimensions
    // [12848, 7349874591868649472, 0], which LibTorch refuses to size; the view is BadInput.
    const std::string path = std::string(BITLENS_TEST_DATA) +
                             "/../fuzz/corpus/gguf/finding-empty-tensor-overflowing-shape.gguf";
    auto file = io::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().userMessage();
    int refused = 0;
    for (const auto& info : file->tensors()) {
        auto view = file->tensorView(info.name);
        if (view.ok())
            continue;
        ++refused;
        EXPECT_EQ(view.error().code, ErrorCode::BadInput);
        EXPECT_EQ(view.error().path, path);
        EXPECT_NE(view.error().message.find("has a shape LibTorch cannot hold"), std::string::npos)
            << view.error().message;
    }
    EXPECT_GE(refused, 1);
}
