#include "corrupt_files.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#ifndef BITLENS_TEST_DATA
#error "BITLENS_TEST_DATA must name tests/data"
#endif

namespace bitlens::test {

namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
/// A tensor of 25 G float32 elements: 100 GB.
constexpr std::uint64_t kHugeElements = 25'000'000'000ull;

// ---- little helpers ---------------------------------------------------------------------------

void putLe(Bytes& b, std::uint64_t v, int width)
{
    for (int i = 0; i < width; ++i)
        b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void putBe32(Bytes& b, std::uint32_t v)
{
    for (int i = 3; i >= 0; --i)
        b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void setLe(Bytes& b, std::size_t at, std::uint64_t v, int width)
{
    for (int i = 0; i < width; ++i)
        b.at(at + static_cast<std::size_t>(i)) = static_cast<std::uint8_t>(v >> (8 * i));
}
void setBe32(Bytes& b, std::size_t at, std::uint32_t v)
{
    for (int i = 0; i < 4; ++i)
        b.at(at + static_cast<std::size_t>(i)) = static_cast<std::uint8_t>(v >> (8 * (3 - i)));
}
void append(Bytes& b, const Bytes& more) { b.insert(b.end(), more.begin(), more.end()); }
void append(Bytes& b, std::string_view text) { b.insert(b.end(), text.begin(), text.end()); }

Bytes floatBytes(const std::vector<float>& values)
{
    Bytes b(values.size() * 4);
    std::memcpy(b.data(), values.data(), b.size());
    return b;
}

Bytes readTestFile(const std::string& relative)
{
    const std::string path = std::string(BITLENS_TEST_DATA) + "/" + relative;
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("corrupt_files: cannot read " + path);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// zlib stream (windowBits 15), raw deflate (-15) or gzip (31) of `data`.
Bytes deflateBytes(const Bytes& data, int windowBits)
{
    z_stream zs{};
    if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        throw std::runtime_error("deflateInit2 failed");
    Bytes out(deflateBound(&zs, static_cast<uLong>(data.size())) + 32);
    zs.next_in = const_cast<Bytef*>(data.data());
    zs.avail_in = static_cast<uInt>(data.size());
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    if (rc != Z_STREAM_END)
        throw std::runtime_error("deflate failed");
    return out;
}

std::uint32_t crc(const Bytes& data, std::size_t from = 0, std::size_t to = SIZE_MAX)
{
    to = std::min(to, data.size());
    return static_cast<std::uint32_t>(
        crc32_z(crc32_z(0, nullptr, 0), data.data() + from, to - from));
}

CorruptFile make(Defect defect, std::string note, Bytes bytes, const std::string& fileName,
                 std::optional<ErrorCode> code, std::string text = {})
{
    CorruptFile f;
    f.defect = defect;
    f.note = std::move(note);
    f.bytes = std::move(bytes);
    f.fileName = fileName;
    f.expectCode = code;
    f.expectText = std::move(text);
    return f;
}

/// One file per boundary strictly inside the base, each cut there. `text` lists the reasons
/// a reader may give (alternatives separated by '|').
void addTruncations(std::vector<CorruptFile>& out, const Bytes& base,
                    std::vector<std::size_t> boundaries, const std::string& fileName,
                    const std::string& text)
{
    boundaries.push_back(0);
    std::sort(boundaries.begin(), boundaries.end());
    boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
    for (std::size_t cut : boundaries) {
        if (cut >= base.size())
            continue;
        out.push_back(make(Defect::Truncated,
                           "cut at " + std::to_string(cut) + " of " + std::to_string(base.size()),
                           Bytes(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(cut)),
                           fileName, ErrorCode::BadInput, text));
    }
}

// ---- ONNX (protobuf written by hand) ----------------------------------------------------------

struct Pb {
    Bytes b;
    void varint(std::uint64_t v)
    {
        while (v >= 0x80) {
            b.push_back(static_cast<std::uint8_t>(v | 0x80));
            v >>= 7;
        }
        b.push_back(static_cast<std::uint8_t>(v));
    }
    void tag(std::uint32_t field, int wire) { varint((std::uint64_t{field} << 3) | wire); }
    Pb& i64(std::uint32_t field, std::int64_t v)
    {
        tag(field, 0);
        varint(static_cast<std::uint64_t>(v));
        return *this;
    }
    Pb& bytes(std::uint32_t field, const Bytes& payload, std::int64_t lengthDelta = 0)
    {
        tag(field, 2);
        varint(static_cast<std::uint64_t>(static_cast<std::int64_t>(payload.size()) + lengthDelta));
        append(b, payload);
        return *this;
    }
    Pb& str(std::uint32_t field, std::string_view s) { return bytes(field, Bytes(s.begin(), s.end())); }
    Pb& msg(std::uint32_t field, const Pb& m, std::int64_t lengthDelta = 0)
    {
        return bytes(field, m.b, lengthDelta);
    }
};

/// TensorProto: dims, data_type, name, raw_data.
Pb onnxTensor(const std::vector<std::int64_t>& dims, std::int64_t dtype, const std::string& name,
              const Bytes& raw)
{
    Pb t;
    for (std::int64_t d : dims)
        t.i64(1, d);
    t.i64(2, dtype);
    t.str(8, name);
    t.bytes(9, raw);
    return t;
}

Pb onnxValueInfo(const std::string& name, const std::vector<std::int64_t>& shape)
{
    Pb dims;
    for (std::int64_t d : shape) {
        Pb dim;
        dim.i64(1, d);
        dims.msg(1, dim);
    }
    Pb tensorType;
    tensorType.i64(1, 1).msg(2, dims);
    Pb type;
    type.msg(1, tensorType);
    Pb info;
    info.str(1, name).msg(2, type);
    return info;
}

Pb onnxNode(const std::string& a, const std::string& b, const std::string& out,
            const std::string& name, const std::string& op)
{
    Pb n;
    n.str(1, a).str(1, b).str(2, out).str(3, name).str(4, op);
    return n;
}

const std::vector<float> kOnnxW = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f, 0.125f, -2.0f};

/// y = x[1,4] @ W[4,2] + B[2]; `initializers` replace the default W and B.
Bytes onnxModel(const std::vector<Pb>& initializers, std::int64_t graphLengthDelta = 0)
{
    Pb graph;
    graph.msg(1, onnxNode("x", "W", "h", "mm", "MatMul"));
    graph.msg(1, onnxNode("h", "B", "y", "add", "Add"));
    graph.str(2, "g");
    for (const Pb& init : initializers)
        graph.msg(5, init);
    graph.msg(11, onnxValueInfo("x", {1, 4}));
    graph.msg(12, onnxValueInfo("y", {1, 2}));
    Pb opset;
    opset.str(1, "").i64(2, 13);
    Pb model;
    model.i64(1, 8).str(2, "corrupt-gen");
    model.msg(7, graph, graphLengthDelta);
    model.msg(8, opset);
    return model.b;
}

Pb defaultW(const std::vector<float>& values = kOnnxW)
{
    return onnxTensor({4, 2}, 1, "W", floatBytes(values));
}
Pb defaultB() { return onnxTensor({2}, 1, "B", floatBytes({0.5f, -0.25f})); }

/// Offsets of every field start and end at every nesting level (a length-delimited payload
/// that parses cleanly as a message is walked into).
bool walkProtobuf(const Bytes& data, std::size_t from, std::size_t to, int depth,
                  std::vector<std::size_t>& marks)
{
    std::vector<std::size_t> local;
    std::vector<std::pair<std::size_t, std::size_t>> payloads;
    std::size_t p = from;
    auto varint = [&](std::uint64_t& v) {
        v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (p >= to)
                return false;
            const std::uint8_t byte = data[p++];
            v |= std::uint64_t{byte & 0x7fu} << shift;
            if (!(byte & 0x80))
                return true;
        }
        return false;
    };
    while (p < to) {
        local.push_back(p);
        std::uint64_t key = 0;
        if (!varint(key) || (key >> 3) == 0)
            return false;
        switch (key & 7) {
        case 0: {
            std::uint64_t v;
            if (!varint(v))
                return false;
            break;
        }
        case 1: p += 8; break;
        case 5: p += 4; break;
        case 2: {
            std::uint64_t len;
            if (!varint(len) || len > to - p)
                return false;
            payloads.emplace_back(p, p + len);
            p += len;
            break;
        }
        default: return false;
        }
        if (p > to)
            return false;
    }
    local.push_back(to);
    marks.insert(marks.end(), local.begin(), local.end());
    if (depth < 8)
        for (auto [a, b] : payloads)
            if (b > a) {
                std::vector<std::size_t> inner;
                if (walkProtobuf(data, a, b, depth + 1, inner))
                    marks.insert(marks.end(), inner.begin(), inner.end());
            }
    return true;
}

std::vector<CorruptFile> onnxDefects()
{
    const std::string name = "model.onnx";
    std::vector<CorruptFile> out;
    const Bytes base = onnxModel({defaultW(), defaultB()});
    out.push_back(make(Defect::None, "y = x @ W + B", base, name, std::nullopt));

    std::vector<std::size_t> marks;
    walkProtobuf(base, 0, base.size(), 0, marks);
    addTruncations(out, base, marks, name,
                   "runs past the end|truncated|file is empty|no graph|imports no opset");

    Bytes magic = base;
    magic[0] = 0xFF;  // field 31, wire type 7: no protobuf message starts like this
    out.push_back(make(Defect::BadMagic, "first byte 0xFF (not protobuf)", magic, name,
                       ErrorCode::BadInput, "invalid wire type"));
    const std::string html = "<html><body>not a model</body></html>";
    out.push_back(make(Defect::BadMagic, "an HTML page", Bytes(html.begin(), html.end()), name,
                       ErrorCode::BadInput, "ModelProto"));

    out.push_back(make(Defect::CountPastEnd, "graph length + 1000", onnxModel({defaultW(), defaultB()}, 1000),
                       name, ErrorCode::BadInput, "runs past the end"));
    out.push_back(make(Defect::OffsetPastEnd, "W holds 16 of its 32 bytes",
                       onnxModel({onnxTensor({4, 2}, 1, "W", floatBytes({1, 2, 3, 4})), defaultB()}),
                       name, ErrorCode::BadInput, "bytes of raw_data, expected 32"));
    out.push_back(make(Defect::DimOverflow, "W dims [2^40, 2^40]",
                       onnxModel({onnxTensor({1ll << 40, 1ll << 40}, 1, "W", floatBytes(kOnnxW)), defaultB()}),
                       name, ErrorCode::BadInput, "does not fit 64 bits"));
    out.push_back(make(Defect::DimOverflow, "W dims [-4, 2]",
                       onnxModel({onnxTensor({-4, 2}, 1, "W", floatBytes(kOnnxW)), defaultB()}),
                       name, ErrorCode::BadInput, "negative dimension"));
    out.push_back(make(Defect::HugeTensor, "W claims 25e9 float32 (100 GB)",
                       onnxModel({onnxTensor({static_cast<std::int64_t>(kHugeElements)}, 1, "W",
                                             floatBytes(kOnnxW)),
                                  defaultB()}),
                       name, ErrorCode::BadInput, "expected 100000000000"));
    out.push_back(make(Defect::UnknownDtype, "W data_type 99",
                       onnxModel({onnxTensor({4, 2}, 99, "W", floatBytes(kOnnxW)), defaultB()}),
                       name, ErrorCode::Unsupported, "element type type 99"));
    out.push_back(make(Defect::UnknownDtype, "W data_type 0",
                       onnxModel({onnxTensor({4, 2}, 0, "W", floatBytes(kOnnxW)), defaultB()}),
                       name, ErrorCode::BadInput, "has no data_type"));
    out.push_back(make(Defect::DuplicateName, "two initializers named W",
                       onnxModel({defaultW(), defaultW(), defaultB()}), name, ErrorCode::BadInput,
                       "appears twice"));
    std::vector<float> nan = kOnnxW;
    nan[3] = kNaN;
    out.push_back(make(Defect::NanWeights, "W[1][1] = NaN", onnxModel({defaultW(nan), defaultB()}),
                       name, ErrorCode::BadInput, "NaN"));
    std::vector<float> inf = kOnnxW;
    inf[6] = -kInf;
    out.push_back(make(Defect::InfWeights, "W[3][0] = -Inf", onnxModel({defaultW(inf), defaultB()}),
                       name, ErrorCode::BadInput, "Inf"));
    return out;
}

// ---- safetensors -------------------------------------------------------------------------------

const std::string kStMeta = R"("__metadata__":{"format":"pt"})";
const std::string kStW = R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
const std::string kStB = R"("b":{"dtype":"F16","shape":[3],"data_offsets":[24,30]})";

Bytes stData(const std::vector<float>& w = {1, -2, 3, -4, 5, -6})
{
    Bytes data = floatBytes(w);
    for (std::uint16_t h : {0x3C00, 0xBC00, 0x3800})  // 1, -1, 0.5 as float16
        putLe(data, h, 2);
    return data;
}

/// 8-byte length, the header (entries joined into one object, padded with spaces to a multiple
/// of 8), then the data. `lengthOverride` replaces the length field.
Bytes safetensorsFile(const std::vector<std::string>& entries, const Bytes& data,
                      std::optional<std::uint64_t> lengthOverride = std::nullopt,
                      std::vector<std::size_t>* marks = nullptr)
{
    std::string header = "{";
    std::vector<std::size_t> entryEnds;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        header += (i ? "," : "") + entries[i];
        entryEnds.push_back(header.size());
    }
    header += "}";
    while (header.size() % 8)
        header += ' ';
    Bytes b;
    putLe(b, lengthOverride.value_or(header.size()), 8);
    append(b, header);
    const std::size_t dataStart = b.size();
    append(b, data);
    if (marks) {
        *marks = {4, 8, 9, dataStart - 1, dataStart, dataStart + 24, b.size() - 1};
        for (std::size_t end : entryEnds)
            marks->push_back(8 + end);
    }
    return b;
}

std::string stEntry(const std::string& name, const std::string& dtype, const std::string& shape,
                    std::uint64_t begin, std::uint64_t end)
{
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

std::vector<CorruptFile> safetensorsDefects()
{
    const std::string name = "model.safetensors";
    std::vector<CorruptFile> out;
    std::vector<std::size_t> marks;
    const Bytes base = safetensorsFile({kStMeta, kStW, kStB}, stData(), std::nullopt, &marks);
    out.push_back(make(Defect::None, "w F32 [2,3], b F16 [3]", base, name, std::nullopt));
    addTruncations(out, base, marks, name, "too short|runs past the end|end past the end");

    const std::string zip = "PK\x03\x04 this is a zip file, not safetensors";
    out.push_back(make(Defect::BadMagic, "a zip file", Bytes(zip.begin(), zip.end()), name,
                       ErrorCode::BadInput, "runs past the end"));
    Bytes notJson = base;
    notJson[8] = '[';
    out.push_back(make(Defect::BadMagic, "header starts with '['", notJson, name,
                       ErrorCode::BadInput, "not valid JSON"));
    out.push_back(make(Defect::CountPastEnd, "header length = file size",
                       safetensorsFile({kStMeta, kStW, kStB}, stData(), base.size()), name,
                       ErrorCode::BadInput, "runs past the end of the file"));
    out.push_back(make(Defect::CountPastEnd, "header length 2^63",
                       safetensorsFile({kStMeta, kStW, kStB}, stData(), 1ull << 63), name,
                       ErrorCode::BadInput, "runs past the end of the file"));
    out.push_back(make(Defect::OffsetPastEnd, "w data_offsets [0, 1000]",
                       safetensorsFile({kStMeta, stEntry("w", "F32", "[250]", 0, 1000), kStB}, stData()),
                       name, ErrorCode::BadInput, "end past the end of the file"));
    out.push_back(make(Defect::OffsetPastEnd, "w data_offsets [24, 0]",
                       safetensorsFile({kStMeta, stEntry("w", "F32", "[2,3]", 24, 0), kStB}, stData()),
                       name, ErrorCode::BadInput, "begin after they end"));
    out.push_back(make(Defect::OffsetPastEnd, "w and b overlap",
                       safetensorsFile({kStMeta, stEntry("w", "F32", "[2,3]", 0, 24),
                                        stEntry("b", "F16", "[3]", 20, 26)},
                                       stData()),
                       name, ErrorCode::BadInput, "overlap"));
    out.push_back(make(Defect::DimOverflow, "w shape [2^62, 2^62]",
                       safetensorsFile({kStMeta, stEntry("w", "F32", "[4611686018427387904,4611686018427387904]", 0, 24), kStB},
                                       stData()),
                       name, ErrorCode::BadInput, "element count overflows"));
    out.push_back(make(Defect::DimOverflow, "w shape [-2, 3]",
                       safetensorsFile({kStMeta, stEntry("w", "F32", "[-2,3]", 0, 24), kStB}, stData()),
                       name, ErrorCode::BadInput, "not a non-negative integer"));
    out.push_back(make(Defect::HugeTensor, "w claims 25e9 float32 (100 GB)",
                       safetensorsFile({kStMeta,
                                        stEntry("w", "F32", "[" + std::to_string(kHugeElements) + "]",
                                                0, kHugeElements * 4),
                                        kStB},
                                       stData()),
                       name, ErrorCode::BadInput, "end past the end of the file"));
    out.push_back(make(Defect::UnknownDtype, "w dtype F99",
                       safetensorsFile({kStMeta, stEntry("w", "F99", "[2,3]", 0, 24), kStB}, stData()),
                       name, ErrorCode::Unsupported, "dtype 'F99'"));
    out.push_back(make(Defect::DuplicateName, "w twice",
                       safetensorsFile({kStMeta, kStW, kStW, kStB}, stData()), name,
                       ErrorCode::BadInput, "appears twice"));
    out.push_back(make(Defect::NanWeights, "w[1] = NaN",
                       safetensorsFile({kStMeta, kStW, kStB}, stData({1, kNaN, 3, -4, 5, -6})),
                       name, ErrorCode::BadInput, "NaN"));
    out.push_back(make(Defect::InfWeights, "w[4] = Inf",
                       safetensorsFile({kStMeta, kStW, kStB}, stData({1, 2, 3, -4, kInf, -6})),
                       name, ErrorCode::BadInput, "Inf"));
    return out;
}

// ---- GGUF --------------------------------------------------------------------------------------

struct GgufTensorSpec {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type = 0;
    std::uint64_t offset = 0;
};

struct GgufSpec {
    char magic[4] = {'G', 'G', 'U', 'F'};
    std::uint32_t version = 3;
    std::optional<std::uint64_t> tensorCount;  ///< default: tensors.size()
    std::optional<std::uint64_t> kvCount;      ///< default: the three keys below
    std::uint32_t arrayType = 8;               ///< element type of tokenizer.ggml.tokens
    std::uint32_t archType = 8;                ///< value type of general.architecture
    std::uint64_t archLength = 5;              ///< length of "llama" as stored
    bool duplicateKey = false;
    std::vector<GgufTensorSpec> tensors;
    std::vector<float> w = {1, -2, 3, -4, 5, -6, 7, -8};
};

void ggufString(Bytes& b, const std::string& s)
{
    putLe(b, s.size(), 8);
    append(b, s);
}

/// GGUF v3: three keys, then tensors (default: w F32 ne [4,2] at 0, q Q8_0 ne [32] at 32),
/// alignment 32, then w's 32 bytes and q's 34-byte block.
Bytes ggufFile(const GgufSpec& spec, std::vector<std::size_t>* marks = nullptr)
{
    std::vector<GgufTensorSpec> tensors = spec.tensors;
    if (tensors.empty())
        tensors = {{"w", {4, 2}, 0, 0}, {"q", {32}, 8, 32}};
    Bytes b(spec.magic, spec.magic + 4);
    std::vector<std::size_t> m = {4};
    putLe(b, spec.version, 4);
    m.push_back(b.size());
    putLe(b, spec.tensorCount.value_or(tensors.size()), 8);
    m.push_back(b.size());
    putLe(b, spec.kvCount.value_or(spec.duplicateKey ? 4 : 3), 8);
    m.push_back(b.size());
    putLe(b, std::string("general.architecture").size(), 8);
    append(b, "general.architecture");
    putLe(b, spec.archType, 4);
    putLe(b, spec.archLength, 8);
    append(b, "llama");
    m.push_back(b.size());
    ggufString(b, "general.alignment");
    putLe(b, 4, 4);  // uint32
    putLe(b, 32, 4);
    m.push_back(b.size());
    ggufString(b, "tokenizer.ggml.tokens");
    putLe(b, 9, 4);  // array
    putLe(b, spec.arrayType, 4);
    putLe(b, 3, 8);
    for (const char* token : {"a", "b", "c"})
        ggufString(b, token);
    m.push_back(b.size());
    if (spec.duplicateKey) {
        ggufString(b, "general.alignment");
        putLe(b, 4, 4);
        putLe(b, 32, 4);
        m.push_back(b.size());
    }
    for (const GgufTensorSpec& t : tensors) {
        ggufString(b, t.name);
        putLe(b, t.ne.size(), 4);
        for (std::uint64_t d : t.ne)
            putLe(b, d, 8);
        putLe(b, t.type, 4);
        putLe(b, t.offset, 8);
        m.push_back(b.size());
    }
    while (b.size() % 32)
        b.push_back(0);
    m.push_back(b.size());
    append(b, floatBytes(spec.w));
    m.push_back(b.size());
    putLe(b, 0x2C00, 2);  // Q8_0 block: float16 scale 1/16, then 32 int8 codes
    for (int i = 0; i < 32; ++i)
        b.push_back(static_cast<std::uint8_t>(i * 7 - 100));
    if (marks)
        *marks = m;
    return b;
}

std::vector<CorruptFile> ggufDefects()
{
    const std::string name = "model.gguf";
    std::vector<CorruptFile> out;
    std::vector<std::size_t> marks;
    const Bytes base = ggufFile({}, &marks);
    out.push_back(make(Defect::None, "3 keys, w F32 [2,4], q Q8_0 [32]", base, name, std::nullopt));
    addTruncations(out, base, marks, name,
                   "too short|ends inside|past the end|more than the file can hold");

    GgufSpec magic;
    std::memcpy(magic.magic, "GGML", 4);
    out.push_back(make(Defect::BadMagic, "magic GGML", ggufFile(magic), name, ErrorCode::BadInput,
                       "bad magic"));
    GgufSpec version;
    version.version = 7;
    out.push_back(make(Defect::BadMagic, "version 7", ggufFile(version), name,
                       ErrorCode::Unsupported, "unknown GGUF version 7"));
    GgufSpec tensors;
    tensors.tensorCount = 1ull << 40;
    out.push_back(make(Defect::CountPastEnd, "tensor count 2^40", ggufFile(tensors), name,
                       ErrorCode::BadInput, "more than the file can hold"));
    GgufSpec kvs;
    kvs.kvCount = ~0ull;
    out.push_back(make(Defect::CountPastEnd, "key count 2^64 - 1", ggufFile(kvs), name,
                       ErrorCode::BadInput, "more than the file can hold"));
    GgufSpec string;
    string.archLength = 1ull << 62;
    out.push_back(make(Defect::CountPastEnd, "string length 2^62", ggufFile(string), name,
                       ErrorCode::BadInput, "runs past the end of the file"));
    GgufSpec offset;
    offset.tensors = {{"w", {4, 2}, 0, 1u << 20}, {"q", {32}, 8, 32}};
    out.push_back(make(Defect::OffsetPastEnd, "w at offset 1 MiB", ggufFile(offset), name,
                       ErrorCode::BadInput, "ends past the end of the file"));
    GgufSpec overlap;
    overlap.tensors = {{"w", {4, 2}, 0, 0}, {"q", {32}, 8, 0}};
    out.push_back(make(Defect::OffsetPastEnd, "w and q overlap", ggufFile(overlap), name,
                       ErrorCode::BadInput, "overlap"));
    GgufSpec misaligned;
    misaligned.tensors = {{"w", {4, 2}, 0, 0}, {"q", {32}, 8, 33}};
    out.push_back(make(Defect::OffsetPastEnd, "q at offset 33", ggufFile(misaligned), name,
                       ErrorCode::BadInput, "not a multiple of the alignment"));
    GgufSpec dims;
    dims.tensors = {{"w", {1ull << 32, 1ull << 32, 1ull << 32}, 0, 0}, {"q", {32}, 8, 32}};
    out.push_back(make(Defect::DimOverflow, "w ne [2^32, 2^32, 2^32]", ggufFile(dims), name,
                       ErrorCode::BadInput, "overflow"));
    GgufSpec many;
    many.tensors = {{"w", {1, 1, 1, 1, 1, 1, 1, 1}, 0, 0}, {"q", {32}, 8, 32}};
    out.push_back(make(Defect::DimOverflow, "w with 8 dimensions", ggufFile(many), name,
                       ErrorCode::BadInput, "dimensions (at most 4)"));
    GgufSpec huge;
    huge.tensors = {{"w", {kHugeElements}, 0, 0}, {"q", {32}, 8, 32}};
    out.push_back(make(Defect::HugeTensor, "w claims 25e9 float32 (100 GB)", ggufFile(huge), name,
                       ErrorCode::BadInput, "ends past the end of the file"));
    GgufSpec type;
    type.tensors = {{"w", {4, 2}, 99, 0}, {"q", {32}, 8, 32}};
    out.push_back(make(Defect::UnknownDtype, "w ggml type 99", ggufFile(type), name,
                       ErrorCode::BadInput, "unknown ggml type 99"));
    GgufSpec valueType;
    valueType.archType = 13;
    out.push_back(make(Defect::UnknownDtype, "metadata value type 13", ggufFile(valueType), name,
                       ErrorCode::BadInput, "unknown value type 13"));
    GgufSpec arrayType;
    arrayType.arrayType = 1000;
    out.push_back(make(Defect::UnknownDtype, "array of type 1000", ggufFile(arrayType), name,
                       ErrorCode::BadInput, "array of unknown value type"));
    GgufSpec block;
    block.tensors = {{"w", {4, 2}, 0, 0}, {"q", {31}, 8, 32}};
    out.push_back(make(Defect::UnknownDtype, "Q8_0 row of 31", ggufFile(block), name,
                       ErrorCode::BadInput, "block size"));
    GgufSpec dupTensor;
    dupTensor.tensors = {{"w", {4, 2}, 0, 0}, {"w", {32}, 8, 32}};
    out.push_back(make(Defect::DuplicateName, "tensor w twice", ggufFile(dupTensor), name,
                       ErrorCode::BadInput, "appears twice"));
    GgufSpec dupKey;
    dupKey.duplicateKey = true;
    out.push_back(make(Defect::DuplicateName, "key general.alignment twice", ggufFile(dupKey), name,
                       ErrorCode::BadInput, "appears twice"));
    GgufSpec nan;
    nan.w[2] = kNaN;
    out.push_back(make(Defect::NanWeights, "w[2] = NaN", ggufFile(nan), name, ErrorCode::BadInput,
                       "NaN"));
    GgufSpec inf;
    inf.w[5] = kInf;
    out.push_back(make(Defect::InfWeights, "w[5] = Inf", ggufFile(inf), name, ErrorCode::BadInput,
                       "Inf"));
    return out;
}

// ---- IDX (and gzip) ----------------------------------------------------------------------------

Bytes idxFile(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& data,
              std::optional<std::uint8_t> dimCount = std::nullopt)
{
    Bytes b = {0, 0, type, dimCount.value_or(static_cast<std::uint8_t>(dims.size()))};
    for (std::uint32_t d : dims)
        putBe32(b, d);
    append(b, data);
    return b;
}

Bytes idxPixels()
{
    Bytes px(3 * 4 * 4);
    for (std::size_t i = 0; i < px.size(); ++i)
        px[i] = static_cast<std::uint8_t>(i * 13);
    return px;
}

Bytes idxFloats(const std::vector<float>& values)
{
    Bytes b;
    for (float v : values)
        putBe32(b, std::bit_cast<std::uint32_t>(v));
    return b;
}

std::vector<CorruptFile> idxDefects()
{
    const std::string name = "t10k-images-idx3-ubyte";
    const std::string gzName = "t10k-images-idx3-ubyte.gz";
    std::vector<CorruptFile> out;
    const Bytes base = idxFile(0x08, {3, 4, 4}, idxPixels());
    out.push_back(make(Defect::None, "uint8 [3, 4, 4]", base, name, std::nullopt));
    const Bytes gz = deflateBytes(base, 31);
    out.push_back(make(Defect::None, "gzipped uint8 [3, 4, 4]", gz, gzName, std::nullopt));
    addTruncations(out, base, {1, 2, 3, 4, 8, 12, 16, 17, 32, 63}, name,
                   "too short|ends after|need");
    addTruncations(out, gz, {2, 9, 10, gz.size() / 2, gz.size() - 8, gz.size() - 4, gz.size() - 1},
                   gzName, "too short|ends early|corrupt|need");

    Bytes magic = base;
    magic[0] = 0x1A;
    out.push_back(make(Defect::BadMagic, "first byte 0x1A", magic, name, ErrorCode::BadInput,
                       "bad magic"));
    Bytes gzMagic = deflateBytes(magic, 31);
    out.push_back(make(Defect::BadMagic, "gzip of a bad magic", gzMagic, gzName,
                       ErrorCode::BadInput, "bad magic"));
    out.push_back(make(Defect::CountPastEnd, "16 dimensions declared, 3 present",
                       idxFile(0x08, {3, 4, 4}, {}, 16), name, ErrorCode::BadInput, "ends after"));
    out.push_back(make(Defect::CountPastEnd, "0 dimensions", idxFile(0x08, {}, {}, 0), name,
                       ErrorCode::BadInput, "declares 0 dimensions"));
    out.push_back(make(Defect::OffsetPastEnd, "dims [3, 4, 5] with data for [3, 4, 4]",
                       idxFile(0x08, {3, 4, 5}, idxPixels()), name, ErrorCode::BadInput,
                       "only 48 follow"));
    out.push_back(make(Defect::OffsetPastEnd, "10 trailing bytes",
                       [&] { Bytes b = base; b.resize(b.size() + 10, 7); return b; }(), name,
                       ErrorCode::BadInput, "bytes follow"));
    out.push_back(make(Defect::DimOverflow, "dims [2^32-1] x 3",
                       idxFile(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, idxPixels()), name,
                       ErrorCode::BadInput, "too large"));
    out.push_back(make(Defect::HugeTensor, "float32 [25000, 1000, 1000] (100 GB)",
                       idxFile(0x0D, {25000, 1000, 1000}, idxFloats({1, 2, 3, 4})), name,
                       ErrorCode::BadInput, "need 100000000000 bytes"));
    Bytes gzHuge = deflateBytes(idxFile(0x0D, {25000, 1000, 1000}, idxFloats({1, 2})), 31);
    out.push_back(make(Defect::HugeTensor, "gzipped float32 [25000, 1000, 1000]", gzHuge, gzName,
                       ErrorCode::BadInput, "need 100000000000 bytes"));
    out.push_back(make(Defect::UnknownDtype, "element type 0x0A", idxFile(0x0A, {3, 4, 4}, idxPixels()),
                       name, ErrorCode::BadInput, "unknown IDX element type 0x0A"));
    Bytes badDeflate = gz;
    badDeflate[12] ^= 0xFF;
    badDeflate[13] ^= 0xFF;
    out.push_back(make(Defect::BadChecksum, "gzip deflate bytes flipped", badDeflate, gzName,
                       ErrorCode::BadInput, "corrupt|ends early|need|bytes follow"));
    Bytes badCrc = gz;
    badCrc[gz.size() - 6] ^= 0x55;
    out.push_back(make(Defect::BadChecksum, "gzip CRC flipped", badCrc, gzName,
                       ErrorCode::BadInput, "corrupt"));
    Bytes garbage = gz;
    append(garbage, "garbage");
    out.push_back(make(Defect::BadChecksum, "bytes after the gzip stream", garbage, gzName,
                       ErrorCode::BadInput, "unexpected bytes after"));
    std::vector<float> values(2 * 2 * 2, 0.5f);
    values[5] = kNaN;
    out.push_back(make(Defect::NanWeights, "float32 [2, 2, 2] with a NaN",
                       idxFile(0x0D, {2, 2, 2}, idxFloats(values)), name, ErrorCode::BadInput, "NaN"));
    values[5] = -kInf;
    out.push_back(make(Defect::InfWeights, "float32 [2, 2, 2] with -Inf",
                       idxFile(0x0D, {2, 2, 2}, idxFloats(values)), name, ErrorCode::BadInput, "Inf"));
    return out;
}

// ---- .npy --------------------------------------------------------------------------------------

const std::string kNpyDict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

std::vector<CorruptFile> npyDefects()
{
    const std::string name = "data.npy";
    std::vector<CorruptFile> out;
    const Bytes data = floatBytes({1, 2, 3, 4, 5, 6});
    const Bytes base = buildNpy(kNpyDict, data);
    out.push_back(make(Defect::None, "<f4 (2, 3)", base, name, std::nullopt));
    std::vector<std::size_t> marks = {1, 6, 7, 8, 9, 10, 11, 20, 40, 60, base.size() - 25,
                                      base.size() - 24, base.size() - 12, base.size() - 1};
    addTruncations(out, base, marks, name, "too short|runs past the end|needs");

    Bytes magic = base;
    magic[1] = 'X';
    out.push_back(make(Defect::BadMagic, "magic \\x93XUMPY", magic, name, ErrorCode::BadInput,
                       "bad magic"));
    Bytes version = base;
    version[6] = 9;
    out.push_back(make(Defect::BadMagic, "version 9.0", version, name, ErrorCode::Unsupported,
                       "format version 9"));
    Bytes length = base;
    setLe(length, 8, 0xFFFF, 2);
    out.push_back(make(Defect::CountPastEnd, "header length 65535", length, name,
                       ErrorCode::BadInput, "runs past the end of the file"));
    out.push_back(make(Defect::OffsetPastEnd, "shape (2, 4) with data for (2, 3)",
                       buildNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", data),
                       name, ErrorCode::BadInput, "needs 32 bytes of data but the file has 24"));
    out.push_back(make(Defect::DimOverflow, "shape (2^40, 2^40)",
                       buildNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", data),
                       name, ErrorCode::BadInput, "is too large"));
    out.push_back(make(Defect::DimOverflow, "shape (2^64,): wraps to 0 in 64 bits",
                       buildNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551616,), }", data),
                       name, ErrorCode::BadInput, "dimension is too large"));
    out.push_back(make(Defect::DimOverflow, "shape (-2, 3)",
                       buildNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", data),
                       name, ErrorCode::BadInput, "non-negative integer"));
    out.push_back(make(Defect::HugeTensor, "shape (25000000000,) <f4 (100 GB)",
                       buildNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (25000000000,), }", data),
                       name, ErrorCode::BadInput, "needs 100000000000 bytes"));
    out.push_back(make(Defect::UnknownDtype, "descr <c8",
                       buildNpy("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", data),
                       name, ErrorCode::Unsupported, "NumPy dtype '<c8' is not supported"));
    out.push_back(make(Defect::UnknownDtype, "structured descr",
                       buildNpy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", data),
                       name, ErrorCode::Unsupported, "structured"));
    out.push_back(make(Defect::DuplicateName, "unknown key 'shape2'",
                       buildNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape2': (1,), }", data),
                       name, ErrorCode::BadInput, "unexpected key 'shape2'"));
    out.push_back(make(Defect::NanWeights, "a NaN at sample 1",
                       buildNpy(kNpyDict, floatBytes({1, 2, 3, 4, kNaN, 6})), name,
                       ErrorCode::BadInput, "NaN"));
    out.push_back(make(Defect::InfWeights, "an Inf at sample 0",
                       buildNpy(kNpyDict, floatBytes({1, kInf, 3, 4, 5, 6})), name,
                       ErrorCode::BadInput, "Inf"));
    return out;
}

