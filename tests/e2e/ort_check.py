"""onnxruntime side of test_export_onnx.sh: runs an exported ONNX file on Fashion-MNIST.

    ort_check.py top1 MODEL.onnx IMAGES.gz LABELS.gz LIMIT BATCH   -> prints top-1 (fraction)
    ort_check.py batch MODEL.onnx IMAGES.gz N OUT X.npy             -> writes the first N images
        as X.npy (float32 [N, 1, 28, 28] in [0, 1], as BitLens loads IDX) and ORT's logits
        on them: OUT-plain.npy with graph optimizations off (the nodes run as written) and
        OUT-opt.npy with ORT's defaults (QDQ groups fused into integer kernels, which
        requantize with their own rounding)

    ort_check.py probe MODEL.onnx PROBE.onnx
        -> PROBE.onnx: MODEL with the output of every QuantizeLinear added as a graph output,
           and the three of every DynamicQuantizeLinear (codes, scale, zero point)
    ort_check.py agree PROBE.onnx X.npy BITLENS_DIR
        -> compares onnxruntime (optimizations off: the nodes as written) with `bitlens-cli run`
           of PROBE.onnx on X.npy (its outputs in BITLENS_DIR), as "Green on every x86-64
           machine" asks: the activation codes may differ by one step where the float value
           before a QuantizeLinear sits on a rounding boundary and the two runtimes' float
           kernels (MLAS vs LibTorch; AVX2 vs AVX-512) round its last bit differently, in at
           most 1 % of the elements; the graph output may differ by exactly what those flipped
           codes of the last layer's input give through its dequantized weights, plus float
           rounding. A dynamic layer's scale comes from the range of float values the two
           runtimes computed, so it may differ in its last bits (at most 1e-6 relative) and its
           zero point by one step. A wrong scale, zero point or rounding rule moves most codes by
           more than one step and fails.
    ort_check.py optimized MODEL.onnx X.npy BITLENS_OUT.npy [strict]
        -> onnxruntime with its default optimizations (QDQ fused into integer kernels) against
           BitLens's logits: on a CPU with VNNI those kernels are exact up to requantization
           rounding; without it MLAS's u8 x s8 kernels add pairs in 16 bits and can saturate
           (onnxruntime's own quantizer offers reduce_range for that), so the bound is looser;
           `strict` (for a reduce-range export, whose 7-bit weights cannot saturate) keeps the
           VNNI bound everywhere

Batches matter for dynamic schemes (one activation range per batch): BitLens evaluates in
batches of 256, so top1 runs the same batches.
"""
import gzip
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def images(path, n):
    x = idx(path)[:n]
    # As BitLens' IDX reader: uint8 / 255 in float32.
    return (x.astype(np.float32) / np.float32(255)).reshape(-1, 1, 28, 28)


def session(model, optimize=True):
    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def has_vnni():
    """512-bit VNNI from cpuid (numpy's own detection; /proc/cpuinfo would be the host's
    under an emulated CPU)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:
        return False
    return bool(features.get("AVX512VNNI"))


def probe(model, out):
    m = onnx.load(model)
    inits = {i.name: i for i in m.graph.initializer}
    outputs = {o.name for o in m.graph.output}
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear" and n.output[0] not in outputs:
            elem = inits[n.input[2]].data_type if len(n.input) > 2 else onnx.TensorProto.UINT8
            m.graph.output.append(helper.make_tensor_value_info(n.output[0], elem, None))
        if n.op_type == "DynamicQuantizeLinear":
            for name, elem in zip(n.output, (onnx.TensorProto.UINT8, onnx.TensorProto.FLOAT,
                                             onnx.TensorProto.UINT8)):
                if name and name not in outputs:
                    m.graph.output.append(helper.make_tensor_value_info(name, elem, None))
    onnx.save(m, out)


def dynamic_parameters(m):
    """{name: 'scale' | 'zero_point'} of every DynamicQuantizeLinear's run-time parameters."""
    kinds = {}
    for n in m.graph.node:
        if n.op_type == "DynamicQuantizeLinear":
            kinds[n.output[1]] = "scale"
            if len(n.output) > 2:
                kinds[n.output[2]] = "zero_point"
    return kinds


