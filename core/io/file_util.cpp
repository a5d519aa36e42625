#include "io/file_util.h"

#include "io/mapped_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <sys/stat.h>
#include <unistd.h>

namespace bitlens::io {

namespace fs = std::filesystem;

namespace {
constexpr std::uintmax_t kMaxFileBytes = 16ull << 30;
}

Result<void> checkOpenable(const std::string& path, PathKind kind)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT)
            return Error::badInput(path, "cannot open file: no such file");
        return Error::badInput(path, std::string("cannot open file: ") + std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
        if (kind != PathKind::FileOrFolder)
            return Error::badInput(path, "is a directory, expected a file");
        // A folder that cannot be listed would read as one without config.json.
        if (::access(path.c_str(), R_OK | X_OK) != 0)
            return Error::badInput(path, std::string("cannot open folder: ") +
                                             std::strerror(errno));
        return {};
    }
    if (S_ISREG(st.st_mode))
        return {};
    // Opening a FIFO with no writer blocks forever; a device may be endless.
    const char* what = S_ISFIFO(st.st_mode)   ? "a FIFO (named pipe)"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                                              : "not a file";
    return Error::badInput(path, std::string("is ") + what + ", not a regular file");
}

Result<std::vector<std::uint8_t>> readFileBytes(const std::string& path)
{
    if (auto ok = checkOpenable(path); !ok)
        return ok.error();
    std::error_code ec;
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