// ---- zip and .npz ------------------------------------------------------------------------------

struct ZipLayout {
    Bytes bytes;
    std::vector<std::size_t> local;    ///< local header offsets
    std::vector<std::size_t> data;     ///< member data offsets
    std::vector<std::size_t> central;  ///< central directory entry offsets
    std::size_t cdOffset = 0;
    std::size_t eocd = 0;
};

struct ZipMemberSpec {
    ZipMemberSpec(ZipMember m) : member(std::move(m)) {}
    ZipMember member;
    std::uint16_t method = 0xFFFF;  ///< 0xFFFF: from member.deflate
    std::uint16_t flags = 0;
    std::optional<std::uint64_t> zip64Usize;  ///< uncompressed size claimed in a zip64 extra
};

ZipLayout zipLayout(const std::vector<ZipMemberSpec>& specs)
{
    ZipLayout z;
    struct Info {
        std::uint32_t crc;
        std::uint64_t csize;
        std::uint64_t usize;
        std::uint16_t method;
    };
    std::vector<Info> infos;
    for (const ZipMemberSpec& s : specs) {
        const ZipMember& m = s.member;
        const Bytes payload = m.deflate ? deflateBytes(m.data, -15) : m.data;
        Info info{crc(m.data), payload.size(), m.data.size(),
                  s.method != 0xFFFF ? s.method : static_cast<std::uint16_t>(m.deflate ? 8 : 0)};
        z.local.push_back(z.bytes.size());
        Bytes& b = z.bytes;
        putLe(b, 0x04034b50, 4);
        putLe(b, 20, 2);
        putLe(b, s.flags, 2);
        putLe(b, info.method, 2);
        putLe(b, 0, 4);  // time, date
        putLe(b, info.crc, 4);
        putLe(b, info.csize, 4);
        putLe(b, info.usize, 4);
        putLe(b, m.name.size(), 2);
        putLe(b, 0, 2);
        append(b, m.name);
        z.data.push_back(b.size());
        append(b, payload);
        infos.push_back(info);
    }
    z.cdOffset = z.bytes.size();
    for (std::size_t i = 0; i < specs.size(); ++i) {
        const ZipMemberSpec& s = specs[i];
        const Info& info = infos[i];
        Bytes& b = z.bytes;
        z.central.push_back(b.size());
        putLe(b, 0x02014b50, 4);
        putLe(b, 20, 2);
        putLe(b, 20, 2);
        putLe(b, s.flags, 2);
        putLe(b, info.method, 2);
        putLe(b, 0, 4);
        putLe(b, info.crc, 4);
        putLe(b, info.csize, 4);
        putLe(b, s.zip64Usize ? 0xFFFFFFFFu : info.usize, 4);
        putLe(b, s.member.name.size(), 2);
        putLe(b, s.zip64Usize ? 12 : 0, 2);  // extra length
        putLe(b, 0, 2);                       // comment length
        putLe(b, 0, 4);                       // disk, internal attributes
        putLe(b, 0, 4);                       // external attributes
        putLe(b, z.local[i], 4);
        append(b, s.member.name);
        if (s.zip64Usize) {
            putLe(b, 1, 2);
            putLe(b, 8, 2);
            putLe(b, *s.zip64Usize, 8);
        }
    }
    const std::size_t cdSize = z.bytes.size() - z.cdOffset;
    z.eocd = z.bytes.size();
    Bytes& b = z.bytes;
    putLe(b, 0x06054b50, 4);
    putLe(b, 0, 4);
    putLe(b, specs.size(), 2);
    putLe(b, specs.size(), 2);
    putLe(b, cdSize, 4);
    putLe(b, z.cdOffset, 4);
    putLe(b, 0, 2);
    return z;
}

