// Real low-bit kernels on a CUDA device against the simulated path on the CPU. Skips without a
// GPU (and without LibTorch's CUDA backend: configure with -DBITLENS_TORCH_CUDA=ON).

#include "analysis/error_stats.h"
#include "exec/device.h"
#include "quant/engine.h"
#include "quant/real_kernels.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

using namespace bitlens;

namespace {

ir::Graph oneLinear(std::int64_t k, std::int64_t n)
{
    at::Generator gen = at::detail::createCPUGenerator(42);
    ir::GraphBuilder g("linear");
    auto x = g.input("x", {-1, k});
    g.output(g.linear("fc", x, at::randn({n, k}, gen) * 0.05, at::randn({n}, gen) * 0.1));
    return g.build().value();
}

} // namespace

TEST(CudaRealKernels, EveryRealKernelMatchesTheSimulation)
{
    if (!exec::cudaAvailable())
        GTEST_SKIP() << "LibTorch's CUDA backend is not linked or no GPU is visible";
    const ir::Graph graph = oneLinear(512, 256);
    at::Generator gen = at::detail::createCPUGenerator(43);
    const at::Tensor calib = at::randn({128, 512}, gen);
    for (const char* spec : {"dynamic-int8", "static-int8", "llm-int8", "bf16", "fp16",
                             "fp8-e4m3", "w4-int4:group=128"}) {
        for (std::int64_t rows : {1, 16, 17, 64}) {
            c10::InferenceMode guard;
            auto scheme = quant::parseScheme(spec).value();
            auto model = quant::prepare(graph, scheme, calib).value();
            const at::Tensor x = at::randn({rows, 512}, gen);
            exec::Executor sim(model.graph);
            sim.addHook(quant::makeQuantHook(model));
            const at::Tensor expected = sim.run({x}).value().front();
            exec::Executor real(model.graph, exec::ExecOptions{c10::Device(c10::kCUDA)});
            auto hook = quant::makeRealKernelHook(model, c10::Device(c10::kCUDA));
            real.addHook(hook);
            auto out = real.run({x});
            ASSERT_TRUE(out.ok()) << spec << ": " << out.error().userMessage();
            const std::string kernel = hook->kernelsRun().at("fc");
            std::printf("%-20s rows %3lld: %s\n", spec, static_cast<long long>(rows),
                        kernel.c_str());
            EXPECT_NE(kernel.rfind("simulated", 0), 0u) << spec << " rows " << rows << ": "
                                                        << kernel;
            const auto err = analysis::compareTensors(expected, out->front().to(at::kCPU));
            // 16-bit and int4 kernels round partial sums; int8 and fp8 agree to float rounding.
            EXPECT_GT(err.sqnrDb, 40.0) << spec << " rows " << rows << " kernel " << kernel;
        }
    }
}
