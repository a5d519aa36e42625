#pragma once
// GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
// Transformers", 2022): a weight matrix W [rows, cols] is rounded one input column at a time,
// and each column's rounding error is spread over the columns not rounded yet through the
// inverse Hessian H^-1 of the layer's reconstruction loss ||W X - Q X||^2, H = 2/N X X^T over
// the N calibration rows of the layer input X. Followed step for step as the authors' reference
// code (gptq.py, fasterquant) runs it, so the same W, H and options give the same codes:
//   - dead inputs (H_ii = 0): H_ii = 1 and W[:, i] = 0;
//   - act-order: columns in order of falling H_ii;
//   - dampening: H += damp * mean(diag H) * I;
//   - H^-1 as the upper Cholesky factor of cholesky_inverse(cholesky(H));
//   - blocks of 128 columns: inside a block the error updates the block's own columns at once
//     (rank-1 per column), after it the rest of W (one matrix product);
//   - group scales: the reference's static_groups=True (from W, dead inputs zeroed, before any
//     update), always: a group stays a run of consecutive stored columns whatever the order.
//     (The reference's default recomputes a group's scales from the partly updated W at its
//     first column; that mode is not offered.)
// Rounding is BitLens's own (fakeQuantize with the group's qparams), so "RTN" and "GPTQ" differ
// only in the error feedback: with H = I they give the same codes.

#include "jobs/result.h"
#include "quant/quant_type.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace bitlens::quant {

struct GptqOptions {
    double damp = 0.01;          ///< fraction of mean(diag H) added to the diagonal
    bool actOrder = false;       ///< columns by falling H_ii
    std::int64_t blockSize = 128;
};

struct GptqResult {
    at::Tensor weight;           ///< [rows, cols] float32: dequantized, every value on the grid
    QParams params;              ///< the scales and zero points the codes use
    double loss = 0.0;           ///< the reference's error: sum of (w - q)^2 / (2 d^2)
    std::int64_t deadColumns = 0;  ///< inputs that were always 0 in the calibration data
};

/// Runs GPTQ on `weight` [rows, cols] with `hessian` [cols, cols] (float32). `granularity` is
/// per-channel(0) or per-group(1, size). Errors: a Hessian that is not positive definite after
/// dampening (Runtime, saying to raise damp=), a shape mismatch (Runtime).
Result<GptqResult> gptqQuantize(const at::Tensor& weight, const at::Tensor& hessian,
                                QuantType type, bool symmetric, const Granularity& granularity,
                                CodeRange range, const GptqOptions& options);

/// The layer output error that a rounded weight `q` leaves on the calibration data, from the
/// Hessian: tr((W - Q) H (W - Q)^T) / 2 = ||(W - Q) X||^2 / N. Used to show what GPTQ gained
/// over round-to-nearest on the same H.
double hessianError(const at::Tensor& weight, const at::Tensor& q, const at::Tensor& hessian);

/// H = 2/N X^T X, accumulated over batches of layer-input rows [n, cols] as the reference does
/// (H *= N / (N + n); N += n; H += (sqrt(2 / N) X)^T (sqrt(2 / N) X)), in float32.
class HessianAccumulator {
public:
    void add(const at::Tensor& rows);
    const at::Tensor& hessian() const { return m_h; }
    std::int64_t samples() const { return m_n; }

private:
    at::Tensor m_h;
    std::int64_t m_n = 0;
};

} // namespace bitlens::quant