std::vector<std::size_t> zipMarks(const ZipLayout& z)
{
    std::vector<std::size_t> m = {4, 30, z.cdOffset, z.eocd, z.eocd + 4, z.eocd + 10, z.eocd + 20,
                                  z.bytes.size() - 1};
    m.insert(m.end(), z.local.begin(), z.local.end());
    m.insert(m.end(), z.data.begin(), z.data.end());
    m.insert(m.end(), z.central.begin(), z.central.end());
    return m;
}

Bytes npyLabels(const std::vector<std::int64_t>& labels)
{
    Bytes data(labels.size() * 8);
    std::memcpy(data.data(), labels.data(), data.size());
    return buildNpy("{'descr': '<i8', 'fortran_order': False, 'shape': (" +
                        std::to_string(labels.size()) + ",), }",
                    data);
}

/// Shared by Zip and Npz: the container defects of an archive of `members`.
void addZipDefects(std::vector<CorruptFile>& out, const std::vector<ZipMemberSpec>& members,
                   const std::string& name)
{
    const ZipLayout z = zipLayout(members);
    addTruncations(out, z.bytes, zipMarks(z), name, "end of central directory|file is only");

    Bytes eocd = z.bytes;
    eocd[z.eocd + 1] = 'Q';
    out.push_back(make(Defect::BadMagic, "end record signature", eocd, name, ErrorCode::BadInput,
                       "no end of central directory record"));
    Bytes local = z.bytes;
    local[z.local.back() + 2] = 0;
    out.push_back(make(Defect::BadMagic, "local header signature", local, name,
                       ErrorCode::BadInput, "no local header"));
    Bytes central = z.bytes;
    central[z.central.back() + 3] = 9;
    out.push_back(make(Defect::BadMagic, "central header signature", central, name,
                       ErrorCode::BadInput, "missing or damaged"));
    Bytes count = z.bytes;
    setLe(count, z.eocd + 8, 500, 2);
    setLe(count, z.eocd + 10, 500, 2);
    out.push_back(make(Defect::CountPastEnd, "500 members declared", count, name,
                       ErrorCode::BadInput, "members cannot fit"));
    Bytes nameLen = z.bytes;
    setLe(nameLen, z.central.back() + 28, 0xFFFF, 2);
    out.push_back(make(Defect::CountPastEnd, "name length 65535", nameLen, name,
                       ErrorCode::BadInput, "runs past the end of the directory"));
    Bytes cd = z.bytes;
    setLe(cd, z.eocd + 16, static_cast<std::uint32_t>(z.bytes.size() + 100), 4);
    out.push_back(make(Defect::OffsetPastEnd, "central directory past the end", cd, name,
                       ErrorCode::BadInput, "lies past the end of the file"));
    Bytes localOffset = z.bytes;
    setLe(localOffset, z.central.back() + 42, static_cast<std::uint32_t>(z.cdOffset - 4), 4);
    out.push_back(make(Defect::OffsetPastEnd, "local header offset inside the directory",
                       localOffset, name, ErrorCode::BadInput, "outside the member data"));
    Bytes csize = z.bytes;
    setLe(csize, z.central.front() + 20, 0x7FFFFFF0u, 4);
    out.push_back(make(Defect::OffsetPastEnd, "compressed size 2 GiB", csize, name,
                       ErrorCode::BadInput, "run past the end of the file"));

    std::vector<ZipMemberSpec> huge = members;
    huge.front().zip64Usize = 100'000'000'000ull;
    out.push_back(make(Defect::HugeTensor, "member claims 100 GB (zip64)", zipLayout(huge).bytes,
                       name, ErrorCode::BadInput, "more than 16 GiB"));
    std::vector<ZipMemberSpec> bomb = members;
    bomb.back().zip64Usize = 10'000'000'000ull;
    out.push_back(make(Defect::HugeTensor, "deflated member claims 10 GB (zip64)",
                       zipLayout(bomb).bytes, name, ErrorCode::BadInput,
                       "which deflate cannot produce"));
    std::vector<ZipMemberSpec> lzma = members;
    lzma.front().method = 14;
    out.push_back(make(Defect::UnknownDtype, "method 14 (LZMA)", zipLayout(lzma).bytes, name,
                       ErrorCode::Unsupported, "compression method 14 (LZMA)"));
    std::vector<ZipMemberSpec> encrypted = members;
    encrypted.front().flags = 1;
    out.push_back(make(Defect::UnknownDtype, "encrypted member", zipLayout(encrypted).bytes, name,
                       ErrorCode::Unsupported, "is encrypted"));
    Bytes badCrc = z.bytes;
    badCrc[z.data.front() + 12] ^= 0x40;  // a data byte of the stored first member
    out.push_back(make(Defect::BadChecksum, "stored data byte changed", badCrc, name,
                       ErrorCode::BadInput, "CRC-32"));
    Bytes badDeflate = z.bytes;
    badDeflate[z.data.back()] ^= 0xFF;
    badDeflate[z.data.back() + 1] ^= 0xFF;
    out.push_back(make(Defect::BadChecksum, "deflate stream damaged", badDeflate, name,
                       ErrorCode::BadInput, "corrupt|CRC-32|decompresses to|ends early"));
}

