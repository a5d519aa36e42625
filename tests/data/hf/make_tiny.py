#!/usr/bin/env python3
"""Golden data for tests/unit/test_hf_builders.cpp: tiny random-initialised Hugging Face models
(BertModel, LlamaForCausalLM, GPT2LMHeadModel) and PyTorch LSTM/GRU stacks, built from configs
(no hub access), with fixed inputs and the reference outputs computed by transformers / torch.

Writes, per model NAME, NAME.npz: the parameters under their HF / state-dict names, plus
"__input_ids", "__attention_mask" (BERT), "__output" (last_hidden_state or logits), and for the
llama model a perplexity reference over overlapping token windows; NAME.json: the config.
Also lstm_onnx.onnx: a bidirectional LSTM exported by torch.onnx (or built by hand) and its
reference in lstm_onnx.npz.

Run with the BitLens venv (transformers is a test-only oracle; version printed in meta.json):
    ~/.cache/bitlens/venv/bin/python tests/data/hf/make_tiny.py
"""

import json
import math
import os
import sys

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, config_dict, state, extra):
    arrays = {k: v.detach().float().numpy() for k, v in state.items()}
    for k, v in extra.items():
        arrays["__" + k] = v
    np.savez_compressed(os.path.join(HERE, name + ".npz"), **arrays)
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(config_dict, f, indent=1, sort_keys=True)


def clean_state(model, drop_prefixes=()):
    state = {}
    for k, v in model.state_dict().items():
        if any(k.endswith(s) for s in (".attn.bias", ".attn.masked_bias", "position_ids", "inv_freq")):
            continue
        state[k] = v
    return state


