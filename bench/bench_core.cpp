// Core benchmarks, reported side by side in one process (`make bench`): the float executor on
// the demo model at several batch sizes, and our scalar fake-quant reference against LibTorch's
// fake_quantize_per_tensor_affine on the same buffer. Ratios matter, not absolute times.

#include "exec/executor.h"
#include "io/onnx.h"
#include "kernels/fake_quant.h"
#include "zoo/zoo.h"

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

namespace {

using namespace bitlens;

const ir::Graph* demoGraph()
{
    static std::optional<ir::Graph> graph = []() -> std::optional<ir::Graph> {
        auto model = zoo::ensure("fashion-cnn");
        if (!model)
            return std::nullopt;
        auto g = io::readOnnxFile(model->modelPath);
        return g ? std::optional<ir::Graph>(std::move(g).value()) : std::nullopt;
    }();
    return graph ? &*graph : nullptr;
}

void BM_ExecutorFashionCnnFloat(benchmark::State& state)
{
    const ir::Graph* graph = demoGraph();
    if (!graph) {
        state.SkipWithError("fashion-cnn is not available");
        return;
    }
    c10::InferenceMode guard;
    exec::Executor executor(*graph);
    const std::int64_t batch = state.range(0);
    const at::Tensor x = at::rand({batch, 1, 28, 28});
    for (auto _ : state) {
        auto out = executor.forward({x});
        benchmark::DoNotOptimize(out.front().data_ptr());
    }
    state.SetItemsProcessed(state.iterations() * batch);
    state.counters["samples_per_s"] =
        benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ExecutorFashionCnnFloat)->Arg(1)->Arg(64)->Arg(256)->UseRealTime();

void BM_FakeQuantRef(benchmark::State& state)
{
    const at::Tensor x = at::randn({state.range(0)});
    at::Tensor y = at::empty_like(x);
    for (auto _ : state) {
        kernels::fakeQuantPerTensorRef(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), 0.05f,
                                       0, -128, 127);
        benchmark::DoNotOptimize(y.data_ptr());
    }
    state.SetBytesProcessed(state.iterations() * x.numel() * 4);
}
BENCHMARK(BM_FakeQuantRef)->Arg(1 << 20);

void BM_FakeQuantAten(benchmark::State& state)
{
    c10::InferenceMode guard;
    const at::Tensor x = at::randn({state.range(0)});
    for (auto _ : state) {
        auto y = at::fake_quantize_per_tensor_affine(x, 0.05, 0, -128, 127);
        benchmark::DoNotOptimize(y.data_ptr());
    }
    state.SetBytesProcessed(state.iterations() * x.numel() * 4);
}
BENCHMARK(BM_FakeQuantAten)->Arg(1 << 20);

} // namespace

BENCHMARK_MAIN();
