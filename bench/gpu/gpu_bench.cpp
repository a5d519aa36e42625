// GPU kernel benchmarks for scripts/device-check (no Google Benchmark on the GPU machine): our
// 4-bit GEMV against LibTorch's fp16 GEMV over weights larger than the L2 cache (as in LLM
// decoding), and LibTorch's FP8 (_scaled_mm), int8 (_int_mm) and bf16 GEMMs at 8192^3, each
// as a fraction of the H200's datasheet peaks (4.8 TB/s; 1979 TFLOPS FP8 / int8 and 989 bf16,
// dense). Times come from CUDA events over repeated runs; prints one table.

#include "exec/device.h"
#include "kernels/lowbit.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <vector>

using namespace bitlens;
using namespace bitlens::kernels;

namespace {

constexpr double kPeakBandwidthGBs = 4800.0;
constexpr double kPeakFp8Tflops = 1979.0;
constexpr double kPeakBf16Tflops = 989.0;

/// Mean milliseconds of `fn` over `repeats` runs after two warm-ups (CUDA events).
double timeMs(const std::function<void()>& fn, int repeats)
{
    fn();
    fn();
    cudaDeviceSynchronize();
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    for (int i = 0; i < repeats; ++i)
        fn();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms / repeats;
}

void gemvBench()
{
    // 8 layers of 8192 x 8192: 8 x 40 MB of int4 codes, scales and offsets (320 MB, over six
    // times the 50 MB L2), cycled as a decoder cycles its layers.
    const std::int64_t d = 8192, group = 64;
    const int layers = 8;
    for (bool nf4 : {false, true}) {
        std::vector<Nibble4DevicePtr> w;
        double bytesPerLayer = 0;
        for (int l = 0; l < layers; ++l) {
            at::Generator gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(l + 1));
            const at::Tensor u = at::randint(0, 16, {d, d}, gen, at::kByte);
            const at::Tensor s = at::rand({d, d / group}, gen) * 0.01;
            const at::Tensor o = at::randn({d, d / group}, gen) * 0.01;
            const Nibble4PackedWeight p = packNibble4Weight(
                u.data_ptr<std::uint8_t>(), d, d, d, group, s.data_ptr<float>(),
                nf4 ? nullptr : o.data_ptr<float>(), nf4 ? nf4Table() : uint4Table(), 0);
            bytesPerLayer = static_cast<double>(p.data.size() + 4 * p.scale.size() +
                                                4 * p.offset.size());
            std::string error;
            w.push_back(uploadNibble4Weight(p, error));
            if (!w.back()) {
                std::printf("upload failed: %s\n", error.c_str());
                return;
            }
        }
        for (std::int64_t m : {1, 4, 8}) {
            float *x = nullptr, *y = nullptr;
            cudaMalloc(&x, static_cast<std::size_t>(m * d) * sizeof(float));
            cudaMalloc(&y, static_cast<std::size_t>(m * d) * sizeof(float));
            cudaMemset(x, 0, static_cast<std::size_t>(m * d) * sizeof(float));
            std::string error;
            const double ms = timeMs(
                [&] {
                    for (int l = 0; l < layers; ++l)
                        if (auto e = nibble4GemvCuda(x, m, *w[static_cast<std::size_t>(l)], y,
                                                     nullptr);
                            !e.empty())
                            error = e;
                },
                20) / layers;
            const double gbs = bytesPerLayer / (ms * 1e-3) / 1e9;
            std::printf("bitlens cuda %s gemv g64  M=%ld  8192x8192  %8.4f ms/layer  %7.0f GB/s  "
                        "%5.1f%% of 4.8 TB/s%s%s\n",
                        nf4 ? "nf4 " : "int4", static_cast<long>(m), ms, gbs,
                        100.0 * gbs / kPeakBandwidthGBs, error.empty() ? "" : "  ERROR ",
                        error.c_str());
            cudaFree(x);
            cudaFree(y);
        }
    }
}

