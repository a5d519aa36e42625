#pragma once
// What the verifiers of exported files share (export.cpp, gguf_export.cpp): comparing outputs
// and running the in-app model beside the model read back from the file, on the inputs each
// graph declares, with the figures of the model's task (top-1 agreement, perplexity and KL
// divergence of a language model, embedding cosine of an encoder).

#include "exec/executor.h"
#include "export/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bitlens::exporting::detail {

/// max |a - b| over matching outputs; NaN on both sides counts as equal, NaN on one side only,
/// a shape mismatch or a different number of outputs as infinite.
double maxAbsDiff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b);

/// The inputs of `graph` for one batch of data rows (exec::inputsForBatch): Unsupported naming
/// `path` and the first input BitLens cannot make from the data when there is one.
Result<std::vector<at::Tensor>> feedsFor(const ir::Graph& graph, const at::Tensor& batch,
                                         const std::string& path);

/// The rows per run of a verification of `graph` on `data`: options.batchSize for a
/// classifier, options.sequenceBatchSize windows for a sequence model, fewer where one batch's
/// first output would pass 256 MB (a language model's logits).
std::int64_t verifyBatch(const ir::Graph& graph, const io::Dataset& data,
                         const VerifyOptions& options);

/// Runs `app` and `file` side by side on `data` in batches of `batch` rows, each fed the inputs
/// its graph declares: the largest |app - file| goes into result.maxAbsDiff (and, without
/// `sameRounding`, maxAbsDiffSameRounding), the largest |app output| into result.outputAbsMax,
/// the row count into result.samples, and the figures of the in-app graph's task (VerifyResult:
/// top-1 agreement, labelled top-1, perplexity and KLD, embedding cosine) of the file's run.
/// `sameRounding` (ONNX: the file with the in-app rounding rule) runs too and gives
/// maxAbsDiffSameRounding. A file output of another count or shape is BadInput, an error of
/// the file's run names `path`.
Result<void> compareRuns(exec::Executor& app, exec::Executor& file, const io::Dataset& data,
                         std::int64_t batch, const std::string& path, VerifyResult& result,
                         Progress& progress, const CancelToken& cancel,
                         exec::Executor* sameRounding = nullptr);

/// What compareRuns runs for the file side: the outputs of one batch's feeds (made for
/// `graph`, the file's graph). An exec::Executor of the file, or a consumer runtime's outputs.
struct FileRunner {
    const ir::Graph& graph;
    std::function<Result<std::vector<at::Tensor>>(const std::vector<at::Tensor>& feeds)> run;
};

/// compareRuns with the file side given as a runner (the consumer runtime's outputs).
Result<void> compareRuns(exec::Executor& app, const FileRunner& file, const io::Dataset& data,
                         std::int64_t batch, const std::string& path, VerifyResult& result,
                         Progress& progress, const CancelToken& cancel,
                         exec::Executor* sameRounding = nullptr);

/// True when the file's metric is within result.metricTolerance of the in-app one (top-1
/// points; a perplexity's fraction), or there is no metric.
bool metricAgrees(const VerifyResult& result);

/// The task figures of a compared run for the verify line, starting "; " (empty when there
/// are none): "; same top-1 99.9% of 4096 tokens; perplexity 12.3 in-app, 12.3 file, mean KLD
/// 1.2e-06 (max 3.4e-05)", "; embedding cosine 1 (min 1)", "; top-1 89.1% in-app, 89.1% file".
std::string figuresText(const VerifyResult& result);

} // namespace bitlens::exporting::detail
