// bitlens-cli zoo: list, build or locate the demo models.

#include "cli.h"

#include "zoo/zoo.h"

#include <cstdio>
#include <iostream>

namespace bitlens::cli {

using nlohmann::json;

int cmdZoo(const Args& args)
{
    if (args.positional.empty())
        return fail(Error::usage("zoo needs a subcommand: list, build NAME or path NAME"));
    const std::string& sub = args.positional[0];
    if (sub == "list") {
        if (args.has("--json")) {
            json j = json::array();
            for (const auto& e : zoo::list())
                j.push_back({{"name", e.name}, {"description", e.description},
                             {"task", e.task}, {"metric", e.metric},
                             {"built", zoo::isBuilt(e.name)}});
            std::cout << j.dump(2) << "\n";
            return 0;
        }
        for (const auto& e : zoo::list())
            std::printf("%-14s %-9s %s\n", e.name.c_str(),
                        zoo::isBuilt(e.name) ? "built" : "not built", e.description.c_str());
        return 0;
    }
    if (args.positional.size() != 2)
        return fail(Error::usage("usage: bitlens-cli zoo " + sub + " NAME"));
    const std::string& name = args.positional[1];
    if (!zoo::isZooName(name))
        return fail(Error::usage("unknown zoo model '" + name + "' (see `bitlens-cli zoo list`)"));
    Progress progress = stderrProgress(args.has("--quiet"));
    if (sub == "build") {
        auto built = zoo::build(name, progress);
        if (!built)
            return fail(built.error());
        std::printf("%s\n", built->modelPath.c_str());
        return 0;
    }
    if (sub == "path") {
        auto built = zoo::ensure(name, progress);
        if (!built)
            return fail(built.error());
        std::printf("%s\n", built->modelPath.c_str());
        return 0;
    }
    return fail(Error::usage("unknown zoo subcommand '" + sub + "'"));
}

} // namespace bitlens::cli
