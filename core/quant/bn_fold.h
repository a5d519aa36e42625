#pragma once
// Folding BatchNorm into the preceding convolution or linear layer, as static quantization
// (and deployment) does: the BN disappears and its affine transform moves into the weights.

#include "ir/graph.h"

#include <string>
#include <vector>

namespace bitlens::quant {

/// Returns a copy of `graph` where every BatchNormalization whose input comes only from a Conv
/// (or a Gemm with transB = 1) is folded into it:
///   w' = w * gamma / sqrt(var + eps)   (per output channel)
///   b' = (b - mean) * gamma / sqrt(var + eps) + beta
/// The folded layer takes over the BN's output value name, so later nodes are unchanged.
/// `folded` receives "conv<-bn" pairs. Non-foldable BNs are kept.
ir::Graph foldBatchNorm(const ir::Graph& graph, std::vector<std::string>* folded = nullptr);

} // namespace bitlens::quant
