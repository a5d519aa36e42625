#include "analysis/lm_metrics.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

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

/// Perplexity's scoring of one batch of logits l [b, S, vocab] for token windows ids [b, S]
/// (rows start..end of the data): the log-probabilities of the targets [b, S - 1] (target t + 1
/// given tokens 0..t, as the target's logit minus the log-sum-exp of its row, one window at a
/// time so the temporary is one window's [S - 1, vocab]) and which of them count. Windows after
/// the first score only targets past the overlap (target position p = t + 1 >= overlap), the
/// tokens the previous window did not reach.
Result<std::pair<at::Tensor, at::Tensor>> scoreTargets(const at::Tensor& l, const at::Tensor& ids,
                                                       std::int64_t start, std::int64_t end,
                                                       std::int64_t overlap,
                                                       const std::string& path)
{
    const std::int64_t seq = ids.size(1);
    if (l.dim() != 3 || l.size(0) != end - start || l.size(1) != seq)
        return Error::badInput(path, "the model's first output has shape " +
                                         shapeText(l.sizes()) +
                                         ", expected logits [batch, " + std::to_string(seq) +
                                         ", vocab]");
    const at::Tensor targets = ids.slice(1, 1, seq).to(l.device());
    if (targets.max().item<std::int64_t>() >= l.size(2) ||
        targets.min().item<std::int64_t>() < 0)
        return Error::badInput(path, "a token id is outside the model's vocabulary of " +
                                         std::to_string(l.size(2)));
    std::vector<at::Tensor> rows;
    for (std::int64_t b = 0; b < end - start; ++b) {
        const at::Tensor lw = l[b].slice(0, 0, seq - 1).to(at::kFloat);
        rows.push_back(lw.gather(1, targets[b].unsqueeze(-1)).squeeze(-1) -
                       at::logsumexp(lw, -1));
    }
    const at::Tensor logp = at::stack(rows);
    at::Tensor keep = at::ones_like(logp, at::TensorOptions().dtype(at::kBool));
    if (overlap > 0) {
        const at::Tensor positions =
            at::arange(1, seq, at::TensorOptions().dtype(at::kLong).device(l.device()));
        const at::Tensor late = positions.ge(overlap).unsqueeze(0);
        const at::Tensor first =
            at::arange(start, end, at::TensorOptions().dtype(at::kLong).device(l.device()))
                .eq(0)
                .unsqueeze(1);
        keep = at::logical_or(late, first).expand_as(logp);
    }
    return std::make_pair(logp, keep);
}

/// The batch of windows perplexity runs at once: logits are [B, S, vocab] float32, at most
/// ~256 MB of them per batch (2 windows of 512 tokens for a 49k vocabulary). Bigger batches gain
/// nothing in GEMM speed here and cost page faults on every batch.
std::int64_t windowBatch(const ir::Graph& graph, std::int64_t seq, std::int64_t batch)
{
    if (!graph.outputs.empty() && !graph.outputs.front().shape.empty() &&
        graph.outputs.front().shape.back() > 0) {
        const std::int64_t windowBytes = seq * graph.outputs.front().shape.back() * 4;
        batch = std::clamp<std::int64_t>((std::int64_t{256} << 20) / windowBytes, 1, batch);
    }
    return batch;
}

