// Per-layer overrides are parsed in one place (quant::applyOverride) for scheme files and for
// the runs of core/workspace: "float" and "float32" both keep a layer float32, anything else
// is a scheme whose layer configuration the layer takes, and a bad one names the layer.

#include "quant/scheme.h"

#include "io/file_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

using namespace bitlens;

TEST(SchemeOverrides, FloatAndFloat32KeepTheLayerFloat)
{
    for (const char* value : {"float", "float32"}) {
        auto scheme = quant::parseScheme("w4-int4").value();
        ASSERT_TRUE(quant::applyOverride(scheme, "fc1", value).ok()) << value;
        ASSERT_EQ(scheme.overrides.count("fc1"), 1u) << value;
        EXPECT_FALSE(scheme.overrides.at("fc1").has_value()) << value;
    }
}

TEST(SchemeOverrides, ASchemeGivesItsLayerConfiguration)
{
    auto scheme = quant::parseScheme("w4-int4").value();
    ASSERT_TRUE(quant::applyOverride(scheme, "fc1", "static-int8").ok());
    const auto int8 = quant::parseScheme("static-int8").value();
    ASSERT_TRUE(scheme.overrides.at("fc1").has_value());
    EXPECT_TRUE(*scheme.overrides.at("fc1") == int8.config);
}

TEST(SchemeOverrides, ABadValueNamesTheLayer)
{
    auto scheme = quant::parseScheme("w4-int4").value();
    auto bad = quant::applyOverride(scheme, "fc1", "int3-magic");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message.rfind("override of 'fc1': ", 0), 0u) << bad.error().message;
    EXPECT_EQ(scheme.overrides.count("fc1"), 0u);
}

TEST(SchemeOverrides, SchemeFilesTakeFloat32Too)
{
    const auto path =
        (std::filesystem::temp_directory_path() / "bitlens_override_float32.json").string();
    const std::string text =
        nlohmann::json{{"preset", "w4-int4"}, {"overrides", {{"fc1", "float32"}}}}.dump();
    ASSERT_TRUE(io::writeFileAtomic(path, text.data(), text.size()).ok());
    auto scheme = quant::parseScheme(path);
    std::filesystem::remove(path);
    ASSERT_TRUE(scheme.ok()) << scheme.error().describe();
    ASSERT_EQ(scheme->overrides.count("fc1"), 1u);
    EXPECT_FALSE(scheme->overrides.at("fc1").has_value());
}
