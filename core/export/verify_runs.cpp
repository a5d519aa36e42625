#include "export/verify_runs.h"

#include "analysis/lm_metrics.h"
#include "ir/task.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace bitlens::exporting::detail {

namespace {

std::string fmt(double value)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", value);
    return buf;
}

/// Next-token rows scored per float64 block of the KL divergence (as analysis's).
constexpr std::int64_t kKldRows = 128;

/// What compareRuns adds up over the batches for the task figures.
struct Tally {
    std::int64_t top1Positions = 0;
    std::int64_t top1Same = 0;
    std::int64_t correctApp = 0;
    std::int64_t correctFile = 0;
    bool labelled = false;
    // Language models, in float64 over every next-token prediction.
    std::int64_t tokens = 0;
    double nllApp = 0.0;
    double nllFile = 0.0;
    double kldSum = 0.0;
    double kldMax = 0.0;
    // Encoders.
    std::int64_t pooled = 0;
    double cosSum = 0.0;
    double cosMin = 1.0;
};

Result<void> checkOutputs(const std::string& path, const std::vector<at::Tensor>& app,
                          const std::vector<at::Tensor>& file)
{
    if (app.size() != file.size())
        return Error::badInput(path, "the file has " + std::to_string(file.size()) +
                                         " outputs, the model " + std::to_string(app.size()));
    for (std::size_t i = 0; i < app.size(); ++i)
        if (app[i].sizes() != file[i].sizes())
            return Error::badInput(path, "output " + std::to_string(i) + " has shape " +
                                             c10::str(file[i].sizes()) + ", the model's " +
                                             c10::str(app[i].sizes()));
    return {};
}

/// A language model's logits la (in-app) and lf (file) [b, S, vocab] for token windows ids
/// [b, S]: every next-token prediction (position t predicts token t + 1) into the tally.
Result<void> tallyLm(const at::Tensor& la, const at::Tensor& lf, const at::Tensor& ids,
                     const std::string& path, Tally& tally)
{
    const std::int64_t seq = ids.size(1);
    if (la.dim() != 3 || la.size(1) != seq || seq < 2)
        return {};
    const at::Tensor targets = ids.slice(1, 1, seq).to(at::kCPU, at::kLong);
    if (targets.max().item<std::int64_t>() >= la.size(2) ||
        targets.min().item<std::int64_t>() < 0)
        return Error::badInput(path, "a token id is outside the model's vocabulary of " +
                                         std::to_string(la.size(2)));
    for (std::int64_t b = 0; b < la.size(0); ++b) {
        for (std::int64_t r0 = 0; r0 < seq - 1; r0 += kKldRows) {
            const std::int64_t r1 = std::min(seq - 1, r0 + kKldRows);
            const at::Tensor lpa =
                at::log_softmax(la[b].slice(0, r0, r1).to(at::kCPU, at::kDouble), -1);
            const at::Tensor lpf =
                at::log_softmax(lf[b].slice(0, r0, r1).to(at::kCPU, at::kDouble), -1);
            const at::Tensor t = targets[b].slice(0, r0, r1).unsqueeze(-1);
            const at::Tensor kld = (lpa.exp() * (lpa - lpf)).sum(-1);
            tally.kldSum += kld.sum().item<double>();
            tally.kldMax = std::max(tally.kldMax, kld.max().item<double>());
            tally.nllApp -= lpa.gather(1, t).sum().item<double>();
            tally.nllFile -= lpf.gather(1, t).sum().item<double>();
            tally.tokens += r1 - r0;
        }
    }
    return {};
}

/// An encoder's token embeddings ya (in-app) and yf (file) [b, S, hidden]: the cosine of the
/// mean-pooled embeddings of each sample into the tally.
void tallyEmbedding(const at::Tensor& ya, const at::Tensor& yf, const at::Tensor& mask,
                    Tally& tally)
{
    if (mask.dim() != 2 || mask.size(0) != ya.size(0) || mask.size(1) != ya.size(1))
        return;
    const at::Tensor m = mask.to(at::kCPU);
    const at::Tensor cos =
        at::cosine_similarity(analysis::meanPool(ya.to(at::kCPU, at::kDouble), m),
                              analysis::meanPool(yf.to(at::kCPU, at::kDouble), m), 1);
    if (cos.numel() == 0)
        return;
    tally.cosSum += cos.sum().item<double>();
    tally.cosMin = std::min(tally.cosMin, cos.min().item<double>());
    tally.pooled += cos.numel();
}

} // namespace

