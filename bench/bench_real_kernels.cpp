// Real low-bit kernels against float and the simulated (fake-quant) path, side by side in one
// process (`make bench`): one linear layer y = x W^T + b through the executor, M = 64 rows (a
// batch of tokens) with K = N = 1024 and 4096 (language-model projections), and M = 1 with
// K = N = 4096 (one decoding step, where weight-only kernels are meant to win: memory-bound).
// samples_per_s counts rows; the label names the kernel that ran. Ratios matter, not absolute
// times.

#include "exec/executor.h"
#include "ir/graph.h"
#include "quant/engine.h"
#include "quant/real_kernels.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <map>
#include <string>

namespace {

using namespace bitlens;

/// The layer "fc" with `size` inputs and outputs, weights ~ N(0, 1 / size).
const ir::Graph& linearGraph(std::int64_t size)
{
    static std::map<std::int64_t, ir::Graph> graphs;
    auto it = graphs.find(size);
    if (it == graphs.end()) {
        at::Generator gen = at::detail::createCPUGenerator(1);
        ir::GraphBuilder g("linear");
        auto x = g.input("x", {-1, size});
        g.output(g.linear("fc", x,
                          at::randn({size, size}, gen) / std::sqrt(static_cast<double>(size)),
                          at::randn({size}, gen) * 0.1));
        it = graphs.emplace(size, g.build().value()).first;
    }
    return it->second;
}

/// `spec` prepared for linearGraph(size) (static schemes calibrate on 256 random rows).
const quant::QuantizedModel* preparedModel(std::int64_t size, const std::string& spec)
{
    static std::map<std::pair<std::int64_t, std::string>, quant::QuantizedModel> models;
    const auto key = std::make_pair(size, spec);
    auto it = models.find(key);
    if (it == models.end()) {
        auto scheme = quant::parseScheme(spec);
        if (!scheme)
            return nullptr;
        at::Generator gen = at::detail::createCPUGenerator(2);
        auto model = quant::prepare(linearGraph(size), *scheme, at::randn({256, size}, gen));
        if (!model)
            return nullptr;
        it = models.emplace(key, std::move(model).value()).first;
    }
    return &it->second;
}

enum class Mode { Float, Simulated, Real };

void BM_Linear(benchmark::State& state, const std::string& spec, Mode mode)
{
    const std::int64_t rows = state.range(0);
    const std::int64_t size = state.range(1);
    c10::InferenceMode guard;
    const quant::QuantizedModel* model = mode == Mode::Float ? nullptr : preparedModel(size, spec);
    if (mode != Mode::Float && !model) {
        state.SkipWithError(("could not prepare " + spec).c_str());
        return;
    }
    exec::Executor executor(model ? model->graph : linearGraph(size));
    std::shared_ptr<quant::RealKernelHook> real;
    if (mode == Mode::Simulated)
        executor.addHook(quant::makeQuantHook(*model));
    if (mode == Mode::Real) {
        real = quant::makeRealKernelHook(*model, c10::Device(c10::kCPU));
        executor.addHook(real);
    }
    at::Generator gen = at::detail::createCPUGenerator(3);
    const at::Tensor x = at::randn({rows, size}, gen);
    benchmark::DoNotOptimize(executor.forward({x}).front().data_ptr());  // warm-up
    if (real) {
        const std::string kernel = real->kernelsRun().at("fc");
        if (kernel.rfind("simulated", 0) == 0) {
            state.SkipWithError(("no real kernel ran: " + kernel).c_str());
            return;
        }
        state.SetLabel(kernel);
    } else {
        state.SetLabel(mode == Mode::Float ? "at::linear (float32)" : "fake-quant + float32");
    }
    for (auto _ : state) {
        auto out = executor.forward({x});
        benchmark::DoNotOptimize(out.front().data_ptr());
    }
    state.SetItemsProcessed(state.iterations() * rows);
    state.counters["samples_per_s"] = benchmark::Counter(
        static_cast<double>(rows), benchmark::Counter::kIsIterationInvariantRate);
}

#define BITLENS_LINEAR_BENCH(name, spec, mode)                                                   \
    BENCHMARK_CAPTURE(BM_Linear, name, spec, mode)                                               \
        ->ArgNames({"rows", "size"})                                                             \
        ->Args({64, 1024})                                                                       \
        ->Args({64, 4096})                                                                       \
        ->Args({1, 4096})                                                                        \
        ->UseRealTime()                                                                          \
        ->Unit(benchmark::kMillisecond)

BITLENS_LINEAR_BENCH(float32, "", Mode::Float);
BITLENS_LINEAR_BENCH(int8_dynamic_simulated, "dynamic-int8", Mode::Simulated);
BITLENS_LINEAR_BENCH(int8_dynamic_real, "dynamic-int8", Mode::Real);
BITLENS_LINEAR_BENCH(int8_static_real, "static-int8", Mode::Real);
BITLENS_LINEAR_BENCH(bf16_simulated, "bf16", Mode::Simulated);
BITLENS_LINEAR_BENCH(bf16_real, "bf16", Mode::Real);
BITLENS_LINEAR_BENCH(int4_w4_simulated, "w4-int4", Mode::Simulated);
BITLENS_LINEAR_BENCH(int4_w4_real, "w4-int4", Mode::Real);
BITLENS_LINEAR_BENCH(int8_weight_only_real, "w4-int4:weight=int8,sym=true,per=channel",
                     Mode::Real);
BITLENS_LINEAR_BENCH(fp8_e4m3_real, "fp8-e4m3", Mode::Real);

} // namespace
