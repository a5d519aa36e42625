#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>

namespace bitlens::train {

Adam::Adam(std::vector<at::Tensor> params, double lr, double beta1, double beta2, double eps)
    : m_params(std::move(params)), m_lr(lr), m_beta1(beta1), m_beta2(beta2), m_eps(eps)
{
    for (const auto& p : m_params) {
        m_m.push_back(at::zeros_like(p));
        m_v.push_back(at::zeros_like(p));
    }
}

void Adam::step()
{
    c10::NoGradGuard noGrad;
    ++m_step;
    const double correction1 = 1.0 - std::pow(m_beta1, static_cast<double>(m_step));
    const double correction2 = 1.0 - std::pow(m_beta2, static_cast<double>(m_step));
    const double stepSize = m_lr / correction1;
    for (std::size_t i = 0; i < m_params.size(); ++i) {
        const at::Tensor grad = m_params[i].grad();
        if (!grad.defined())
            continue;
        m_m[i].mul_(m_beta1).add_(grad, 1.0 - m_beta1);
        m_v[i].mul_(m_beta2).addcmul_(grad, grad, 1.0 - m_beta2);
        const at::Tensor denom = (m_v[i] / correction2).sqrt_().add_(m_eps);
        m_params[i].addcdiv_(m_m[i], denom, -stepSize);
    }
}

void Adam::zeroGrad()
{
    for (auto& p : m_params) {
        at::Tensor grad = p.mutable_grad();
        if (grad.defined())
            grad.zero_();
    }
}

Sgd::Sgd(std::vector<at::Tensor> params, double lr, double momentum)
    : m_params(std::move(params)), m_buf(m_params.size()), m_lr(lr), m_momentum(momentum)
{
}

void Sgd::step()
{
    c10::NoGradGuard noGrad;
    for (std::size_t i = 0; i < m_params.size(); ++i) {
        const at::Tensor grad = m_params[i].grad();
        if (!grad.defined())
            continue;
        if (m_momentum == 0.0) {
            m_params[i].add_(grad, -m_lr);
            continue;
        }
        if (!m_buf[i].defined())
            m_buf[i] = grad.clone();
        else
            m_buf[i].mul_(m_momentum).add_(grad);
        m_params[i].add_(m_buf[i], -m_lr);
    }
}

void Sgd::zeroGrad()
{
    for (auto& p : m_params) {
        at::Tensor grad = p.mutable_grad();
        if (grad.defined())
            grad.zero_();
    }
}

double clipGradNorm(const std::vector<at::Tensor>& params, double maxNorm)
{
    c10::NoGradGuard noGrad;
    at::Tensor total = at::zeros({}, at::kDouble);
    for (const auto& p : params)
        if (p.grad().defined())
            total = total + p.grad().to(at::kDouble).pow(2).sum();
    const double norm = std::sqrt(total.item<double>());
    if (std::isfinite(norm) && norm > maxNorm)
        for (const auto& p : params)
            if (p.grad().defined())
                p.mutable_grad().mul_(maxNorm / (norm + 1e-6));
    return norm;
}

} // namespace bitlens::train
