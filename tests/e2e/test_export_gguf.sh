#!/usr/bin/env bash
# End-to-end: GGUF export of llama models. A random tiny Hugging Face llama (made here with
# numpy + safetensors, the test BPE vocabulary as its tokenizer.json) is exported with the
# gguf-* presets and --verify (the reloaded file must run exactly as the in-app model); the pip
# `gguf` package reads each file: metadata, tensor names and types, Q8_0 / Q4_0 / Q4_1 block
# bytes equal to gguf-py's own quantizer on the same float rows (q/k permuted as llama.cpp's
# converter does), and gguf-py's dequantized tensors equal BitLens' (the file re-exported with
# every layer float, i.e. BitLens' reader's values as F32). Schemes and models GGUF cannot hold
# exit 4 and leave no file. On smollm2-135m (when built) gguf-q4_1 is exported and verified and
# its blocks compared with the zoo file's own Q4_1 blocks.
# Usage: test_export_gguf.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
data="$(cd "$(dirname "${BASH_SOURCE[0]}")/../data" && pwd)"

if ! "$py" -c "import gguf, safetensors" 2> /dev/null; then
  echo "FAIL: the venv python has no gguf / safetensors package (scripts/bootstrap installs them)"
  exit 1
fi

# The tiny random llama (make_tiny_llama.py: hf/, text.txt, allfloat.json).
"$py" "$(dirname "${BASH_SOURCE[0]}")/make_tiny_llama.py" "$tmp" "$data/text/bpe_smollm.json"

# Sensitivity of a language model ranked by the KL divergence of its next-token distribution.
check sensitivity-kld 0 "$cli" sensitivity "$tmp/hf" --scheme w4-int4 --by kld --eval "$tmp/text.txt" \
  --seq-len 32 --limit 4 --report "$tmp/sens.json" --quiet
expect sensitivity-kld-rows report "$tmp/sens.json" "
r = d['layers']
assert d['rank'] == 'kld' and d['metric']['name'] == 'perplexity' and len(r) == 14, d
assert all(x['kld'] > 0 for x in r) and all(r[i]['kld'] >= r[i+1]['kld'] for i in range(len(r)-1)), r
"
expect sensitivity-kld-table grep -q "mean KLD" "$tmp/out"

# mxfp4-w writes BitLens's own OCP MXFP4 codes and E8M0 exponents as ggml's MXFP4 blocks (the
# head stays float32, as the MX presets keep it).
for scheme in gguf-q8_0 gguf-q4_0 gguf-q4_1 gguf-q4_k gguf-f16 mxfp4-w; do
  out="$tmp/$scheme.gguf"
  layers=15; [ "$scheme" = mxfp4-w ] && layers=14
  check "export-$scheme" 0 "$cli" export "$tmp/hf" --scheme $scheme --format gguf --out "$out" \
    --verify --eval "$tmp/text.txt" --seq-len 32 --limit 4 --json
  cp "$tmp/out" "$tmp/$scheme.json"
  # Without --verify a gguf-* file is streamed from the open model's weights, one tensor at a
  # time, nothing prepared (issue #38): the same bytes as the verified export.
  if [ "$scheme" != mxfp4-w ]; then
    check "stream-$scheme" 0 "$cli" export "$tmp/hf" --scheme $scheme --format gguf \
      --out "$tmp/$scheme.stream.gguf" --eval "$tmp/text.txt" --seq-len 32 --limit 4 --quiet
    expect "stream-$scheme-same-bytes" cmp "$out" "$tmp/$scheme.stream.gguf"
  fi
  expect "export-$scheme-json" report "$tmp/$scheme.json" "
v = d['verify']
assert d['format'] == 'gguf' and d['bytes'] > 0 and d['quantized_layers'] == $layers, d
assert v['ok'] and v['max_abs_diff'] == 0 and v['weights_checked'] == $layers, v
assert v['weights_mismatched'] == 0 and v['samples'] == 4, v
assert v['task'] == 'lm' and v['tokens'] == 4 * 31 and v['same_top1_rate'] == 1, v
assert v['mean_kld'] == 0 and v['perplexity_file'] == v['perplexity_app'], v
assert any('tokenizer: byte-level BPE' in n for n in d['notes']), d['notes']
"
  # BitLens' reading of the file, as F32, to compare with gguf-py's dequantization.
  check "reexport-$scheme" 0 "$cli" export "$out" --scheme "$tmp/allfloat.json" --format gguf \
    --out "$tmp/$scheme.f32.gguf" --eval "$tmp/text.txt" --seq-len 32 --limit 2 --quiet
  expect "gguf-py-$scheme" "$py" - "$tmp" "$scheme" <<'PY'
import sys
import numpy as np
from gguf import GGUFReader, GGMLQuantizationType as T
from gguf.quants import dequantize, quantize
from safetensors.numpy import load_file
d, scheme = sys.argv[1], sys.argv[2]
f = GGUFReader(f"{d}/{scheme}.gguf")
ref = GGUFReader(f"{d}/{scheme}.gguf".replace(".gguf", ".f32.gguf"))
kv = {k: f.fields[k] for k in f.fields}
def val(k):
    fld = kv[k]
    return fld.parts[fld.data[0]].tobytes().decode() if fld.types[0].name == "STRING" \
        else fld.parts[fld.data[0]][0]
assert val("general.architecture") == "llama"
for k, want in [("llama.block_count", 2), ("llama.embedding_length", 256),
                ("llama.feed_forward_length", 512), ("llama.attention.head_count", 4),
                ("llama.attention.head_count_kv", 2), ("llama.rope.dimension_count", 64),
                ("llama.vocab_size", 600), ("llama.context_length", 256),
                ("tokenizer.ggml.bos_token_id", 1), ("tokenizer.ggml.eos_token_id", 2)]:
    assert val(k) == want, (k, val(k))
