#pragma once
// Observers collect statistics of a tensor (activations over calibration batches) and then
// choose a clip range. Each one reports what it chose and why, with the data behind the
// choice, so the GUI can draw it: the histogram, the candidate clip points and their error.

#include "quant/quant_type.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace bitlens::quant {

/// Histogram of observed values: counts per bin, edges.size() == counts.size() + 1.
struct Histogram {
    std::vector<double> edges;
    std::vector<double> counts;
};

/// The clip range an observer chose, and the evidence for it.
struct ClipChoice {
    float lo = 0.0f;            ///< lower clip point (== -hi for symmetric choices)
    float hi = 0.0f;            ///< upper clip point
    float observedMin = 0.0f;   ///< smallest value seen
    float observedMax = 0.0f;   ///< largest value seen
    std::string method;         ///< "minmax", "moving-average", "percentile", "entropy", "mse"
    std::string why;            ///< one sentence: "99.99th percentile of |x| = 3.71"
    Histogram histogram;        ///< of the observed values (empty for min-max observers)
    /// Candidate clip thresholds and the criterion at each (KL divergence or MSE), so the GUI
    /// can plot the search; empty for methods without a search.
    std::vector<std::pair<double, double>> candidates;
};

/// Collects statistics, then chooses a per-tensor clip range for a target type.
class Observer {
public:
    virtual ~Observer() = default;
    /// Adds one batch. NaN or Inf in `x` is rejected (BadInput naming nothing: the caller adds
    /// the batch and layer).
    virtual Result<void> observe(const at::Tensor& x) = 0;
    /// Chooses the clip range for quantizing to `type`; an observer that saw nothing, or only
    /// constant values, still returns a valid (non-empty) range.
    virtual ClipChoice choose(QuantType type, bool symmetric) const = 0;
    /// "minmax", "moving-average", ...
    virtual std::string name() const = 0;
};

/// Makes fresh observers; configs hold factories, not instances.
using ObserverFactory = std::function<std::unique_ptr<Observer>()>;

/// Observer options as written in a scheme: "minmax", "moving-average:0.01",
/// "percentile:99.99", "entropy" (KL, 2048 bins), "mse".
Result<ObserverFactory> observerFactory(const std::string& spec);

std::unique_ptr<Observer> makeMinMaxObserver();
std::unique_ptr<Observer> makeMovingAverageObserver(double averagingConstant = 0.01);
std::unique_ptr<Observer> makePercentileObserver(double percentile = 99.99, int bins = 2048);
std::unique_ptr<Observer> makeEntropyObserver(int bins = 2048);
std::unique_ptr<Observer> makeMseObserver(int bins = 2048);

} // namespace bitlens::quant
