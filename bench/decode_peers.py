#!/usr/bin/env python3
"""pp / tg tokens/s of BitLens's `bench --decode` beside llama.cpp, same model, same CPU (#39).

llama-bench's two tests, batch 1, each from an empty KV cache: pp = one pass over a prompt of
P tokens (512), tg = G one-token passes (128); tokens are pseudo-random ids, as llama-bench's.
BitLens: `bitlens-cli bench MODEL --scheme S --decode --json` for each scheme (its float32
model and the scheme's quantized model with BitLens's own kernels), at each BITLENS_ISA level
asked for. llama.cpp (llama-cpp-python from the venv): BitLens's own GGUF exports of the same
model, F32 (every layer kept float), Q8_0 (gguf-q8_0) and Q4_0 (gguf-q4_0), timed the same way
(`eval` of the P ids, then G one-token `eval`s, after one warm-up token). The pairs:
  float32  vs f32     gguf-q4_0 vs q4_0     w4-int4 vs q4_0     gguf-q8_0 vs q8_0
Each ISA level runs BitLens, then llama.cpp on every file, in this one process's lifetime,
so load on a shared machine hits both alike. llama.cpp does not read BITLENS_ISA: its rows are
measured again at each level only to keep the two side by side in time.

Usage: decode_peers.py path/to/bitlens-cli [--model smollm2-135m] [--threads 2]
       [--prompt-tokens 512] [--gen-tokens 128] [--repetitions 1] [--levels avx2,avx512]
       [--out FILE.json]
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

# (BitLens scheme, its llama.cpp peer file); "float32" is every scheme run's float side.
PAIRS = [("float32", "f32"), ("gguf-q4_0", "q4_0"), ("w4-int4", "q4_0"), ("gguf-q8_0", "q8_0")]


def bitlens_bench(cli, model, scheme, a, level):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), BITLENS_ISA=level)
    out = subprocess.run([cli, "bench", model, "--scheme", scheme, "--decode", "--json",
                          "--prompt-tokens", str(a.prompt_tokens), "--gen-tokens",
                          str(a.gen_tokens), "--repetitions", str(a.repetitions)],
                         check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)


def export_gguf(cli, model, scheme, path):
    subprocess.run([cli, "export", model, "--scheme", scheme, "--format", "gguf", "--out", path,
                    "--limit", "1", "--quiet"], check=True, capture_output=True, text=True)


def llama_cpp_bench(path, a):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=path, n_ctx=max(a.prompt_tokens, a.gen_tokens) + 8,
                          n_batch=max(a.prompt_tokens, 1), n_threads=a.threads,
                          n_threads_batch=a.threads, verbose=False)
    rng = random.Random(0)
    prompt = [rng.randrange(llm.n_vocab()) for _ in range(a.prompt_tokens)]
    gen = [rng.randrange(llm.n_vocab()) for _ in range(a.gen_tokens)]
    llm.reset()
    llm.eval(prompt[:1])
    pp, tg = [], []
    for _ in range(a.repetitions):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        pp.append(a.prompt_tokens / (time.perf_counter() - t0))
        llm.reset()
        t0 = time.perf_counter()
        for tok in gen:
            llm.eval([tok])
        tg.append(a.gen_tokens / (time.perf_counter() - t0))
    del llm
    return statistics.mean(pp), statistics.mean(tg)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cli")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--repetitions", type=int, default=1)
    ap.add_argument("--levels", default="",
                    help="BITLENS_ISA levels, comma-separated (default: the CPU's own)")
    ap.add_argument("--out")
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    info = json.loads(subprocess.run([a.cli, "info", a.model, "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    levels = [l for l in a.levels.split(",") if l] or [""]
    result = {"model": a.model, "threads": a.threads, "prompt_tokens": a.prompt_tokens,
              "gen_tokens": a.gen_tokens, "repetitions": a.repetitions, "levels": []}
    with tempfile.TemporaryDirectory() as tmp:
        # Every projection and the head kept float: BitLens's float weights as an F32 GGUF.
        names = [l["name"] for l in info["layers"] if l["op"] == "MatMul" and l["params"] > 0]
        allfloat = os.path.join(tmp, "allfloat.json")
        json.dump({"preset": "gguf-q8_0", "overrides": {n: "float" for n in names}},
                  open(allfloat, "w"))
        files = {"f32": os.path.join(tmp, "f32.gguf"), "q4_0": os.path.join(tmp, "q4_0.gguf"),
                 "q8_0": os.path.join(tmp, "q8_0.gguf")}
        export_gguf(a.cli, a.model, allfloat, files["f32"])
        export_gguf(a.cli, a.model, "gguf-q4_0", files["q4_0"])
        export_gguf(a.cli, a.model, "gguf-q8_0", files["q8_0"])
        for level in levels:
            runs = {s: bitlens_bench(a.cli, a.model, s, a, level)
                    for s, _ in PAIRS if s != "float32"}
            first = runs[PAIRS[1][0]]
            peers = {name: llama_cpp_bench(path, a) for name, path in files.items()}
            rows = []
            for scheme, peer in PAIRS:
                side = first["float"] if scheme == "float32" else runs[scheme]["quantized"]
                pp, tg = side["pp_tokens_per_s"], side["tg_tokens_per_s"]
                ppeer, tpeer = peers[peer]
                rows.append({"bitlens": scheme, "llama_cpp": peer, "bitlens_pp": pp,
                             "bitlens_tg": tg, "llama_cpp_pp": ppeer, "llama_cpp_tg": tpeer,
                             "pp_ratio": pp / ppeer, "tg_ratio": tg / tpeer})
            kernels = {s: sorted(set(r["quantized"]["kernels"].values())) for s, r in runs.items()}
            result["levels"].append({"isa": first["isa"], "cpu": first["cpu"],
                                     "isa_note": first["isa_note"], "rows": rows,
                                     "kernels": kernels})
            print(f"{a.model}, {first['cpu']}, BitLens kernels at {first['isa']}, "
                  f"{a.threads} threads, pp{a.prompt_tokens} / tg{a.gen_tokens}, "
                  f"{a.repetitions} repetition(s)")
            print(f"{'BitLens':10} {'llama.cpp':9} {'pp':>8} {'peer pp':>8} {'ratio':>6} "
                  f"{'tg':>7} {'peer tg':>8} {'ratio':>6}")
            for r in rows:
                print(f"{r['bitlens']:10} {r['llama_cpp']:9} {r['bitlens_pp']:8.1f} "
                      f"{r['llama_cpp_pp']:8.1f} {r['pp_ratio']:6.2f} {r['bitlens_tg']:7.1f} "
                      f"{r['llama_cpp_tg']:8.1f} {r['tg_ratio']:6.2f}")
            for s, k in kernels.items():
                print(f"  {s} kernels: {'; '.join(k)}")
    if a.out:
        json.dump(result, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    sys.exit(main())
