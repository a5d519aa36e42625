#include "analysis/metrics.h"

#include "exec/executor.h"

#include <ATen/ATen.h>

namespace bitlens::analysis {

Result<MetricValue> evaluateTop1(const ir::Graph& graph, const io::Dataset& data,
                                 c10::Device device, std::int64_t batchSize, Progress& progress,
                                 const CancelToken& cancel)
{
    if (!data.labels.defined())
        return Error::badInput(data.path, "has no labels, so top-1 accuracy cannot be measured");
    const std::int64_t n = data.size();
    if (n == 0)
        return Error::badInput(data.path, "holds no samples");
    exec::Executor executor(graph, exec::ExecOptions{device});
    std::int64_t correct = 0;
    for (std::int64_t start = 0; start < n; start += batchSize) {
        if (cancel.cancelled())
            return Error::cancelled();
        const std::int64_t end = std::min(n, start + batchSize);
        auto out = executor.run({data.inputs.slice(0, start, end)});
        if (!out) {
            Error e = out.error();
            if (e.path.empty())
                e.path = data.path;
            return e;
        }
        const at::Tensor logits = out->front();
        if (logits.dim() != 2 || logits.size(0) != end - start)
            return Error::badInput(data.path, "the model's output has shape " +
                                                  std::to_string(logits.dim()) +
                                                  "-D, expected [batch, classes] for top-1");
        const at::Tensor predicted = logits.argmax(1).to(at::kCPU);
        correct += predicted.eq(data.labels.slice(0, start, end)).sum().item<std::int64_t>();
        progress.report(static_cast<double>(end) / static_cast<double>(n), "evaluating");
    }
    return MetricValue{"top1", static_cast<double>(correct) / static_cast<double>(n), n};
}

} // namespace bitlens::analysis
