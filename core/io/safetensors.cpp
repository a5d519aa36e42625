#include "io/safetensors.h"

#include "io/mapped_file.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <set>

namespace bitlens::io {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::size_t kLengthBytes = 8;
constexpr std::size_t kMaxDims = 64;
/// No tensor has more elements than this (2^62): keeps numel * itemSize inside uint64.
constexpr std::uint64_t kMaxElements = 1ull << 62;

/// One safetensors dtype: its name, the ATen type and the element size in bytes.
struct StDtype {
    std::string_view name;
    at::ScalarType type;
    int itemSize;
};

constexpr StDtype kDtypes[] = {
    {"F64", at::kDouble, 8},          {"F32", at::kFloat, 4},
    {"F16", at::kHalf, 2},            {"BF16", at::kBFloat16, 2},
    {"I64", at::kLong, 8},            {"I32", at::kInt, 4},
    {"I16", at::kShort, 2},           {"I8", at::kChar, 1},
    {"U64", at::kUInt64, 8},          {"U32", at::kUInt32, 4},
    {"U16", at::kUInt16, 2},          {"U8", at::kByte, 1},
    {"BOOL", at::kBool, 1},           {"F8_E4M3", at::kFloat8_e4m3fn, 1},
    {"F8_E5M2", at::kFloat8_e5m2, 1},
};

const StDtype* findDtype(std::string_view name)
{
    for (const StDtype& d : kDtypes)
        if (d.name == name)
            return &d;
    return nullptr;
}

const StDtype* findDtype(at::ScalarType type)
{
    for (const StDtype& d : kDtypes)
        if (d.type == type)
            return &d;
    return nullptr;
}

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
}

