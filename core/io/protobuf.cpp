#include "io/protobuf.h"

#include <bit>
#include <cstring>

namespace bitlens::io::pb {

namespace {

std::uint64_t loadLittleEndian(const std::uint8_t* src, int bytes)
{
    std::uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; --i)
        value = (value << 8) | src[i];
    return value;
}

void storeLittleEndian(std::vector<std::uint8_t>& dst, std::uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        dst.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

std::string fieldLabel(std::uint32_t number) { return "field " + std::to_string(number); }

} // namespace

std::string_view wireTypeName(WireType type)
{
    switch (type) {
    case WireType::Varint: return "varint";
    case WireType::Fixed64: return "fixed64";
    case WireType::Len: return "length-delimited";
    case WireType::StartGroup: return "start-group";
    case WireType::EndGroup: return "end-group";
    case WireType::Fixed32: return "fixed32";
    }
    return "invalid";
}

VarintStatus decodeVarint(std::span<const std::uint8_t> data, std::size_t& pos,
                          std::uint64_t& value)
{
    // Seven payload bits per byte, least significant group first: 300 = 0b10'0101100 is
    // encoded as 0xAC 0x02. Ten bytes carry 70 bits, so the tenth may only hold bit 63.
    std::uint64_t result = 0;
    std::size_t at = pos;
    for (int i = 0; i < 10; ++i) {
        if (at >= data.size())
            return VarintStatus::Truncated;
        const std::uint8_t byte = data[at++];
        if (i == 9 && byte > 1)
            return VarintStatus::Overlong;
        result |= static_cast<std::uint64_t>(byte & 0x7f) << (7 * i);
        if ((byte & 0x80) == 0) {
            value = result;
            pos = at;
            return VarintStatus::Ok;
        }
    }
    return VarintStatus::Overlong;
}

int varintSize(std::uint64_t value)
{
    int size = 1;
    while (value >= 0x80) {
        value >>= 7;
        ++size;
    }
    return size;
}

// ---- Reader ----------------------------------------------------------------------------------

Reader::Reader(std::span<const std::uint8_t> data, std::string_view path,
               std::string_view context, std::uint64_t baseOffset, int depth)
    : m_data(data), m_path(path), m_context(context), m_baseOffset(baseOffset), m_depth(depth)
{
}

void Reader::fail(std::string message, std::uint64_t offset)
{
    if (!m_error)
        m_error = Error::badInput(std::string(m_path), std::move(message), offset);
}

bool Reader::readVarint(std::uint64_t& value)
{
    const std::uint64_t start = offset();
    switch (decodeVarint(m_data, m_pos, value)) {
    case VarintStatus::Ok: return true;
    case VarintStatus::Truncated:
        fail("truncated varint at the end of " + std::string(m_context), start);
        return false;
    case VarintStatus::Overlong:
        fail("varint longer than 10 bytes in " + std::string(m_context), start);
        return false;
    }
    return false;
}

bool Reader::readField(Field& field)
{
    field = Field{};
    field.offset = offset();
    std::uint64_t tag = 0;
    if (!readVarint(tag))
        return false;
    const std::uint64_t number = tag >> 3;
    const auto wire = static_cast<unsigned>(tag & 7);
    if (number == 0 || number > kMaxFieldNumber) {
        fail("invalid field number " + std::to_string(number) + " in " + std::string(m_context),
             field.offset);
        return false;
    }
    field.number = static_cast<std::uint32_t>(number);
    field.payloadOffset = offset();
    const std::size_t left = m_data.size() - m_pos;
    switch (wire) {
    case 0:
        field.wireType = WireType::Varint;
        return readVarint(field.value);
    case 1:
    case 5: {
        const int width = wire == 1 ? 8 : 4;
        field.wireType = wire == 1 ? WireType::Fixed64 : WireType::Fixed32;
        if (left < static_cast<std::size_t>(width)) {
            fail(fieldLabel(field.number) + " of " + std::string(m_context) + ": " +
                     std::to_string(width) + "-byte value runs past the end (" +
                     std::to_string(left) + " bytes left)",
                 field.payloadOffset);
            return false;
        }
        field.value = loadLittleEndian(m_data.data() + m_pos, width);
        m_pos += static_cast<std::size_t>(width);
        return true;
    }
    case 2: {
        field.wireType = WireType::Len;
        std::uint64_t length = 0;
        if (!readVarint(length))
            return false;
        const std::size_t remaining = m_data.size() - m_pos;
        if (length > remaining) {
            fail(fieldLabel(field.number) + " of " + std::string(m_context) + ": length " +
                     std::to_string(length) + " runs past the end (" +
                     std::to_string(remaining) + " bytes left)",
                 field.payloadOffset);
            return false;
        }
        field.payloadOffset = offset();
        field.payload = m_data.subspan(m_pos, static_cast<std::size_t>(length));
        m_pos += static_cast<std::size_t>(length);
        return true;
    }
    case 3:
        field.wireType = WireType::StartGroup;
        return true;
    case 4:
        field.wireType = WireType::EndGroup;
        return true;
    default:
        fail("invalid wire type " + std::to_string(wire) + " for " + fieldLabel(field.number) +
                 " in " + std::string(m_context),
             field.offset);
        return false;
    }
}

bool Reader::skipGroup(const Field& start)
{
    // Groups (proto2's deprecated inline sub-messages) nest by start/end tags; keep a stack of
    // the open field numbers instead of recursing.
    std::vector<std::uint32_t> open;
    auto openGroup = [&](const Field& tag) {
        open.push_back(tag.number);
        if (m_depth + static_cast<int>(open.size()) <= kMaxDepth)
            return true;
        fail("groups nested deeper than " + std::to_string(kMaxDepth) + " levels in " +
                 std::string(m_context),
             tag.offset);
        return false;
    };
    if (!openGroup(start))
        return false;
    Field field;
    while (!open.empty()) {
        if (m_pos >= m_data.size()) {
            fail("group " + fieldLabel(start.number) + " is not closed before the end of " +
                     std::string(m_context),
                 start.offset);
            return false;
        }
        if (!readField(field))
            return false;
        if (field.wireType == WireType::StartGroup) {
            if (!openGroup(field))
                return false;
        } else if (field.wireType == WireType::EndGroup) {
            if (field.number != open.back()) {
                fail("end-group tag for " + fieldLabel(field.number) + " closes group " +
                         fieldLabel(open.back()) + " in " + std::string(m_context),
                     field.offset);
                return false;
            }
            open.pop_back();
        }
    }
    return true;
}

bool Reader::next(Field& field)
{
    while (!failed() && m_pos < m_data.size()) {
        if (!readField(field))
            return false;
        if (field.wireType == WireType::StartGroup) {
            if (!skipGroup(field))
                return false;
            continue;
        }
        if (field.wireType == WireType::EndGroup) {
            fail("end-group tag for " + fieldLabel(field.number) + " without a group in " +
                     std::string(m_context),
                 field.offset);
            return false;
        }
        return true;
    }
    return false;
}

bool Reader::expect(const Field& field, WireType type, std::string_view what)
{
    if (field.wireType == type)
        return true;
    fail(std::string(what) + " has wire type " + std::string(wireTypeName(field.wireType)) +
             ", expected " + std::string(wireTypeName(type)),
         field.offset);
    return false;
}

std::int64_t Reader::int64(const Field& field, std::string_view what)
{
    return expect(field, WireType::Varint, what) ? static_cast<std::int64_t>(field.value) : 0;
}

float Reader::float32(const Field& field, std::string_view what)
{
    if (!expect(field, WireType::Fixed32, what))
        return 0.0f;
    return std::bit_cast<float>(static_cast<std::uint32_t>(field.value));
}

double Reader::float64(const Field& field, std::string_view what)
{
    return expect(field, WireType::Fixed64, what) ? std::bit_cast<double>(field.value) : 0.0;
}

std::span<const std::uint8_t> Reader::bytes(const Field& field, std::string_view what)
{
    return expect(field, WireType::Len, what) ? field.payload : std::span<const std::uint8_t>();
}

std::string_view Reader::string(const Field& field, std::string_view what)
{
    const auto data = bytes(field, what);
    return {reinterpret_cast<const char*>(data.data()), data.size()};
}

std::optional<Reader> Reader::message(const Field& field, std::string_view what)
{
    if (!expect(field, WireType::Len, what))
        return std::nullopt;
    if (m_depth + 1 > kMaxDepth) {
        fail(std::string(what) + " is nested deeper than " + std::to_string(kMaxDepth) +
                 " levels",
             field.offset);
        return std::nullopt;
    }
    return Reader(field.payload, m_path, what, field.payloadOffset, m_depth + 1);
}

void Reader::appendInt64s(const Field& field, std::vector<std::int64_t>& dst,
                          std::string_view what)
{
    if (field.wireType == WireType::Varint) {
        dst.push_back(static_cast<std::int64_t>(field.value));
        return;
    }
    if (!expect(field, WireType::Len, what))
        return;
    // Every varint ends in exactly one byte below 0x80: count them to size the vector exactly.
    std::size_t count = 0;
    for (const std::uint8_t byte : field.payload)
        count += byte < 0x80 ? 1 : 0;
    dst.reserve(dst.size() + count);
    std::size_t pos = 0;
    while (pos < field.payload.size()) {
        const std::size_t start = pos;
        std::uint64_t value = 0;
        if (decodeVarint(field.payload, pos, value) != VarintStatus::Ok) {
            fail(std::string(what) + ": malformed varint in packed field",
                 field.payloadOffset + start);
            return;
        }
        dst.push_back(static_cast<std::int64_t>(value));
    }
}

void Reader::appendFloats(const Field& field, std::vector<float>& dst, std::string_view what)
{
    if (field.wireType == WireType::Fixed32) {
        dst.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(field.value)));
        return;
    }
    if (!expect(field, WireType::Len, what))
        return;
    if (field.payload.size() % 4 != 0) {
        fail(std::string(what) + ": packed length " + std::to_string(field.payload.size()) +
                 " is not a multiple of 4",
             field.payloadOffset);
        return;
    }
    const std::size_t count = field.payload.size() / 4;
    dst.reserve(dst.size() + count);
    for (std::size_t i = 0; i < count; ++i)
        dst.push_back(std::bit_cast<float>(
            static_cast<std::uint32_t>(loadLittleEndian(field.payload.data() + 4 * i, 4))));
}

