#!/usr/bin/env python3
"""Probes bitlens-cli with hostile input, as issue #49's author did by hand (1,575 runs): mutated
Hugging Face folders (config.json, tokenizer.json, tokenizer_config.json, safetensors headers and
index files), mutated GGUF and ONNX files, kill -9 at random moments of a folder export into an
existing export, concurrent exports into one folder, and odd output paths (FIFO, device node,
socket, symbolic links and loops, folders, missing folders, newlines in names).

Every run has a timeout and a memory watch (the peak RSS, VmHWM, read from /proc while it runs,
with BITLENS_MEMORY_AVAILABLE set below the watch), and is classified by the contract of
docs/DESIGN.md:
  crash    ended by a signal it did not get from the probe (SIGSEGV, SIGABRT, ...)
  hang     still running at the timeout (killed by the probe)
  kill     its peak RSS passed the memory watch (killed by the probe, as the kernel would)
  exit     an exit code outside the contract of its class (0 ok, 3 bad input, 4 unsupported,
           5 resources / writes; 2 usage never for a well-formed command line)
  message  a refusal whose message is not one 'error: ' line naming the input path, or that
           is an 'internal failure'
  mixed    a folder export that holds files of two exports (or of another model) after a kill
           or concurrent exports, or leftovers (staging folders, lock files) after an export
           that finished
  replaced a non-regular output target (FIFO, device, socket, link, folder) that is gone,
           changed type or was written through when it should be refused
Each finding is printed with what reproduces it (seed, class, case number, mutation, command,
exit, stderr tail), and `--only CLASS:N` reruns that case alone. Exit 1 on any finding, 0 when
every run of every class held (nothing is skipped: a class that cannot run fails).

The base inputs are made here from tests/data (a tiny llama with the test BPE tokenizer, its
GGUF export, small ONNX graphs), so the probe needs no zoo model. With the fixed seed the cases
are the same on every machine. BITLENS_PROBE_COUNT (or --count) sets the number of cases of each
mutation class (default 24: about 250 runs in all, 3-5 minutes on 2 cores); a long local run:
BITLENS_PROBE_COUNT=300.

Usage: probe_hostile.py path/to/bitlens-cli [--seed N] [--count N] [--jobs N] [--only CLASS[:N]]
                        [--keep DIR]"""
import argparse
import concurrent.futures
import copy
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
CONTRACT = {0, 3, 4, 5}          # every command of the probe is a well-formed command line
MEMORY_AVAILABLE = "1G"          # what BitLens is told it may use
RSS_WATCH = 2 << 30              # a run whose peak RSS passes this is killed: finding 'kill'
# What an exit-5 refusal of a read-only command must be about: memory (the estimate, a value too
# large to allocate).
RESOURCES = re.compile(r"memory|[0-9.]+ ?[KMGTPE]i?B\b|allocat", re.I)


# ------------------------------------------------------------------------------------------
# Running one command
class Run:
    def __init__(self, cmd, code, sig, timed_out, over_memory, peak, wall, out, err):
        self.cmd, self.code, self.sig = cmd, code, sig
        self.timed_out, self.over_memory, self.peak, self.wall = timed_out, over_memory, peak, wall
        self.out, self.err = out, err


def peak_rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run(cmd, timeout, cwd=None, kill_after=None, start_delay=0.0):
    """Runs cmd (a list) with the memory variable set, a timeout and the RSS watch. kill_after:
    seconds after which the probe sends SIGKILL itself (the kill class); such a run's SIGKILL
    is not a finding."""
    if start_delay:
        time.sleep(start_delay)
    env = dict(os.environ, BITLENS_MEMORY_AVAILABLE=MEMORY_AVAILABLE)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                             cwd=cwd, start_new_session=True)
        timed_out = over = False
        peak = 0
        while p.poll() is None:
            now = time.monotonic() - start
            peak = max(peak, peak_rss(p.pid))
            if peak > RSS_WATCH:
                over = True
            elif now > timeout:
                timed_out = True
            elif kill_after is not None and now >= kill_after:
                kill_after = None
                os.killpg(p.pid, signal.SIGKILL)
                continue
            if over or timed_out:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                break
            time.sleep(0.01)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        rc = p.returncode
        return Run(cmd, rc if rc >= 0 else None, -rc if rc < 0 else None, timed_out, over, peak,
                   wall, out.read().decode(errors="replace"), err.read().decode(errors="replace"))


# ------------------------------------------------------------------------------------------
# Findings
class Probe:
    def __init__(self, a):
        self.a = a
        self.findings = []
        self.counts = {}
        self.walls = []
        self.exits = {}
        self.quiet = False
        self.peak = 0
        self.log = open(a.log, "w") if a.log else None

    def count(self, cls):
        self.counts[cls] = self.counts.get(cls, 0) + 1

    def finding(self, cls, n, kind, what, r=None, detail=""):
        f = {"class": cls, "case": n, "kind": kind, "mutation": what, "detail": detail}
        if r is not None:
            f.update(command=" ".join(shlex.quote(c) for c in r.cmd),
                     exit=r.code if r.sig is None else f"signal {r.sig}",
                     peak_mb=round(r.peak / 2 ** 20), wall_s=round(r.wall, 2),
                     stderr="\n".join(r.err.strip().splitlines()[-6:]))
        self.findings.append(f)
        if self.quiet:
            return False
        print(f"FINDING {kind}: class {cls} case {n} (seed {self.a.seed}; rerun with "
              f"--seed {self.a.seed} --only {cls}:{n}): {what} {detail}".rstrip(), flush=True)
        for key in ("command", "exit", "peak_mb", "wall_s"):
            if key in f:
                print(f"  {key}: {f[key]}")
        if f.get("stderr"):
            for line in f["stderr"].splitlines():
                print(f"  stderr: {line}")
        return False

    def judge(self, cls, n, what, r, names, allowed=CONTRACT, killed_by_probe=False,
              inputs_only=False):
        """The contract for one run: no signal, no timeout, no memory kill, an exit code in
        allowed, and a refusal that is an 'error: ' line naming one of names. inputs_only: the
        command reads only the mutated input and writes nothing, so exit 5 must be a refusal
        for memory (the estimate), never a file that is merely malformed."""
        self.count(cls)
        self.walls.append(r.wall)
        code = r.code if r.sig is None else f"signal {r.sig}"
        hist = self.exits.setdefault(cls, {})
        hist[str(code)] = hist.get(str(code), 0) + 1
        self.peak = max(self.peak, r.peak)
        if self.log:
            err = [l for l in r.err.splitlines() if l.startswith("error: ")]
            self.log.write(json.dumps({"class": cls, "case": n, "mutation": what, "exit": code,
                                       "peak_mb": round(r.peak / 2 ** 20), "wall_s":
                                       round(r.wall, 2), "error": err[-1] if err else ""}) + "\n")
        if r.timed_out:
            return self.finding(cls, n, "hang", what, r, f"(timeout {self.a.timeout} s)")
        if r.over_memory:
            return self.finding(cls, n, "kill", what, r, f"(peak RSS over {RSS_WATCH >> 20} MB)")
        if r.sig is not None:
            if killed_by_probe and r.sig == signal.SIGKILL:
                return True
            return self.finding(cls, n, "crash", what, r)
        if r.code not in allowed:
            return self.finding(cls, n, "exit", what, r, f"(allowed: {sorted(allowed)})")
        if r.code == 5 and inputs_only and not RESOURCES.search(r.err):
            return self.finding(cls, n, "exit", what, r,
                                "(exit 5 is for resources and writes; this is bad input, 3, "
                                "or unsupported, 4)")
        if r.code != 0:
            lines = [l for l in r.err.splitlines() if l.startswith("error: ")]
            if "internal failure" in r.err:
                return self.finding(cls, n, "message", what, r, "(internal failure)")
            if not lines:
                return self.finding(cls, n, "message", what, r, "(no 'error: ' line)")
            shown = [x.replace("\n", "\\n").replace("\t", "\\t") for x in names]
            if not any(x in r.err for x in shown):
                return self.finding(cls, n, "message", what, r, f"(does not name {shown[0]})")
        return True


