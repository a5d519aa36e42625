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

#include <map>
#include <string>

namespace bitlens::model {

/// Builds the graph of a Hugging Face model from its config.json and its parameters (HF names;
/// "bert." / "model." / "transformer." prefixes optional; any float dtype, used as float32).
///  - "bert": BertModel (MiniLM too); inputs input_ids, attention_mask [B, S] int64; output
///    last_hidden_state [B, S, hidden]; metadata task "embedding".
///  - "llama": LlamaForCausalLM (SmolLM2); input input_ids; output logits [B, S, vocab];
///    lm_head tied to the embedding when absent; metadata task "lm".
///  - "gpt2": GPT2LMHeadModel (lm_head tied to wte); output logits; task "lm".
/// Unsupported model_type or options: ErrorCode::Unsupported; missing or mis-shaped tensors:
/// BadInput naming the tensor; `path` names the model in errors.
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
