#!/usr/bin/env bash
# End-to-end: export fashion-cnn as safetensors in the compressed-tensors layout (static-int8,
# w4-int4, fp8-e4m3) with --verify; the pip `safetensors` package reads the file and finds the
# quantization_config; schemes the layout cannot hold exit 4 and leave no file.
# Usage: test_export_safetensors.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here="$(dirname "${BASH_SOURCE[0]}")"
limit=500

# fashion-cnn's rows (9, 288, 3136 and 128 inputs) have no common group size: int4 goes per
# channel; the preset's groups of 64 (9 and 288 not divisible) are refused (issue #37, below).
for scheme in static-int8 w4-int4:per=channel fp8-e4m3; do
  out="$tmp/$scheme/model.safetensors"
  mkdir -p "$tmp/$scheme"
  check "export-$scheme" 0 "$cli" export fashion-cnn --scheme $scheme --format safetensors \
    --out "$out" --verify --limit $limit --json
  cp "$tmp/out" "$tmp/$scheme.json"
  expect "export-$scheme-json" report "$tmp/$scheme.json" "
e=d; v=e['verify']
assert e['format']=='safetensors' and e['bytes']>0 and e['quantized_layers']==4, e
assert v['ok'] and v['weights_mismatched']==0 and v['samples']==$limit, v
assert v['max_abs_diff']==0, v
"
  expect "python-reads-$scheme" "$py" -c "
import json
from safetensors import safe_open
with safe_open('$out', 'pt') as f:
    meta = f.metadata(); keys = list(f.keys())
q = json.loads(meta['quantization_config'])
assert q['quant_method'] == 'compressed-tensors', q
cfg = json.load(open('$tmp/$scheme/config.json'))
assert cfg['quantization_config'] == q
want = {'static-int8': 'weight_scale', 'w4-int4:per=channel': 'weight_packed', 'fp8-e4m3': 'weight_scale'}['$scheme']
assert any(k.endswith(want) for k in keys), keys
"
  # Not a Hugging Face model (its config.json holds only the quantization_config): transformers
  # is not asked, and the verify line says why.
  expect "consumer-skipped-$scheme" report "$tmp/$scheme.json" "
c = d['verify']['consumer']
assert c['runtime'] is None and 'names no model_type' in c['skipped'], c"
done

# compressed-tensors raises on a row its group size does not divide: refused before anything is
# written, naming the tensor (exporting::checkPartialGroups).
check w4-int4-partial-groups-refused 4 "$cli" export fashion-cnn --scheme w4-int4 \
  --format safetensors --out "$tmp/w4-groups.safetensors"
expect w4-int4-partial-groups-message grep -q "has rows of 9 inputs, which groups of 64 do not divide" "$tmp/err"
expect w4-int4-partial-groups-no-file test ! -e "$tmp/w4-groups.safetensors"

check nf4-refused 4 "$cli" export fashion-cnn --scheme w4-nf4 --format safetensors \
  --out "$tmp/nf4.safetensors" --limit 100
expect nf4-message grep -q "compressed-tensors has no layout for nf4" "$tmp/err"
expect nf4-no-file test ! -e "$tmp/nf4.safetensors"
check smooth-refused 4 "$cli" export fashion-cnn --scheme smoothquant-int8 --format safetensors \
  --out "$tmp/sq.safetensors" --limit 100
expect smooth-no-file test ! -e "$tmp/sq.safetensors"
mkdir -p "$tmp/q"
check by-extension 0 "$cli" quantize fashion-cnn --scheme static-int8 --limit 200 \
  --out "$tmp/q/model.safetensors" --quiet
expect by-extension-file test -s "$tmp/q/model.safetensors"
# A Hugging Face model, exported to a folder: the folder is complete (the source config.json
# with quantization_config merged in, the tokenizer files) and transformers with
# compressed-tensors loads it with no missing or unexpected parameter; its outputs agree with
# BitLens's in-app quantized model (`run --scheme`) on the same tokens.
if "$cli" zoo path minilm-l6 --quiet > /dev/null 2>&1; then
  folder="$tmp/minilm-int8"
  check minilm-export-folder 0 "$cli" export minilm-l6 --scheme dynamic-int8 --format safetensors \
    --out "$folder" --limit 8 --json
  expect minilm-folder-files report "$tmp/out" "
