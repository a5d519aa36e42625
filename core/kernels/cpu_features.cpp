#include "kernels/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cpuid.h>
#include <cstdlib>
#include <cstring>

namespace bitlens::kernels {

namespace {

/// XCR0 says which register states the OS saves; a CPU flag without the OS saving the
/// registers (AVX under some hypervisors) is as good as absent.
unsigned long long readXcr0()
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return 0;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<unsigned long long>(hi) << 32) | lo;
}

CpuFeatures detect()
{
    CpuFeatures f;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return f;
    const bool fma = c & bit_FMA, f16c = c & bit_F16C;
    const unsigned long long xcr0 = readXcr0();
    const bool ymmSaved = (xcr0 & 0x6) == 0x6;      // SSE + AVX state
    const bool zmmSaved = (xcr0 & 0xE6) == 0xE6;    // + opmask, ZMM_Hi256, Hi16_ZMM
    const bool tileSaved = (xcr0 & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA
    unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0, b71 = 0, c71 = 0, d71 = 0;
    if (!__get_cpuid_count(7, 0, &a, &b7, &c7, &d7))
        return f;
    __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71);
    f.avx2 = ymmSaved && (b7 & bit_AVX2) && fma && f16c;
    f.avxVnni = f.avx2 && ((a71 >> 4) & 1U);  // CPUID.(7,1):EAX[4]
    f.avx512 = zmmSaved && f.avx2 && (b7 & bit_AVX512F) && (b7 & bit_AVX512BW) &&
               (b7 & bit_AVX512VL) && (b7 & bit_AVX512DQ);
    f.avx512Vnni = f.avx512 && ((c7 >> 11) & 1U);  // CPUID.(7,0):ECX[11]
    f.avx512Bf16 = f.avx512 && ((a71 >> 5) & 1U);  // CPUID.(7,1):EAX[5]
    f.amx = tileSaved && ((d7 >> 24) & 1U);        // AMX-TILE
    f.amxInt8 = f.amx && ((d7 >> 25) & 1U);
    f.amxBf16 = f.amx && ((d7 >> 22) & 1U);
    return f;
}

IsaLevel levelOf(const CpuFeatures& f)
{
    if (f.avx512)
        return IsaLevel::Avx512;
    if (f.avxVnni)
        return IsaLevel::AvxVnni;
    if (f.avx2)
        return IsaLevel::Avx2;
    return IsaLevel::Scalar;
}

/// BITLENS_ISA, read once: the cap it names (nullopt: unset or not a level) and its note.
struct EnvCap {
    std::optional<IsaLevel> cap;
    std::string note;
};

const EnvCap& envCap()
{
    static const EnvCap value = [] {
        EnvCap e;
        const char* raw = std::getenv("BITLENS_ISA");
        if (!raw || !*raw)
            return e;
        const std::string text(raw);
        e.cap = parseIsaLevel(text);
        if (!e.cap) {
            e.note = "BITLENS_ISA=" + text +
                     " ignored (not one of scalar, avx2, avx-vnni, avx512)";
            return e;
        }
        const IsaLevel hw = hardwareIsaLevel();
        e.note = "BITLENS_ISA=" + text;
        if (static_cast<int>(*e.cap) > static_cast<int>(hw))
            e.note += std::string(" (capped at ") + isaName(hw) + ": this CPU's highest)";
        return e;
    }();
    return value;
}

/// -1: no ScopedIsaLevel active; otherwise the level it set.
std::atomic<int> g_scoped{-1};

} // namespace

const CpuFeatures& hardwareFeatures()
{
    static const CpuFeatures features = detect();
    return features;
}

IsaLevel hardwareIsaLevel()
{
    static const IsaLevel level = levelOf(hardwareFeatures());
    return level;
}

IsaLevel isaLevel()
{
    const int hw = static_cast<int>(hardwareIsaLevel());
    const int scoped = g_scoped.load(std::memory_order_relaxed);
    if (scoped >= 0)
        return static_cast<IsaLevel>(std::min(scoped, hw));
    if (const auto& cap = envCap().cap)
        return static_cast<IsaLevel>(std::min(static_cast<int>(*cap), hw));
    return static_cast<IsaLevel>(hw);
}

