#pragma once
// Verification by the consumer (issue #37 item 3): the runtime that will load an exported file
// (onnxruntime for ONNX, llama.cpp for GGUF, transformers with compressed-tensors for a
// safetensors file in a Hugging Face folder) runs it on one batch of the verification's inputs,
// through share/bitlens/consumers/run_consumer.py and the venv's Python, and its outputs are
// compared with the in-app model like BitLens's own reading of the file.

#include "exec/executor.h"
#include "export/export.h"

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

namespace bitlens::exporting {

/// A consumer runtime's outputs for one batch, or why it was not asked.
struct ConsumerOutputs {
    bool ran = false;
    std::string runtime;  ///< "onnxruntime 1.20.1" when it ran
    std::string skipped;  ///< why not: no consumer for the format, no Python, not installed
    std::vector<at::Tensor> outputs;
};

/// Runs `path` (`format`) in its consumer runtime on `feeds`, one per input of `graph` in its
/// order. Not asked (ran = false, `skipped` says why) when the format has no consumer here,
/// when BITLENS_CONSUMER=off, or when no Python or runtime is installed: that is no failure.
/// The runtime refusing or failing on the file is a Runtime error naming `path` with the
/// runtime's own words (the export does not load where it should).
Result<ConsumerOutputs> runConsumer(ExportFormat format, const std::string& path,
                                    const ir::Graph& graph,
                                    const std::vector<at::Tensor>& feeds);

/// Runs the consumer on the first `batch` samples of `data` and compares its outputs with
/// `app` (the in-app model) by compareRuns's figures. Within the format's rounding when a
/// language model's perplexity is within 0.2 % of the in-app one (GGUF: 2 %, llama.cpp rounds
/// the activations of quantized matmuls to Q8 blocks) or its mean KL divergence from the
/// in-app distribution is at most 5e-3 nats (a degenerate model's perplexity swings) (not its top-1: a tiny LM's
/// near-ties flip under float noise, 8 of 2048 positions for kjv-llama w4-int4, whose
/// MatMulNBits onnxruntime computes its own way), an encoder's mean-pooled embedding cosine
/// is at least 0.99 on average and 0.98 at its smallest (the chaos a 1e-6 change of the
/// embeddings causes in minilm-l6, tests/e2e/bert_int8_reference.py), and a classifier's
/// top-1 differs on no more than max(1, 0.2 %) of the samples. nullopt when the format has
/// no consumer here.
Result<std::optional<ConsumerCheck>> checkWithConsumer(ExportFormat format,
                                                       const std::string& path,
                                                       const ir::Graph& fileGraph,
                                                       exec::Executor& app,
                                                       const io::Dataset& data,
                                                       std::int64_t batch,
                                                       const CancelToken& cancel);

/// "; onnxruntime 1.20.1 on 256 samples: max |diff| 0.01 vs in-app, same top-1 100% ..." for
/// the verify line (empty without a check).
std::string consumerText(const std::optional<ConsumerCheck>& check);

} // namespace bitlens::exporting
