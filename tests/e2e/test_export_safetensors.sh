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
limit=500

for scheme in static-int8 w4-int4 fp8-e4m3; do
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
want = {'static-int8': 'weight_scale', 'w4-int4': 'weight_packed', 'fp8-e4m3': 'weight_scale'}['$scheme']
assert any(k.endswith(want) for k in keys), keys
"
done

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
finish
