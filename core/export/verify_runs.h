#pragma once
// What the verifiers of exported files share (export.cpp, gguf_export.cpp): comparing outputs
// and running the in-app model beside the model read back from the file.

#include "exec/executor.h"
#include "export/export.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bitlens::exporting::detail {

/// max |a - b| over matching outputs; NaN on both sides counts as equal, NaN on one side only,
/// a shape mismatch or a different number of outputs as infinite.
double maxAbsDiff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b);

/// Runs `app` and `file` side by side on `data` in batches of `batch` rows: the largest
/// |app - file| goes into result.maxAbsDiff (and maxAbsDiffSameRounding), the largest |app
/// output| into result.outputAbsMax, the row count into result.samples. An error of the file's
/// run names `path`.
Result<void> compareRuns(exec::Executor& app, exec::Executor& file, const io::Dataset& data,
                         std::int64_t batch, const std::string& path, VerifyResult& result,
                         Progress& progress, const CancelToken& cancel);

} // namespace bitlens::exporting::detail