import os
assert d['path']=='$folder/model.safetensors', d['path']
names=sorted(os.path.basename(f) for f in d['folder_files'])
assert names==['config.json','special_tokens_map.json','tokenizer.json','tokenizer_config.json','vocab.txt'], names
assert not d['notes'], d['notes']"
  check minilm-transformers-loads 0 "$py" - "$folder" "$tmp" <<'PY'
import io, sys, contextlib, logging
import numpy as np, torch
from transformers import AutoModel, AutoTokenizer
from transformers.utils import logging as hf_logging
folder, tmp = sys.argv[1], sys.argv[2]
captured = io.StringIO()
hf_logging.set_verbosity_warning()
handler = logging.StreamHandler(captured)
hf_logging.get_logger().addHandler(handler)
with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
    model = AutoModel.from_pretrained(folder)
text = captured.getvalue()
assert "MISSING" not in text and "UNEXPECTED" not in text and "newly initialized" not in text, text[-2000:]
assert type(model.config.quantization_config).__name__ == "CompressedTensorsConfig"
tok = AutoTokenizer.from_pretrained(folder)
verses = ["In the beginning God created the heaven and the earth.",
          "And the earth was without form, and void; and darkness was upon the face of the deep.",
          "And God said, Let there be light: and there was light."]
enc = tok(verses, padding=True, return_tensors="pt")
with torch.no_grad():
    out = model(**enc).last_hidden_state.numpy()
np.save(tmp + "/ids.npy", enc["input_ids"].numpy())
np.save(tmp + "/mask.npy", enc["attention_mask"].numpy())
np.save(tmp + "/transformers.npy", out)
print("transformers", out.shape)
PY
  check minilm-run-quantized 0 "$cli" run minilm-l6 --scheme dynamic-int8 --limit 8 \
    --input "$tmp/ids.npy,$tmp/mask.npy" --out "$tmp/bl" --quiet
  # Why the whole six-layer model is held only to the float-vs-quantized level (cosine 0.99 /
  # 0.98), against transformers + compressed-tensors and against the plain torch reference of the
  # file's semantics alike: the quantized encoder is chaotic. Perturbing its embeddings by one
  # part in a million moves the reference's own output to mean cosine 0.9959 (min 0.9934) on an
  # AMD EPYC (Zen 4), as much as float vs quantized (0.9915): a GEMM that differs in the last bit
  # between CPUs (AMX on Sapphire Rapids, AVX2, AVX-512) flips a uint8 rounding that six layers
  # amplify. Measured 0.99994 / 0.99620 / 0.99396 on three CPUs (issue #37). The exact semantics
  # are checked below on a cut of the same model, where nothing amplifies.
  check minilm-transformers-vs-bitlens 0 "$py" -c "
