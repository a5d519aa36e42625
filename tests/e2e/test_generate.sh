#!/usr/bin/env bash
# End-to-end: `bitlens-cli generate` (KV-cache decoding, issue #39). Checked against the world:
# greedy decoding of kjv-llama (its HF folder) and smollm2-135m (the zoo's GGUF, dequantized by
# gguf-py into an HF folder, not by BitLens) equals transformers' `generate` token for token for
# 64 tokens, from the prompt ids BitLens's tokenizer gave. The JSON keys DESIGN.md lists, the
# quantized side's real kernels, seeded sampling that repeats, and the usage errors.
# Usage: test_generate.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if ! "$py" -c "import transformers, torch" 2> /dev/null; then
  echo "FAIL: the venv python has no transformers/torch (scripts/bootstrap installs them)"
  exit 1
fi

# transformers' greedy continuation of BitLens's prompt ids: MODEL_DIR REPORT.json [FILE.gguf].
# A GGUF is first written as an HF folder by gguf-py alone (dequantized, q / k rows un-permuted
# from llama.cpp's rope layout, names mapped), since transformers' own GGUF loading needs
# accelerate, which the venv does not carry.
cat > "$tmp/hf_generate.py" << 'PY'
import contextlib, io, json, os, sys, tempfile, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging
hf_logging.set_verbosity_error()
folder, report = sys.argv[1], sys.argv[2]
gguf = sys.argv[3] if len(sys.argv) > 3 else None
d = json.load(open(report))

def gguf_to_hf(path, out):
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from safetensors.torch import save_file
    r = GGUFReader(path)
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("tokenizer.ggml.")
         or k.endswith("_token_id")}
    hid, layers = int(f["llama.embedding_length"]), int(f["llama.block_count"])
    heads, kv = int(f["llama.attention.head_count"]), int(f["llama.attention.head_count_kv"])
    hd = hid // heads
    names = {"token_embd": "model.embed_tokens", "output_norm": "model.norm",
             "output": "lm_head"}
    per = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
           "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
           "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
           "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    w = {}
    for t in r.tensors:
        a = torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32))
        base, kind = t.name.rsplit(".", 1)
        if base.startswith("blk."):
            _, i, part = base.split(".", 2)
            if part in ("attn_q", "attn_k"):
                n = heads if part == "attn_q" else kv
                a = a.reshape(n, hd // 2, 2, a.shape[1]).transpose(1, 2).reshape(a.shape)
            w[f"model.layers.{i}.{per[part]}.{kind}"] = a.contiguous()
        else:
            w[f"{names[base]}.{kind}"] = a.contiguous()
    vocab = w["model.embed_tokens.weight"].shape[0]
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "hidden_size": hid, "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": kv, "head_dim": hd, "vocab_size": vocab,
              "intermediate_size": int(f["llama.feed_forward_length"]),
              "max_position_embeddings": int(f["llama.context_length"]),
              "rms_norm_eps": float(f["llama.attention.layer_norm_rms_epsilon"]),
              "rope_theta": float(f["llama.rope.freq_base"]), "hidden_act": "silu",
              "tie_word_embeddings": "lm_head.weight" not in w,
              "bos_token_id": int(f.get("tokenizer.ggml.bos_token_id", 0)),
              "eos_token_id": int(f["tokenizer.ggml.eos_token_id"])}
    os.makedirs(out, exist_ok=True)
    json.dump(config, open(out + "/config.json", "w"))
    save_file(w, out + "/model.safetensors")

if gguf:
    hf = tempfile.mkdtemp()
    gguf_to_hf(os.path.join(folder, gguf), hf)
    folder = hf
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
model.eval()
torch.set_num_threads(2)
ids = torch.tensor([d["prompt_ids"]])
with torch.no_grad():
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=d["max_tokens"], min_new_tokens=0,
                         pad_token_id=d["stop_ids"][0] if d["stop_ids"] else 0)
hf = out[0, ids.shape[1]:].tolist()
mine = d["float"]["ids"]
print(f"transformers: {len(hf)} tokens, BitLens: {len(mine)}, stop ids {d['stop_ids']}")
assert hf == mine, f"first difference at {next(i for i, (a, b) in enumerate(zip(hf + [-1], mine + [-2])) if a != b)}: transformers {hf}, BitLens {mine}"
assert len(mine) == 64, f"only {len(mine)} tokens ({d['float']['stop_reason']}): pick a prompt that runs 64"
PY

keys="
for k in ['model','scheme','prompt','prompt_ids','stop_ids','max_tokens','sampling','threads',
          'cpu','isa','float','quantized','first_divergence','kld','mean_kld','max_kld','top']:
    assert k in d, k
for side in ['float', 'quantized']:
    for k in ['label','ids','tokens','text','stop_reason','prompt_tokens','prefill_seconds',
              'prefill_tokens_per_s','decode_steps','decode_seconds','decode_tokens_per_s']:
        assert k in d[side], (side, k)
    s = d[side]
    assert len(s['tokens']) == len(s['ids']) and s['decode_steps'] == len(s['ids']) - 1, s
    assert s['prefill_tokens_per_s'] > 0 and s['decode_tokens_per_s'] > 0, s
