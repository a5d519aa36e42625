#include "export/folder_export.h"

#include "export/safetensors_export.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace bitlens::exporting {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStagingInfix = ".bitlens-staging-";
constexpr const char* kLockSuffix = ".bitlens-lock";

std::string stagingPrefix(const fs::path& target)
{
    return "." + target.filename().string() + kStagingInfix;
}

std::string errnoText() { return std::strerror(errno); }

/// fsync of a folder, so renames in it survive a power cut.
void syncFolder(const fs::path& dir)
{
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

/// Opens and flocks `lockPath`, waiting while another export holds it. A holder removes the
/// file as it lets go, so a lock taken on a file that is no longer at `lockPath` is retried on
/// the new one (else two exports could each hold a lock of their own).
Result<int> takeLock(const fs::path& lockPath, const std::string& shown, Progress& progress,
                     const CancelToken& cancel)
{
    bool announced = false;
    for (;;) {
        const int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return Error::runtime("cannot create the lock file " + lockPath.string() + ": " +
                                      errnoText(),
                                  shown);
        while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK && errno != EINTR) {
                const std::string reason = errnoText();
                ::close(fd);
                return Error::runtime("cannot lock " + lockPath.string() + ": " + reason, shown);
            }
            if (cancel.cancelled()) {
                ::close(fd);
                return Error::cancelled();
            }
            if (!announced) {
                progress.report(progress.fraction(),
                                "waiting for another export to " + shown + " to finish");
                announced = true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        struct stat held {}, now {};
        if (::fstat(fd, &held) == 0 && ::stat(lockPath.c_str(), &now) == 0 &&
            held.st_dev == now.st_dev && held.st_ino == now.st_ino)
            return fd;
        ::close(fd);
    }
}

void releaseLock(const fs::path& lockPath, int& fd)
{
    if (fd < 0)
        return;
    // Removed while still held: whoever opened it meanwhile sees it gone and retries.
    ::unlink(lockPath.c_str());
    ::close(fd);
    fd = -1;
}

/// Removes the staging folders of `target` in its parent: under the lock, every one left is
/// from an export that was killed (or an exchanged old folder not yet removed).
void removeLeftovers(const fs::path& target)
{
    const std::string prefix = stagingPrefix(target);
    std::error_code ec;
    for (fs::directory_iterator it(target.parent_path(), ec), end; !ec && it != end;
         it.increment(ec)) {
        if (it->path().filename().string().rfind(prefix, 0) != 0)
            continue;
        std::error_code rec;
        fs::remove_all(it->path(), rec);
    }
}

/// What a BitLens folder export writes (and io's staging names of those, left by a kill).
bool writtenByExport(const std::string& name)
{
    static const std::set<std::string> names = [] {
        std::set<std::string> all(hfCompanionFiles().begin(), hfCompanionFiles().end());
        all.insert("config.json");
        all.insert("model.safetensors");
        return all;
    }();
    if (names.count(name))
        return true;
    for (const std::string& n : names)
        if (name.rfind("." + n + ".tmp", 0) == 0)
            return true;
    return false;
}

/// True when `config` is a config.json a BitLens export wrote.
bool isBitLensConfig(const fs::path& config)
{
    std::ifstream in(config);
    if (!in)
        return false;
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("quantization_config"))
        return false;
    const nlohmann::json& q = j["quantization_config"];
    return q.is_object() && q.contains("producer") && q["producer"].is_string() &&
           q["producer"].get<std::string>().rfind("bitlens", 0) == 0;
}

/// The absolute folder `path` names, a symlink to a folder followed.
Result<fs::path> resolveTarget(const std::string& path)
{
    const fs::path named = folderOfPath(path);
    std::error_code ec;
    fs::path target = fs::weakly_canonical(fs::absolute(named, ec), ec);
    if (ec)
        return Error::badInput(path, "cannot resolve the folder: " + ec.message());
    target = folderOfPath(target.string());
    if (!target.has_filename() || target == target.root_path())
        return Error::badInput(path, "cannot export into the root folder");
    if (fs::is_symlink(target, ec))
        return Error::badInput(path, "is a symbolic link to nothing; give the folder itself");
    const fs::path parent = target.parent_path();
    if (!fs::is_directory(parent, ec))
        return Error::badInput(path, "cannot write: folder " +
                                         (named.has_parent_path() ? named.parent_path() : parent)
                                             .string() +
                                         " does not exist");
    return target;
}

} // namespace

fs::path folderOfPath(const std::string& path)
{
    std::string name = path;
    while (name.size() > 1 && name.back() == '/')
        name.pop_back();
    return fs::path(name);
}

