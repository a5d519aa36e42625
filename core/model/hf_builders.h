#pragma once
// Graphs of pretrained sequence models built from their weights and configuration, whatever
// file the weights came from: Hugging Face config.json + parameters by HF name (BERT / MiniLM,
// Llama / SmolLM2, GPT-2), llama weights by GGUF name + GGUF hyper-parameters, and PyTorch
// nn.LSTM / nn.GRU state dicts. Attention stays decomposed (MatMul, Mul, Softmax) and every
// projection is a MatMul with a constant [in, out] weight, so the quantization engine sees each
// one as a weight layer. Node names read like the model's modules: "layer.0.attn.q_proj".

#include "ir/graph.h"
#include "jobs/result.h"

#include <ATen/core/Tensor.h>
#include <nlohmann/json_fwd.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <string>

namespace bitlens::model {

/// Builds the graph of a Hugging Face model from its config.json and its parameters (HF names;
/// "bert." / "model." / "transformer." prefixes optional; any float dtype, used as float32).
///  - "bert": BertModel (MiniLM too); inputs input_ids, attention_mask [B, S] int64; output
///    last_hidden_state [B, S, hidden]; metadata task "embedding".
///  - "llama": LlamaForCausalLM (SmolLM2); input input_ids; output logits [B, S, vocab];
///    lm_head tied to the embedding when absent; metadata task "lm".
///  - "mistral", "qwen2", "qwen3", "phi3": the llama-shaped families (MistralForCausalLM with
///    its sliding window; Qwen2ForCausalLM's q/k/v biases; Qwen3ForCausalLM's per-head q/k
///    RMSNorm; Phi3ForCausalLM's fused qkv_proj / gate_up_proj, read as row views;
///    Gemma2ForCausalLM's scaled embeddings, (1 + w) sandwich norms, tanh GeGLU, soft-capped
///    scores and logits, sliding window on the layers layer_types names; Gemma3ForCausalLM
///    ("gemma3_text") with q / k norms and the sliding layers' own rope base); the llama
///    graph, metadata model_type naming the family. Rope scaling: default, linear, llama3.
///  - "gpt2": GPT2LMHeadModel (lm_head tied to wte); output logits; task "lm".
/// Unsupported model_type or options: ErrorCode::Unsupported; missing or mis-shaped tensors:
/// BadInput naming the tensor; `path` names the model in errors.
/// The config.json model_type values buildFromHfConfig builds.
inline constexpr std::array<const char*, 9> kHfModelTypes = {
    "bert", "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text", "gpt2"};
/// Whether buildFromHfConfig builds `modelType` (checked before any weight is mapped).
inline bool isHfModelType(const std::string& modelType)
{
    return std::find(kHfModelTypes.begin(), kHfModelTypes.end(), modelType) !=
           kHfModelTypes.end();
}
/// "bert, llama, ..." for error messages.
inline std::string hfModelTypesText()
{
    std::string text;
    for (const char* t : kHfModelTypes)
        text += (text.empty() ? "" : ", ") + std::string(t);
    return text;
}

Result<ir::Graph> buildFromHfConfig(const nlohmann::json& config,
                                    const std::map<std::string, at::Tensor>& weights,
                                    const std::string& path);

/// Builds the same graph as buildFromHfConfig for "llama" from GGUF tensor names
/// (token_embd.weight, blk.N.attn_q.weight, ..., output_norm.weight, output.weight) and GGUF
/// metadata (llama.embedding_length, llama.block_count, llama.attention.head_count,
/// llama.attention.head_count_kv, llama.rope.freq_base,
/// llama.attention.layer_norm_rms_epsilon, llama.context_length, llama.feed_forward_length).
/// Tensors are in NumPy order (GGUF ne reversed: token_embd is [vocab, hidden]). GGUF stores
/// attn_q / attn_k rows permuted for llama.cpp's interleaved rope; they are un-permuted here.
Result<ir::Graph> buildLlamaFromGguf(const nlohmann::json& hparams,
                                     const std::map<std::string, at::Tensor>& weights,
                                     const std::string& path);

/// Builds a stack of ONNX LSTM or GRU nodes from a PyTorch nn.LSTM / nn.GRU state dict
/// (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, ..._reverse). `config` holds
/// {"mode": "lstm" | "gru", "input_size", "hidden_size", "num_layers", "bidirectional",
/// "batch_first"}. PyTorch's gate order (i, f, g, o / r, z, n) becomes ONNX's (i, o, f, c /
/// z, r, h). Input "input" [B, S, F] (batch_first) or [S, B, F]; output "output" in the same
/// layout with dirs * hidden features, plus "h_n" (and "c_n") [layers * dirs, B, hidden];
/// metadata task "sequence".
Result<ir::Graph> buildRnnFromTorch(const nlohmann::json& config,
                                    const std::map<std::string, at::Tensor>& weights,
                                    const std::string& path);

} // namespace bitlens::model
