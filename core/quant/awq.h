#pragma once
// AWQ (Lin et al., "AWQ: Activation-aware Weight Quantization for LLM Compression and
// Acceleration", 2023): before a weight W [rows, cols] is rounded, each input channel j is
// scaled by s_j (W' = W diag(s), the layer then reads X diag(s)^-1, which a deployment folds
// into the op before it), so that the channels whose activations are large, and whose weights
// therefore matter most, lose less to rounding. s is searched on a grid, as the reference code
// (llm-awq / AutoAWQ auto_scale, duo scaling) does:
//   s(r) = clamp(mean|x_j|^r / (mean_w_j^(1 - r) + 1e-4), min 1e-4), then s /= sqrt(max s *
//   min s), for r = i / grid, i = 0 .. grid - 1, where mean|x_j| is over the calibration rows
//   and mean_w_j is the mean over the rows of |w| / (max |w| of its group + 1e-6);
//   the r whose rounded weight leaves the least layer-output error on the calibration data is
//   kept. Then, as auto_clip does, each group of each row of W' is clipped to +-(1 - i / grid)
//   of its max |w'| (i = 0 .. maxShrink * grid - 1) where that lowers the group's output error.
// The errors are the paper's objective ||Q(W diag(s)) (diag(s)^-1 X) - W X||^2 over the
// calibration rows, evaluated through the Hessian H = 2/N X^T X that GPTQ also uses:
// tr(D H D^T) / 2 for the whole layer (D = W - Q(W') diag(s)^-1), and d_g H'_gg d_g^T / 2 per
// group g for clipping (H' = diag(s)^-1 H diag(s)^-1, the Hessian of the scaled inputs).
// Differences from AutoAWQ, kept on purpose: the search runs per layer (its output, the paper's
// objective), where AutoAWQ shares one s over the layers reading the same input and measures a
// whole module's output (attention, MLP); the errors use every calibration row, where auto_clip
// samples 512 tokens. Rounding is BitLens's own min/max round-to-nearest (fakeQuantize).

#include "jobs/result.h"
#include "quant/quant_type.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace bitlens::quant {

struct AwqOptions {
    std::int64_t grid = 20;   ///< scale ratios r = i / grid, i < grid; clip shrinks 1 - i / grid
    bool clip = true;         ///< search a clipping range per group (auto_clip)
    double maxShrink = 0.5;   ///< clip candidates i < maxShrink * grid
};

struct AwqResult {
    at::Tensor scales;        ///< s [cols] float32: the layer reads X / s
    double ratio = 0.0;       ///< the r chosen
    at::Tensor clipMax;       ///< [rows, groups] the +-range each group was clipped to
                              ///< (undefined without clipping)
    at::Tensor weight;        ///< Q(clip(W diag(s))) [rows, cols] float32, on the grid of params
    QParams params;           ///< the scales and zero points of those codes
    double loss = 0.0;        ///< tr(D H D^T) / 2 of the result (original input scale)
    double lossRtn = 0.0;     ///< the same for round-to-nearest of W (s = 1, no clipping)
};

/// Runs AWQ on `weight` [rows, cols] with the layer's Hessian [cols, cols] and the mean |x| of
/// each input channel `xMean` [cols]. `granularity` is per-channel(0) or per-group(1, size).
/// Runtime error on mismatched shapes.
Result<AwqResult> awqQuantize(const at::Tensor& weight, const at::Tensor& hessian,
                              const at::Tensor& xMean, QuantType type, bool symmetric,
                              const Granularity& granularity, CodeRange range,
                              const AwqOptions& options);

} // namespace bitlens::quant
