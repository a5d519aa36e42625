#pragma once
// Task metrics of sequence models (the task itself, ir::taskOf, is in ir/task.h). A graph's
// metadata "task" says what it does: "classification" (default: top-1 against labels), "lm" (perplexity over
// token windows), "embedding" (mean-pooled embedding cosine, quantized vs float) or "sequence"
// (output agreement, quantized vs float). Language-model and encoder data are token windows
// [N, S] (int64, or floats holding whole numbers).

#include "analysis/metrics.h"
#include "exec/executor.h"
#include "io/dataset.h"
#include "ir/graph.h"
#include "ir/task.h"
#include "jobs/progress.h"
#include "jobs/result.h"

#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace bitlens::analysis {

/// Options of the sequence metrics.
struct SequenceMetricOptions {
    std::int64_t batchSize = 8;
    /// Perplexity: leading tokens of every window but the first that the previous window
    /// already scored (window length - stride); they are context only, as in Hugging Face's
    /// sliding-window perplexity. 0 for windows that do not overlap.
    std::int64_t overlap = 0;
};

/// Perplexity of a causal LM (first output = logits [N, S, vocab]) over token windows [N, S]:
/// exp of the mean cross-entropy of each token given the tokens before it in its window,
/// averaged over every scored token. `hook` (may be null) makes the run quantized.
Result<MetricValue> evaluatePerplexity(const ir::Graph& graph, const at::Tensor& windows,
                                       const SequenceMetricOptions& options,
                                       std::shared_ptr<exec::NodeHook> hook = nullptr,
                                       c10::Device device = c10::Device(c10::kCPU),
                                       Progress& progress = Progress::none(),
                                       const CancelToken& cancel = CancelToken());

/// How far a quantized causal LM's next-token distributions are from the float model's, over
/// the tokens that perplexity scores (the same windows and overlap rule), as llama.cpp's
/// `llama-perplexity --kl-divergence` defines its statistics: per scored token t, with P the
/// float model's distribution and Q the quantized one's,
///   KLD_t = sum_v P_v (ln P_v - ln Q_v)   (natural log; computed in float64 over the whole
///           vocabulary, where llama.cpp's 16-bit log-probability file drops P_v < e^-16),
///   dp_t  = Q(correct token) - P(correct token),
///   same top: arg-max of Q == arg-max of P.
/// Percentiles interpolate linearly at fraction * (n - 1) of the sorted values; the median of an
/// even count is the mean of the two middle values; an uncertainty is sqrt(var / (n - 1)) of the
/// per-token values (0 for n <= 10), as llama-perplexity prints them.
struct LmDivergence {
    std::int64_t tokens = 0;       ///< scored tokens
    double pplQuantized = 0.0;     ///< = evaluatePerplexity with the hook, bit for bit
    double pplFloat = 0.0;         ///< = evaluatePerplexity without it, bit for bit
    double lnPplRatio = 0.0;       ///< mean of nll(Q) - nll(base) = ln(PPL(Q) / PPL(base))
    double lnPplRatioUncertainty = 0.0;
    double pplCorrelation = 0.0;   ///< Cor(ln PPL(Q), ln PPL(base)) over tokens (-ln p per token)
    double meanKld = 0.0;
    double meanKldUncertainty = 0.0;
    double maxKld = 0.0, kldP999 = 0.0, kldP99 = 0.0, kldP95 = 0.0, kldP90 = 0.0;
    double medianKld = 0.0, kldP10 = 0.0, kldP05 = 0.0, kldP01 = 0.0, kldP001 = 0.0;
    double minKld = 0.0;
    double sameTop = 0.0;          ///< fraction of tokens whose arg-max agrees
    double sameTopUncertainty = 0.0;
    double meanDeltaP = 0.0;       ///< fractions (llama.cpp prints them x 100 as %)
    double meanDeltaPUncertainty = 0.0;
    double rmsDeltaP = 0.0;
    double rmsDeltaPUncertainty = 0.0;
    double maxDeltaP = 0.0, deltaPP999 = 0.0, deltaPP99 = 0.0, deltaPP95 = 0.0, deltaPP90 = 0.0;
    double deltaPP75 = 0.0, medianDeltaP = 0.0, deltaPP25 = 0.0, deltaPP10 = 0.0;
    double deltaPP05 = 0.0, deltaPP01 = 0.0, deltaPP001 = 0.0, minDeltaP = 0.0;
};