CpuFeatures cpuFeatures()
{
    CpuFeatures f = hardwareFeatures();
    const IsaLevel level = isaLevel();
    if (level < IsaLevel::Avx512) {
        f.avx512 = f.avx512Vnni = f.avx512Bf16 = false;
        f.amx = f.amxInt8 = f.amxBf16 = false;
    }
    if (level < IsaLevel::AvxVnni)
        f.avxVnni = false;
    if (level < IsaLevel::Avx2)
        f.avx2 = false;
    return f;
}

std::vector<IsaLevel> supportedIsaLevels()
{
    std::vector<IsaLevel> levels;
    const IsaLevel hw = hardwareIsaLevel();
    for (IsaLevel l : {IsaLevel::Scalar, IsaLevel::Avx2, IsaLevel::AvxVnni, IsaLevel::Avx512}) {
        // avx-vnni is a level of its own only where the CPU has VEX VNNI: an AVX-512 CPU
        // without it (Skylake-X) goes from avx2 straight to avx512.
        if (l == IsaLevel::AvxVnni && !hardwareFeatures().avxVnni)
            continue;
        if (static_cast<int>(l) <= static_cast<int>(hw))
            levels.push_back(l);
    }
    return levels;
}

const char* isaName(IsaLevel level)
{
    switch (level) {
    case IsaLevel::Scalar: return "scalar";
    case IsaLevel::Avx2: return "avx2";
    case IsaLevel::AvxVnni: return "avx-vnni";
    case IsaLevel::Avx512: return "avx512";
    }
    return "scalar";
}

std::optional<IsaLevel> parseIsaLevel(std::string_view name)
{
    std::string s(name);
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (s == "scalar" || s == "ref" || s == "none")
        return IsaLevel::Scalar;
    if (s == "avx2")
        return IsaLevel::Avx2;
    if (s == "avx-vnni" || s == "avxvnni" || s == "avx_vnni")
        return IsaLevel::AvxVnni;
    if (s == "avx512" || s == "avx-512" || s == "avx512-vnni")
        return IsaLevel::Avx512;
    return std::nullopt;
}

std::string isaOverrideNote()
{
    if (g_scoped.load(std::memory_order_relaxed) >= 0)
        return std::string("ISA level set to ") + isaName(isaLevel()) + " by the caller";
    return envCap().note;
}

std::vector<CpuFlag> cpuFlags()
{
    // Single flags, not the composite levels: avx512f alone, as /proc/cpuinfo lists it.
    static const std::vector<CpuFlag> flags = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        unsigned c1 = 0, b7 = 0, c7 = 0, d7 = 0, a71 = 0;
        if (__get_cpuid(1, &a, &b, &c, &d))
            c1 = c;
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            b7 = b;
            c7 = c;
            d7 = d;
        }
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d))
            a71 = a;
        const unsigned long long xcr0 = readXcr0();
        const bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xE6) == 0xE6,
                   tiles = (xcr0 & 0x60000) == 0x60000;
        return std::vector<CpuFlag>{
            {"avx2", ymm && (b7 & bit_AVX2)},
            {"fma", ymm && (c1 & bit_FMA)},
            {"f16c", ymm && (c1 & bit_F16C)},
            {"avx_vnni", ymm && ((a71 >> 4) & 1U)},
            {"avx512f", zmm && (b7 & bit_AVX512F)},
            {"avx512_vnni", zmm && ((c7 >> 11) & 1U)},
            {"avx512_bf16", zmm && ((a71 >> 5) & 1U)},
            {"avx512_fp16", zmm && ((d7 >> 23) & 1U)},
            {"amx_tile", tiles && ((d7 >> 24) & 1U)},
            {"amx_int8", tiles && ((d7 >> 25) & 1U)},
            {"amx_bf16", tiles && ((d7 >> 22) & 1U)},
        };
    }();
    return flags;
}

std::string cpuModelName()
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0x80000000U, &a, &b, &c, &d) || a < 0x80000004U)
        return {};
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
        unsigned r[4] = {};
        __get_cpuid(0x80000002U + i, &r[0], &r[1], &r[2], &r[3]);
        std::memcpy(brand + 16 * i, r, 16);
    }
    std::string s(brand);
    const auto first = s.find_first_not_of(' ');
    if (first == std::string::npos)
        return {};
    s = s.substr(first);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\0'))
        s.pop_back();
    return s;
}

ScopedIsaLevel::ScopedIsaLevel(IsaLevel level)
    : m_previous(g_scoped.exchange(static_cast<int>(level)))
{
}

ScopedIsaLevel::~ScopedIsaLevel() { g_scoped.store(m_previous); }

} // namespace bitlens::kernels
