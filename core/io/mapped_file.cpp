#include "io/mapped_file.h"

#include "io/file_util.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>

#include <csignal>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace bitlens::io {

namespace fs = std::filesystem;

namespace {

/// The live mappings, begin -> end, for releasePages.
std::mutex& mappingsMutex()
{
    static std::mutex m;
    return m;
}
std::map<std::uintptr_t, std::uintptr_t>& mappings()
{
    static std::map<std::uintptr_t, std::uintptr_t> m;
    return m;
}

} // namespace

std::size_t MappedFile::releasePages(const void* data, std::size_t size)
{
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    const std::uintptr_t end = begin + size;
    std::lock_guard lock(mappingsMutex());
    auto it = mappings().upper_bound(begin);
    if (it == mappings().begin())
        return 0;
    --it;
    if (begin < it->first || end > it->second)
        return 0;
    // Whole pages only: the neighbours sharing the first and last page stay resident.
    const std::uintptr_t lo = (begin + page - 1) / page * page;
    const std::uintptr_t hi = end / page * page;
    if (hi <= lo)
        return 0;
    if (::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0)
        return 0;
    return hi - lo;
}

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path)
{
    if (auto ok = checkOpenable(path); !ok)
        return ok.error();
    // O_NONBLOCK: should the path become a FIFO between the check and the open, open() returns
    // instead of waiting for a writer; on a regular file it changes nothing.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return Error::badInput(path, "cannot open file: no such file");
        return Error::badInput(path, std::string("cannot open file: ") + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return Error::badInput(path, std::string("cannot read file size: ") + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return Error::badInput(path, S_ISDIR(st.st_mode) ? "is a directory, expected a file"
                                                         : "is not a regular file");
    }
    std::shared_ptr<MappedFile> file(new MappedFile());
    file->m_path = path;
    file->m_size = static_cast<std::size_t>(st.st_size);
    if (file->m_size > 0) {
        // Private and writable: in-place ops on a view copy the touched page, never the file.
        void* data = ::mmap(nullptr, file->m_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (data == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            return Error::badInput(path, std::string("cannot map file: ") + std::strerror(err));
        }
        file->m_data = static_cast<std::uint8_t*>(data);
        std::lock_guard lock(mappingsMutex());
        mappings()[reinterpret_cast<std::uintptr_t>(data)] =
            reinterpret_cast<std::uintptr_t>(data) + file->m_size;
    }
    ::close(fd);  // the mapping keeps its own reference to the file
    return file;
}

MappedFile::~MappedFile()
{
    if (m_data) {
        {
            std::lock_guard lock(mappingsMutex());
            mappings().erase(reinterpret_cast<std::uintptr_t>(m_data));
        }
        ::munmap(m_data, m_size);
    }
}

namespace {

/// ".NAME.tmp<pid>-<random>": the staging name of a write to NAME by process <pid>.
std::string stagingPrefix(const fs::path& target) { return "." + target.filename().string() + ".tmp"; }

/// Removes staging files of `target` that no live writer owns: ones whose process is gone (a
/// kill between writing and the rename), and ones of the older ".NAME.tmp<random>" form that
/// have not been touched for ten minutes.
void removeStaleStaging(const fs::path& dir, const fs::path& target)
{
    const std::string prefix = stagingPrefix(target);
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.rfind(prefix, 0) != 0)
            continue;
        const std::string rest = name.substr(prefix.size());
        const auto dash = rest.find('-');
        bool stale = false;
        if (dash != std::string::npos && dash > 0 &&
            rest.find_first_not_of("0123456789") == dash) {
            const long pid = std::strtol(rest.substr(0, dash).c_str(), nullptr, 10);
            stale = pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
        } else if (!rest.empty() && rest.find_first_not_of("0123456789") == std::string::npos) {
            std::error_code tec;
            const auto age = fs::file_time_type::clock::now() - fs::last_write_time(it->path(), tec);
            stale = !tec && age > std::chrono::minutes(10);
        }
        if (stale) {
            std::error_code rec;
            fs::remove(it->path(), rec);
        }
    }
}

/// fsync of a folder, so a rename in it survives a power cut.
void syncFolder(const fs::path& dir)
{
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

} // namespace

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const std::string& path)
{
    // A symbolic link is written at its destination; a device, FIFO or socket is refused
    // rather than renamed over.
    auto resolved = checkWritable(path, OutputKind::File);
    if (!resolved)
        return resolved.error();
    const fs::path target(*resolved);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    removeStaleStaging(dir, target);
    std::random_device rd;
    std::unique_ptr<AtomicFileWriter> writer(new AtomicFileWriter());
    writer->m_path = path;
    writer->m_target = target.string();
    writer->m_dir = dir.string();
    writer->m_tmp = (dir / (stagingPrefix(target) + std::to_string(::getpid()) + "-" +
                            std::to_string(rd())))
                        .string();
    writer->m_file = std::fopen(writer->m_tmp.c_str(), "wb");
    if (!writer->m_file)
        return Error::runtime(std::string("cannot create file: ") + std::strerror(errno), path);
    return writer;
}

AtomicFileWriter::~AtomicFileWriter()
{
    if (m_file) {
        std::fclose(m_file);
        std::error_code ec;
        fs::remove(m_tmp, ec);
    }
}

void AtomicFileWriter::write(const void* data, std::size_t size)
{
    if (m_failed || size == 0)
        return;
    if (std::fwrite(data, 1, size, m_file) != size)
        m_failed = true;
    m_offset += size;
}

void AtomicFileWriter::pad(std::size_t count)
{
    static const std::uint8_t kZeros[256] = {};
    while (count > 0) {
        const std::size_t n = std::min(count, sizeof(kZeros));
        write(kZeros, n);
        count -= n;
    }
}

Result<void> AtomicFileWriter::commit()
{
    // Flushed and fsynced before the rename, the folder after it: the file is either the old
    // one or the whole new one, even across a crash.
    const bool flushed = std::fflush(m_file) == 0 && ::fsync(::fileno(m_file)) == 0;
    const bool closed = std::fclose(m_file) == 0;
    m_file = nullptr;
    std::error_code ec;
    if (m_failed || !flushed || !closed) {
        fs::remove(m_tmp, ec);
        return Error::runtime("write failed (disk full?)", m_path);
    }
    fs::rename(m_tmp, m_target, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(m_tmp, ignored);
        return Error::runtime("cannot replace file: " + ec.message(), m_path);
    }
    syncFolder(m_dir);
    return {};
}

} // namespace bitlens::io