std::vector<CorruptFile> zipDefects()
{
    const std::string name = "archive.zip";
    std::vector<CorruptFile> out;
    Bytes text;
    for (int i = 0; i < 3; ++i)
        append(text, "hello zip, line " + std::to_string(i) + "\n");
    Bytes pattern(300);
    for (std::size_t i = 0; i < pattern.size(); ++i)
        pattern[i] = static_cast<std::uint8_t>((i * i) % 7);
    const std::vector<ZipMemberSpec> members = {{{"a.txt", text, false}}, {{"b.bin", pattern, true}}};
    out.push_back(make(Defect::None, "a.txt stored, b.bin deflated", zipLayout(members).bytes, name,
                       std::nullopt));
    addZipDefects(out, members, name);
    return out;
}

std::vector<CorruptFile> npzDefects()
{
    const std::string name = "data.npz";
    std::vector<CorruptFile> out;
    const Bytes x = buildNpy(kNpyDict, floatBytes({1, 2, 3, 4, 5, 6}));
    const std::vector<ZipMemberSpec> members = {{{"x.npy", x, false}},
                                                {{"y.npy", npyLabels({0, 1}), true}}};
    out.push_back(make(Defect::None, "x.npy stored, y.npy deflated", zipLayout(members).bytes, name,
                       std::nullopt));
    addZipDefects(out, members, name);
    out.push_back(make(Defect::DuplicateName, "x.npy twice",
                       zipLayout({members[0], members[0], members[1]}).bytes, name,
                       ErrorCode::BadInput, "appears twice"));
    const Bytes hugeX =
        buildNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (25000000000,), }",
                 floatBytes({1, 2}));
    out.push_back(make(Defect::HugeTensor, "x.npy claims 100 GB",
                       zipLayout({{{"x.npy", hugeX, true}}, members[1]}).bytes, name,
                       ErrorCode::BadInput, "needs 100000000000 bytes"));
    const Bytes complexX =
        buildNpy("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", floatBytes({1, 2, 3, 4, 5, 6}));
    out.push_back(make(Defect::UnknownDtype, "x.npy of <c8",
                       zipLayout({{{"x.npy", complexX, false}}, members[1]}).bytes, name,
                       ErrorCode::Unsupported, "'<c8'"));
    out.push_back(make(Defect::CountPastEnd, "y.npy: 3 labels for 2 samples",
                       zipLayout({members[0], {{"y.npy", npyLabels({0, 1, 2}), true}}}).bytes,
                       name, ErrorCode::BadInput, "has 2 samples but 'y' has 3 labels"));
    const Bytes nanX = buildNpy(kNpyDict, floatBytes({1, 2, 3, kNaN, 5, 6}));
    out.push_back(make(Defect::NanWeights, "x.npy with a NaN",
                       zipLayout({{{"x.npy", nanX, true}}, members[1]}).bytes, name,
                       ErrorCode::BadInput, "NaN"));
    const Bytes infX = buildNpy(kNpyDict, floatBytes({1, 2, 3, 4, 5, -kInf}));
    out.push_back(make(Defect::InfWeights, "x.npy with -Inf",
                       zipLayout({{{"x.npy", infX, false}}, members[1]}).bytes, name,
                       ErrorCode::BadInput, "Inf"));
    return out;
}