#ifdef BITLENS_TORCH_CUDA
void torchBench()
{
    c10::InferenceMode guard;
    const at::Device dev(at::kCUDA, 0);
    // fp16 GEMV over 8 layers of 8192^2 (128 MB each): the float baseline of the GEMV above.
    {
        std::vector<at::Tensor> w;
        for (int l = 0; l < 8; ++l)
            w.push_back(at::randn({8192, 8192}, at::TensorOptions().device(dev).dtype(at::kHalf)));
        for (std::int64_t m : {1, 8}) {
            const at::Tensor x = at::randn({m, 8192}, at::TensorOptions().device(dev).dtype(at::kHalf));
            const double ms = timeMs([&] { for (auto& t : w) at::linear(x, t); }, 20) / 8;
            const double gbs = 8192.0 * 8192 * 2 / (ms * 1e-3) / 1e9;
            std::printf("torch fp16 gemv (at::linear) M=%ld  8192x8192  %8.4f ms/layer  %7.0f GB/s  "
                        "%5.1f%% of 4.8 TB/s\n",
                        static_cast<long>(m), ms, gbs, 100.0 * gbs / kPeakBandwidthGBs);
        }
    }
    const std::int64_t n = 8192;
    const double flops = 2.0 * n * n * n;
    const auto opts = at::TensorOptions().device(dev);
    {
        const at::Tensor a = at::randn({n, n}, opts).to(at::kFloat8_e4m3fn);
        const at::Tensor b = at::randn({n, n}, opts).to(at::kFloat8_e4m3fn);
        const at::Tensor one = at::ones({}, opts);
        const double ms = timeMs(
            [&] {
                at::_scaled_mm(a, b.t(), one, one, std::nullopt, std::nullopt, at::kBFloat16,
                               true);
            },
            20);
        const double tf = flops / (ms * 1e-3) / 1e12;
        std::printf("torch fp8 e4m3 gemm (at::_scaled_mm, fast accum) 8192^3  %7.3f ms  %6.0f "
                    "TFLOPS  %5.1f%% of 1979\n",
                    ms, tf, 100.0 * tf / kPeakFp8Tflops);
        const double ms2 = timeMs(
            [&] {
                at::_scaled_mm(a, b.t(), one, one, std::nullopt, std::nullopt, at::kBFloat16,
                               false);
            },
            20);
        const double tf2 = flops / (ms2 * 1e-3) / 1e12;
        std::printf("torch fp8 e4m3 gemm (at::_scaled_mm, fp32 accum) 8192^3  %7.3f ms  %6.0f "
                    "TFLOPS  %5.1f%% of 1979\n",
                    ms2, tf2, 100.0 * tf2 / kPeakFp8Tflops);
    }
    {
        const at::Tensor a = at::randint(-128, 128, {n, n}, opts.dtype(at::kChar));
        const at::Tensor b = at::randint(-128, 128, {n, n}, opts.dtype(at::kChar));
        const double ms = timeMs([&] { at::_int_mm(a, b.t()); }, 20);
        const double tf = flops / (ms * 1e-3) / 1e12;
        std::printf("torch int8 gemm (at::_int_mm) 8192^3  %7.3f ms  %6.0f TOPS  %5.1f%% of 1979\n",
                    ms, tf, 100.0 * tf / kPeakFp8Tflops);
    }
    {
        const at::Tensor a = at::randn({n, n}, opts.dtype(at::kBFloat16));
        const at::Tensor b = at::randn({n, n}, opts.dtype(at::kBFloat16));
        const double ms = timeMs([&] { at::matmul(a, b); }, 20);
        const double tf = flops / (ms * 1e-3) / 1e12;
        std::printf("torch bf16 gemm (at::matmul) 8192^3  %7.3f ms  %6.0f TFLOPS  %5.1f%% of 989\n",
                    ms, tf, 100.0 * tf / kPeakBf16Tflops);
    }
}
#endif

} // namespace

int main()
{
    int devices = 0;
    cudaDeviceProp prop{};
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
        cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        std::printf("no CUDA device: nothing to measure\n");
        return 0;
    }
    std::printf("device: %s (sm_%d%d, %.0f GiB)\n", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1 << 30));
    gemvBench();
#ifdef BITLENS_TORCH_CUDA
    if (exec::cudaAvailable())
        torchBench();
    else
        std::printf("LibTorch sees no GPU: torch GEMMs skipped\n");
#else
    std::printf("built without LibTorch's CUDA backend: torch GEMMs skipped\n");
#endif
    return 0;
}