import numpy as np
a=np.load('$tmp/transformers.npy'); b=np.load('$tmp/bl/last_hidden_state.npy')
m=np.load('$tmp/mask.npy').astype(bool); a=a[m]; b=b[m]
cos=(a*b).sum(1)/np.linalg.norm(a,axis=1)/np.linalg.norm(b,axis=1)
print('mean cosine %.5f, min %.5f' % (cos.mean(), cos.min()))
assert cos.mean() >= 0.99 and cos.min() >= 0.98, (cos.mean(), cos.min())"
  source_folder="$(cd "$(dirname "$("$cli" zoo path minilm-l6 --quiet)")" && pwd)"
  check minilm-reference-vs-bitlens 0 "$py" "$here/bert_int8_reference.py" "$folder" \
    "$source_folder" "$tmp/ids.npy" "$tmp/mask.npy" "$tmp/bl/last_hidden_state.npy" 0.99 0.98
  cat "$tmp/out"
  # The semantics, exactly: minilm's first encoder layer alone, exported and run by BitLens, vs
  # the torch reference of what the file declares (per-tensor dynamic range over the whole padded
  # batch, padded positions included). Measured mean cosine 1.000000, max |diff| 9.5e-07 on an
  # AMD EPYC (Zen 4); with the range over the unpadded positions only, 0.99694: the bound tells
  # the two apart.
  check minilm-cut 0 "$py" "$here/cut_bert.py" "$source_folder" "$tmp/minilm-1" 1
  printf '%s\n' "In the beginning God created the heaven and the earth." \
    "And God said, Let there be light: and there was light." > "$tmp/verses.txt"
  check minilm-1-export 0 "$cli" export "$tmp/minilm-1" --scheme dynamic-int8 --format safetensors \
    --out "$tmp/minilm-1-int8" --calib "$tmp/verses.txt" --quiet
  check minilm-1-run 0 "$cli" run "$tmp/minilm-1" --scheme dynamic-int8 --calib "$tmp/verses.txt" \
    --input "$tmp/ids.npy,$tmp/mask.npy" --out "$tmp/bl1" --quiet
  check minilm-1-reference-vs-bitlens 0 "$py" "$here/bert_int8_reference.py" "$tmp/minilm-1-int8" \
    "$tmp/minilm-1" "$tmp/ids.npy" "$tmp/mask.npy" "$tmp/bl1/last_hidden_state.npy" 0.99999 0.9999
  cat "$tmp/out"
  check minilm-1-valid-only-range-differs 0 "$py" "$here/bert_int8_reference.py" \
    "$tmp/minilm-1-int8" "$tmp/minilm-1" "$tmp/ids.npy" "$tmp/mask.npy" \
    "$tmp/bl1/last_hidden_state.npy" 0.9995 0 --valid-only-range --below
  cat "$tmp/out"
  # --verify of the encoder (issue #37 item 2; it failed before, feeding one input to a graph
  # that declares input_ids and attention_mask): the file's weights and activation scales run
  # in the in-app model give its outputs exactly, and the figures are printed.
  check minilm-verify 0 "$cli" export minilm-l6 --scheme dynamic-int8 --format safetensors \
    --out "$tmp/minilm-verify" --verify --limit 4 --seq-len 64
  cat "$tmp/out"
  expect minilm-verify-figures grep -qE "^verify +ok: safetensors file vs in-app model on 4 \
samples: ([0-9]+)/\\1 quantized weights identical, 0 other tensors differ, .*max \|diff\| 0 \
running the model from the file \(must be 0\); embedding cosine file vs in-app 1 \(min 1\)" \
    "$tmp/out"
  # Verification by the consumer (issue #37 item 3): transformers with compressed-tensors loads
  # the folder (AutoModel, float32) and runs the first batch; its own figures are on the line.
  expect minilm-verify-transformers grep -qE "; transformers [0-9.]+ \+ compressed-tensors \
[0-9.]+ on 4 samples: max \|diff\| [0-9.e+-]+ vs in-app, embedding cosine [0-9.]+ \(min [0-9.]+\)$" \
    "$tmp/out"
else
  skip "minilm-l6: not built (offline? bitlens-cli zoo build minilm-l6)"
fi

# A zoo language model (kjv-llama, a Hugging Face folder) to packed int4 (symmetric): --verify
# asks transformers with compressed-tensors, which decompresses the weights and runs the same
# windows. Measured on AMD EPYC Zen 4: max |diff| 1.96e-05 vs in-app, same top-1 100 % of 2048,
# perplexity 83.2 (in-app 83.2), mean KLD 1.5e-13.
if "$cli" zoo path kjv-llama --quiet > /dev/null 2>&1; then
  check kjv-llama-w4-verify 0 "$cli" export kjv-llama --scheme w4-int4:sym=true \
    --format safetensors --out "$tmp/kjv-llama-w4" --verify --limit 8 --json
  expect kjv-llama-w4-transformers report "$tmp/out" "
