#pragma once
// A read-only view of a whole file through mmap, shared by the tensors that point into it, and a
// streaming writer that leaves either the complete new file or nothing (temp file + rename).

#include "jobs/result.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

namespace bitlens::io {

/// A file mapped into memory copy-on-write: tensors may be views into it (and may even be
/// written to: the writes stay private to the process, the file never changes). Keep it alive
/// with a shared_ptr for as long as any view exists.
class MappedFile {
public:
    /// Maps `path`, or BadInput naming it ("cannot open file: no such file", "is a directory").
    /// An empty file maps to an empty span.
    static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::string& path() const { return m_path; }
    std::span<const std::uint8_t> bytes() const { return {m_data, m_size}; }
    /// The same bytes, writable (copy-on-write pages): what tensor views point at.
    std::uint8_t* mutableData() const { return m_data; }
    std::uint64_t size() const { return m_size; }

    /// Drops the whole pages of [data, data + size) that lie inside a live mapping from this
    /// process's memory (madvise MADV_DONTNEED): its resident set shrinks, and the next read
    /// faults them in again from the page cache or the file. Only for bytes never written
    /// through the mapping (a written page would revert to the file's bytes): the executor
    /// calls it for 16-bit weights it has just widened, which nothing writes. Bytes outside
    /// every mapping are left alone. Returns the bytes dropped.
    static std::size_t releasePages(const void* data, std::size_t size);

private:
    MappedFile() = default;
    std::string m_path;
    std::uint8_t* m_data = nullptr;
    std::size_t m_size = 0;
};

/// Writes a file piece by piece into a staging file beside `path` (".NAME.tmp<pid>-<random>"),
/// or beside its destination when `path` is a symbolic link (io::checkWritable);
/// commit() fsyncs it, renames it into place and fsyncs the folder. Destroyed without commit()
/// (an error on the way), it removes the staging file. create() also removes staging files of
/// the same target that a killed writer left.
class AtomicFileWriter {
public:
    /// Opens the temporary file; io::checkWritable's error when it refuses `path` (BadInput for
    /// a missing folder, Runtime for a read-only folder or a target that is not a regular file),
    /// Runtime when the open fails.
    static Result<std::unique_ptr<AtomicFileWriter>> create(const std::string& path);
    ~AtomicFileWriter();
    AtomicFileWriter(const AtomicFileWriter&) = delete;
    AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

    /// Appends bytes; a failed write (disk full) is remembered and reported by commit().
    void write(const void* data, std::size_t size);
    /// Appends `count` zero bytes (alignment padding).
    void pad(std::size_t count);
    /// Bytes written so far.
    std::uint64_t offset() const { return m_offset; }
    /// Flushes, closes and renames onto the target path.
    Result<void> commit();

private:
    AtomicFileWriter() = default;
    std::string m_path;    ///< as the caller named it (in messages)
    std::string m_target;  ///< what the rename replaces: m_path with a symbolic link resolved
    std::string m_tmp;
    std::string m_dir;
    std::FILE* m_file = nullptr;
    std::uint64_t m_offset = 0;
    bool m_failed = false;
};

} // namespace bitlens::io
