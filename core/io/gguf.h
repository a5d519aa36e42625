#pragma once
// GGUF (versions 2 and 3, little-endian): "GGUF", uint32 version, uint64 tensor count, uint64
// metadata count, the metadata key/values, the tensor infos (name, n_dims <= 4, ne[n_dims],
// ggml type, offset into the data section), padding to general.alignment (default 32), the
// data section. Reading maps the file; every count, length and offset is checked against the
// bytes that are left before anything is allocated, so a header that claims 2^40 entries or a
// 100 GB tensor is refused at once. Dimensions follow ggml: ne[0] varies fastest, so a tensor
// with ne = [K, N] is the torch tensor [N, K].

#include "jobs/result.h"
#include "formats/ggml_quants.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace bitlens::io {

class MappedFile;

/// GGUF metadata value types, with the ids the file stores.
enum class GgufType : std::uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

/// "uint8", "string", "array", ... for messages.
std::string_view ggufTypeName(GgufType type);

/// One metadata value. Unsigned integers are held as uint64, signed as int64, floats as double
/// (a float32 converts exactly); the type says what the file stores. An array holds items of
/// one element type (arrays of arrays allowed).
struct GgufValue {
    GgufType type = GgufType::UInt8;
    GgufType elementType = GgufType::UInt8;  ///< Array: the type of every item
    std::variant<std::uint64_t, std::int64_t, double, bool, std::string, std::vector<GgufValue>>
        data;

    static GgufValue u8(std::uint8_t v) { return {GgufType::UInt8, {}, std::uint64_t{v}}; }
    static GgufValue i8(std::int8_t v) { return {GgufType::Int8, {}, std::int64_t{v}}; }
    static GgufValue u16(std::uint16_t v) { return {GgufType::UInt16, {}, std::uint64_t{v}}; }
    static GgufValue i16(std::int16_t v) { return {GgufType::Int16, {}, std::int64_t{v}}; }
    static GgufValue u32(std::uint32_t v) { return {GgufType::UInt32, {}, std::uint64_t{v}}; }
    static GgufValue i32(std::int32_t v) { return {GgufType::Int32, {}, std::int64_t{v}}; }
    static GgufValue u64(std::uint64_t v) { return {GgufType::UInt64, {}, v}; }
    static GgufValue i64(std::int64_t v) { return {GgufType::Int64, {}, v}; }
    static GgufValue f32(float v) { return {GgufType::Float32, {}, double{v}}; }
    static GgufValue f64(double v) { return {GgufType::Float64, {}, v}; }
    static GgufValue boolean(bool v) { return {GgufType::Bool, {}, v}; }
    static GgufValue string(std::string v) { return {GgufType::String, {}, std::move(v)}; }
    /// An array; every item must have type `elementType` (the writer checks).
    static GgufValue array(GgufType elementType, std::vector<GgufValue> items)
    {
        return {GgufType::Array, elementType, std::move(items)};
    }
    static GgufValue stringArray(const std::vector<std::string>& items);
    static GgufValue i32Array(const std::vector<std::int32_t>& items);
    static GgufValue f32Array(const std::vector<float>& items);

    bool isInteger() const;  ///< one of the eight integer types
    bool isFloat() const;    ///< Float32 or Float64
    /// "uint32 7", "string \"llama\"", "array[3] of string", for messages and `info`.
    std::string describe() const;
};

/// One tensor as the header describes it.
struct GgufTensorInfo {
    std::string name;
    std::vector<std::int64_t> ne;  ///< ggml dimensions, ne[0] fastest (1 to 4 of them)
    formats::GgmlType type = formats::GgmlType::F32;
    std::uint64_t offset = 0;      ///< from the start of the data section, aligned
    std::uint64_t sizeBytes = 0;   ///< bytes of data

    /// The torch shape: ne reversed ([N, K] for ne = [K, N]).
    std::vector<std::int64_t> shape() const;
    std::int64_t numel() const;
};

/// An opened GGUF file. Copies share the mapping; tensors made from it keep it alive.
class GgufFile {
public:
    /// Maps and parses `path`. BadInput names the file, the reason and the byte offset; a valid
    /// file of a kind BitLens does not read (GGUF v1, big-endian) is Unsupported.
    static Result<GgufFile> open(const std::string& path);

    const std::string& path() const { return m_path; }
    std::uint32_t version() const { return m_version; }
    std::uint64_t alignment() const { return m_alignment; }
    /// Absolute file offset of the data section.
    std::uint64_t dataOffset() const { return m_dataOffset; }

