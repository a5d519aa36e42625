// NumPy .npy (format versions 1, 2 and 3) and .npz (a zip of .npy members).
// Format: "\x93NUMPY", major, minor, header length (uint16 in v1, uint32 in v2/v3, little-endian),
// then a Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a final '\n', then the raw array data.

#include "io/dataset.h"
#include "io/zip.h"
#include "jobs/guard.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>

namespace bitlens::io {

namespace {

constexpr std::uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kPreludeBytes = 8;  // magic + major + minor
constexpr std::size_t kHeaderAlign = 64;
constexpr std::size_t kMaxDims = 32;

/// One NumPy dtype we read and write: kind + item size ("f4") and the ATen type it becomes.
struct NpyType {
    const char* code;
    at::ScalarType type;
    int itemSize;
};

constexpr NpyType kNpyTypes[] = {
    {"f2", at::kHalf, 2},    {"f4", at::kFloat, 4},   {"f8", at::kDouble, 8},
    {"i1", at::kChar, 1},    {"u1", at::kByte, 1},    {"i2", at::kShort, 2},
    {"i4", at::kInt, 4},     {"i8", at::kLong, 8},    {"u2", at::kUInt16, 2},
    {"u4", at::kUInt32, 4},  {"u8", at::kUInt64, 8},  {"b1", at::kBool, 1},
};

const NpyType* findNpyType(const std::string& code)
{
    for (const NpyType& t : kNpyTypes)
        if (code == t.code)
            return &t;
    return nullptr;
}

const NpyType* findNpyType(at::ScalarType type)
{
    for (const NpyType& t : kNpyTypes)
        if (type == t.type)
            return &t;
    return nullptr;
}

void swapBytes(std::uint8_t* data, std::size_t count, int itemSize)
{
    if (itemSize <= 1)
        return;
    for (std::size_t i = 0; i < count; ++i)
        std::reverse(data + i * itemSize, data + (i + 1) * itemSize);
}

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0)
            text += ", ";
        text += std::to_string(shape[i]);
    }
    if (shape.size() == 1)
        text += ",";
    return text + ")";
}

/// What the header dict says.
struct NpyHeader {
    std::optional<std::string> descr;
    bool structuredDescr = false;
    std::optional<bool> fortranOrder;
    std::optional<std::vector<std::int64_t>> shape;
};

/// Recursive-descent reader for the small subset of Python literals .npy headers use:
/// a dict of string keys to strings, True/False, and tuples of non-negative integers.
class HeaderParser {
public:
    HeaderParser(std::string_view text, std::uint64_t fileOffset, const std::string& path)
        : m_text(text), m_fileOffset(fileOffset), m_path(path)
    {
    }

    Result<NpyHeader> parse()
    {
        NpyHeader header;
        if (!consume('{'))
            return fail("expected '{'");
        for (;;) {
            if (consume('}'))
                break;
            std::string key;
            if (!readString(key))
                return fail("expected a quoted key or '}'");
            if (!consume(':'))
                return fail("expected ':' after '" + key + "'");
            if (key == "descr") {
                std::string descr;
                if (readString(descr)) {
                    header.descr = descr;
                } else if (peek() == '[') {
                    header.structuredDescr = true;
                    if (!skipBracketed())
                        return fail("unterminated structured 'descr'");
                } else {
                    return fail("expected a quoted dtype for 'descr'");
                }
            } else if (key == "fortran_order") {
                if (consumeWord("True"))
                    header.fortranOrder = true;
                else if (consumeWord("False"))
                    header.fortranOrder = false;
                else
                    return fail("expected True or False for 'fortran_order'");
            } else if (key == "shape") {
                std::vector<std::int64_t> shape;
                auto ok = readShape(shape);
                if (!ok)
                    return ok.error();
                header.shape = std::move(shape);
            } else {
                return fail("unexpected key '" + key + "'");
            }
            if (!consume(',')) {
                if (consume('}'))
                    break;
                return fail("expected ',' or '}'");
            }
        }
        skipSpace();
        if (m_pos != m_text.size())
            return fail("unexpected text after the closing '}'");
        return header;
    }

private:
    Error fail(const std::string& why) const
    {
        return Error::badInput(m_path, "npy header is malformed: " + why, m_fileOffset + m_pos);
    }

