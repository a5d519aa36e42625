#pragma once
// Running another program and finding BitLens's own files: the zoo's pip and bible downloads,
// the consumer runtimes export verification asks (onnxruntime through the venv's Python).

#include <string>
#include <vector>

namespace bitlens::io {

/// Runs argv[0] (a path) with stdin from /dev/null and stdout and stderr sent to files; the
/// exit status (128 + signal when killed), or -1 when it could not start.
int runProcess(const std::vector<std::string>& argv, const std::string& stdoutPath,
               const std::string& stderrPath);

/// The last non-empty lines of a log file joined with " | ", for error messages.
std::string tailOf(const std::string& path, std::size_t maxLines = 4);

/// BitLens's cache folder: $BITLENS_CACHE, else $XDG_CACHE_HOME/bitlens, else
/// ~/.cache/bitlens (the zoo, the venv scripts/bootstrap makes).
std::string cacheDir();

/// The Python that runs consumer runtimes: $BITLENS_PYTHON, else <cache>/venv/bin/python when
/// it exists, else python3 on PATH; empty when there is none.
std::string pythonPath();

/// Where a file BitLens ships under share/bitlens (`rel`, e.g. "consumers/run_consumer.py")
/// may be, in order: $BITLENS_DATA_DIR, <binary>/../share/bitlens (install and build tree),
/// <binary>/resources, $BITLENS_SOURCE_DIR/resources.
std::vector<std::string> dataFileCandidates(const std::string& rel);

/// The first of dataFileCandidates(rel) that is a file; empty when none is.
std::string findDataFile(const std::string& rel);

} // namespace bitlens::io
