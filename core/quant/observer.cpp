// The five calibration observers. Min-max and moving-average keep two floats and update them
// as PyTorch's MinMaxObserver / MovingAverageMinMaxObserver do. Percentile, entropy and MSE keep
// a histogram of x with 4x the bins they search over (GrowingHistogram: the range doubles as
// larger values arrive, so counts are never smeared), and re-bin it onto exactly [0, max |x|]
// or [min, max] when asked to choose; quantiles come from the fine histogram directly.

#include "quant/observer.h"

#include "quant/observer_histogram.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace bitlens::quant {

namespace {

/// Narrowest clip range an observer returns: a tensor of zeros still gets a positive scale.
constexpr double kMinRange = std::numeric_limits<float>::epsilon();

const char* const kValidObservers =
    "minmax, moving-average[:c], percentile[:p], entropy[:bins], mse[:bins]";

/// Three significant digits, as the `why` sentences print numbers ("3.71", "0.0123", "1e-05").
std::string num(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

/// "99.99th", "1st", "2nd", "0.005th".
std::string ordinal(double p)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", p);
    std::string s = buf;
    if (p == std::floor(p)) {
        const auto n = static_cast<long long>(p);
        if (n % 100 < 11 || n % 100 > 13) {
            if (n % 10 == 1)
                return s + "st";
            if (n % 10 == 2)
                return s + "nd";
            if (n % 10 == 3)
                return s + "rd";
        }
    }
    return s + "th";
}

/// [lo, hi] made a valid clip range: it contains 0 (so 0 is exactly representable), is
/// symmetric when asked, and is never narrower than kMinRange. A zero-only asymmetric range
/// becomes [0, eps] so that a ReLU output keeps zero point qmin.
std::pair<float, float> validRange(double lo, double hi, bool symmetric)
{
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
    if (symmetric) {
        const double a = std::max({-lo, hi, kMinRange});
        return {static_cast<float>(-a), static_cast<float>(a)};
    }
    if (hi - lo < kMinRange) {
        if (lo == 0.0) {
            hi = kMinRange;
        } else if (hi == 0.0) {
            lo = -kMinRange;
        } else {
            lo = std::min(lo, -kMinRange / 2);
            hi = std::max(hi, kMinRange / 2);
        }
    }
    return {static_cast<float>(lo), static_cast<float>(hi)};
}

std::string rangeText(double lo, double hi)
{
    return "[" + num(lo) + ", " + num(hi) + "]";
}

/// One batch, flattened to float32 on its own device, with its extremes.
struct Batch {
    at::Tensor flat;  ///< undefined for an empty batch
    float min = 0.0f;
    float max = 0.0f;
};

/// Flattens `x` and finds its min and max in one pass; that pass also finds NaN (aminmax
/// propagates it) and Inf (an infinite extreme), so checking costs nothing extra.
Result<Batch> inspect(const at::Tensor& x)
{
    Batch b;
    try {
        if (!x.defined() || x.numel() == 0)
            return b;
        at::Tensor flat = x.detach().reshape({-1});
        if (flat.scalar_type() != at::kFloat)
            flat = flat.to(at::kFloat);
        const auto [mn, mx] = at::aminmax(flat);
        const at::Tensor extremes = at::stack({mn, mx}).cpu();  // one device sync, not two
        b.min = extremes[0].item<float>();
        b.max = extremes[1].item<float>();
        if (std::isnan(b.min) || std::isnan(b.max))
            return Error::badInput({}, "contains NaN");
        if (std::isinf(b.min) || std::isinf(b.max))
            return Error::badInput({}, "contains Inf");
        b.flat = std::move(flat);
        return b;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("observer failed: ") + e.what_without_backtrace());
    }
}

/// Running extremes and counts shared by every observer.
struct Seen {
    float min = std::numeric_limits<float>::infinity();
    float max = -std::numeric_limits<float>::infinity();
    std::int64_t values = 0;
    std::int64_t batches = 0;

    void add(const Batch& b)
    {
        min = std::min(min, b.min);
        max = std::max(max, b.max);
        values += b.flat.numel();
        ++batches;
    }
    bool any() const { return values > 0; }
    bool constant() const { return any() && min == max; }
    std::string batchText() const
    {
        return std::to_string(batches) + (batches == 1 ? " batch" : " batches");
    }
};

