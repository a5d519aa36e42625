#pragma once
// Private helpers of the histogram observers (percentile, entropy, MSE): a histogram whose range
// grows by powers of two as larger values arrive, re-binning onto a fixed grid, and the two
// threshold searches (TensorRT-style KL divergence, expected quantization MSE). Kept apart from
// observer.cpp so the searches can be read, and tested, without the observer plumbing.

#include "quant/quant_type.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace bitlens::quant::detail {

/// Counts of x over [-R, R] in 2K equal bins (K per side, bin K starts exactly at 0), with R
/// doubling whenever a batch exceeds it. Doubling merges pairs of bins whose edges coincide, so
/// growing the range loses resolution but never moves a count to a wrong bin (PyTorch's
/// HistogramObserver instead re-bins onto arbitrary new edges, spreading counts).
class GrowingHistogram {
public:
    /// `binsPerSide` is K; the resolution over [0, max |x|] is between K/2 and K bins.
    explicit GrowingHistogram(std::int64_t binsPerSide);

    /// Adds the values of `flat` (1-D float32, any device, finite), with max |x| = `absMax`.
    void add(const at::Tensor& flat, float absMax);

    /// Number of values added.
    double total() const { return m_total; }
    /// R: the half-width of the range; 0 while every value seen was 0.
    double range() const { return m_range; }
    /// 2K counts over [-R, R], ascending x. Empty while range() == 0.
    const std::vector<double>& counts() const { return m_counts; }
    /// K counts of |x| over [0, R]: the two sides folded onto each other.
    std::vector<double> absCounts() const;
    /// Number of exact zeros seen while range() == 0 (moved into bin K once a range exists).
    double pendingZeros() const { return m_pendingZeros; }

private:
    void growTo(float absMax);

    std::int64_t m_binsPerSide;
    double m_range = 0.0;
    double m_total = 0.0;
    double m_pendingZeros = 0.0;
    std::vector<double> m_counts;
};

/// Re-bins counts over [srcLo, srcHi] onto `dstBins` equal bins over [dstLo, dstHi], assuming a
/// uniform density inside each source bin. Source bins are first clipped to [dstLo, dstHi]: the
/// data lies inside that interval, so mass is never dropped at the ends.
std::vector<double> rebin(const std::vector<double>& src, double srcLo, double srcHi,
                          std::int64_t dstBins, double dstLo, double dstHi);

/// The value below which a fraction `q` (0..1) of the counts lie, interpolating linearly inside
/// the bin that crosses it; bins are clipped to [clipLo, clipHi] (the observed extent).
double histogramQuantile(const std::vector<double>& counts, double lo, double hi, double q,
                         double clipLo, double clipHi);

/// How |x| in [0, threshold] maps onto quantization levels in the KL search.
struct KlLevels {
    /// > 0: integer grid with this many levels over [0, threshold], merged TensorRT's way
    /// (i / levels consecutive bins per level, the remainder into the last level).
    std::int64_t uniform = 0;
    /// uniform == 0: level positions in [0, 1] (1 = threshold), ascending; each bin joins the
    /// level nearest its centre (code tables and float formats are not evenly spaced).
    std::vector<double> positions;

    /// Number of levels (the first candidate threshold is this many bins).
    std::int64_t count() const
    {
        return uniform > 0 ? uniform : static_cast<std::int64_t>(positions.size());
    }
};

/// Result of a threshold search: candidate (threshold, criterion) pairs and the best index.
struct ThresholdSearch {
    std::vector<std::pair<double, double>> candidates;
    std::size_t best = 0;
};

/// TensorRT's entropy calibration on a histogram of |x| (bins of width `binWidth` from 0), as
/// NVIDIA's pytorch-quantization and MXNet implement it: bin 0's count is set to bin 1's (the
/// ReLU zero spike); for every i from levels.count() to bins, P = the first i bins with the
/// mass beyond folded into bin i-1; Q = the first i bins *without* that mass, merged into the
/// levels and spread evenly over each level's bins where P is non-zero; both smoothed (empty
/// bins get 1e-4 counts, taken from the others, as MXNet does) and normalised; criterion
/// KL(P || Q). Building Q from P instead would make KL exactly 0 at i = levels (one bin per
/// level): the clipping penalty is the outlier mass that Q lacks. Threshold i * binWidth; ties
/// go to the larger threshold; a candidate whose first i bins are all empty is skipped.
ThresholdSearch klSearch(const std::vector<double>& absHist, double binWidth,
                         const KlLevels& levels);

/// Every real value representable after quantizing [lo, hi] to `t` (ascending): the integer
/// grid (k - zeroPoint) * scale with PyTorch's scale and zero point (symmetric when lo == -hi),
/// or the code table / float8 values scaled by absmax / maxValue.
std::vector<double> representableValues(double lo, double hi, bool symmetric,
                                        const QuantTypeTraits& t);

/// Expected squared error of rounding to the nearest of `grid` (ascending, clamping beyond its
/// ends) for data with histogram `counts` over [lo, hi], uniform inside each bin; the integral
/// over each bin is exact, so bins wider than a grid step are handled correctly.
double expectedSquaredError(const std::vector<double>& counts, double lo, double hi,
                            const std::vector<double>& grid);

} // namespace bitlens::quant::detail