/// One header entry after validation.
struct Entry {
    std::string name;
    const StDtype* dtype = nullptr;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

/// A view of `bytes` as a tensor that keeps `file` mapped while it lives; copied when the bytes
/// are not aligned to the element size.
at::Tensor viewOf(const std::shared_ptr<MappedFile>& file, std::uint8_t* bytes, const Entry& e)
{
    const auto options = at::TensorOptions().dtype(e.dtype->type);
    const std::size_t nbytes = e.end - e.begin;
    if (nbytes == 0)
        return at::empty(e.shape, options);
    if (reinterpret_cast<std::uintptr_t>(bytes) % static_cast<std::uintptr_t>(e.dtype->itemSize)) {
        at::Tensor copy = at::empty(e.shape, options);
        std::memcpy(copy.data_ptr(), bytes, nbytes);
        return copy;
    }
    return at::from_blob(bytes, e.shape, [holder = file](void*) mutable { holder.reset(); },
                         options);
}

/// Parses and validates the header of a mapped safetensors file.
Result<SafetensorsFile> parseMapped(const std::shared_ptr<MappedFile>& file)
{
    const std::string& path = file->path();
    const std::uint64_t fileSize = file->size();
    if (fileSize < kLengthBytes)
        return Error::badInput(path, "file is " + std::to_string(fileSize) +
                                         " bytes, too short for a safetensors header length");
    const std::uint8_t* base = file->bytes().data();
    std::uint64_t headerLen = 0;
    for (int i = 7; i >= 0; --i)
        headerLen = (headerLen << 8) | base[i];
    if (headerLen > fileSize - kLengthBytes)
        return Error::badInput(path, "header length " + std::to_string(headerLen) +
                                         " runs past the end of the file (" +
                                         std::to_string(fileSize) + " bytes)", 0);
    if (headerLen > kSafetensorsMaxHeaderBytes)
        return Error::badInput(path, "header length " + std::to_string(headerLen) +
                                         " exceeds the 100 MB limit", 0);
    if (headerLen < 2)
        return Error::badInput(path, "header is too short to hold a JSON object", 0);
    const char* text = reinterpret_cast<const char*>(base + kLengthBytes);

    // nlohmann keeps the last of two equal keys silently; a callback sees every top-level key.
    std::set<std::string> seen;
    std::string duplicate;
    json::parser_callback_t onEvent = [&](int depth, json::parse_event_t event, json& parsed) {
        if (depth == 1 && event == json::parse_event_t::key && parsed.is_string()) {
            const std::string& key = parsed.get_ref<const std::string&>();
            if (!seen.insert(key).second && duplicate.empty())
                duplicate = key;
        }
        return true;
    };
    json header = json::parse(text, text + headerLen, onEvent, /*allow_exceptions=*/false);
    if (header.is_discarded())
        return Error::badInput(path, "header is not valid JSON", kLengthBytes);
    if (!header.is_object())
        return Error::badInput(path, "header is not a JSON object", kLengthBytes);
    if (!duplicate.empty())
        return Error::badInput(path, "tensor '" + duplicate + "' appears twice in the header");

    SafetensorsFile out;
    out.path = path;
    out.shards = {path};
    const std::uint64_t dataStart = kLengthBytes + headerLen;
    const std::uint64_t dataSize = fileSize - dataStart;
    std::vector<Entry> entries;
    entries.reserve(header.size());
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        const json& value = it.value();
        if (name == "__metadata__") {
            if (!value.is_object())
                return Error::badInput(path, "__metadata__ is not a JSON object");
            for (auto m = value.begin(); m != value.end(); ++m) {
                if (!m.value().is_string())
                    return Error::badInput(path, "__metadata__ value '" + m.key() +
                                                     "' is not a string");
                out.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const std::string what = "tensor '" + name + "'";
        if (!value.is_object())
            return Error::badInput(path, what + " is not described by a JSON object");
        auto dtypeIt = value.find("dtype");
        auto shapeIt = value.find("shape");
        auto offsetsIt = value.find("data_offsets");
        if (dtypeIt == value.end() || !dtypeIt->is_string())
            return Error::badInput(path, what + " has no dtype string");
        if (shapeIt == value.end() || !shapeIt->is_array())
            return Error::badInput(path, what + " has no shape array");
        if (offsetsIt == value.end() || !offsetsIt->is_array() || offsetsIt->size() != 2 ||
            !(*offsetsIt)[0].is_number_unsigned() || !(*offsetsIt)[1].is_number_unsigned())
            return Error::badInput(path, what + ": data_offsets is not a pair of non-negative integers");
        Entry e;
        e.name = name;
        const std::string dtypeName = dtypeIt->get<std::string>();
        e.dtype = findDtype(dtypeName);
        if (!e.dtype)
            return Error::unsupported(path, what + " has dtype '" + dtypeName +
                                                "', which BitLens does not read");
        if (shapeIt->size() > kMaxDims)
            return Error::badInput(path, what + " has " + std::to_string(shapeIt->size()) +
                                             " dimensions (at most 64)");
        std::uint64_t numel = 1;
        for (const json& d : *shapeIt) {
            if (!d.is_number_unsigned())
                return Error::badInput(path, what + ": shape holds a value that is not a "
                                                    "non-negative integer");
            const std::uint64_t dim = d.get<std::uint64_t>();
            if (dim > kMaxElements || (dim != 0 && numel > kMaxElements / dim))
                return Error::badInput(path, what + ": the shape's element count overflows");
            numel *= dim;
            e.shape.push_back(static_cast<std::int64_t>(dim));
        }
        e.begin = (*offsetsIt)[0].get<std::uint64_t>();
        e.end = (*offsetsIt)[1].get<std::uint64_t>();
        const std::string offsetsText =
            "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
        if (e.begin > e.end)
            return Error::badInput(path, what + ": " + offsetsText + " begin after they end");
        if (e.end > dataSize)
            return Error::badInput(path, what + ": " + offsetsText + " end past the end of the "
                                         "file (the data area holds " +
                                         std::to_string(dataSize) + " bytes)");
        const std::uint64_t nbytes = numel * static_cast<std::uint64_t>(e.dtype->itemSize);
        if (e.end - e.begin != nbytes)
            return Error::badInput(path, what + ": " + offsetsText + " hold " +
                                             std::to_string(e.end - e.begin) + " bytes but shape " +
                                             shapeText(e.shape) + " of " + dtypeName + " needs " +
                                             std::to_string(nbytes));
        entries.push_back(std::move(e));
    }

    std::vector<const Entry*> byOffset;
    for (const Entry& e : entries)
        byOffset.push_back(&e);
    std::sort(byOffset.begin(), byOffset.end(), [](const Entry* a, const Entry* b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    for (std::size_t i = 1; i < byOffset.size(); ++i) {
        const Entry& prev = *byOffset[i - 1];
        const Entry& cur = *byOffset[i];
        if (cur.begin < prev.end && cur.begin != cur.end && prev.begin != prev.end)
            return Error::badInput(path, "tensors '" + prev.name + "' and '" + cur.name +
                                             "' overlap in the data area");
    }

    std::uint8_t* data = file->mutableData() + dataStart;
    for (const Entry& e : entries) {
        if (e.dtype->type == at::kBool) {
            for (std::uint64_t i = e.begin; i < e.end; ++i)
                if (data[i] > 1)
                    return Error::badInput(path, "tensor '" + e.name + "': BOOL byte " +
                                                     std::to_string(data[i]) + " is neither 0 nor 1",
                                           dataStart + i);
        }
        out.tensors[e.name] = viewOf(file, data + e.begin, e);
    }
    return out;
}

Result<SafetensorsFile> readSingle(const std::string& path)
{
    auto file = MappedFile::open(path);
    if (!file)
        return file.error();
    return parseMapped(*file);
}

/// Reads a sharded checkpoint from its index: {"metadata": {...}, "weight_map": {tensor: file}}.
Result<SafetensorsFile> readIndex(const std::string& path)
{
    auto file = MappedFile::open(path);
    if (!file)
        return file.error();
    const auto bytes = (*file)->bytes();
    if (bytes.size() > kSafetensorsMaxHeaderBytes)
        return Error::badInput(path, "index is larger than 100 MB");
    const json index = json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (index.is_discarded() || !index.is_object())
        return Error::badInput(path, "index is not a JSON object");
    auto mapIt = index.find("weight_map");
    if (mapIt == index.end() || !mapIt->is_object())
        return Error::badInput(path, "index has no \"weight_map\" object");
    std::vector<std::string> shardNames;
    std::map<std::string, std::string> owner;  // tensor -> shard file name
    for (auto it = mapIt->begin(); it != mapIt->end(); ++it) {
        if (!it.value().is_string())
            return Error::badInput(path, "weight_map entry '" + it.key() + "' is not a file name");
        const std::string shard = it.value().get<std::string>();
        // Shards live beside the index: a name that climbs out of the folder is refused.
        if (shard.empty() || shard.find('/') != std::string::npos ||
            shard.find('\\') != std::string::npos || shard == "." || shard == "..")
            return Error::badInput(path, "weight_map entry '" + it.key() + "' names '" + shard +
                                             "', which is not a file in the index's folder");
        owner[it.key()] = shard;
        if (std::find(shardNames.begin(), shardNames.end(), shard) == shardNames.end())
            shardNames.push_back(shard);
    }
    std::sort(shardNames.begin(), shardNames.end());
    const fs::path dir = fs::path(path).parent_path();
    SafetensorsFile out;
    out.path = path;
    for (const std::string& shard : shardNames) {
        const std::string shardPath = (dir / shard).string();
        auto part = readSingle(shardPath);
        if (!part)
            return part.error();
        if (out.shards.empty())
            out.metadata = part->metadata;
        out.shards.push_back(shardPath);
        for (auto& [name, tensor] : part->tensors) {
            if (out.tensors.count(name))
                return Error::badInput(shardPath, "tensor '" + name +
                                                      "' is also stored in another shard");
            out.tensors[name] = std::move(tensor);
        }
    }
    for (const auto& [name, shard] : owner) {
        if (!out.tensors.count(name))
            return Error::badInput((dir / shard).string(),
                                   "tensor '" + name + "' listed in the index is missing");
    }
    return out;
}

} // namespace

std::optional<at::ScalarType> safetensorsDtype(std::string_view name)
{
    const StDtype* d = findDtype(name);
    return d ? std::optional<at::ScalarType>(d->type) : std::nullopt;
}

std::optional<std::string_view> safetensorsDtypeName(at::ScalarType type)
{
    const StDtype* d = findDtype(type);
    return d ? std::optional<std::string_view>(d->name) : std::nullopt;
}

Result<SafetensorsFile> readSafetensors(const std::string& path)
{
    try {
        std::error_code ec;
        if (fs::is_directory(path, ec)) {
            const fs::path dir(path);
            if (fs::exists(dir / "model.safetensors.index.json", ec))
                return readIndex((dir / "model.safetensors.index.json").string());
            if (fs::exists(dir / "model.safetensors", ec))
                return readSingle((dir / "model.safetensors").string());
            return Error::badInput(path, "folder holds neither model.safetensors nor "
                                         "model.safetensors.index.json");
        }
        const std::string suffix = ".index.json";
        if (path.size() > suffix.size() &&
            path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
            return readIndex(path);
        return readSingle(path);
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while reading", path);
    } catch (const std::exception& e) {
        return Error::badInput(path, std::string("cannot read: ") + e.what());
    }
}

Result<void> writeSafetensors(const std::map<std::string, at::Tensor>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& path)
{
    try {
        struct Item {
            const std::string* name;
            at::Tensor data;  // contiguous CPU
            const StDtype* dtype;
        };
        std::vector<Item> items;
        for (const auto& [name, tensor] : tensors) {
            if (name == "__metadata__")
                return Error::usage("a tensor cannot be called __metadata__");
            if (!tensor.defined())
                return Error::runtime("tensor '" + name + "' is undefined", path);
            const StDtype* d = findDtype(tensor.scalar_type());
            if (!d)
                return Error::unsupported(path, "tensor '" + name + "' has type " +
                                                    std::string(c10::toString(tensor.scalar_type())) +
                                                    ", which safetensors cannot store");
            items.push_back({&name, tensor.detach().to(at::kCPU).contiguous(), d});
        }
        // Largest elements first, then by name: every tensor starts at a multiple of its size.
        std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
            return a.dtype->itemSize != b.dtype->itemSize ? a.dtype->itemSize > b.dtype->itemSize
                                                          : *a.name < *b.name;
        });
        json header = json::object();
        if (!metadata.empty())
            header["__metadata__"] = metadata;
        std::uint64_t offset = 0;
        for (const Item& item : items) {
            const std::uint64_t nbytes = item.data.nbytes();
            header[*item.name] = {{"dtype", item.dtype->name},
                                  {"shape", item.data.sizes().vec()},
                                  {"data_offsets", {offset, offset + nbytes}}};
            offset += nbytes;
        }
        std::string text = header.dump();
        text.append((8 - text.size() % 8) % 8, ' ');
        auto writer = AtomicFileWriter::create(path);
        if (!writer)
            return writer.error();
        std::uint8_t length[kLengthBytes];
        for (std::size_t i = 0; i < kLengthBytes; ++i)
            length[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
        (*writer)->write(length, sizeof length);
        (*writer)->write(text.data(), text.size());
        for (const Item& item : items)
            (*writer)->write(item.data.data_ptr(), item.data.nbytes());
        return (*writer)->commit();
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("cannot write: ") + e.what_without_backtrace(), path);
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while writing", path);
    } catch (const nlohmann::json::exception& e) {
        return Error::usage(std::string("cannot write the safetensors header: ") + e.what());
    }
}

} // namespace bitlens::io
