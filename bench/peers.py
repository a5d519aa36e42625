#!/usr/bin/env python3
"""Peers side by side on this machine (called by scripts/run-bench, or alone):

  PyTorch float32 vs torch.ao.quantization.quantize_dynamic (int8, fbgemm/x86 engine), on
    - an MLP: Linear(768, 3072) -> ReLU -> Linear(3072, 768), batch 128 (the M=128 K=768
      N=3072 shape of the kernel benchmark, and back), and
    - a MiniLM-class encoder built in plain torch: 6 layers, hidden 384, 12 heads,
      intermediate 1536, batch 8 x 128 tokens (the same shapes as bench/bench_encoder.cpp);
  onnxruntime float32 vs onnxruntime.quantization.quantize_dynamic on the same MLP exported to
    ONNX; and, with --bitlens-cli, BitLens's own `bitlens-cli bench` on that ONNX file
    (float vs dynamic-int8, and dynamic-int8:reduce-range=true, through the engine's real
    kernels).

Every figure is the median of --repeats timed runs after warm-up, on torch's thread count
(all cores) or --threads; with --cpu-time the process CPU time is measured instead of wall
time (robust to other load on a shared machine when one thread runs). Accuracy: SQNR (dB) of
each quantized output against its float32 output.
Writes JSON (--out) and prints a table.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn


CLOCK = time.perf_counter


def median_ms(fn, repeats, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = CLOCK()
        fn()
        times.append((CLOCK() - t0) * 1e3)
    return statistics.median(times)


def paired_ms(f, g, repeats, warmup=3):
    """Medians of f and g timed alternately (f, g, f, g, ...): on a shared machine, load that
    comes and goes then hits both sides alike."""
    for _ in range(warmup):
        f()
        g()
    tf, tg = [], []
    for _ in range(repeats):
        for fn, acc in ((f, tf), (g, tg)):
            t0 = CLOCK()
            fn()
            acc.append((CLOCK() - t0) * 1e3)
    return statistics.median(tf), statistics.median(tg)


def sqnr_db(ref, out):
    noise = (out - ref).pow(2).sum().item()
    return 10 * math.log10(ref.pow(2).sum().item() / max(noise, 1e-30))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(768, 3072)
        self.fc2 = nn.Linear(3072, 768)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, hidden=384, heads=12, inter=1536):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.o = nn.Linear(hidden, hidden)
        self.up = nn.Linear(hidden, inter)
        self.down = nn.Linear(inter, hidden)
        self.ln1 = nn.LayerNorm(hidden)
        self.ln2 = nn.LayerNorm(hidden)

    def forward(self, x):  # x: [B, S, hidden]
        b, s, h = x.shape
        dh = h // self.heads

        def split(t):
            return t.view(b, s, self.heads, dh).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        # Fused attention, as Hugging Face's BERT / MiniLM run it by default.
        ctx = nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))


class Encoder(nn.Module):
    def __init__(self, layers=6):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer() for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def init_bert_like(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.normal_(0, 0.02)
                m.bias.normal_(0, 0.02)


def torch_pair(name, model, x, repeats):
    model.eval()
    with torch.inference_mode():
        ref = model(x)
        row = {"model": name, "runtime": "pytorch"}
        qd = getattr(getattr(torch, "ao", None), "quantization", None)
        qd = getattr(qd, "quantize_dynamic", None) if qd else None
        if qd is None:
            row["float_ms"] = median_ms(lambda: model(x), repeats)
            row["note"] = "torch.ao.quantization.quantize_dynamic is absent in this torch"
            return row, ref
        qmodel = qd(model, {nn.Linear}, dtype=torch.qint8)
        out = qmodel(x)
        row["float_ms"], row["int8_ms"] = paired_ms(lambda: model(x), lambda: qmodel(x), repeats)
        row["int8_kernel"] = "torch.ao quantize_dynamic (%s engine)" % torch.backends.quantized.engine
        row["sqnr_db"] = sqnr_db(ref, out)
    return row, ref


def onnx_pair(model, x, repeats, workdir):
    row = {"model": "mlp", "runtime": "onnxruntime"}
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        row["note"] = "onnxruntime missing: %s" % e
        return row, None
    path = os.path.join(workdir, "mlp.onnx")
    qpath = os.path.join(workdir, "mlp.int8.onnx")
    try:
        kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                          opset_version=17, **kwargs)
    except Exception as e:  # the exporter needs onnxscript when only dynamo export is left
        row["note"] = "torch.onnx.export failed: %s" % str(e).splitlines()[0]
        return row, None
    quantize_dynamic(path, qpath, weight_type=QuantType.QInt8)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = torch.get_num_threads()
    feeds = {"x": x.numpy()}
    sf = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    sq = ort.InferenceSession(qpath, opts, providers=["CPUExecutionProvider"])
    ref = torch.from_numpy(sf.run(None, feeds)[0])
    out = torch.from_numpy(sq.run(None, feeds)[0])
    row["float_ms"], row["int8_ms"] = paired_ms(lambda: sf.run(None, feeds),
                                                lambda: sq.run(None, feeds), repeats)
    row["int8_kernel"] = "onnxruntime quantize_dynamic (QInt8 weights, MatMulInteger)"
    row["sqnr_db"] = sqnr_db(ref, out)
    return row, path


def bitlens_cli(cli, onnx_path, batch, repeats, scheme="dynamic-int8"):
    row = {"model": "mlp", "runtime": "bitlens " + scheme, "scheme": scheme}
    floats, ints, kernels = [], [], {}
    for _ in range(max(1, repeats // 5)):
        r = subprocess.run([cli, "bench", onnx_path, "--scheme", scheme, "--batch",
                            str(batch), "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            row["note"] = "bitlens-cli bench failed: %s" % (r.stderr.strip() or r.stdout.strip())
            return row
        j = json.loads(r.stdout)
        floats.append(batch / j["float_samples_per_s"] * 1e3)
        ints.append(batch / j["quantized_samples_per_s"] * 1e3)
        kernels = j["kernels"]
    row["float_ms"] = statistics.median(floats)
    row["int8_ms"] = statistics.median(ints)
    row["int8_kernel"] = "; ".join(sorted(set(kernels.values())))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", default="bench/results/peers.json")
    ap.add_argument("--bitlens-cli", default="")
    ap.add_argument("--threads", type=int, default=0, help="torch / onnxruntime threads")
    ap.add_argument("--cpu-time", action="store_true", help="time with process CPU time")
    args = ap.parse_args()
    global CLOCK
    if args.cpu_time:
        CLOCK = time.process_time
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    mlp = Mlp()
    init_bert_like(mlp)
    x = torch.randn(128, 768)
    row, _ = torch_pair("mlp", mlp, x, args.repeats)
    rows.append(row)
    enc = Encoder()
    init_bert_like(enc)
    xe = torch.randn(8, 128, 384)
    row, _ = torch_pair("minilm-encoder", enc, xe, max(5, args.repeats // 3))
    rows.append(row)
    with tempfile.TemporaryDirectory() as work:
        row, onnx_path = onnx_pair(mlp, x, args.repeats, work)
        rows.append(row)
        if args.bitlens_cli and onnx_path:
            # 8-bit weight codes, and 7-bit ones (reduce-range: what lets CPUs without VNNI
            # use vpmaddubsw exactly, as PyTorch's fbgemm does with 7-bit activations).
            for scheme in ("dynamic-int8", "dynamic-int8:reduce-range=true"):
                rows.append(bitlens_cli(args.bitlens_cli, onnx_path, 128, args.repeats, scheme))
    meta = {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "quantized_engine": torch.backends.quantized.engine,
            "clock": "process CPU time" if args.cpu_time else "wall"}
    try:
        import onnxruntime
        meta["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2)
    print("peers (%s, %d threads, medians):" % (", ".join("%s %s" % kv for kv in meta.items()
                                                          if kv[0] != "threads"),
                                                 meta["threads"]))
    for r in rows:
        if "int8_ms" not in r:
            print("  %-15s %-36s %s" % (r["model"], r["runtime"], r.get("note", "")))
            continue
        print("  %-15s %-36s float %8.2f ms  int8 %8.2f ms  %5.2fx float  SQNR %s  (%s)" % (
            r["model"], r["runtime"], r["float_ms"], r["int8_ms"], r["float_ms"] / r["int8_ms"],
            "%.1f dB" % r["sqnr_db"] if "sqnr_db" in r else "-", r.get("int8_kernel", "")))


if __name__ == "__main__":
    sys.exit(main())
