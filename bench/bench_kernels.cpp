// Low-bit kernels side by side with float LibTorch in one process (`make bench`):
//  - int8 Linear: float at::linear against BitLens's int8 GEMM (from float input to float
//    output: quantization, GEMM, fused dequantization + bias; static and dynamic activation
//    scales) and against LibTorch's at::_int_mm (oneDNN) with its separate scaling, on
//    transformer shapes (M=128 K=768 N=3072, MiniLM-class M=1024 with hidden 384 / 1536) and
//    decode / prefill shapes (K=N=4096).
//  - 4-bit weight-only GEMV at batch 1 (and 4, 8) over 8 layers of 4096 x 4096 cycled, as in
//    LLM decoding: float32 weights (512 MB, twice the last-level cache), BitLens int4 / NF4
//    (group 32 / 64 / 128) and LibTorch's _weight_int4pack_mm_for_cpu; and 32 int4 layers so
//    that the 4-bit weights alone (300 MB) exceed the LLC too.
//  - 16-bit weight-only GEMV: the same layers as fp16 / bf16 (256 MB), BitLens's float16Gemm
//    (float32 activations and sums) and LibTorch's bf16 at::linear.
//  - bf16 at::matmul (oneDNN; AVX512-BF16 without AMX) against float32.
//  - The roofline: peak fp32 FMA, int8 vpdpbusd and bf16 vdpbf16ps throughput on one and all
//    cores, and a STREAM-like copy bandwidth.
// Counters: ops_per_s (2 M N K per run) or bytes_per_s (weights read per run). Ratios matter;
// scripts/run-bench prints them. The own kernels run on the dispatch row of the ISA level in
// force (BITLENS_ISA=avx2 measures what an AVX2 desktop runs; LibTorch keeps its own cpuid
// dispatch); the level and the CPU are printed in the context header and named in each label.

#include "kernels/lowbit.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <memory>
#include <tuple>
#include <vector>

