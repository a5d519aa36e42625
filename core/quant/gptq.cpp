#include "quant/gptq.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace bitlens::quant {

namespace {

/// Per-row qparams of a column slice [rows, n] (what one group's scale and zero point are).
QParams rowParams(const at::Tensor& slice, QuantType type, bool symmetric, CodeRange range)
{
    auto [lo, hi] = blockMinMax(slice, Granularity::perChannel(0));
    return chooseQParams(lo, hi, type, symmetric, Granularity::perChannel(0), range);
}

/// One column [rows] rounded with per-row qparams, dequantized.
at::Tensor roundColumn(const at::Tensor& column, const QParams& rows)
{
    return fakeQuantize(column.unsqueeze(1), rows).reshape({-1});
}

} // namespace

void HessianAccumulator::add(const at::Tensor& rows)
{
    const at::Tensor x = rows.detach().to(at::kCPU, at::kFloat).reshape({-1, rows.size(-1)});
    const std::int64_t n = x.size(0);
    if (n == 0)
        return;
    if (!m_h.defined())
        m_h = at::zeros({x.size(1), x.size(1)}, x.options());
    m_h.mul_(static_cast<double>(m_n) / static_cast<double>(m_n + n));
    m_n += n;
    const at::Tensor scaled = x * std::sqrt(2.0 / static_cast<double>(m_n));
    m_h.add_(scaled.t().matmul(scaled));
}

double hessianError(const at::Tensor& weight, const at::Tensor& q, const at::Tensor& hessian)
{
    const at::Tensor d = (weight.to(at::kDouble) - q.to(at::kDouble));
    return (d.matmul(hessian.to(at::kDouble)) * d).sum().item<double>() / 2.0;
}

