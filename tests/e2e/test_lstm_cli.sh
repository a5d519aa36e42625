#!/usr/bin/env bash
# End-to-end: LSTM layers through the CLI. The char-lstm zoo model (trained by BitLens on the
# KJV text on first use, then cached) quantized with dynamic and static int8, issue #5's
# must-hold (dynamic-int8 output agreement >= 99 %) on a few held-out windows; TorchScript
# archives opened without running their code, and refused with the reason when they cannot be.
# Usage: test_lstm_cli.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
src=${BITLENS_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
ts=$src/tests/data/torchscript

check zoo-list 0 "$cli" zoo list
expect zoo-list-lstm grep -q "char-lstm" "$tmp/out"

check quantize-dynamic 0 "$cli" quantize char-lstm --scheme dynamic-int8 --limit 24 \
  --report "$tmp/dyn.json"
expect dynamic-report report "$tmp/dyn.json" "
m=d['metric']; assert m['name']=='output_agreement' and m['samples']==24, m
assert m['float']==1.0 and m['quantized']>=0.99, m
ops=[l['op'] for l in d['layers']]; assert ops==['LSTM','LSTM','MatMul'], ops
for l in d['layers']:
    assert l['weight_type']=='int8' and l['act_type']=='uint8', l
    assert l['sqnr_db'] is not None and l['sqnr_db'] > 20, l
    assert l['kernel'].startswith('simulated') or l['op']=='MatMul', l
lstm=d['layers'][0]; assert lstm['params']==4*256*(64+256), lstm['params']
assert lstm['bytes_quantized'] < lstm['bytes_float']/3.5, lstm
"
check quantize-static 0 "$cli" quantize char-lstm --scheme static-int8:calib=16 --limit 8 \
  --report "$tmp/static.json"
expect static-report report "$tmp/static.json" "
m=d['metric']; assert m['quantized']>=0.95, m
assert all(l['act_clip']['method']=='minmax' for l in d['layers']), d['layers']
"
# QDQ ONNX cannot hold a quantized recurrence: refused before anything is written.
check export-refused 4 "$cli" quantize char-lstm --scheme dynamic-int8 --limit 2 \
  --out "$tmp/q.onnx"
expect export-refused-why grep -q "is an LSTM" "$tmp/err"
expect export-no-file test ! -e "$tmp/q.onnx"

# TorchScript: read, never run.
check info-script 0 "$cli" info "$ts/lstm_script.pt"
expect info-untrusted grep -q "untrusted: TorchScript holds code; BitLens only reads its tensors" "$tmp/out"
expect info-lstm grep -q "LSTM" "$tmp/out"
check info-script-json 0 "$cli" info "$ts/lstm_script.pt" --json
expect info-json report "$tmp/out" "
assert d['format']=='torchscript', d['format']
assert d['notes'][0].startswith('untrusted: TorchScript'), d['notes']
assert [l['op'] for l in d['layers']].count('LSTM')==2
"
check info-mlp 4 "$cli" info "$ts/mlp_trace.pt"
expect info-mlp-params grep -q "TorchScript code is not run.*parameters listed: table float32 \[3, 4\].*fc1.weight float32 \[4, 5\]" "$tmp/err"
for bad in truncated bad_opcode storage_past_end view_past_end; do
  check "info-$bad" 3 "$cli" info "$ts/$bad.pt"
  expect "info-$bad-path" grep -q "^error: $ts/$bad.pt: " "$tmp/err"
done

# A TorchScript LSTM quantized like any model (batch-first input [N, 5, 4]).
"$py" -c "
import numpy as np
np.save('$tmp/seq.npy', np.random.default_rng(7).standard_normal((32, 5, 4)).astype(np.float32))"
check quantize-script 0 "$cli" quantize "$ts/lstm_script.pt" --scheme dynamic-int8 \
  --eval "$tmp/seq.npy" --report "$tmp/script.json"
expect quantize-script-report report "$tmp/script.json" "
assert d['model']['format']=='torchscript', d['model']
assert d['metric']['name']=='output_agreement', d['metric']
assert [l['op'] for l in d['layers']]==['LSTM','LSTM'], d['layers']
"
finish