double maxAbsDiff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b)
{
    if (a.size() != b.size())
        return std::numeric_limits<double>::infinity();
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const at::Tensor x = a[i].to(at::kCPU, at::kFloat);
        const at::Tensor y = b[i].to(at::kCPU, at::kFloat);
        if (x.sizes() != y.sizes())
            return std::numeric_limits<double>::infinity();
        const at::Tensor bothNan = at::logical_and(at::isnan(x), at::isnan(y));
        const at::Tensor d = at::where(bothNan, at::zeros_like(x),
                                       at::nan_to_num((x - y).abs(),
                                                      std::numeric_limits<double>::infinity()));
        if (d.numel() > 0)
            worst = std::max(worst, d.max().item<double>());
    }
    return worst;
}

Result<std::vector<at::Tensor>> feedsFor(const ir::Graph& graph, const at::Tensor& batch,
                                         const std::string& path)
{
    std::vector<at::Tensor> feeds = exec::inputsForBatch(graph, batch);
    if (feeds.size() < graph.inputs.size())
        return Error::unsupported(
            path, "verification cannot make input '" + graph.inputs[feeds.size()].name +
                      "' from the data: it feeds token ids, attention_mask, token_type_ids and "
                      "position_ids, or one input");
    return feeds;
}

std::int64_t verifyBatch(const ir::Graph& graph, const io::Dataset& data,
                         const VerifyOptions& options)
{
    if (ir::taskOf(graph) == ir::Task::Classification)
        return std::max<std::int64_t>(1, options.batchSize);
    std::int64_t batch = std::max<std::int64_t>(1, options.sequenceBatchSize);
    // As analysis' perplexity batches: at most ~256 MB of float32 first output per batch.
    if (data.inputs.defined() && data.inputs.dim() >= 2 && !graph.outputs.empty() &&
        !graph.outputs.front().shape.empty() && graph.outputs.front().shape.back() > 0) {
        const std::int64_t rowBytes =
            data.inputs.size(1) * graph.outputs.front().shape.back() * 4;
        batch = std::clamp<std::int64_t>((std::int64_t{256} << 20) / std::max<std::int64_t>(
                                                                        rowBytes, 1),
                                         1, batch);
    }
    return batch;
}

Result<void> compareRuns(exec::Executor& app, exec::Executor& file, const io::Dataset& data,
                         std::int64_t batch, const std::string& path, VerifyResult& result,
                         Progress& progress, const CancelToken& cancel,
                         exec::Executor* sameRounding)
{
    const FileRunner runner{file.graph(), [&file](const std::vector<at::Tensor>& feeds) {
                                return file.run(feeds);
                            }};
    return compareRuns(app, runner, data, batch, path, result, progress, cancel, sameRounding);
}