ClipChoice baseChoice(const std::string& method, const Seen& seen)
{
    ClipChoice c;
    c.method = method;
    c.observedMin = seen.any() ? seen.min : 0.0f;
    c.observedMax = seen.any() ? seen.max : 0.0f;
    return c;
}

/// The choice for an observer that saw nothing or only one value, which no statistic can
/// improve on: [min(c, 0), max(c, 0)], or the minimal range around 0.
ClipChoice degenerateChoice(const std::string& method, const Seen& seen, bool symmetric)
{
    ClipChoice c = baseChoice(method, seen);
    const double v = seen.any() ? seen.min : 0.0;
    std::tie(c.lo, c.hi) = validRange(v, v, symmetric);
    if (!seen.any())
        c.why = "No values observed; using the minimal range " + rangeText(c.lo, c.hi) + ".";
    else if (v == 0.0)
        c.why = "All " + std::to_string(seen.values) + " observed values are 0; using the minimal "
                "range " + rangeText(c.lo, c.hi) + ".";
    else
        c.why = "All " + std::to_string(seen.values) + " observed values equal " + num(v) +
                "; range " + rangeText(c.lo, c.hi) + ".";
    return c;
}

/// Sets the choice's clip range to [lo, hi], made valid (see validRange).
void setRange(ClipChoice& c, double lo, double hi, bool symmetric)
{
    std::tie(c.lo, c.hi) = validRange(lo, hi, symmetric);
}

class MinMaxObserver final : public Observer {
public:
    Result<void> observe(const at::Tensor& x) override
    {
        auto b = inspect(x);
        if (!b)
            return b.error();
        if (b->flat.defined())
            m_seen.add(*b);
        return {};
    }

    ClipChoice choose(QuantType, bool symmetric) const override
    {
        if (!m_seen.any() || m_seen.constant())
            return degenerateChoice(name(), m_seen, symmetric);
        ClipChoice c = baseChoice(name(), m_seen);
        setRange(c, m_seen.min, m_seen.max, symmetric);
        const std::string observed = "x in " + rangeText(m_seen.min, m_seen.max) + " over " +
                                     m_seen.batchText();
        c.why = symmetric ? "Max |x| = " + num(c.hi) + " (" + observed + ")."
                          : "Observed " + observed + "; clip range " + rangeText(c.lo, c.hi) + ".";
        return c;
    }

    std::string name() const override { return "minmax"; }

private:
    Seen m_seen;
};

class MovingAverageObserver final : public Observer {
public:
    explicit MovingAverageObserver(double averagingConstant) : m_c(averagingConstant) {}

    Result<void> observe(const at::Tensor& x) override
    {
        auto b = inspect(x);
        if (!b)
            return b.error();
        if (!b->flat.defined())
            return {};
        if (!m_seen.any()) {
            m_min = b->min;
            m_max = b->max;
        } else {
            // PyTorch's MovingAverageMinMaxObserver on float32 buffers: three float ops, each
            // rounded, with the constant rounded to float (as a Python scalar times a float
            // tensor is), so the result matches it bit for bit.
            const auto c = static_cast<float>(m_c);
            const float dMin = b->min - m_min;
            const float dMax = b->max - m_max;
            const float stepMin = c * dMin;
            const float stepMax = c * dMax;
            m_min = m_min + stepMin;
            m_max = m_max + stepMax;
        }
        m_seen.add(*b);
        return {};
    }

    ClipChoice choose(QuantType, bool symmetric) const override
    {
        if (!m_seen.any() || m_seen.constant())
            return degenerateChoice(name(), m_seen, symmetric);
        ClipChoice c = baseChoice(name(), m_seen);
        setRange(c, m_min, m_max, symmetric);
        c.why = "Moving average (c = " + num(m_c) + ") of batch min/max over " +
                m_seen.batchText() + " is " + rangeText(m_min, m_max) + " (x in " +
                rangeText(m_seen.min, m_seen.max) + "); clip range " + rangeText(c.lo, c.hi) +
                ".";
        return c;
    }