v = d['verify']; c = v['consumer']
print('kjv-llama w4-int4:sym=true:', c['runtime'], 'max |diff|', c['max_abs_diff'], 'same top-1',
      c['same_top1_rate'], 'perplexity', c['metric_file'], 'in-app', c['metric_app'], 'KLD', c['mean_kld'])
assert v['ok'] and c['ok'] and c['runtime'].startswith('transformers '), v
assert c['samples'] == 8 and c['same_top1_rate'] >= 0.99 and c['mean_kld'] <= 1e-6, c
assert abs(c['metric_file'] / c['metric_app'] - 1) <= 1e-4, c
assert c['max_abs_diff'] <= 1e-3 * v['output_abs_max'], (c, v['output_abs_max'])"
else
  skip "kjv-llama: not built (bitlens-cli zoo build kjv-llama)"
fi

# MX / NVFP4 weight-only exports of a tiny random Hugging Face llama (make_tiny_llama.py), as
# llm-compressor's NVFP4A16 / MXFP4A16 / MXFP8A16 folders: --verify reads them back, and
# transformers + compressed-tensors loads each folder (no missing or unexpected parameter,
# every targeted Linear decompressed) and gives the logits BitLens's `run --scheme` gives.
data="$(cd "$(dirname "${BASH_SOURCE[0]}")/../data" && pwd)"
"$py" "$(dirname "${BASH_SOURCE[0]}")/make_tiny_llama.py" "$tmp/llama" "$data/text/bpe_smollm.json" \
  --seed 3 --qk-scale 0.1
"$py" -c "
import json, numpy as np
vocab = json.load(open('$tmp/llama/hf/config.json'))['vocab_size']
np.save('$tmp/llama/ids.npy', ((np.arange(40, dtype=np.int64) * 29 + 3) % vocab).reshape(1, -1))"
check llama-float 0 "$cli" run "$tmp/llama/hf" --input "$tmp/llama/ids.npy" --out "$tmp/llama/float"
# w4-int4:sym=true too (packed int4, no zero points): asymmetric int4 folders are refused by
# transformers 5.23 + compressed-tensors 0.20 (zero-point size mismatch), which the export notes.
for scheme in nvfp4-w mxfp4-w mxfp8-e4m3-w w4-int4:sym=true; do
  folder="$tmp/llama-${scheme//[:=]/_}"
  check "llama-export-$scheme" 0 "$cli" export "$tmp/llama/hf" --scheme $scheme \
    --format safetensors --out "$folder" --verify --eval "$tmp/llama/text.txt" --seq-len 32 \
    --limit 4 --json
  expect "llama-export-$scheme-json" report "$tmp/out" "
v = d['verify']
assert d['format'] == 'safetensors' and d['quantized_layers'] >= 14, d
assert v['ok'] and v['weights_mismatched'] == 0 and v['samples'] == 4, v
assert v['max_abs_diff'] <= (0 if '$scheme' != 'nvfp4-w' else 1e-5 * max(v['output_abs_max'], 1e-6)), v
assert v['task'] == 'lm' and v['tokens'] == 4 * 31 and v['top1_positions'] == 4 * 32, v
assert v['same_top1_rate'] == 1 and v['mean_kld'] < 1e-9, v
assert abs(v['perplexity_file'] / v['perplexity_app'] - 1) < 1e-6, v
assert not any('zero points packed' in n for n in d['notes']), d['notes']
# transformers with compressed-tensors loaded the folder and ran the first batch: the same
# perplexity to 0.2 % or a mean KLD within 5e-3 of the in-app model (issue #37 item 3).
c = v['consumer']
assert c['runtime'].startswith('transformers ') and 'compressed-tensors' in c['runtime'], c
assert c['ok'] and c['samples'] == 4 and c['top1_positions'] == 4 * 32, c
print('$scheme consumer:', c['runtime'], 'perplexity', c['metric_file'], 'in-app', c['metric_app'],
      'mean KLD', c['mean_kld'], 'same top-1', c['same_top1_rate'])
