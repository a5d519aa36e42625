#include "quant/observer_histogram.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace bitlens::quant::detail {

GrowingHistogram::GrowingHistogram(std::int64_t binsPerSide) : m_binsPerSide(binsPerSide) {}

void GrowingHistogram::add(const at::Tensor& flat, float absMax)
{
    const std::int64_t n = flat.numel();
    if (n == 0)
        return;
    m_total += static_cast<double>(n);
    const std::int64_t k = m_binsPerSide;
    if (absMax == 0.0f) {
        // All zeros: no range to bin them over yet, or they belong to the bin starting at 0.
        if (m_range == 0.0)
            m_pendingZeros += static_cast<double>(n);
        else
            m_counts[static_cast<std::size_t>(k)] += static_cast<double>(n);
        return;
    }
    growTo(absMax);

    // histc counts in float32, which stops counting at 2^24 in one bin (a post-ReLU batch of
    // 1000 x 32 x 28 x 28 has 12.5 M zeros): chunks of 2^24 values keep every count exact.
    constexpr std::int64_t kChunk = std::int64_t{1} << 24;
    at::Tensor sum;
    for (std::int64_t start = 0; start < n; start += kChunk) {
        const at::Tensor part = flat.slice(0, start, std::min(n, start + kChunk));
        const at::Tensor h = at::histc(part, 2 * k, -m_range, m_range).to(at::kDouble);
        sum = sum.defined() ? sum + h : h;
    }
    sum = sum.cpu().contiguous();
    const double* src = sum.data_ptr<double>();
    for (std::int64_t j = 0; j < 2 * k; ++j)
        m_counts[static_cast<std::size_t>(j)] += src[j];
}

void GrowingHistogram::growTo(float absMax)
{
    const std::int64_t k = m_binsPerSide;
    if (m_range == 0.0) {
        // The first batch with a non-zero value sets the range exactly, for full resolution.
        m_range = absMax;
        m_counts.assign(static_cast<std::size_t>(2 * k), 0.0);
        m_counts[static_cast<std::size_t>(k)] = m_pendingZeros;
        m_pendingZeros = 0.0;
        return;
    }
    if (static_cast<double>(absMax) <= m_range)
        return;
    // Doubling keeps the edges nested: new bin K + j is old bins K + 2j and K + 2j + 1. A factor
    // of K or more puts everything old into the two bins next to 0, so it is capped there.
    double range = m_range;
    std::int64_t factor = 1;
    while (range < static_cast<double>(absMax)) {
        range *= 2.0;
        factor = std::min(factor * 2, k);
    }
    // histc takes float32 edges; near FLT_MAX the last doubling would overflow to Inf, so the
    // edge stays at FLT_MAX and the nesting is off by less than one old bin there.
    range = std::min(range, static_cast<double>(std::numeric_limits<float>::max()));
    const auto half = static_cast<std::size_t>(k);
    const auto step = static_cast<std::size_t>(factor);
    std::vector<double> merged(2 * half, 0.0);
    for (std::size_t j = 0; j < half; ++j) {
        merged[half + j / step] += m_counts[half + j];
        merged[half - 1 - j / step] += m_counts[half - 1 - j];
    }
    m_counts = std::move(merged);
    m_range = range;
}

std::vector<double> GrowingHistogram::absCounts() const
{
    if (m_range == 0.0)
        return {};
    const auto k = static_cast<std::size_t>(m_binsPerSide);
    std::vector<double> out(k);
    for (std::size_t j = 0; j < k; ++j)
        out[j] = m_counts[k + j] + m_counts[k - 1 - j];
    return out;
}

