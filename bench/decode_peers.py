#!/usr/bin/env python3
"""Decode speed of BitLens's `generate` beside llama.cpp on the same model and CPU (issue #39).

BitLens: `bitlens-cli generate MODEL --scheme SCHEME --max-tokens N --json` gives the float32
and the quantized model's prefill and decode tokens/s (KV cache, batch 1, the CPU's threads).
llama.cpp (llama-cpp-python from the venv): the same model exported by BitLens as GGUF, F32
(every layer kept float: BitLens's float weights) and Q4_0 (gguf-q4_0), fed BitLens's prompt
ids, then N - 1 one-token evals of BitLens's float continuation (decode speed does not depend
on which tokens), timed the same way (tokens / seconds of the one-token passes). Both run in
this one process's lifetime, alternately, so load on a shared machine hits both alike.

Usage: decode_peers.py path/to/bitlens-cli [--model smollm2-135m] [--tokens 128]
       [--threads 2] [--repeats 3] [--out FILE.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def bitlens_generate(cli, model, scheme, prompt, tokens):
    out = subprocess.run([cli, "generate", model, "--scheme", scheme, "--prompt", prompt,
                          "--max-tokens", str(tokens), "--json"],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def export_gguf(cli, model, scheme, path):
    subprocess.run([cli, "export", model, "--scheme", scheme, "--format", "gguf", "--out", path,
                    "--limit", "1", "--quiet"], check=True, capture_output=True, text=True)


def llama_cpp_speed(path, prompt_ids, continuation, threads):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=path, n_ctx=len(prompt_ids) + len(continuation) + 8,
                          n_threads=threads, n_threads_batch=threads, verbose=False)
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt_ids)
    prefill = time.perf_counter() - t0
    t0 = time.perf_counter()
    for tok in continuation[:-1]:
        llm.eval([tok])
    decode = time.perf_counter() - t0
    del llm
    return len(prompt_ids) / prefill, (len(continuation) - 1) / decode


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cli")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompt", default="Once upon a time, in a small village by the sea, "
                                        "there lived")
    ap.add_argument("--out")
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        # Every projection and the head kept float: BitLens's float weights as an F32 GGUF.
        info = json.loads(subprocess.run([a.cli, "info", a.model, "--json"], check=True,
                                         capture_output=True, text=True).stdout)
        names = [l["name"] for l in info["layers"] if l["op"] == "MatMul" and l["params"] > 0]
        allfloat = os.path.join(tmp, "allfloat.json")
        json.dump({"preset": "gguf-q8_0", "overrides": {n: "float" for n in names}},
                  open(allfloat, "w"))
        f32 = os.path.join(tmp, "f32.gguf")
        q40 = os.path.join(tmp, "q4_0.gguf")
        export_gguf(a.cli, a.model, allfloat, f32)
        export_gguf(a.cli, a.model, "gguf-q4_0", q40)
        rows = {"bitlens float32": [], "bitlens w4-int4": [], "llama.cpp f32": [],
                "llama.cpp q4_0": []}
        run = None
        for _ in range(a.repeats):
            run = bitlens_generate(a.cli, a.model, "w4-int4", a.prompt, a.tokens)
            rows["bitlens float32"].append((run["float"]["prefill_tokens_per_s"],
                                            run["float"]["decode_tokens_per_s"]))
            rows["bitlens w4-int4"].append((run["quantized"]["prefill_tokens_per_s"],
                                            run["quantized"]["decode_tokens_per_s"]))
            cont = run["float"]["ids"]
            rows["llama.cpp f32"].append(llama_cpp_speed(f32, run["prompt_ids"], cont, a.threads))
            rows["llama.cpp q4_0"].append(llama_cpp_speed(q40, run["prompt_ids"], cont, a.threads))
    med = {k: (statistics.median(p for p, _ in v), statistics.median(d for _, d in v))
           for k, v in rows.items()}
    result = {"model": a.model, "prompt_tokens": len(run["prompt_ids"]),
              "generated_tokens": len(run["float"]["ids"]), "threads": a.threads,
              "bitlens_threads": run["threads"], "cpu": run["cpu"], "isa": run["isa"],
              "repeats": a.repeats,
              "tokens_per_s": {k: {"prefill": p, "decode": d} for k, (p, d) in med.items()},
              "ratios": {"w4-int4 / q4_0 decode": med["bitlens w4-int4"][1] /
                         med["llama.cpp q4_0"][1],
                         "float32 / f32 decode": med["bitlens float32"][1] /
                         med["llama.cpp f32"][1]}}
    print(f"{a.model}, {result['prompt_tokens']}-token prompt, {result['generated_tokens']} "
          f"generated, {a.threads} threads, {run['cpu']} (BitLens kernels at {run['isa']}), "
          f"median of {a.repeats}")
    print(f"{'':18} {'prefill tok/s':>14} {'decode tok/s':>13}")
    for k, (p, d) in med.items():
        print(f"{k:18} {p:14.1f} {d:13.1f}")
    for k, v in result["ratios"].items():
        print(f"{k}: {v:.2f}x")
    if a.out:
        json.dump(result, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    sys.exit(main())
