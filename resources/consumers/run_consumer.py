#!/usr/bin/env python3
"""Runs an exported file in the runtime that will load it, for `bitlens-cli export --verify`
and the Export tab (issue #37 item 3): BitLens writes the inputs of one batch as .npy files,
this script feeds them to the consumer and writes its outputs back as .npy files, which
BitLens compares with its in-app model.

  run_consumer.py FORMAT MODEL IN_DIR OUT_DIR

FORMAT onnx: onnxruntime's InferenceSession (CPU provider, every graph optimisation on, as a
deployer runs it). FORMAT gguf: llama.cpp (llama-cpp-python) with its defaults (F16 K / V
cache), each window of token ids evaluated from an empty context, the logits of every position.
FORMAT safetensors: transformers with compressed-tensors loads the folder MODEL lies in (its
config.json with the quantization_config, float32 as BitLens runs it) through the class of
config.json's architectures (AutoModel where only last_hidden_state is asked for), and runs the
inputs as keyword arguments; a missing, unexpected or mismatched parameter is a refusal.
IN_DIR holds names.txt (one graph input name per line), outputs.txt (one graph output name per
line; optional) and in_<i>.npy; OUT_DIR receives out_<i>.npy, one per graph output in order
(gguf: the logits [windows, length, vocab]).

Prints one JSON line on stdout: {"runtime": "onnxruntime", "version": "1.20.1"}.
Exit 0: ran. Exit 3: the runtime is not installed in this Python (the check is skipped, not
failed). Exit 4: the runtime refused or failed on the file (the last lines of stderr say why).
"""
import contextlib
import io
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


def _shape(t):
    return "[" + ", ".join(str(int(d)) for d in t) + "]"


def _zero_point_note(folder, name, compressed_tensors_version):
    """Why a weight_zero_point's shape differs, where the checkpoint holds it packed."""
    if not name.endswith("weight_zero_point"):
        return ""
    return (f"; the file holds {name} packed along the rows (int32, 8 codes per word), as "
            f"compressed-tensors {compressed_tensors_version}'s own PackedQuantizationCompressor"
            f".compress writes and .decompress reads it, but its compress of the meta-device "
            f"model transformers builds before loading leaves the zero points unpacked "
            f"([rows, groups]), so asymmetric pack-quantized folders do not load; export "
            f"with sym=true (no zero points)")


def run_safetensors(model, in_dir, out_dir):
    folder = os.path.dirname(os.path.abspath(model))
    config_path = os.path.join(folder, "config.json")
    if not os.path.exists(config_path):
        print(f"transformers loads a Hugging Face folder, and {folder} has no config.json "
              f"(a bare safetensors file)", file=sys.stderr)
        return 3
    try:
        config = json.load(open(config_path))
    except (OSError, ValueError) as e:
        print(f"{config_path}: {e}", file=sys.stderr)
        return 4
    if not isinstance(config, dict) or "model_type" not in config:
        print(f"{config_path} names no model_type: not a Hugging Face model transformers "
              f"builds (the source was no Hugging Face folder)", file=sys.stderr)
        return 3
    os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars on stderr
    noise = io.StringIO()  # import warnings, progress bars: a refusal is the last line
    try:
        with contextlib.redirect_stderr(noise):
            import logging
            import warnings
            import numpy as np
            import torch
            import transformers
            import compressed_tensors
            from transformers.utils import logging as hf_logging
    except ImportError as e:
        print(f"transformers with compressed-tensors is not installed for {sys.executable} "
              f"({e})", file=sys.stderr)
        return 3
    ct_version = getattr(compressed_tensors, "__version__", "?")
    who = f"transformers {transformers.__version__} + compressed-tensors {ct_version}"
    names = open(os.path.join(in_dir, "names.txt")).read().splitlines()
    outputs_path = os.path.join(in_dir, "outputs.txt")
    wanted = (open(outputs_path).read().splitlines() if os.path.exists(outputs_path)
              else ["logits"])
    architectures = config.get("architectures") or []
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    warnings.filterwarnings("ignore")
    hf_logging.set_verbosity_error()
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stderr(noise):
            dtype_note = []
            arrays = _transformers_outputs(transformers, torch, np, folder, in_dir, names,
                                           wanted, architectures, ct_version, dtype_note)
    except Exception as e:
        print(f"{who}: {' '.join(str(e).split())}", file=sys.stderr)
        return 4
    for i, y in enumerate(arrays):
        np.save(os.path.join(out_dir, f"out_{i}.npy"), np.ascontiguousarray(y))
    run_as = f" ({dtype_note[0]})" if dtype_note else ""
    print(json.dumps({"runtime": "transformers",
                      "version": f"{transformers.__version__} + compressed-tensors {ct_version}"
                                 + run_as}))
    return 0


