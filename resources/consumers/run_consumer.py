#!/usr/bin/env python3
"""Runs an exported file in the runtime that will load it, for `bitlens-cli export --verify`
and the Export tab (issue #37 item 3): BitLens writes the inputs of one batch as .npy files,
this script feeds them to the consumer and writes its outputs back as .npy files, which
BitLens compares with its in-app model.

  run_consumer.py FORMAT MODEL IN_DIR OUT_DIR

FORMAT onnx: onnxruntime's InferenceSession (CPU provider, every graph optimisation on, as a
deployer runs it). FORMAT gguf: llama.cpp (llama-cpp-python) with its defaults (F16 K / V
cache), each window of token ids evaluated from an empty context, the logits of every position.
IN_DIR holds names.txt (one graph input name per line) and in_<i>.npy; OUT_DIR receives
out_<i>.npy, one per graph output in order (gguf: the logits [windows, length, vocab]).

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


def run_gguf(model, in_dir, out_dir):
    try:
        import numpy as np
        import llama_cpp
    except ImportError as e:
        print(f"llama-cpp-python is not installed for {sys.executable} ({e})", file=sys.stderr)
        return 3
    names = open(os.path.join(in_dir, "names.txt")).read().splitlines()
    if not names or names[0] != "input_ids":
        print("llama.cpp takes token ids only", file=sys.stderr)
        return 3
    ids = np.load(os.path.join(in_dir, "in_0.npy")).astype(np.int64)
    if ids.ndim == 1:
        ids = ids[None, :]
    n_ctx = max(int(ids.shape[1]), 8)
    threads = max(1, min(4, os.cpu_count() or 1))
    try:
        llm = llama_cpp.Llama(model_path=model, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx,
                              logits_all=True, verbose=False, n_threads=threads,
                              n_threads_batch=threads, seed=0)
        rows = []
        for window in ids:
            llm.reset()
            llm.eval([int(t) for t in window])
            rows.append(np.array(llm.scores[: len(window)], dtype=np.float32))
    except Exception as e:
        print(f"llama.cpp (llama-cpp-python {llama_cpp.__version__}): {e}", file=sys.stderr)
        return 4
    np.save(os.path.join(out_dir, "out_0.npy"), np.ascontiguousarray(np.stack(rows)))
    print(json.dumps({"runtime": "llama.cpp (llama-cpp-python)",
                      "version": llama_cpp.__version__}))
    return 0


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    fmt, model, in_dir, out_dir = argv[1:]
    if fmt == "onnx":
        return run_onnx(model, in_dir, out_dir)
    if fmt == "gguf":
        return run_gguf(model, in_dir, out_dir)
    print(f"no consumer runtime for format '{fmt}'", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
