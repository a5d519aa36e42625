#pragma once
// The saved reports of tests/data/reports (real CLI outputs) the view tests load.

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace bitlens::testing {

/// tests/data/reports/<name> parsed; null when the file is missing (the test then fails on it).
inline nlohmann::json loadReport(const char* name)
{
    std::ifstream in(std::string(BITLENS_TEST_DATA "/reports/") + name);
    if (!in)
        return nlohmann::json();
    return nlohmann::json::parse(in);
}

} // namespace bitlens::testing