def _transformers_outputs(transformers, torch, np, folder, in_dir, names, wanted, architectures,
                          ct_version, dtype_note):
    if "logits" in wanted:
        cls = getattr(transformers, architectures[0], None) if architectures else None
        if cls is None:
            cls = transformers.AutoModelForCausalLM
    else:
        cls = transformers.AutoModel

    def load(**extra):
        return cls.from_pretrained(folder, dtype=torch.float32, output_loading_info=True,
                                   **extra)

    try:
        loaded, info = load()
    except Exception as e:
        # transformers raises on a size mismatch with only "look at the above report":
        # loaded again, ignoring it, the loading info names each mismatched parameter.
        if "ignore_mismatched_sizes" not in str(e):
            raise
        loaded, info = load(ignore_mismatched_sizes=True)
    problems = []
    for key in info.get("missing_keys", []) or []:
        problems.append(f"missing {key}")
    for key in info.get("unexpected_keys", []) or []:
        problems.append(f"unexpected {key}")
    note = ""
    for entry in info.get("mismatched_keys", []) or []:
        key, *shapes = entry if isinstance(entry, (tuple, list)) else (entry,)
        text = f"size mismatch {key}"
        if len(shapes) == 2:
            text += f" (file {_shape(shapes[0])}, model {_shape(shapes[1])})"
        problems.append(text)
        note = note or _zero_point_note(folder, key, ct_version)
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise RuntimeError("refuses the folder: " + "; ".join(sorted(problems)[:3]) + more
                           + note)
    qc = getattr(loaded.config, "quantization_config", None)
    if qc is not None and type(qc).__name__ != "CompressedTensorsConfig":
        raise RuntimeError(f"read the quantization_config as {type(qc).__name__}, not "
                           f"compressed-tensors")
    # float32 throughout, as BitLens runs it (compressed-tensors decompresses E2M1 and MX
    # weights into bfloat16 parameters; a quantized model refuses .float()).
    for tensor in list(loaded.parameters()) + list(loaded.buffers()):
        if tensor.is_floating_point() and tensor.dtype != torch.float32:
            tensor.data = tensor.data.float()
    loaded.eval()
    feeds = {name: torch.from_numpy(np.load(os.path.join(in_dir, f"in_{i}.npy")))
             for i, name in enumerate(names)}
    try:
        with torch.no_grad():
            result = loaded(**feeds)
    except RuntimeError as e:
        # compressed-tensors 0.20 decompresses NVFP4 / MX weights into bfloat16 at every
        # forward, which a float32 model cannot multiply: such folders run in bfloat16, as
        # their users load them (the runtime line says so).
        if "BFloat16" not in str(e):
            raise
        loaded = cls.from_pretrained(folder, dtype=torch.bfloat16).eval()
        dtype_note.append("bfloat16")
        with torch.no_grad():
            result = loaded(**feeds)
    arrays = []
    for name in wanted:
        value = result.get(name) if hasattr(result, "get") else None
        if value is None:
            raise RuntimeError(f"{type(loaded).__name__} gives no output '{name}'")
        arrays.append(value.float().numpy())
    return arrays


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    fmt, model, in_dir, out_dir = argv[1:]
    if fmt == "onnx":
        return run_onnx(model, in_dir, out_dir)
    if fmt == "gguf":
        return run_gguf(model, in_dir, out_dir)
    if fmt == "safetensors":
        return run_safetensors(model, in_dir, out_dir)
    print(f"no consumer runtime for format '{fmt}'", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
