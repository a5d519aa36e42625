#!/usr/bin/env bash
# End-to-end: ONNX files as people have them. Small MobileNet-style and decoder models exported
# by torch.onnx.export at opsets 9, 11, 13 and 17 (tests/data/onnx/make_torch_exports.py:
# Hardswish, Hardsigmoid, ReLU6 as Clip, Upsample / Resize, ConvTranspose2d) open with `info`,
# `run` gives onnxruntime's outputs (1e-5 relative), and `quantize --scheme static-int8` runs
# on them. A file older than opset 7, or an op BitLens lacks, exits 4 naming it.
# Usage: test_onnx_opsets.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
data="$(dirname "${BASH_SOURCE[0]}")/../data/onnx"

if ! "$py" -c "import onnxruntime, torch, onnx" 2> /dev/null; then
  echo "FAIL: onnxruntime, torch or onnx is missing from $py (scripts/bootstrap installs them)"
  exit 1
fi
check make-exports 0 "$py" "$data/make_torch_exports.py" "$tmp"

while read -r name; do
  [ -n "$name" ] || continue
  model="$tmp/$name.onnx"
  check "info-$name" 0 "$cli" info "$model"
  check "run-$name" 0 "$cli" run "$model" --input "$tmp/x.npy" --out "$tmp/run-$name"
  expect "ort-$name" "$py" -c "
import numpy as np, sys
got = np.load('$tmp/run-$name/y.npy'); want = np.load('$tmp/$name.ort.npy')
ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-5)
if not ok: print('$name: shape', got.shape, want.shape, 'max diff', np.abs(got - want).max())
sys.exit(0 if ok else 1)"
  check "quantize-$name" 0 "$cli" quantize "$model" --scheme static-int8 --calib "$tmp/x.npy"
done < "$tmp/models.txt"

# Refusals name what is missing: an opset before 7, and an op BitLens does not run.
"$py" - "$tmp" << 'PY'
import sys
from onnx import TensorProto, helper
d = sys.argv[1]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
for opset, op, name in [(6, "Relu", "old"), (9, "Hardmax", "nohardmax")]:
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], name="n1")], name, [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=4)
    open(f"{d}/{name}.onnx", "wb").write(m.SerializeToString())
PY
check refuse-opset6 4 "$cli" info "$tmp/old.onnx"
expect refuse-opset6-says \
  grep -q "opset 6 is not supported; BitLens reads ONNX opset 7 and later" "$tmp/err"
check refuse-op 4 "$cli" info "$tmp/nohardmax.onnx"
expect refuse-op-says grep -q "unsupported op 'Hardmax' (opset 9) in node 'n1'" "$tmp/err"

finish
