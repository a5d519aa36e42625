// What the Hardware panel shows (analysis/hardware.h): the flags are cpuid's, exactly as the
// kernels read them, and "used by the kernels" follows the ISA level in force, so the panel
// and the kernels cannot disagree on VNNI.

#include "analysis/hardware.h"

#include "kernels/cpu_features.h"
#include "kernels/lowbit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace bitlens::analysis {
namespace {

bool used(const std::vector<CpuFlagFact>& flags, const std::string& name)
{
    for (const CpuFlagFact& f : flags)
        if (f.name == name)
            return f.usedByKernels;
    return false;
}

TEST(HardwareProbe, FlagsAreTheKernelsCpuidFlags)
{
    const std::vector<kernels::CpuFlag> cpuid = kernels::cpuFlags();
    const std::vector<CpuFlagFact> flags = cpuFlagFacts();
    ASSERT_EQ(flags.size(), cpuid.size());
    for (std::size_t i = 0; i < flags.size(); ++i) {
        EXPECT_EQ(flags[i].name, cpuid[i].name);
        EXPECT_EQ(flags[i].present, cpuid[i].present) << flags[i].name;
        EXPECT_TRUE(!flags[i].usedByKernels || flags[i].present) << flags[i].name;
    }
    const HardwareFacts facts = probeHardware();
    EXPECT_EQ(facts.cpuModel, kernels::cpuModelName());
    EXPECT_EQ(facts.isaLevel, kernels::isaName(kernels::isaLevel()));
    EXPECT_EQ(facts.int8GemmKernel, kernels::int8GemmKernel().name);
    EXPECT_EQ(facts.vnniPresent, facts.has("avx512_vnni") || facts.has("avx_vnni"));
}

TEST(HardwareProbe, VnniInUseFollowsTheIsaLevelAtEveryLevel)
{
    for (const kernels::IsaLevel level : kernels::supportedIsaLevels()) {
        const kernels::ScopedIsaLevel scope(level);
        const kernels::CpuFeatures f = kernels::cpuFeatures();
        const HardwareFacts facts = probeHardware();
        SCOPED_TRACE(kernels::isaName(level));
        EXPECT_EQ(facts.vnniUsed, f.avx512Vnni || f.avxVnni);
        EXPECT_EQ(used(facts.flags, "avx512_vnni"), f.avx512Vnni);
        EXPECT_EQ(used(facts.flags, "avx_vnni"), f.avxVnni);
        EXPECT_EQ(used(facts.flags, "avx2"), f.avx2);
        EXPECT_FALSE(used(facts.flags, "amx_int8"));  // no AMX kernels
        // Presence is the CPU's, whatever the level.
        EXPECT_EQ(facts.vnniPresent, kernels::hardwareFeatures().avx512Vnni ||
                                         kernels::hardwareFeatures().avxVnni);
        if (level == kernels::IsaLevel::Scalar) {
            EXPECT_FALSE(facts.vnniUsed);
            EXPECT_TRUE(facts.int8GemmIsReference);
        }
    }
}

TEST(HardwareProbe, SmVersionFromTheDeviceName)
{
    EXPECT_EQ(parseSmVersion("NVIDIA H200 (139 GiB, sm_90)"), 90);
    EXPECT_EQ(parseSmVersion("sm_100"), 100);
    EXPECT_EQ(parseSmVersion("none"), 0);
}

TEST(HardwareProbe, MatmulRatesAreMeasured)
{
    const std::vector<MatmulRate> rates = measureMatmulRates(64);
    ASSERT_EQ(rates.size(), 3U);
    EXPECT_EQ(rates[0].unit, "GFLOP/s");
    EXPECT_EQ(rates[1].unit, "GOP/s");
    for (const MatmulRate& rate : rates) {
        EXPECT_TRUE(rate.error.empty()) << rate.name << ": " << rate.error;
        EXPECT_TRUE(std::isfinite(rate.ratePerSec) && rate.ratePerSec > 0.0) << rate.name;
    }
}

} // namespace
} // namespace bitlens::analysis
