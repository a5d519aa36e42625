#include "io/gguf.h"

#include "io/mapped_file.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <set>

namespace bitlens::io {

using formats::GgmlType;

namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr std::uint32_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
/// Arrays of arrays deeper than this are refused (each level recurses once).
constexpr int kMaxArrayDepth = 8;

/// Smallest encoding of one value of `type` (strings: the 8-byte length; arrays: element type
/// + count). Used to refuse counts the remaining bytes cannot hold before allocating.
std::uint64_t minEncodedBytes(GgufType type)
{
    switch (type) {
    case GgufType::UInt8:
    case GgufType::Int8:
    case GgufType::Bool:
        return 1;
    case GgufType::UInt16:
    case GgufType::Int16:
        return 2;
    case GgufType::UInt32:
    case GgufType::Int32:
    case GgufType::Float32:
        return 4;
    case GgufType::UInt64:
    case GgufType::Int64:
    case GgufType::Float64:
    case GgufType::String:
        return 8;
    case GgufType::Array:
        return 12;
    }
    return 1;
}

bool knownType(std::uint32_t id) { return id <= static_cast<std::uint32_t>(GgufType::Float64); }

/// Which torch dtype holds a plain ggml type (for zero-copy views), or Undefined.
at::ScalarType plainDtype(GgmlType type)
{
    switch (type) {
    case GgmlType::F32: return at::kFloat;
    case GgmlType::F16: return at::kHalf;
    case GgmlType::BF16: return at::kBFloat16;
    case GgmlType::F64: return at::kDouble;
    case GgmlType::I8: return at::kChar;
    case GgmlType::I16: return at::kShort;
    case GgmlType::I32: return at::kInt;
    case GgmlType::I64: return at::kLong;
    default: return at::ScalarType::Undefined;
    }
}

std::string neText(const std::vector<std::int64_t>& ne)
{
    std::string text = "[";
    for (std::size_t i = 0; i < ne.size(); ++i)
        text += (i ? ", " : "") + std::to_string(ne[i]);
    return text + "]";
}

} // namespace

std::string_view ggufTypeName(GgufType type)
{
    switch (type) {
    case GgufType::UInt8: return "uint8";
    case GgufType::Int8: return "int8";
    case GgufType::UInt16: return "uint16";
    case GgufType::Int16: return "int16";
    case GgufType::UInt32: return "uint32";
    case GgufType::Int32: return "int32";
    case GgufType::Float32: return "float32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::UInt64: return "uint64";
    case GgufType::Int64: return "int64";
    case GgufType::Float64: return "float64";
    }
    return "unknown";
}

GgufValue GgufValue::stringArray(const std::vector<std::string>& items)
{
    std::vector<GgufValue> values;
    values.reserve(items.size());
    for (const std::string& s : items)
        values.push_back(string(s));
    return array(GgufType::String, std::move(values));
}

GgufValue GgufValue::i32Array(const std::vector<std::int32_t>& items)
{
    std::vector<GgufValue> values;
    values.reserve(items.size());
    for (std::int32_t v : items)
        values.push_back(i32(v));
    return array(GgufType::Int32, std::move(values));
}

GgufValue GgufValue::f32Array(const std::vector<float>& items)
{
    std::vector<GgufValue> values;
    values.reserve(items.size());
    for (float v : items)
        values.push_back(f32(v));
    return array(GgufType::Float32, std::move(values));
}

bool GgufValue::isInteger() const
{
    return std::holds_alternative<std::uint64_t>(data) || std::holds_alternative<std::int64_t>(data);
}

bool GgufValue::isFloat() const { return type == GgufType::Float32 || type == GgufType::Float64; }

std::string GgufValue::describe() const
{
    const std::string name(ggufTypeName(type));
    if (const auto* u = std::get_if<std::uint64_t>(&data))
        return name + " " + std::to_string(*u);
    if (const auto* i = std::get_if<std::int64_t>(&data))
        return name + " " + std::to_string(*i);
    if (const auto* d = std::get_if<double>(&data))
        return name + " " + std::to_string(*d);
    if (const auto* b = std::get_if<bool>(&data))
        return name + (*b ? " true" : " false");
    if (const auto* s = std::get_if<std::string>(&data))
        return name + " \"" + (s->size() > 60 ? s->substr(0, 57) + "..." : *s) + "\"";
    const auto& items = std::get<std::vector<GgufValue>>(data);
    return "array[" + std::to_string(items.size()) + "] of " +
           std::string(ggufTypeName(elementType));
}

std::vector<std::int64_t> GgufTensorInfo::shape() const { return {ne.rbegin(), ne.rend()}; }