// ---- images ------------------------------------------------------------------------------------

struct PngSpec {
    std::uint32_t width = 4;
    std::uint32_t height = 4;
    std::uint8_t depth = 8;
    std::uint8_t colorType = 0;  ///< grey
    std::optional<std::uint32_t> idatLength;  ///< overrides the IDAT length field
    bool corruptIdat = false;
};

void pngChunk(Bytes& b, const char* type, const Bytes& payload,
              std::optional<std::uint32_t> lengthOverride = std::nullopt)
{
    putBe32(b, lengthOverride.value_or(static_cast<std::uint32_t>(payload.size())));
    const std::size_t start = b.size();
    append(b, std::string_view(type, 4));
    append(b, payload);
    putBe32(b, crc(b, start));
}

Bytes pngFile(const PngSpec& spec, std::vector<std::size_t>* marks = nullptr)
{
    Bytes b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    std::vector<std::size_t> m = {4, 8};
    Bytes ihdr;
    putBe32(ihdr, spec.width);
    putBe32(ihdr, spec.height);
    ihdr.insert(ihdr.end(), {spec.depth, spec.colorType, 0, 0, 0});
    pngChunk(b, "IHDR", ihdr);
    m.push_back(b.size());
    // 4 x 4 grey rows, each after its filter byte 0 (as many rows as the real image has).
    Bytes raw;
    for (int y = 0; y < 4; ++y) {
        raw.push_back(0);
        for (int x = 0; x < 4; ++x)
            raw.push_back(static_cast<std::uint8_t>(x * 60 + y * 5));
    }
    Bytes idat = deflateBytes(raw, 15);
    if (spec.corruptIdat) {
        idat[3] ^= 0xFF;
        idat[4] ^= 0xFF;
    }
    m.push_back(b.size() + 8);
    m.push_back(b.size() + 8 + idat.size() / 2);
    pngChunk(b, "IDAT", idat, spec.idatLength);
    m.push_back(b.size());
    pngChunk(b, "IEND", {});
    if (marks)
        *marks = m;
    return b;
}