std::vector<double> rebin(const std::vector<double>& src, double srcLo, double srcHi,
                          std::int64_t dstBins, double dstLo, double dstHi)
{
    std::vector<double> dst(static_cast<std::size_t>(dstBins), 0.0);
    if (src.empty() || dstBins <= 0)
        return dst;
    const double srcWidth = (srcHi - srcLo) / static_cast<double>(src.size());
    const double dstWidth = (dstHi - dstLo) / static_cast<double>(dstBins);
    for (std::size_t k = 0; k < src.size(); ++k) {
        const double c = src[k];
        if (c == 0.0)
            continue;
        const double binLo = srcLo + static_cast<double>(k) * srcWidth;
        const double a = std::max(binLo, dstLo);
        const double b = std::min(binLo + srcWidth, dstHi);
        if (!(b > a) || !(dstWidth > 0.0)) {
            // Only reachable through rounding at the ends: give the count to the nearer end.
            const bool nearLow = binLo + 0.5 * srcWidth < 0.5 * (dstLo + dstHi);
            dst[nearLow ? 0 : static_cast<std::size_t>(dstBins - 1)] += c;
            continue;
        }
        auto first = static_cast<std::int64_t>(std::floor((a - dstLo) / dstWidth));
        auto last = static_cast<std::int64_t>(std::floor((b - dstLo) / dstWidth));
        first = std::clamp<std::int64_t>(first, 0, dstBins - 1);
        last = std::clamp<std::int64_t>(last, 0, dstBins - 1);
        if (first == last) {
            dst[static_cast<std::size_t>(first)] += c;
            continue;
        }
        double given = 0.0;
        for (std::int64_t d = first; d <= last; ++d) {
            const double edgeLo = dstLo + static_cast<double>(d) * dstWidth;
            const double lo = d == first ? a : edgeLo;
            const double hi = d == last ? b : edgeLo + dstWidth;
            // The last share takes the remainder so the total is kept exactly.
            const double share = d == last ? c - given : c * std::max(hi - lo, 0.0) / (b - a);
            dst[static_cast<std::size_t>(d)] += share;
            given += share;
        }
    }
    return dst;
}

double histogramQuantile(const std::vector<double>& counts, double lo, double hi, double q,
                         double clipLo, double clipHi)
{
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    if (counts.empty() || total <= 0.0)
        return clipHi;
    const double width = (hi - lo) / static_cast<double>(counts.size());
    const double target = std::clamp(q, 0.0, 1.0) * total;
    double cumulative = 0.0;
    for (std::size_t k = 0; k < counts.size(); ++k) {
        const double c = counts[k];
        if (c <= 0.0)
            continue;
        if (cumulative + c >= target) {
            const double binLo = lo + static_cast<double>(k) * width;
            const double a = std::clamp(binLo, clipLo, clipHi);
            const double b = std::clamp(binLo + width, a, clipHi);
            const double fraction = std::clamp((target - cumulative) / c, 0.0, 1.0);
            return a + fraction * (b - a);
        }
        cumulative += c;
    }
    return clipHi;
}

namespace {

/// MXNet's _smooth_distribution: empty bins get `eps` counts, taken evenly from the non-empty
/// ones, so KL never divides by zero. eps shrinks when a non-empty bin holds less than it would
/// give away (MXNet asserts there; re-binned counts can be tiny fractions). False if all empty.
bool smooth(std::vector<double>& v, std::size_t n)
{
    std::size_t zeros = 0;
    double smallest = std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < n; ++j) {
        if (v[j] == 0.0)
            ++zeros;
        else
            smallest = std::min(smallest, v[j]);
    }
    if (zeros == n)
        return false;
    if (zeros == 0)
        return true;
    const auto nonZeros = static_cast<double>(n - zeros);
    const double eps = std::min(1e-4, 0.5 * smallest * nonZeros / static_cast<double>(zeros));
    const double take = eps * static_cast<double>(zeros) / nonZeros;
    for (std::size_t j = 0; j < n; ++j)
        v[j] = v[j] == 0.0 ? eps : v[j] - take;
    return true;
}

} // namespace

