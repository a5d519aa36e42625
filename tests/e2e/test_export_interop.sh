#!/usr/bin/env bash
# End-to-end (issue #37 item 4): the export's interop options. `export --help` names them with
# their defaults and each format's rule for groups that do not divide a row; an int4 group
# that does not divide fashion-cnn's rows is refused for safetensors before anything is
# written (exit 4, the tensor named, no file) and kept for ONNX, which onnxruntime runs;
# wrange=127 writes int8 weights in [-127, 127] that onnxruntime (--verify's consumer) agrees
# with, and report.json's scheme says so.
# Usage: test_export_interop.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
limit=500

check "export-help" 0 "$cli" export --help
expect "help-wrange" grep -q "^  wrange=128 (default)" "$tmp/out"
expect "help-wrange-meaning" grep -q "127 = \[-127, 127\]" "$tmp/out"
expect "help-reduce-range" grep -q "^  reduce-range=false (default)" "$tmp/out"
expect "help-onnx-rule" grep -qE "^    onnx +int4 / int8 groups that do not divide a row: kept" "$tmp/out"
expect "help-safetensors-rule" grep -qE "^    safetensors +.*refused before writing" "$tmp/out"
expect "help-gguf-rule" grep -qE "^    gguf +.*as llama-quantize does" "$tmp/out"
check "other-help" 0 "$cli" quantize --help
expect "other-help-overview" grep -q "export --help" "$tmp/out"

# A group of 24 divides none of fashion-cnn's rows: refused for safetensors before any
# calibration or write, naming the tensor, the row length and the group.
check "safetensors-partial-group" 4 "$cli" export fashion-cnn --scheme w4-int4:group=24 \
  --format safetensors --out "$tmp/partial.safetensors"
expect "safetensors-partial-message" grep -qE "weight '[^']+' \(layer '[^']+'\) has rows of [0-9]+ inputs, which groups of 24 do not divide" "$tmp/err"
expect "safetensors-partial-nothing-written" test -z "$(ls -A "$tmp" | grep -v '^out$\|^err$')"
mkdir "$tmp/hf-folder"
check "safetensors-partial-folder" 4 "$cli" export fashion-cnn --scheme w4-int4:group=24 \
  --format safetensors --out "$tmp/hf-folder"
expect "safetensors-partial-folder-empty" test -z "$(ls -A "$tmp/hf-folder")"

# ONNX keeps the shorter last block; --verify asks onnxruntime too.
check "onnx-partial-group" 0 "$cli" export fashion-cnn --scheme w4-int4:group=24 --format onnx \
  --out "$tmp/partial.onnx" --verify --limit $limit --json
expect "onnx-partial-verify" report "$tmp/out" "
v=d['verify']
assert v['ok'] and v['weights_mismatched']==0, v
c=v.get('consumer') or {}
assert c.get('runtime','').startswith('onnxruntime '), c
assert c['ok'], c
"

# wrange=127: int8 weights in [-127, 127], scale max|w| / 127, onnxruntime agrees.
check "onnx-wrange127" 0 "$cli" export fashion-cnn --scheme static-int8:wrange=127 --format onnx \
  --out "$tmp/narrow.onnx" --verify --limit $limit --json --report "$tmp/report.json"
cp "$tmp/out" "$tmp/narrow.json"
expect "onnx-wrange127-verify" report "$tmp/narrow.json" "
v=d['verify']
assert v['ok'] and v['weights_mismatched']==0 and v['max_abs_diff_same_rounding']==0, v
c=v.get('consumer') or {}
assert c.get('runtime','').startswith('onnxruntime ') and c['ok'], c
"
expect "onnx-wrange127-codes" "$py" -c "
import onnx, numpy as np
from onnx import numpy_helper
m = onnx.load('$tmp/narrow.onnx')
found = 0
for t in m.graph.initializer:
    # block1.conv / block2.conv hold BatchNorm-folded weights: <layer>.weight_folded_quantized
    if t.name.endswith('_quantized') and '.weight' in t.name:
        q = numpy_helper.to_array(t)
        assert q.dtype == np.int8 and q.min() >= -127 and np.abs(q).max() == 127, (t.name, q.min())
        found += 1
assert found == 4, found  # block1.conv, block2.conv, fc1, logits
"
expect "report-wrange127" report "$tmp/report.json" "
c=d['scheme']['config']
assert c['weight_range']==127 and c['weight_codes']==[-127,127], c
assert 'wrange 127' in d['scheme']['display_name'], d['scheme']
"
finish