namespace {

using namespace bitlens;
using namespace bitlens::kernels;

at::Generator gen(std::uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// --- int8 Linear ----------------------------------------------------------------------------

struct Int8Layer {
    at::Tensor x, wFloat, bias;        // float input [M, K], weights [N, K], bias [N]
    at::Tensor wCodes, wScale;         // int8 [N, K], float [N]
    std::shared_ptr<Int8PackedWeight> packed;
    at::Tensor xCodesS8;               // int8 codes of x (for _int_mm)
    float xScale = 0;
    std::int32_t xZero = 0;
};

/// The ISA level in force and the CPU in the benchmark context (header and JSON).
const bool kIsaContext = [] {
    std::string level = isaName(isaLevel());
    if (!isaOverrideNote().empty())
        level += " (" + isaOverrideNote() + ")";
    benchmark::AddCustomContext("bitlens_isa_level", level);
    benchmark::AddCustomContext("bitlens_cpu", cpuModelName());
    return true;
}();

/// False, with the benchmark skipped, where only the scalar twin is left at this level.
bool ownRow(benchmark::State& state, const KernelRow& row)
{
    if (row.isReference()) {
        state.SkipWithError("no vector row at this ISA level");
        return false;
    }
    return true;
}

/// The layer's weights on 8 bits ([-127, 127]) or, `reduced`, on 7 ([-64, 64]: the
/// reduce-range option, which the AVX2 row runs with vpmaddubsw).
const Int8Layer& int8Layer(std::int64_t m, std::int64_t k, std::int64_t n, bool reduced = false)
{
    static std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>, Int8Layer> cache;
    auto it = cache.find({m, k, n, reduced});
    if (it != cache.end())
        return it->second;
    Int8Layer l;
    l.x = at::randn({m, k}, gen(1));
    l.wFloat = at::randn({n, k}, gen(2)) / std::sqrt(static_cast<double>(k));
    l.bias = at::randn({n}, gen(3));
    const double qmax = reduced ? 64.0 : 127.0;
    l.wScale = (l.wFloat.abs().amax(1) / qmax).contiguous();
    l.wCodes = at::round(l.wFloat / l.wScale.unsqueeze(1)).clamp(-qmax, qmax).to(at::kChar).contiguous();
    l.packed = std::make_shared<Int8PackedWeight>(
        packInt8Weight(l.wCodes.data_ptr<std::int8_t>(), n, k, k));
    const float lo = std::min(0.0f, l.x.min().item<float>());
    const float hi = std::max(0.0f, l.x.max().item<float>());
    l.xScale = (hi - lo) / 255.0f;
    l.xZero = static_cast<std::int32_t>(std::nearbyint(-lo / l.xScale));
    l.xCodesS8 = at::round(l.x / l.xScale).clamp(-128, 127).to(at::kChar).contiguous();
    return cache.emplace(std::make_tuple(m, k, n, reduced), std::move(l)).first->second;
}

void setOps(benchmark::State& state, std::int64_t m, std::int64_t k, std::int64_t n)
{
    state.counters["ops_per_s"] = benchmark::Counter(2.0 * static_cast<double>(m * k * n),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LinearFloat(benchmark::State& state)
{
    c10::InferenceMode guard;
    const auto [m, k, n] = std::make_tuple(state.range(0), state.range(1), state.range(2));
    const Int8Layer& l = int8Layer(m, k, n);
    for (auto _ : state)
        benchmark::DoNotOptimize(at::linear(l.x, l.wFloat, l.bias).data_ptr());
    setOps(state, m, k, n);
    state.SetLabel("at::linear float32");
}

/// BitLens int8 Linear from float input: quantize (static scale, or per-tensor min/max of the
/// batch when `dynamic`), the int8 GEMM row in force, fused dequantization and bias.
void BM_LinearInt8Bitlens(benchmark::State& state, bool dynamic, bool reduced)
{
    if (!ownRow(state, int8GemmKernel()))
        return;
    c10::InferenceMode guard;
    const auto [m, k, n] = std::make_tuple(state.range(0), state.range(1), state.range(2));
    const Int8Layer& l = int8Layer(m, k, n, reduced);
    const Int8PackedWeight& w = *l.packed;
    at::Tensor u = at::empty({m, w.kPadded}, at::kByte);
    at::Tensor y = at::empty({m, n});
    for (auto _ : state) {
        float scale = l.xScale;
        std::int32_t zero = l.xZero;
        if (dynamic) {
            // PyTorch's MinMaxObserver rule for uint8 (the range widened to include 0).
            const auto [lo, hi] = at::aminmax(l.x);
            const float a = std::min(0.0f, lo.item<float>()), b = std::max(0.0f, hi.item<float>());
            scale = std::max((b - a) / 255.0f, 1.1920929e-07f);
            zero = std::clamp(static_cast<std::int32_t>(std::nearbyint(-a / scale)), 0, 255);
        }
        const float inv = 1.0f / scale;
        quantizeRowsU8(l.x.data_ptr<float>(), m, k, k, &inv, &zero, false, 0, 255, 0,
                       u.data_ptr<std::uint8_t>(), w.kPadded);
        const Int8Epilogue e{&scale, false, l.wScale.data_ptr<float>(), l.bias.data_ptr<float>()};
        int8GemmF32({u.data_ptr<std::uint8_t>(), m, w.kPadded, &zero, false}, w, e,
                    y.data_ptr<float>());
        benchmark::DoNotOptimize(y.data_ptr());
    }
    setOps(state, m, k, n);
    const bool maddubs = int8GemmKernel().level == IsaLevel::Avx2 && int8UsesMaddubs(w);
    state.SetLabel(std::string("bitlens ") + int8GemmKernel().name +
                   (maddubs ? " vpmaddubsw" : "") +
                   (dynamic ? ", dynamic uint8 acts" : ", static uint8 acts") +
                   (reduced ? ", 7-bit weights" : ""));
}

/// The GEMM alone on ready codes: BitLens's (with its fused float epilogue) and LibTorch's
/// _int_mm (int32 out, then the scaling and bias as separate ops, as the engine ran it before).
void BM_Int8GemmBitlens(benchmark::State& state)
{
    if (!ownRow(state, int8GemmKernel()))
        return;
    const auto [m, k, n] = std::make_tuple(state.range(0), state.range(1), state.range(2));
    const Int8Layer& l = int8Layer(m, k, n);
    const Int8PackedWeight& w = *l.packed;
    const at::Tensor u = at::randint(0, 256, {m, w.kPadded}, gen(4), at::kByte);
    at::Tensor y = at::empty({m, n});
    const std::int32_t zero = l.xZero;
    const Int8Epilogue e{&l.xScale, false, l.wScale.data_ptr<float>(), l.bias.data_ptr<float>()};
    for (auto _ : state) {
        int8GemmF32({u.data_ptr<std::uint8_t>(), m, w.kPadded, &zero, false}, w, e,
                    y.data_ptr<float>());
        benchmark::DoNotOptimize(y.data_ptr());
    }
    setOps(state, m, k, n);
    state.SetLabel(std::string("bitlens ") + int8GemmKernel().name + " gemm + fused epilogue");
}

void BM_Int8GemmTorch(benchmark::State& state)
{
    c10::InferenceMode guard;
    const auto [m, k, n] = std::make_tuple(state.range(0), state.range(1), state.range(2));
    const Int8Layer& l = int8Layer(m, k, n);
    const at::Tensor wt = l.wCodes.t();
    const at::Tensor scale = l.wScale * l.xScale;
    for (auto _ : state) {
        const at::Tensor acc = at::_int_mm(l.xCodesS8, wt);
        benchmark::DoNotOptimize(acc.to(at::kFloat).mul_(scale).add_(l.bias).data_ptr());
    }
    setOps(state, m, k, n);
    state.SetLabel("at::_int_mm + scaling ops");
}

void int8Shapes(benchmark::internal::Benchmark* b)
{
    b->ArgNames({"M", "K", "N"});
    for (const auto& s : std::vector<std::vector<std::int64_t>>{{128, 768, 3072},
                                                                {1024, 384, 384},
                                                                {1024, 384, 1536},
                                                                {1024, 1536, 384},
                                                                {64, 4096, 4096},
                                                                {1, 4096, 4096}})
        b->Args(s);
    b->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_LinearFloat)->Apply(int8Shapes);
BENCHMARK_CAPTURE(BM_LinearInt8Bitlens, static, false, false)->Apply(int8Shapes);
BENCHMARK_CAPTURE(BM_LinearInt8Bitlens, dynamic, true, false)->Apply(int8Shapes);
BENCHMARK_CAPTURE(BM_LinearInt8Bitlens, static_7bit, false, true)->Apply(int8Shapes);
BENCHMARK_CAPTURE(BM_LinearInt8Bitlens, dynamic_7bit, true, true)->Apply(int8Shapes);
BENCHMARK(BM_Int8GemmBitlens)->Apply(int8Shapes);
BENCHMARK(BM_Int8GemmTorch)->Apply(int8Shapes);

// --- 4-bit weight-only GEMV -------------------------------------------------------------------

constexpr std::int64_t kGemvSize = 4096;

/// `layers` float weights [4096, 4096].
const std::vector<at::Tensor>& floatLayers(int layers)
{
    static std::map<int, std::vector<at::Tensor>> cache;
    auto& v = cache[layers];
    while (static_cast<int>(v.size()) < layers)
        v.push_back(at::randn({kGemvSize, kGemvSize}, gen(100 + v.size())) * 0.02);
    return v;
}

/// `layers` packed 4-bit weights [4096, 4096]: random codes, group scales (and offsets for
/// int4).
const std::vector<Nibble4PackedWeight>& nibbleLayers(int layers, std::int64_t group, bool nf4)
{
    static std::map<std::tuple<int, std::int64_t, bool>, std::vector<Nibble4PackedWeight>> cache;
    auto& v = cache[{layers, group, nf4}];
    const std::int64_t d = kGemvSize;
    while (static_cast<int>(v.size()) < layers) {
        const at::Tensor u = at::randint(0, 16, {d, d}, gen(200 + v.size()), at::kByte);
        const at::Tensor s = at::rand({d, d / group}, gen(300 + v.size())) * 0.01;
        const at::Tensor o = at::randn({d, d / group}, gen(400 + v.size())) * 0.01;
        v.push_back(packNibble4Weight(u.data_ptr<std::uint8_t>(), d, d, d, group,
                                      s.data_ptr<float>(), nf4 ? nullptr : o.data_ptr<float>(),
                                      nf4 ? nf4Table() : uint4Table(), 0));
    }
    return v;
}

void setBytes(benchmark::State& state, double bytesPerLayer, int layers)
{
    state.counters["bytes_per_s"] = benchmark::Counter(bytesPerLayer * layers,
                                                       benchmark::Counter::kIsIterationInvariantRate);
}

/// args: rows M, layers.
void BM_GemvFloat(benchmark::State& state)
{
    c10::InferenceMode guard;
    const std::int64_t m = state.range(0);
    const int layers = static_cast<int>(state.range(1));
    const auto& w = floatLayers(layers);
    const at::Tensor x = at::randn({m, kGemvSize}, gen(5));
    for (auto _ : state)
        for (const at::Tensor& t : w)
            benchmark::DoNotOptimize(at::linear(x, t).data_ptr());
    setBytes(state, 4.0 * kGemvSize * kGemvSize, layers);
    state.SetLabel("at::linear float32");
}

void BM_GemvBitlens(benchmark::State& state, bool nf4, std::int64_t group)
{
    if (!ownRow(state, nibble4GemmKernel()))
        return;
    const std::int64_t m = state.range(0);
    const int layers = static_cast<int>(state.range(1));
    const auto& w = nibbleLayers(layers, group, nf4);
    const at::Tensor x = at::randn({m, kGemvSize}, gen(5));
    at::Tensor y = at::empty({m, kGemvSize});
    for (auto _ : state)
        for (const auto& p : w) {
            nibble4Gemm(x.data_ptr<float>(), m, kGemvSize, p, y.data_ptr<float>());
            benchmark::DoNotOptimize(y.data_ptr());
        }
    const auto& p = w.front();
    setBytes(state, static_cast<double>(p.data.size() + 4 * p.scale.size() + 4 * p.offset.size()),
             layers);
    state.SetLabel(std::string("bitlens ") + nibble4GemmKernel().name + (nf4 ? " nf4" : " int4") + " g" +
                   std::to_string(group));
}

/// The same int4 weights (codes, scales, offsets) packed for the VNNI GEMV.
const std::vector<Nibble4VnniPackedWeight>& vnniLayers(int layers, std::int64_t group)
{
    static std::map<std::pair<int, std::int64_t>, std::vector<Nibble4VnniPackedWeight>> cache;
    auto& v = cache[{layers, group}];
    const std::int64_t d = kGemvSize;
    while (static_cast<int>(v.size()) < layers) {
        const at::Tensor u = at::randint(0, 16, {d, d}, gen(200 + v.size()), at::kByte);
        const at::Tensor s = at::rand({d, d / group}, gen(300 + v.size())) * 0.01;
        const at::Tensor o = at::randn({d, d / group}, gen(400 + v.size())) * 0.01;
        v.push_back(packNibble4Vnni(u.data_ptr<std::uint8_t>(), d, d, d, group,
                                    s.data_ptr<float>(), o.data_ptr<float>()));
    }
    return v;
}

/// int4 with the activations quantized to int8 per group, the nibble4GemvQ8 row in force
/// (kernels/lowbit.h).
void BM_GemvBitlensVnni(benchmark::State& state, std::int64_t group)
{
    if (!ownRow(state, nibble4GemvQ8Kernel()))
        return;
    const std::int64_t m = state.range(0);
    const int layers = static_cast<int>(state.range(1));
    const auto& w = vnniLayers(layers, group);
    const at::Tensor x = at::randn({m, kGemvSize}, gen(5));
    at::Tensor y = at::empty({m, kGemvSize});
    for (auto _ : state)
        for (const auto& p : w) {
            nibble4GemvQ8(x.data_ptr<float>(), m, kGemvSize, p, y.data_ptr<float>());
            benchmark::DoNotOptimize(y.data_ptr());
        }
    const auto& p = w.front();
    setBytes(state, static_cast<double>(p.data.size() + 4 * p.scale.size() + 4 * p.offset.size()),
             layers);
    state.SetLabel(std::string("bitlens ") + nibble4GemvQ8Kernel().name +
                   " int4 x int8-per-group g" + std::to_string(group));
}

void BM_GemvTorchInt4(benchmark::State& state)
{
    c10::InferenceMode guard;
    const std::int64_t m = state.range(0);
    const int layers = static_cast<int>(state.range(1));
    static std::vector<std::pair<at::Tensor, at::Tensor>> packed;
    const std::int64_t d = kGemvSize;
    while (static_cast<int>(packed.size()) < layers) {
        const at::Tensor u = at::randint(0, 16, {d, d}, gen(500 + packed.size()), at::kInt);
        const at::Tensor sz = at::stack({at::rand({d / 64, d}, gen(1)) * 0.01,
                                         at::randn({d / 64, d}, gen(2)) * 0.01},
                                        2).to(at::kBFloat16).contiguous();
        packed.emplace_back(at::_convert_weight_to_int4pack_for_cpu(u, 8), sz);
    }
    const at::Tensor x = at::randn({m, d}, gen(5)).to(at::kBFloat16);
    for (auto _ : state)
        for (int l = 0; l < layers; ++l) {
            const auto& [w, sz] = packed[static_cast<std::size_t>(l)];
            benchmark::DoNotOptimize(at::_weight_int4pack_mm_for_cpu(x, w, 64, sz).data_ptr());
        }
    setBytes(state, d * d / 2.0 + 4.0 * d * (d / 64), layers);
    state.SetLabel("at::_weight_int4pack_mm_for_cpu bf16 g64");
}

/// `layers` weights [4096, 4096] as 16-bit floats (the float layers rounded).
const std::vector<at::Tensor>& float16Layers(int layers, Float16Kind kind)
{
    static std::map<std::pair<int, Float16Kind>, std::vector<at::Tensor>> cache;
    auto& v = cache[{layers, kind}];
    const auto& f = floatLayers(layers);
    while (static_cast<int>(v.size()) < layers)
        v.push_back(f[v.size()].to(kind == Float16Kind::Fp16 ? at::kHalf : at::kBFloat16));
    return v;
}

/// 16-bit weight-only GEMV (float32 activations and sums), the float16Gemm row in force.
void BM_GemvBitlensFloat16(benchmark::State& state, Float16Kind kind)
{
    if (!ownRow(state, float16GemmKernel()))
        return;
    const std::int64_t m = state.range(0);
    const int layers = static_cast<int>(state.range(1));
    const auto& w = float16Layers(layers, kind);
    const at::Tensor x = at::randn({m, kGemvSize}, gen(5));
    at::Tensor y = at::empty({m, kGemvSize});
    for (auto _ : state)
        for (const at::Tensor& t : w) {
            const Float16Weight view{static_cast<const std::uint16_t*>(t.data_ptr()), kGemvSize,
                                     kGemvSize, kGemvSize, kind};
            float16Gemm(x.data_ptr<float>(), m, kGemvSize, view, nullptr, y.data_ptr<float>());
            benchmark::DoNotOptimize(y.data_ptr());
        }
    setBytes(state, 2.0 * kGemvSize * kGemvSize, layers);
    state.SetLabel(std::string("bitlens ") + float16GemmKernel().name +
                   (kind == Float16Kind::Fp16 ? " fp16" : " bf16") + " weights x float32");
}

/// LibTorch's bf16 x bf16 at::linear on the same weights (what a bf16 cast runs).
void BM_GemvTorchBf16(benchmark::State& state)
{
    c10::InferenceMode guard;
    const std::int64_t m = state.range(0);
    const int layers = static_cast<int>(state.range(1));
    const auto& w = float16Layers(layers, Float16Kind::Bf16);
    const at::Tensor x = at::randn({m, kGemvSize}, gen(5)).to(at::kBFloat16);
    for (auto _ : state)
        for (const at::Tensor& t : w)
            benchmark::DoNotOptimize(at::linear(x, t).data_ptr());
    setBytes(state, 2.0 * kGemvSize * kGemvSize, layers);
    state.SetLabel("at::linear bfloat16");
}

void gemvArgs(benchmark::internal::Benchmark* b)
{
    b->ArgNames({"M", "layers"})->Args({1, 8})->Args({4, 8})->Args({8, 8});
    b->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_GemvFloat)->Apply(gemvArgs);
BENCHMARK_CAPTURE(BM_GemvBitlens, int4_g64, false, 64)->Apply(gemvArgs);
BENCHMARK_CAPTURE(BM_GemvBitlens, nf4_g64, true, 64)->Apply(gemvArgs);
BENCHMARK_CAPTURE(BM_GemvBitlens, int4_g32, false, 32)
    ->ArgNames({"M", "layers"})->Args({1, 8})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemvBitlens, int4_g128, false, 128)
    ->ArgNames({"M", "layers"})->Args({1, 8})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemvBitlens, int4_g64_over_llc, false, 64)
    ->ArgNames({"M", "layers"})->Args({1, 32})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemvBitlensVnni, int4_g64, 64)->Apply(gemvArgs);
BENCHMARK_CAPTURE(BM_GemvBitlensVnni, int4_g32, 32)
    ->ArgNames({"M", "layers"})->Args({1, 8})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemvBitlensVnni, int4_g128, 128)
    ->ArgNames({"M", "layers"})->Args({1, 8})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemvBitlensVnni, int4_g64_over_llc, 64)
    ->ArgNames({"M", "layers"})->Args({1, 32})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemvBitlensFloat16, fp16, Float16Kind::Fp16)->Apply(gemvArgs);
