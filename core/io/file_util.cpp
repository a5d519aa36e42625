#include "io/file_util.h"

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
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return Error::badInput(path, "cannot write: folder " + dir.string() + " does not exist");
    std::random_device rd;
    const fs::path tmp = dir / ("." + target.filename().string() + ".tmp" + std::to_string(rd()));
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out)
            return Error::runtime(std::string("cannot create file: ") + std::strerror(errno), path);
        if (size > 0)
            out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
        out.flush();
        if (!out) {
            out.close();
            fs::remove(tmp, ec);
            return Error::runtime("write failed (disk full?)", path);
        }
    }
    fs::rename(tmp, target, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        return Error::runtime("cannot replace file: " + ec.message(), path);
    }
    return {};
}

Result<void> writeFileAtomic(const std::string& path, const std::vector<std::uint8_t>& bytes)
{
    return writeFileAtomic(path, bytes.data(), bytes.size());
}

} // namespace bitlens::io