    void skipSpace()
    {
        while (m_pos < m_text.size() &&
               (m_text[m_pos] == ' ' || m_text[m_pos] == '\t' || m_text[m_pos] == '\n' ||
                m_text[m_pos] == '\r'))
            ++m_pos;
    }

    char peek()
    {
        skipSpace();
        return m_pos < m_text.size() ? m_text[m_pos] : '\0';
    }

    bool consume(char c)
    {
        if (peek() != c)
            return false;
        ++m_pos;
        return true;
    }

    bool consumeWord(std::string_view word)
    {
        skipSpace();
        if (m_text.substr(m_pos, word.size()) != word)
            return false;
        m_pos += word.size();
        return true;
    }

    bool readString(std::string& out)
    {
        const char quote = peek();
        if (quote != '\'' && quote != '"')
            return false;
        const std::size_t end = m_text.find(quote, m_pos + 1);
        if (end == std::string_view::npos)
            return false;
        out.assign(m_text.substr(m_pos + 1, end - m_pos - 1));
        m_pos = end + 1;
        return true;
    }

    bool skipBracketed()
    {
        int depth = 0;
        for (; m_pos < m_text.size(); ++m_pos) {
            const char c = m_text[m_pos];
            if (c == '[' || c == '(')
                ++depth;
            else if ((c == ']' || c == ')') && --depth == 0) {
                ++m_pos;
                return true;
            }
        }
        return false;
    }

    Result<void> readShape(std::vector<std::int64_t>& shape)
    {
        if (!consume('('))
            return fail("expected '(' for 'shape'");
        for (;;) {
            if (consume(')'))
                return {};
            skipSpace();
            const std::size_t start = m_pos;
            std::uint64_t value = 0;
            while (m_pos < m_text.size() && m_text[m_pos] >= '0' && m_text[m_pos] <= '9') {
                // Checked before it grows: 2^64 would wrap to 0 and read as an empty dimension.
                const auto digit = static_cast<std::uint64_t>(m_text[m_pos] - '0');
                constexpr auto kMax =
                    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
                if (value > (kMax - digit) / 10)
                    return fail("dimension is too large");
                value = value * 10 + digit;
                ++m_pos;
            }
            if (m_pos == start)
                return fail("expected a non-negative integer in 'shape'");
            if (m_pos < m_text.size() && m_text[m_pos] == 'L')  // Python 2 long
                ++m_pos;
            shape.push_back(static_cast<std::int64_t>(value));
            if (shape.size() > kMaxDims)
                return fail("more than " + std::to_string(kMaxDims) + " dimensions");
            if (!consume(',')) {
                if (consume(')'))
                    return {};
                return fail("expected ',' or ')' in 'shape'");
            }
        }
    }

    std::string_view m_text;
    std::size_t m_pos = 0;
    std::uint64_t m_fileOffset;
    const std::string& m_path;
};

std::string supportedList()
{
    std::string text;
    for (const NpyType& t : kNpyTypes)
        text += (text.empty() ? "" : " ") + std::string(t.code);
    return text;
}