    std::string name() const override { return "moving-average"; }

private:
    double m_c;
    float m_min = 0.0f;
    float m_max = 0.0f;
    Seen m_seen;
};

/// Keeps a GrowingHistogram of x with 4 x `bins` bins per side, so that re-binning it onto the
/// `bins` bins the searches use (over exactly [0, max |x|] or [min, max]) moves no count by
/// more than half an output bin.
class HistogramObserverBase : public Observer {
public:
    explicit HistogramObserverBase(int bins)
        : m_bins(std::max(bins, 1)), m_hist(4 * std::int64_t{m_bins})
    {
    }

    Result<void> observe(const at::Tensor& x) override
    {
        auto b = inspect(x);
        if (!b)
            return b.error();
        if (!b->flat.defined())
            return {};
        try {
            m_hist.add(b->flat, std::max(-b->min, b->max));
        } catch (const c10::Error& e) {
            return Error::runtime(std::string("observer failed: ") + e.what_without_backtrace());
        }
        m_seen.add(*b);
        return {};
    }

protected:
    /// Lower and upper end of the histograms handed out: the observed extent widened to 0.
    double low() const { return std::min<double>(m_seen.min, 0.0); }
    double high() const { return std::max<double>(m_seen.max, 0.0); }
    double absMax() const { return std::max(-low(), high()); }

    /// `m_bins` counts of |x| over [0, absMax()].
    std::vector<double> absHistogram() const
    {
        return detail::rebin(m_hist.absCounts(), 0.0, m_hist.range(), m_bins, 0.0, absMax());
    }

    /// `m_bins` counts of x over [low(), high()].
    std::vector<double> signedHistogram() const
    {
        return detail::rebin(m_hist.counts(), -m_hist.range(), m_hist.range(), m_bins, low(),
                             high());
    }

    /// The choice's common fields, with the histogram of x the GUI draws under the clip points.
    ClipChoice start(const std::vector<double>& signedCounts) const
    {
        ClipChoice c = baseChoice(name(), m_seen);
        c.histogram.counts = signedCounts;
        c.histogram.edges.resize(signedCounts.size() + 1);
        const double width = (high() - low()) / static_cast<double>(signedCounts.size());
        for (std::size_t j = 0; j < c.histogram.edges.size(); ++j)
            c.histogram.edges[j] = low() + static_cast<double>(j) * width;
        c.histogram.edges.back() = high();
        return c;
    }

    /// Handles what needs no search: nothing or one value seen, or a type without a scale.
    std::optional<ClipChoice> trivialChoice(QuantType type, bool symmetric) const
    {
        if (!m_seen.any() || m_seen.constant())
            return degenerateChoice(name(), m_seen, symmetric);
        const QuantTypeTraits& t = traits(type);
        if (!t.needsScale) {
            // fp16 / bf16 are plain casts: there is no grid to fit a threshold to.
            ClipChoice c = start(signedHistogram());
            setRange(c, m_seen.min, m_seen.max, symmetric);
            c.why = std::string(t.name) + " is a plain cast without a scale: no clipping (x in " +
                    rangeText(m_seen.min, m_seen.max) + ").";
            return c;
        }
        return std::nullopt;
    }

    int m_bins;
    detail::GrowingHistogram m_hist;
    Seen m_seen;
};

class PercentileObserver final : public HistogramObserverBase {
public:
    PercentileObserver(double percentile, int bins)
        : HistogramObserverBase(bins), m_percentile(percentile)
    {
    }

    ClipChoice choose(QuantType, bool symmetric) const override
    {
        if (!m_seen.any() || m_seen.constant())
            return degenerateChoice(name(), m_seen, symmetric);
        ClipChoice c = start(signedHistogram());
        const double r = m_hist.range();
        if (symmetric) {
            const double t = detail::histogramQuantile(m_hist.absCounts(), 0.0, r,
                                                       m_percentile / 100.0, 0.0, absMax());
            setRange(c, -t, t, true);
            c.why = ordinal(m_percentile) + " percentile of |x| = " + num(t) + " (max " +
                    num(absMax()) + ").";
            return c;
        }
        // The share left out is split between the tails, as ONNX Runtime's percentile
        // calibrator does: percentile 99.99 keeps 99.99 % of the values in both modes.
        const double tail = (100.0 - m_percentile) / 200.0;
        const double lo = detail::histogramQuantile(m_hist.counts(), -r, r, tail, m_seen.min,
                                                    m_seen.max);
        const double hi = detail::histogramQuantile(m_hist.counts(), -r, r, 1.0 - tail,
                                                    m_seen.min, m_seen.max);
        setRange(c, lo, hi, false);
        c.why = ordinal(100.0 * tail) + " and " + ordinal(100.0 - 100.0 * tail) +
                " percentiles of x = " + num(lo) + " and " + num(hi) + " (x in " +
                rangeText(m_seen.min, m_seen.max) + "); clip range " + rangeText(c.lo, c.hi) +
                ".";
        return c;
    }