std::vector<CorruptFile> imageDefects()
{
    const std::string png = "a.png";
    const std::string jpg = "a.jpg";
    const std::string reason = "cannot read image|cannot decode image";
    std::vector<CorruptFile> out;
    std::vector<std::size_t> marks;
    const Bytes base = pngFile({}, &marks);
    out.push_back(make(Defect::None, "PNG 4x4 grey", base, png, std::nullopt));
    const Bytes jpeg = readTestFile("images/square/c.jpg");
    out.push_back(make(Defect::None, "JPEG (tests/data/images/square/c.jpg)", jpeg, jpg,
                       std::nullopt));
    addTruncations(out, base, marks, png, reason);
    // JPEG: cut before the start of scan; after it stb decodes what is there (missing entropy
    // data reads as zeros), which is a clean success.
    std::vector<std::size_t> jpegMarks;
    for (std::size_t i = 0; i + 1 < jpeg.size(); ++i)
        if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xDA) {
            for (std::size_t j = 0; j + 1 < i; ++j)
                if (jpeg[j] == 0xFF && jpeg[j + 1] != 0 && jpeg[j + 1] != 0xFF)
                    jpegMarks.push_back(j);
            jpegMarks.push_back(i);
            break;
        }
    addTruncations(out, jpeg, jpegMarks, jpg, reason);

    Bytes magic = base;
    magic[1] = 'X';
    out.push_back(make(Defect::BadMagic, "PNG signature", magic, png, ErrorCode::BadInput, reason));
    Bytes jpegMagic = jpeg;
    jpegMagic[1] = 0xD9;
    out.push_back(make(Defect::BadMagic, "JPEG SOI", jpegMagic, jpg, ErrorCode::BadInput, reason));
    Bytes dht = jpeg;  // the first Huffman table's 16 counts made to add up to 272 (> 256)
    for (std::size_t i = 0; i + 21 < dht.size(); ++i)
        if (dht[i] == 0xFF && dht[i + 1] == 0xC4) {
            std::fill(dht.begin() + static_cast<std::ptrdiff_t>(i + 5),
                      dht.begin() + static_cast<std::ptrdiff_t>(i + 21), 0x11);
            break;
        }
    out.push_back(make(Defect::CountPastEnd, "JPEG Huffman table of 272 codes", dht, jpg,
                       ErrorCode::BadInput, "Huffman table of 272 codes"));
    Bytes filled(8, 0xFF);  // fill bytes before SOI: stb still reads it as a JPEG
    append(filled, dht);
    out.push_back(make(Defect::CountPastEnd, "the same after 8 fill bytes", filled, jpg,
                       ErrorCode::BadInput, "Huffman table of 272 codes"));
    for (std::size_t i = 0; i + 5 < jpeg.size(); ++i)
        if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC4) {
            // The counts run into the end of the file: 1 + 0xFF + 0xD9 (EOI) = 473 codes.
            Bytes cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(i + 5));
            cut.insert(cut.end(), {0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xD9});
            out.push_back(make(Defect::CountPastEnd, "JPEG Huffman counts cut short by the end",
                               cut, jpg, ErrorCode::BadInput, "Huffman table of 473 codes"));
            break;
        }
    PngSpec length;
    length.idatLength = 0x7FFFFFF0u;
    out.push_back(make(Defect::CountPastEnd, "IDAT length 2 GiB", pngFile(length), png,
                       ErrorCode::BadInput, reason));
    PngSpec rows;
    rows.height = 40;
    out.push_back(make(Defect::OffsetPastEnd, "IHDR says 40 rows, IDAT holds 4", pngFile(rows), png,
                       ErrorCode::BadInput, reason));
    PngSpec dims;
    dims.width = dims.height = 0x7FFFFFFFu;
    out.push_back(make(Defect::DimOverflow, "2^31-1 x 2^31-1 pixels", pngFile(dims), png,
                       ErrorCode::BadInput, reason));
    PngSpec huge;
    huge.width = huge.height = 160000;  // 25.6 G pixels: 100 GB as float32
    out.push_back(make(Defect::HugeTensor, "160000 x 160000 pixels (100 GB as float)",
                       pngFile(huge), png, ErrorCode::BadInput, reason));
    PngSpec big;
    big.width = big.height = 100000;  // 10 G pixels: 40 GB as float32, under the 64 GiB cap
    out.push_back(make(Defect::HugeTensor, "100000 x 100000 pixels (40 GB as float)",
                       pngFile(big), png, ErrorCode::BadInput, reason));
    Bytes jpegHuge = jpeg;  // SOF0: FF C0, length (2), precision (1), height (2), width (2)
    for (std::size_t i = 0; i + 8 < jpegHuge.size(); ++i)
        if (jpegHuge[i] == 0xFF && jpegHuge[i + 1] == 0xC0) {
            jpegHuge[i + 5] = jpegHuge[i + 6] = jpegHuge[i + 7] = jpegHuge[i + 8] = 0xFF;
            break;
        }
    out.push_back(make(Defect::HugeTensor, "JPEG 65535 x 65535 pixels", jpegHuge, jpg,
                       ErrorCode::BadInput, reason));
    PngSpec color;
    color.colorType = 5;
    out.push_back(make(Defect::UnknownDtype, "PNG colour type 5", pngFile(color), png,
                       ErrorCode::BadInput, reason));
    PngSpec depth;
    depth.depth = 3;
    out.push_back(make(Defect::UnknownDtype, "PNG bit depth 3", pngFile(depth), png,
                       ErrorCode::BadInput, reason));
    PngSpec deflate;
    deflate.corruptIdat = true;
    out.push_back(make(Defect::BadChecksum, "IDAT deflate stream damaged", pngFile(deflate), png,
                       ErrorCode::BadInput, reason));
    return out;
}

// ---- TorchScript / torch.save ------------------------------------------------------------------

/// Writes the pickle opcodes torch writes (protocol 2), remembering where each opcode starts.
struct PickleWriter {
    Bytes b;
    std::vector<std::size_t> ops;

    void op(std::uint8_t code)
    {
        ops.push_back(b.size());
        b.push_back(code);
    }
    void global(const std::string& module, const std::string& name)
    {
        op('c');
        append(b, module + "\n" + name + "\n");
    }
    void str(const std::string& s)
    {
        op('X');
        putLe(b, s.size(), 4);
        append(b, s);
    }
    /// BININT1 / BININT2 / BININT / LONG1 as Python picks them.
    void integer(std::int64_t v)
    {
        if (v >= 0 && v < 256) {
            op('K');
            b.push_back(static_cast<std::uint8_t>(v));
        } else if (v >= 0 && v < 65536) {
            op('M');
            putLe(b, static_cast<std::uint64_t>(v), 2);
        } else if (v >= INT32_MIN && v <= INT32_MAX) {
            op('J');
            putLe(b, static_cast<std::uint64_t>(v), 4);
        } else {
            op(0x8a);
            b.push_back(8);
            putLe(b, static_cast<std::uint64_t>(v), 8);
        }
    }
    void ints(const std::vector<std::int64_t>& values)
    {
        op('(');
        for (std::int64_t v : values)
            integer(v);
        op('t');
    }
};

/// One tensor record of data.pkl: _rebuild_tensor_v2(storage pid, offset, size, stride, ...).
struct TsTensor {
    std::string name;
    std::vector<std::int64_t> size;
    std::vector<std::int64_t> stride;
    std::string key;                    ///< storage member data/<key>
    std::int64_t numel = 0;             ///< elements the storage record claims
    std::int64_t offset = 0;
    std::string storageClass = "FloatStorage";
    std::string pidTag = "storage";
    std::string group;                  ///< non-empty: stored as data.pkl[group][name]
};

/// A torch.save state dict (or, with `module`, a TorchScript module with its code file) of a
/// PyTorch nn.LSTM(2, 3): four float tensors, each in a storage of its own.
struct TsSpec {
    std::string prefix = "model/";
    bool module = false;
    std::vector<TsTensor> tensors;
    std::map<std::string, Bytes> storages;
    std::string byteorder = "little";
    bool deflateLast = true;            ///< the last member deflated (torch stores; zip allows)
    std::string duplicateMember;        ///< a member name written twice
    std::optional<std::pair<std::string, std::string>> duplicateKey;  ///< key set twice
};

TsTensor tsTensor(std::string name, std::vector<std::int64_t> size,
                  std::vector<std::int64_t> stride, std::string key, std::int64_t numel,
                  std::int64_t offset = 0)
{
    TsTensor t;
    t.name = std::move(name);
    t.size = std::move(size);
    t.stride = std::move(stride);
    t.key = std::move(key);
    t.numel = numel;
    t.offset = offset;
    return t;
}

std::vector<float> tsValues(std::size_t n, int seed)
{
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = 0.5f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(seed));
    return v;
}

