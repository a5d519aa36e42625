"""onnxruntime side of test_export_onnx.sh: runs an exported ONNX file on Fashion-MNIST.

    ort_check.py top1 MODEL.onnx IMAGES.gz LABELS.gz LIMIT BATCH   -> prints top-1 (fraction)
    ort_check.py batch MODEL.onnx IMAGES.gz N OUT X.npy             -> writes the first N images
        as X.npy (float32 [N, 1, 28, 28] in [0, 1], as BitLens loads IDX) and ORT's logits
        on them: OUT-plain.npy with graph optimizations off (the nodes run as written) and
        OUT-opt.npy with ORT's defaults (QDQ groups fused into integer kernels, which
        requantize with their own rounding)

Batches matter for dynamic schemes (one activation range per batch): BitLens evaluates in
batches of 256, so top1 runs the same batches.
"""
import gzip
import sys

import numpy as np
import onnxruntime as ort


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
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
