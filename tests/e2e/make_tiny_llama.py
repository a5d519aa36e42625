"""A tiny random Hugging Face llama for the GGUF tests (test_export_gguf.sh,
test_export_llamacpp.sh): DIR/hf/{config.json, model.safetensors, tokenizer.json} (2 layers,
hidden 256, grouped-query attention 4/2 heads, tied head, the test BPE vocabulary), DIR/text.txt
(a short text to calibrate and evaluate on) and DIR/allfloat.json (a scheme file that keeps every
layer float, so a GGUF export of it writes BitLens's float weights as F32).
With --llama3-rope the config carries Llama 3.1's rope scaling (factor 8, original context 32:
short, blended and stretched frequencies all occur in head size 64).
Usage: make_tiny_llama.py DIR TOKENIZER.json [--seed N] [--qk-scale S] [--llama3-rope]"""
import argparse
import json
import os
import shutil

import numpy as np
from safetensors.numpy import save_file

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("tokenizer")
p.add_argument("--seed", type=int, default=0)
p.add_argument("--qk-scale", type=float, default=0.05,
               help="std of the q / k projections (larger: sharper attention)")
p.add_argument("--llama3-rope", action="store_true")
a = p.parse_args()
os.makedirs(a.dir + "/hf", exist_ok=True)
shutil.copy(a.tokenizer, a.dir + "/hf/tokenizer.json")
vocab = len(json.load(open(a.dir + "/hf/tokenizer.json"))["model"]["vocab"])
hidden, inter, heads, kv, layers = 256, 512, 4, 2, 2
hd = hidden // heads
cfg = dict(model_type="llama", hidden_size=hidden, intermediate_size=inter,
           num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
           vocab_size=vocab, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
           tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, hidden_act="silu")
if a.llama3_rope:
    cfg["rope_scaling"] = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                               high_freq_factor=4.0, original_max_position_embeddings=32)
json.dump(cfg, open(a.dir + "/hf/config.json", "w"))
rng = np.random.default_rng(a.seed)
r = lambda *s, k=0.05: (rng.standard_normal(s) * k).astype(np.float32)
w = {"model.embed_tokens.weight": r(vocab, hidden, k=0.5),
     "model.norm.weight": 1 + r(hidden, k=0.1)}
for i in range(layers):
    l = f"model.layers.{i}."
    w[l + "input_layernorm.weight"] = 1 + r(hidden, k=0.1)
    w[l + "post_attention_layernorm.weight"] = 1 + r(hidden, k=0.1)
    w[l + "self_attn.q_proj.weight"] = r(heads * hd, hidden, k=a.qk_scale)
    w[l + "self_attn.k_proj.weight"] = r(kv * hd, hidden, k=a.qk_scale)
    w[l + "self_attn.v_proj.weight"] = r(kv * hd, hidden)
    w[l + "self_attn.o_proj.weight"] = r(hidden, heads * hd)
    w[l + "mlp.gate_proj.weight"] = r(inter, hidden)
    w[l + "mlp.up_proj.weight"] = r(inter, hidden)
    w[l + "mlp.down_proj.weight"] = r(hidden, inter)
save_file(w, a.dir + "/hf/model.safetensors")
text = ("In the beginning the model read a few plain words, and then some more words about "
        "the weather, the sea and the hills. ") * 40
open(a.dir + "/text.txt", "w").write(text)
names = ["lm_head"] + [f"layer.{i}.{m}" for i in range(layers) for m in
         ("attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.o_proj", "mlp.gate_proj",
          "mlp.up_proj", "mlp.down_proj")]
json.dump({"preset": "gguf-q8_0", "overrides": {n: "float" for n in names}},
          open(a.dir + "/allfloat.json", "w"))