"
  check "llama-bitlens-$scheme" 0 "$cli" run "$tmp/llama/hf" --scheme $scheme \
    --input "$tmp/llama/ids.npy" --out "$tmp/llama/${scheme//[:=]/_}" --calib "$tmp/llama/text.txt" \
    --seq-len 32 --limit 2
  check "llama-transformers-$scheme" 0 "$py" - "$folder" "$tmp/llama" "$scheme" <<'PY'
import contextlib, glob, io, logging, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging
folder, d, scheme = sys.argv[1:4]
captured = io.StringIO()
hf_logging.set_verbosity_warning()
hf_logging.get_logger().addHandler(logging.StreamHandler(captured))
# bfloat16, as such checkpoints are loaded: compressed-tensors 0.20 decompresses E2M1 into
# bfloat16, and a float32 model then fails in F.linear (float vs BFloat16).
with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
text = captured.getvalue()
assert "MISSING" not in text and "UNEXPECTED" not in text and "MISMATCH" not in text \
    and "newly initialized" not in text, text[-2000:]
qc = model.config.quantization_config
assert type(qc).__name__ == "CompressedTensorsConfig", type(qc)
targets = qc.quantization_config.config_groups["group_0"].targets
assert len(targets) == 14 and "lm_head" not in targets, targets
ids = torch.tensor(np.load(d + "/ids.npy"))
with torch.no_grad():
    t16 = model(input_ids=ids).logits[0].float().numpy()
# The weights transformers decompressed, in the float32 source model (the rest of it float32
# as BitLens runs it): what the file means, without bfloat16 arithmetic.
sd = model.state_dict()
ref = AutoModelForCausalLM.from_pretrained(d + "/hf", dtype=torch.float32)
for name in targets:
    ref.get_submodule(name).weight.data = sd[name + ".weight"].float()
with torch.no_grad():
    t32 = ref(input_ids=ids).logits[0].numpy()
one = lambda sub: np.load(glob.glob(f"{d}/{sub}/*.npy")[0]).reshape(t32.shape)
q, f = one(scheme.replace(":", "_").replace("=", "_")), one("float")
top = np.abs(q).max()
rel, own = np.abs(t32 - q).max() / top, np.abs(f - q).max() / top
rel16 = np.abs(t16 - q).max() / top
top1 = (t16.argmax(1) == q.argmax(1)).mean()
print(f"{scheme}: transformers' decompressed weights, float32: max |diff| / max |logit| "
      f"{rel:.3g}; as loaded (bfloat16) {rel16:.3g}, top-1 agreement {top1:.3f}; the "
      f"quantization's own effect (BitLens float vs {scheme}) {own:.3g}")
# MX elements times powers of two are exact in bfloat16; NVFP4's element x E4M3 / global
# scale and int4 code x float scale are rounded to it.
assert rel <= (1e-5 if scheme.startswith("mx") else 0.05 * own), (rel, own)
assert rel16 <= 0.25 * own and top1 >= 0.9, (rel16, own, top1)
PY
  cat "$tmp/out"
done
check llama-w4-asym-export 0 "$cli" export "$tmp/llama/hf" --scheme w4-int4 --format safetensors \
  --out "$tmp/llama-w4-asym" --eval "$tmp/llama/text.txt" --seq-len 32 --limit 2 --json
expect llama-w4-asym-note report "$tmp/out" "
assert any('zero points packed' in n and 'sym=true' in n for n in d['notes']), d['notes']"
# Why transformers refuses it (issue #37): compressed-tensors 0.20 packs zero points along the
# rows (PackedQuantizationCompressor.compress / .decompress, pack_to_int32(packed_dim=0)) but
# its compress of the meta-device model transformers builds before loading keeps them
# unpacked, so the parameter is [rows, groups] against the file's [rows / 8, groups]. The
# --verify asks transformers, which refuses: a failed verification (exit 5) naming the
# mismatch and the cause.
check llama-w4-asym-verify-refused 5 "$cli" export "$tmp/llama/hf" --scheme w4-int4 \
  --format safetensors --out "$tmp/llama-w4-asym-v" --eval "$tmp/llama/text.txt" --seq-len 32 \
  --limit 2 --verify