    std::string name() const override { return "percentile"; }

private:
    double m_percentile;
};

/// The non-negative levels of `t` as fractions of the clip threshold, for the KL search.
detail::KlLevels klLevels(const QuantTypeTraits& t, bool symmetric, bool oneSided)
{
    detail::KlLevels levels;
    if (t.family == TypeFamily::Integer) {
        const std::int64_t codes = t.qmax - t.qmin + 1;
        // |x| in [0, T] gets half the codes when both signs share the grid (TensorRT's 128 for
        // int8), all of them when an asymmetric range has only one sign (a ReLU output).
        levels.uniform = (!symmetric && oneSided) ? codes : codes / 2;
        return levels;
    }
    const std::vector<double> values = detail::representableValues(-1.0, 1.0, true, t);
    for (const double v : values)
        if (v >= 0.0)
            levels.positions.push_back(v);
    return levels;
}

class EntropyObserver final : public HistogramObserverBase {
public:
    using HistogramObserverBase::HistogramObserverBase;

    ClipChoice choose(QuantType type, bool symmetric) const override
    {
        if (auto c = trivialChoice(type, symmetric))
            return *c;
        const QuantTypeTraits& t = traits(type);
        ClipChoice c = start(signedHistogram());
        const bool oneSided = low() == 0.0 || high() == 0.0;
        const detail::KlLevels levels = klLevels(t, symmetric, oneSided);
        const double width = absMax() / m_bins;
        detail::ThresholdSearch search = detail::klSearch(absHistogram(), width, levels);
        if (search.candidates.empty())  // only with fewer bins than levels: nothing to clip
            search.candidates.emplace_back(absMax(), 0.0);
        const auto [threshold, kl] = search.candidates[search.best];
        if (symmetric)
            setRange(c, -threshold, threshold, true);
        else
            setRange(c, std::max(low(), -threshold), std::min(high(), threshold), false);
        c.candidates = std::move(search.candidates);
        c.why = "KL divergence " + num(kl) + " is smallest at |x| = " + num(threshold) + " of " +
                std::to_string(m_bins) + " bins up to " + num(absMax()) + " (" +
                std::to_string(levels.count()) + " " + std::string(t.name) + " levels).";
        return c;
    }

    std::string name() const override { return "entropy"; }
};

class MseObserver final : public HistogramObserverBase {
public:
    using HistogramObserverBase::HistogramObserverBase;

    ClipChoice choose(QuantType type, bool symmetric) const override
    {
        if (auto c = trivialChoice(type, symmetric))
            return *c;
        const QuantTypeTraits& t = traits(type);
        const std::vector<double> hist = signedHistogram();
        ClipChoice c = start(hist);
        // Code tables and float8 are absmax-scaled: one threshold fixes the grid. An asymmetric
        // integer grid has two ends; scaling both by the same factor keeps the search 1-D (and
        // exact for a ReLU output, whose lower end is 0).
        const bool oneThreshold = symmetric || t.family != TypeFamily::Integer;
        const double lo0 = low();
        const double hi0 = high();
        double best = std::numeric_limits<double>::infinity();
        double bestLo = lo0;
        double bestHi = hi0;
        c.candidates.reserve(static_cast<std::size_t>(m_bins));
        for (int i = 1; i <= m_bins; ++i) {
            const double f = static_cast<double>(i) / m_bins;
            const double lo = oneThreshold ? -f * absMax() : f * lo0;
            const double hi = oneThreshold ? f * absMax() : f * hi0;
            const std::vector<double> grid = detail::representableValues(lo, hi, oneThreshold, t);
            const double mse = detail::expectedSquaredError(hist, lo0, hi0, grid);
            c.candidates.emplace_back(f * absMax(), mse);
            if (mse <= best) {  // ties go to the wider range, which clips less
                best = mse;
                bestLo = lo;
                bestHi = hi;
            }
        }
        if (symmetric)
            setRange(c, bestLo, bestHi, true);
        else
            setRange(c, std::max(lo0, bestLo), std::min(hi0, bestHi), false);
        const double threshold = std::max(-bestLo, bestHi);
        c.why = "Expected " + std::string(t.name) + " MSE " + num(best) +
                " is smallest when clipping at |x| = " + num(threshold) + " (" +
                num(c.candidates.back().second) + " without clipping, at " + num(absMax()) +
                ").";
        return c;
    }

