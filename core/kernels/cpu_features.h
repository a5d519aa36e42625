#pragma once
// The one source of CPU features for BitLens: the kernels' dispatch, the engine's kernel choice,
// the reports and the Hardware panel all read them here (cpuid through the compiler's
// builtins, never /proc/cpuinfo).
//
// ISA levels order what the kernels may use: scalar < avx2 < avx-vnni < avx512. The level in
// force is the highest this CPU has, capped by the environment variable BITLENS_ISA (read once,
// here); tests and benchmarks set it with ScopedIsaLevel. A cap above the CPU is lowered to what
// the CPU has: BITLENS_ISA=avx512 on an AVX2-only machine runs the AVX2 kernels.
//   scalar    the `_ref` twins only (and LibTorch's own kernels, which follow their own cpuid)
//   avx2      AVX2 + FMA + F16C
//   avx-vnni  avx2 plus the 256-bit VEX vpdpbusd (Intel Core 12th gen and later, AMD Zen 5)
//   avx512    AVX-512 F/BW/VL/DQ, with VNNI, BF16 and AMX where the CPU has them

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bitlens::kernels {

/// Instruction-set levels of the own kernels, lowest first.
enum class IsaLevel { Scalar = 0, Avx2 = 1, AvxVnni = 2, Avx512 = 3 };

/// What the kernels may use: the CPU's features masked by the ISA level in force.
struct CpuFeatures {
    bool avx2 = false;        ///< AVX2 + FMA + F16C (the AVX2 kernels need all three)
    bool avxVnni = false;     ///< VEX-encoded 256-bit vpdpbusd (AVX-VNNI)
    bool avx512 = false;      ///< AVX-512 F + BW + VL + DQ (the 4-bit kernels)
    bool avx512Vnni = false;  ///< 512-bit vpdpbusd (the int8 GEMM)
    bool avx512Bf16 = false;  ///< vdpbf16ps
    bool amx = false;         ///< AMX tiles (reported only; no AMX kernels here)
    bool amxInt8 = false;     ///< AMX-INT8 (reported only)
    bool amxBf16 = false;     ///< AMX-BF16 (reported only)
};

/// The features of this CPU, uncapped (cpuid, computed once).
const CpuFeatures& hardwareFeatures();
/// The highest level this CPU has.
IsaLevel hardwareIsaLevel();
/// The level in force: hardwareIsaLevel() capped by BITLENS_ISA, or as a ScopedIsaLevel set it.
IsaLevel isaLevel();
/// hardwareFeatures() masked by isaLevel(): what the kernels may use now.
CpuFeatures cpuFeatures();
/// Every level from scalar up to hardwareIsaLevel(), lowest first (the tests loop over them).
std::vector<IsaLevel> supportedIsaLevels();
/// "scalar", "avx2", "avx-vnni", "avx512".
const char* isaName(IsaLevel level);
/// Parses a level name (as BITLENS_ISA takes it; "avxvnni" is accepted too); nullopt if unknown.
std::optional<IsaLevel> parseIsaLevel(std::string_view name);
/// What BITLENS_ISA said and what came of it, for reports and the Hardware panel: empty when
/// unset; otherwise e.g. "BITLENS_ISA=avx2" or "BITLENS_ISA=avx512 (capped at avx2: this CPU's
/// highest)" or "BITLENS_ISA=foo ignored (not one of scalar, avx2, avx-vnni, avx512)".
std::string isaOverrideNote();
/// One CPU flag as Linux's /proc/cpuinfo names it, read from cpuid.
struct CpuFlag {
    const char* name;  ///< e.g. "avx512_vnni"
    bool present;      ///< the CPU has it (and the OS saves its registers)
};
/// The flags that matter for low-bit kernels, in display order: avx2, fma, f16c, avx_vnni,
/// avx512f, avx512_vnni, avx512_bf16, avx512_fp16, amx_tile, amx_int8, amx_bf16. Uncapped.
std::vector<CpuFlag> cpuFlags();
/// The CPU's brand string from cpuid (e.g. "AMD EPYC 7B13"), or "" where cpuid has none.
std::string cpuModelName();

/// Sets the ISA level for its lifetime, in place of BITLENS_ISA (tests and benchmarks loop over
/// supportedIsaLevels() with it; not thread-safe against kernels running concurrently). The
/// level in force is then min(level, hardwareIsaLevel()).
class ScopedIsaLevel {
public:
    explicit ScopedIsaLevel(IsaLevel level);
    ~ScopedIsaLevel();
    ScopedIsaLevel(const ScopedIsaLevel&) = delete;
    ScopedIsaLevel& operator=(const ScopedIsaLevel&) = delete;

private:
    int m_previous;
};

} // namespace bitlens::kernels