std::int64_t GgufTensorInfo::numel() const
{
    std::int64_t n = 1;
    for (std::int64_t d : ne)
        n *= d;
    return n;
}

// ---------------------------------------------------------------- parsing

/// Reads the header of a mapped GGUF file, checking each read against the bytes left.
class GgufParser {
public:
    GgufParser(GgufFile& out, std::span<const std::uint8_t> bytes)
        : m_out(out), m_bytes(bytes), m_path(out.m_path)
    {
    }

    Result<void> parse()
    {
        std::uint32_t magic = 0;
        if (!readU32(magic))
            return fail("file is too short for a GGUF header (" + std::to_string(m_bytes.size()) +
                        " bytes)");
        if (magic != kMagic)
            return failAt(0, "not a GGUF file (bad magic)");
        std::uint32_t version = 0;
        if (!readU32(version))
            return fail("file ends inside the header");
        if (version == 0x02000000u || version == 0x03000000u)
            return Error::unsupported(m_path, "big-endian GGUF files are not supported");
        if (version == 1)
            return Error::unsupported(m_path, "GGUF version 1 is not supported (only 2 and 3)");
        if (version != 2 && version != 3)
            return Error::unsupported(m_path, "unknown GGUF version " + std::to_string(version));
        m_out.m_version = version;
        std::uint64_t tensorCount = 0;
        std::uint64_t kvCount = 0;
        if (!readU64(tensorCount) || !readU64(kvCount))
            return fail("file ends inside the header");
        // A key/value needs at least a length, a type and one byte; a tensor info at least a
        // name length, n_dims, type and offset.
        if (kvCount > left() / 13)
            return failAt(16, "header claims " + std::to_string(kvCount) +
                                  " metadata entries, more than the file can hold");
        if (tensorCount > left() / 24)
            return failAt(8, "header claims " + std::to_string(tensorCount) +
                                 " tensors, more than the file can hold");

        m_out.m_kv.reserve(static_cast<std::size_t>(kvCount));
        for (std::uint64_t i = 0; i < kvCount; ++i) {
            const std::uint64_t at = m_pos;
            std::string key;
            if (!readString(key))
                return failAt(at, "metadata entry " + std::to_string(i) + ": key runs past the end of the file");
            std::uint32_t typeId = 0;
            if (!readU32(typeId))
                return failAt(at, "metadata '" + key + "': file ends before its type");
            if (!knownType(typeId))
                return failAt(m_pos - 4, "metadata '" + key + "' has unknown value type " +
                                             std::to_string(typeId));
            GgufValue value;
            auto ok = readValue(static_cast<GgufType>(typeId), value, 0, key);
            if (!ok)
                return ok.error();
            if (m_out.m_kvIndex.count(key))
                return failAt(at, "metadata key '" + key + "' appears twice");
            m_out.m_kvIndex.emplace(key, m_out.m_kv.size());
            m_out.m_kv.emplace_back(std::move(key), std::move(value));
        }

        if (const GgufValue* a = m_out.find("general.alignment")) {
            const auto* v = std::get_if<std::uint64_t>(&a->data);
            if (a->type != GgufType::UInt32 || !v)
                return fail("general.alignment is " + a->describe() + ", expected a uint32");
            if (*v == 0 || (*v & (*v - 1)) != 0)
                return fail("general.alignment " + std::to_string(*v) + " is not a power of two");
            m_out.m_alignment = *v;
        } else {
            m_out.m_alignment = kDefaultAlignment;
        }

        m_out.m_tensors.reserve(static_cast<std::size_t>(tensorCount));
        for (std::uint64_t i = 0; i < tensorCount; ++i) {
            auto ok = readTensorInfo(i);
            if (!ok)
                return ok.error();
        }
        const std::uint64_t align = m_out.m_alignment;
        const std::uint64_t dataStart = (m_pos + align - 1) / align * align;
        m_out.m_dataOffset = dataStart;
        const std::uint64_t dataSize = m_bytes.size() > dataStart ? m_bytes.size() - dataStart : 0;

        std::vector<const GgufTensorInfo*> byOffset;
        for (const GgufTensorInfo& t : m_out.m_tensors) {
            if (t.offset > dataSize || t.sizeBytes > dataSize - t.offset)
                return fail("tensor '" + t.name + "' (offset " + std::to_string(t.offset) + ", " +
                            std::to_string(t.sizeBytes) + " bytes) ends past the end of the file");
            byOffset.push_back(&t);
        }
        std::sort(byOffset.begin(), byOffset.end(),
                  [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
        for (std::size_t i = 1; i < byOffset.size(); ++i) {
            const GgufTensorInfo& prev = *byOffset[i - 1];
            if (prev.sizeBytes > 0 && byOffset[i]->sizeBytes > 0 &&
                byOffset[i]->offset < prev.offset + prev.sizeBytes)
                return fail("tensors '" + prev.name + "' and '" + byOffset[i]->name +
                            "' overlap in the data section");
        }
        return {};
    }

private:
    std::uint64_t left() const { return m_bytes.size() - m_pos; }

    Error fail(const std::string& why) const { return Error::badInput(m_path, why); }
    Error failAt(std::uint64_t at, const std::string& why) const
    {
        return Error::badInput(m_path, why, at);
    }

    template <typename T>
    bool readPod(T& v)
    {
        if (left() < sizeof(T))
            return false;
        std::memcpy(&v, m_bytes.data() + m_pos, sizeof(T));
        m_pos += sizeof(T);
        return true;
    }
    bool readU32(std::uint32_t& v) { return readPod(v); }
    bool readU64(std::uint64_t& v) { return readPod(v); }

    bool readString(std::string& s)
    {
        std::uint64_t len = 0;
        if (!readU64(len) || len > left())
            return false;
        s.assign(reinterpret_cast<const char*>(m_bytes.data() + m_pos), static_cast<std::size_t>(len));
        m_pos += len;
        return true;
    }

    Result<void> readValue(GgufType type, GgufValue& out, int depth, const std::string& key)
    {
        out.type = type;
        const std::uint64_t at = m_pos;
        auto truncated = [&] {
            return failAt(at, "metadata '" + key + "': " + std::string(ggufTypeName(type)) +
                                  " value runs past the end of the file");
        };
        switch (type) {
        case GgufType::UInt8: { std::uint8_t v; if (!readPod(v)) return truncated(); out.data = std::uint64_t{v}; break; }
        case GgufType::Int8: { std::int8_t v; if (!readPod(v)) return truncated(); out.data = std::int64_t{v}; break; }
        case GgufType::UInt16: { std::uint16_t v; if (!readPod(v)) return truncated(); out.data = std::uint64_t{v}; break; }
        case GgufType::Int16: { std::int16_t v; if (!readPod(v)) return truncated(); out.data = std::int64_t{v}; break; }
        case GgufType::UInt32: { std::uint32_t v; if (!readPod(v)) return truncated(); out.data = std::uint64_t{v}; break; }
        case GgufType::Int32: { std::int32_t v; if (!readPod(v)) return truncated(); out.data = std::int64_t{v}; break; }
        case GgufType::UInt64: { std::uint64_t v; if (!readPod(v)) return truncated(); out.data = v; break; }
        case GgufType::Int64: { std::int64_t v; if (!readPod(v)) return truncated(); out.data = v; break; }
        case GgufType::Float32: { float v; if (!readPod(v)) return truncated(); out.data = double{v}; break; }
        case GgufType::Float64: { double v; if (!readPod(v)) return truncated(); out.data = v; break; }
        case GgufType::Bool: {
            std::uint8_t v;
            if (!readPod(v))
                return truncated();
            if (v > 1)
                return failAt(at, "metadata '" + key + "': bool byte " + std::to_string(v) +
                                      " is neither 0 nor 1");
            out.data = v == 1;
            break;
        }
        case GgufType::String: {
            std::string s;
            if (!readString(s))
                return truncated();
            out.data = std::move(s);
            break;
        }
        case GgufType::Array: {
            if (depth >= kMaxArrayDepth)
                return failAt(at, "metadata '" + key + "': arrays nested deeper than " +
                                      std::to_string(kMaxArrayDepth) + " levels");
            std::uint32_t elemId = 0;
            std::uint64_t count = 0;
            if (!readU32(elemId) || !readU64(count))
                return truncated();
            if (!knownType(elemId))
                return failAt(at, "metadata '" + key + "': array of unknown value type " +
                                      std::to_string(elemId));
            const auto elem = static_cast<GgufType>(elemId);
            if (count > left() / minEncodedBytes(elem))
                return failAt(at, "metadata '" + key + "': array claims " + std::to_string(count) +
                                      " items of " + std::string(ggufTypeName(elem)) +
                                      ", more than the file can hold");
            out.elementType = elem;
            std::vector<GgufValue> items(static_cast<std::size_t>(count));
            for (GgufValue& item : items) {
                auto ok = readValue(elem, item, depth + 1, key);
                if (!ok)
                    return ok;
            }
            out.data = std::move(items);
            break;
        }
        }
        return {};
    }

    Result<void> readTensorInfo(std::uint64_t index)
    {
        const std::uint64_t at = m_pos;
        GgufTensorInfo t;
        if (!readString(t.name))
            return failAt(at, "tensor info " + std::to_string(index) + ": name runs past the end of the file");
        const std::string what = "tensor '" + t.name + "'";
        std::uint32_t nDims = 0;
        if (!readU32(nDims))
            return failAt(at, what + ": file ends inside its info");
        if (nDims > kMaxDims)
            return failAt(at, what + " has " + std::to_string(nDims) + " dimensions (at most 4)");
        std::int64_t numel = 1;
        for (std::uint32_t d = 0; d < nDims; ++d) {
            std::uint64_t dim = 0;
            if (!readU64(dim))
                return failAt(at, what + ": file ends inside its dimensions");
            if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
                (dim != 0 && static_cast<std::uint64_t>(numel) >
                                 static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / dim))
                return failAt(at, what + ": dimensions overflow the element count");
            numel *= static_cast<std::int64_t>(dim);
            t.ne.push_back(static_cast<std::int64_t>(dim));
        }
        std::uint32_t typeId = 0;
        if (!readU32(typeId) || !readU64(t.offset))
            return failAt(at, what + ": file ends inside its info");
        const formats::GgmlTypeTraits* traits = formats::ggmlTraits(typeId);
        if (!traits)
            return failAt(at, what + " has unknown ggml type " + std::to_string(typeId));
        t.type = traits->type;
        const std::int64_t rowLength = t.ne.empty() ? 1 : t.ne[0];
        if (rowLength % traits->blockSize != 0)
            return failAt(at, what + ": ne[0] = " + std::to_string(rowLength) +
                                  " is not a multiple of the " + std::string(traits->name) +
                                  " block size " + std::to_string(traits->blockSize));
        const auto bytes = formats::ggmlBytes(t.type, numel);
        if (!bytes)
            return failAt(at, what + ": " + neText(t.ne) + " of " + std::string(traits->name) +
                                  " overflows the byte count");
        t.sizeBytes = static_cast<std::uint64_t>(*bytes);
        if (t.offset % m_out.m_alignment != 0)
            return failAt(at, what + ": offset " + std::to_string(t.offset) +
                                  " is not a multiple of the alignment " +
                                  std::to_string(m_out.m_alignment));
        if (m_out.m_tensorIndex.count(t.name))
            return failAt(at, what + " appears twice");
        m_out.m_tensorIndex.emplace(t.name, m_out.m_tensors.size());
        m_out.m_tensors.push_back(std::move(t));
        return {};
    }

    GgufFile& m_out;
    std::span<const std::uint8_t> m_bytes;
    const std::string& m_path;
    std::uint64_t m_pos = 0;
};

Result<GgufFile> GgufFile::open(const std::string& path)
{
    try {
        auto file = MappedFile::open(path);
        if (!file)
            return file.error();
        GgufFile out;
        out.m_path = path;
        out.m_file = *file;
        GgufParser parser(out, (*file)->bytes());
        auto ok = parser.parse();
        if (!ok)
            return ok.error();
        return out;
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while reading", path);
    } catch (const std::length_error&) {
        return Error::runtime("out of memory while reading", path);
    }
}

const GgufValue* GgufFile::find(std::string_view key) const
{
    auto it = m_kvIndex.find(key);
    return it == m_kvIndex.end() ? nullptr : &m_kv[it->second].second;
}

namespace {

Error wrongType(const std::string& path, const std::string& key, const GgufValue& v,
                const std::string& expected)
{
    return Error::badInput(path, "key '" + key + "' is " + v.describe() + ", expected " + expected);
}

std::optional<std::int64_t> asInt(const GgufValue& v)
{
    if (const auto* i = std::get_if<std::int64_t>(&v.data))
        return *i;
    if (const auto* u = std::get_if<std::uint64_t>(&v.data))
        if (*u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            return static_cast<std::int64_t>(*u);
    return std::nullopt;
}

std::optional<double> asFloat(const GgufValue& v)
{
    if (const auto* d = std::get_if<double>(&v.data))
        return *d;
    if (const auto* i = std::get_if<std::int64_t>(&v.data))
        return static_cast<double>(*i);
    if (const auto* u = std::get_if<std::uint64_t>(&v.data))
        return static_cast<double>(*u);
    return std::nullopt;
}

} // namespace

Result<std::string> GgufFile::getString(const std::string& key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return Error::badInput(m_path, "missing key '" + key + "'");
    if (const auto* s = std::get_if<std::string>(&v->data))
        return *s;
    return wrongType(m_path, key, *v, "a string");
}

Result<std::int64_t> GgufFile::getInt(const std::string& key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return Error::badInput(m_path, "missing key '" + key + "'");
    if (auto i = asInt(*v))
        return *i;
    return wrongType(m_path, key, *v, "an integer");
}

Result<double> GgufFile::getFloat(const std::string& key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return Error::badInput(m_path, "missing key '" + key + "'");
    if (auto d = asFloat(*v))
        return *d;
    return wrongType(m_path, key, *v, "a number");
}

Result<bool> GgufFile::getBool(const std::string& key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return Error::badInput(m_path, "missing key '" + key + "'");
    if (const auto* b = std::get_if<bool>(&v->data))
        return *b;
    return wrongType(m_path, key, *v, "a bool");
}

Result<std::vector<std::string>> GgufFile::getStringArray(const std::string& key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return Error::badInput(m_path, "missing key '" + key + "'");
    const auto* items = std::get_if<std::vector<GgufValue>>(&v->data);
    if (!items || v->elementType != GgufType::String)
        return wrongType(m_path, key, *v, "an array of strings");
    std::vector<std::string> out;
    out.reserve(items->size());
    for (const GgufValue& item : *items)
        out.push_back(std::get<std::string>(item.data));
    return out;
}

Result<std::vector<std::int64_t>> GgufFile::getIntArray(const std::string& key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return Error::badInput(m_path, "missing key '" + key + "'");
    const auto* items = std::get_if<std::vector<GgufValue>>(&v->data);
    if (!items)
        return wrongType(m_path, key, *v, "an array of integers");
    std::vector<std::int64_t> out;
    out.reserve(items->size());
    for (const GgufValue& item : *items) {
        auto i = asInt(item);
        if (!i)
            return wrongType(m_path, key, *v, "an array of integers");
        out.push_back(*i);
    }
    return out;
}

Result<std::vector<double>> GgufFile::getFloatArray(const std::string& key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return Error::badInput(m_path, "missing key '" + key + "'");
    const auto* items = std::get_if<std::vector<GgufValue>>(&v->data);
    if (!items)
        return wrongType(m_path, key, *v, "an array of numbers");
    std::vector<double> out;
    out.reserve(items->size());
    for (const GgufValue& item : *items) {
        auto d = asFloat(item);
        if (!d)
            return wrongType(m_path, key, *v, "an array of numbers");
        out.push_back(*d);
    }
    return out;
}

const GgufTensorInfo* GgufFile::findTensor(std::string_view name) const
{
    auto it = m_tensorIndex.find(name);
    return it == m_tensorIndex.end() ? nullptr : &m_tensors[it->second];
}

std::span<const std::uint8_t> GgufFile::tensorBytes(const GgufTensorInfo& info) const
{
    return m_file->bytes().subspan(m_dataOffset + info.offset, info.sizeBytes);
}

Result<at::Tensor> GgufFile::tensorView(const std::string& name) const
{
    const GgufTensorInfo* info = findTensor(name);
    if (!info)
        return Error::badInput(m_path, "no tensor named '" + name + "'");
    std::uint8_t* data = m_file->mutableData() + m_dataOffset + info->offset;
    const at::ScalarType dtype = plainDtype(info->type);
    std::vector<std::int64_t> shape = info->shape();
    if (dtype == at::ScalarType::Undefined) {
        const auto& traits = formats::ggmlTraits(info->type);
        const std::int64_t rowBytes = (info->ne.empty() ? 1 : info->ne[0]) / traits.blockSize *
                                      traits.typeSize;
        const std::int64_t rows = rowBytes == 0 ? 0 : static_cast<std::int64_t>(info->sizeBytes) / rowBytes;
        shape = {rows, rowBytes};
    }
    const auto options = at::TensorOptions().dtype(dtype == at::ScalarType::Undefined ? at::kByte : dtype);
    try {
        if (info->sizeBytes == 0)
            return at::empty(shape, options);
        const int itemSize = static_cast<int>(c10::elementSize(options.dtype().toScalarType()));
        if (reinterpret_cast<std::uintptr_t>(data) % static_cast<std::uintptr_t>(itemSize) != 0) {
            at::Tensor copy = at::empty(shape, options);
            std::memcpy(copy.data_ptr(), data, info->sizeBytes);
            return copy;
        }
        return at::from_blob(data, shape, [holder = m_file](void*) mutable { holder.reset(); },
                             options);
    } catch (const c10::Error& e) {
        // An empty tensor whose other dimensions overflow int64 (fuzz finding
        // tests/fuzz/corpus/gguf/finding-empty-tensor-overflowing-shape.gguf).
        std::string why = e.what_without_backtrace();
        if (auto nl = why.find('\n'); nl != std::string::npos)
            why.resize(nl);
        return Error::badInput(m_path, "tensor '" + name + "' has a shape LibTorch cannot hold: " +
                                           why);
    }
}

Result<at::Tensor> GgufFile::dequantize(const std::string& name) const
{
    const GgufTensorInfo* info = findTensor(name);
    if (!info)
        return Error::badInput(m_path, "no tensor named '" + name + "'");
    const auto& traits = formats::ggmlTraits(info->type);
    if (!traits.toFloat)
        return Error::unsupported(m_path, "tensor '" + name + "' has ggml type " +
                                              std::string(traits.name) +
                                              ", which BitLens cannot dequantize");
    try {
        if (info->type == GgmlType::F32)
            return tensorView(name);
        at::Tensor out = at::empty(info->shape(), at::TensorOptions().dtype(at::kFloat));
        const std::uint8_t* src = tensorBytes(*info).data();
        float* dst = out.data_ptr<float>();
        const std::int64_t blocks = info->numel() / traits.blockSize;
        // Blocks are independent: convert ranges of them in parallel.
        at::parallel_for(0, blocks, 4096, [&](std::int64_t begin, std::int64_t end) {
            traits.toFloat(src + begin * traits.typeSize, dst + begin * traits.blockSize,
                           (end - begin) * traits.blockSize);
        });
        return out;
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory dequantizing tensor '" + name + "'", m_path);
    } catch (const c10::Error& e) {
        return Error::runtime("dequantizing tensor '" + name + "': " + e.what_without_backtrace(), m_path);
    }
}

// ---------------------------------------------------------------- writing

namespace {

void putBytes(std::vector<std::uint8_t>& out, const void* data, std::size_t n)
{
    const auto* p = static_cast<const std::uint8_t*>(data);
    out.insert(out.end(), p, p + n);
}

template <typename T>
void put(std::vector<std::uint8_t>& out, T v)
{
    putBytes(out, &v, sizeof v);
}

void putString(std::vector<std::uint8_t>& out, const std::string& s)
{
    put<std::uint64_t>(out, s.size());
    putBytes(out, s.data(), s.size());
}

/// Appends a value's payload (not its type id); Usage error when the value does not hold what
/// its type says.
Result<void> putValue(std::vector<std::uint8_t>& out, const GgufValue& v, const std::string& key)
{
    auto bad = [&] {
        return Error::usage("GGUF metadata '" + key + "': value does not match its type " +
                            std::string(ggufTypeName(v.type)));
    };
    const auto* u = std::get_if<std::uint64_t>(&v.data);
    const auto* i = std::get_if<std::int64_t>(&v.data);
    const auto* d = std::get_if<double>(&v.data);
    switch (v.type) {
    case GgufType::UInt8: if (!u) return bad(); put(out, static_cast<std::uint8_t>(*u)); break;
    case GgufType::Int8: if (!i) return bad(); put(out, static_cast<std::int8_t>(*i)); break;
    case GgufType::UInt16: if (!u) return bad(); put(out, static_cast<std::uint16_t>(*u)); break;
    case GgufType::Int16: if (!i) return bad(); put(out, static_cast<std::int16_t>(*i)); break;
    case GgufType::UInt32: if (!u) return bad(); put(out, static_cast<std::uint32_t>(*u)); break;
    case GgufType::Int32: if (!i) return bad(); put(out, static_cast<std::int32_t>(*i)); break;
    case GgufType::UInt64: if (!u) return bad(); put(out, *u); break;
    case GgufType::Int64: if (!i) return bad(); put(out, *i); break;
    case GgufType::Float32: if (!d) return bad(); put(out, static_cast<float>(*d)); break;
    case GgufType::Float64: if (!d) return bad(); put(out, *d); break;
    case GgufType::Bool: {
        const auto* b = std::get_if<bool>(&v.data);
        if (!b)
            return bad();
        put<std::uint8_t>(out, *b ? 1 : 0);
        break;
    }
    case GgufType::String: {
        const auto* s = std::get_if<std::string>(&v.data);
        if (!s)
            return bad();
        putString(out, *s);
        break;
    }
    case GgufType::Array: {
        const auto* items = std::get_if<std::vector<GgufValue>>(&v.data);
        if (!items)
            return bad();
        put(out, static_cast<std::uint32_t>(v.elementType));
        put<std::uint64_t>(out, items->size());
        for (const GgufValue& item : *items) {
            if (item.type != v.elementType)
                return Error::usage("GGUF metadata '" + key + "': an array of " +
                                    std::string(ggufTypeName(v.elementType)) + " holds a " +
                                    std::string(ggufTypeName(item.type)));
            auto ok = putValue(out, item, key);
            if (!ok)
                return ok;
        }
        break;
    }
    }
    return {};
}

} // namespace

GgufWriter::GgufWriter(std::uint32_t alignment) : m_alignment(alignment)
{
    if (m_alignment == 0 || (m_alignment & (m_alignment - 1)) != 0)
        m_alignment = kDefaultAlignment;
    if (m_alignment != kDefaultAlignment)
        set("general.alignment", GgufValue::u32(m_alignment));
}

void GgufWriter::set(const std::string& key, GgufValue value)
{
    for (auto& [k, v] : m_kv) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    m_kv.emplace_back(key, std::move(value));
}

Result<void> GgufWriter::addTensor(const std::string& name, const at::Tensor& values,
                                   formats::GgmlType type)
{
    std::vector<std::int64_t> ne;
    auto bytes = encode(name, values, type, ne);
    if (!bytes)
        return bytes.error();
    return addRawTensor(name, std::move(ne), type, std::move(bytes).value());
}

Result<void> GgufWriter::addDeferredTensor(const std::string& name,
                                           std::vector<std::int64_t> shape,
                                           formats::GgmlType type, Producer produce)
{
    const auto& traits = formats::ggmlTraits(type);
    const std::string what = "tensor '" + name + "'";
    for (const Pending& p : m_tensors)
        if (p.name == name)
            return Error::usage(what + " is added twice");
    if (shape.size() > static_cast<std::size_t>(kMaxDims))
        return Error::unsupported({}, what + " has " + std::to_string(shape.size()) +
                                          " dimensions; GGUF holds at most 4");
    if (!traits.fromFloatRef)
        return Error::unsupported({}, what + ": BitLens has no quantizer for ggml type " +
                                          std::string(traits.name));
    std::int64_t n = 1;
    for (std::int64_t d : shape) {
        if (d < 0)
            return Error::usage(what + " has a negative dimension");
        n *= d;
    }
    const std::int64_t rowLength = shape.empty() ? 1 : shape.back();
    if (rowLength % traits.blockSize != 0)
        return Error::unsupported({}, what + ": rows of " + std::to_string(rowLength) +
                                          " values are not a whole number of " +
                                          std::string(traits.name) + " blocks of " +
                                          std::to_string(traits.blockSize));
    const auto total = formats::ggmlBytes(type, n);
    if (!total)
        return Error::unsupported({}, what + " is too large");
    Pending p;
    p.name = name;
    p.ne.assign(shape.rbegin(), shape.rend());
    p.type = type;
    p.produce = std::move(produce);
    p.size = static_cast<std::uint64_t>(*total);
    m_tensors.push_back(std::move(p));
    return {};
}

Result<std::vector<std::uint8_t>> GgufWriter::encode(const std::string& name,
                                                     const at::Tensor& values,
                                                     formats::GgmlType type,
                                                     std::vector<std::int64_t>& ne)
{
    try {
        const auto& traits = formats::ggmlTraits(type);
        const std::string what = "tensor '" + name + "'";
        if (!values.defined())
            return Error::usage(what + " is undefined");
        if (values.dim() > kMaxDims)
            return Error::unsupported({}, what + " has " + std::to_string(values.dim()) +
                                              " dimensions; GGUF holds at most 4");
        ne.assign(values.sizes().rbegin(), values.sizes().rend());
        const at::ScalarType intType = plainDtype(type);
        if (at::isIntegralType(intType, /*includeBool=*/false)) {
            if (values.scalar_type() != intType)
                return Error::usage(what + " is " + std::string(c10::toString(values.scalar_type())) +
                                    "; " + std::string(traits.name) + " needs " +
                                    std::string(c10::toString(intType)));
            const at::Tensor c = values.detach().to(at::kCPU).contiguous();
            std::vector<std::uint8_t> bytes(c.nbytes());
            if (!bytes.empty())
                std::memcpy(bytes.data(), c.data_ptr(), bytes.size());
            return bytes;
        }
        if (!traits.fromFloatRef)
            return Error::unsupported({}, what + ": BitLens has no quantizer for ggml type " +
                                              std::string(traits.name));
        if (!at::isFloatingType(values.scalar_type()))
            return Error::usage(what + " is not a float tensor");
        const std::int64_t rowLength = values.dim() == 0 ? 1 : values.size(-1);
        if (rowLength % traits.blockSize != 0)
            return Error::unsupported({}, what + ": rows of " + std::to_string(rowLength) +
                                              " values are not a whole number of " +
                                              std::string(traits.name) + " blocks of " +
                                              std::to_string(traits.blockSize));
        const at::Tensor f = values.detach().to(at::kCPU, at::kFloat).contiguous();
        const std::int64_t n = f.numel();
        const float* src = f.const_data_ptr<float>();
        if (type != GgmlType::F32 && type != GgmlType::F16 && type != GgmlType::BF16) {
            for (std::int64_t i = 0; i < n; ++i)
                if (!std::isfinite(src[i]))
                    return Error::badInput({}, what + ": element " + std::to_string(i) + " is " +
                                                   (std::isnan(src[i]) ? "NaN" : "infinite") +
                                                   ", which " + std::string(traits.name) +
                                                   " blocks cannot hold");
        }
        const auto total = formats::ggmlBytes(type, n);
        if (!total)
            return Error::unsupported({}, what + " is too large");
        std::vector<std::uint8_t> bytes(static_cast<std::size_t>(*total));
        const std::int64_t blocks = n / traits.blockSize;
        at::parallel_for(0, blocks, 256, [&](std::int64_t begin, std::int64_t end) {
            traits.fromFloatRef(src + begin * traits.blockSize, bytes.data() + begin * traits.typeSize,
                                (end - begin) * traits.blockSize);
        });
        return bytes;
    } catch (const c10::Error& e) {
        return Error::runtime("tensor '" + name + "': " + e.what_without_backtrace());
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory quantizing tensor '" + name + "'");
    }
}

Result<void> GgufWriter::addRawTensor(const std::string& name, std::vector<std::int64_t> ne,
                                      formats::GgmlType type, std::vector<std::uint8_t> bytes)
{
    for (const Pending& p : m_tensors)
        if (p.name == name)
            return Error::usage("tensor '" + name + "' is added twice");
    if (ne.size() > kMaxDims)
        return Error::unsupported({}, "tensor '" + name + "' has more than 4 dimensions");
    std::int64_t n = 1;
    for (std::int64_t d : ne) {
        if (d < 0)
            return Error::usage("tensor '" + name + "' has a negative dimension");
        n *= d;
    }
    const auto expected = formats::ggmlBytes(type, n);
    if (!ne.empty() && ne[0] % formats::ggmlTraits(type).blockSize != 0)
        return Error::unsupported({}, "tensor '" + name + "': ne[0] = " + std::to_string(ne[0]) +
                                          " is not a multiple of the block size of " +
                                          std::string(formats::ggmlTraits(type).name));
    if (!expected || static_cast<std::uint64_t>(*expected) != bytes.size())
        return Error::usage("tensor '" + name + "': " + std::to_string(bytes.size()) +
                            " bytes do not hold " + neText(ne) + " of " +
                            std::string(formats::ggmlTraits(type).name));
    const std::uint64_t size = bytes.size();
    m_tensors.push_back({name, std::move(ne), type, std::move(bytes), {}, size});
    return {};
}

Result<void> GgufWriter::write(const std::string& path) const
{
    try {
        std::vector<std::uint8_t> header;
        put(header, kMagic);
        put<std::uint32_t>(header, 3);
        put<std::uint64_t>(header, m_tensors.size());
        put<std::uint64_t>(header, m_kv.size());
        for (const auto& [key, value] : m_kv) {
            putString(header, key);
            put(header, static_cast<std::uint32_t>(value.type));
            auto ok = putValue(header, value, key);
            if (!ok)
                return ok;
        }
        const std::uint64_t align = m_alignment;
        auto padded = [align](std::uint64_t n) { return (n + align - 1) / align * align; };
        std::uint64_t offset = 0;
        for (const Pending& t : m_tensors) {
            putString(header, t.name);
            put<std::uint32_t>(header, static_cast<std::uint32_t>(t.ne.size()));
            for (std::int64_t d : t.ne)
                put<std::uint64_t>(header, static_cast<std::uint64_t>(d));
            put(header, static_cast<std::uint32_t>(t.type));
            put<std::uint64_t>(header, offset);
            offset += padded(t.size);
        }
        auto writer = AtomicFileWriter::create(path);
        if (!writer)
            return writer.error();
        (*writer)->write(header.data(), header.size());
        (*writer)->pad(padded(header.size()) - header.size());
        for (const Pending& t : m_tensors) {
            if (t.produce) {
                // A deferred tensor: produced, encoded, written and dropped here. An error
                // leaves no file (the writer's temporary file goes with it).
                auto values = t.produce();
                if (!values)
                    return values.error();
                std::vector<std::int64_t> ne;
                auto bytes = encode(t.name, *values, t.type, ne);
                if (!bytes)
                    return bytes.error();
                if (ne != t.ne || bytes->size() != t.size)
                    return Error::runtime("tensor '" + t.name + "' was announced as " +
                                              neText(t.ne) + " and produced as " + neText(ne),
                                          path);
                (*writer)->write(bytes->data(), bytes->size());
            } else {
                (*writer)->write(t.bytes.data(), t.bytes.size());
            }
            (*writer)->pad(padded(t.size) - t.size);
        }
        return (*writer)->commit();
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while writing", path);
    }
}

} // namespace bitlens::io
