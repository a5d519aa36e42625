#include "model/torch_rnn.h"

#include "model/hf_builders.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

namespace bitlens::model {

using io::TorchArchive;

namespace {

Error notRun(const TorchArchive& archive, const std::string& why)
{
    return Error::unsupported(archive.path,
                              std::string(archive.hasCode ? "TorchScript code is not run"
                                                          : "this torch.save archive is data "
                                                            "only") +
                                  (why.empty() ? "" : " and " + why) +
                                  "; parameters listed: " + io::describeTensors(archive));
}

} // namespace

Result<ir::Graph> graphFromTorchArchive(const TorchArchive& archive)
{
    // A PyTorch RNN stack: the module holding weight_ih_l0 must hold every parameter.
    std::string module;
    int stacks = 0;
    for (const auto& t : archive.tensors) {
        const std::string suffix = "weight_ih_l0";
        if (t.name.size() >= suffix.size() &&
            t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
            (t.name.size() == suffix.size() || t.name[t.name.size() - suffix.size() - 1] == '.')) {
            module = t.name.substr(0, t.name.size() - suffix.size());
            ++stacks;
        }
    }
    if (stacks != 1)
        return notRun(archive, stacks == 0 ? "its parameters are not a PyTorch LSTM or GRU"
                                           : "it holds several RNN stacks");
    std::map<std::string, at::Tensor> weights;
    for (const auto& t : archive.tensors) {
        if (t.name.rfind("constants.", 0) == 0)
            continue;
        if (t.name.rfind(module, 0) != 0 || t.name.find('.', module.size()) != std::string::npos)
            return notRun(archive, "'" + t.name + "' is not part of the RNN " +
                                       (module.empty() ? "at the root" : "'" + module + "'"));
        if (!t.value.is_floating_point())
            return notRun(archive, "'" + t.name + "' is not a float tensor");
        weights[t.name.substr(module.size())] = t.value.to(at::kFloat);
    }
    // (A tensor named like a constant, "constants.weight_ih_l0", is skipped above.)
    const auto ih = weights.find("weight_ih_l0");
    if (ih == weights.end())
        return notRun(archive, "its parameters are not a PyTorch LSTM or GRU");
    const at::Tensor& wih = ih->second;
    const auto hh = weights.find("weight_hh_l0");
    if (wih.dim() != 2 || hh == weights.end() || hh->second.dim() != 2 ||
        hh->second.size(1) == 0 || wih.size(0) % hh->second.size(1) != 0)
        return Error::badInput(archive.path, "weight_ih_l0 / weight_hh_l0 do not have the shapes "
                                             "of an LSTM or GRU");
    const std::int64_t hidden = hh->second.size(1);
    const std::int64_t gates = wih.size(0) / hidden;
    std::int64_t layers = 0;
    while (weights.count("weight_ih_l" + std::to_string(layers)))
        ++layers;

    const std::string moduleKey = module.empty() ? "" : module.substr(0, module.size() - 1);
    std::map<std::string, std::string> finals;
    if (auto it = archive.finals.find(moduleKey); it != archive.finals.end())
        finals = it->second;
    std::string mode = gates == 4 ? "lstm" : gates == 3 ? "gru" : "";
    if (auto it = finals.find("mode"); it != finals.end()) {
        if (it->second == "LSTM" || it->second == "GRU")
            mode = it->second == "LSTM" ? "lstm" : "gru";
        else
            return notRun(archive, "its RNN mode " + it->second + " is not LSTM or GRU");
    }
    if (mode.empty() || (mode == "lstm") != (gates == 4) || (mode == "gru") != (gates == 3))
        return notRun(archive, "weight_ih_l0 has " + std::to_string(wih.size(0)) +
                                   " rows for hidden size " + std::to_string(hidden) +
                                   ", neither an LSTM (4 gates) nor a GRU (3 gates)");
    auto flag = [&](const std::string& key) {
        auto it = finals.find(key);
        return it != finals.end() && it->second == "True";
    };
    nlohmann::json config = {{"mode", mode},
                             {"input_size", wih.size(1)},
                             {"hidden_size", hidden},
                             {"num_layers", layers},
                             {"bidirectional", weights.count("weight_ih_l0_reverse") != 0},
                             {"batch_first", flag("batch_first")}};
    if (auto it = finals.find("proj_size"); it != finals.end() && it->second != "0")
        return Error::unsupported(archive.path, "LSTM proj_size is not supported");
    auto graph = model::buildRnnFromTorch(config, weights, archive.path);
    if (!graph)
        return graph.error();
    graph->name = std::filesystem::path(archive.path).stem().string();
    graph->metadata["bitlens.source"] = archive.hasCode ? "torchscript" : "torch.save";
    graph->metadata["bitlens.batch_first"] =
        finals.count("batch_first") ? finals.at("batch_first")
                                    : "False (not stated in the file; PyTorch's default)";
    return graph;
}

} // namespace bitlens::model
