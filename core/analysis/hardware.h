#pragma once
// What this machine offers for low-bit formats, for the GUI's Hardware panel and reports, with
// a torch-free header: the CPU flags from cpuid (kernels/cpu_features.h, the same source the
// kernels dispatch on, never /proc/cpuinfo), which of them the own kernels use at the ISA
// level in force, the CUDA device, and a measured (never quoted) matmul rate.

#include <string>
#include <vector>

namespace bitlens::analysis {

/// One CPU flag as Linux names it, read from cpuid.
struct CpuFlagFact {
    std::string name;            ///< "avx512_vnni"
    bool present = false;        ///< the CPU has it (and the OS saves its registers)
    bool usedByKernels = false;  ///< the own kernels use it at the ISA level in force
};

/// The CPU and GPU facts the Hardware panel shows, from one probe.
struct HardwareFacts {
    std::string cpuModel;                ///< cpuid brand string; "" where cpuid has none
    std::vector<CpuFlagFact> flags;      ///< kernels::cpuFlags() order, uncapped presence
    std::string isaLevel;                ///< level in force: "scalar", "avx2", ...
    std::string hardwareIsaLevel;        ///< the highest level this CPU has
    std::string isaNote;                 ///< what BITLENS_ISA said; "" when unset
    std::string int8GemmKernel;          ///< the int8 GEMM row now: "avx512-vnni", ...
    bool int8GemmIsReference = false;    ///< that row is the scalar reference
    std::string nibble4GemmKernel;       ///< the 4-bit GEMV row now
    bool vnniPresent = false;            ///< the CPU has avx512_vnni or avx_vnni
    bool vnniUsed = false;               ///< the int8 kernels use VNNI at the level in force
    bool cudaAvailable = false;          ///< a CUDA device is usable
    std::string cudaDevice;              ///< its name ("NVIDIA H200 (139 GiB, sm_90)"), or ""
    int smVersion = 0;                   ///< e.g. 90 from the name's "sm_90"; 0 when unknown

    /// Whether flag `name` is present (uncapped); false for names not in `flags`.
    bool has(const std::string& name) const;
};

/// The CPU flags alone (cpuid; no CUDA probe), as HardwareFacts::flags lists them.
std::vector<CpuFlagFact> cpuFlagFacts();

/// Probes the CPU (cpuid) and the CUDA device. The first call may initialise the CUDA driver
/// (seconds); cheap afterwards.
HardwareFacts probeHardware();

/// The LibTorch version BitLens was built with ("2.13.0"; "unknown" when the build could not
/// tell), for the About dialog and `--version`.
std::string libtorchVersion();

/// sm version (e.g. 90) from a device name ending "... sm_90)", or 0.
int parseSmVersion(const std::string& deviceName);

/// One measured matmul rate.
struct MatmulRate {
    std::string name;         ///< "float32 (at::matmul)", "int8 -> int32 (at::_int_mm)", ...
    double ratePerSec = 0.0;  ///< 10^9 FLOP/s (float types) or 10^9 OP/s (int8), median of 3
    std::string unit;         ///< "GFLOP/s" or "GOP/s"
    std::string error;        ///< why it could not run (first line), empty on success
};

/// Runs a short (< 2 s) size x size x size matmul micro-benchmark on the CPU: float32, int8 x
/// int8 -> int32 (at::_int_mm) and bf16, each timed 3 times after a warm-up, median. Blocking:
/// call it off the GUI thread. Never throws; a type that fails has `error` set.
std::vector<MatmulRate> measureMatmulRates(int size = 512);

} // namespace bitlens::analysis
