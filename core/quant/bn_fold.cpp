#include "quant/bn_fold.h"

#include <ATen/ATen.h>

#include <map>

namespace bitlens::quant {

ir::Graph foldBatchNorm(const ir::Graph& graph, std::vector<std::string>* folded)
{
    ir::Graph out = graph;
    out.nodes.clear();
    // How many nodes (and graph outputs) read each value: a conv output read by anything but
    // the BN cannot be folded without changing that other reader.
    std::map<std::string, int> readers;
    for (const auto& node : graph.nodes)
        for (const auto& in : node.inputs)
            ++readers[in];
    for (const auto& o : graph.outputs)
        ++readers[o.name];

    std::map<std::string, std::size_t> producerIndex; // value -> index in out.nodes
    for (const auto& node : graph.nodes) {
        const bool isBn = node.op == ir::OpKind::BatchNorm && node.inputs.size() == 5;
        auto prod = isBn ? producerIndex.find(node.inputs[0]) : producerIndex.end();
        if (isBn && prod != producerIndex.end() && readers[node.inputs[0]] == 1) {
            ir::Node& layer = out.nodes[prod->second];
            const bool conv = layer.op == ir::OpKind::Conv;
            const bool linear = layer.op == ir::OpKind::Gemm &&
                                layer.attrs.getInt("transB", 0) == 1 &&
                                layer.attrs.getInt("transA", 0) == 0 &&
                                layer.attrs.getFloat("alpha", 1.0) == 1.0 &&
                                layer.attrs.getFloat("beta", 1.0) == 1.0;
            const at::Tensor* w = layer.inputs.size() > 1 ? graph.initializer(layer.inputs[1])
                                                          : nullptr;
            const at::Tensor* gamma = graph.initializer(node.inputs[1]);
            const at::Tensor* beta = graph.initializer(node.inputs[2]);
            const at::Tensor* mean = graph.initializer(node.inputs[3]);
            const at::Tensor* var = graph.initializer(node.inputs[4]);
            if ((conv || linear) && w && gamma && beta && mean && var &&
                w->size(0) == gamma->numel()) {
                const double eps = node.attrs.getFloat("epsilon", 1e-5);
                const at::Tensor factor = *gamma / at::sqrt(*var + eps);
                std::vector<std::int64_t> bshape(static_cast<std::size_t>(w->dim()), 1);
                bshape[0] = -1;
                const at::Tensor* oldBias =
                    layer.inputs.size() > 2 ? graph.initializer(layer.inputs[2]) : nullptr;
                const at::Tensor bias0 = oldBias ? *oldBias : at::zeros_like(*mean);
                const std::string wName = layer.name + ".weight_folded";
                const std::string bName = layer.name + ".bias_folded";
                out.initializers[wName] = (*w * factor.reshape(bshape)).contiguous();
                out.initializers[bName] = ((bias0 - *mean) * factor + *beta).contiguous();
                layer.inputs.resize(3);
                layer.inputs[1] = wName;
                layer.inputs[2] = bName;
                layer.outputs[0] = node.outputs[0];
                producerIndex[node.outputs[0]] = prod->second;
                if (folded)
                    folded->push_back(layer.name + "<-" + node.name);
                continue;
            }
        }
        out.nodes.push_back(node);
        for (const auto& o : node.outputs)
            producerIndex[o] = out.nodes.size() - 1;
    }
    // Drop initializers no node reads any more (the BN parameters, the unfolded weights).
    std::map<std::string, int> used;
    for (const auto& node : out.nodes)
        for (const auto& in : node.inputs)
            ++used[in];
    for (auto it = out.initializers.begin(); it != out.initializers.end();)
        it = used.count(it->first) ? std::next(it) : out.initializers.erase(it);
    return out;
}

} // namespace bitlens::quant
