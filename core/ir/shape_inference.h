#pragma once
// Shape inference from the graph alone: every value's shape for one sample (batch 1), derived
// op by op from the input shapes, the initializers and the attributes. Nothing runs, so the io
// writers (which sit below exec) can use it. exec::traceShapes (exec/executor.h) is the other
// way: it runs the graph on zeros of the same sample shapes, which also proves the graph runs.
//
// Small int64 tensors that hold shapes (initializers, Shape outputs and what Gather, Slice,
// Concat, Unsqueeze, Squeeze, Cast and integer Add / Sub / Mul make of them) are followed by
// value, so Reshape, Expand, Range and friends fed by a computed shape are inferred too. A value
// whose shape cannot be derived (an op this file does not know, a shape input that depends on
// data) is left out of the result, and so is everything computed from it.

#include "ir/graph.h"
#include "jobs/result.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bitlens::ir {

/// Shapes by value name.
using ShapeMap = std::map<std::string, std::vector<std::int64_t>>;

/// The input shapes of one sample: each graph input's declared shape (or `inputShapes[i]` where
/// given and not empty) with dynamic dimensions resolved: the batch (dimension 0) becomes 1, and
/// so does every other dynamic dimension of a sequence model (metadata "task" other than
/// classification: one token or step). A dynamic dimension other than the batch of a
/// classification model is Unsupported ("give its size to infer shapes").
Result<std::vector<std::vector<std::int64_t>>>
sampleInputShapes(const Graph& graph,
                  const std::vector<std::vector<std::int64_t>>& inputShapes = {});

/// Shape of every value that can be derived (graph inputs and initializers included), for the
/// sample shapes of sampleInputShapes. Errors: those of sampleInputShapes only; an op whose
/// shape cannot be derived leaves its outputs out instead.
Result<ShapeMap> inferShapes(const Graph& graph,
                             const std::vector<std::vector<std::int64_t>>& inputShapes = {});

/// Refuses, before anything runs or is allocated, a graph whose attributes are malformed:
/// BadInput naming `path`, the node and the attribute. Checked on every node: Conv,
/// ConvTranspose, MaxPool and AveragePool windows (kernel_shape, strides, dilations at least 1
/// and at most 2^24; pads and output_padding not negative; pool pads smaller than the window;
/// group at least 1). Checked where shape inference reaches (the sample shapes of
/// sampleInputShapes): attribute lists of the wrong length for the input, a Flatten axis
/// outside the input's rank, and attributes or scales implying a value of more than 2^40
/// elements for one sample.
Result<void> checkShapes(const Graph& graph, const std::string& path);

} // namespace bitlens::ir
