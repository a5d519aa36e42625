#include "analysis/hardware.h"

#include "exec/device.h"
#include "kernels/cpu_features.h"
#include "kernels/fake_quant.h"
#include "kernels/lowbit.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <regex>

namespace bitlens::analysis {

namespace {

/// Whether the own kernels use flag `name` with the features `f` in force (cpuFeatures(),
/// already masked by the ISA level). AMX and avx512_fp16 have no kernels here.
bool usedByKernels(const std::string& name, const kernels::CpuFeatures& f)
{
    if (name == "avx2" || name == "fma" || name == "f16c")
        return f.avx2;
    if (name == "avx_vnni")
        return f.avxVnni;
    if (name == "avx512f")
        return f.avx512;
    if (name == "avx512_vnni")
        return f.avx512Vnni;
    if (name == "avx512_bf16")
        return f.avx512Bf16;
    return false;
}

double median3(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/// Times `reps` calls of `fn` three times after one warm-up; returns the median rate in
/// 10^9 operations per second for `opsPerCall` operations per call.
template <typename Fn>
double timeRate(Fn&& fn, double opsPerCall)
{
    using Clock = std::chrono::steady_clock;
    const auto w0 = Clock::now();
    fn();
    const double warmSec = std::chrono::duration<double>(Clock::now() - w0).count();
    // Keep the whole benchmark under ~2 s: about 60 ms per timed run, at least one call.
    const int reps = std::clamp(static_cast<int>(0.06 / std::max(warmSec, 1e-6)), 1, 20);
    std::vector<double> rates;
    for (int run = 0; run < 3; ++run) {
        const auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i)
            fn();
        const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
        rates.push_back(opsPerCall * reps / std::max(sec, 1e-9) / 1e9);
    }
    return median3(rates);
}

std::string firstLine(const char* text)
{
    std::string s(text);
    return s.substr(0, s.find('\n'));
}

} // namespace

bool HardwareFacts::has(const std::string& name) const
{
    return std::any_of(flags.begin(), flags.end(),
                       [&name](const CpuFlagFact& f) { return f.name == name && f.present; });
}

int parseSmVersion(const std::string& deviceName)
{
    static const std::regex sm("sm_(\\d+)");
    std::smatch match;
    return std::regex_search(deviceName, match, sm) ? std::stoi(match[1].str()) : 0;
}

std::vector<CpuFlagFact> cpuFlagFacts()
{
    const kernels::CpuFeatures inForce = kernels::cpuFeatures();
    std::vector<CpuFlagFact> flags;
    for (const kernels::CpuFlag& flag : kernels::cpuFlags())
        flags.push_back({flag.name, flag.present,
                         flag.present && usedByKernels(flag.name, inForce)});
    return flags;
}

std::string libtorchVersion()
{
#ifdef BITLENS_TORCH_VERSION
    return BITLENS_TORCH_VERSION;
#else
    return "unknown";
#endif
}

HardwareFacts probeHardware()
{
    HardwareFacts facts;
    facts.cpuModel = kernels::cpuModelName();
    facts.flags = cpuFlagFacts();
    const kernels::CpuFeatures inForce = kernels::cpuFeatures();
    facts.isaLevel = kernels::isaName(kernels::isaLevel());
    facts.hardwareIsaLevel = kernels::isaName(kernels::hardwareIsaLevel());
    facts.isaNote = kernels::isaOverrideNote();
    const kernels::KernelRow int8Row = kernels::int8GemmKernel();
    facts.int8GemmKernel = int8Row.name;
    facts.int8GemmIsReference = int8Row.isReference();
    facts.nibble4GemmKernel = kernels::nibble4GemmKernel().name;
    facts.vnniPresent = facts.has("avx512_vnni") || facts.has("avx_vnni");
    facts.vnniUsed = inForce.avx512Vnni || inForce.avxVnni;
    try {
        facts.cudaAvailable = exec::cudaAvailable();
        if (facts.cudaAvailable) {
            facts.cudaDevice = kernels::cudaDeviceName();
            if (facts.cudaDevice.empty())
                facts.cudaDevice = exec::deviceDescription("cuda");
            facts.smVersion = parseSmVersion(facts.cudaDevice);
        }
    } catch (const std::exception&) {
        facts.cudaAvailable = false;
    }
    return facts;
}

std::vector<MatmulRate> measureMatmulRates(int size)
{
    std::vector<MatmulRate> out;
    const double ops = 2.0 * double(size) * double(size) * double(size);
    const auto run = [&](const char* name, const char* unit, auto&& fn) {
        MatmulRate rate;
        rate.name = name;
        rate.unit = unit;
        try {
            c10::InferenceMode guard;
            rate.ratePerSec = timeRate(fn, ops);
        } catch (const std::exception& e) {
            rate.error = firstLine(e.what());
        }
        out.push_back(rate);
    };
    at::Tensor a;
    at::Tensor b;
    at::Tensor a8;
    at::Tensor b8;
    at::Tensor a16;
    at::Tensor b16;
    try {
        c10::InferenceMode guard;
        a = at::randn({size, size});
        b = at::randn({size, size});
        a8 = at::randint(-127, 128, {size, size}, at::kChar);
        b8 = at::randint(-127, 128, {size, size}, at::kChar);
        a16 = a.to(at::kBFloat16);
        b16 = b.to(at::kBFloat16);
    } catch (const std::exception& e) {
        for (const char* name : {"float32 (at::matmul)", "int8 -> int32 (at::_int_mm)",
                                 "bf16 (at::matmul)"})
            out.push_back({name, 0.0, "", firstLine(e.what())});
        return out;
    }
    run("float32 (at::matmul)", "GFLOP/s", [&] { (void)at::matmul(a, b); });
    run("int8 -> int32 (at::_int_mm)", "GOP/s", [&] { (void)at::_int_mm(a8, b8); });
    run("bf16 (at::matmul)", "GFLOP/s", [&] { (void)at::matmul(a16, b16); });
    return out;
}

} // namespace bitlens::analysis