Result<at::Tensor> parseNpyImpl(std::span<const std::uint8_t> bytes, const std::string& path)
{
    if (bytes.size() < kPreludeBytes + 2)
        return Error::badInput(path, "file is too short for a .npy header (" +
                                         std::to_string(bytes.size()) + " bytes)",
                               0);
    if (!std::equal(std::begin(kMagic), std::end(kMagic), bytes.begin()))
        return Error::badInput(path, "not a .npy file (bad magic)", 0);
    const int major = bytes[6];
    const int minor = bytes[7];
    if (major < 1 || major > 3)
        return Error::unsupported(path, ".npy format version " + std::to_string(major) + "." +
                                            std::to_string(minor) + " is not supported");
    std::uint64_t headerLen = 0;
    std::size_t headerStart = 0;
    if (major == 1) {
        headerLen = bytes[8] | (bytes[9] << 8);
        headerStart = 10;
    } else {
        if (bytes.size() < 12)
            return Error::badInput(path, "file is too short for a .npy header (" +
                                             std::to_string(bytes.size()) + " bytes)",
                                   0);
        for (int i = 3; i >= 0; --i)
            headerLen = (headerLen << 8) | bytes[8 + i];
        headerStart = 12;
    }
    if (headerLen > bytes.size() - headerStart)
        return Error::badInput(path, "npy header of " + std::to_string(headerLen) +
                                         " bytes runs past the end of the file (" +
                                         std::to_string(bytes.size()) + " bytes)",
                               8);
    const std::string_view text(reinterpret_cast<const char*>(bytes.data() + headerStart),
                                static_cast<std::size_t>(headerLen));
    HeaderParser parser(text, headerStart, path);
    auto parsed = parser.parse();
    if (!parsed)
        return parsed.error();
    const NpyHeader& header = *parsed;
    if (header.structuredDescr)
        return Error::unsupported(path, "structured NumPy dtypes are not supported");
    if (!header.descr || !header.fortranOrder || !header.shape)
        return Error::badInput(path, std::string("npy header lacks '") +
                                         (!header.descr         ? "descr"
                                          : !header.fortranOrder ? "fortran_order"
                                                                 : "shape") +
                                         "'",
                               headerStart);

    // descr: optional byte order ('<' little, '>' big, '|' not applicable, '=' native) + code.
    std::string code = *header.descr;
    char order = '=';
    if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
        order = code[0];
        code.erase(0, 1);
    }
    const NpyType* type = findNpyType(code);
    if (!type)
        return Error::unsupported(path, "NumPy dtype '" + *header.descr +
                                            "' is not supported (supported: " + supportedList() +
                                            ")");
    const bool bigEndianData = order == '>' || (order == '=' && std::endian::native ==
                                                                     std::endian::big);
    const bool swap = type->itemSize > 1 && bigEndianData != (std::endian::native ==
                                                               std::endian::big);

    const std::vector<std::int64_t>& shape = *header.shape;
    std::uint64_t count = 1;
    for (std::int64_t d : shape)
        if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count))
            return Error::badInput(path, "shape " + shapeText(shape) + " is too large",
                                   headerStart);
    std::uint64_t dataBytes = 0;
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(type->itemSize), &dataBytes))
        return Error::badInput(path, "shape " + shapeText(shape) + " is too large", headerStart);
    const std::uint64_t dataStart = headerStart + headerLen;
    const std::uint64_t present = bytes.size() - dataStart;
    if (dataBytes != present)
        return Error::badInput(path, "shape " + shapeText(shape) + " of '" + *header.descr +
                                         "' needs " + std::to_string(dataBytes) +
                                         " bytes of data but the file has " +
                                         std::to_string(present),
                               dataStart);

    // Fortran order is C order of the reversed shape; read it so and permute back.
    std::vector<std::int64_t> storedShape = shape;
    if (*header.fortranOrder)
        std::reverse(storedShape.begin(), storedShape.end());
    at::Tensor tensor = at::empty(storedShape, at::TensorOptions().dtype(type->type));
    auto* dst = static_cast<std::uint8_t*>(tensor.data_ptr());
    if (dataBytes > 0)
        std::memcpy(dst, bytes.data() + dataStart, static_cast<std::size_t>(dataBytes));
    if (swap)
        swapBytes(dst, static_cast<std::size_t>(count), type->itemSize);
    if (type->type == at::kBool)  // any non-zero byte is True; ATen wants exactly 0 or 1
        for (std::size_t i = 0; i < count; ++i)
            dst[i] = dst[i] != 0;
    if (*header.fortranOrder && shape.size() > 1) {
        std::vector<std::int64_t> dims(shape.size());
        std::iota(dims.rbegin(), dims.rend(), 0);
        tensor = tensor.permute(dims).contiguous();
    }
    return tensor;
}

std::string npyHeader(const NpyType& type, const std::vector<std::int64_t>& shape)
{
    const char order = type.itemSize == 1 ? '|' : '<';
    std::string dict = std::string("{'descr': '") + order + type.code +
                       "', 'fortran_order': False, 'shape': " + shapeText(shape) + ", }";
    // Pad with spaces so that magic + version + length + header ends on a 64-byte boundary
    // (the '\n' included), as numpy does: e.g. a 58-byte dict becomes 118 bytes: 10 + 118 = 128.
    const std::size_t unpadded = 10 + dict.size() + 1;
    const std::size_t pad = (kHeaderAlign - unpadded % kHeaderAlign) % kHeaderAlign;
    return dict + std::string(pad, ' ') + "\n";
}

} // namespace

