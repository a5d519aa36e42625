#include "io/file_util.h"

#include "io/mapped_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace bitlens::io {

namespace fs = std::filesystem;

namespace {
constexpr std::uintmax_t kMaxFileBytes = 16ull << 30;
}

Result<std::vector<std::uint8_t>> readFileBytes(const std::string& path)
{
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (ec || !fs::exists(status))
        return Error::badInput(path, "cannot open file: no such file");
    if (fs::is_directory(status))
        return Error::badInput(path, "is a directory, expected a file");
    const std::uintmax_t size = fs::file_size(path, ec);
    if (ec)
        return Error::badInput(path, "cannot read file size: " + ec.message());
    if (size > kMaxFileBytes)
        return Error::badInput(path, "file is larger than 16 GiB");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return Error::badInput(path, std::string("cannot open file: ") + std::strerror(errno));
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()),
                             static_cast<std::streamsize>(size)))
        return Error::badInput(path, "read failed after " + std::to_string(in.gcount()) +
                                         " of " + std::to_string(size) + " bytes");
    return bytes;
}

Result<void> writeFileAtomic(const std::string& path, const void* data, std::size_t size)
{
    auto writer = AtomicFileWriter::create(path);
    if (!writer)
        return writer.error();
    (*writer)->write(data, size);
    return (*writer)->commit();
}

Result<void> writeFileAtomic(const std::string& path, const std::vector<std::uint8_t>& bytes)
{
    return writeFileAtomic(path, bytes.data(), bytes.size());
}

} // namespace bitlens::io
