#include "quant/awq.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace bitlens::quant {

namespace {

struct Rounded {
    at::Tensor weight;
    QParams params;
};

Rounded roundToNearest(const at::Tensor& w, QuantType type, bool symmetric,
                       const Granularity& g, CodeRange range)
{
    auto [lo, hi] = blockMinMax(w, g);
    Rounded r;
    r.params = chooseQParams(lo, hi, type, symmetric, g, range);
    r.weight = fakeQuantize(w, r.params);
    return r;
}

double layerError(const at::Tensor& w, const at::Tensor& q, const at::Tensor& h)
{
    const at::Tensor d = w.to(at::kDouble) - q.to(at::kDouble);
    return (d.matmul(h) * d).sum().item<double>() / 2.0;
}

} // namespace

Result<AwqResult> awqQuantize(const at::Tensor& weight, const at::Tensor& hessian,
                              const at::Tensor& xMean, QuantType type, bool symmetric,
                              const Granularity& granularity, CodeRange range,
                              const AwqOptions& options)
{
    if (weight.dim() != 2 || hessian.dim() != 2 || hessian.size(0) != weight.size(1) ||
        hessian.size(1) != weight.size(1) || xMean.numel() != weight.size(1))
        return Error::runtime("AWQ needs a weight [rows, cols], a Hessian [cols, cols] and a "
                              "mean |x| per input channel [cols]");
    const std::int64_t rows = weight.size(0);
    const std::int64_t cols = weight.size(1);
    const std::int64_t groupSize =
        granularity.kind == Granularity::Kind::PerGroup ? granularity.groupSize : cols;
    if (groupSize <= 0 || cols % groupSize != 0)
        return Error::runtime("AWQ needs groups that divide the row (" + std::to_string(cols) +
                              " inputs, group " + std::to_string(groupSize) + ")");
    const std::int64_t groups = cols / groupSize;
    const at::Tensor w = weight.to(at::kCPU, at::kFloat).contiguous();
    const at::Tensor h = hessian.to(at::kCPU, at::kDouble);
    const at::Tensor x = xMean.to(at::kCPU, at::kFloat).reshape({cols});

    AwqResult result;
    result.lossRtn =
        layerError(w, roundToNearest(w, type, symmetric, granularity, range).weight, h);

    // Duo scaling: the mean over rows of |w| relative to its group's max |w|.
    const at::Tensor wAbs = w.abs().reshape({rows, groups, groupSize});
    const at::Tensor wMean =
        (wAbs / (wAbs.amax(-1, true) + 1e-6)).reshape({rows, cols}).mean(0);

    double best = std::numeric_limits<double>::infinity();
    at::Tensor bestScales;
    for (std::int64_t i = 0; i < options.grid; ++i) {
        const double ratio = static_cast<double>(i) / static_cast<double>(options.grid);
        at::Tensor s = (x.pow(ratio) / (wMean.pow(1.0 - ratio) + 1e-4)).clamp_min(1e-4);
        s = s / (s.max() * s.min()).sqrt();
        const at::Tensor q =
            roundToNearest(w * s, type, symmetric, granularity, range).weight / s;
        const double loss = layerError(w, q, h);
        if (loss < best) {
            best = loss;
            bestScales = s;
            result.ratio = ratio;
        }
    }
    if (!bestScales.defined())
        return Error::runtime("AWQ found no finite layer error (NaN in the calibration inputs?)");
    result.scales = bestScales;
    at::Tensor scaled = w * bestScales;  // W diag(s)

    if (options.clip) {
        // H' = diag(s)^-1 H diag(s)^-1: the Hessian of the inputs the scaled layer reads.
        const at::Tensor inv = (1.0 / bestScales).to(at::kDouble);
        const at::Tensor hs = h * inv.unsqueeze(1) * inv.unsqueeze(0);
        const auto steps = static_cast<std::int64_t>(options.maxShrink *
                                                     static_cast<double>(options.grid));
        result.clipMax = at::empty({rows, groups}, at::kFloat);
        at::Tensor clipped = scaled.clone();
        for (std::int64_t g = 0; g < groups; ++g) {
            const at::Tensor wg = scaled.slice(1, g * groupSize, (g + 1) * groupSize);
            const at::Tensor hg = hs.slice(0, g * groupSize, (g + 1) * groupSize)
                                      .slice(1, g * groupSize, (g + 1) * groupSize);
            const at::Tensor orgMax = wg.abs().amax(1, true);  // [rows, 1]
            at::Tensor bestErr = at::full({rows}, std::numeric_limits<double>::infinity(),
                                          at::kDouble);
            at::Tensor bestMax = orgMax.clone();
            for (std::int64_t k = 0; k < std::max<std::int64_t>(steps, 1); ++k) {
                const at::Tensor mv =
                    orgMax * static_cast<float>(1.0 - static_cast<double>(k) /
                                                          static_cast<double>(options.grid));
                const at::Tensor cur = at::clamp(wg, -mv, mv);
                const at::Tensor q = roundToNearest(cur, type, symmetric,
                                                    Granularity::perChannel(0), range)
                                         .weight;
                const at::Tensor d = wg.to(at::kDouble) - q.to(at::kDouble);
                const at::Tensor err = (d.matmul(hg) * d).sum(1) / 2.0;
                const at::Tensor better = err < bestErr;
                bestErr = at::where(better, err, bestErr);
                bestMax = at::where(better.unsqueeze(1), mv, bestMax);
            }
            clipped.slice(1, g * groupSize, (g + 1) * groupSize)
                .copy_(at::clamp(wg, -bestMax, bestMax));
            result.clipMax.select(1, g).copy_(bestMax.squeeze(1));
        }
        scaled = clipped;
    }
    Rounded final = roundToNearest(scaled, type, symmetric, granularity, range);
    result.weight = final.weight;
    result.params = final.params;
    result.loss = layerError(w, final.weight / bestScales, h);
    return result;
}

} // namespace bitlens::quant
