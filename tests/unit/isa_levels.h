#pragma once
// Runs a parametrised test once at every ISA level this CPU supports (kernels/cpu_features.h):
// on an AVX-512 machine the AVX2 and scalar rows of every kernel are tested too, so CI covers
// what an AVX2-only desktop runs.

#include "kernels/cpu_features.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace bitlens::testing {

/// Fixture: the ISA level of GetParam() is in force for the whole test body.
class AtIsaLevel : public ::testing::TestWithParam<kernels::IsaLevel> {
protected:
    void SetUp() override { m_scope.emplace(GetParam()); }
    void TearDown() override { m_scope.reset(); }

private:
    std::optional<kernels::ScopedIsaLevel> m_scope;
};

/// "scalar", "avx2", "avx_vnni", "avx512": gtest names allow no '-'.
inline std::string isaTestName(const ::testing::TestParamInfo<kernels::IsaLevel>& info)
{
    std::string name = kernels::isaName(info.param);
    for (char& c : name)
        if (c == '-')
            c = '_';
    return name;
}

} // namespace bitlens::testing

/// Instantiates the AtIsaLevel-derived suite `Suite` at every supported level.
#define BITLENS_AT_EVERY_ISA_LEVEL(Suite)                                                       \
    INSTANTIATE_TEST_SUITE_P(Isa, Suite,                                                        \
                             ::testing::ValuesIn(::bitlens::kernels::supportedIsaLevels()),     \
                             ::bitlens::testing::isaTestName)