    std::string name() const override { return "mse"; }
};

/// A number that fills all of `text`, or nullopt.
std::optional<double> parseNumber(const std::string& text)
{
    double v = 0.0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || ptr != end || !std::isfinite(v))
        return std::nullopt;
    return v;
}

Error badSpec(const std::string& spec, const std::string& reason)
{
    return Error::usage("bad observer '" + spec + "': " + reason + " (observers: " +
                        kValidObservers + ")");
}

} // namespace

std::unique_ptr<Observer> makeMinMaxObserver()
{
    return std::make_unique<MinMaxObserver>();
}

std::unique_ptr<Observer> makeMovingAverageObserver(double averagingConstant)
{
    return std::make_unique<MovingAverageObserver>(averagingConstant);
}

std::unique_ptr<Observer> makePercentileObserver(double percentile, int bins)
{
    return std::make_unique<PercentileObserver>(percentile, bins);
}

std::unique_ptr<Observer> makeEntropyObserver(int bins)
{
    return std::make_unique<EntropyObserver>(bins);
}

std::unique_ptr<Observer> makeMseObserver(int bins)
{
    return std::make_unique<MseObserver>(bins);
}

Result<ObserverFactory> observerFactory(const std::string& spec)
{
    const std::size_t colon = spec.find(':');
    const std::string kind = spec.substr(0, colon);
    const bool hasArg = colon != std::string::npos;
    const std::string arg = hasArg ? spec.substr(colon + 1) : std::string();
    const std::optional<double> value = hasArg ? parseNumber(arg) : std::nullopt;

    // Histogram sizes: at least 16 bins to search over, at most 65536 (8 MB of counts).
    auto binsOf = [&](int& bins) -> std::optional<Error> {
        if (!hasArg)
            return std::nullopt;
        if (!value || *value != std::floor(*value) || *value < 16 || *value > 65536)
            return badSpec(spec, "bins must be an integer from 16 to 65536");
        bins = static_cast<int>(*value);
        return std::nullopt;
    };

    if (kind == "minmax") {
        if (hasArg)
            return badSpec(spec, "minmax takes no parameter");
        return ObserverFactory([] { return makeMinMaxObserver(); });
    }
    if (kind == "moving-average") {
        double c = 0.01;
        if (hasArg) {
            if (!value || !(*value > 0.0 && *value <= 1.0))
                return badSpec(spec, "the averaging constant c must be a number in (0, 1]");
            c = *value;
        }
        return ObserverFactory([c] { return makeMovingAverageObserver(c); });
    }
    if (kind == "percentile") {
        double p = 99.99;
        if (hasArg) {
            if (!value || !(*value > 0.0 && *value <= 100.0))
                return badSpec(spec, "the percentile p must be a number in (0, 100]");
            p = *value;
        }
        return ObserverFactory([p] { return makePercentileObserver(p); });
    }
    if (kind == "entropy" || kind == "mse") {
        int bins = 2048;
        if (auto e = binsOf(bins))
            return *e;
        if (kind == "entropy")
            return ObserverFactory([bins] { return makeEntropyObserver(bins); });
        return ObserverFactory([bins] { return makeMseObserver(bins); });
    }
    return Error::usage("unknown observer '" + spec + "' (observers: " + kValidObservers + ")");
}

} // namespace bitlens::quant