BENCHMARK_CAPTURE(BM_GemvBitlensFloat16, bf16, Float16Kind::Bf16)->Apply(gemvArgs);
BENCHMARK(BM_GemvTorchBf16)->ArgNames({"M", "layers"})->Args({1, 8})->UseRealTime()->Unit(
    benchmark::kMillisecond);
BENCHMARK(BM_GemvTorchInt4)->ArgNames({"M", "layers"})->Args({1, 8})->UseRealTime()->Unit(
    benchmark::kMillisecond);

// --- bf16 ---------------------------------------------------------------------------------------

void BM_MatmulBf16(benchmark::State& state)
{
    c10::InferenceMode guard;
    const auto [m, k, n] = std::make_tuple(state.range(0), state.range(1), state.range(2));
    const Int8Layer& l = int8Layer(m, k, n);
    const at::Tensor x = l.x.to(at::kBFloat16), w = l.wFloat.to(at::kBFloat16),
                     b = l.bias.to(at::kBFloat16);
    for (auto _ : state)
        benchmark::DoNotOptimize(at::linear(x, w, b).data_ptr());
    setOps(state, m, k, n);
    state.SetLabel("at::linear bfloat16 (oneDNN)");
}
BENCHMARK(BM_MatmulBf16)->ArgNames({"M", "K", "N"})->Args({128, 768, 3072})->Args({1, 4096, 4096})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

