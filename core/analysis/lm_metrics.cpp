#include "analysis/lm_metrics.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>

namespace bitlens::analysis {

using ir::metricNameOf;
using ir::Task;
using ir::taskOf;

namespace {

std::string shapeText(at::IntArrayRef sizes)
{
    std::string s = "[";
    for (std::size_t i = 0; i < sizes.size(); ++i)
        s += (i ? ", " : "") + std::to_string(sizes[i]);
    return s + "]";
}

/// Runs `executor` on one batch and returns its first output.
Result<at::Tensor> firstOutput(exec::Executor& executor, const ir::Graph& graph,
                               const at::Tensor& batch, const std::string& path)
{
    auto out = executor.run(exec::inputsForBatch(graph, batch));
    if (!out) {
        Error e = out.error();
        if (e.path.empty())
            e.path = path;
        return e;
    }
    return out->front();
}

Result<void> checkWindows(const at::Tensor& windows, const std::string& path)
{
    if (!windows.defined() || windows.size(0) == 0)
        return Error::badInput(path, "holds no samples");
    if (windows.dim() != 2)
        return Error::badInput(path, "token windows must be [N, S], got " +
                                         shapeText(windows.sizes()));
    if (windows.size(1) < 2)
        return Error::badInput(path, "token windows need at least 2 tokens");
    if (windows.is_floating_point() &&
        !at::equal(windows, at::floor(windows)))
        return Error::badInput(path, "token ids must be whole numbers");
    return {};
}

/// The batch loop shared by the metrics: calls body(start, end) per batch.
template <typename Body>
Result<void> forBatches(std::int64_t n, std::int64_t batch, Progress& progress,
                        const CancelToken& cancel, Body&& body)
{
    batch = std::max<std::int64_t>(batch, 1);
    for (std::int64_t start = 0; start < n; start += batch) {
        if (cancel.cancelled())
            return Error::cancelled();
        const std::int64_t end = std::min(n, start + batch);
        if (auto r = body(start, end); !r)
            return r;
        progress.report(static_cast<double>(end) / static_cast<double>(n), "evaluating");
    }
    return {};
}

} // namespace

Result<MetricValue> evaluatePerplexity(const ir::Graph& graph, const at::Tensor& windows,
                                       const SequenceMetricOptions& options,
                                       std::shared_ptr<exec::NodeHook> hook, c10::Device device,
                                       Progress& progress, const CancelToken& cancel)
{
    const std::string path;  // the caller names the data set
    if (auto r = checkWindows(windows, path); !r)
        return r.error();
    const std::int64_t seq = windows.size(1);
    if (options.overlap < 0 || options.overlap >= seq)
        return Error::usage("window overlap " + std::to_string(options.overlap) +
                            " must be from 0 to the window length - 1 (" +
                            std::to_string(seq - 1) + ")");
    try {
        c10::InferenceMode guard;
        exec::Executor executor(graph, exec::ExecOptions{device});
        if (hook)
            executor.addHook(hook);
        double nllSum = 0.0;
        std::int64_t scored = 0;
        // Logits are [B, S, vocab] float32: at most ~256 MB of them per batch (2 windows of 512
        // tokens for a 49k vocabulary). Bigger batches gain nothing in GEMM speed here and cost
        // page faults on every batch.
        std::int64_t batch = options.batchSize;
        if (!graph.outputs.empty() && !graph.outputs.front().shape.empty() &&
            graph.outputs.front().shape.back() > 0) {
            const std::int64_t windowBytes = seq * graph.outputs.front().shape.back() * 4;
            batch = std::clamp<std::int64_t>((std::int64_t{256} << 20) / windowBytes, 1, batch);
        }
        auto r = forBatches(windows.size(0), batch, progress, cancel,
                            [&](std::int64_t start, std::int64_t end) -> Result<void> {
            const at::Tensor ids = windows.slice(0, start, end).to(at::kLong);
            auto logits = firstOutput(executor, graph, ids, path);
            if (!logits)
                return logits.error();
            const at::Tensor& l = *logits;
            if (l.dim() != 3 || l.size(0) != end - start || l.size(1) != seq)
                return Error::badInput(path, "the model's first output has shape " +
                                                 shapeText(l.sizes()) +
                                                 ", expected logits [batch, " +
                                                 std::to_string(seq) + ", vocab]");
            const at::Tensor targets = ids.slice(1, 1, seq).to(l.device());
            if (targets.max().item<std::int64_t>() >= l.size(2) ||
                targets.min().item<std::int64_t>() < 0)
                return Error::badInput(path, "a token id is outside the model's vocabulary of " +
                                                 std::to_string(l.size(2)));
            // Token t + 1 given tokens 0..t: log-probabilities of the targets [b, S - 1],
            // as the target's logit minus the log-sum-exp of its row, one window at a time
            // so the temporary is one window's [S - 1, vocab], not the batch's.
            std::vector<at::Tensor> rows;
            for (std::int64_t b = 0; b < end - start; ++b) {
                const at::Tensor lw = l[b].slice(0, 0, seq - 1).to(at::kFloat);
                rows.push_back(lw.gather(1, targets[b].unsqueeze(-1)).squeeze(-1) -
                               at::logsumexp(lw, -1));
            }
            const at::Tensor logp = at::stack(rows);
            // Windows after the first score only targets past the overlap (target position
            // p = t + 1 >= overlap), the tokens the previous window did not reach.
            at::Tensor keep = at::ones_like(logp, at::TensorOptions().dtype(at::kBool));
            if (options.overlap > 0) {
                const at::Tensor positions =
                    at::arange(1, seq, at::TensorOptions().dtype(at::kLong).device(l.device()));
                const at::Tensor late = positions.ge(options.overlap).unsqueeze(0);
                const at::Tensor first =
                    at::arange(start, end, at::TensorOptions().dtype(at::kLong).device(l.device()))
                        .eq(0)
                        .unsqueeze(1);
                keep = at::logical_or(late, first).expand_as(logp);
            }
            nllSum -= logp.masked_select(keep).to(at::kDouble).sum().item<double>();
            scored += keep.sum().item<std::int64_t>();
            return {};
        });
        if (!r)
            return r.error();
        const double meanNll = nllSum / static_cast<double>(scored);
        if (!std::isfinite(meanNll))
            return Error::runtime("perplexity is not finite (the model's logits hold NaN or Inf)");
        MetricValue m{std::string(metricNameOf(Task::LanguageModel)), std::exp(meanNll), scored};
        m.higherIsBetter = false;
        return m;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("perplexity failed: ") + e.what_without_backtrace());
    }
}

