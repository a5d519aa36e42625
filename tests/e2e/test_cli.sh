#!/usr/bin/env bash
# End-to-end: bitlens-cli as a user runs it — exit codes, messages and JSON keys of the contract.
# Usage: test_cli.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
json() { "$py" -c "import json,sys; d=json.load(open('$tmp/out')); $1"; }
# Writes a float32 .npy of the given shape (a Python tuple literal) filled with zeros.
npy_zeros() { # npy_zeros FILE SHAPE COUNT
  local header="{'descr': '<f4', 'fortran_order': False, 'shape': $2, }"
  local total=$(( (10 + ${#header} + 1 + 63) / 64 * 64 ))
  local pad=$(( total - 10 - ${#header} - 1 ))
  local hlen=$(( total - 10 ))
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((hlen % 256)))\\x$(printf %02x $((hlen / 256)))"
    printf '%s%*s\n' "$header" "$pad" ''
    head -c $(( $3 * 4 )) /dev/zero
  } > "$1"
}

# --version and usage
check version 0 "$cli" --version
expect version-text grep -q '^bitlens-cli [0-9]' "$tmp/out"
check no-args 2 "$cli"
check unknown-command 2 "$cli" frobnicate
check unknown-option 2 "$cli" info fashion-cnn --frob
check zoo-unknown 2 "$cli" zoo path no-such-model

# zoo
check zoo-list 0 "$cli" zoo list
expect zoo-list-has-fashion grep -q '^fashion-cnn' "$tmp/out"
check zoo-path 0 "$cli" zoo path fashion-cnn
model=$(cat "$tmp/out")
expect zoo-path-exists test -s "$model"

# info --json: {"format","params","layers":[{"name","op","params"}]}
check info-json 0 "$cli" info fashion-cnn --json
expect info-keys json "assert d['format']=='onnx' and d['params']>100000; \
  l=d['layers']; assert all({'name','op','params'}<=set(x) for x in l); \
  assert [x['op'] for x in l][:4]==['Conv','BatchNormalization','Relu','MaxPool']"
check info-text 0 "$cli" info "$model"
expect info-text-has-conv grep -q 'block1.conv' "$tmp/out"

# eval --json: {"metric":{"name","value"},"samples"}; the demo model reaches >= 90 % top-1
check eval-json 0 "$cli" eval fashion-cnn --json
expect eval-top1 json "assert d['metric']['name']=='top1' and d['samples']==10000, d; \
  assert d['metric']['value']>=0.90, d"
check eval-limit 0 "$cli" eval fashion-cnn --limit 100 --json
expect eval-limit-samples json "assert d['samples']==100"
check eval-no-data 2 "$cli" eval "$model"
check eval-bad-device 2 "$cli" eval fashion-cnn --device tpu

# run: each output as DIR/<name>.npy
npy_zeros "$tmp/x.npy" "(2, 1, 28, 28)" $((2 * 28 * 28))
check run 0 "$cli" run "$model" --input "$tmp/x.npy" --out "$tmp/outdir"
expect run-output "$py" -c "import numpy as np; y=np.load('$tmp/outdir/logits.npy'); assert y.shape==(2,10), y.shape"
npy_zeros "$tmp/bad.npy" "(2, 3, 28, 28)" $((2 * 3 * 28 * 28))
check run-bad-shape 3 "$cli" run "$model" --input "$tmp/bad.npy" --out "$tmp/outdir2"
expect run-bad-shape-message grep -q "error: $tmp/bad.npy: input 'image' has shape \[2, 3, 28, 28\], the model expects \[N, 1, 28, 28\]" "$tmp/err"
expect run-bad-shape-no-output test ! -e "$tmp/outdir2/logits.npy"

# bad model files: exit 3 with "error: <path>: <reason>", never a crash
head -c 1000 "$model" > "$tmp/truncated.onnx"
for cmd in info eval; do
  check "$cmd-truncated" 3 "$cli" "$cmd" "$tmp/truncated.onnx" --data "$tmp/x.npy"
  expect "$cmd-truncated-message" grep -q "^error: $tmp/truncated.onnx: " "$tmp/err"
done
head -c 5000 /dev/urandom > "$tmp/random.onnx"
check info-random 3 "$cli" info "$tmp/random.onnx"
check info-missing 3 "$cli" info "$tmp/nope.onnx"
expect info-missing-message grep -q "^error: $tmp/nope.onnx: cannot open file" "$tmp/err"
# an op BitLens does not run: exit 4 naming it (Relu -> Celu keeps the byte length)
sed 's/Relu/Celu/g' "$model" > "$tmp/celu.onnx"
check info-unsupported 4 "$cli" info "$tmp/celu.onnx"
expect info-unsupported-message grep -q "Celu" "$tmp/err"

finish
