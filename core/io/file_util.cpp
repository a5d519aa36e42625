#include "io/file_util.h"

#include "io/mapped_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
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

/// What a stat mode names when it is neither a regular file nor a folder.
const char* nodeKind(mode_t mode)
{
    return S_ISFIFO(mode)   ? "a FIFO (named pipe)"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
                            : "not a file";
}

/// Checks that `dir` ("" for the current one) is a folder this process may create files in;
/// errors name `path`, the output being checked.
Result<void> checkFolderWritable(const std::string& path, const fs::path& dir)
{
    const std::string folder = dir.empty() ? std::string(".") : dir.string();
    struct stat st {};
    if (::stat(folder.c_str(), &st) != 0) {
        if (errno == ENOENT)
            return Error::badInput(path, "cannot write: folder " + folder + " does not exist");
        return Error::runtime("cannot write: folder " + folder + ": " + std::strerror(errno),
                              path);
    }
    if (!S_ISDIR(st.st_mode))
        return Error::badInput(path, "cannot write: " + folder + " is not a folder");
    // access() asks the kernel with the real ids: a read-only mount is EROFS even for root.
    if (::access(folder.c_str(), W_OK | X_OK) != 0)
        return Error::runtime("cannot write: folder " + folder + ": " + std::strerror(errno),
                              path);
    return {};
}

} // namespace

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
    return Error::badInput(path, std::string("is ") + nodeKind(st.st_mode) +
                                     ", not a regular file");
}

Result<std::string> checkWritable(const std::string& path, OutputKind kind)
{
    if (path.empty())
        return Error::badInput(path, "an output path is empty");
    // "out/" names a folder: looked at without the slash, which lstat would otherwise follow.
    std::string target = path;
    while (target.size() > 1 && target.back() == '/')
        target.pop_back();
    const bool namesFolder = target.size() != path.size();
    struct stat st {};
    if (::lstat(target.c_str(), &st) != 0) {
        // ENOTDIR: a parent is a file, said below as "X is not a folder".
        if (errno != ENOENT && errno != ENOTDIR)
            return Error::runtime(std::string("cannot write: ") + std::strerror(errno), path);
        // Missing: a file or folder is created in its parent; `Folder` creates the missing
        // parents too, so the nearest existing one must be writable.
        if (kind == OutputKind::File && namesFolder)
            return Error::badInput(path, "names a folder, expected a file");
        fs::path dir = fs::path(target).parent_path();
        if (kind == OutputKind::Folder) {
            std::error_code ec;
            while (!dir.empty() && !fs::exists(fs::symlink_status(dir, ec)) &&
                   dir != dir.parent_path())
                dir = dir.parent_path();
        }
        if (auto ok = checkFolderWritable(path, dir); !ok)
            return ok.error();
        return path;
    }
    // A symbolic link is written at its destination (the writers rename next to it), so the
    // link itself stays; one that leads nowhere or in a loop is refused.
    std::string resolved = path;
    if (S_ISLNK(st.st_mode)) {
        char* real = ::realpath(target.c_str(), nullptr);
        if (!real) {
            const int err = errno;
            std::error_code ec;
            const fs::path dest = fs::read_symlink(target, ec);
            if (err == ENOENT)
                return Error::runtime("is a symbolic link to " + dest.string() +
                                          ", which does not exist",
                                      path);
            return Error::runtime(std::string("cannot resolve the symbolic link: ") +
                                      std::strerror(err),
                                  path);
        }
        resolved = real;
        std::free(real);
        if (::stat(resolved.c_str(), &st) != 0)
            return Error::runtime(std::string("cannot write: ") + std::strerror(errno), path);
    }
    if (S_ISDIR(st.st_mode)) {
        if (kind == OutputKind::File)
            return Error::runtime("is a directory, expected a file", path);
        if (auto ok = checkFolderWritable(path, resolved); !ok)
            return ok.error();
        return resolved;
    }
    if (S_ISREG(st.st_mode)) {
        if (kind == OutputKind::Folder || namesFolder)
            return Error::runtime("is a file, expected a folder", path);
        // Replaced by a rename in its folder: the folder must take a new file.
        if (auto ok = checkFolderWritable(path, fs::path(resolved).parent_path()); !ok)
            return ok.error();
        return resolved;
    }
    // Renaming over a device, FIFO or socket would replace the node itself (/dev/null).
    return Error::runtime(std::string("is ") + nodeKind(st.st_mode) +
                              ", not a regular file: refusing to replace it",
                          path);
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