ThresholdSearch klSearch(const std::vector<double>& absHist, double binWidth,
                         const KlLevels& levels)
{
    ThresholdSearch out;
    const auto bins = static_cast<std::int64_t>(absHist.size());
    if (bins == 0)
        return out;
    // Bin 0 holds the exact zeros of a ReLU output (half of all values), which every grid
    // represents exactly; left as it is, that spike dominates the divergence and drags the
    // threshold down to where bin 0 is a level of its own. NVIDIA's pytorch-quantization
    // replaces its count by its neighbour's, and so do we.
    std::vector<double> hist = absHist;
    if (bins >= 2)
        hist[0] = hist[1];
    std::vector<double> suffix(static_cast<std::size_t>(bins) + 1, 0.0);
    for (std::int64_t j = bins - 1; j >= 0; --j)
        suffix[static_cast<std::size_t>(j)] =
            suffix[static_cast<std::size_t>(j) + 1] + hist[static_cast<std::size_t>(j)];
    const std::int64_t start = std::clamp<std::int64_t>(levels.count(), 1, bins);
    out.candidates.reserve(static_cast<std::size_t>(bins - start + 1));

    std::vector<double> p(static_cast<std::size_t>(bins));
    std::vector<double> q(static_cast<std::size_t>(bins));
    std::vector<std::int64_t> groupEnds;
    double best = std::numeric_limits<double>::infinity();
    for (std::int64_t i = start; i <= bins; ++i) {
        const auto n = static_cast<std::size_t>(i);
        std::copy(hist.begin(), hist.begin() + i, p.begin());
        p[n - 1] += suffix[n];

        groupEnds.clear();
        if (levels.uniform > 0) {
            // Bin j joins level floor(j * L / i), as np.digitize over linspace(0, i, L + 1) in
            // pytorch-quantization; MXNet's i / L bins per level with the remainder in the last
            // level gives that level up to twice the bins of the others.
            const std::int64_t groups = std::min(levels.uniform, i);
            for (std::int64_t g = 1; g < groups; ++g)
                groupEnds.push_back((g * i + groups - 1) / groups);  // first j with j*L/i >= g
            groupEnds.push_back(i);
        } else {
            const auto& pos = levels.positions;
            std::size_t level = 0;
            for (std::int64_t j = 0; j < i; ++j) {
                const double centre = (static_cast<double>(j) + 0.5) / static_cast<double>(i);
                std::size_t next = level;
                while (next + 1 < pos.size() && centre > 0.5 * (pos[next] + pos[next + 1]))
                    ++next;
                if (next != level && j > 0)
                    groupEnds.push_back(j);
                level = next;
            }
            groupEnds.push_back(i);
        }

        std::int64_t groupStart = 0;
        for (const std::int64_t groupEnd : groupEnds) {
            double mass = 0.0;
            std::int64_t nonEmpty = 0;
            for (std::int64_t j = groupStart; j < groupEnd; ++j) {
                mass += hist[static_cast<std::size_t>(j)];
                nonEmpty += p[static_cast<std::size_t>(j)] != 0.0 ? 1 : 0;
            }
            const double each = nonEmpty > 0 ? mass / static_cast<double>(nonEmpty) : 0.0;
            for (std::int64_t j = groupStart; j < groupEnd; ++j)
                q[static_cast<std::size_t>(j)] = p[static_cast<std::size_t>(j)] != 0.0 ? each : 0.0;
            groupStart = groupEnd;
        }
        if (!smooth(p, n) || !smooth(q, n))
            continue;
        double sumP = 0.0;
        double sumQ = 0.0;
        for (std::size_t j = 0; j < n; ++j) {
            sumP += p[j];
            sumQ += q[j];
        }
        double kl = 0.0;
        for (std::size_t j = 0; j < n; ++j) {
            const double pj = p[j] / sumP;
            kl += pj * std::log(pj / (q[j] / sumQ));
        }
        kl = std::max(kl, 0.0);  // >= 0 in exact arithmetic; rounding can leave -1e-17
        out.candidates.emplace_back(static_cast<double>(i) * binWidth, kl);
        if (kl <= best) {
            best = kl;
            out.best = out.candidates.size() - 1;
        }
    }
    return out;
}

