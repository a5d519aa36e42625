// IDX files, the format of MNIST and Fashion-MNIST: a big-endian magic 0x0000TTDD (TT the element
// type, DD the number of dimensions), DD big-endian uint32 dimensions, then the elements in C
// order, big-endian. Often gzipped (…-ubyte.gz).

#include "io/dataset.h"
#include "io/zip.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

namespace bitlens::io {

namespace {

/// One IDX element type: its code in the magic, the ATen type it is read as, and its name.
struct IdxType {
    std::uint8_t code;
    at::ScalarType type;
    int itemSize;
    const char* name;
};

constexpr IdxType kIdxTypes[] = {
    {0x08, at::kByte, 1, "uint8"},   {0x09, at::kChar, 1, "int8"},
    {0x0B, at::kShort, 2, "int16"},  {0x0C, at::kInt, 4, "int32"},
    {0x0D, at::kFloat, 4, "float32"}, {0x0E, at::kDouble, 8, "float64"},
};

constexpr std::size_t kMaxIdxDims = 16;

std::string hex(std::uint64_t value, int digits)
{
    static const char* kDigits = "0123456789ABCDEF";
    std::string text = "0x";
    for (int i = digits - 1; i >= 0; --i)
        text += kDigits[(value >> (4 * i)) & 0xf];
    return text;
}

std::uint32_t readBe32(const std::uint8_t* p)
{
    return (static_cast<std::uint32_t>(p[0]) << 24) | (static_cast<std::uint32_t>(p[1]) << 16) |
           (static_cast<std::uint32_t>(p[2]) << 8) | static_cast<std::uint32_t>(p[3]);
}

Result<at::Tensor> parseIdx(std::vector<std::uint8_t>& bytes, const std::string& path,
                            bool gzipped)
{
    // In a gzipped file a byte offset only makes sense in the decompressed stream: say so.
    auto bad = [&](const std::string& why, std::uint64_t offset) {
        if (gzipped)
            return Error::badInput(path, why + " (at byte " + std::to_string(offset) +
                                             " of the decompressed data)");
        return Error::badInput(path, why, offset);
    };
    const std::uint64_t size = bytes.size();
    if (size < 4)
        return bad("file is too short for an IDX header (" + std::to_string(size) + " bytes)", 0);
    const std::uint32_t magic = readBe32(bytes.data());
    const IdxType* type = nullptr;
    for (const IdxType& t : kIdxTypes)
        if (t.code == bytes[2])
            type = &t;
    if (bytes[0] != 0 || bytes[1] != 0)
        return bad("not an IDX file: bad magic " + hex(magic, 8) +
                       " (expected 0x000008DD to 0x00000EDD)",
                   0);
    if (!type)
        return bad("unknown IDX element type " + hex(bytes[2], 2) +
                       " (expected 0x08, 0x09 or 0x0B to 0x0E)",
                   2);
    const std::size_t dims = bytes[3];
    if (dims == 0 || dims > kMaxIdxDims)
        return bad("IDX header declares " + std::to_string(dims) + " dimensions (1 to " +
                       std::to_string(kMaxIdxDims) + " supported)",
                   3);
    const std::uint64_t headerBytes = 4 + 4 * dims;
    if (size < headerBytes)
        return bad("IDX header declares " + std::to_string(dims) + " dimensions but the file " +
                       "ends after " + std::to_string(size) + " bytes",
                   size);

    std::vector<std::int64_t> shape(dims);
    std::uint64_t count = 1;
    std::string shapeText;
    for (std::size_t i = 0; i < dims; ++i) {
        shape[i] = readBe32(bytes.data() + 4 + 4 * i);
        shapeText += (i ? " x " : "") + std::to_string(shape[i]);
        if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(shape[i]), &count))
            return bad("IDX dimensions are too large", 4 + 4 * i);
    }
    std::uint64_t dataBytes = 0;
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(type->itemSize), &dataBytes))
        return bad("IDX dimensions are too large", 4);
    const std::uint64_t present = size - headerBytes;
    if (dataBytes > present)
        return bad("IDX dimensions " + shapeText + " of " + type->name + " need " +
                       std::to_string(dataBytes) + " bytes of data but only " +
                       std::to_string(present) + " follow the header",
                   headerBytes);
    if (dataBytes < present)
        return bad(std::to_string(present - dataBytes) +
                       (present - dataBytes == 1 ? " byte follows the " : " bytes follow the ") +
                       std::to_string(dataBytes) + " bytes that IDX dimensions " + shapeText +
                       " of " + type->name + " describe",
                   headerBytes + dataBytes);

    std::uint8_t* data = bytes.data() + headerBytes;
    at::Tensor raw;
    if (type->itemSize == 1) {
        raw = at::from_blob(data, shape, at::TensorOptions().dtype(type->type));
    } else {
        // Copy into aligned memory first: the data starts at 4 + 4 * dims, not always aligned.
        raw = at::empty(shape, at::TensorOptions().dtype(type->type));
        auto* dst = static_cast<std::uint8_t*>(raw.data_ptr());
        if (dataBytes > 0)  // an empty tensor's data pointer may be null
            std::memcpy(dst, data, static_cast<std::size_t>(dataBytes));
        if constexpr (std::endian::native == std::endian::little)
            for (std::uint64_t i = 0; i < count; ++i)
                std::reverse(dst + i * type->itemSize, dst + (i + 1) * type->itemSize);
    }

    const bool integral = type->type != at::kFloat && type->type != at::kDouble;
    if (dims == 1 && integral)  // a label array
        return raw.to(at::kLong, /*non_blocking=*/false, /*copy=*/true);
    at::Tensor out = raw.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    if (type->type == at::kByte && dims >= 2)
        out.div_(255.0);
    if (dims == 3)  // [N, H, W] images get their channel: [N, 1, H, W]
        out = out.unsqueeze(1);
    return out;
}

} // namespace

Result<at::Tensor> readIdx(const std::string& path)
{
    auto file = readFileBytes(path);
    if (!file)
        return file.error();
    try {
        if (isGzip(*file)) {
            auto inflated = gunzip(*file, path);
            if (!inflated)
                return inflated.error();
            std::vector<std::uint8_t>().swap(*file);
            return parseIdx(*inflated, path, true);
        }
        return parseIdx(*file, path, false);
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory", path);
    } catch (const c10::Error& e) {
        return Error::runtime(e.what_without_backtrace(), path);
    } catch (const std::exception& e) {
        return Error::runtime(e.what(), path);
    }
}

} // namespace bitlens::io
