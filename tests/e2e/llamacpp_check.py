"""llama.cpp's own reading of a GGUF file, through llama-cpp-python (built into the bootstrap
venv by scripts/bootstrap). Token ids go in as ids (no tokenizer, no BOS added), so llama.cpp
sees exactly the windows BitLens evaluates.

  llamacpp_check.py version
      prints the llama-cpp-python version (exit 3 when it is not installed)
  llamacpp_check.py logits GGUF IDS.npy OUT.npy [--kv-f32]
      IDS [T] or [1, T] int; writes llama.cpp's logits [T, vocab] float32
  llamacpp_check.py perplexity GGUF WINDOWS.npy [--kv-f32]
      WINDOWS [N, S] int: each window evaluated from an empty cache; token t + 1 scored given
      tokens 0..t, as BitLens's perplexity does (analysis/lm_metrics.cpp). Prints JSON
      {"perplexity", "tokens", "windows", "version"}.
  llamacpp_check.py kld BASE.gguf QUANT.gguf WINDOWS.npy [--kv-f32]
      llama-perplexity --kl-divergence's statistics of QUANT against BASE on the same windows:
      per scored token KL(P_base || P_quant) in float64, its mean, and "same top p" (the share
      of tokens whose most likely next token agrees). Prints JSON {"mean_kld", "same_top_p",
      "tokens", "version"}. Both models stay loaded; one window's logits at a time.
--kv-f32 keeps the K / V cache in float32 (llama.cpp's default is F16, which rounds K and V):
the exactness checks of an all-float export use it.
"""
import json
import sys

import numpy as np


def load(path, n_ctx):
    import llama_cpp

    kv = {}
    if "--kv-f32" in sys.argv:
        kv = dict(type_k=0, type_v=0)  # GGML_TYPE_F32
    return llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx,
                           logits_all=True, verbose=False, n_threads=2, n_threads_batch=2,
                           seed=0, **kv)


def window_logits(llm, ids):
    llm.reset()
    llm.eval([int(t) for t in ids])
    return np.array(llm.scores[: len(ids)], dtype=np.float32)


def main():
    try:
        import llama_cpp
    except ImportError as e:
        print(f"llama-cpp-python is not installed: {e}", file=sys.stderr)
        return 3
    cmd = sys.argv[1]
    if cmd == "version":
        print(llama_cpp.__version__)
        return 0
    if cmd == "logits":
        ids = np.load(sys.argv[3]).reshape(-1)
        llm = load(sys.argv[2], len(ids))
        np.save(sys.argv[4], window_logits(llm, ids))
        return 0
    if cmd == "perplexity":
        windows = np.load(sys.argv[3])
        assert windows.ndim == 2 and windows.shape[1] >= 2, windows.shape
        llm = load(sys.argv[2], windows.shape[1])
        nll, count = 0.0, 0
        for w in windows:
            logits = window_logits(llm, w)[:-1].astype(np.float64)
            top = logits.max(axis=1, keepdims=True)
            lse = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
            nll -= float((logits[np.arange(len(w) - 1), w[1:]] - lse).sum())
            count += len(w) - 1
        print(json.dumps({"perplexity": float(np.exp(nll / count)), "tokens": count,
                          "windows": int(windows.shape[0]), "version": llama_cpp.__version__}))
        return 0
    if cmd == "kld":
        windows = np.load(sys.argv[4])
        assert windows.ndim == 2 and windows.shape[1] >= 2, windows.shape
        base = load(sys.argv[2], windows.shape[1])
        quant = load(sys.argv[3], windows.shape[1])
        total, same, count = 0.0, 0, 0
        for w in windows:
            p = window_logits(base, w)[:-1].astype(np.float64)
            q = window_logits(quant, w)[:-1].astype(np.float64)
            lp = p - p.max(axis=1, keepdims=True)
            lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))
            lq = q - q.max(axis=1, keepdims=True)
            lq -= np.log(np.exp(lq).sum(axis=1, keepdims=True))
            total += float((np.exp(lp) * (lp - lq)).sum())
            same += int((p.argmax(axis=1) == q.argmax(axis=1)).sum())
            count += len(w) - 1
        print(json.dumps({"mean_kld": total / count, "same_top_p": same / count,
                          "tokens": count, "version": llama_cpp.__version__}))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
