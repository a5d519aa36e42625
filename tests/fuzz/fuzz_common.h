#pragma once
// Shared by the libFuzzer targets: the one rule every reader must keep (any bytes give a value
// or an Error that names the file and says why; never a crash, a throw or a huge allocation),
// and a scratch folder for readers that take a path instead of bytes.

#include "jobs/result.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace bitlens::fuzz {

/// Aborts (a finding for libFuzzer) unless `error` names `path` and gives a reason.
inline void checkError(const Error& error, const std::string& path)
{
    if (error.path != path || error.message.empty()) {
        std::fprintf(stderr, "bad error: path '%s' (expected '%s'), message '%s'\n",
                     error.path.c_str(), path.c_str(), error.message.c_str());
        std::abort();
    }
}

/// A per-process scratch folder (in /dev/shm when there is one: no disk traffic per input).
inline const std::filesystem::path& scratchDir()
{
    static const std::filesystem::path dir = [] {
        std::error_code ec;
        std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                         ? std::filesystem::path("/dev/shm")
                                         : std::filesystem::temp_directory_path();
        auto d = base / ("bitlens-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        return d;
    }();
    return dir;
}

/// Writes `data` to `name` inside the scratch folder and returns the full path.
inline std::string writeScratch(const std::string& name, const std::uint8_t* data,
                                std::size_t size)
{
    const std::filesystem::path path = scratchDir() / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        std::abort();
    }
    return path.string();
}

/// Removes the scratch folder when the process ends normally.
struct ScratchCleanup {
    ~ScratchCleanup()
    {
        std::error_code ec;
        std::filesystem::remove_all(scratchDir(), ec);
    }
};

/// Reads every byte of a buffer (so a view past a mapping's end faults here, not later).
inline std::uint64_t touch(const void* data, std::size_t size)
{
    const auto* p = static_cast<const std::uint8_t*>(data);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < size; ++i)
        sum += p[i];
    return sum;
}

} // namespace bitlens::fuzz