/// Linear interpolation at fraction * (n - 1) of sorted values (llama-perplexity's percentile).
double percentile(const std::vector<double>& sorted, double fraction)
{
    if (sorted.empty())
        return 0.0;
    if (fraction <= 0.0)
        return sorted.front();
    if (fraction >= 1.0)
        return sorted.back();
    double p = fraction * static_cast<double>(sorted.size() - 1);
    const auto ip = static_cast<std::size_t>(p);
    p -= static_cast<double>(ip);
    return (1.0 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

double median(const std::vector<double>& sorted)
{
    if (sorted.empty())
        return 0.0;
    const std::size_t n = sorted.size();
    return n % 2 == 0 ? 0.5 * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

/// Mean and its uncertainty sqrt(var / (n - 1)) from a sum and a sum of squares (0 for n <= 10).
std::pair<double, double> meanAndUncertainty(double sum, double sum2, std::size_t n)
{
    if (n == 0)
        return {0.0, 0.0};
    const double mean = sum / static_cast<double>(n);
    const double var = sum2 / static_cast<double>(n) - mean * mean;
    return {mean, var > 0.0 && n > 10 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0};
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
        const std::int64_t batch = windowBatch(graph, seq, options.batchSize);
        auto r = forBatches(windows.size(0), batch, progress, cancel,
                            [&](std::int64_t start, std::int64_t end) -> Result<void> {
            const at::Tensor ids = windows.slice(0, start, end).to(at::kLong);
            auto logits = firstOutput(executor, graph, ids, path);
            if (!logits)
                return logits.error();
            auto scoring = scoreTargets(*logits, ids, start, end, options.overlap, path);
            if (!scoring)
                return scoring.error();
            const auto& [logp, keep] = *scoring;
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

LmDivergence summarizeDivergence(const std::vector<double>& nllQuantized,
                                 const std::vector<double>& nllFloat, std::vector<double> kld,
                                 std::vector<double> deltaP, std::int64_t sameTop)
{
    LmDivergence d;
    const std::size_t n = kld.size();
    d.tokens = static_cast<std::int64_t>(n);
    if (n == 0)
        return d;
    double q = 0.0, q2 = 0.0, f = 0.0, f2 = 0.0, qf = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        q += nllQuantized[i];
        q2 += nllQuantized[i] * nllQuantized[i];
        f += nllFloat[i];
        f2 += nllFloat[i] * nllFloat[i];
        qf += nllQuantized[i] * nllFloat[i];
    }
    const auto [lnQ, lnQUnc] = meanAndUncertainty(q, q2, n);
    const auto [lnF, lnFUnc] = meanAndUncertainty(f, f2, n);
    d.pplQuantized = std::exp(lnQ);
    d.pplFloat = std::exp(lnF);
    // The covariance of the two means (llama-perplexity: 0 below 10 tokens).
    const double nn = static_cast<double>(n);
    const double cov = n < 10 ? 0.0 : (qf / nn - (q / nn) * (f / nn)) / (nn - 1.0);
    d.lnPplRatio = lnQ - lnF;
    d.lnPplRatioUncertainty =
        std::sqrt(std::max(0.0, lnQUnc * lnQUnc + lnFUnc * lnFUnc - 2.0 * cov));
    d.pplCorrelation = lnQUnc > 0.0 && lnFUnc > 0.0 ? cov / (lnQUnc * lnFUnc) : 0.0;

    double k = 0.0, k2 = 0.0, p = 0.0, p2 = 0.0, p4 = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        k += kld[i];
        k2 += kld[i] * kld[i];
        p += deltaP[i];
        p2 += deltaP[i] * deltaP[i];
        p4 += deltaP[i] * deltaP[i] * deltaP[i] * deltaP[i];
    }
    std::tie(d.meanKld, d.meanKldUncertainty) = meanAndUncertainty(k, k2, n);
    std::tie(d.meanDeltaP, d.meanDeltaPUncertainty) = meanAndUncertainty(p, p2, n);
    const auto [mse, mseUnc] = meanAndUncertainty(p2, p4, n);
    d.rmsDeltaP = std::sqrt(mse);
    d.rmsDeltaPUncertainty = d.rmsDeltaP > 0.0 ? 0.5 / d.rmsDeltaP * mseUnc : 0.0;
    d.sameTop = static_cast<double>(sameTop) / nn;
    d.sameTopUncertainty = n > 1 ? std::sqrt(d.sameTop * (1.0 - d.sameTop) / (nn - 1.0)) : 0.0;

    std::sort(kld.begin(), kld.end());
    d.maxKld = kld.back();
    d.kldP999 = percentile(kld, 0.999);
    d.kldP99 = percentile(kld, 0.99);
    d.kldP95 = percentile(kld, 0.95);
    d.kldP90 = percentile(kld, 0.90);
    d.medianKld = median(kld);
    d.kldP10 = percentile(kld, 0.10);
    d.kldP05 = percentile(kld, 0.05);
    d.kldP01 = percentile(kld, 0.01);
    d.kldP001 = percentile(kld, 0.001);
    d.minKld = kld.front();
    std::sort(deltaP.begin(), deltaP.end());
    d.maxDeltaP = deltaP.back();
    d.deltaPP999 = percentile(deltaP, 0.999);
    d.deltaPP99 = percentile(deltaP, 0.99);
    d.deltaPP95 = percentile(deltaP, 0.95);
    d.deltaPP90 = percentile(deltaP, 0.90);
    d.deltaPP75 = percentile(deltaP, 0.75);
    d.medianDeltaP = median(deltaP);
    d.deltaPP25 = percentile(deltaP, 0.25);
    d.deltaPP10 = percentile(deltaP, 0.10);
    d.deltaPP05 = percentile(deltaP, 0.05);
    d.deltaPP01 = percentile(deltaP, 0.01);
    d.deltaPP001 = percentile(deltaP, 0.001);
    d.minDeltaP = deltaP.front();
    return d;
}

/// Token rows per float64 block of the KL divergence.
constexpr std::int64_t kKldRows = 128;

std::int64_t lmWindowBatch(const ir::Graph& graph, std::int64_t seq, std::int64_t batch)
{
    return windowBatch(graph, seq, batch);
}

DivergenceAccumulator::DivergenceAccumulator(std::int64_t overlap, std::string path)
    : m_overlap(overlap), m_path(std::move(path))
{
}

Result<void> DivergenceAccumulator::add(const at::Tensor& lf, const at::Tensor& lq,
                                        const at::Tensor& ids, std::int64_t start,
                                        std::int64_t end)
{
    const std::int64_t seq = ids.size(1);
    auto sf = scoreTargets(lf, ids, start, end, m_overlap, m_path);
    if (!sf)
        return sf.error();
    auto sq = scoreTargets(lq, ids, start, end, m_overlap, m_path);
    if (!sq)
        return sq.error();
    const at::Tensor& keep = sf->second;
    m_nllSumF -= sf->first.masked_select(keep).to(at::kDouble).sum().item<double>();
    m_nllSumQ -= sq->first.masked_select(keep).to(at::kDouble).sum().item<double>();
    const at::Tensor targets = ids.slice(1, 1, seq).to(lf.device());
    for (std::int64_t b = 0; b < end - start; ++b) {
        // One window's [S - 1, vocab] distributions in float64: sum_v P_v ln(P_v / Q_v)
        // cancels almost exactly for a good quantization, so float32 would leave
        // rounding noise of the size of the divergence itself.
        const at::Tensor kb = keep[b];
        const at::Tensor wf =
            lf[b].slice(0, 0, seq - 1).masked_select(kb.unsqueeze(-1)).view({-1, lf.size(2)});
        const at::Tensor wq =
            lq[b].slice(0, 0, seq - 1).masked_select(kb.unsqueeze(-1)).view({-1, lq.size(2)});
        const at::Tensor t = targets[b].masked_select(kb).unsqueeze(-1);
        // Rows are independent: 128 tokens at a time hold 128 x vocab float64 values
        // per term instead of the whole window's (SmolLM2: 50 MB, not 400 MB), and give
        // the same numbers.
        std::vector<at::Tensor> kParts, dpParts;
        for (std::int64_t r0 = 0; r0 < wf.size(0); r0 += kKldRows) {
            const std::int64_t r1 = std::min(wf.size(0), r0 + kKldRows);
            const at::Tensor lpf = at::log_softmax(wf.slice(0, r0, r1).to(at::kDouble), -1);
            const at::Tensor lpq = at::log_softmax(wq.slice(0, r0, r1).to(at::kDouble), -1);
            const at::Tensor tr = t.slice(0, r0, r1);
            kParts.push_back((lpf.exp() * (lpf - lpq)).sum(-1).to(at::kCPU));
            const at::Tensor dpRows = lpq.gather(1, tr).exp() - lpf.gather(1, tr).exp();
            dpParts.push_back(dpRows.squeeze(-1).to(at::kCPU));
        }
        const at::Tensor k =
            kParts.empty() ? at::empty({0}, at::kDouble) : at::cat(kParts).contiguous();
        const at::Tensor dp =
            dpParts.empty() ? at::empty({0}, at::kDouble) : at::cat(dpParts).contiguous();
        m_sameTop += wf.argmax(-1).eq(wq.argmax(-1)).sum().item<std::int64_t>();
        const at::Tensor nf =
            -sf->first[b].masked_select(kb).to(at::kDouble).to(at::kCPU).contiguous();
        const at::Tensor nq =
            -sq->first[b].masked_select(kb).to(at::kDouble).to(at::kCPU).contiguous();
        const auto append = [](std::vector<double>& v, const at::Tensor& x) {
            const double* data = x.data_ptr<double>();
            v.insert(v.end(), data, data + x.numel());
        };
        append(m_kld, k);
        append(m_deltaP, dp);
        append(m_nllF, nf);
        append(m_nllQ, nq);
    }
    return {};
}

Result<LmDivergence> DivergenceAccumulator::finish()
{
    LmDivergence d =
        summarizeDivergence(m_nllQ, m_nllF, std::move(m_kld), std::move(m_deltaP), m_sameTop);
    const double scored = static_cast<double>(d.tokens);
    d.pplQuantized = std::exp(m_nllSumQ / scored);
    d.pplFloat = std::exp(m_nllSumF / scored);
    if (!std::isfinite(d.pplQuantized) || !std::isfinite(d.pplFloat) || !std::isfinite(d.meanKld))
        return Error::runtime("KL divergence is not finite (the model's logits hold NaN or "
                              "Inf)");
    return d;
}

Result<void> checkLmWindows(const at::Tensor& windows, std::int64_t overlap)
{
    if (auto r = checkWindows(windows, {}); !r)
        return r.error();
    const std::int64_t seq = windows.size(1);
    if (overlap < 0 || overlap >= seq)
        return Error::usage("window overlap " + std::to_string(overlap) +
                            " must be from 0 to the window length - 1 (" +
                            std::to_string(seq - 1) + ")");
    return {};
}

Result<LmDivergence> evaluateLmDivergence(const ir::Graph& floatGraph,
                                          const ir::Graph& quantGraph,
                                          std::shared_ptr<exec::NodeHook> hook,
                                          const at::Tensor& windows,
                                          const SequenceMetricOptions& options,
                                          c10::Device device, Progress& progress,
                                          const CancelToken& cancel)
{
    const std::string path;  // the caller names the data set
    if (auto r = checkLmWindows(windows, options.overlap); !r)
        return r.error();
    const std::int64_t seq = windows.size(1);
    try {
        c10::InferenceMode guard;
        exec::Executor floatExec(floatGraph, exec::ExecOptions{device});
        exec::Executor quantExec(quantGraph, exec::ExecOptions{device});
        if (hook)
            quantExec.addHook(hook);
        // The perplexities are summed exactly as evaluatePerplexity sums them (same batches,
        // same reductions), so they equal its numbers bit for bit.
        DivergenceAccumulator acc(options.overlap, path);
        const std::int64_t batch = windowBatch(floatGraph, seq, options.batchSize);
        auto r = forBatches(windows.size(0), batch, progress, cancel,
                            [&](std::int64_t start, std::int64_t end) -> Result<void> {
            const at::Tensor ids = windows.slice(0, start, end).to(at::kLong);
            auto lf = firstOutput(floatExec, floatGraph, ids, path);
            if (!lf)
                return lf.error();
            auto lq = firstOutput(quantExec, quantGraph, ids, path);
            if (!lq)
                return lq.error();
            return acc.add(*lf, *lq, ids, start, end);
        });
        if (!r)
            return r.error();
        return acc.finish();
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("KL divergence failed: ") + e.what_without_backtrace());
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