# ------------------------------------------------------------------------------------------
# Base inputs
BPE = os.path.join(DATA, "text", "bpe_llama3.json")
TEXT = ("In the beginning the model read a few plain words, and then some more words about "
        "the weather, the sea and the hills. ") * 20


def make_llama(d, seed=0, hidden=64, inter=128, heads=4, kv=2, layers=2):
    os.makedirs(d, exist_ok=True)
    shutil.copy(BPE, os.path.join(d, "tokenizer.json"))
    vocab = len(json.load(open(BPE))["model"]["vocab"])
    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=hidden,
               intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
               num_key_value_heads=kv, head_dim=hidden // heads, vocab_size=vocab,
               max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
               tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, hidden_act="silu",
               torch_dtype="float32")
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
               "add_bos_token": True, "model_max_length": 256, "clean_up_tokenization_spaces": False,
               "tokenizer_class": "PreTrainedTokenizerFast"},
              open(os.path.join(d, "tokenizer_config.json"), "w"), indent=1)
    rng = np.random.default_rng(seed)
    r = lambda *s: (rng.standard_normal(s) * 0.05).astype(np.float32)
    hd = hidden // heads
    w = {"model.embed_tokens.weight": r(vocab, hidden), "model.norm.weight": 1 + r(hidden),
         "lm_head.weight": r(vocab, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1 + r(hidden)
        w[p + "post_attention_layernorm.weight"] = 1 + r(hidden)
        w[p + "self_attn.q_proj.weight"] = r(heads * hd, hidden)
        w[p + "self_attn.k_proj.weight"] = r(kv * hd, hidden)
        w[p + "self_attn.v_proj.weight"] = r(kv * hd, hidden)
        w[p + "self_attn.o_proj.weight"] = r(hidden, heads * hd)
        w[p + "mlp.gate_proj.weight"] = r(inter, hidden)
        w[p + "mlp.up_proj.weight"] = r(inter, hidden)
        w[p + "mlp.down_proj.weight"] = r(hidden, inter)
    save_file(w, os.path.join(d, "model.safetensors"))
    return d


def onnx_bases(d):
    """Small graphs covering the attribute-bearing ops: a CNN and a transformer-ish block."""
    rng = np.random.default_rng(1)
    t = lambda name, *shape: helper.make_tensor(
        name, TensorProto.FLOAT, list(shape), rng.standard_normal(shape).astype(np.float32).ravel())
    cnn = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3],
                          pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1),
         helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
         helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                          strides=[2, 2]),
         helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", kernel_shape=[3, 3],
                          pads=[1, 1, 1, 1], group=2),
         helper.make_node("AveragePool", ["c2"], ["p2"], name="pool2", kernel_shape=[2, 2],
                          strides=[2, 2]),
         helper.make_node("Flatten", ["p2"], ["f"], name="flat", axis=1),
         helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1, alpha=1.0,
                          beta=1.0)],
        "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        initializer=[t("w1", 8, 1, 3, 3), t("b1", 8), t("w2", 8, 4, 3, 3), t("wf", 10, 128),
                     t("bf", 10)])
    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [1, 16, 8])
    block = helper.make_graph(
        [helper.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
         helper.make_node("Reshape", ["q", "shape"], ["qr"], name="reshape"),
         helper.make_node("Transpose", ["qr"], ["qt"], name="transpose", perm=[0, 2, 1]),
         helper.make_node("Softmax", ["qt"], ["s"], name="softmax", axis=-1),
         helper.make_node("ReduceMean", ["s"], ["m"], name="mean", axes=[2], keepdims=1),
         helper.make_node("Concat", ["s", "s"], ["cat"], name="concat", axis=2),
         helper.make_node("Add", ["cat", "m"], ["sum"], name="add"),
         helper.make_node("Split", ["sum"], ["a", "b"], name="split", axis=2),
         helper.make_node("Gather", ["a", "idx"], ["g"], name="gather", axis=1),
         helper.make_node("LayerNormalization", ["g", "gamma", "beta"], ["ln"], name="ln",
                          axis=-1, epsilon=1e-5),
         helper.make_node("Pad", ["ln", "pads"], ["pd"], name="pad", mode="constant"),
         helper.make_node("Slice", ["pd", "starts", "ends", "axes"], ["y"], name="slice")],
        "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2])],
        initializer=[t("wq", 32, 32), shape, t("gamma", 16), t("beta", 16),
                     helper.make_tensor("idx", TensorProto.INT64, [2], [0, 3]),
                     helper.make_tensor("pads", TensorProto.INT64, [6], [0, 0, 1, 0, 0, 1]),
                     helper.make_tensor("starts", TensorProto.INT64, [1], [1]),
                     helper.make_tensor("ends", TensorProto.INT64, [1], [3]),
                     helper.make_tensor("axes", TensorProto.INT64, [1], [2])])
    up = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["u"], name="resize", mode="nearest"),
         helper.make_node("ConvTranspose", ["u", "wt"], ["ct"], name="deconv", strides=[2, 2],
                          kernel_shape=[2, 2]),
         helper.make_node("GlobalAveragePool", ["ct"], ["y"], name="gap")],
        "up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 1, 1])],
        initializer=[helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2]),
                     t("wt", 2, 3, 2, 2)])
    paths = []
    for g, opset in ((cnn, 13), (block, 17), (up, 13)):
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=7 if opset <= 13 else 8)
        onnx.checker.check_model(m)
        p = os.path.join(d, g.name + ".onnx")
        onnx.save(m, p)
        paths.append(p)
    return paths


