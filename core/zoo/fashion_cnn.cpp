#include "zoo/fashion_cnn.h"

#include "exec/executor.h"
#include "train/optimizer.h"

#include <ATen/ATen.h>

#include <cmath>

namespace bitlens::zoo {

namespace {

/// torch.nn's default init for Conv/Linear: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
/// (kaiming_uniform with a = sqrt(5) reduces to this bound for the weight).
std::pair<at::Tensor, at::Tensor> initLayer(std::vector<std::int64_t> weightShape,
                                            std::int64_t fanIn, at::Generator& gen)
{
    const double bound = 1.0 / std::sqrt(static_cast<double>(fanIn));
    at::Tensor w = at::empty(weightShape).uniform_(-bound, bound, gen);
    at::Tensor b = at::empty({weightShape[0]}).uniform_(-bound, bound, gen);
    return {w, b};
}

std::string convBlock(ir::GraphBuilder& g, const std::string& name, const std::string& x,
                      std::int64_t in, std::int64_t out, at::Generator& gen)
{
    auto [w, b] = initLayer({out, in, 3, 3}, in * 9, gen);
    // The conv bias is redundant before BatchNorm, as in most CNNs; BN carries the shift.
    std::string y = g.conv2d(name + ".conv", x, w, std::nullopt, {1, 1, 1, 1});
    y = g.batchNorm(name + ".bn", y, at::ones({out}), at::zeros({out}), at::zeros({out}),
                    at::ones({out}));
    y = g.unary(name + ".relu", ir::OpKind::Relu, y);
    return g.maxPool(name + ".pool", y, 2, 2);
}

} // namespace

ir::Graph makeFashionCnn(std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    ir::GraphBuilder g("fashion-cnn");
    std::string x = g.input("image", {-1, 1, 28, 28});
    x = convBlock(g, "block1", x, 1, 32, gen);   // -> [N, 32, 14, 14]
    x = convBlock(g, "block2", x, 32, 64, gen);  // -> [N, 64, 7, 7]
    x = g.flatten("flatten", x, 1);
    auto [w1, b1] = initLayer({128, 64 * 7 * 7}, 64 * 7 * 7, gen);
    x = g.linear("fc1", x, w1, b1);
    x = g.unary("fc1.relu", ir::OpKind::Relu, x);
    auto [w2, b2] = initLayer({10, 128}, 128, gen);
    x = g.linear("logits", x, w2, b2);
    g.output(x);
    ir::Graph graph = g.build().value();
    graph.metadata["bitlens.preprocess"] = "grayscale 28x28, pixel / 255, NCHW";
    graph.metadata["bitlens.labels"] = "T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,"
                                       "Sneaker,Bag,Ankle boot";
    return graph;
}

Result<void> trainFashionCnn(ir::Graph& graph, const io::Dataset& train,
                             const FashionCnnRecipe& recipe, Progress& progress,
                             const CancelToken& cancel)
{
    if (!train.labels.defined() || train.size() == 0)
        return Error::badInput(train.path, "training data has no labelled samples");
    try {
        std::vector<at::Tensor> params;
        for (auto& [name, tensor] : graph.initializers) {
            const bool runningStat = name.find("running_") != std::string::npos;
            if (tensor.is_floating_point() && !runningStat) {
                tensor.requires_grad_(true);
                params.push_back(tensor);
            }
        }
        train::Adam adam(params, recipe.learningRate);
        exec::Executor executor(graph, exec::ExecOptions{c10::Device(c10::kCPU), true});
        at::Generator gen = at::detail::createCPUGenerator(recipe.seed + 1);
        const std::int64_t n = train.size();
        const std::int64_t batches = (n + recipe.batchSize - 1) / recipe.batchSize;
        const std::int64_t totalSteps = batches * recipe.epochs;
        std::int64_t stepIndex = 0;
        for (int epoch = 0; epoch < recipe.epochs; ++epoch) {
            const at::Tensor order = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
            double lossSum = 0.0;
            for (std::int64_t b = 0; b < batches; ++b, ++stepIndex) {
                if (cancel.cancelled())
                    return Error::cancelled();
                // Cosine decay of the learning rate over all steps.
                const double t = static_cast<double>(stepIndex) / static_cast<double>(totalSteps);
                adam.setLearningRate(recipe.learningRate * 0.5 * (1.0 + std::cos(M_PI * t)));
                const at::Tensor idx =
                    order.slice(0, b * recipe.batchSize, std::min(n, (b + 1) * recipe.batchSize));
                const at::Tensor x = train.inputs.index_select(0, idx);
                const at::Tensor y = train.labels.index_select(0, idx);
                adam.zeroGrad();
                const at::Tensor logits = executor.forward({x}).front();
                const at::Tensor loss = at::cross_entropy_loss(logits, y);
                loss.backward();
                adam.step();
                lossSum += loss.item<double>();
                if (b % 20 == 0 || b + 1 == batches)
                    progress.report(static_cast<double>(stepIndex + 1) /
                                        static_cast<double>(totalSteps),
                                    "training epoch " + std::to_string(epoch + 1) + "/" +
                                        std::to_string(recipe.epochs) + ", loss " +
                                        std::to_string(lossSum / static_cast<double>(b + 1)));
            }
        }
        for (auto& [name, tensor] : graph.initializers)
            tensor = tensor.detach().requires_grad_(false).contiguous();
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("training failed: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
        return Error::runtime(std::string("training failed: ") + e.what());
    }
    return {};
}

} // namespace bitlens::zoo