def final_layer_bound(m, inits, ort_out, bl_out, name):
    """|y_ort - y_bitlens| allowed by the flipped input codes of the Gemm / MatMul that makes
    graph output `name`: |dq| * s_x @ |W|^T, elementwise. None when the output is not made so."""
    producer = {o: n for n in m.graph.node for o in n.output}
    node = producer.get(name)
    if node is None or node.op_type not in ("Gemm", "MatMul"):
        return None
    dq_x, dq_w = producer.get(node.input[0]), producer.get(node.input[1])
    if not dq_x or dq_x.op_type != "DequantizeLinear" or not dq_w or dq_w.op_type != "DequantizeLinear":
        return None
    q_name = dq_x.input[0]
    if q_name not in ort_out or q_name not in bl_out:
        return None
    # A static scale is an initializer; a dynamic one (DynamicQuantizeLinear) is ORT's run-time
    # output, within 1e-6 relative of BitLens' (checked in agree).
    if dq_x.input[1] in inits:
        s_x = numpy_helper.to_array(inits[dq_x.input[1]]).astype(np.float64)
    elif dq_x.input[1] in ort_out:
        s_x = np.asarray(ort_out[dq_x.input[1]], dtype=np.float64)
    else:
        return None
    w_q = numpy_helper.to_array(inits[dq_w.input[0]]).astype(np.float64)
    w_s = numpy_helper.to_array(inits[dq_w.input[1]]).astype(np.float64)
    w_z = numpy_helper.to_array(inits[dq_w.input[2]]).astype(np.float64) if len(dq_w.input) > 2 else 0.0
    axis = next((a.i for a in dq_w.attribute if a.name == "axis"), 1)
    if np.ndim(w_s) == 1 and w_q.ndim == 2:
        shape = [1, 1]
        shape[axis] = -1
        w_s = w_s.reshape(shape)
        w_z = np.reshape(w_z, shape) if np.ndim(w_z) == 1 else w_z
    w = (w_q - w_z) * w_s
    trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0) if node.op_type == "Gemm" else 0
    if trans_b:
        w = w.T  # now [K, N]
    dq = np.abs(ort_out[q_name].astype(np.int64) - bl_out[q_name].astype(np.int64)).astype(np.float64)
    dq = dq.reshape(dq.shape[0], -1) * np.reshape(s_x, (1, -1)) if np.ndim(s_x) else dq.reshape(dq.shape[0], -1) * float(s_x)
    return dq @ np.abs(w)