# ------------------------------------------------------------------------------------------
# Value pools
def odd_value(rng, like=None):
    """A value of another type or an absurd one for a JSON key."""
    pool = ["x", "", "32", -1, 0, 1, 2.5, -2 ** 31, 2 ** 31, 2 ** 53 + 1, 2 ** 63 - 1, 2 ** 63,
            -2 ** 63, 2 ** 64, 10 ** 30, 1e12, -1e12, 1e308, float("nan"), float("inf"),
            float("-inf"), True, False, None, [], [1, 2], ["llama"], {}, {"a": 1},
            [[[[]]]], "\u0000", "\n", "../../etc/passwd", "A" * 5000, 1e-320]
    v = rng.choice(pool)
    if isinstance(like, int) and not isinstance(like, bool) and rng.random() < 0.4:
        v = rng.choice([like * 1000, like * 10 ** 9, -like, like + 1, like - 1, like * 3 // 2,
                        10 ** 12, 2 ** 62])
    return v


def dump_json(obj):
    # NaN / Infinity as Python writes them (what a careless exporter writes), not refused here.
    return json.dumps(obj, indent=1, allow_nan=True)


def json_paths(obj, prefix=(), depth=0, limit=4):
    """Every (path, value) inside obj up to depth limit, lists sampled."""
    out = []
    if depth >= limit:
        return out
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, list):
        items = list(enumerate(obj))[:3] + ([(len(obj) - 1, obj[-1])] if len(obj) > 3 else [])
    else:
        return out
    for k, v in items:
        out.append((prefix + (k,), v))
        out.extend(json_paths(v, prefix + (k,), depth + 1, limit))
    return out


def set_path(obj, path, value, delete=False):
    node = obj
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value


CONFIG_KEYS = ["model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
               "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
               "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings",
               "hidden_act", "torch_dtype", "architectures", "rope_scaling", "rope_parameters",
               "bos_token_id", "eos_token_id", "quantization_config", "sliding_window",
               "attention_bias", "mlp_bias", "partial_rotary_factor", "layer_types",
               "text_config", "dtype"]
ROPE_FORMS = ["garbage", [1, 2], {"factor": 4}, {"rope_type": "llama3"},
              {"rope_type": "llama3", "factor": float("nan"), "low_freq_factor": 1,
               "high_freq_factor": 4, "original_max_position_embeddings": 32},
              {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4,
               "original_max_position_embeddings": 0},
              {"rope_type": "linear", "factor": 0}, {"rope_type": "linear", "factor": -1},
              {"rope_type": "linear", "factor": 1e308}, {"type": "dynamic", "factor": 2},
              {"rope_type": "yarn", "factor": 4}, {"rope_type": 5}, {"rope_theta": "x"},
              {"rope_type": "default", "rope_theta": -1}, {"rope_type": "default",
                                                         "rope_theta": 0}]


# ------------------------------------------------------------------------------------------
# Mutation classes: each returns (description, path to give `info`, names the message may use)
def link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy(src, dst)


def hf_folder(base, d, skip=()):
    os.makedirs(d)
    for f in os.listdir(base):
        if f not in skip:
            link_or_copy(os.path.join(base, f), os.path.join(d, f))
    return d


def mut_config(rng, base, d):
    cfg = json.load(open(os.path.join(base, "config.json")))
    hf_folder(base, d, skip=("config.json",))
    edits = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        r = rng.random()
        key = rng.choice(CONFIG_KEYS)
        if r < 0.12:
            cfg.pop(key, None)
            edits.append(f"delete {key}")
        elif key in ("rope_scaling", "rope_parameters") and r < 0.6:
            cfg[key] = copy.deepcopy(rng.choice(ROPE_FORMS))
            edits.append(f"{key}={json.dumps(cfg[key])[:80]}")
        else:
            cfg[key] = odd_value(rng, cfg.get(key))
            edits.append(f"{key}={json.dumps(cfg[key])[:80]}")
    text = dump_json(cfg)
    if rng.random() < 0.05:
        text = text[:rng.randrange(len(text))]
        edits.append("truncated")
    open(os.path.join(d, "config.json"), "w").write(text)
    return "config.json: " + "; ".join(edits), d, [d]


def mut_tokenizer(rng, base, d):
    name = rng.choice(["tokenizer.json", "tokenizer.json", "tokenizer_config.json"])
    obj = json.load(open(os.path.join(base, name)))
    hf_folder(base, d, skip=(name,))
    paths = json_paths(obj)
    edits = []
    for _ in range(rng.choice([1, 1, 2])):
        path, old = rng.choice(paths)
        if rng.random() < 0.15:
            try:
                set_path(obj, path, None, delete=True)
            except (KeyError, IndexError, TypeError):
                continue
            edits.append(f"delete {'.'.join(map(str, path))}")
        else:
            v = odd_value(rng, old)
            try:
                set_path(obj, path, v)
            except (KeyError, IndexError, TypeError):
                continue
            edits.append(f"{'.'.join(map(str, path))}={json.dumps(v)[:60]}")
        paths = json_paths(obj)
    if name == "tokenizer.json" and rng.random() < 0.1:
        obj = odd_value(rng)
        edits = [f"whole file = {json.dumps(obj)[:60]}"]
    open(os.path.join(d, name), "w").write(dump_json(obj))
    return f"{name}: " + "; ".join(edits), d, [d]


def read_safetensors(path):
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def write_safetensors_raw(path, header, data, header_bytes=None, length=None):
    text = header_bytes if header_bytes is not None else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if length is None else length) + text + data)


DTYPES = ["F32", "F16", "BF16", "F64", "I8", "U8", "I16", "I32", "I64", "BOOL", "F8_E4M3",
          "F8_E5M2", "F4", "Q4_0", "", "f32", 5, None, ["F32"]]


