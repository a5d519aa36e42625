#!/usr/bin/env python3
"""Runs an exported file in the runtime that will load it, for `bitlens-cli export --verify`
and the Export tab (issue #37 item 3): BitLens writes the inputs of one batch as .npy files,
this script feeds them to the consumer and writes its outputs back as .npy files, which
BitLens compares with its in-app model.

  run_consumer.py FORMAT MODEL IN_DIR OUT_DIR

FORMAT onnx: onnxruntime's InferenceSession (CPU provider, every graph optimisation on, as a
deployer runs it). IN_DIR holds names.txt (one graph input name per line) and in_<i>.npy;
OUT_DIR receives out_<i>.npy, one per graph output in order.

Prints one JSON line on stdout: {"runtime": "onnxruntime", "version": "1.20.1"}.
Exit 0: ran. Exit 3: the runtime is not installed in this Python (the check is skipped, not
failed). Exit 4: the runtime refused or failed on the file (the last lines of stderr say why).
"""
import json
import os
import sys


def run_onnx(model, in_dir, out_dir):
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        print(f"onnxruntime is not installed for {sys.executable} ({e})", file=sys.stderr)
        return 3
    names = open(os.path.join(in_dir, "names.txt")).read().splitlines()
    feeds = {name: np.load(os.path.join(in_dir, f"in_{i}.npy")) for i, name in enumerate(names)}
    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: an error reaches BitLens as the exception
    options.intra_op_num_threads = max(1, min(4, os.cpu_count() or 1))
    try:
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        declared = {i.name: i.type for i in session.get_inputs()}
        for name in list(feeds):
            if name not in declared:
                raise RuntimeError(f"the file has no input '{name}'")
            # BitLens feeds int64 token ids; an int32 input gets the same values.
            if declared[name] == "tensor(int32)":
                feeds[name] = feeds[name].astype(np.int32)
        outputs = session.run(None, feeds)
    except Exception as e:  # onnxruntime raises its own exception types
        print(f"onnxruntime {ort.__version__}: {e}", file=sys.stderr)
        return 4
    for i, y in enumerate(outputs):
        np.save(os.path.join(out_dir, f"out_{i}.npy"), np.ascontiguousarray(y))
    print(json.dumps({"runtime": "onnxruntime", "version": ort.__version__}))
    return 0


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    fmt, model, in_dir, out_dir = argv[1:]
    if fmt == "onnx":
        return run_onnx(model, in_dir, out_dir)
    print(f"no consumer runtime for format '{fmt}'", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