Result<at::Tensor> parseNpy(const std::vector<std::uint8_t>& bytes, const std::string& path)
{
    return guarded<at::Tensor>(Boundary{.path = path, .library = ErrorCode::BadInput},
                               [&] { return parseNpyImpl(bytes, path); });
}

Result<at::Tensor> readNpy(const std::string& path)
{
    auto bytes = readFileBytes(path);
    if (!bytes)
        return bytes.error();
    return parseNpy(*bytes, path);
}

Result<std::map<std::string, at::Tensor>> readNpz(const std::string& path)
{
    auto file = readFileBytes(path);
    if (!file)
        return file.error();
    using Arrays = std::map<std::string, at::Tensor>;
    const Boundary boundary{.path = path, .library = ErrorCode::BadInput};
    return guarded<Arrays>(boundary, [&]() -> Result<Arrays> {
        const std::span<const std::uint8_t> bytes(*file);
        auto entries = listZipEntries(bytes, path);
        if (!entries)
            return entries.error();
        std::map<std::string, at::Tensor> arrays;
        for (const ZipEntry& entry : *entries) {
            // numpy names members "<key>.npy"; other members (folders, notes) carry no array.
            constexpr std::string_view kSuffix = ".npy";
            if (entry.name.size() <= kSuffix.size() ||
                !entry.name.ends_with(kSuffix))
                continue;
            const std::string key = entry.name.substr(0, entry.name.size() - kSuffix.size());
            if (arrays.count(key))
                return Error::badInput(path, "member '" + entry.name + "' appears twice");
            auto member = extractZipEntry(bytes, entry, path);
            if (!member)
                return member.error();
            auto array = parseNpyImpl(*member, path);
            if (!array) {
                Error error = array.error();
                error.message = "member '" + entry.name + "': " + error.message;
                if (error.offset)
                    error.message += " (at byte " + std::to_string(*error.offset) +
                                     " of the member)";
                error.offset.reset();
                return error;
            }
            arrays.emplace(key, std::move(array.value()));
        }
        if (arrays.empty())
            return Error::badInput(path, "the archive holds no .npy arrays");
        return arrays;
    });
}

Result<void> writeNpy(const at::Tensor& tensor, const std::string& path)
{
    if (!tensor.defined())
        return Error::usage("cannot write an undefined tensor to " + path);
    return guarded<void>(Boundary{.path = path}, [&]() -> Result<void> {
        const NpyType* type = findNpyType(tensor.scalar_type());
        if (!type)
            return Error::unsupported(path, std::string("tensors of type ") +
                                                c10::toString(tensor.scalar_type()) +
                                                " have no NumPy dtype; convert them first");
        const at::Tensor src = tensor.detach().to(at::kCPU).contiguous();
        const std::vector<std::int64_t> shape(src.sizes().begin(), src.sizes().end());
        const std::string header = npyHeader(*type, shape);
        const std::size_t dataBytes = static_cast<std::size_t>(src.numel()) * type->itemSize;
        std::vector<std::uint8_t> out;
        out.reserve(10 + header.size() + dataBytes);
        out.insert(out.end(), std::begin(kMagic), std::end(kMagic));
        out.push_back(1);
        out.push_back(0);
        out.push_back(static_cast<std::uint8_t>(header.size() & 0xff));
        out.push_back(static_cast<std::uint8_t>(header.size() >> 8));
        out.insert(out.end(), header.begin(), header.end());
        const std::size_t dataStart = out.size();
        const auto* data = static_cast<const std::uint8_t*>(src.data_ptr());
        if (dataBytes > 0)
            out.insert(out.end(), data, data + dataBytes);
        if constexpr (std::endian::native == std::endian::big)
            swapBytes(out.data() + dataStart, static_cast<std::size_t>(src.numel()),
                      type->itemSize);
        return writeFileAtomic(path, out);
    });
}

} // namespace bitlens::io
