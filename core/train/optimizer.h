#pragma once
// Optimizers over LibTorch tensors for training through the executor (demo zoo, QAT).

#include <ATen/core/Tensor.h>

#include <vector>

namespace bitlens::train {

/// Adam (Kingma & Ba), the variant torch.optim.Adam implements with weight_decay = 0.
class Adam {
public:
    /// `params` must be leaf tensors with requires_grad set.
    explicit Adam(std::vector<at::Tensor> params, double lr = 1e-3, double beta1 = 0.9,
                  double beta2 = 0.999, double eps = 1e-8);
    /// Applies one update from the gradients in param.grad(); parameters without one are skipped.
    void step();
    /// Clears the gradients of all parameters.
    void zeroGrad();
    void setLearningRate(double lr) { m_lr = lr; }
    double learningRate() const { return m_lr; }

private:
    std::vector<at::Tensor> m_params;
    std::vector<at::Tensor> m_m;
    std::vector<at::Tensor> m_v;
    double m_lr;
    double m_beta1;
    double m_beta2;
    double m_eps;
    long m_step = 0;
};

/// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_: when the L2 norm of all
/// the gradients together (float64) exceeds `maxNorm`, every gradient is scaled by
/// maxNorm / (norm + 1e-6). Parameters without a gradient are skipped. Returns the norm before
/// clipping (NaN or infinite gradients are left as they are and show in it).
double clipGradNorm(const std::vector<at::Tensor>& params, double maxNorm);

/// SGD with momentum, as torch.optim.SGD (dampening 0, no Nesterov, weight_decay 0):
/// buf = momentum * buf + grad (buf = grad on the first step), param -= lr * buf.
class Sgd {
public:
    /// `params` must be leaf tensors with requires_grad set.
    explicit Sgd(std::vector<at::Tensor> params, double lr = 1e-2, double momentum = 0.9);
    /// Applies one update from the gradients in param.grad(); parameters without one are skipped.
    void step();
    /// Clears the gradients of all parameters.
    void zeroGrad();
    void setLearningRate(double lr) { m_lr = lr; }
    double learningRate() const { return m_lr; }

private:
    std::vector<at::Tensor> m_params;
    std::vector<at::Tensor> m_buf;  ///< momentum buffers, undefined until the first step
    double m_lr;
    double m_momentum;
};

} // namespace bitlens::train