void Reader::appendDoubles(const Field& field, std::vector<double>& dst, std::string_view what)
{
    if (field.wireType == WireType::Fixed64) {
        dst.push_back(std::bit_cast<double>(field.value));
        return;
    }
    if (!expect(field, WireType::Len, what))
        return;
    if (field.payload.size() % 8 != 0) {
        fail(std::string(what) + ": packed length " + std::to_string(field.payload.size()) +
                 " is not a multiple of 8",
             field.payloadOffset);
        return;
    }
    const std::size_t count = field.payload.size() / 8;
    dst.reserve(dst.size() + count);
    for (std::size_t i = 0; i < count; ++i)
        dst.push_back(std::bit_cast<double>(loadLittleEndian(field.payload.data() + 8 * i, 8)));
}

// ---- Writer ----------------------------------------------------------------------------------

void Writer::writeVarint(std::uint64_t value)
{
    while (value >= 0x80) {
        m_buffer.push_back(static_cast<std::uint8_t>(value | 0x80));
        value >>= 7;
    }
    m_buffer.push_back(static_cast<std::uint8_t>(value));
}

void Writer::writeTag(std::uint32_t field, WireType type)
{
    writeVarint((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(type));
}

void Writer::writeInt64(std::uint32_t field, std::int64_t value)
{
    writeTag(field, WireType::Varint);
    writeVarint(static_cast<std::uint64_t>(value));
}

void Writer::writeFloat(std::uint32_t field, float value)
{
    writeTag(field, WireType::Fixed32);
    storeLittleEndian(m_buffer, std::bit_cast<std::uint32_t>(value), 4);
}

void Writer::writeDouble(std::uint32_t field, double value)
{
    writeTag(field, WireType::Fixed64);
    storeLittleEndian(m_buffer, std::bit_cast<std::uint64_t>(value), 8);
}

void Writer::writeBytes(std::uint32_t field, const void* data, std::size_t size)
{
    writeTag(field, WireType::Len);
    writeVarint(size);
    const auto* src = static_cast<const std::uint8_t*>(data);
    m_buffer.insert(m_buffer.end(), src, src + size);
}

void Writer::writeString(std::uint32_t field, std::string_view value)
{
    writeBytes(field, value.data(), value.size());
}

void Writer::writePackedInt64s(std::uint32_t field, std::span<const std::int64_t> values)
{
    if (values.empty())
        return;
    std::uint64_t size = 0;
    for (const std::int64_t v : values)
        size += static_cast<std::uint64_t>(varintSize(static_cast<std::uint64_t>(v)));
    writeTag(field, WireType::Len);
    writeVarint(size);
    for (const std::int64_t v : values)
        writeVarint(static_cast<std::uint64_t>(v));
}

void Writer::writePackedFloats(std::uint32_t field, std::span<const float> values)
{
    if (values.empty())
        return;
    writeTag(field, WireType::Len);
    writeVarint(values.size() * 4);
    for (const float v : values)
        storeLittleEndian(m_buffer, std::bit_cast<std::uint32_t>(v), 4);
}

std::size_t Writer::beginMessage(std::uint32_t field)
{
    writeTag(field, WireType::Len);
    // One byte holds lengths below 128, the common case; endMessage() widens it if needed.
    m_buffer.push_back(0);
    return m_buffer.size() - 1;
}

void Writer::endMessage(std::size_t marker)
{
    const std::uint64_t length = m_buffer.size() - marker - 1;
    const int width = varintSize(length);
    if (width > 1)
        m_buffer.insert(m_buffer.begin() + static_cast<std::ptrdiff_t>(marker) + 1,
                        static_cast<std::size_t>(width - 1), std::uint8_t{0});
    std::uint64_t value = length;
    for (int i = 0; i < width; ++i) {
        const bool more = i + 1 < width;
        m_buffer[marker + static_cast<std::size_t>(i)] =
            static_cast<std::uint8_t>((value & 0x7f) | (more ? 0x80 : 0));
        value >>= 7;
    }
}

} // namespace bitlens::io::pb