at::Tensor meanPool(const at::Tensor& tokenEmbeddings, const at::Tensor& mask)
{
    const at::Tensor m = mask.to(tokenEmbeddings.scalar_type()).unsqueeze(-1);
    return (tokenEmbeddings * m).sum(1) / m.sum(1).clamp_min(1e-9);
}

Result<MetricValue> evaluateEmbeddingCosine(const ir::Graph& graph, const at::Tensor& windows,
                                            const SequenceMetricOptions& options,
                                            std::shared_ptr<exec::NodeHook> hook,
                                            c10::Device device, Progress& progress,
                                            const CancelToken& cancel)
{
    const std::string path;  // the caller names the data set
    if (auto r = checkWindows(windows, path); !r)
        return r.error();
    const std::string name(metricNameOf(Task::Embedding));
    if (!hook)
        return MetricValue{name, 1.0, windows.size(0)};
    try {
        c10::InferenceMode guard;
        exec::Executor floatExec(graph, exec::ExecOptions{device});
        exec::Executor quantExec(graph, exec::ExecOptions{device});
        quantExec.addHook(hook);
        double cosSum = 0.0;
        auto r = forBatches(windows.size(0), options.batchSize, progress, cancel,
                            [&](std::int64_t start, std::int64_t end) -> Result<void> {
            const at::Tensor batch = windows.slice(0, start, end);
            const auto feeds = exec::inputsForBatch(graph, batch);
            const at::Tensor mask = feeds.size() > 1 ? feeds[1] : at::ones_like(feeds[0]);
            auto f = firstOutput(floatExec, graph, batch, path);
            if (!f)
                return f.error();
            auto q = firstOutput(quantExec, graph, batch, path);
            if (!q)
                return q.error();
            if (f->dim() != 3 || f->size(1) != batch.size(1))
                return Error::badInput(path, "the model's first output has shape " +
                                                 shapeText(f->sizes()) +
                                                 ", expected token embeddings [batch, S, hidden]");
            const at::Tensor m = mask.to(f->device());
            const at::Tensor cos = at::cosine_similarity(meanPool(*f, m), meanPool(*q, m), 1);
            cosSum += cos.to(at::kDouble).sum().item<double>();
            return {};
        });
        if (!r)
            return r.error();
        return MetricValue{name, cosSum / static_cast<double>(windows.size(0)), windows.size(0)};
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("embedding cosine failed: ") +
                              e.what_without_backtrace());
    }
}