TsSpec tsBase()
{
    TsSpec s;
    s.tensors = {tsTensor("weight_ih_l0", {12, 2}, {2, 1}, "0", 24),
                 tsTensor("weight_hh_l0", {12, 3}, {3, 1}, "1", 36),
                 tsTensor("bias_ih_l0", {12}, {1}, "2", 12),
                 tsTensor("bias_hh_l0", {12}, {1}, "3", 12)};
    for (int k = 0; k < 4; ++k)
        s.storages[std::to_string(k)] =
            floatBytes(tsValues(static_cast<std::size_t>(s.tensors[k].numel), k));
    return s;
}

void tsTensorRecord(PickleWriter& w, const TsTensor& t)
{
    w.global("torch._utils", "_rebuild_tensor_v2");
    w.op('(');
    w.op('(');
    w.str(t.pidTag);
    w.global("torch", t.storageClass);
    w.str(t.key);
    w.str("cpu");
    w.integer(t.numel);
    w.op('t');
    w.op('Q');
    w.integer(t.offset);
    w.ints(t.size);
    w.ints(t.stride);
    w.op(0x89);  // requires_grad False
    w.global("collections", "OrderedDict");
    w.op(')');
    w.op('R');
    w.op('t');
    w.op('R');
}

PickleWriter tsPickle(const TsSpec& s)
{
    PickleWriter w;
    w.op(0x80);
    w.b.push_back(2);
    if (s.module) {
        w.global("__torch__.torch.nn.modules.rnn", "LSTM");
        w.op(')');
        w.op(0x81);  // NEWOBJ
        w.op('}');
    } else {
        w.global("collections", "OrderedDict");
        w.op(')');
        w.op('R');
    }
    w.op('(');
    for (const TsTensor& t : s.tensors) {
        if (t.group.empty()) {
            w.str(t.name);
            tsTensorRecord(w, t);
        } else {
            w.str(t.group);
            w.op('}');
            w.op('(');
            w.str(t.name);
            tsTensorRecord(w, t);
            w.op('u');
        }
    }
    if (s.module) {
        w.str("training");
        w.op(0x89);
    }
    w.op('u');
    if (s.duplicateKey) {
        // The key set again with a copy of another tensor's record: Python keeps the last.
        w.str(s.duplicateKey->first);
        for (const TsTensor& t : s.tensors)
            if (t.name == s.duplicateKey->second)
                tsTensorRecord(w, TsTensor(t));
        w.op('s');
    }
    if (s.module)
        w.op('b');  // BUILD: the dict is the module's state
    w.op('.');
    return w;
}

const char* kTsCode = "class LSTM(Module):\n"
                      "  __parameters__ = [\"weight_ih_l0\", ]\n"
                      "  training : bool\n"
                      "  mode : Final[str] = \"LSTM\"\n"
                      "  batch_first : Final[bool] = True\n"
                      "  bidirectional : Final[bool] = False\n"
                      "  def forward(self: __torch__.torch.nn.modules.rnn.LSTM) -> None:\n"
                      "    return None\n";

/// data.pkl first, the storages last (the last one deflated): the container defects shared
/// with the zip formats then land on members the reader reads.
std::vector<ZipMemberSpec> tsMembers(const TsSpec& s, const Bytes& pickle)
{
    std::vector<ZipMemberSpec> m;
    m.push_back({{s.prefix + "data.pkl", pickle, false}});
    if (!s.byteorder.empty())
        m.push_back({{s.prefix + "byteorder", Bytes(s.byteorder.begin(), s.byteorder.end()), false}});
    if (s.module) {
        const std::string code = kTsCode;
        m.push_back({{s.prefix + "code/__torch__/torch/nn/modules/rnn.py",
                      Bytes(code.begin(), code.end()), true}});
        m.push_back({{s.prefix + "constants.pkl", Bytes{0x80, 2, ')', '.'}, false}});
    }
    m.push_back({{s.prefix + "version", Bytes{'3', '\n'}, false}});
    std::size_t i = 0;
    for (const auto& [key, data] : s.storages) {
        const bool last = ++i == s.storages.size();
        m.push_back({{s.prefix + "data/" + key, data, last && s.deflateLast}});
        if (s.prefix + "data/" + key == s.duplicateMember)
            m.push_back({{s.prefix + "data/" + key, data, false}});
    }
    return m;
}

Bytes tsFile(const TsSpec& s) { return zipLayout(tsMembers(s, tsPickle(s).b)).bytes; }

std::vector<CorruptFile> torchScriptDefects()
{
    const std::string name = "model.pt";
    std::vector<CorruptFile> out;
    const TsSpec base = tsBase();
    auto add = [&](Defect d, const std::string& note, const TsSpec& s,
                   std::optional<ErrorCode> code = std::nullopt, const std::string& text = {}) {
        out.push_back(make(d, note, tsFile(s), name, code, text));
    };
    auto edit = [&](std::size_t tensor, auto&& change) {
        TsSpec s = base;
        change(s.tensors.at(tensor));
        return s;
    };
    add(Defect::None, "torch.save state dict of LSTM(2, 3)", base);
    TsSpec script = base;
    script.module = true;
    script.prefix = "lstm/";
    add(Defect::None, "TorchScript module with code and Final constants", script);
    TsSpec shared = base;
    shared.tensors[2] = tsTensor("bias_ih_l0", {12}, {1}, "2", 24, 0);
    shared.tensors[3] = tsTensor("bias_hh_l0", {12}, {1}, "2", 24, 12);
    shared.storages.erase("3");
    shared.storages["2"] = floatBytes(tsValues(24, 2));
    add(Defect::None, "both biases are views of one storage", shared);
    TsSpec dupKey = base;
    dupKey.duplicateKey = std::make_pair(std::string("bias_hh_l0"), std::string("bias_ih_l0"));
    add(Defect::DuplicateName, "key set twice in data.pkl (Python keeps the last value)", dupKey);

    // The container: every zip boundary, then the defects shared with the zip formats.
    const std::vector<ZipMemberSpec> members = tsMembers(base, tsPickle(base).b);
    const ZipLayout z = zipLayout(members);
    addTruncations(out, z.bytes, zipMarks(z), name, "end of central directory|file is only");
    const std::size_t zipFirst = out.size();
    addZipDefects(out, members, name);
    // A member claiming gigabytes: the archive reader refuses it before the zip reader's own
    // checks (its members may not decompress to more than 16 times the file).
    for (std::size_t i = zipFirst; i < out.size(); ++i)
        if (out[i].defect == Defect::HugeTensor)
            out[i].expectText += "|its members decompress to more than 16 times the file's";

    // data.pkl cut short: at every opcode, and one byte into each (inside its argument).
    const PickleWriter pickle = tsPickle(base);
    std::set<std::size_t> cuts;
    for (std::size_t at : pickle.ops) {
        cuts.insert(at);
        cuts.insert(at + 1);
    }
    for (std::size_t cut : cuts) {
        if (cut == 0 || cut >= pickle.b.size())
            continue;
        const Bytes shorter(pickle.b.begin(), pickle.b.begin() + static_cast<std::ptrdiff_t>(cut));
        out.push_back(make(Defect::Truncated,
                           "data.pkl cut at " + std::to_string(cut) + " of " +
                               std::to_string(pickle.b.size()),
                           zipLayout(tsMembers(base, shorter)).bytes, name, ErrorCode::BadInput,
                           "data.pkl: the pickle ends"));
    }
    Bytes stopFirst = pickle.b;
    stopFirst[2] = '.';
    out.push_back(make(Defect::Truncated, "data.pkl: STOP before anything is pushed",
                       zipLayout(tsMembers(base, stopFirst)).bytes, name, ErrorCode::BadInput,
                       "STOP with an empty stack"));

    // Not an archive torch 1.6+ writes.
    out.push_back(make(Defect::BadMagic, "a legacy (pre-1.6) torch.save pickle",
                       tsPickle(base).b, name, ErrorCode::Unsupported, "legacy"));
    out.push_back(make(Defect::BadMagic, "a zip without data.pkl",
                       buildZip({{"weights/0", floatBytes({1, 2}), false}}), name,
                       ErrorCode::BadInput, "without data.pkl"));
    TsSpec big = base;
    big.byteorder = "big";
    add(Defect::BadMagic, "byteorder 'big'", big, ErrorCode::Unsupported, "big-endian");
    Bytes inst = pickle.b;
    inst[pickle.ops.at(3)] = 'i';  // the REDUCE that makes the OrderedDict, now INST
    out.push_back(make(Defect::UnknownDtype, "opcode INST (0x69), which runs code",
                       zipLayout(tsMembers(base, inst)).bytes, name, ErrorCode::BadInput,
                       "unsupported pickle opcode 0x69"));

    // Storage records against their members.
    add(Defect::CountPastEnd, "storage claims 200 floats, its member holds 24",
        edit(0, [](TsTensor& t) { t.numel = 200; }), ErrorCode::BadInput,
        "more than the 96 bytes of its member");
    add(Defect::HugeTensor, "storage claims 25 G floats (100 GB)",
        edit(0, [](TsTensor& t) { t.numel = static_cast<std::int64_t>(kHugeElements); }),
        ErrorCode::BadInput, "more than the 96 bytes of its member");
    add(Defect::OffsetPastEnd, "offset 20 into a storage of 12",
        edit(2, [](TsTensor& t) { t.offset = 20; }), ErrorCode::BadInput,
        "past the end of its storage");
    add(Defect::CountPastEnd, "shape [40, 2] over a storage of 24",
        edit(0, [](TsTensor& t) { t.size = {40, 2}; }), ErrorCode::BadInput,
        "past the end of its storage");
    add(Defect::OffsetPastEnd, "storage key 'nine' has no member",
        edit(1, [](TsTensor& t) { t.key = "nine"; }), ErrorCode::BadInput,
        "'data/nine' is missing from the archive");
    add(Defect::DimOverflow, "stride 2^62",
        edit(0, [](TsTensor& t) { t.stride = {std::int64_t{1} << 62, 1}; }), ErrorCode::BadInput,
        "overflows");
    add(Defect::DimOverflow, "shape [2^31, 2^31, 2^31] at stride 0",
        edit(0,
             [](TsTensor& t) {
                 t.size = {std::int64_t{1} << 31, std::int64_t{1} << 31, std::int64_t{1} << 31};
                 t.stride = {0, 0, 0};
             }),
        ErrorCode::BadInput, "overflows");
    add(Defect::HugeTensor, "one float viewed 25 G times (stride 0)",
        edit(2,
             [](TsTensor& t) {
                 t.size = {static_cast<std::int64_t>(kHugeElements)};
                 t.stride = {0};
             }),
        ErrorCode::BadInput, "would take 100000000000 bytes");
    add(Defect::DimOverflow, "negative stride",
        edit(1, [](TsTensor& t) { t.stride = {3, -1}; }), ErrorCode::BadInput,
        "negative size or stride");
    add(Defect::CountPastEnd, "size and stride of different lengths",
        edit(1, [](TsTensor& t) { t.stride = {3}; }), ErrorCode::BadInput,
        "tuples of one length");
    add(Defect::UnknownDtype, "storage class ComplexFloatStorage",
        edit(0, [](TsTensor& t) { t.storageClass = "ComplexFloatStorage"; }),
        ErrorCode::Unsupported, "storage type torch.ComplexFloatStorage is not supported");
    add(Defect::UnknownDtype, "storage class QInt8Storage",
        edit(3, [](TsTensor& t) { t.storageClass = "QInt8Storage"; }), ErrorCode::Unsupported,
        "storage type torch.QInt8Storage is not supported");
    add(Defect::UnknownDtype, "persistent id tagged 'blob', not 'storage'",
        edit(0, [](TsTensor& t) { t.pidTag = "blob"; }), ErrorCode::BadInput,
        "is not a ('storage', type, key, location, size) record");

    // Names.
    TsSpec dupMember = base;
    dupMember.duplicateMember = "model/data/1";
    add(Defect::DuplicateName, "member data/1 twice", dupMember, ErrorCode::BadInput,
        "two members named 'model/data/1'");
    TsSpec dupTensor = base;
    dupTensor.tensors.push_back(tsTensor("b", {2}, {1}, "2", 12));
    dupTensor.tensors.back().group = "a";
    dupTensor.tensors.push_back(tsTensor("a.b", {2}, {1}, "3", 12));
    add(Defect::DuplicateName, "tensor 'a.b' and dict 'a' holding 'b'", dupTensor,
        ErrorCode::BadInput, "two tensors are named 'a.b'");

    // Values: read, then refused where quantization observes them.
    TsSpec nan = base;
    auto nanValues = tsValues(36, 1);
    nanValues[7] = kNaN;
    nan.storages["1"] = floatBytes(nanValues);
    add(Defect::NanWeights, "weight_hh_l0 with a NaN", nan, ErrorCode::BadInput,
        "'weight_hh_l0' holds NaN or infinite values");
    TsSpec inf = base;
    auto infValues = tsValues(12, 3);
    infValues[11] = -kInf;
    inf.storages["3"] = floatBytes(infValues);
    add(Defect::InfWeights, "bias_hh_l0 with -Inf", inf, ErrorCode::BadInput,
        "'bias_hh_l0' holds NaN or infinite values");
    return out;
}

