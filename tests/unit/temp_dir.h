#pragma once
// A fresh folder per test (named after the test), removed when the test ends.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

namespace bitlens::test {

/// A temporary folder for one test.
class TempDir {
public:
    explicit TempDir(const std::string& prefix = "bitlens")
    {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string name = prefix + "_" + std::to_string(::getpid()) + "_" +
                           info->test_suite_name() + "_" + info->name();
        for (char& c : name)
            if (c == '/')
                c = '_';  // parameterized test names contain '/'
        m_path = std::filesystem::temp_directory_path() / name;
        std::filesystem::remove_all(m_path);
        std::filesystem::create_directories(m_path);
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(m_path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    std::string path() const { return m_path.string(); }
    std::string file(const std::string& name) const { return (m_path / name).string(); }

private:
    std::filesystem::path m_path;
};

} // namespace bitlens::test
