#pragma once
// fashion-cnn: a small CNN with BatchNorm that BitLens trains itself, through its own executor
// and LibTorch autograd, on Debian's Fashion-MNIST (dataset-fashion-mnist).

#include "io/dataset.h"
#include "ir/graph.h"
#include "jobs/progress.h"
#include "jobs/result.h"

namespace bitlens::zoo {

/// Training settings of fashion-cnn (defaults reach >= 90 % top-1 on the 10k test set).
struct FashionCnnRecipe {
    int epochs = 4;
    std::int64_t batchSize = 128;
    double learningRate = 2e-3;
    std::uint64_t seed = 20261130;
};

/// The untrained network, weights initialised from `seed` (Kaiming-uniform like torch.nn).
ir::Graph makeFashionCnn(std::uint64_t seed);

/// Trains `graph` in place on `train` (inputs [N,1,28,28] in [0,1], labels 0..9).
Result<void> trainFashionCnn(ir::Graph& graph, const io::Dataset& train,
                             const FashionCnnRecipe& recipe, Progress& progress,
                             const CancelToken& cancel);

} // namespace bitlens::zoo
