#pragma once
// The graph of a TorchScript / torch.save archive that io/torchscript.h has read: io reads the
// tensors and the Final constants, model builds the network from them.

#include "io/torchscript.h"
#include "ir/graph.h"
#include "jobs/result.h"

namespace bitlens::model {

/// The graph of an archive whose parameters form a known structure: a PyTorch nn.LSTM /
/// nn.GRU (at the root, or the only parameters under one module path), built by
/// buildRnnFromTorch (model/hf_builders.h) with batch_first / bidirectional taken from the
/// module's Final constants where the code states them. Anything else: Unsupported,
/// "TorchScript code is not run; parameters listed: ...".
Result<ir::Graph> graphFromTorchArchive(const io::TorchArchive& archive);

} // namespace bitlens::model
