#include "io/process.h"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace bitlens::io {

namespace fs = std::filesystem;

int runProcess(const std::vector<std::string>& argv, const std::string& stdoutPath,
               const std::string& stderrPath)
{
    if (argv.empty())
        return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdoutPath.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderrPath.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0)
        return -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string tailOf(const std::string& path, std::size_t maxLines)
{
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        if (!line.empty())
            lines.push_back(line);
    std::string out;
    for (std::size_t i = lines.size() > maxLines ? lines.size() - maxLines : 0; i < lines.size();
         ++i)
        out += (out.empty() ? "" : " | ") + lines[i];
    return out;
}

std::string cacheDir()
{
    if (const char* dir = std::getenv("BITLENS_CACHE"); dir && *dir)
        return dir;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
        return std::string(xdg) + "/bitlens";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : "/tmp") + "/.cache/bitlens";
}

std::string pythonPath()
{
    if (const char* py = std::getenv("BITLENS_PYTHON"); py && *py)
        return py;
    const std::string venv = cacheDir() + "/venv/bin/python";
    if (::access(venv.c_str(), X_OK) == 0)
        return venv;
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= dirs.size()) {
        const std::size_t end = std::min(dirs.find(':', start), dirs.size());
        const std::string candidate = dirs.substr(start, end - start) + "/python3";
        if (end > start && ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        start = end + 1;
    }
    return {};
}

std::vector<std::string> dataFileCandidates(const std::string& rel)
{
    std::vector<std::string> candidates;
    if (const char* dir = std::getenv("BITLENS_DATA_DIR"); dir && *dir)
        candidates.push_back((fs::path(dir) / rel).string());
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        candidates.push_back((exe.parent_path().parent_path() / "share" / "bitlens" / rel).string());
        candidates.push_back((exe.parent_path() / "resources" / rel).string());
    }
    if (const char* src = std::getenv("BITLENS_SOURCE_DIR"); src && *src)
        candidates.push_back((fs::path(src) / "resources" / rel).string());
    return candidates;
}

std::string findDataFile(const std::string& rel)
{
    std::error_code ec;
    for (const auto& c : dataFileCandidates(rel))
        if (fs::is_regular_file(c, ec))
            return c;
    return {};
}

} // namespace bitlens::io