def sharpen_attention(model):
    """Random init (std 0.02) makes attention nearly uniform, which would hide a wrong mask or
    rope; larger query/key weights make every position's scores matter."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(k in name for k in ("q_proj.weight", "k_proj.weight", "query.weight",
                                       "key.weight", "c_attn.weight", "qkv_proj.weight")):
                p.mul_(15.0)


def bert():
    torch.manual_seed(1)
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=48,
                                  max_position_embeddings=24, type_vocab_size=2,
                                  hidden_act="gelu", attn_implementation="eager")
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    sharpen_attention(model)
    ids = torch.randint(1, 64, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    ids[1, 7:] = 0  # padding at the end of the second sentence
    mask[1, 7:] = 0
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    # Sentence embeddings as sentence-transformers pools them (mean over unmasked tokens).
    m = mask.unsqueeze(-1).float()
    pooled = (out * m).sum(1) / m.sum(1).clamp(min=1e-9)
    d = cfg.to_dict()
    d["model_type"] = "bert"
    save("bert", d, clean_state(model),
         {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "output": out.numpy(),
          "pooled": pooled.numpy()})


def llama(name, tie, theta, layers, seed, rope_scaling=None):
    torch.manual_seed(seed)
    extra_cfg = {"rope_scaling": rope_scaling} if rope_scaling else {}
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=48, max_position_embeddings=64,
                                   rms_norm_eps=1e-5, rope_theta=theta,
                                   tie_word_embeddings=tie, attn_implementation="eager",
                                   **extra_cfg)
    model = transformers.LlamaForCausalLM(cfg).eval()
    # Random init gives near-uniform logits; sharpen the embeddings so tests see real structure.
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(20.0)
    sharpen_attention(model)
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    extra = {"input_ids": ids.numpy(), "output": logits.numpy()}
    if not tie:
        # Perplexity the Hugging Face way: a 40-token stream, windows of 16 with stride 8;
        # tokens already scored as targets are context only (labels -100) in later windows.
        stream = torch.randint(0, 64, (1, 40))
        max_len, stride = 16, 8
        nll_sum, n_tokens, windows, prev_end = 0.0, 0, [], 0
        for begin in range(0, stream.size(1), stride):
            end = min(begin + max_len, stream.size(1))
            trg = end - prev_end
            inp = stream[:, begin:end]
            labels = inp.clone()
            labels[:, :-trg] = -100
            with torch.no_grad():
                loss = model(input_ids=inp, labels=labels).loss
            scored = int((labels[:, 1:] != -100).sum())  # targets after the shift
            nll_sum += float(loss) * scored
            n_tokens += scored
            windows.append(inp[0].numpy())
            prev_end = end
            if end == stream.size(1):
                break
        extra["ppl_windows"] = np.stack(windows)
        extra["ppl_overlap"] = np.array(max_len - stride, dtype=np.int64)
        extra["ppl"] = np.array(math.exp(nll_sum / n_tokens), dtype=np.float64)
        extra["ppl_tokens"] = np.array(n_tokens, dtype=np.int64)
    state = clean_state(model)
    if tie:
        state.pop("lm_head.weight", None)
    d = cfg.to_dict()
    d["model_type"] = "llama"
    save(name, d, state, extra)


def llama3_rope():
    # Llama 3.1's rope scaling: with head dim 8 and theta 10000 the four frequencies have
    # wavelengths 6.3, 63, 628 and 6283 positions; original context 48 with factors 0.5 / 4
    # (bounds 12 and 96) puts one below the high-frequency bound (kept), one between
    # (smoothed), two above (divided by the factor).
    # The 12-token input sits at positions 0..11, where the 4 frequencies differ.
    llama("llama3_rope", tie=False, theta=10000.0, layers=1, seed=7,
          rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0.5,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 48})


def llama_family(name, config_cls, model_cls, model_type, seed, **extra):
    """A tiny random model of a llama-shaped family (mistral, qwen2, qwen3) and its logits on
    a 12-token input."""
    torch.manual_seed(seed)
    cfg = config_cls(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, intermediate_size=48, max_position_embeddings=64,
                     rms_norm_eps=1e-5, tie_word_embeddings=False,
                     attn_implementation="eager", **extra)
    model = model_cls(cfg).eval()
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(20.0)
        for n, p in model.named_parameters():
            if n.endswith("_proj.bias") or n.endswith("_norm.weight"):
                p.copy_(torch.randn_like(p) * 0.5 + (1.0 if n.endswith("norm.weight") else 0.0))
    sharpen_attention(model)
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    d = cfg.to_dict()
    d["model_type"] = model_type
    save(name, d, clean_state(model), {"input_ids": ids.numpy(), "output": logits.numpy()})


def llama_families():
    # Mistral with a sliding window shorter than the 12-token input: the window mask matters.
    llama_family("mistral", transformers.MistralConfig, transformers.MistralForCausalLM,
                 "mistral", seed=8, sliding_window=5)
    # Qwen2: biases on q, k, v (random, so they matter), none on o.
    llama_family("qwen2", transformers.Qwen2Config, transformers.Qwen2ForCausalLM, "qwen2",
                 seed=9)
    # Qwen3: per-head RMSNorm of q and k, head_dim 16 (not hidden / heads = 8).
    llama_family("qwen3", transformers.Qwen3Config, transformers.Qwen3ForCausalLM, "qwen3",
                 seed=10, head_dim=16)
    # Phi-3: fused qkv_proj [(heads + 2 kv) * hd, hidden] and gate_up_proj [2 * inter, hidden].
    llama_family("phi3", transformers.Phi3Config, transformers.Phi3ForCausalLM, "phi3",
                 seed=11, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def gemma_golden(name, model_type, cfg, model_cls):
    """A tiny Gemma (2 or 3) with random (1 + w) norms, sharpened attention, and its logits on
    a 12-token input; the embeddings are tied, so lm_head is not saved."""
    model = model_cls(cfg).eval()
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(10.0)
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(torch.randn_like(p) * 0.3)  # Gemma norms scale by (1 + w)
    sharpen_attention(model)
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    d = cfg.to_dict()
    d["model_type"] = model_type
    state = clean_state(model)
    state.pop("lm_head.weight", None)  # tied to the embeddings
    save(name, d, state, {"input_ids": ids.numpy(), "output": logits.numpy()})


def gemma2():
    """Gemma 2: embeddings scaled by sqrt(hidden), RMSNorm with (1 + weight), sandwich norms,
    GeGLU (tanh gelu), attention scale query_pre_attn_scalar^-0.5 with tanh soft-capping, a
    sliding window on alternate layers, and final logit soft-capping; the caps are set low enough
    to bend these logits, the window shorter than the 12-token input."""
    torch.manual_seed(12)
    cfg = transformers.Gemma2Config(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                    intermediate_size=48, max_position_embeddings=64,
                                    rms_norm_eps=1e-6, query_pre_attn_scalar=16,
                                    attn_logit_softcapping=4.0, final_logit_softcapping=6.0,
                                    sliding_window=5,
                                    layer_types=["sliding_attention", "full_attention"],
                                    pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                    attn_implementation="eager")
    gemma_golden("gemma2", "gemma2", cfg, transformers.Gemma2ForCausalLM)


def gemma3():
    """Gemma 3 text: Gemma 2's body without the caps, plus (1 + w) RMSNorm of q and k, and
    per-layer-type rope (sliding layers theta 10000; the full layer theta 1e6 with linear
    scaling by 2, as Gemma 3 4B+ scale theirs by 8)."""
    torch.manual_seed(13)
    cfg = transformers.Gemma3TextConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, intermediate_size=48, max_position_embeddings=64,
        rms_norm_eps=1e-6, query_pre_attn_scalar=16, sliding_window=5,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 2.0,
                                            "rope_theta": 1000000.0}},
        pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    gemma_golden("gemma3", "gemma3_text", cfg, transformers.Gemma3ForCausalLM)


def gpt2():
    torch.manual_seed(3)
    cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=24,
                                  activation_function="gelu_new", attn_implementation="eager")
    model = transformers.GPT2LMHeadModel(cfg).eval()
    sharpen_attention(model)
    ids = torch.randint(0, 64, (2, 11))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    state = clean_state(model)
    state.pop("lm_head.weight", None)  # tied to transformer.wte
    d = cfg.to_dict()
    d["model_type"] = "gpt2"
    save("gpt2", d, state, {"input_ids": ids.numpy(), "output": logits.numpy()})


def rnn(name, mode, bidirectional, seed):
    torch.manual_seed(seed)
    cls = torch.nn.LSTM if mode == "lstm" else torch.nn.GRU
    net = cls(input_size=5, hidden_size=8, num_layers=2, batch_first=True,
              bidirectional=bidirectional).eval()
    x = torch.randn(3, 7, 5)
    with torch.no_grad():
        out = net(x)
    y, state = out
    extra = {"input": x.numpy(), "output": y.numpy()}
    if mode == "lstm":
        extra["h_n"] = state[0].numpy()
        extra["c_n"] = state[1].numpy()
    else:
        extra["h_n"] = state.numpy()
    config = {"mode": mode, "input_size": 5, "hidden_size": 8, "num_layers": 2,
              "bidirectional": bidirectional, "batch_first": True}
    save(name, config, dict(net.state_dict()), extra)
    return net, x


def lstm_onnx():
    """A bidirectional one-layer LSTM as torch.onnx writes it (time-major input)."""
    torch.manual_seed(7)
    net = torch.nn.LSTM(input_size=4, hidden_size=6, num_layers=1, bidirectional=True).eval()
    x = torch.randn(5, 2, 4)
    with torch.no_grad():
        y, (h, c) = net(x)
    path = os.path.join(HERE, "lstm_onnx.onnx")
    how = "torch.onnx.export(dynamo=False)"
    try:
        torch.onnx.export(net, (x,), path, input_names=["input"],
                          output_names=["output", "h_n", "c_n"], opset_version=17, dynamo=False)
    except Exception as e:  # the legacy exporter may be gone: write the ONNX node by hand
        how = "onnx.helper (torch.onnx failed: %s)" % type(e).__name__
        write_lstm_by_hand(net, path)
    np.savez_compressed(os.path.join(HERE, "lstm_onnx.npz"), input=x.numpy(), output=y.numpy(),
                        h_n=h.numpy(), c_n=c.numpy())
    return how


def write_lstm_by_hand(net, path):
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    H = net.hidden_size

    def onnx_order(t):  # PyTorch i,f,g,o -> ONNX i,o,f,c
        i, f, g, o = t.chunk(4, 0)
        return torch.cat([i, o, f, g], 0)

    W = torch.stack([onnx_order(net.weight_ih_l0), onnx_order(net.weight_ih_l0_reverse)])
    R = torch.stack([onnx_order(net.weight_hh_l0), onnx_order(net.weight_hh_l0_reverse)])
    B = torch.stack([torch.cat([onnx_order(net.bias_ih_l0), onnx_order(net.bias_hh_l0)]),
                     torch.cat([onnx_order(net.bias_ih_l0_reverse),
                                onnx_order(net.bias_hh_l0_reverse)])])
    inits = [numpy_helper.from_array(t.detach().numpy(), n) for t, n in ((W, "W"), (R, "R"), (B, "B"))]
    node = helper.make_node("LSTM", ["input", "W", "R", "B"], ["Y", "h_n", "c_n"],
                            hidden_size=H, direction="bidirectional")
    flat = helper.make_node("Transpose", ["Y"], ["Yt"], perm=[0, 2, 1, 3])
    shape = numpy_helper.from_array(np.array([0, 0, -1], dtype=np.int64), "shape")
    out = helper.make_node("Reshape", ["Yt", "shape"], ["output"])
    graph = helper.make_graph(
        [node, flat, out], "lstm", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["S", "B", 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["S", "B", 2 * H]),
         helper.make_tensor_value_info("h_n", TensorProto.FLOAT, [2, "B", H]),
         helper.make_tensor_value_info("c_n", TensorProto.FLOAT, [2, "B", H])],
        inits + [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    torch.set_num_threads(1)
    bert()
    llama("llama", tie=False, theta=10000.0, layers=2, seed=2)
    llama("llama_tied", tie=True, theta=100000.0, layers=1, seed=4)
    llama3_rope()
    llama_families()
    gemma2()
    gemma3()
    gpt2()
    rnn("lstm", "lstm", bidirectional=False, seed=5)
    rnn("gru", "gru", bidirectional=True, seed=6)
    how = lstm_onnx()
    with open(os.path.join(HERE, "meta.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                   "lstm_onnx": how}, f, indent=1)
    print("transformers", transformers.__version__, "torch", torch.__version__, "lstm_onnx:", how)


if __name__ == "__main__":
    sys.exit(main())