    /// Every key/value, in file order.
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return m_kv; }
    /// The value of `key`, or nullptr.
    const GgufValue* find(std::string_view key) const;
    /// Typed accessors: BadInput naming the file and key when the key is missing or holds
    /// another type ("key 'llama.block_count' is a string, expected an integer"). getInt
    /// accepts every integer type (uint64 values above INT64_MAX are refused); getFloat also
    /// accepts integers.
    Result<std::string> getString(const std::string& key) const;
    Result<std::int64_t> getInt(const std::string& key) const;
    Result<double> getFloat(const std::string& key) const;
    Result<bool> getBool(const std::string& key) const;
    Result<std::vector<std::string>> getStringArray(const std::string& key) const;
    Result<std::vector<std::int64_t>> getIntArray(const std::string& key) const;
    Result<std::vector<double>> getFloatArray(const std::string& key) const;

    /// Tensor infos, in file order.
    const std::vector<GgufTensorInfo>& tensors() const { return m_tensors; }
    /// The tensor called `name`, or nullptr.
    const GgufTensorInfo* findTensor(std::string_view name) const;
    /// The stored bytes of a tensor (a view into the mapping).
    std::span<const std::uint8_t> tensorBytes(const GgufTensorInfo& info) const;
    /// A zero-copy CPU view: F32/F16/BF16/F64/I8..I64 tensors in their own dtype and torch
    /// shape; block types as uint8 [rows, bytes per row]. BadInput for an unknown name.
    Result<at::Tensor> tensorView(const std::string& name) const;
    /// The tensor as float32 in torch shape (F32 is a view, the rest are converted, in
    /// parallel over blocks). Unsupported for types without a dequantizer (IQ*, TQ*, MXFP4).
    Result<at::Tensor> dequantize(const std::string& name) const;

private:
    std::shared_ptr<MappedFile> m_file;
    std::string m_path;
    std::uint32_t m_version = 0;
    std::uint64_t m_alignment = 32;
    std::uint64_t m_dataOffset = 0;
    std::vector<std::pair<std::string, GgufValue>> m_kv;
    std::map<std::string, std::size_t, std::less<>> m_kvIndex;
    std::vector<GgufTensorInfo> m_tensors;
    std::map<std::string, std::size_t, std::less<>> m_tensorIndex;

    friend class GgufParser;
};

/// Builds a GGUF v3 file: metadata of every type, tensors quantized from float with the
/// reference quantizers, written atomically with every tensor aligned.
class GgufWriter {
public:
    /// `alignment` (a power of two) is written as general.alignment when it is not 32.
    explicit GgufWriter(std::uint32_t alignment = 32);

    /// Sets (or replaces) a key; keys keep the order of their first set().
    void set(const std::string& key, GgufValue value);
    /// Adds `values` (any float dtype, any device; torch shape [..., K]) as `type`, quantized
    /// row by row along the last dimension (ne[0] = K). Integer tensors may be added as
    /// I8/I16/I32/I64 of the same width. Errors: Usage for a duplicate name, Unsupported for a
    /// K that is not a multiple of the type's block size or a type without a quantizer,
    /// BadInput for NaN/Inf in a block type.
    Result<void> addTensor(const std::string& name, const at::Tensor& values,
                           formats::GgmlType type);
    /// Adds encoded bytes: `ne` in ggml order; `bytes` must be exactly the size ne and type
    /// call for.
    Result<void> addRawTensor(const std::string& name, std::vector<std::int64_t> ne,
                              formats::GgmlType type, std::vector<std::uint8_t> bytes);
    /// The values of a tensor added by addDeferredTensor, produced when write() reaches it.
    using Producer = std::function<Result<at::Tensor>()>;
    /// Adds a tensor of torch shape `shape` whose values `produce` returns only when write()
    /// reaches it, then quantized as addTensor quantizes them and dropped: one tensor in memory
    /// at a time, so a model larger than memory streams into the file. The checks addTensor
    /// makes on the shape and the type are made now; a producer's error (or values of another
    /// shape, or NaN in a block type) fails write(), and no file is left.
    Result<void> addDeferredTensor(const std::string& name, std::vector<std::int64_t> shape,
                                   formats::GgmlType type, Producer produce);
    /// Writes the file (through a temporary file and a rename).
    Result<void> write(const std::string& path) const;

private:
    struct Pending {
        std::string name;
        std::vector<std::int64_t> ne;
        formats::GgmlType type;
        std::vector<std::uint8_t> bytes;
        Producer produce;          ///< deferred: bytes are empty until write()
        std::uint64_t size = 0;    ///< encoded bytes
    };
    /// `values` encoded as `type` (addTensor's rules); `ne` gets its ggml shape.
    static Result<std::vector<std::uint8_t>> encode(const std::string& name,
                                                    const at::Tensor& values,
                                                    formats::GgmlType type,
                                                    std::vector<std::int64_t>& ne);
    std::uint32_t m_alignment;
    std::vector<std::pair<std::string, GgufValue>> m_kv;
    std::vector<Pending> m_tensors;
};

} // namespace bitlens::io
