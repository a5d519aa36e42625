"""Golden data for BitLens' ONNX quantization operators (tests/unit/test_qdq_export.cpp).

Each case is a tiny ONNX model written with the `onnx` package (so BitLens' reader sees
initializers exactly as onnx packs them: INT4/UINT4 two per byte, low nibble first) and an .npz
with its input "x" and onnxruntime's outputs "y0", "y1", ... . Inputs include values on and
next to rounding ties (k + 0.5) * scale, values beyond the code range, and a zero range.

Run from the repository root with the venv python:
    ~/.cache/bitlens/venv/bin/python tests/data/qdq/make_qdq_golden.py
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20260611)


def tensor(name, dtype, dims, values):
    return helper.make_tensor(name, dtype, dims, np.asarray(values).flatten().tolist())


def ties(scale, count, low, high):
    """Values on rounding ties (k + 0.5) * scale and one float32 ulp either side."""
    k = rng.integers(low, high, count).astype(np.float32)
    on = ((k + np.float32(0.5)) * np.float32(scale)).astype(np.float32)
    return np.concatenate([on, np.nextafter(on, np.float32(np.inf)),
                           np.nextafter(on, np.float32(-np.inf))]).astype(np.float32)


def splits(scale, low, high):
    """Values near ties where round(x / scale) and round(x * (1 / scale)) differ: they tell
    onnxruntime's rule (division) from PyTorch's fake_quantize rule (reciprocal)."""
    scale = np.float32(scale)
    inv = np.float32(1) / scale
    found = []
    for k in range(low, high):
        v = np.float32((np.float32(k) + np.float32(0.5)) * scale)
        for _ in range(3):
            v = np.nextafter(v, np.float32(-np.inf))
        for _ in range(7):
            if np.rint(v / scale) != np.rint(v * inv):
                found.append(v)
            v = np.nextafter(v, np.float32(np.inf))
    return np.array(found, np.float32)


def save(name, nodes, inputs, outputs, initializers, x, opset):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="make_qdq_golden")
    model.ir_version = 10 if opset >= 21 else 9
    onnx.checker.check_model(model)
    path = os.path.join(HERE, name + ".onnx")
    onnx.save(model, path)
    options = ort.SessionOptions()
    # Run the nodes as written: no QDQ fusion into integer kernels.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    ys = session.run(None, {"x": x})
    arrays = {"x": x}
    for i, y in enumerate(ys):
        arrays["y%d" % i] = np.asarray(y)
    np.savez(os.path.join(HERE, name + ".npz"), **arrays)
    print(name, [(k, v.dtype, v.shape) for k, v in arrays.items()])


def float_in(shape):
    return helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)


def out(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


# 1. uint8 per-tensor, asymmetric: ties, saturation at both ends.
scale = np.float32(0.0173)
split = splits(scale, -17, 238)[:8]
x = np.concatenate([ties(scale, 40, -20, 230), rng.normal(0, 2, 56 - len(split)).astype(np.float32),
                    split, np.array([-100, 100, 0, -0.0], np.float32)]).astype(np.float32)
x = x.reshape(4, -1)
save("q_u8_tensor",
     [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])],
     [float_in(list(x.shape))], [out("y", TensorProto.UINT8, list(x.shape))],
     [tensor("s", TensorProto.FLOAT, [], [scale]), tensor("zp", TensorProto.UINT8, [], [17])],
     x, 13)

# 2. int8 per-axis (axis 1), symmetric: one scale per channel of [3, 5, 8].
scales = np.array([0.011, 0.05, 0.3, 0.0071, 1.3], np.float32)
x = np.stack([np.concatenate([ties(s, 2, -100, 100), rng.normal(0, 60 * s, 2)])
              for s in scales], 0).astype(np.float32)  # [5, 8]
x = np.stack([x, x * 2.1, -x]).astype(np.float32)  # [3, 5, 8]
save("q_i8_axis",
     [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"], axis=1)],
     [float_in(list(x.shape))], [out("y", TensorProto.INT8, list(x.shape))],
     [tensor("s", TensorProto.FLOAT, [5], scales), tensor("zp", TensorProto.INT8, [5], [0, 3, -2, 0, 1])],
     x, 13)

# 3. No zero point: uint8 output, zero point 0.
x = np.concatenate([ties(0.02, 10, 0, 250), rng.normal(0, 3, 10).astype(np.float32)]).reshape(2, -1)
save("q_u8_nozp",
     [helper.make_node("QuantizeLinear", ["x", "s"], ["y"])],
     [float_in(list(x.shape))], [out("y", TensorProto.UINT8, list(x.shape))],
     [tensor("s", TensorProto.FLOAT, [], [0.02])], x, 13)

# 4. int4 blocked QuantizeLinear -> DequantizeLinear (opset 21), blocks of 4 along axis 1 of
#    [4, 10] (3 blocks, the last holding 2).
bscale = rng.uniform(0.05, 0.4, (4, 3)).astype(np.float32)
bzp = rng.integers(-3, 4, (4, 3))
x = (rng.normal(0, 1, (4, 10)) * 1.5).astype(np.float32)
x[0, :4] = ties(bscale[0, 0], 2, -6, 5)[:4]
save("qdq_i4_blocked",
     [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1, block_size=4),
      helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1, block_size=4)],
     [float_in([4, 10])], [out("y", TensorProto.FLOAT, [4, 10])],
     [tensor("s", TensorProto.FLOAT, [4, 3], bscale), tensor("zp", TensorProto.INT4, [4, 3], bzp)],
     x, 21)

# 5. DequantizeLinear of an int4 initializer [5, 9] (45 codes: the last byte holds one),
#    blocked along axis 1 (block 4: 3 blocks), added to x so the model has an input.
codes = rng.integers(-8, 8, (5, 9))
dscale = rng.uniform(0.01, 0.2, (5, 3)).astype(np.float32)
dzp = rng.integers(-8, 8, (5, 3))
x = rng.normal(0, 1, (5, 9)).astype(np.float32)
save("dq_i4_blocked",
     [helper.make_node("DequantizeLinear", ["w", "s", "zp"], ["wd"], axis=1, block_size=4),
      helper.make_node("Add", ["x", "wd"], ["y"])],
     [float_in([5, 9])], [out("y", TensorProto.FLOAT, [5, 9])],
     [tensor("w", TensorProto.INT4, [5, 9], codes), tensor("s", TensorProto.FLOAT, [5, 3], dscale),
      tensor("zp", TensorProto.INT4, [5, 3], dzp)],
     x, 21)

# 5b. The same codes as raw_data (onnx.helper writes int4 to int32_data unless told raw).
packed = codes.flatten() & 0x0F
packed = np.concatenate([packed, [0]]) if len(packed) % 2 else packed
raw = (packed[0::2] | (packed[1::2] << 4)).astype(np.uint8).tobytes()
save("dq_i4_raw",
     [helper.make_node("DequantizeLinear", ["w", "s", "zp"], ["wd"], axis=1, block_size=4),
      helper.make_node("Add", ["x", "wd"], ["y"])],
     [float_in([5, 9])], [out("y", TensorProto.FLOAT, [5, 9])],
     [helper.make_tensor("w", TensorProto.INT4, [5, 9], raw, raw=True),
      tensor("s", TensorProto.FLOAT, [5, 3], dscale), tensor("zp", TensorProto.INT4, [5, 3], dzp)],
     x, 21)

# 6. uint4 per-axis (axis 0) DequantizeLinear of a [3, 7] initializer (21 codes, odd).
ucodes = rng.integers(0, 16, (3, 7))
x = rng.normal(0, 1, (3, 7)).astype(np.float32)
save("dq_u4_axis",
     [helper.make_node("DequantizeLinear", ["w", "s", "zp"], ["wd"], axis=0),
      helper.make_node("Add", ["x", "wd"], ["y"])],
     [float_in([3, 7])], [out("y", TensorProto.FLOAT, [3, 7])],
     [tensor("w", TensorProto.UINT4, [3, 7], ucodes),
      tensor("s", TensorProto.FLOAT, [3], [0.5, 0.031, 0.27]),
      tensor("zp", TensorProto.UINT4, [3], [8, 0, 15])],
     x, 21)

# 7. int8 per-channel conv weight [4, 2, 3, 3] dequantized on axis 0 (added to x so the model
#    has an input; a Conv here would compare summation orders, not DequantizeLinear).
wcodes = rng.integers(-128, 128, (4, 2, 3, 3))
x = rng.normal(0, 1, (4, 2, 3, 3)).astype(np.float32)
save("dq_i8_conv",
     [helper.make_node("DequantizeLinear", ["w", "s", "zp"], ["wd"], axis=0),
      helper.make_node("Add", ["x", "wd"], ["y"])],
     [float_in([4, 2, 3, 3])], [out("y", TensorProto.FLOAT, [4, 2, 3, 3])],
     [tensor("w", TensorProto.INT8, [4, 2, 3, 3], wcodes),
      tensor("s", TensorProto.FLOAT, [4], [0.01, 0.002, 0.05, 0.1]),
      tensor("zp", TensorProto.INT8, [4], [0, 0, 0, 0])],
     x, 13)

# 8. float8 e4m3fn QuantizeLinear (saturate = 1) -> DequantizeLinear: rounding to nearest
#    even between float8 neighbours, saturation at 448 * scale, Inf saturated.
fscale = np.float32(0.25)
grid = np.array([1.0, 1.125, 1.25, 17.0, 18.0, 240.0, 256.0, 448.0], np.float32)
mid = ((grid[:-1] + grid[1:]) / 2).astype(np.float32)
x = np.concatenate([grid, mid, -mid, np.array([500, 1e6, -1e6, np.inf, -np.inf, 0.0], np.float32),
                    rng.normal(0, 30, 9).astype(np.float32)]).astype(np.float32) * fscale
x = x.reshape(1, -1).astype(np.float32)
save("qdq_f8",
     [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
      helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"])],
     [float_in(list(x.shape))], [out("y", TensorProto.FLOAT, list(x.shape))],
     [tensor("s", TensorProto.FLOAT, [], [fscale]),
      helper.make_tensor("zp", TensorProto.FLOAT8E4M3FN, [], [0.0])],
     x, 19)

# 9. DynamicQuantizeLinear: codes, scale and zero point, then dequantized; a mixed-sign input
#    with ties, a positive-only one (zero point 0) and an all-zero one (empty range).
dyn_split = splits(np.float32(4.0) / np.float32(255.0), -64, 191)[:10]
for name, x in [("dyn_mixed", np.concatenate([np.clip(rng.normal(0.5, 1, 80 - len(dyn_split)), -1, 3),
                                              dyn_split, [-1.0, 3.0]]).astype(np.float32).reshape(2, -1)),
                ("dyn_positive", rng.uniform(0.1, 5, (3, 11)).astype(np.float32)),
                ("dyn_zero", np.zeros((2, 3), np.float32))]:
    save(name,
         [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "zp"]),
          helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"])],
         [float_in(list(x.shape))],
         [out("q", TensorProto.UINT8, list(x.shape)), out("s", TensorProto.FLOAT, []),
          out("zp", TensorProto.UINT8, []), out("y", TensorProto.FLOAT, list(x.shape))],
         [], x, 13)
