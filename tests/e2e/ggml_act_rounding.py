"""Perplexity of a llama GGUF in transformers (float32, the file's tensors dequantized by
gguf-py), optionally with the inputs of each quantized matmul rounded as llama.cpp's CPU
backend rounds them before its integer dot products: to Q8_0 blocks of 32 (one fp16 scale
amax / 127, codes rounded to nearest) for Q4_0 / Q5_0 / Q8_0 weights, Q8_1 for Q4_1 / Q5_1
(the same codes and scale), Q8_K blocks of 256 (one float32 scale, -127 / the signed value of
largest magnitude, codes to nearest, at most 127) for the K-quants (ggml-quants.c:
quantize_row_q8_0 / q8_1 / q8_K; ggml-cpu type_traits vec_dot_type).

  ggml_act_rounding.py GGUF WINDOWS.npy [--round]
Prints one JSON line {"perplexity", "tokens", "rounded": {"Q8_0": n, "Q8_K": n}}.
"""
import json
import os
import sys
import warnings

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np
import torch

VEC_DOT = {"Q4_0": "Q8_0", "Q5_0": "Q8_0", "Q8_0": "Q8_0", "Q4_1": "Q8_1", "Q5_1": "Q8_1",
           "Q2_K": "Q8_K", "Q3_K": "Q8_K", "Q4_K": "Q8_K", "Q5_K": "Q8_K", "Q6_K": "Q8_K"}


def round_q8_0(x):
    b = x.reshape(*x.shape[:-1], -1, 32)
    amax = b.abs().amax(-1, keepdim=True)
    d = amax / 127
    inv = torch.where(amax > 0, 127 / amax, torch.zeros_like(amax))
    q = torch.round(b * inv)
    return (q * d.half().float()).reshape(x.shape)


def round_q8_k(x):
    b = x.reshape(*x.shape[:-1], -1, 256)
    idx = b.abs().argmax(-1, keepdim=True)
    mx = torch.gather(b, -1, idx)
    iscale = torch.where(mx != 0, -127 / mx, torch.zeros_like(mx))
    q = torch.clamp(torch.round(iscale * b), max=127)
    d = torch.where(mx != 0, 1 / iscale, torch.zeros_like(mx))
    return (q * d).reshape(x.shape)


def main(argv):
    warnings.filterwarnings("ignore")
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    path, windows = argv[1], np.load(argv[2])
    reader = gguf.GGUFReader(path)
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    # transformers' own GGUF reading (config, gguf-py's dequantization, the q / k rows'
    # rope permutation undone), into a float32 Llama.
    config = dict(load_gguf_checkpoint(path, return_tensors=False)["config"])
    assert config.pop("model_type") == "llama", config
    model = LlamaForCausalLM(LlamaConfig(**config))
    tensors = load_gguf_checkpoint(path, return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    model = model.float().eval()
    torch.set_num_threads(2)
    counts = {}
    if "--round" in argv:
        names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                 "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
        for name, module in model.named_modules():
            if not isinstance(module, torch.nn.Linear):
                continue
            if name == "lm_head":
                tensor = "output.weight" if "output.weight" in types else "token_embd.weight"
            else:
                layer = name.split(".")[2]
                tensor = f"blk.{layer}.{names[name.split('.', 3)[3]]}.weight"
            act = VEC_DOT.get(types[tensor])
            if act is None:
                continue
            counts[act] = counts.get(act, 0) + 1
            fn = round_q8_k if act == "Q8_K" else round_q8_0
            module.register_forward_pre_hook(lambda m, args, fn=fn: (fn(args[0]),))
    nll, count = 0.0, 0
    with torch.no_grad():
        for w in windows:
            ids = torch.tensor(w, dtype=torch.long)[None]
            logits = model(input_ids=ids).logits[0, :-1].double()
            lp = torch.log_softmax(logits, -1)
            nll -= float(lp[torch.arange(len(w) - 1), ids[0, 1:]].sum())
            count += len(w) - 1
    print(json.dumps({"perplexity": float(np.exp(nll / count)), "tokens": count,
                      "rounded": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