def mut_safetensors(rng, base, d):
    header, data = read_safetensors(os.path.join(base, "model.safetensors"))
    hf_folder(base, d, skip=("model.safetensors",))
    st = os.path.join(d, "model.safetensors")
    names = sorted(k for k in header if k != "__metadata__")
    name = rng.choice(names)
    t = header[name]
    kind = rng.choice(["offsets", "offsets", "dtype", "shape", "shape", "length", "truncate",
                       "garbage", "metadata", "rename", "drop", "index", "index", "dup"])
    what = kind
    hb = length = None
    if kind == "offsets":
        a, b = t["data_offsets"]
        choice = rng.choice([[b, a], [a, b + 4], [a - 4, b], [-8, b], [a, 2 ** 63],
                             [2 ** 64 - 8, 2 ** 64 - 4], [a, len(data) + 8], [0, 0],
                             [a + 0.5, b], ["0", b], [a], [a, b, b], None, [a, 2 ** 62 + a]])
        t["data_offsets"] = choice
        what = f"{name} data_offsets={json.dumps(choice)}"
    elif kind == "dtype":
        t["dtype"] = rng.choice(DTYPES)
        what = f"{name} dtype={json.dumps(t['dtype'])}"
    elif kind == "shape":
        s = list(t["shape"])
        choice = rng.choice([[], [0], [-1] + s[1:], s[::-1], s + [1], [2 ** 40] + s[1:],
                             [2 ** 32, 2 ** 32], [2 ** 63], s[:1], [1] * 64, [s[0] * 2] + s[1:],
                             [1.5] + s[1:], ["4"], None, 7])
        t["shape"] = choice
        what = f"{name} shape={json.dumps(choice)}"
    elif kind == "length":
        full = json.dumps(header).encode()
        length = rng.choice([0, 1, 7, len(full) + 1000, 2 ** 63, 2 ** 64 - 1, 100 << 20,
                             len(full) // 2])
        what = f"header length={length}"
    elif kind == "truncate":
        blob = open(os.path.join(base, "model.safetensors"), "rb").read()
        cut = rng.choice([0, 4, 8, 9, 8 + len(json.dumps(header)) // 2,
                          rng.randrange(len(blob)), len(blob) - 1])
        open(st, "wb").write(blob[:cut])
        return f"model.safetensors truncated at {cut} of {len(blob)}", d, [d]
    elif kind == "garbage":
        hb = rng.choice([b"[1,2,3]", b"null", b"{", b"\xff\xfe{}", b'{"a":', b"\"x\"",
                         json.dumps({name: "x"}).encode(), b"{" + b'"a":{' * 5000 + b"}" * 5000 +
                         b"}"])
        what = f"header={hb[:40]!r}"
    elif kind == "metadata":
        header["__metadata__"] = rng.choice([5, "x", [1], {"format": 5}, {"a": {"b": 1}}, None])
        what = f"__metadata__={json.dumps(header['__metadata__'])}"
    elif kind == "rename":
        header[rng.choice(["", "../x", "model.layers.99.mlp.up_proj.weight", name + "\n"])] = \
            header.pop(name)
        what = f"rename {name}"
    elif kind == "drop":
        header.pop(name)
        what = f"drop {name}"
    elif kind == "dup":
        hb = json.dumps(header).encode()[:-1] + b', "' + name.encode() + \
            b'": {"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
        what = f"duplicate key {name}"
    elif kind == "index":
        # Sharded: model.safetensors.index.json naming the shard, or something else.
        link_or_copy(os.path.join(base, "model.safetensors"),
                     os.path.join(d, "model-00001-of-00001.safetensors"))
        target = rng.choice(["../../etc/passwd", "/etc/passwd", "missing.safetensors", ".",
                             "..", "", "config.json", 5, None, "model-00001-of-00001.safetensors",
                             "/dev/zero", "../" * 40 + "etc/shadow"])
        wm = {k: "model-00001-of-00001.safetensors" for k in names}
        wm[name] = target
        index = rng.choice([{"metadata": {}, "weight_map": wm}, {"weight_map": wm},
                            {"weight_map": list(wm)}, {"weight_map": "x"},
                            {"metadata": {"total_size": -1}, "weight_map": wm}])
        open(os.path.join(d, "model.safetensors.index.json"), "w").write(json.dumps(index))
        return f"index: {name} -> {json.dumps(target)} ({list(index)})", d, [d]
    write_safetensors_raw(st, header, data, hb, length)
    return "model.safetensors " + what, d, [d]


# GGUF: a field map of the header, then a patch of one field or the bytes.
GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
               11: "<q", 12: "<d"}


def gguf_fields(blob):
    """[(offset, struct format, label)] of every count, type, length, dim and offset field."""
    fields = [(4, "<I", "version"), (8, "<Q", "n_tensors"), (16, "<Q", "n_kv")]
    n_tensors, n_kv = struct.unpack_from("<QQ", blob, 8)
    pos = 24

    def string(label):
        nonlocal pos
        n = struct.unpack_from("<Q", blob, pos)[0]
        if label is not None:
            fields.append((pos, "<Q", f"{label} string length"))
        s = blob[pos + 8:pos + 8 + n].decode(errors="replace")
        pos += 8 + n
        return s

    def value(t, label):
        nonlocal pos
        if t == 8:
            string(label)
        elif t == 9:
            fields.append((pos, "<I", f"{label} array type"))
            et = struct.unpack_from("<I", blob, pos)[0]
            fields.append((pos + 4, "<Q", f"{label} array count"))
            n = struct.unpack_from("<Q", blob, pos + 4)[0]
            pos += 12
            for i in range(n):
                value(et, f"{label}[{i}]" if label is not None and i < 3 else None)
        else:
            if label is not None and t in GGUF_SCALAR:
                fields.append((pos, GGUF_SCALAR[t], f"{label} value"))
            pos += struct.calcsize(GGUF_SCALAR[t])

    for _ in range(n_kv):
        key = string("key")
        fields.append((pos, "<I", f"{key} type"))
        t = struct.unpack_from("<I", blob, pos)[0]
        pos += 4
        value(t, key)
    for i in range(n_tensors):
        name = string(f"tensor {i} name")
        fields.append((pos, "<I", f"{name} n_dims"))
        nd = struct.unpack_from("<I", blob, pos)[0]
        pos += 4
        for j in range(nd):
            fields.append((pos, "<Q", f"{name} dim {j}"))
            pos += 8
        fields.append((pos, "<I", f"{name} ggml type"))
        fields.append((pos + 4, "<Q", f"{name} offset"))
        pos += 12
    return fields, pos


def mut_gguf(rng, base, d):
    blob = bytearray(open(base, "rb").read())
    fields, header_end = gguf_fields(bytes(blob))
    path = os.path.join(d, "model.gguf")
    os.makedirs(d)
    kind = rng.choice(["field", "field", "field", "field", "truncate", "bytes"])
    if kind == "field":
        off, fmt, label = rng.choice(fields)
        size = struct.calcsize(fmt)
        old = struct.unpack_from(fmt, blob, off)[0]
        if fmt in ("<f", "<d"):
            new = rng.choice([float("nan"), float("inf"), -1.0, 0.0, 1e30, -1e-30])
        elif fmt == "<?":
            new = rng.choice([False, True])
        else:
            bits = size * 8
            signed = fmt.islower() if fmt[1].isalpha() else False
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
            new = rng.choice([0, 1, hi, lo, old + 1, old - 1, old * 2, old + 4096, 1 << (bits - 1)
                              if not signed else hi, rng.randrange(lo, hi)] +
                             ([2 ** 32, 2 ** 40, len(blob)] if bits == 64 else [30, 31, 39, 100]))
            new = max(lo, min(hi, new))
        struct.pack_into(fmt, blob, off, new)
        what = f"{label} {old} -> {new}"
    elif kind == "truncate":
        cut = rng.choice([0, 3, 4, 8, 16, 24, rng.randrange(24, header_end),
                          rng.randrange(header_end, len(blob)), len(blob) - 1])
        blob = blob[:cut]
        what = f"truncated at {cut} of {len(blob)} (header ends at {header_end})"
    else:
        n = rng.choice([1, 2, 8])
        spots = [rng.randrange(4, header_end) for _ in range(n)]
        for s in spots:
            blob[s] = rng.randrange(256)
        what = f"{n} random header bytes at {spots}"
    open(path, "wb").write(blob)
    return "gguf " + what, path, [path]


ONNX_INTS = [-2 ** 62, -2 ** 31, -7, -1, 0, 1, 2, 3, 9, 64, 2 ** 20, 2 ** 31 - 1, 2 ** 40,
             2 ** 62]


def mut_onnx(rng, bases, d):
    base = rng.choice(bases)
    m = onnx.load(base)
    g = m.graph
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    kind = rng.choice(["attr", "attr", "attr", "attr", "attr-type", "attr-drop", "opset",
                       "elem-type", "dims", "init-dims", "init-raw", "init-type", "wire",
                       "op-type", "drop-node", "external", "bytes", "truncate", "ir"])
    node = rng.choice(list(g.node))
    what = kind
    if kind == "attr" and node.attribute:
        a = rng.choice(list(node.attribute))
        if a.type == onnx.AttributeProto.INT:
            a.i = rng.choice(ONNX_INTS)
            what = f"{node.name}.{a.name}={a.i}"
        elif a.type == onnx.AttributeProto.INTS:
            n = rng.choice([0, 1, len(a.ints), len(a.ints), len(a.ints) * 2, 9])
            vals = [rng.choice(ONNX_INTS) if rng.random() < 0.5 else v for v in
                    (list(a.ints) * 9)[:n]] if a.ints else [rng.choice(ONNX_INTS)
                                                             for _ in range(n)]
            del a.ints[:]
            a.ints.extend(vals)
            what = f"{node.name}.{a.name}={vals}"
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = rng.choice([float("nan"), float("inf"), -1.0, 0.0, 1e38, -1e-45])
            what = f"{node.name}.{a.name}={a.f}"
        elif a.type == onnx.AttributeProto.STRING:
            a.s = rng.choice([b"", b"garbage", b"\xff\xfe", b"linear" * 1000, b"cubic"])
            what = f"{node.name}.{a.name}={a.s[:20]!r}"
        else:
            what = f"{node.name}.{a.name} untouched"
    elif kind in ("attr", "attr-type"):
        name = rng.choice(["axis", "pads", "strides", "kernel_shape", "group", "perm", "mode",
                           "epsilon", "transB", "keepdims", "axes", "dilations", "split"])
        for a in list(node.attribute):
            if a.name == name:
                node.attribute.remove(a)
        value = rng.choice([rng.choice(ONNX_INTS), [rng.choice(ONNX_INTS)] * rng.randrange(7),
                            "x", 1.5, float("nan"), b"\x00"])
        node.attribute.append(helper.make_attribute(name, value) if value != [] else
                              helper.make_attribute(name, [], attr_type=onnx.AttributeProto.INTS))
        what = f"{node.name}.{name}={value!r}"[:120]
    elif kind == "attr-drop" and node.attribute:
        a = rng.choice(list(node.attribute))
        node.attribute.remove(a)
        what = f"drop {node.name}.{a.name}"
    elif kind == "opset":
        v = rng.choice([0, 1, 6, 7, 9, 10, 11, 12, 17, 21, 28, 29, 999, -1, 2 ** 62])
        m.opset_import[0].version = v
        if rng.random() < 0.2:
            m.opset_import[0].domain = rng.choice(["ai.onnx.ml", "com.microsoft", "x"])
        what = f"opset {m.opset_import[0].domain!r} {v}"
    elif kind == "elem-type":
        vi = rng.choice(list(g.input) + list(g.output))
        vi.type.tensor_type.elem_type = rng.choice([0, 2, 3, 6, 7, 8, 9, 10, 11, 16, 17, 23, 30,
                                                    1000])
        what = f"{vi.name} elem_type={vi.type.tensor_type.elem_type}"
    elif kind == "dims":
        vi = g.input[0]
        dims = vi.type.tensor_type.shape.dim
        choice = rng.choice(["neg", "zero", "huge", "param", "rank+", "rank-", "none"])
        if choice == "none":
            vi.type.tensor_type.ClearField("shape")
        elif choice == "rank+":
            dims.add().dim_value = rng.choice([1, 3, 2 ** 33])
        elif choice == "rank-":
            del dims[-1]
        else:
            dim = rng.choice(list(dims))
            if choice == "param":
                dim.dim_param = rng.choice(["N", "", "\n"])
            else:
                dim.dim_value = {"neg": -5, "zero": 0, "huge": rng.choice([2 ** 31, 2 ** 40,
                                                                           2 ** 62])}[choice]
        what = f"input dims {choice}: {[x.dim_value or x.dim_param for x in dims]}"
    elif kind in ("init-dims", "init-raw", "init-type", "external"):
        t = rng.choice(list(g.initializer))
        if kind == "init-dims":
            dims = list(t.dims)
            choice = rng.choice([[], [0], [-1] + dims[1:], dims[::-1], dims + [2], [2 ** 40],
                                 [2 ** 31, 2 ** 31], dims[:1], [(dims or [1])[0] * 2] + dims[1:]])
            del t.dims[:]
            t.dims.extend(choice)
            what = f"initializer {t.name} dims={choice}"
        elif kind == "init-raw":
            if not t.raw_data:
                arr = onnx.numpy_helper.to_array(t)
                t.CopyFrom(onnx.numpy_helper.from_array(arr, t.name))
            cut = rng.randrange(len(t.raw_data) + 1)
            t.raw_data = t.raw_data[:cut] if rng.random() < 0.7 else t.raw_data + b"\x00" * 3
            what = f"initializer {t.name} raw_data {len(t.raw_data)} bytes"
        elif kind == "init-type":
            t.data_type = rng.choice([0, 2, 3, 5, 6, 7, 8, 9, 10, 11, 16, 17, 21, 30, 1000])
            what = f"initializer {t.name} data_type={t.data_type}"
        else:
            arr = onnx.numpy_helper.to_array(t)
            t.CopyFrom(onnx.numpy_helper.from_array(arr, t.name))
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
            loc = rng.choice(["../../etc/passwd", "/etc/passwd", "missing.bin", "/dev/zero",
                              "../" * 30 + "proc/self/mem", "", "."])
            for k, v in [("location", loc), ("offset", str(rng.choice([0, 2 ** 62, -1]))),
                         ("length", str(rng.choice([16, 2 ** 40, -4])))]:
                e = t.external_data.add()
                e.key, e.value = k, v
            what = f"initializer {t.name} external data {loc!r}"
    elif kind == "wire":
        choice = rng.choice(["undefined", "cycle", "dup-output", "empty", "graph-output"])
        if choice == "undefined" and node.input:
            node.input[rng.randrange(len(node.input))] = "nowhere"
        elif choice == "cycle" and node.input:
            node.input[0] = node.output[0]
        elif choice == "dup-output":
            other = rng.choice(list(g.node))
            other.output[0] = node.output[0]
        elif choice == "empty" and node.input:
            node.input[0] = ""
        else:
            g.output[0].name = "nowhere"
        what = f"{choice} at {node.name}"
    elif kind == "op-type":
        node.op_type = rng.choice(["Foo", "", "Conv", "LSTM", "If", "Loop", "Scan", "Relu",
                                   "MatMul", "Reshape", "Einsum", "conv"])
        what = f"{node.name} op_type={node.op_type!r}"
    elif kind == "drop-node":
        g.node.remove(node)
        what = f"drop node {node.name}"
    elif kind == "ir":
        m.ir_version = rng.choice([0, 1, 3, 11, 12, 99, -1])
        what = f"ir_version {m.ir_version}"
    blob = m.SerializeToString()
    if kind == "bytes":
        blob = bytearray(blob)
        spots = [rng.randrange(len(blob)) for _ in range(rng.choice([1, 4, 16]))]
        for s in spots:
            blob[s] = rng.randrange(256)
        what = f"{len(spots)} random bytes"
    elif kind == "truncate":
        cut = rng.randrange(len(blob))
        blob = blob[:cut]
        what = f"truncated at {cut} of {len(blob)}"
    open(path, "wb").write(bytes(blob))
    return f"{os.path.basename(base)}: {what}", path, [path]


# ------------------------------------------------------------------------------------------
# Folder exports: kill -9 at a random moment, concurrent exports
def folder_state(d):
    """A fingerprint of an export folder: its file names and the hash of each."""
    if not os.path.isdir(d):
        return None
    return tuple(sorted((f, hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest())
                        for f in os.listdir(d)))


def leftovers(parent, keep):
    return sorted(f for f in os.listdir(parent) if f not in keep)


class Exports:
    def __init__(self, probe, cli, work, model, text):
        self.p, self.cli, self.work, self.model, self.text = probe, cli, work, model, text
        self.refs = {}

    def cmd(self, scheme, out):
        return [self.cli, "export", self.model, "--scheme", scheme, "--format", "safetensors",
                "--out", out, "--calib", self.text, "--seq-len", "32", "--limit", "2"]

    def reference(self, scheme):
        """Exports scheme twice into fresh folders: its fingerprint (the export must be
        reproducible for the comparison to mean anything) and its time."""
        if scheme not in self.refs:
            states, walls = [], []
            for i in range(2):
                out = os.path.join(self.work, f"ref-{len(self.refs)}-{i}")
                r = run(self.cmd(scheme, out), self.p.a.timeout)
                if r.code != 0:
                    raise SystemExit(f"probe setup: reference export {scheme} failed: {r.err}")
                states.append(folder_state(out))
                walls.append(r.wall)
            if states[0] != states[1]:
                raise SystemExit(f"probe setup: export {scheme} is not reproducible")
            self.refs[scheme] = (states[0], max(walls))
        return self.refs[scheme]

    SCHEMES = ["w4-int4:sym=true", "w4-int4", "w4-int4:group=32"]

    def killed(self, n, rng):
        cls = "kill9"
        old, new = rng.sample(self.SCHEMES, 2)
        old_state, _ = self.reference(old)
        new_state, wall = self.reference(new)
        parent = os.path.join(self.work, f"kill-{n}")
        os.makedirs(parent)
        out = os.path.join(parent, "m")
        r0 = run(self.cmd(old, out), self.p.a.timeout)
        if not self.p.judge(cls, n, f"first export {old}", r0, [out], allowed={0}):
            return
        at = rng.uniform(0.0, wall * 1.1)
        what = f"export {new} over an export of {old}, kill -9 after {at:.2f} s"
        r = run(self.cmd(new, out), self.p.a.timeout, kill_after=at)
        if not self.p.judge(cls, n, what, r, [out], allowed={0}, killed_by_probe=True):
            return
        state = folder_state(out)
        if state not in (old_state, new_state):
            return self.p.finding(cls, n, "mixed", what, r,
                                  f"(folder holds {[f for f, _ in state or []]}, neither export)")
        if r.sig is None and leftovers(parent, {"m"}):
            return self.p.finding(cls, n, "mixed", what, r,
                                  f"(finished, left {leftovers(parent, {'m'})})")
        # The next export after a kill finds the folder, recovers and writes a whole export.
        r2 = run(self.cmd(old, out), self.p.a.timeout)
        if not self.p.judge(cls, n, what + ", then export " + old, r2, [out], allowed={0}):
            return
        if folder_state(out) != old_state:
            return self.p.finding(cls, n, "mixed", what + ", then export " + old, r2,
                                  "(the export after the kill is not whole)")
        if leftovers(parent, {"m"}):
            return self.p.finding(cls, n, "mixed", what + ", then export " + old, r2,
                                  f"(left {leftovers(parent, {'m'})})")

    def concurrent(self, n, rng):
        cls = "concurrent"
        k = rng.choice([2, 2, 3])
        schemes = [rng.choice(self.SCHEMES) for _ in range(k)]
        states = {s: self.reference(s)[0] for s in schemes}
        parent = os.path.join(self.work, f"conc-{n}")
        os.makedirs(parent)
        out = os.path.join(parent, "m")
        if rng.random() < 0.5:   # over an existing export, or into a new folder
            r0 = run(self.cmd(self.SCHEMES[0], out), self.p.a.timeout)
            if not self.p.judge(cls, n, "first export", r0, [out], allowed={0}):
                return
        delays = [rng.uniform(0, 0.6) for _ in schemes]
        what = f"{k} concurrent exports {schemes} started at {[round(x, 2) for x in delays]} s"
        with concurrent.futures.ThreadPoolExecutor(k) as ex:
            runs = list(ex.map(lambda sd: run(self.cmd(sd[0], out), self.p.a.timeout * k,
                                              start_delay=sd[1]), zip(schemes, delays)))
        for r in runs:
            if not self.p.judge(cls, n, what, r, [out], allowed={0}):
                return
        state = folder_state(out)
        if state not in states.values():
            return self.p.finding(cls, n, "mixed", what, runs[-1],
                                  f"(folder holds {[f for f, _ in state or []]}, no one export)")
        if leftovers(parent, {"m"}):
            return self.p.finding(cls, n, "mixed", what, runs[-1],
                                  f"(left {leftovers(parent, {'m'})})")


# ------------------------------------------------------------------------------------------
# Odd output paths
def kind_of(path):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    m = st.st_mode
    return (stat.S_IFMT(m), st.st_ino, os.readlink(path) if stat.S_ISLNK(m) else None)


def odd_paths(probe, cli, work, onnx_model, calib, hf, text, gguf_scheme):
    cls = "outputs"
    root = os.geteuid() == 0
    commands = {
        "quantize --report": lambda p: [cli, "quantize", onnx_model, "--scheme", "dynamic-int8",
                                        "--calib", calib, "--report", p],
        "export onnx": lambda p: [cli, "export", onnx_model, "--scheme", "dynamic-int8",
                                  "--format", "onnx", "--out", p, "--calib", calib],
        "export safetensors": lambda p: [cli, "export", hf, "--scheme", "w4-int4", "--format",
                                         "safetensors", "--out", p, "--calib", text,
                                         "--seq-len", "32", "--limit", "2"],
        "export gguf": lambda p: [cli, "export", hf, "--scheme", gguf_scheme, "--format", "gguf",
                                  "--out", p, "--calib", text, "--seq-len", "32", "--limit", "2"],
    }
    n = 0
    ext = {"quantize --report": ".json", "export onnx": ".onnx", "export safetensors":
           ".safetensors", "export gguf": ".gguf"}
    for cname, make in commands.items():
        n += 1
        d = os.path.join(work, f"out-{n}")
        os.makedirs(d)
        # (label, setup returning the path, allowed exits, expectation after)
        cases = []
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        cases.append(("fifo", fifo, {5}, "kept"))
        dev = os.path.join(d, "null")
        try:
            if not root:
                raise PermissionError
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            # Without CAP_MKNOD: a link to /dev/null, refused the same (and a process that may
            # not make device nodes may not replace /dev/null either).
            os.symlink("/dev/null", dev)
        cases.append(("device", dev, {5}, "kept"))
        sock = os.path.join(d, "sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(sock)
        cases.append(("socket", sock, {5}, "kept"))
        for label, target in (("link-to-fifo", fifo), ("link-to-device", dev),
                              ("dangling-link", os.path.join(d, "nothing")),
                              ("link-to-folder", d)):
            lp = os.path.join(d, label)
            os.symlink(target, lp)
            cases.append((label, lp, {5} if label != "link-to-folder" or "safetensors"
                          not in cname else {0, 3, 5}, "kept"))
        loop_a, loop_b = os.path.join(d, "loop-a"), os.path.join(d, "loop-b")
        os.symlink(loop_b, loop_a)
        os.symlink(loop_a, loop_b)
        cases.append(("link-loop", loop_a, {5}, "kept"))
        self_loop = os.path.join(d, "self")
        os.symlink(self_loop, self_loop)
        cases.append(("self-loop", self_loop, {5}, "kept"))
        folder = os.path.join(d, "folder")
        os.makedirs(folder)
        open(os.path.join(folder, "keep.txt"), "w").write("not ours")
        cases.append(("folder", folder, {3, 5}, "kept"))
        cases.append(("missing-folder", os.path.join(d, "no", "such", "file"), {3}, "absent"))
        afile = os.path.join(d, "afile")
        open(afile, "w").write("x")
        cases.append(("parent-is-file", os.path.join(afile, "out"), {3}, "absent"))
        cases.append(("empty", "", {3}, "none"))
        cases.append(("long-name", os.path.join(d, "x" * 300), {3, 5}, "absent"))
        cases.append(("newline", os.path.join(d, "new\nline" + ext[cname]), {0}, "written"))
        cases.append(("tab", os.path.join(d, "tab\t" + ext[cname]), {0}, "written"))
        real = os.path.join(d, "real" + ext[cname])
        open(real, "w").write("old")
        link = os.path.join(d, "link-to-file" + ext[cname])
        os.symlink(real, link)
        cases.append(("link-to-file", link, {0}, "through"))
        rel_dir = os.path.join(d, "rel")
        os.makedirs(rel_dir)
        for i, (label, path, allowed, after) in enumerate(cases):
            before = kind_of(path) if path else None
            r = run(make(path), probe.a.timeout)
            what = f"{cname} to {label} ({path!r})"
            # The target is checked whatever the exit: a refusal that still replaced it is two
            # findings.
            probe.judge(cls, f"{n}.{i}", what, r, [path or "''", "empty", "path"],
                        allowed=allowed)
            now = kind_of(path) if path else None
            if after == "kept" and now != before:
                probe.finding(cls, f"{n}.{i}", "replaced", what, r,
                              f"(was {before}, now {now})")
            elif after == "kept" and label == "folder" and \
                    sorted(os.listdir(folder)) != ["keep.txt"] and r.code != 0:
                probe.finding(cls, f"{n}.{i}", "replaced", what, r,
                              f"(folder now holds {os.listdir(folder)})")
            elif after == "absent" and os.path.lexists(path):
                probe.finding(cls, f"{n}.{i}", "replaced", what, r, "(a file appeared)")
            elif after == "written" and r.code == 0 and not (os.path.isfile(path) or
                                                             os.path.isdir(path)):
                probe.finding(cls, f"{n}.{i}", "exit", what, r, "(exit 0 but nothing written)")
            elif after == "through" and r.code == 0:
                if not os.path.islink(link) or os.readlink(link) != real:
                    probe.finding(cls, f"{n}.{i}", "replaced", what, r, "(the link was replaced)")
                elif os.path.isfile(real) and open(real, "rb").read() == b"old":
                    probe.finding(cls, f"{n}.{i}", "exit", what, r,
                                  "(exit 0 but the link's file was not written)")
        s.close()
        stray = [f for f in os.listdir(d) if "tmp" in f or "staging" in f or "lock" in f]
        if stray:
            probe.finding(cls, f"{n}", "mixed", f"{cname}: odd paths", None,
                          f"(left {stray} in {d})")


# ------------------------------------------------------------------------------------------
FAKE_CLI = """#!/bin/bash
# A careless CLI: exits 0 and replaces whatever --out or --report names.
prev=
for arg in "$@"; do
  if [ "$prev" = --out ] || [ "$prev" = --report ]; then
    rm -rf -- "$arg" 2> /dev/null
    echo x > "$arg" 2> /dev/null
  fi
  prev=$arg
done
exit 0
"""


def self_test(a, work):
    """The probe must be able to fail: synthetic runs of each kind are findings of that kind,
    their good neighbours are not, and a CLI that replaces every output (FAKE_CLI) is caught at
    every non-regular target. Returns the list of what went wrong."""
    wrong = []
    p = Probe(argparse.Namespace(**dict(vars(a), log=None)))
    p.quiet = True
    mk = lambda code=0, sig=None, to=False, mem=False, err="": Run(
        ["bitlens-cli", "info", "/m"], code, sig, to, mem, 0, 0.1, "", err)
    for kind, r in [("crash", mk(None, signal.SIGSEGV)), ("crash", mk(None, signal.SIGABRT)),
                    ("hang", mk(None, signal.SIGKILL, to=True)),
                    ("kill", mk(None, signal.SIGKILL, mem=True)),
                    ("exit", mk(1, err="error: /m: x")), ("exit", mk(2, err="error: /m: x")),
                    ("exit", mk(5, err="error: /m: node 'a' (Softmax): axis 9 is out of range")),
                    ("message", mk(3, err="error: config.json: key 'a'")),
                    ("message", mk(4, err="unsupported")),
                    ("message", mk(5, err="error: internal failure: /m: 12 GB")),
                    (None, mk(0)), (None, mk(3, err="error: /m: key 'a': expected a string")),
                    (None, mk(5, err="error: /m: needs ~12.0 GB, 1.0 GB available"))]:
        before = len(p.findings)
        p.judge("self-test", kind, "synthetic run", r, ["/m"], inputs_only=True)
        got = p.findings[-1]["kind"] if len(p.findings) > before else None
        if got != kind:
            wrong.append(f"a synthetic run that should give {kind} gave {got}: exit {r.code}, "
                         f"signal {r.sig}, {r.err!r}")
    fake = os.path.join(work, "fake-cli")
    open(fake, "w").write(FAKE_CLI)
    os.chmod(fake, 0o755)
    p = Probe(argparse.Namespace(**dict(vars(a), log=None)))
    p.quiet = True
    odd_paths(p, fake, os.path.join(work, "fake-outputs"), "m.onnx", "c.npy", "hf", "t.txt",
              "gguf-q8_0")
    replaced = {f["case"] for f in p.findings if f["kind"] == "replaced"}
    kept = 4 * 10   # per command: fifo, device, socket, 4 links, 2 loops, folder
    if len(replaced) < kept:
        wrong.append(f"a CLI that replaces its outputs was caught at {len(replaced)} targets "
                     f"of {kept}")
    return wrong


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cli")
    ap.add_argument("--seed", type=int, default=49)
    ap.add_argument("--count", type=int, default=int(os.environ.get("BITLENS_PROBE_COUNT", 24)))
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("BITLENS_PROBE_JOBS", 2)))
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per run (a hang)")
    ap.add_argument("--only", help="CLASS or CLASS:N, to rerun one case")
    ap.add_argument("--keep", help="work in this folder and keep it (else a temporary one)")
    ap.add_argument("--self-test", action="store_true",
                    help="check that the probe finds what it looks for (synthetic runs and a "
                    "CLI that replaces its outputs), then exit")
    ap.add_argument("--generate-only", action="store_true",
                    help="write the mutated inputs (with --keep) and run nothing")
    ap.add_argument("--log", help="write every run (class, case, mutation, exit, peak RSS, "
                    "the error line) to this JSON-lines file")
    a = ap.parse_args()
    cli = os.path.abspath(a.cli)
    probe = Probe(a)
    work = a.keep or tempfile.mkdtemp(prefix="bitlens-probe-")
    if a.keep:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
    if a.self_test:
        wrong = self_test(a, work)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        for w in wrong:
            print("FAIL self-test: " + w)
        print(f"self-test: {'failed' if wrong else 'the probe catches each kind of finding'}")
        return 1 if wrong else 0
    only_cls, only_n = (a.only.split(":", 1) + [None])[:2] if a.only else (None, None)
    start = time.monotonic()
    try:
        # Base inputs.
        base = make_llama(os.path.join(work, "base", "hf"))
        text = os.path.join(work, "base", "text.txt")
        open(text, "w").write(TEXT)
        onnx_models = onnx_bases(os.path.join(work, "base"))
        calib = os.path.join(work, "base", "calib.npy")
        np.save(calib, np.random.default_rng(2).standard_normal((4, 1, 16, 16)).astype(np.float32))
        gguf_scheme = "gguf-q8_0"
        gguf = os.path.join(work, "base", "model.gguf")
        for m in [base] + onnx_models:
            r = run([cli, "info", m], a.timeout)
            if r.code != 0:
                raise SystemExit(f"probe setup: base input {m} does not open: {r.err}")
        r = run([cli, "export", base, "--scheme", gguf_scheme, "--format", "gguf", "--out", gguf,
                 "--calib", text, "--seq-len", "32", "--limit", "2"], a.timeout)
        if r.code != 0 or run([cli, "info", gguf], a.timeout).code != 0:
            raise SystemExit(f"probe setup: the GGUF base failed: {r.err}")
        for cmd in ([cli, "eval", base, "--data", text, "--seq-len", "16", "--limit", "2"],
                    [cli, "eval", gguf, "--data", text, "--seq-len", "16", "--limit", "2"],
                    [cli, "tokenize", base, "--text", text]):
            r = run(cmd, a.timeout)
            if r.code != 0:
                raise SystemExit(f"probe setup: {' '.join(cmd)} failed: {r.err}")

        classes = {"config": lambda rng, d: mut_config(rng, base, d),
                   "tokenizer": lambda rng, d: mut_tokenizer(rng, base, d),
                   "safetensors": lambda rng, d: mut_safetensors(rng, base, d),
                   "gguf": lambda rng, d: mut_gguf(rng, gguf, d),
                   "onnx": lambda rng, d: mut_onnx(rng, onnx_models, d)}
        jobs = []
        for cls, make in classes.items():
            if only_cls and cls != only_cls:
                continue
            for n in range(a.count):
                if only_n is not None and str(n) != only_n:
                    continue
                rng = random.Random(f"{a.seed}:{cls}:{n}")
                d = os.path.join(work, cls, str(n))
                os.makedirs(os.path.dirname(d), exist_ok=True)
                what, path, names = make(rng, d)
                # Every other case runs the model (eval on the text; tokenize for the
                # tokenizer files), so values `info` only reads are used too.
                runs_model = n % 2 == 1 and cls != "onnx"
                if not runs_model:
                    cmd = [cli, "info", path]
                elif cls == "tokenizer" and n % 4 == 1:
                    cmd = [cli, "tokenize", path, "--text", text]
                else:
                    cmd = [cli, "eval", path, "--data", text, "--seq-len", "16", "--limit", "2"]
                jobs.append((cls, n, f"{cmd[1]}: {what}", cmd, names))

        if a.generate_only:
            print(f"generated {len(jobs)} cases in {work}")
            return 0

        def one(job):
            return job, run(job[3], a.timeout)

        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            for (cls, n, what, cmd, names), r in ex.map(one, jobs):
                probe.judge(cls, n, what, r, names, inputs_only=True)
        print(f"mutations: {len(jobs)} runs in {time.monotonic() - start:.0f} s", flush=True)

        ex_ = Exports(probe, cli, os.path.join(work, "exports"), base, text)
        os.makedirs(ex_.work)
        rounds = max(2, a.count // 6)
        for cls, fn in (("kill9", ex_.killed), ("concurrent", ex_.concurrent)):
            if only_cls and cls != only_cls:
                continue
            for n in range(rounds):
                if only_n is not None and str(n) != only_n:
                    continue
                fn(n, random.Random(f"{a.seed}:{cls}:{n}"))
        if not only_cls or only_cls == "outputs":
            odd_paths(probe, cli, os.path.join(work, "outputs"), onnx_models[0], calib, base,
                      text, gguf_scheme)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    total = sum(probe.counts.values())
    kinds = {}
    for f in probe.findings:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    print(f"runs per class: {json.dumps(probe.counts)}")
    print(f"exit codes per class: {json.dumps(probe.exits)}; largest peak RSS "
          f"{probe.peak / 2 ** 20:.0f} MB")
    walls = sorted(probe.walls)
    if walls:
        print(f"{total} runs in {time.monotonic() - start:.0f} s (seed {a.seed}, count {a.count}, "
              f"jobs {a.jobs}); run wall median {walls[len(walls) // 2]:.2f} s, max "
              f"{walls[-1]:.2f} s")
    print("findings: " + (json.dumps(kinds) if kinds else "none") +
          f" (crash, hang, kill, exit, message, mixed, replaced)")
    if total == 0:
        print("FAIL: no run was made")
        return 1
    print(f"{total - len(probe.findings)} passed, {len(probe.findings)} failed")
    return 1 if probe.findings else 0


if __name__ == "__main__":
    sys.exit(main())