namespace {

/// Every finite value of a float8 format, ascending, read off all 256 bit patterns.
std::vector<double> float8Values(at::ScalarType dtype)
{
    const at::Tensor bytes = at::arange(256, at::kInt).to(at::kByte);
    const at::Tensor values = bytes.view(dtype).to(at::kFloat).contiguous();
    const float* v = values.data_ptr<float>();
    std::vector<double> out;
    for (std::int64_t j = 0; j < values.numel(); ++j)
        if (std::isfinite(v[j]))
            out.push_back(v[j] == 0.0f ? 0.0 : static_cast<double>(v[j]));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

const std::vector<double>& floatFormatValues(QuantType type)
{
    static const std::vector<double> e4m3 = float8Values(at::ScalarType::Float8_e4m3fn);
    static const std::vector<double> e5m2 = float8Values(at::ScalarType::Float8_e5m2);
    return type == QuantType::FP8E5M2 ? e5m2 : e4m3;
}

} // namespace

std::vector<double> representableValues(double lo, double hi, bool symmetric,
                                        const QuantTypeTraits& t)
{
    const double absMax = std::max(-lo, hi);
    std::vector<double> out;
    switch (t.family) {
    case TypeFamily::Integer: {
        const auto qmin = static_cast<double>(t.qmin);
        const auto qmax = static_cast<double>(t.qmax);
        double scale = 0.0;
        double zeroPoint = 0.0;
        if (symmetric) {
            // PyTorch: scale = max|x| / ((qmax - qmin) / 2); unsigned types centre the zero
            // point (128 for uint8, (qmin + qmax) / 2 = 7 for uint4) so both signs keep half
            // the codes, as chooseQParams does.
            scale = absMax / ((qmax - qmin) / 2.0);
            if (!t.isSigned)
                zeroPoint = t.type == QuantType::UInt8
                                ? 128.0
                                : static_cast<double>((t.qmin + t.qmax) / 2);
        } else {
            scale = (hi - lo) / (qmax - qmin);
            zeroPoint = scale > 0.0 ? std::clamp(qmin - std::nearbyint(lo / scale), qmin, qmax)
                                    : 0.0;
        }
        if (!(scale > 0.0))
            return {0.0};
        out.reserve(static_cast<std::size_t>(t.qmax - t.qmin + 1));
        for (std::int64_t k = t.qmin; k <= t.qmax; ++k)
            out.push_back((static_cast<double>(k) - zeroPoint) * scale);
        return out;
    }
    case TypeFamily::CodeTable: {
        double maxCode = 0.0;
        for (const float c : t.codes)
            maxCode = std::max(maxCode, std::abs(static_cast<double>(c)));
        if (!(maxCode > 0.0))
            return {0.0};
        for (const float c : t.codes)
            out.push_back(static_cast<double>(c) / maxCode * absMax);
        std::sort(out.begin(), out.end());
        return out;
    }
    case TypeFamily::Float: {
        if (t.type != QuantType::FP8E4M3 && t.type != QuantType::FP8E5M2)
            return {lo, 0.0, hi};  // fp16 / bf16 have no scale; callers do not search them
        const double scale = absMax / static_cast<double>(t.maxValue);
        for (const double v : floatFormatValues(t.type))
            out.push_back(v * scale);
        return out;
    }
    }
    return {0.0};
}

double expectedSquaredError(const std::vector<double>& counts, double lo, double hi,
                            const std::vector<double>& grid)
{
    if (counts.empty() || grid.empty())
        return 0.0;
    const double width = (hi - lo) / static_cast<double>(counts.size());
    if (!(width > 0.0))
        return 0.0;
    auto cube = [](double v) { return v * v * v; };
    auto midpoint = [&grid](std::size_t k) { return 0.5 * (grid[k] + grid[k + 1]); };
    const std::size_t m = grid.size();
    double total = 0.0;
    double error = 0.0;
    std::size_t cell = 0;  // grid[cell] is the value the left edge of the bin rounds to
    for (std::size_t b = 0; b < counts.size(); ++b) {
        const double c = counts[b];
        if (c <= 0.0)
            continue;
        total += c;
        const double binLo = lo + static_cast<double>(b) * width;
        const double binHi = binLo + width;
        while (cell + 1 < m && midpoint(cell) <= binLo)
            ++cell;
        // Integrate (x - q(x))^2 over the bin piece by piece, one rounding cell at a time; the
        // outermost cells run to +-infinity, which is the clamping of out-of-range values.
        double integral = 0.0;
        double x0 = binLo;
        for (std::size_t k = cell;; ++k) {
            const double cellHi = k + 1 < m ? midpoint(k) : std::numeric_limits<double>::infinity();
            const double x1 = std::min(binHi, cellHi);
            integral += (cube(x1 - grid[k]) - cube(x0 - grid[k])) / 3.0;
            if (x1 >= binHi)
                break;
            x0 = x1;
        }
        error += c * integral / width;
    }
    return total > 0.0 ? error / total : 0.0;
}

} // namespace bitlens::quant::detail