// ---- random mutations --------------------------------------------------------------------------

/// One to four byte-level edits of the kinds fuzzers use: flip a bit, set a byte or a word to
/// an edge value, insert or delete a run, copy a run elsewhere, cut the tail.
Bytes mutate(Bytes b, std::mt19937_64& rng, std::string& note)
{
    auto pick = [&](std::size_t n) {
        return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n);
    };
    static constexpr std::uint64_t kEdges[] = {0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF,
                                               0x80000000, 0xFFFFFFFF, 1ull << 32, 1ull << 40,
                                               0x7FFFFFFFFFFFFFFF, ~0ull};
    const int edits = 1 + static_cast<int>(pick(4));
    for (int e = 0; e < edits; ++e) {
        const std::size_t at = pick(b.size());
        switch (pick(7)) {
        case 0:
            if (!b.empty()) {
                b[at] ^= static_cast<std::uint8_t>(1u << pick(8));
                note += " flip@" + std::to_string(at);
            }
            break;
        case 1:
            if (!b.empty()) {
                b[at] = static_cast<std::uint8_t>(kEdges[pick(std::size(kEdges))]);
                note += " byte@" + std::to_string(at);
            }
            break;
        case 2: {
            const int width = pick(2) ? 8 : 4;
            if (b.size() >= static_cast<std::size_t>(width)) {
                const std::size_t w = pick(b.size() - width + 1);
                setLe(b, w, kEdges[pick(std::size(kEdges))], width);
                note += " word" + std::to_string(width * 8) + "@" + std::to_string(w);
            }
            break;
        }
        case 3: {
            const std::size_t n = 1 + pick(16);
            Bytes run(n);
            for (auto& x : run)
                x = static_cast<std::uint8_t>(rng());
            b.insert(b.begin() + static_cast<std::ptrdiff_t>(std::min(at, b.size())), run.begin(),
                     run.end());
            note += " insert" + std::to_string(n) + "@" + std::to_string(at);
            break;
        }
        case 4: {
            const std::size_t n = std::min(b.size() - std::min(at, b.size()), 1 + pick(16));
            b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                    b.begin() + static_cast<std::ptrdiff_t>(at + n));
            note += " delete" + std::to_string(n) + "@" + std::to_string(at);
            break;
        }
        case 5: {
            if (b.size() < 2)
                break;
            const std::size_t n = 1 + pick(std::min<std::size_t>(32, b.size() - 1));
            const std::size_t src = pick(b.size() - n + 1);
            const std::size_t dst = pick(b.size() - n + 1);
            std::memmove(b.data() + dst, b.data() + src, n);
            note += " copy" + std::to_string(n) + "@" + std::to_string(src) + "->" +
                    std::to_string(dst);
            break;
        }
        default:
            b.resize(at);
            note += " cut@" + std::to_string(at);
            break;
        }
    }
    return b;
}

} // namespace

std::string_view formatName(CorruptFormat format)
{
    switch (format) {
    case CorruptFormat::Onnx: return "onnx";
    case CorruptFormat::Safetensors: return "safetensors";
    case CorruptFormat::Gguf: return "gguf";
    case CorruptFormat::Idx: return "idx";
    case CorruptFormat::Npy: return "npy";
    case CorruptFormat::Npz: return "npz";
    case CorruptFormat::Image: return "image";
    case CorruptFormat::Zip: return "zip";
    case CorruptFormat::TorchScript: return "torchscript";
    }
    return "?";
}

std::string_view defectName(Defect defect)
{
    switch (defect) {
    case Defect::None: return "None";
    case Defect::Truncated: return "Truncated";
    case Defect::BadMagic: return "BadMagic";
    case Defect::CountPastEnd: return "CountPastEnd";
    case Defect::OffsetPastEnd: return "OffsetPastEnd";
    case Defect::DimOverflow: return "DimOverflow";
    case Defect::HugeTensor: return "HugeTensor";
    case Defect::UnknownDtype: return "UnknownDtype";
    case Defect::DuplicateName: return "DuplicateName";
    case Defect::BadChecksum: return "BadChecksum";
    case Defect::NanWeights: return "NanWeights";
    case Defect::InfWeights: return "InfWeights";
    case Defect::RandomMutation: return "RandomMutation";
    }
    return "?";
}

std::vector<std::uint8_t> buildNpy(const std::string& dict, const std::vector<std::uint8_t>& data)
{
    std::string header = dict;
    // numpy pads with spaces so that 10 + header (with its '\n') is a multiple of 64.
    while ((10 + header.size() + 1) % 64)
        header += ' ';
    header += '\n';
    Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    putLe(b, header.size(), 2);
    append(b, header);
    append(b, data);
    return b;
}

std::vector<std::uint8_t> buildZip(const std::vector<ZipMember>& members)
{
    std::vector<ZipMemberSpec> specs;
    for (const ZipMember& m : members)
        specs.push_back({m});
    return zipLayout(specs).bytes;
}

std::vector<CorruptFile> structuralDefects(CorruptFormat format)
{
    switch (format) {
    case CorruptFormat::Onnx: return onnxDefects();
    case CorruptFormat::Safetensors: return safetensorsDefects();
    case CorruptFormat::Gguf: return ggufDefects();
    case CorruptFormat::Idx: return idxDefects();
    case CorruptFormat::Npy: return npyDefects();
    case CorruptFormat::Npz: return npzDefects();
    case CorruptFormat::Image: return imageDefects();
    case CorruptFormat::Zip: return zipDefects();
    case CorruptFormat::TorchScript: return torchScriptDefects();
    }
    return {};
}

std::vector<CorruptFile> corruptFiles(CorruptFormat format, std::size_t count, std::uint64_t seed)
{
    std::vector<CorruptFile> files = structuralDefects(format);
    const std::size_t structural = files.size();
    std::mt19937_64 rng(seed);
    while (files.size() < count) {
        // Half the mutations start from the valid file(s), half from a random defect.
        const std::size_t from =
            rng() % 2 ? 0 : static_cast<std::size_t>(rng() % structural);
        const CorruptFile& source = files[from];
        CorruptFile f;
        f.defect = Defect::RandomMutation;
        f.fileName = source.fileName;
        std::string note = "of " + std::string(defectName(source.defect)) + " (" + source.note +
                           "):";
        f.bytes = mutate(source.bytes, rng, note);
        f.note = std::move(note);
        files.push_back(std::move(f));
    }
    return files;
}

} // namespace bitlens::test
