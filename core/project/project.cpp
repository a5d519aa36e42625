#include "project/project.h"

#include "io/file_util.h"

#include <filesystem>

namespace bitlens::project {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kFormat = "bitlens-project";

Error badKey(const std::string& path, const std::string& key, const std::string& expected)
{
    return Error::badInput(path, "project key \"" + key + "\" is not " + expected);
}

/// A path as saved, resolved against the project's folder when it is relative and names a file
/// or folder there.
std::string resolve(const std::string& saved, const fs::path& projectDir)
{
    if (saved.empty() || fs::path(saved).is_absolute())
        return saved;
    std::error_code ec;
    const fs::path beside = projectDir / saved;
    return fs::exists(beside, ec) ? beside.lexically_normal().string() : saved;
}

} // namespace

json toJson(const Project& project)
{
    json runs = json::array();
    for (const ProjectRun& run : project.runs)
        runs.push_back({{"scheme", run.scheme},
                        {"time", run.time},
                        {"model", run.modelPath},
                        {"report", run.report}});
    json overrides = json::object();
    for (const auto& [layer, scheme] : project.overrides)
        overrides[layer] = scheme;
    return {{"format", kFormat},
            {"version", kProjectVersion},
            {"model", project.modelPath},
            {"data", project.dataPaths},
            {"scheme", project.scheme},
            {"overrides", overrides},
            {"runs", runs}};
}

Result<Project> fromJson(const json& j, const std::string& path)
{
    if (!j.is_object() || j.value("format", json()) != kFormat)
        return Error::badInput(path, "not a BitLens project (no \"format\": \"bitlens-project\")");
    const json& version = j.value("version", json());
    if (!version.is_number_integer())
        return badKey(path, "version", "an integer");
    if (version.get<std::int64_t>() > kProjectVersion)
        return Error::unsupported(path, "project version " +
                                            std::to_string(version.get<std::int64_t>()) +
                                            " was written by a newer BitLens (this one reads " +
                                            std::to_string(kProjectVersion) + ")");
    Project p;
    auto text = [&](const json& obj, const char* key, std::string& out) -> Result<void> {
        if (!obj.contains(key))
            return {};
        if (!obj[key].is_string())
            return badKey(path, key, "a string");
        out = obj[key].get<std::string>();
        return {};
    };
    if (auto r = text(j, "model", p.modelPath); !r)
        return r.error();
    if (auto r = text(j, "scheme", p.scheme); !r)
        return r.error();
    if (j.contains("data")) {
        if (!j["data"].is_array())
            return badKey(path, "data", "an array of paths");
        for (const json& d : j["data"]) {
            if (!d.is_string())
                return badKey(path, "data", "an array of paths");
            p.dataPaths.push_back(d.get<std::string>());
        }
    }
    if (j.contains("overrides")) {
        if (!j["overrides"].is_object())
            return badKey(path, "overrides", "an object of layer: scheme");
        for (auto it = j["overrides"].begin(); it != j["overrides"].end(); ++it) {
            if (!it.value().is_string())
                return badKey(path, "overrides." + it.key(), "a scheme string");
            p.overrides[it.key()] = it.value().get<std::string>();
        }
    }
    if (j.contains("runs")) {
        if (!j["runs"].is_array())
            return badKey(path, "runs", "an array");
        for (std::size_t i = 0; i < j["runs"].size(); ++i) {
            const json& r = j["runs"][i];
            const std::string key = "runs[" + std::to_string(i) + "]";
            if (!r.is_object() || !r.contains("report") || !r["report"].is_object())
                return badKey(path, key + ".report", "a report object");
            ProjectRun run;
            run.report = r["report"];
            if (auto t = text(r, "scheme", run.scheme); !t)
                return badKey(path, key + ".scheme", "a string");
            if (auto t = text(r, "time", run.time); !t)
                return badKey(path, key + ".time", "a string");
            if (auto t = text(r, "model", run.modelPath); !t)
                return badKey(path, key + ".model", "a string");
            p.runs.push_back(std::move(run));
        }
    }
    return p;
}

Result<void> saveProject(const Project& project, const std::string& path)
{
    const std::string text = toJson(project).dump(2) + "\n";
    return io::writeFileAtomic(path, text.data(), text.size());
}

Result<Project> loadProject(const std::string& path)
{
    auto bytes = io::readFileBytes(path);
    if (!bytes)
        return bytes.error();
    if (bytes->size() > kMaxProjectBytes)
        return Error::badInput(path, "project file is larger than 256 MiB");
    const json j = json::parse(bytes->begin(), bytes->end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
        return Error::badInput(path, "project file is not valid JSON");
    auto project = fromJson(j, path);
    if (!project)
        return project.error();
    const fs::path dir = fs::path(path).parent_path();
    project->modelPath = resolve(project->modelPath, dir);
    for (std::string& data : project->dataPaths)
        data = resolve(data, dir);
    return project;
}

} // namespace bitlens::project