Result<MetricValue> evaluateOutputAgreement(const ir::Graph& graph, const at::Tensor& inputs,
                                            const SequenceMetricOptions& options,
                                            std::shared_ptr<exec::NodeHook> hook,
                                            c10::Device device, Progress& progress,
                                            const CancelToken& cancel)
{
    const std::string path;  // the caller names the data set
    if (!inputs.defined() || inputs.size(0) == 0)
        return Error::badInput(path, "holds no samples");
    const std::string name(metricNameOf(Task::Sequence));
    if (!hook)
        return MetricValue{name, 1.0, inputs.size(0)};
    double threshold = 0.0;
    if (auto it = graph.metadata.find("decision_threshold"); it != graph.metadata.end()) {
        try {
            threshold = std::stod(it->second);
        } catch (const std::exception&) {
            return Error::badInput(path, "model metadata decision_threshold '" + it->second +
                                             "' is not a number");
        }
    }
    try {
        c10::InferenceMode guard;
        exec::Executor floatExec(graph, exec::ExecOptions{device});
        exec::Executor quantExec(graph, exec::ExecOptions{device});
        quantExec.addHook(hook);
        std::int64_t agree = 0;
        std::int64_t total = 0;
        auto r = forBatches(inputs.size(0), options.batchSize, progress, cancel,
                            [&](std::int64_t start, std::int64_t end) -> Result<void> {
            const at::Tensor batch = inputs.slice(0, start, end);
            auto f = firstOutput(floatExec, graph, batch, path);
            if (!f)
                return f.error();
            auto q = firstOutput(quantExec, graph, batch, path);
            if (!q)
                return q.error();
            at::Tensor same;
            if (f->dim() >= 1 && f->size(-1) > 1)
                same = f->argmax(-1).eq(q->argmax(-1));
            else
                same = f->gt(threshold).eq(q->gt(threshold));
            agree += same.sum().item<std::int64_t>();
            total += same.numel();
            return {};
        });
        if (!r)
            return r.error();
        if (total == 0)
            return Error::badInput(path, "the model produced an empty output");
        return MetricValue{name, static_cast<double>(agree) / static_cast<double>(total),
                           inputs.size(0)};
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("output agreement failed: ") +
                              e.what_without_backtrace());
    }
}

Result<MetricValue> evaluateMetric(const ir::Graph& graph, const io::Dataset& data,
                                   c10::Device device, std::int64_t batchSize,
                                   std::shared_ptr<exec::NodeHook> hook,
                                   const SequenceMetricOptions& sequence, Progress& progress,
                                   const CancelToken& cancel)
{
    auto named = [&](Result<MetricValue> r) -> Result<MetricValue> {
        if (r || !r.error().path.empty() || r.error().code != ErrorCode::BadInput)
            return r;
        Error e = r.error();
        e.path = data.path;
        return e;
    };
    switch (taskOf(graph)) {
    case Task::LanguageModel:
        return named(evaluatePerplexity(graph, data.inputs, sequence, hook, device, progress,
                                        cancel));
    case Task::Embedding:
        return named(evaluateEmbeddingCosine(graph, data.inputs, sequence, hook, device,
                                             progress, cancel));
    case Task::Sequence:
        return named(evaluateOutputAgreement(graph, data.inputs, sequence, hook, device,
                                             progress, cancel));
    case Task::Classification: break;
    }
    if (!hook)
        return evaluateTop1(graph, data, device, batchSize, progress, cancel);
    if (!data.labels.defined())
        return Error::badInput(data.path, "has no labels, so top-1 accuracy cannot be measured");
    c10::InferenceMode guard;
    exec::Executor executor(graph, exec::ExecOptions{device});
    executor.addHook(hook);
    std::int64_t correct = 0;
    auto r = forBatches(data.size(), batchSize, progress, cancel,
                        [&](std::int64_t start, std::int64_t end) -> Result<void> {
        auto out = firstOutput(executor, graph, data.inputs.slice(0, start, end), data.path);
        if (!out)
            return out.error();
        correct += out->argmax(1).to(at::kCPU).eq(data.labels.slice(0, start, end))
                       .sum()
                       .item<std::int64_t>();
        return {};
    });
    if (!r)
        return r.error();
    return MetricValue{"top1", static_cast<double>(correct) / static_cast<double>(data.size()),
                       data.size()};
}

} // namespace bitlens::analysis
