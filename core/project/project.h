#pragma once
// A BitLens project (.bitlens): what a session was working on and what it found, so that closing
// the window loses nothing. JSON: the model (path or zoo name), the data sets, the scheme string
// (preset and options), per-layer overrides, and every run of the history as the report.json it
// wrote. Saved atomically (temporary file + rename); a half-written project never replaces a
// good one. Torch-free.

#include "jobs/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bitlens::project {

/// The project format version this build writes and reads (newer files are refused).
inline constexpr int kProjectVersion = 1;
/// Largest project file read (reports of many runs; 256 MiB).
inline constexpr std::uint64_t kMaxProjectBytes = 256ull << 20;

/// One finished run of the history.
struct ProjectRun {
    nlohmann::json report;  ///< report.json as the run wrote it (an object)
    std::string scheme;     ///< the scheme string it ran
    std::string time;       ///< when it finished, ISO 8601 ("2025-01-31T12:34:56")
    std::string modelPath;  ///< the model it quantized

    bool operator==(const ProjectRun&) const = default;
};

/// A saved session.
struct Project {
    std::string modelPath;                        ///< model file or zoo name ("fashion-cnn")
    std::vector<std::string> dataPaths;           ///< data sets, the calibration/eval one first
    std::string scheme;                           ///< scheme string with options
    std::map<std::string, std::string> overrides; ///< layer -> "float" or a scheme string
    std::vector<ProjectRun> runs;                 ///< the history, oldest first

    bool operator==(const Project&) const = default;
};

/// The project as JSON ({"format": "bitlens-project", "version": 1, ...}).
nlohmann::json toJson(const Project& project);
/// Parses a project; `path` names the file in errors (BadInput naming the key that is wrong,
/// Unsupported for a newer version).
Result<Project> fromJson(const nlohmann::json& json, const std::string& path);

/// Writes `project` to `path` atomically.
Result<void> saveProject(const Project& project, const std::string& path);
/// Reads a project file. Relative model and data paths are taken relative to the project's
/// folder when a file exists there (a project moved with its files still opens); other names
/// (zoo names, missing files) are kept as written.
Result<Project> loadProject(const std::string& path);

} // namespace bitlens::project