Result<void> compareRuns(exec::Executor& app, const FileRunner& file, const io::Dataset& data,
                         std::int64_t batch, const std::string& path, VerifyResult& result,
                         Progress& progress, const CancelToken& cancel,
                         exec::Executor* sameRounding)
{
    const ir::Task task = ir::taskOf(app.graph());
    result.task = std::string(ir::taskName(task));
    Tally tally;
    tally.labelled = task == ir::Task::Classification && data.labels.defined();
    const bool maskInput = app.graph().inputs.size() > 1 &&
                           app.graph().inputs[1].name == "attention_mask";
    const std::int64_t n = data.size();
    batch = std::max<std::int64_t>(batch, 1);
    for (std::int64_t start = 0; start < n; start += batch) {
        if (cancel.cancelled())
            return Error::cancelled();
        const std::int64_t end = std::min(n, start + batch);
        const at::Tensor x = data.inputs.slice(0, start, end);
        auto appFeeds = feedsFor(app.graph(), x, {});
        if (!appFeeds)
            return appFeeds.error();
        auto fileFeeds = feedsFor(file.graph, x, path);
        if (!fileFeeds)
            return fileFeeds.error();
        auto a = app.run(*appFeeds);
        if (!a)
            return a.error();
        auto f = file.run(*fileFeeds);
        if (!f)
            return Error{f.error().code, f.error().message, path, std::nullopt};
        if (auto r = checkOutputs(path, *a, *f); !r)
            return r.error();
        result.maxAbsDiff = std::max(result.maxAbsDiff, maxAbsDiff(*a, *f));
        if (sameRounding) {
            auto e = sameRounding->run(*fileFeeds);
            if (!e)
                return Error{e.error().code, e.error().message, path, std::nullopt};
            result.maxAbsDiffSameRounding =
                std::max(result.maxAbsDiffSameRounding, maxAbsDiff(*a, *e));
        }
        for (const auto& y : *a)
            if (y.numel() > 0)
                result.outputAbsMax = std::max(result.outputAbsMax,
                                               at::nan_to_num(y.abs()).max().item<double>());

        // The task figures, from the first output.
        const at::Tensor ya = a->front().to(at::kCPU);
        const at::Tensor yf = f->front().to(at::kCPU);
        if (task == ir::Task::Embedding) {
            if (ya.dim() == 3)
                tallyEmbedding(ya, yf,
                               maskInput ? (*appFeeds)[1]
                                         : at::ones({ya.size(0), ya.size(1)}, at::kLong),
                               tally);
        } else if (ya.dim() >= 2 && ya.size(0) == end - start && ya.size(-1) > 1) {
            const at::Tensor pa = ya.argmax(-1);
            const at::Tensor pf = yf.argmax(-1);
            const std::int64_t same = pa.eq(pf).sum().item<std::int64_t>();
            tally.top1Same += same;
            tally.top1Positions += pa.numel();
            if (tally.labelled && ya.dim() == 2) {
                const at::Tensor labels = data.labels.slice(0, start, end);
                tally.correctApp += pa.eq(labels).sum().item<std::int64_t>();
                tally.correctFile += pf.eq(labels).sum().item<std::int64_t>();
            }
            if (task == ir::Task::LanguageModel)
                if (auto r = tallyLm(ya, yf, (*appFeeds)[0], path, tally); !r)
                    return r.error();
        }
        progress.report(static_cast<double>(end) / static_cast<double>(n), "verifying");
    }
    result.samples = n;
    if (!sameRounding)
        result.maxAbsDiffSameRounding = result.maxAbsDiff;
    result.top1Positions = tally.top1Positions;
    result.argmaxDisagreements = tally.top1Positions - tally.top1Same;
    result.sameTop1Rate = tally.top1Positions > 0 ? static_cast<double>(tally.top1Same) /
                                                        static_cast<double>(tally.top1Positions)
                                                  : 1.0;
    if (tally.labelled && tally.top1Positions == n) {
        result.metricApp = analysis::MetricValue{
            "top1", static_cast<double>(tally.correctApp) / static_cast<double>(n), n};
        result.metricFile = analysis::MetricValue{
            "top1", static_cast<double>(tally.correctFile) / static_cast<double>(n), n};
    }
    if (tally.tokens > 0) {
        const double t = static_cast<double>(tally.tokens);
        result.tokens = tally.tokens;
        result.metricApp = analysis::MetricValue{"perplexity", std::exp(tally.nllApp / t),
                                                 tally.tokens, false};
        result.metricFile = analysis::MetricValue{"perplexity", std::exp(tally.nllFile / t),
                                                  tally.tokens, false};
        result.meanKld = tally.kldSum / t;
        result.maxKld = tally.kldMax;
    }
    if (tally.pooled > 0) {
        result.embeddingCosineMean = tally.cosSum / static_cast<double>(tally.pooled);
        result.embeddingCosineMin = tally.cosMin;
    }
    return {};
}

bool metricAgrees(const VerifyResult& result)
{
    if (!result.metricApp || !result.metricFile)
        return true;
    const double app = result.metricApp->value;
    const double file = result.metricFile->value;
    if (!result.metricApp->higherIsBetter)  // perplexity: a fraction of it
        return std::isfinite(file) && std::abs(file / app - 1.0) <= result.metricTolerance;
    return std::abs(app - file) <= result.metricTolerance;
}

std::string figuresText(const VerifyResult& result)
{
    std::string text;
    if (result.top1Positions > 0 && result.task != "classification")
        text += "; same top-1 " + fmt(100.0 * result.sameTop1Rate) + "% of " +
                std::to_string(result.top1Positions) + " token positions";
    if (result.metricApp && result.metricFile) {
        if (result.metricApp->higherIsBetter)
            text += "; top-1 " + fmt(100.0 * result.metricApp->value) + "% in-app, " +
                    fmt(100.0 * result.metricFile->value) + "% file";
        else
            text += "; perplexity " + fmt(result.metricApp->value) + " in-app, " +
                    fmt(result.metricFile->value) + " file on " +
                    std::to_string(result.tokens) + " next-token predictions";
    }
    if (result.meanKld)
        text += ", mean KLD " + fmt(*result.meanKld) + " (max " + fmt(*result.maxKld) + ")";
    if (result.embeddingCosineMean)
        text += "; embedding cosine file vs in-app " + fmt(*result.embeddingCosineMean) +
                " (min " + fmt(*result.embeddingCosineMin) + ")";
    return text;
}

} // namespace bitlens::exporting::detail
