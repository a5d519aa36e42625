#pragma once
// A minimal protobuf wire-format codec (proto2/proto3 encoding) for the ONNX reader and writer.
// We do not link libprotobuf: LibTorch carries its own copy and two copies clash.
//
// Reading is zero-copy over a byte buffer and defensive: every length is checked against the
// bytes left in the enclosing message before anything is read or allocated, nesting depth is
// bounded, and the first failure is kept (with its absolute byte offset) and stops the reader.
// Callers loop `while (reader.next(field))` and check `reader.failed()` afterwards.

#include "jobs/result.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bitlens::io::pb {

/// The six wire types of the protobuf encoding (groups are deprecated but still skippable).
enum class WireType : std::uint8_t {
    Varint = 0,
    Fixed64 = 1,
    Len = 2,        ///< length-delimited: bytes, strings, sub-messages, packed repeated fields
    StartGroup = 3,
    EndGroup = 4,
    Fixed32 = 5,
};

/// "varint", "fixed64", "length-delimited", ... for error messages.
std::string_view wireTypeName(WireType type);

/// Largest valid field number (2^29 - 1).
inline constexpr std::uint32_t kMaxFieldNumber = (1u << 29) - 1;
/// Deepest nesting of sub-messages and groups a Reader accepts (protobuf's own default).
inline constexpr int kMaxDepth = 100;

/// One field as it appears on the wire.
struct Field {
    std::uint32_t number = 0;
    WireType wireType = WireType::Varint;
    std::uint64_t value = 0;                ///< Varint, Fixed32, Fixed64: the raw bits
    std::span<const std::uint8_t> payload;  ///< Len: the bytes (a view into the buffer)
    std::uint64_t offset = 0;               ///< absolute byte offset of the field's tag
    std::uint64_t payloadOffset = 0;        ///< absolute byte offset of the value or payload
};

/// Iterates over the fields of one message and decodes typed values, checking wire types.
/// The first error sticks: next() then returns false and error() describes it.
class Reader {
public:
    /// Reads the message `data`, which starts at absolute offset `baseOffset` of the file named
    /// `path`; `context` names the message in errors ("ModelProto"). Both strings only name
    /// things in errors and must outlive the reader. `depth` is the nesting level of this
    /// message (0 for the top-level message).
    Reader(std::span<const std::uint8_t> data, std::string_view path, std::string_view context,
           std::uint64_t baseOffset = 0, int depth = 0);

    /// Reads the next field into `field`; false at the end of the message or after an error.
    /// Groups and unknown wire types are handled here; the caller skips fields it does not
    /// know simply by ignoring them.
    bool next(Field& field);

    /// True once an error was recorded.
    bool failed() const { return m_error.has_value(); }
    /// The recorded error (BadInput naming the path and byte offset); only when failed().
    const Error& error() const { return *m_error; }
    /// Records an error (the first one wins) at an absolute byte offset.
    void fail(std::string message, std::uint64_t offset);

    /// Absolute offset of the next unread byte.
    std::uint64_t offset() const { return m_baseOffset + m_pos; }
    /// Nesting level of this message.
    int depth() const { return m_depth; }
    /// The file name used in errors.
    std::string_view path() const { return m_path; }

    // Typed accessors. `what` names the field in errors ("TensorProto.dims"). On a wire-type
    // mismatch or malformed payload they record an error and return a zero value.

    /// A varint field as int64 (two's complement, as protobuf encodes int32/int64/enum).
    std::int64_t int64(const Field& field, std::string_view what);
    /// A fixed32 field as float.
    float float32(const Field& field, std::string_view what);
    /// A fixed64 field as double.
    double float64(const Field& field, std::string_view what);
    /// A length-delimited field as bytes (a view into the buffer).
    std::span<const std::uint8_t> bytes(const Field& field, std::string_view what);
    /// A length-delimited field as text (a view into the buffer; not checked for UTF-8).
    std::string_view string(const Field& field, std::string_view what);
    /// A reader over a length-delimited field's payload as a sub-message one level deeper
    /// (`what` becomes its context); nullopt, with this reader failed, on a wire-type
    /// mismatch or when nesting would exceed kMaxDepth.
    std::optional<Reader> message(const Field& field, std::string_view what);

    /// Appends a repeated int64/int32/enum field, packed (Len) or not (Varint).
    void appendInt64s(const Field& field, std::vector<std::int64_t>& dst, std::string_view what);
    /// Appends a repeated float field, packed (Len, 4 bytes each) or not (Fixed32).
    void appendFloats(const Field& field, std::vector<float>& dst, std::string_view what);
    /// Appends a repeated double field, packed (Len, 8 bytes each) or not (Fixed64).
    void appendDoubles(const Field& field, std::vector<double>& dst, std::string_view what);

private:
    bool readVarint(std::uint64_t& value);
    bool readField(Field& field);
    bool skipGroup(const Field& start);
    bool expect(const Field& field, WireType type, std::string_view what);

    std::span<const std::uint8_t> m_data;
    std::string_view m_path;
    std::string_view m_context;
    std::uint64_t m_baseOffset = 0;
    std::size_t m_pos = 0;
    int m_depth = 0;
    std::optional<Error> m_error;
};

/// Outcome of decodeVarint.
enum class VarintStatus {
    Ok,
    Truncated,  ///< the buffer ends inside the varint
    Overlong,   ///< more than 10 bytes, or a 10th byte that does not fit 64 bits
};

/// Decodes one varint at `data[pos]`; on success advances `pos` past it.
VarintStatus decodeVarint(std::span<const std::uint8_t> data, std::size_t& pos,
                          std::uint64_t& value);

/// Builds a message in a growing byte buffer. Sub-messages are written in place between
/// beginMessage() and endMessage(), so large payloads (weights) are not copied per level.
class Writer {
public:
    /// Reserves room for about `bytes` bytes of output.
    void reserve(std::size_t bytes) { m_buffer.reserve(bytes); }

    /// A varint field (int32, int64, enum, bool); negative values take ten bytes as in protobuf.
    void writeInt64(std::uint32_t field, std::int64_t value);
    /// A float as fixed32.
    void writeFloat(std::uint32_t field, float value);
    /// A double as fixed64.
    void writeDouble(std::uint32_t field, double value);
    /// A length-delimited string field.
    void writeString(std::uint32_t field, std::string_view value);
    /// A length-delimited bytes field.
    void writeBytes(std::uint32_t field, const void* data, std::size_t size);
    /// A packed repeated varint field (nothing written when `values` is empty).
    void writePackedInt64s(std::uint32_t field, std::span<const std::int64_t> values);
    /// A packed repeated float field (nothing written when `values` is empty).
    void writePackedFloats(std::uint32_t field, std::span<const float> values);

    /// Starts a sub-message field; returns a marker for endMessage().
    std::size_t beginMessage(std::uint32_t field);
    /// Ends the sub-message started at `marker`: writes its length before its payload.
    void endMessage(std::size_t marker);

    /// The bytes written so far.
    const std::vector<std::uint8_t>& bytes() const { return m_buffer; }
    /// Moves the bytes out; the writer is empty afterwards.
    std::vector<std::uint8_t> take() { return std::move(m_buffer); }

    /// Appends a raw varint (no tag).
    void writeVarint(std::uint64_t value);
    /// Appends a raw tag (field number and wire type).
    void writeTag(std::uint32_t field, WireType type);

private:
    std::vector<std::uint8_t> m_buffer;
};

/// Bytes a varint takes (1 to 10).
int varintSize(std::uint64_t value);

} // namespace bitlens::io::pb
