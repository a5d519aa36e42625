#pragma once
// What a model does, read from its graph's metadata "task": "classification" (the default),
// "lm", "embedding" or "sequence". The task decides the metric (analysis/lm_metrics.h) and
// what a model summary reports (model/); it lives in ir because it is a property of the graph
// alone.

#include "ir/graph.h"

#include <string_view>

namespace bitlens::ir {

/// What a model does, which decides its metric.
enum class Task { Classification, LanguageModel, Embedding, Sequence };

/// The task named by graph.metadata["task"] ("lm", "embedding", "sequence"; anything else,
/// or none, is classification).
Task taskOf(const Graph& graph);
/// The metadata spelling of a task: "classification", "lm", "embedding", "sequence".
std::string_view taskName(Task task);
/// The metric reported for a task: "top1", "perplexity", "embedding_cosine", "output_agreement".
std::string_view metricNameOf(Task task);

} // namespace bitlens::ir
