#pragma once
// Task metrics computed by running a graph over a data set.

#include "io/dataset.h"
#include "ir/graph.h"
#include "jobs/progress.h"
#include "jobs/result.h"

#include <c10/core/Device.h>

#include <string>

namespace bitlens::analysis {

/// A task metric over a data set: {"top1", 0.912, 10000}.
struct MetricValue {
    std::string name;       ///< "top1" (fraction of samples whose arg-max is the label)
    double value = 0.0;
    std::int64_t samples = 0;
    bool higherIsBetter = true;  ///< false for perplexity
};

/// Top-1 accuracy of a classifier (first graph output = logits or probabilities [N, classes]).
/// BadInput when the data set has no labels or its samples do not fit the model's input.
Result<MetricValue> evaluateTop1(const ir::Graph& graph, const io::Dataset& data,
                                 c10::Device device = c10::Device(c10::kCPU),
                                 std::int64_t batchSize = 256,
                                 Progress& progress = Progress::none(),
                                 const CancelToken& cancel = CancelToken());

} // namespace bitlens::analysis
