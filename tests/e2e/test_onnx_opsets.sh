#!/usr/bin/env bash
# End-to-end: ONNX files as people have them. Small MobileNet-style and decoder models exported
# by torch.onnx.export at opsets 9, 11, 13 and 17 (tests/data/onnx/make_torch_exports.py:
# Hardswish, Hardsigmoid, ReLU6 as Clip, Upsample / Resize, ConvTranspose2d) open with `info`,
# `run` gives onnxruntime's outputs (1e-5 relative), and `quantize --scheme static-int8` runs
# on them. A file older than opset 7, an op BitLens lacks, or an If whose condition is only known
# at run time exits 4 naming it; an If on a constant condition runs its branch.
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
# If: a condition known when the file is read (an initializer, as exporters leave behind) is
# folded into its branch; one computed at run time (from the input) is refused.
then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                           [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4])])
else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                           [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])])
for name, nodes, inits in [
        ("if-static", [], [helper.make_tensor("c", TensorProto.BOOL, [], [False])]),
        ("if-runtime", [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                        helper.make_node("Greater", ["s", "zero"], ["c"])],
         [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])]:
    n_if = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    g = helper.make_graph(nodes + [n_if], name, [x], [y], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    open(f"{d}/{name}.onnx", "wb").write(m.SerializeToString())
import numpy as np
np.save(f"{d}/x4.npy", np.array([[1.0, -2.0, 3.0, -4.0]], np.float32))
PY
check if-static 0 "$cli" run "$tmp/if-static.onnx" --input "$tmp/x4.npy" --out "$tmp/run-if"
expect if-static-else-branch "$py" -c "
import numpy as np; y = np.load('$tmp/run-if/y.npy')
assert np.array_equal(y, -np.array([[1.0, -2.0, 3.0, -4.0]], np.float32)), y"
check if-runtime 4 "$cli" info "$tmp/if-runtime.onnx"
expect if-runtime-says grep -q "unsupported op 'If' (opset 13) in node 'branch'" "$tmp/err"
check refuse-opset6 4 "$cli" info "$tmp/old.onnx"
expect refuse-opset6-says \
  grep -q "opset 6 is not supported; BitLens reads ONNX opset 7 and later" "$tmp/err"
check refuse-op 4 "$cli" info "$tmp/nohardmax.onnx"
expect refuse-op-says grep -q "unsupported op 'Hardmax' (opset 9) in node 'n1'" "$tmp/err"

finish
