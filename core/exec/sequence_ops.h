#pragma once
// The operators of sequence models (transformers, LLMs, RNNs), run with LibTorch ops under ONNX
// semantics: normalisations, indexing and shape ops, masks, rotary embeddings, LSTM and GRU.
// Internal to exec: the executor's runNode() dispatches these op kinds here.

#include "exec/executor.h"
#include "ir/graph.h"

#include <vector>

namespace bitlens::exec {

/// True for the op kinds runSequenceOp() computes.
bool isSequenceOp(ir::OpKind op);

/// Computes one node of a sequence op kind; throws std::runtime_error naming the node on bad
/// shapes or attributes (the executor turns that into an Error).
std::vector<at::Tensor> runSequenceOp(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                                      const ExecOptions& options);

} // namespace bitlens::exec
