#pragma once
// TorchScript (.pt / .pth, torch.jit.save) and torch.save zip archives, read without running
// anything from them. A TorchScript file is a program: its code/ folder holds TorchScript
// source and its pickles name Python callables. BitLens never executes either: it unpickles
// data.pkl / constants.pkl with its own reader (io/pickle.h), which only records what a
// pickle would call, recognises torch's tensor records (_rebuild_tensor_v2 over a persistent
// storage id) and reads each storage's bytes from data/<key> (constants/<key>). Parameters
// that form a known structure (a PyTorch nn.LSTM / nn.GRU stack) become a graph; anything
// else is listed and refused.

#include "ir/graph.h"
#include "jobs/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bitlens::io {

/// One tensor of the archive.
struct TorchTensor {
    std::string name;                 ///< module path, "lstm.weight_ih_l0"; constants: "constants.0"
    std::string dtype;                ///< "float32", "float16", "int64", ...
    std::vector<std::int64_t> shape;
    at::Tensor value;                 ///< contiguous CPU copy of the stored elements
};

/// What a TorchScript / torch.save archive holds, as far as BitLens reads it.
struct TorchArchive {
    std::string path;
    bool hasCode = false;             ///< a code/ folder: TorchScript (a program), not just data
    std::string rootClass;            ///< "__torch__.torch.nn.modules.rnn.LSTM", "" for a dict
    std::vector<TorchTensor> tensors; ///< parameters and buffers in pickle order, then constants
    /// Class-level constants written in the code of module classes ("batch_first : Final[bool]
    /// = True"), by module path ("" = root): read as text, never run.
    std::map<std::string, std::map<std::string, std::string>> finals;
    /// module path -> class, "__torch__.torch.nn.modules.rnn.LSTM"
    std::map<std::string, std::string> moduleClasses;
};

/// The note every view of such a file shows.
inline constexpr const char* kTorchScriptTrustNote =
    "untrusted: TorchScript holds code; BitLens only reads its tensors";

/// Reads the archive at `path`. Corrupt archives (truncated zip, bad pickle opcode, a tensor
/// or storage past the end of its data, a big-endian file) are BadInput naming the file and
/// the reason; sizes are checked before anything is allocated.
Result<TorchArchive> readTorchArchive(const std::string& path);

/// "weight_ih_l0 float32 [12, 4], weight_hh_l0 float32 [12, 3], ..." (at most `limit` names,
/// then "... and N more").
std::string describeTensors(const TorchArchive& archive, std::size_t limit = 24);

} // namespace bitlens::io
