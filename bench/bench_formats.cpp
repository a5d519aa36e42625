// Opening model files, side by side in one process (`make bench`): a 512 MB safetensors file
// (128 float32 tensors of 4 MiB) and a 512 MB GGUF (128 Q8_0 tensors) opened through the
// mapping, against reading the same bytes into memory (what a copying reader pays at least),
// and dequantizing one 4M-value Q8_0 / Q4_K tensor. Ratios matter, not absolute times.

#include "io/file_util.h"
#include "io/gguf.h"
#include "io/safetensors.h"

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <filesystem>
#include <unistd.h>

namespace {

using namespace bitlens;
namespace fs = std::filesystem;

constexpr int kTensors = 128;
constexpr std::int64_t kValues = 1 << 20;  // per tensor: 4 MiB as float32

/// Files made once per process, removed at exit.
struct Files {
    std::string dir;
    std::string safetensors;
    std::string gguf;
    bool ok = false;

    Files()
    {
        dir = (fs::temp_directory_path() / ("bitlens_bench_formats_" + std::to_string(::getpid()))).string();
        fs::create_directories(dir);
        safetensors = dir + "/big.safetensors";
        gguf = dir + "/big.gguf";
        std::map<std::string, at::Tensor> tensors;
        io::GgufWriter writer;
        for (int i = 0; i < kTensors; ++i) {
            const std::string name = "layers." + std::to_string(i) + ".weight";
            tensors[name] = at::randn({1024, kValues / 1024});
            // Q8_0 blocks of random bytes with a sane fp16 scale (0x2000 = 2^-7).
            const std::int64_t blocks = kValues * 4 / 34 / 32 * 32;  // ~4 MiB, whole rows
            std::vector<std::uint8_t> bytes(static_cast<std::size_t>(blocks * 34));
            for (std::size_t b = 0; b < bytes.size(); b += 34) {
                bytes[b] = 0x00;
                bytes[b + 1] = 0x20;
                for (int j = 2; j < 34; ++j)
                    bytes[b + j] = static_cast<std::uint8_t>((b * 31 + j * 7) & 0xff);
            }
            if (!writer.addRawTensor(name, {1024, blocks * 32 / 1024}, formats::GgmlType::Q8_0, std::move(bytes)))
                return;
        }
        at::Tensor k4 = at::randn({1024, 4096});
        if (!writer.addTensor("q4_k", k4, formats::GgmlType::Q4_K))
            return;
        ok = io::writeSafetensors(tensors, {{"format", "pt"}}, safetensors).ok() &&
             writer.write(gguf).ok();
    }
    ~Files()
    {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

const Files& files()
{
    static Files f;
    return f;
}

void BM_SafetensorsOpenMapped(benchmark::State& state)
{
    if (!files().ok) {
        state.SkipWithError("cannot write the benchmark files");
        return;
    }
    for (auto _ : state) {
        auto f = io::readSafetensors(files().safetensors);
        benchmark::DoNotOptimize(f->tensors.size());
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(fs::file_size(files().safetensors)));
}

void BM_GgufOpenMapped(benchmark::State& state)
{
    if (!files().ok) {
        state.SkipWithError("cannot write the benchmark files");
        return;
    }
    for (auto _ : state) {
        auto f = io::GgufFile::open(files().gguf);
        benchmark::DoNotOptimize(f->tensors().size());
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(fs::file_size(files().gguf)));
}

/// The floor for any reader that copies: the file's bytes into memory (page cache warm).
void BM_ReadWholeFileCopy(benchmark::State& state)
{
    if (!files().ok) {
        state.SkipWithError("cannot write the benchmark files");
        return;
    }
    for (auto _ : state) {
        auto bytes = io::readFileBytes(files().safetensors);
        benchmark::DoNotOptimize(bytes->data());
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(fs::file_size(files().safetensors)));
}

void BM_GgufDequantize(benchmark::State& state, const char* tensor)
{
    if (!files().ok) {
        state.SkipWithError("cannot write the benchmark files");
        return;
    }
    auto f = io::GgufFile::open(files().gguf);
    const std::string name = tensor;
    for (auto _ : state) {
        auto t = f->dequantize(name);
        benchmark::DoNotOptimize(t->data_ptr());
    }
    state.SetItemsProcessed(state.iterations() * f->findTensor(name)->numel());
}

BENCHMARK(BM_SafetensorsOpenMapped)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GgufOpenMapped)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadWholeFileCopy)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GgufDequantize, q8_0, "layers.0.weight")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GgufDequantize, q4_k, "q4_k")->Unit(benchmark::kMillisecond);

} // namespace