Result<void> checkReplaceableFolder(const fs::path& folder, const std::string& shownPath)
{
    std::error_code ec;
    const fs::file_status st = fs::status(folder, ec);
    if (st.type() == fs::file_type::not_found)
        return {};
    if (ec)
        return Error::badInput(shownPath, "cannot read the folder: " + ec.message());
    if (st.type() != fs::file_type::directory)
        return Error::badInput(shownPath, "exists and is not a folder; a safetensors export "
                                          "to a folder needs a folder name");
    const std::string advice = "export into a new or empty folder (nothing was changed)";
    std::vector<std::string> entries;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
        entries.push_back(it->path().filename().string());
    if (ec)
        return Error::badInput(shownPath, "cannot read the folder: " + ec.message());
    if (entries.empty())
        return {};
    if (!isBitLensConfig(folder / "config.json"))
        return Error::badInput(shownPath,
                               "cannot replace the folder: it is not a BitLens export (" +
                                   std::string(fs::exists(folder / "config.json", ec)
                                                   ? "its config.json has no quantization_config "
                                                     "written by bitlens"
                                                   : "no config.json") +
                                   "); " + advice);
    for (const std::string& name : entries) {
        const fs::file_status s = fs::symlink_status(folder / name, ec);
        if (!writtenByExport(name) || s.type() != fs::file_type::regular)
            return Error::badInput(shownPath, "cannot replace the folder: it holds " + name +
                                                  ", which a BitLens export does not write; " +
                                                  advice + ", or move " + name + " out");
    }
    return {};
}

Result<std::unique_ptr<FolderExport>> FolderExport::begin(const std::string& path,
                                                          Progress& progress,
                                                          const CancelToken& cancel)
{
    auto target = resolveTarget(path);
    if (!target)
        return target.error();
    std::unique_ptr<FolderExport> stage(new FolderExport());
    stage->m_shown = path;
    stage->m_target = *target;
    stage->m_lockPath =
        target->parent_path() / ("." + target->filename().string() + kLockSuffix);
    auto fd = takeLock(stage->m_lockPath, path, progress, cancel);
    if (!fd)
        return fd.error();
    stage->m_lockFd = *fd;
    removeLeftovers(*target);
    if (auto ok = checkReplaceableFolder(*target, path); !ok)
        return ok.error();
    std::random_device rd;
    stage->m_staging = target->parent_path() / (stagingPrefix(*target) +
                                                std::to_string(::getpid()) + "-" +
                                                std::to_string(rd()));
    std::error_code ec;
    if (!fs::create_directory(stage->m_staging, ec))
        return Error::runtime("cannot create folder " + stage->m_staging.string() + ": " +
                                  (ec ? ec.message() : std::string("it exists")),
                              path);
    return stage;
}

FolderExport::~FolderExport()
{
    if (!m_committed && !m_staging.empty()) {
        std::error_code ec;
        fs::remove_all(m_staging, ec);
    }
    releaseLock(m_lockPath, m_lockFd);
}

Result<void> FolderExport::commit()
{
    // Checked again: the folder may have changed while the export was written.
    if (auto ok = checkReplaceableFolder(m_target, m_shown); !ok)
        return ok.error();
    syncFolder(m_staging);
    std::error_code ec;
    const fs::path parent = m_target.parent_path();
    if (!fs::exists(m_target, ec)) {
        fs::rename(m_staging, m_target, ec);
        if (ec)
            return Error::runtime("cannot move the export into place: " + ec.message(), m_shown);
    } else if (::renameat2(AT_FDCWD, m_staging.c_str(), AT_FDCWD, m_target.c_str(),
                           RENAME_EXCHANGE) == 0) {
        // The staging name now holds the old folder.
        fs::remove_all(m_staging, ec);
    } else if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
        // A filesystem without the exchange: the old folder moved aside, the new one in (a
        // kill between the two leaves no folder at the target, and the old one aside, removed
        // by the next export).
        const fs::path aside = m_staging.string() + "-old";
        fs::rename(m_target, aside, ec);
        if (ec)
            return Error::runtime("cannot move the old folder aside: " + ec.message(), m_shown);
        fs::rename(m_staging, m_target, ec);
        if (ec) {
            std::error_code back;
            fs::rename(aside, m_target, back);
            return Error::runtime("cannot move the export into place: " + ec.message(), m_shown);
        }
        fs::remove_all(aside, ec);
    } else {
        return Error::runtime("cannot swap the export into place: " + errnoText(), m_shown);
    }
    m_committed = true;
    syncFolder(parent);
    releaseLock(m_lockPath, m_lockFd);
    return {};
}

Result<void> replaceFolder(const fs::path& finished, const std::string& target)
{
    auto stage = FolderExport::begin(target, Progress::none(), CancelToken());
    if (!stage)
        return stage.error();
    std::error_code ec;
    fs::remove((*stage)->staging(), ec);
    fs::rename(finished, (*stage)->staging(), ec);
    if (ec)
        return Error::runtime("cannot move the export into place: " + ec.message(), target);
    return (*stage)->commit();
}

Result<void> folderExportFault()
{
    const char* value = std::getenv("BITLENS_FOLDER_EXPORT_FAULT");
    if (!value || !*value)
        return {};
    const std::string fault(value);
    if (fault == "fail")
        return Error::runtime("write failed (BITLENS_FOLDER_EXPORT_FAULT=fail)");
    if (fault == "kill")
        std::raise(SIGKILL);
    if (fault.rfind("sleep:", 0) == 0)
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::atol(fault.c_str() + 6) * 1000));
    return {};
}

} // namespace bitlens::exporting
