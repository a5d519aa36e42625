#pragma once
// Runs a Python snippet with the venv that holds the reference packages (gguf, safetensors,
// numpy, torch), for tests that check our files with the reference readers. A test calls
// pythonOrSkip() first: without that interpreter it is skipped, never passed.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace bitlens::test {

/// $BITLENS_PYTHON, else ~/.cache/bitlens/venv/bin/python; empty when neither exists.
inline std::string venvPython()
{
    if (const char* env = std::getenv("BITLENS_PYTHON"); env && *env)
        return env;
    const char* home = std::getenv("HOME");
    if (!home)
        return {};
    const std::filesystem::path p = std::filesystem::path(home) / ".cache/bitlens/venv/bin/python";
    std::error_code ec;
    return std::filesystem::exists(p, ec) ? p.string() : std::string();
}

/// Writes `code` to `dir`/oracle.py and runs it with `args`; returns the exit status and puts
/// stdout + stderr into `output`.
inline int runPython(const std::string& python, const std::string& dir, const std::string& code,
                     const std::string& args, std::string& output)
{
    const std::string script = dir + "/oracle.py";
    const std::string log = dir + "/oracle.log";
    {
        std::ofstream out(script);
        out << code;
    }
    const std::string cmd = "'" + python + "' '" + script + "' " + args + " > '" + log + "' 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream in(log);
    output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return status;
}

} // namespace bitlens::test

/// Skips the current test when the reference Python is not installed.
#define BITLENS_PYTHON_OR_SKIP(var)                                                          \
    const std::string var = ::bitlens::test::venvPython();                                   \
    if (var.empty())                                                                         \
        GTEST_SKIP() << "reference Python (~/.cache/bitlens/venv) not installed"
