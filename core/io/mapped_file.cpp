#include "io/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace bitlens::io {

namespace fs = std::filesystem;

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        return Error::badInput(path, "is a directory, expected a file");
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
    }
    ::close(fd);  // the mapping keeps its own reference to the file
    return file;
}

MappedFile::~MappedFile()
{
    if (m_data)
        ::munmap(m_data, m_size);
}

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const std::string& path)
{
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return Error::badInput(path, "cannot write: folder " + dir.string() + " does not exist");
    std::random_device rd;
    std::unique_ptr<AtomicFileWriter> writer(new AtomicFileWriter());
    writer->m_path = path;
    writer->m_tmp =
        (dir / ("." + target.filename().string() + ".tmp" + std::to_string(rd()))).string();
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
    const bool flushed = std::fflush(m_file) == 0;
    const bool closed = std::fclose(m_file) == 0;
    m_file = nullptr;
    std::error_code ec;
    if (m_failed || !flushed || !closed) {
        fs::remove(m_tmp, ec);
        return Error::runtime("write failed (disk full?)", m_path);
    }
    fs::rename(m_tmp, m_path, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(m_tmp, ignored);
        return Error::runtime("cannot replace file: " + ec.message(), m_path);
    }
    return {};
}

} // namespace bitlens::io