Result<GptqResult> gptqQuantize(const at::Tensor& weight, const at::Tensor& hessian,
                                QuantType type, bool symmetric, const Granularity& granularity,
                                CodeRange range, const GptqOptions& options)
{
    if (weight.dim() != 2 || hessian.dim() != 2 || hessian.size(0) != weight.size(1) ||
        hessian.size(1) != weight.size(1))
        return Error::runtime("GPTQ: a Hessian of shape [" + std::to_string(hessian.size(0)) +
                              ", " + std::to_string(hessian.size(1)) + "] does not fit a weight " +
                              "with " + std::to_string(weight.size(1)) + " inputs");
    const bool grouped = granularity.kind == Granularity::Kind::PerGroup;
    const std::int64_t rows = weight.size(0);
    const std::int64_t cols = weight.size(1);
    const std::int64_t groupSize = grouped ? granularity.groupSize : cols;
    // Group scales are always static (from W before any update): a group is then a run of
    // stored columns with fixed qparams whatever the column order.
    const bool staticGroups = grouped;

    at::Tensor W = weight.detach().to(at::kCPU, at::kFloat).clone();
    at::Tensor H = hessian.detach().to(at::kCPU, at::kFloat).clone();
    GptqResult out;

    // Whole-row (per-channel) scales: from the weight as given (the reference finds them
    // before it looks at the Hessian).
    const std::int64_t groups = grouped ? (cols + groupSize - 1) / groupSize : 1;
    std::vector<QParams> groupParams(static_cast<std::size_t>(groups));
    if (!grouped)
        groupParams[0] = rowParams(W, type, symmetric, range);

    // Inputs that never fired: nothing to reconstruct, and H would be singular.
    const at::Tensor dead = H.diagonal() == 0;
    out.deadColumns = dead.sum().item<std::int64_t>();
    H.diagonal().masked_fill_(dead, 1.0);
    W.masked_fill_(dead.unsqueeze(0), 0.0);

    // Static groups: from W with the dead inputs zeroed, before any update.
    if (staticGroups)
        for (std::int64_t g = 0; g < groups; ++g)
            groupParams[static_cast<std::size_t>(g)] =
                rowParams(W.slice(1, g * groupSize, std::min(cols, (g + 1) * groupSize)), type,
                          symmetric, range);

    at::Tensor perm;
    std::vector<std::int64_t> order(static_cast<std::size_t>(cols));
    for (std::int64_t i = 0; i < cols; ++i)
        order[static_cast<std::size_t>(i)] = i;
    if (options.actOrder) {
        perm = at::argsort(H.diagonal(), /*stable=*/false, /*dim=*/0, /*descending=*/true);
        W = W.index_select(1, perm);
        H = H.index_select(0, perm).index_select(1, perm);
        const at::Tensor p = perm.to(at::kLong).contiguous();
        std::copy(p.data_ptr<std::int64_t>(), p.data_ptr<std::int64_t>() + cols, order.begin());
    }

    const at::Tensor damp = H.diagonal().mean() * options.damp;
    H.diagonal().add_(damp);
    auto [factor, info] = at::linalg_cholesky_ex(H);
    if (info.item<std::int64_t>() != 0)
        return Error::runtime("GPTQ: the Hessian is not positive definite even after dampening "
                              "by " + std::to_string(options.damp) +
                              " of its mean diagonal (raise damp=, or give more calibration "
                              "data)");
    at::Tensor Hinv = at::cholesky_inverse(factor);
    auto [upper, info2] = at::linalg_cholesky_ex(Hinv, /*upper=*/true);
    if (info2.item<std::int64_t>() != 0)
        return Error::runtime("GPTQ: the inverse Hessian lost positive definiteness (raise "
                              "damp=)");
    Hinv = upper;

    at::Tensor Q = at::zeros_like(W);
    at::Tensor losses = at::zeros_like(W);
    QParams current = groupParams[0];
    for (std::int64_t i1 = 0; i1 < cols; i1 += options.blockSize) {
        const std::int64_t i2 = std::min(i1 + options.blockSize, cols);
        const std::int64_t count = i2 - i1;
        at::Tensor W1 = W.slice(1, i1, i2).clone();
        at::Tensor Q1 = at::zeros_like(W1);
        at::Tensor Err1 = at::zeros_like(W1);
        at::Tensor Losses1 = at::zeros_like(W1);
        const at::Tensor Hinv1 = Hinv.slice(0, i1, i2).slice(1, i1, i2);
        for (std::int64_t i = 0; i < count; ++i) {
            const at::Tensor w = W1.select(1, i);
            const at::Tensor d = Hinv1.select(0, i).select(0, i);
            if (grouped) {
                if (!staticGroups) {
                    if ((i1 + i) % groupSize == 0) {
                        // The reference reads the outer W here: this block's earlier updates
                        // are in W1 only.
                        const std::int64_t g = (i1 + i) / groupSize;
                        current = rowParams(W.slice(1, i1 + i, std::min(cols, i1 + i + groupSize)),
                                            type, symmetric, range);
                        groupParams[static_cast<std::size_t>(g)] = current;
                    }
                } else {
                    current = groupParams[static_cast<std::size_t>(
                        order[static_cast<std::size_t>(i1 + i)] / groupSize)];
                }
            }
            const at::Tensor q = roundColumn(w, current);
            Q1.select(1, i).copy_(q);
            Losses1.select(1, i).copy_((w - q).pow(2) / d.pow(2));
            const at::Tensor err1 = (w - q) / d;
            W1.slice(1, i).sub_(err1.unsqueeze(1).matmul(Hinv1.select(0, i).slice(0, i).unsqueeze(0)));
            Err1.select(1, i).copy_(err1);
        }
        Q.slice(1, i1, i2).copy_(Q1);
        losses.slice(1, i1, i2).copy_(Losses1 / 2);
        if (i2 < cols)
            W.slice(1, i2).sub_(Err1.matmul(Hinv.slice(0, i1, i2).slice(1, i2)));
    }
    if (options.actOrder)
        Q = Q.index_select(1, at::argsort(perm));
    out.loss = losses.sum().item<double>();
    out.weight = Q.contiguous();

    // The qparams as stored: per channel, or [rows, groups] per group.
    out.params = groupParams[0];
    if (grouped) {
        std::vector<at::Tensor> scales;
        std::vector<at::Tensor> zeros;
        for (const auto& p : groupParams) {
            scales.push_back(p.scale.reshape({rows, 1}));
            zeros.push_back(p.zeroPoint.reshape({rows, 1}));
        }
        out.params.granularity = granularity;
        out.params.scale = at::cat(scales, 1).contiguous();
        out.params.zeroPoint = at::cat(zeros, 1).contiguous();
    }
    return out;
}

} // namespace bitlens::quant
