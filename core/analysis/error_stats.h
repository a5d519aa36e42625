#pragma once
// How far a quantized tensor is from its float reference.

#include <ATen/core/Tensor.h>

#include <vector>

namespace bitlens::analysis {

/// Error of `test` against `reference` (same shape), over all elements.
struct ErrorStats {
    double sqnrDb = 0.0;    ///< 10 log10(sum ref^2 / sum (ref - test)^2); +inf when equal
    double mse = 0.0;       ///< mean (ref - test)^2
    double cosine = 1.0;    ///< cosine similarity of the flattened tensors (1 when both zero)
    double maxAbsErr = 0.0; ///< max |ref - test|
};

/// Computes ErrorStats in float64.
ErrorStats compareTensors(const at::Tensor& reference, const at::Tensor& test);

/// Counts per bin over [lo, hi] (edges.size() == counts.size() + 1).
struct HistogramData {
    std::vector<double> edges;
    std::vector<double> counts;
};

/// Histogram of `x` with `bins` equal bins over [min, max] of x (or [lo, hi] when lo < hi).
HistogramData histogram(const at::Tensor& x, int bins, double lo = 0.0, double hi = 0.0);

} // namespace bitlens::analysis
