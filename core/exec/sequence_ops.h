#pragma once
// The operators of sequence models (transformers, LLMs, RNNs), run with LibTorch ops under ONNX
// semantics: normalisations, indexing and shape ops, masks, rotary embeddings, LSTM and GRU.
// Internal to exec: the executor's runNode() dispatches these op kinds here.

#include "exec/executor.h"
#include "ir/graph.h"

#include <functional>
#include <vector>

namespace bitlens::exec {

/// True for the op kinds runSequenceOp() computes.
bool isSequenceOp(ir::OpKind op);

/// Computes one node of a sequence op kind; throws std::runtime_error naming the node on bad
/// shapes or attributes (the executor turns that into an Error).
std::vector<at::Tensor> runSequenceOp(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                                      const ExecOptions& options);

/// How a quantized LSTM / GRU rounds the state entering each recurrent product: called once
/// per step and direction with [B, H] (h, or r * h in a GRU without linear_before_reset).
using HiddenQuant = std::function<at::Tensor(const at::Tensor&)>;

/// Computes an LSTM or GRU node (ONNX semantics) whose recurrent products read
/// hiddenQuant(h) instead of h (the input X is quantized by the caller, before); with an empty
/// function it is exactly what runSequenceOp() computes. Throws as runSequenceOp() does.
std::vector<at::Tensor> runRnn(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                               const HiddenQuant& hiddenQuant);

} // namespace bitlens::exec