def agree(probe_model, xpath, bl_dir):
    import os
    m = onnx.load(probe_model)
    inits = {i.name: i for i in m.graph.initializer}
    s = session(probe_model, optimize=False)
    x = np.load(xpath)
    names = [o.name for o in s.get_outputs()]
    ort_out = dict(zip(names, s.run(None, {s.get_inputs()[0].name: x})))
    bl_out = {n: np.load(os.path.join(bl_dir, n + ".npy")) for n in names}
    problems = []
    flips_total = 0
    dynamic = dynamic_parameters(m)
    for n in names:
        a, b = ort_out[n], bl_out[n]
        if a.shape != b.shape:
            problems.append("%s: shape %s vs %s" % (n, a.shape, b.shape))
            continue
        if dynamic.get(n) == "scale":
            rel = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()
                        / max(float(np.abs(b).max()), 1e-30))
            print("scale %-32s %.9g vs %.9g (relative %.2g)" % (n, float(a.max()), float(b.max()), rel))
            if rel > 1e-6:
                problems.append("%s: dynamic scale differs by %.3g relative" % (n, rel))
            continue
        if dynamic.get(n) == "zero_point":
            d = np.abs(a.astype(np.int64) - b.astype(np.int64))
            print("zero point %-27s %s vs %s" % (n, a.ravel().tolist(), b.ravel().tolist()))
            if d.max() > 1:
                problems.append("%s: dynamic zero point differs by %d" % (n, d.max()))
            continue
        if a.dtype in (np.uint8, np.int8):
            d = np.abs(a.astype(np.int64) - b.astype(np.int64))
            flips = int((d != 0).sum())
            flips_total += flips
            print("codes %-32s max |diff| %d, %d of %d differ" % (n, d.max(), flips, d.size))
            if d.max() > 1 or flips > 0.01 * d.size:
                problems.append("%s: codes differ by up to %d in %d of %d elements"
                                % (n, d.max(), flips, d.size))
    for o in m.graph.output:
        a, b = ort_out[o.name], bl_out[o.name]
        if a.dtype in (np.uint8, np.int8) or a.shape != b.shape or o.name in dynamic:
            continue
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
        scale = float(np.abs(b).max())
        bound = final_layer_bound(m, inits, ort_out, bl_out, o.name)
        allowed = 1e-5 * scale + (bound if bound is not None else 0.0)
        excess = float((d - allowed).max())
        print("output %s: max |ORT - BitLens| %.3g of %.3g; largest allowed by flipped codes %.3g"
              % (o.name, d.max(), scale, 0.0 if bound is None else float(np.max(bound))))
        if excess > 0:
            problems.append("%s: exceeds its bound by %.3g (max diff %.3g)" % (o.name, excess, d.max()))
    print("flipped codes in all: %d" % flips_total)
    if problems:
        sys.exit("onnxruntime and BitLens disagree: " + "; ".join(problems))


def optimized(model, xpath, bl_npy, strict=False):
    s = session(model, optimize=True)
    x = np.load(xpath)
    o = s.run(None, {s.get_inputs()[0].name: x})[0]
    b = np.load(bl_npy)
    d = float(np.abs(o - b).max())
    m = float(np.abs(b).max())
    agree = float((o.argmax(1) == b.argmax(1)).mean())
    vnni = has_vnni()
    # With VNNI: requantization rounding only (measured up to ~0.06 of logits ~17). Without:
    # 16-bit saturation (measured on an AVX2 EPYC: up to 1.55 of 17.8, 1 % of predictions).
    # strict (a reduce-range export: weight codes in [-64, 64], so no pair of u8 x s8 products
    # can leave int16): the VNNI bound holds on every CPU.
    rel, top = (0.01, 0.98) if vnni or strict else (0.15, 0.95)
    print("ORT optimized (%s%s): max |diff| %.3g of %.3g, same class %.4f"
          % ("VNNI" if vnni else "no VNNI", ", strict" if strict else "", d, m, agree))
    if d > rel * m or agree < top:
        sys.exit("ORT optimized disagrees beyond its bound: %.3g > %.3g or %.4f < %.2f"
                 % (d, rel * m, agree, top))


def main():
    mode = sys.argv[1]
    if mode == "top1":
        model, imgs, labels, limit, batch = sys.argv[2:7]
        limit, batch = int(limit), int(batch)
        x = images(imgs, limit)
        y = idx(labels)[:limit].astype(np.int64)
        s = session(model)
        name = s.get_inputs()[0].name
        correct = 0
        for start in range(0, len(x), batch):
            logits = s.run(None, {name: x[start:start + batch]})[0]
            correct += int((logits.argmax(1) == y[start:start + batch]).sum())
        print("%.6f" % (correct / len(x)))
    elif mode == "batch":
        model, imgs, n, out, xpath = sys.argv[2:7]
        x = images(imgs, int(n))
        np.save(xpath, x)
        for suffix, optimize in (("plain", False), ("opt", True)):
            s = session(model, optimize)
            np.save("%s-%s.npy" % (out, suffix), s.run(None, {s.get_inputs()[0].name: x})[0])
    elif mode == "probe":
        probe(sys.argv[2], sys.argv[3])
    elif mode == "agree":
        agree(sys.argv[2], sys.argv[3], sys.argv[4])
    elif mode == "optimized":
        optimized(sys.argv[2], sys.argv[3], sys.argv[4], len(sys.argv) > 5 and sys.argv[5] == "strict")
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