f, q = d['float']['ids'], d['quantized']['ids']
assert len(d['kld']) == len(f) and all(k >= 0 for k in d['kld']), d['kld']
assert abs(d['mean_kld'] - sum(d['kld']) / len(f)) < 1e-9 and d['max_kld'] == max(d['kld'])
div = d['first_divergence']
if div is None:
    assert f == q
else:
    assert f[:div] == q[:div] and (div == min(len(f), len(q)) or f[div] != q[div]), (div, f, q)
"

# ---- kjv-llama: HF folder, against transformers -------------------------------------------
model=$("$cli" zoo path kjv-llama --quiet)
dir=$(dirname "$model")
prompt="And God said unto Moses, Speak unto the children of Israel"
check kjv-generate 0 "$cli" generate kjv-llama --prompt "$prompt" --max-tokens 64 --json
cp "$tmp/out" "$tmp/kjv.json"
expect kjv-keys report "$tmp/kjv.json" "$keys
assert d['scheme'] == 'w4-int4' and d['max_tokens'] == 64 and d['sampling']['temperature'] == 0
assert d['stop_ids'] == [0], d['stop_ids']  # kjv-llama's config.json eos_token_id
# The quantized side ran BitLens's own 4-bit kernels (or LibTorch's) on the decode path.
k = d['quantized']['kernels']
assert any('int4' in v and not v.startswith('simulated') for v in k.values()), k
assert d['float']['text'].strip(), d['float']
# The most likely tokens of both models per float token (the Generate tab's hover): five each,
# most likely first, probabilities in (0, 1]; greedy: the float model's first is its token.
assert len(d['top']) == len(d['kld']), len(d['top'])
for i, t in enumerate(d['top']):
    for side in ('float', 'quantized'):
        p = [e['p'] for e in t[side]]
        assert len(p) == 5 and all(0 < x <= 1 for x in p) and p == sorted(p, reverse=True), t
    assert t['float'][0]['id'] == d['float']['ids'][i], (i, t)"
check kjv-transformers 0 "$py" "$tmp/hf_generate.py" "$dir" "$tmp/kjv.json"
cat "$tmp/out"

# Seeded sampling repeats itself and another seed walks elsewhere.
check kjv-sample-a 0 "$cli" generate kjv-llama --prompt "$prompt" --max-tokens 24 \
  --temperature 0.9 --top-k 40 --top-p 0.95 --seed 7 --json
cp "$tmp/out" "$tmp/a.json"
check kjv-sample-b 0 "$cli" generate kjv-llama --prompt "$prompt" --max-tokens 24 \
  --temperature 0.9 --top-k 40 --top-p 0.95 --seed 7 --json
cp "$tmp/out" "$tmp/b.json"
check kjv-sample-c 0 "$cli" generate kjv-llama --prompt "$prompt" --max-tokens 24 \
  --temperature 0.9 --top-k 40 --top-p 0.95 --seed 8 --json
cp "$tmp/out" "$tmp/c.json"
expect kjv-seeded "$py" -c "
import json
a, b, c = (json.load(open('$tmp/' + n + '.json')) for n in 'abc')
assert a['sampling'] == {'temperature': 0.9, 'top_k': 40, 'top_p': 0.95, 'seed': 7}, a['sampling']
assert a['float']['ids'] == b['float']['ids'] and a['quantized']['ids'] == b['quantized']['ids']
assert a['float']['ids'] != c['float']['ids'], 'seed 8 gave what seed 7 gave'
greedy = json.load(open('$tmp/kjv.json'))['float']['ids'][:24]
assert a['float']['ids'] != greedy, 'sampling gave the greedy tokens'"

# The text report names both sides, the divergence and the speeds.
check kjv-text 0 "$cli" generate kjv-llama --prompt "$prompt" --max-tokens 8 --scheme w4-nf4
expect kjv-text-lines grep -q "^first divergence: " "$tmp/out"
expect kjv-text-speed grep -Eq "^w4-nf4 +[0-9.]+ +[0-9.]+$" "$tmp/out"

# Usage and unsupported models.
check no-prompt 2 "$cli" generate kjv-llama
check bad-top-p 2 "$cli" generate kjv-llama --prompt x --top-p 0
expect bad-top-p-message grep -q "error: --top-p needs a number in (0, 1\], got '0'" "$tmp/err"
check bad-temperature 2 "$cli" generate kjv-llama --prompt x --temperature -1
check bad-scheme 2 "$cli" generate kjv-llama --prompt x --scheme w5-int5
check not-an-lm 4 "$cli" generate fashion-cnn --prompt x --quiet
expect not-an-lm-message grep -q "generation needs a language model (this model's task is " \
  "$tmp/err"

# ---- smollm2-135m: the zoo's GGUF, against transformers' own GGUF reading -------------------
# ~1.5 GB for transformers' float32 copy and BitLens's two models: under the heavy lock.
smol=$("$cli" zoo path smollm2-135m --quiet)
check smollm2-generate 0 flock /tmp/bitlens-heavy.lock "$cli" generate smollm2-135m \
  --prompt "Once upon a time, in a small village by the sea, there lived" --max-tokens 64 --json
cp "$tmp/out" "$tmp/smol.json"
expect smollm2-keys report "$tmp/smol.json" "$keys"
check smollm2-transformers 0 flock /tmp/bitlens-heavy.lock "$py" "$tmp/hf_generate.py" \
  "$(dirname "$smol")" "$tmp/smol.json" "$(basename "$smol")"
cat "$tmp/out"
finish
