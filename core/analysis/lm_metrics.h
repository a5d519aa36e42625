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
