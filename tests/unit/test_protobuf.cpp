// The protobuf wire-format codec under the ONNX reader: encodings from the protobuf docs,
// round trips at varint width boundaries, and every way a buffer can be malformed.
#include "io/protobuf.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace bitlens::io::pb {
namespace {

using Bytes = std::vector<std::uint8_t>;

/// Reads every field `reader` yields.
std::vector<Field> readAll(Reader& reader)
{
    std::vector<Field> fields;
    Field field;
    while (reader.next(field))
        fields.push_back(field);
    return fields;
}

TEST(ProtobufVarint, MatchesTheProtobufDocumentationExamples)
{
    // "field 1 = 150" is 08 96 01; 300 is AC 02 (protobuf encoding guide).
    Writer w;
    w.writeInt64(1, 150);
    EXPECT_EQ(w.bytes(), (Bytes{0x08, 0x96, 0x01}));
    Writer v;
    v.writeVarint(300);
    EXPECT_EQ(v.bytes(), (Bytes{0xAC, 0x02}));
    // A negative int64 takes ten bytes (two's complement, no zigzag).
    Writer n;
    n.writeInt64(1, -1);
    EXPECT_EQ(n.bytes(), (Bytes{0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
}

TEST(ProtobufVarint, RoundTripsAcrossWidthBoundaries)
{
    std::vector<std::uint64_t> values{0, 1, 127, 128, 300, 16383, 16384, 2097151, 2097152};
    for (int bits = 28; bits <= 63; bits += 7) {
        values.push_back((std::uint64_t{1} << bits) - 1);
        values.push_back(std::uint64_t{1} << bits);
    }
    values.push_back(std::numeric_limits<std::uint64_t>::max());
    for (const std::uint64_t value : values) {
        Writer w;
        w.writeVarint(value);
        EXPECT_EQ(static_cast<int>(w.bytes().size()), varintSize(value)) << value;
        std::size_t pos = 0;
        std::uint64_t decoded = 0;
        ASSERT_EQ(decodeVarint(w.bytes(), pos, decoded), VarintStatus::Ok) << value;
        EXPECT_EQ(decoded, value);
        EXPECT_EQ(pos, w.bytes().size());
    }
}

TEST(ProtobufVarint, RejectsTruncatedAndOverlongVarints)
{
    std::size_t pos = 0;
    std::uint64_t value = 0;
    EXPECT_EQ(decodeVarint(Bytes{}, pos, value), VarintStatus::Truncated);
    EXPECT_EQ(decodeVarint(Bytes{0x80, 0x80}, pos, value), VarintStatus::Truncated);
    EXPECT_EQ(pos, 0u) << "a failed decode must not advance";
    // Eleven bytes with continuation bits.
    EXPECT_EQ(decodeVarint(Bytes(11, 0xFF), pos, value), VarintStatus::Overlong);
    // Ten bytes whose last one carries bits above bit 63.
    Bytes tooBig(9, 0xFF);
    tooBig.push_back(0x02);
    EXPECT_EQ(decodeVarint(tooBig, pos, value), VarintStatus::Overlong);
    tooBig.back() = 0x01;
    EXPECT_EQ(decodeVarint(tooBig, pos, value), VarintStatus::Ok);
    EXPECT_EQ(value, std::numeric_limits<std::uint64_t>::max());
}

TEST(ProtobufReader, ReadsEveryWireTypeWithOffsets)
{
    Writer w;
    w.writeInt64(1, 42);
    w.writeDouble(2, 2.5);
    w.writeString(3, "hello");
    w.writeFloat(5, -1.25f);
    const Bytes bytes = w.bytes();
    Reader reader(bytes, "test.bin", "Test");
    const auto fields = readAll(reader);
    ASSERT_FALSE(reader.failed()) << reader.error().describe();
    ASSERT_EQ(fields.size(), 4u);
    EXPECT_EQ(fields[0].number, 1u);
    EXPECT_EQ(reader.int64(fields[0], "a"), 42);
    EXPECT_EQ(fields[0].offset, 0u);
    EXPECT_EQ(reader.float64(fields[1], "b"), 2.5);
    EXPECT_EQ(fields[1].offset, 2u);
    EXPECT_EQ(reader.string(fields[2], "c"), "hello");
    EXPECT_EQ(fields[2].offset, 11u);
    EXPECT_EQ(fields[2].payloadOffset, 13u);
    EXPECT_EQ(reader.float32(fields[3], "d"), -1.25f);
    EXPECT_FALSE(reader.failed());
}

TEST(ProtobufReader, SkipsUnknownFieldsAndNestedGroups)
{
    Writer w;
    w.writeInt64(1, 7);
    w.writeTag(9, WireType::StartGroup); // group 9 { x: 1, group 10 { s: "z" } }
    w.writeInt64(1, 1);
    w.writeTag(10, WireType::StartGroup);
    w.writeString(2, "z");
    w.writeTag(10, WireType::EndGroup);
    w.writeTag(9, WireType::EndGroup);
    w.writeFloat(99, 1.0f);
    w.writeInt64(2, 8);
    const Bytes bytes = w.bytes();
    Reader reader(bytes, "test.bin", "Test");
    const auto fields = readAll(reader);
    ASSERT_FALSE(reader.failed()) << reader.error().describe();
    ASSERT_EQ(fields.size(), 3u) << "groups are skipped, other unknown fields are returned";
    EXPECT_EQ(fields[0].number, 1u);
    EXPECT_EQ(fields[1].number, 99u);
    EXPECT_EQ(fields[2].number, 2u);
    EXPECT_EQ(reader.int64(fields[2], "b"), 8);
}

TEST(ProtobufReader, PackedAndUnpackedRepeatedFieldsDecodeAlike)
{
    const std::vector<std::int64_t> ints{0, 1, -1, 300, std::numeric_limits<std::int64_t>::min()};
    const std::vector<float> floats{0.5f, -2.0f, 1e30f};
    Writer packed;
    packed.writePackedInt64s(1, ints);
    packed.writePackedFloats(2, floats);
    Writer unpacked;
    for (const auto v : ints)
        unpacked.writeInt64(1, v);
    for (const auto v : floats)
        unpacked.writeFloat(2, v);
    for (const Bytes& bytes : {packed.bytes(), unpacked.bytes()}) {
        Reader reader(bytes, "test.bin", "Test");
        std::vector<std::int64_t> gotInts;
        std::vector<float> gotFloats;
        Field field;
        while (reader.next(field)) {
            if (field.number == 1)
                reader.appendInt64s(field, gotInts, "ints");
            else
                reader.appendFloats(field, gotFloats, "floats");
        }
        ASSERT_FALSE(reader.failed()) << reader.error().describe();
        EXPECT_EQ(gotInts, ints);
        EXPECT_EQ(gotFloats, floats);
    }
    // Packed doubles (field 3, 16 bytes) followed by one unpacked double.
    const double values[2] = {1.5, -3.25};
    Bytes bytes{0x1A, 16};
    bytes.resize(18);
    std::memcpy(bytes.data() + 2, values, 16);
    Writer tail;
    tail.writeDouble(3, 1e-300);
    bytes.insert(bytes.end(), tail.bytes().begin(), tail.bytes().end());
    Reader reader(bytes, "test.bin", "Test");
    std::vector<double> got;
    Field field;
    while (reader.next(field))
        reader.appendDoubles(field, got, "doubles");
    ASSERT_FALSE(reader.failed()) << reader.error().describe();
    EXPECT_EQ(got, (std::vector<double>{1.5, -3.25, 1e-300}));
}

TEST(ProtobufWriter, SubMessageLengthsWidenAtVarintBoundaries)
{
    for (const std::size_t size : {0, 1, 127, 128, 129, 16383, 16384, 70000}) {
        Writer w;
        const auto marker = w.beginMessage(4);
        w.writeBytes(1, std::string(size, 'x').data(), size);
        w.endMessage(marker);
        w.writeInt64(5, 9); // something after the sub-message
        const Bytes bytes = w.bytes();
        Reader reader(bytes, "test.bin", "Test");
        Field field;
        ASSERT_TRUE(reader.next(field)) << size;
        auto sub = reader.message(field, "Sub");
        ASSERT_TRUE(sub.has_value());
        Field inner;
        ASSERT_TRUE(sub->next(inner));
        EXPECT_EQ(reader.bytes(inner, "payload").size(), size);
        EXPECT_FALSE(sub->next(inner));
        ASSERT_TRUE(reader.next(field));
        EXPECT_EQ(reader.int64(field, "after"), 9);
        EXPECT_FALSE(reader.failed());
    }
}

/// One malformed buffer, the error message it must produce and the byte offset it names.
struct Malformed {
    const char* label;
    Bytes bytes;
    std::string message;
    std::uint64_t offset;
};

TEST(ProtobufReader, RejectsMalformedBuffersWithMessageAndOffset)
{
    Bytes deep;
    for (int i = 0; i < kMaxDepth + 5; ++i)
        deep.push_back(0x0B); // field 1, start group
    const std::vector<Malformed> cases{
        {"truncated tag", {0x08, 0x96}, "truncated varint at the end of Test", 1},
        {"overlong varint", Bytes{0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                  0x01},
         "varint longer than 10 bytes in Test", 1},
        {"length past end", {0x1A, 0x0A, 'a', 'b', 'c'},
         "field 3 of Test: length 10 runs past the end (3 bytes left)", 1},
        {"fixed32 past end", {0x15, 0x00, 0x00}, "field 2 of Test: 4-byte value runs past the end "
                                                  "(2 bytes left)", 1},
        {"fixed64 past end", {0x11, 0x00}, "field 2 of Test: 8-byte value runs past the end "
                                           "(1 bytes left)", 1},
        {"field number 0", {0x00, 0x01}, "invalid field number 0 in Test", 0},
        {"wire type 6", {0x08, 0x01, 0x0E}, "invalid wire type 6 for field 1 in Test", 2},
        {"wire type 7", {0x0F}, "invalid wire type 7 for field 1 in Test", 0},
        {"stray end group", {0x0C}, "end-group tag for field 1 without a group in Test", 0},
        {"unclosed group", {0x0B, 0x10, 0x01}, "group field 1 is not closed before the end of Test",
         0},
        {"mismatched group", {0x0B, 0x14}, "end-group tag for field 2 closes group field 1 in Test",
         1},
        {"deep groups", deep, "groups nested deeper than 100 levels in Test",
         static_cast<std::uint64_t>(kMaxDepth)},
    };
    for (const auto& c : cases) {
        Reader reader(c.bytes, "bad.bin", "Test");
        readAll(reader);
        ASSERT_TRUE(reader.failed()) << c.label;
        EXPECT_EQ(reader.error().code, ErrorCode::BadInput) << c.label;
        EXPECT_EQ(reader.error().path, "bad.bin") << c.label;
        EXPECT_EQ(reader.error().message, c.message) << c.label;
        EXPECT_EQ(reader.error().offset, c.offset) << c.label;
        Field field;
        EXPECT_FALSE(reader.next(field)) << c.label << ": the first error must stick";
    }
}

TEST(ProtobufReader, TypedAccessorsRejectWrongWireTypes)
{
    Writer w;
    w.writeInt64(7, 1);
    const Bytes bytes = w.bytes();
    Reader reader(bytes, "model.onnx", "ModelProto");
    Field field;
    ASSERT_TRUE(reader.next(field));
    EXPECT_FALSE(reader.message(field, "ModelProto.graph").has_value());
    ASSERT_TRUE(reader.failed());
    EXPECT_EQ(reader.error().message,
              "ModelProto.graph has wire type varint, expected length-delimited");
    EXPECT_EQ(reader.error().offset, 0u);
    EXPECT_EQ(reader.error().userMessage(),
              "error: model.onnx: ModelProto.graph has wire type varint, expected "
              "length-delimited (at byte 0)");

    Writer f;
    f.writeFloat(1, 1.0f);
    f.writeBytes(2, "abcde", 5);
    const Bytes fb = f.bytes();
    Reader fr(fb, "x", "X");
    ASSERT_TRUE(fr.next(field));
    EXPECT_EQ(fr.int64(field, "X.a"), 0);
    EXPECT_EQ(fr.error().message, "X.a has wire type fixed32, expected varint");
    Reader fr2(fb, "x", "X");
    ASSERT_TRUE(fr2.next(field));
    ASSERT_TRUE(fr2.next(field));
    std::vector<float> floats;
    fr2.appendFloats(field, floats, "X.floats");
    EXPECT_EQ(fr2.error().message, "X.floats: packed length 5 is not a multiple of 4");
    EXPECT_EQ(fr2.error().offset, 7u);
}

TEST(ProtobufReader, LimitsSubMessageDepth)
{
    // kMaxDepth + 1 nested sub-messages, each the only field of its parent.
    Writer w;
    std::vector<std::size_t> markers;
    for (int i = 0; i <= kMaxDepth; ++i)
        markers.push_back(w.beginMessage(1));
    for (auto it = markers.rbegin(); it != markers.rend(); ++it)
        w.endMessage(*it);
    const Bytes bytes = w.bytes();
    std::optional<Reader> reader(Reader(bytes, "deep.bin", "Test"));
    int depth = 0;
    Field field;
    while (reader->next(field)) {
        auto sub = reader->message(field, "Test.child");
        if (!sub)
            break;
        reader.emplace(*sub);
        ++depth;
    }
    ASSERT_TRUE(reader->failed());
    EXPECT_EQ(depth, kMaxDepth);
    EXPECT_EQ(reader->error().message, "Test.child is nested deeper than 100 levels");
}

} // namespace
} // namespace bitlens::io::pb