// --- roofline -----------------------------------------------------------------------------------

#define BITLENS_BENCH_AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,fma")))

constexpr int kPeakChains = 12;     // independent accumulators: hides 4-5 cycles of latency
constexpr std::int64_t kPeakSteps = 1 << 16;

/// Instructions per call: kPeakChains * kPeakSteps; each does 32 fp32 flops (FMA), 128 int8
/// ops (vpdpbusd: 64 multiply-adds) or 64 bf16 flops (vdpbf16ps: 32 multiply-adds).
BITLENS_BENCH_AVX512 float peakLoop(int kind)
{
    __m512 f[kPeakChains];
    __m512i q[kPeakChains];
    for (int i = 0; i < kPeakChains; ++i) {
        f[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
        q[i] = _mm512_set1_epi32(i);
    }
    const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
    const __m512i qa = _mm512_set1_epi8(3), qb = _mm512_set1_epi8(-2);
    const __m512bh ha = _mm512_cvtne2ps_pbh(a, a), hb = _mm512_cvtne2ps_pbh(b, b);
    for (std::int64_t s = 0; s < kPeakSteps; ++s) {
#pragma GCC unroll 12
        for (int i = 0; i < kPeakChains; ++i) {
            if (kind == 0)
                f[i] = _mm512_fmadd_ps(f[i], a, b);
            else if (kind == 1)
                q[i] = _mm512_dpbusd_epi32(q[i], qa, qb);
            else
                f[i] = _mm512_dpbf16_ps(f[i], ha, hb);
        }
    }
    __m512 sum = _mm512_setzero_ps();
    for (int i = 0; i < kPeakChains; ++i)
        sum = _mm512_add_ps(sum, _mm512_add_ps(f[i], _mm512_cvtepi32_ps(q[i])));
    return _mm512_reduce_add_ps(sum);
}

/// args: kind (0 fp32 FMA, 1 int8 VNNI, 2 bf16), threads.
void BM_PeakCompute(benchmark::State& state)
{
    if (!cpuFeatures().avx512Vnni || !cpuFeatures().avx512Bf16) {
        state.SkipWithError("needs AVX512-VNNI and AVX512-BF16");
        return;
    }
    const int kind = static_cast<int>(state.range(0));
    const int threads = static_cast<int>(state.range(1));
    for (auto _ : state) {
        at::parallel_for(0, threads, 1, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t t = b; t < e; ++t)
                benchmark::DoNotOptimize(peakLoop(kind));
        });
    }
    const double opsPerInstr = kind == 0 ? 32 : (kind == 1 ? 128 : 64);
    state.counters["ops_per_s"] = benchmark::Counter(
        opsPerInstr * kPeakChains * static_cast<double>(kPeakSteps) * threads,
        benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(kind == 0 ? "fp32 vfmadd (32 flop)" : kind == 1 ? "int8 vpdpbusd (128 op)"
                                                                    : "bf16 vdpbf16ps (64 flop)");
}
BENCHMARK(BM_PeakCompute)->ArgNames({"kind", "threads"})->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

/// STREAM-like copy of 256 MB (bytes read + written), on all threads.
void BM_StreamCopy(benchmark::State& state)
{
    const std::size_t bytes = std::size_t{256} << 20;
    static AlignedArray<std::uint8_t> src(bytes), dst(bytes);
    std::memset(src.data(), 1, bytes);
    for (auto _ : state) {
        at::parallel_for(0, 64, 1, [&](std::int64_t b, std::int64_t e) {
            const std::size_t chunk = bytes / 64;
            std::memcpy(dst.data() + b * chunk, src.data() + b * chunk,
                        static_cast<std::size_t>(e - b) * chunk);
        });
        benchmark::DoNotOptimize(dst.data());
    }
    state.counters["bytes_per_s"] = benchmark::Counter(2.0 * static_cast<double>(bytes),
                                                       benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel("memcpy 256 MB, read + write");
}
BENCHMARK(BM_StreamCopy)->UseRealTime()->Unit(benchmark::kMillisecond);

} // namespace