expect llama-w4-asym-verify-message grep -qE "transformers [0-9.]+ \+ compressed-tensors [0-9.]+: \
refuses the folder: size mismatch model\.layers\.0\.mlp\.down_proj\.weight_zero_point \(file \[32, 8\], \
model \[256, 8\]\).*meta-device model transformers builds before loading leaves the zero points \
unpacked" "$tmp/err"
# The file itself is what compressed-tensors means: its own decompressor, run on each module of
# the folder, gives the weights with which a float32 transformers model computes BitLens's
# in-app w4-int4 logits.
check llama-bitlens-w4-asym 0 "$cli" run "$tmp/llama/hf" --scheme w4-int4 \
  --input "$tmp/llama/ids.npy" --out "$tmp/llama/w4-asym" --calib "$tmp/llama/text.txt" \
  --seq-len 32 --limit 2
check llama-w4-asym-compressed-tensors-decompress 0 "$py" - "$tmp/llama-w4-asym" "$tmp/llama" <<'PY'
import glob, json, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch
from safetensors.torch import load_file
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
from compressed_tensors.quantization import QuantizationScheme
from transformers import AutoModelForCausalLM
folder, d = sys.argv[1:3]
sd = load_file(folder + "/model.safetensors")
group = json.load(open(folder + "/config.json"))["quantization_config"]["config_groups"]["group_0"]
assert group["weights"]["symmetric"] is False, group
scheme = QuantizationScheme(targets=group["targets"], weights=group["weights"])
ref = AutoModelForCausalLM.from_pretrained(d + "/hf", dtype=torch.float32)
modules = sorted({k.rsplit(".", 1)[0] for k in sd if k.endswith(".weight_packed")})
assert len(modules) == 14, modules
for m in modules:
    local = {k.rsplit(".", 1)[1]: v for k, v in sd.items() if k.rsplit(".", 1)[0] == m}
    rows = int(local["weight_shape"][0])
    assert local["weight_zero_point"].shape[0] == (rows + 7) // 8, (m, local["weight_zero_point"].shape)
    ref.get_submodule(m).weight.data = PackedQuantizationCompressor.decompress(local, scheme)["weight"].float()
ids = torch.tensor(np.load(d + "/ids.npy"))
with torch.no_grad():
    t = ref(input_ids=ids).logits[0].numpy()
one = lambda sub: np.load(glob.glob(f"{d}/{sub}/*.npy")[0]).reshape(t.shape)
q, f = one("w4-asym"), one("float")
top = np.abs(q).max()
rel, own = np.abs(t - q).max() / top, np.abs(f - q).max() / top
print(f"w4-int4 asymmetric: compressed-tensors' decompress of the file, float32 transformers: "
      f"max |diff| / max |logit| {rel:.3g} vs BitLens in-app; the quantization's own effect {own:.3g}")
assert rel <= 1e-4 * max(own, 1e-3), (rel, own)
PY
cat "$tmp/out"
check llama-nvfp4-activations-refused 4 "$cli" export "$tmp/llama/hf" --scheme nvfp4 \
  --format safetensors --out "$tmp/llama-nvfp4-a" --eval "$tmp/llama/text.txt" --seq-len 32 --limit 2
expect llama-nvfp4-activations-message grep -q "export the weight-only preset" "$tmp/err"
expect llama-nvfp4-activations-no-file test ! -e "$tmp/llama-nvfp4-a/model.safetensors"

# A write that fails after the export (the report's folder is missing) leaves no model file.
mkdir -p "$tmp/rf2"
check report-fails-cleans 3 "$cli" export fashion-cnn --scheme static-int8 --format safetensors \
  --out "$tmp/rf2/model.safetensors" --limit 100 --report "$tmp/no/such/r.json"
expect report-fails-no-model test -z "$(ls -A "$tmp/rf2")"

finish
