#pragma once
// Folder exports that are all-or-nothing (issue #49 item 3). A safetensors export to a folder
// is written into a staging folder beside the target (same parent, hidden name
// ".NAME.bitlens-staging-<pid>-<n>") and swapped in with one rename: renameat2
// RENAME_EXCHANGE where the target folder exists (the old folder then removed), a plain rename
// where it does not. All of it runs under an flock on ".NAME.bitlens-lock" beside the target,
// so concurrent exports to one folder serialise and each leaves the folder whole; staging
// folders of a killed export are removed by the next one. The result holds exactly what the
// export wrote: files of an earlier export (another model's vocab.txt) never stay.
// A target that exists must be replaceable: an empty folder, or one holding a previous BitLens
// export and nothing else (config.json's quantization_config by "bitlens ...", and only the
// files such an export writes); anything else (a user's folder, a source model's own folder)
// is refused as bad input, never deleted.

#include "jobs/progress.h"
#include "jobs/result.h"

#include <filesystem>
#include <memory>
#include <string>

namespace bitlens::exporting {

/// The folder `path` names: "out/" and "out//" are the folder out.
std::filesystem::path folderOfPath(const std::string& path);

/// Checks that `folder` may be replaced whole by a folder export: missing, empty, or a
/// previous BitLens export with nothing else inside. BadInput naming `shownPath` otherwise
/// (what is in the way, and what to do).
Result<void> checkReplaceableFolder(const std::filesystem::path& folder,
                                    const std::string& shownPath);

/// A folder export under way: the lock beside the target held, a staging folder to write in.
/// Destroyed without commit(), it removes the staging folder and leaves the target as it was.
class FolderExport {
public:
    /// Takes the lock (waiting, with a progress line, while another export to the same folder
    /// holds it; a cancel stops the wait), removes staging folders a killed export left,
    /// checks the target is replaceable and creates the staging folder. BadInput for a
    /// missing parent folder or a target that is not replaceable; Runtime for a failed write.
    static Result<std::unique_ptr<FolderExport>> begin(const std::string& path, Progress& progress,
                                                       const CancelToken& cancel);
    ~FolderExport();
    FolderExport(const FolderExport&) = delete;
    FolderExport& operator=(const FolderExport&) = delete;

    /// Where the export writes its files.
    const std::filesystem::path& staging() const { return m_staging; }
    /// The folder that commit() replaces (a symlink to a folder is followed).
    const std::filesystem::path& target() const { return m_target; }
    /// Swaps the staging folder in as the target, removes the old folder and releases the lock.
    Result<void> commit();

private:
    FolderExport() = default;
    std::string m_shown;              ///< the path as the user gave it, for errors
    std::filesystem::path m_target;
    std::filesystem::path m_staging;
    std::filesystem::path m_lockPath;
    int m_lockFd = -1;
    bool m_committed = false;
};

/// Moves a finished export folder written elsewhere (the window's own staging) onto `target`
/// the same way: under the lock, after the same check, with one rename or exchange.
Result<void> replaceFolder(const std::filesystem::path& finished, const std::string& target);

/// Test hook: BITLENS_FOLDER_EXPORT_FAULT=fail | kill | sleep:SECONDS makes a safetensors
/// export fail (Runtime), die by SIGKILL, or pause after writing its weights file and before
/// the rest. Unset (always, outside the tests): nothing.
Result<void> folderExportFault();

} // namespace bitlens::exporting
