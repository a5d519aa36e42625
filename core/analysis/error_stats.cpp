#include "analysis/error_stats.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace bitlens::analysis {

ErrorStats compareTensors(const at::Tensor& reference, const at::Tensor& test)
{
    const at::Tensor ref = reference.detach().to(at::kCPU, at::kDouble).reshape({-1});
    const at::Tensor got = test.detach().to(at::kCPU, at::kDouble).reshape({-1});
    const at::Tensor diff = ref - got;
    ErrorStats s;
    const double signal = ref.pow(2).sum().item<double>();
    const double noise = diff.pow(2).sum().item<double>();
    const auto n = static_cast<double>(std::max<std::int64_t>(ref.numel(), 1));
    s.mse = noise / n;
    s.maxAbsErr = ref.numel() ? diff.abs().max().item<double>() : 0.0;
    if (noise == 0.0)
        s.sqnrDb = std::numeric_limits<double>::infinity();
    else if (signal == 0.0)
        s.sqnrDb = -std::numeric_limits<double>::infinity();
    else
        s.sqnrDb = 10.0 * std::log10(signal / noise);
    const double norms = std::sqrt(signal) * std::sqrt(got.pow(2).sum().item<double>());
    s.cosine = norms > 0.0 ? ref.dot(got).item<double>() / norms : (signal == 0.0 ? 1.0 : 0.0);
    return s;
}

HistogramData histogram(const at::Tensor& x, int bins, double lo, double hi)
{
    const at::Tensor v = x.detach().to(at::kCPU, at::kFloat).reshape({-1});
    if (!(lo < hi)) {
        if (v.numel() == 0) {
            lo = 0.0;
            hi = 1.0;
        } else {
            lo = v.min().item<double>();
            hi = v.max().item<double>();
        }
        if (lo == hi) {
            lo -= 0.5;
            hi += 0.5;
        }
    }
    HistogramData h;
    const at::Tensor counts = at::histc(v, bins, lo, hi);
    h.counts.assign(counts.data_ptr<float>(), counts.data_ptr<float>() + bins);
    for (int i = 0; i <= bins; ++i)
        h.edges.push_back(lo + (hi - lo) * i / bins);
    return h;
}

} // namespace bitlens::analysis