assert abs(val("llama.rope.freq_base") - 10000.0) < 1e-3
assert abs(val("llama.attention.layer_norm_rms_epsilon") - 1e-5) < 1e-9
assert len(kv["tokenizer.ggml.tokens"].data) == 600
want = {"gguf-q8_0": T.Q8_0, "gguf-q4_0": T.Q4_0, "gguf-q4_1": T.Q4_1, "gguf-q4_k": T.Q4_K,
        "gguf-f16": T.F16, "mxfp4-w": T.MXFP4}[scheme]
names = {t.name: t for t in f.tensors}
refs = {t.name: t for t in ref.tensors}
assert len(names) == 2 * 9 + 3, sorted(names)
w = load_file(f"{d}/hf/model.safetensors")
def permute(x, n):
    return x.reshape(n, 2, x.shape[0] // n // 2, x.shape[1]).swapaxes(1, 2).reshape(x.shape)
hf = {"blk.0.attn_q.weight": permute(w["model.layers.0.self_attn.q_proj.weight"], 4),
      "blk.1.attn_k.weight": permute(w["model.layers.1.self_attn.k_proj.weight"], 2),
      "blk.0.ffn_down.weight": w["model.layers.0.mlp.down_proj.weight"],
      "output.weight": w["model.embed_tokens.weight"]}
checked = 0
for name, t in names.items():
    if name.endswith("norm.weight"):
        assert t.tensor_type == T.F32, (name, t.tensor_type)
    elif scheme == "mxfp4-w" and name == "output.weight":
        assert t.tensor_type == T.F32, (name, t.tensor_type)
    elif name != "token_embd.weight":
        assert t.tensor_type == want, (name, t.tensor_type)
    assert refs[name].tensor_type == T.F32 or name == "token_embd.weight", name
    mine = dequantize(t.data, t.tensor_type)
    theirs = dequantize(refs[name].data, refs[name].tensor_type)
    assert mine.shape == theirs.shape, (name, mine.shape, theirs.shape)
    assert np.array_equal(mine, theirs), (name, np.abs(mine - theirs).max())
    checked += 1
    if name in hf and want in (T.Q8_0, T.Q4_0, T.Q4_1):
        own = quantize(hf[name], want)
        assert own.tobytes() == np.asarray(t.data).tobytes(), name
assert checked == len(names)
print(scheme, "ok", checked, "tensors")
PY
done

# Refusals: exit 4, no file.
check static-refused 4 "$cli" export "$tmp/hf" --scheme static-int8 --format gguf \
  --out "$tmp/st.gguf" --eval "$tmp/text.txt" --seq-len 32 --limit 2
expect static-names-presets grep -q "gguf-q4_0" "$tmp/err"
expect static-no-file test ! -e "$tmp/st.gguf"
check onnx-refuses-ggml 4 "$cli" export "$tmp/hf" --scheme gguf-q4_0 --format onnx \
  --out "$tmp/g.onnx" --eval "$tmp/text.txt" --seq-len 32 --limit 2
expect onnx-no-file test ! -e "$tmp/g.onnx"
check non-llama-refused 4 "$cli" export fashion-cnn --scheme gguf-q8_0 --format gguf \
  --out "$tmp/cnn.gguf" --limit 50
expect non-llama-message grep -q "llama-family" "$tmp/err"
expect non-llama-no-file test ! -e "$tmp/cnn.gguf"

# ---- smollm2-135m from the zoo ------------------------------------------------------------
"$cli" zoo list --json > "$tmp/zoo.json" 2> /dev/null
if "$py" -c "import json,sys; sys.exit(0 if any(e['name'] == 'smollm2-135m' and e['built'] for e in json.load(open('$tmp/zoo.json'))) else 1)"; then
  src=$("$cli" zoo path smollm2-135m --quiet)
  check smollm-export 0 "$cli" export smollm2-135m --scheme gguf-q4_1 --format gguf \
    --out "$tmp/smollm.gguf" --verify --seq-len 64 --limit 2 --json
  cp "$tmp/out" "$tmp/smollm.json"
  expect smollm-verify report "$tmp/smollm.json" "
v = d['verify']
assert v['ok'] and v['max_abs_diff'] == 0 and v['weights_mismatched'] == 0, v
assert any('tokenizer.* keys copied' in n for n in d['notes']), d['notes']
"
  expect smollm-gguf-py "$py" - "$tmp/smollm.gguf" "$src" <<'PY'
import sys
import numpy as np
from gguf import GGUFReader
out, src = GGUFReader(sys.argv[1]), GGUFReader(sys.argv[2])
a = {t.name: t for t in out.tensors}
b = {t.name: t for t in src.tensors}
assert len(out.fields["tokenizer.ggml.tokens"].data) == len(src.fields["tokenizer.ggml.tokens"].data)
same = [n for n in a if n in b and a[n].tensor_type == b[n].tensor_type
        and np.asarray(a[n].data).tobytes() == np.asarray(b[n].data).tobytes()]
q41 = [n for n in b if b[n].tensor_type.name == "Q4_1"]
print(f"smollm2 gguf-q4_1: {len(same)} of {len(a)} tensors byte-identical to the zoo file; "
      f"{sum(n in same for n in q41)} of {len(q41)} Q4_1 source tensors")
assert all(n in a for n in b), set(b) - set(a)
PY
else
  skip "smollm2-135m: not built (offline? bitlens-cli zoo build smollm2-135m)"
fi
finish