/// The statistics of LmDivergence from per-token values (the float and quantized negative
/// log-likelihoods of the correct token, the KLD, dp and same-top of each token); exposed so
/// tests can check the arithmetic on known values.
LmDivergence summarizeDivergence(const std::vector<double>& nllQuantized,
                                 const std::vector<double>& nllFloat,
                                 std::vector<double> kld, std::vector<double> deltaP,
                                 std::int64_t sameTop);

/// Runs `floatGraph` and `quantGraph` + `hook` (the quantized model; the same graph is fine)
/// on the same token windows and compares their next-token distributions (LmDivergence). Two
/// forward passes per window; only one window's logits are held at a time.
Result<LmDivergence> evaluateLmDivergence(const ir::Graph& floatGraph,
                                          const ir::Graph& quantGraph,
                                          std::shared_ptr<exec::NodeHook> hook,
                                          const at::Tensor& windows,
                                          const SequenceMetricOptions& options,
                                          c10::Device device = c10::Device(c10::kCPU),
                                          Progress& progress = Progress::none(),
                                          const CancelToken& cancel = CancelToken());

/// evaluateLmDivergence's scoring, batch by batch, for callers that compute the logits
/// themselves (the block engine, analysis/block_engine.h): add() takes the float and quantized
/// logits [b, S, vocab] of windows ids [b, S] (rows start..end of the data, in order), finish()
/// gives the statistics. The same batches give evaluateLmDivergence's numbers bit for bit.
class DivergenceAccumulator {
public:
    explicit DivergenceAccumulator(std::int64_t overlap, std::string path = {});
    Result<void> add(const at::Tensor& floatLogits, const at::Tensor& quantLogits,
                     const at::Tensor& ids, std::int64_t start, std::int64_t end);
    Result<LmDivergence> finish();

private:
    std::int64_t m_overlap = 0;
    std::string m_path;
    double m_nllSumQ = 0.0, m_nllSumF = 0.0;
    std::vector<double> m_nllQ, m_nllF, m_kld, m_deltaP;
    std::int64_t m_sameTop = 0;
};

/// Token windows [N, S] a language-model metric accepts (Usage / BadInput errors otherwise),
/// with `overlap` in 0..S-1.
Result<void> checkLmWindows(const at::Tensor& windows, std::int64_t overlap);

/// Windows per batch of the language-model metrics: `batch`, fewer when the logits of a batch
/// [b, S, vocab] would pass ~256 MB.
std::int64_t lmWindowBatch(const ir::Graph& graph, std::int64_t seq, std::int64_t batch);

/// Sentence embeddings as sentence-transformers makes them: the mean of the token embeddings
/// [N, S, H] over tokens whose mask [N, S] is non-zero.
at::Tensor meanPool(const at::Tensor& tokenEmbeddings, const at::Tensor& mask);

/// Mean over samples of the cosine between the mean-pooled embedding of the model run with
/// `hook` and without it (1.0 when `hook` is null). First output = token embeddings [N, S, H].
Result<MetricValue> evaluateEmbeddingCosine(const ir::Graph& graph, const at::Tensor& windows,
                                            const SequenceMetricOptions& options,
                                            std::shared_ptr<exec::NodeHook> hook = nullptr,
                                            c10::Device device = c10::Device(c10::kCPU),
                                            Progress& progress = Progress::none(),
                                            const CancelToken& cancel = CancelToken());

/// Fraction of output positions where the model run with `hook` decides as the float model:
/// the arg-max over the last dimension of the first output when it has more than one entry,
/// else the sign of the value minus metadata "decision_threshold" (default 0). 1.0 without a
/// hook.
Result<MetricValue> evaluateOutputAgreement(const ir::Graph& graph, const at::Tensor& inputs,
                                            const SequenceMetricOptions& options,
                                            std::shared_ptr<exec::NodeHook> hook = nullptr,
                                            c10::Device device = c10::Device(c10::kCPU),
                                            Progress& progress = Progress::none(),
                                            const CancelToken& cancel = CancelToken());

/// The task metric of `graph` on `data`: top-1 for classifiers, otherwise the metric of its
/// task. With `hook`, the hooked (quantized) run is measured (against the unhooked float run
/// for embedding cosine and output agreement).
Result<MetricValue> evaluateMetric(const ir::Graph& graph, const io::Dataset& data,
                                   c10::Device device = c10::Device(c10::kCPU),
                                   std::int64_t batchSize = 256,
                                   std::shared_ptr<exec::NodeHook> hook = nullptr,
                                   const SequenceMetricOptions& sequence = {},
                                   Progress& progress = Progress::none(),
                                   const CancelToken& cancel = CancelToken());

} // namespace bitlens::analysis
