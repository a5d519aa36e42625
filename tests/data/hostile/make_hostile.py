#!/usr/bin/env python3
"""Writes the hostile-input corpus of issue #49 (items 2, 6 and 7) into OUT: Hugging Face folders
whose config.json or tokenizer.json holds a value of the wrong type or an unsupported
rope_scaling form, and small ONNX files with malformed attributes, an opset newer than BitLens
knows or a graph input without an element type. Each case is one line of OUT/cases.tsv:

  name <TAB> expected exit code <TAB> path to open <TAB> words the message must hold (|-separated)

tests/e2e/test_hostile_inputs.sh runs `bitlens-cli info` on each. The folders are the tiny
llama of tests/data/hf (llama.json + llama.npz) with the BPE and WordPiece tokenizers of
tests/data/text. Usage: make_hostile.py OUT"""
import copy
import json
import os
import shutil
import struct
import sys

import numpy as np
from onnx import TensorProto, helper

OUT = sys.argv[1]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CASES = []


def case(name, code, path, *words):
    CASES.append("\t".join([name, str(code), path, "|".join(words)]))


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


CONFIG = json.load(open(os.path.join(DATA, "hf", "llama.json")))
NPZ = np.load(os.path.join(DATA, "hf", "llama.npz"))
WEIGHTS = {k: NPZ[k] for k in NPZ.files if not k.startswith("__")}
BPE = json.load(open(os.path.join(DATA, "text", "bpe_llama3.json")))
WORDPIECE = json.load(open(os.path.join(DATA, "text", "wp_cased.json")))
os.makedirs(OUT, exist_ok=True)
BASE = os.path.join(OUT, "base")
os.makedirs(BASE, exist_ok=True)
write_safetensors(os.path.join(BASE, "model.safetensors"), WEIGHTS)


def folder(name, config=CONFIG, tokenizer=BPE):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(BASE, "model.safetensors"), d)
    json.dump(config, open(os.path.join(d, "config.json"), "w"), indent=1)
    json.dump(tokenizer, open(os.path.join(d, "tokenizer.json"), "w"))
    return d


def config_with(**changes):
    c = copy.deepcopy(CONFIG)
    for key, value in changes.items():
        c[key] = value
    return c


# ---- config.json: values of the wrong type, rope_scaling forms ---------------------------
case("cfg-ok", 0, folder("cfg-ok"))
case("wp-ok", 0, folder("wp-ok", tokenizer=WORDPIECE))
for name, key, value in [("model-type-number", "model_type", 5),
                         ("model-type-list", "model_type", ["llama"]),
                         ("hidden-size-string", "hidden_size", "32"),
                         ("layers-float", "num_hidden_layers", 2.5),
                         ("rope-theta-string", "rope_theta", "10000"),
                         ("tie-string", "tie_word_embeddings", "yes"),
                         ("hidden-act-number", "hidden_act", 3)]:
    case("cfg-" + name, 3, folder("cfg-" + name, config_with(**{key: value})), "config.json",
         key)
no_params = copy.deepcopy(CONFIG)
no_params.pop("rope_parameters")
for name, value, code, words in [
        ("string", "garbage", 3, ["expected an object, got string"]),
        ("list", [1, 2], 3, ["expected an object, got array"]),
        ("number", 4, 3, ["expected an object, got number"]),
        ("no-type", {"factor": 4.0}, 3, ["\"factor\"", "rope_type"]),
        ("llama3-no-factor", {"rope_type": "llama3", "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 32}, 3, ["llama3", "factor"]),
        ("llama3-no-low", {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 32}, 3, ["low_freq_factor"]),
        ("linear-no-factor", {"type": "linear"}, 3, ["linear", "factor"]),
        ("factor-string", {"rope_type": "linear", "factor": "4"}, 3, ["factor"]),
        ("yarn", {"rope_type": "yarn", "factor": 4.0}, 4, ["yarn"])]:
    c = copy.deepcopy(no_params)
    c["rope_scaling"] = value
    case("rope-" + name, code, folder("rope-" + name, c), "config.json", "rope_scaling", *words)
c = copy.deepcopy(CONFIG)
c["rope_parameters"] = "default"
case("rope-parameters-string", 3, folder("rope-parameters-string", c), "config.json",
     "rope_parameters")
# The forms that stay accepted: linear with a factor, llama3 with its four keys, rope_theta only.
for name, value in [("linear", {"rope_type": "linear", "factor": 2.0}),
                    ("llama3", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 32}),
                    ("theta-only", {"rope_theta": 10000.0}),
                    ("null", None)]:
    c = copy.deepcopy(no_params)
    c["rope_scaling"] = value
    case("rope-ok-" + name, 0, folder("rope-ok-" + name, c))


# ---- tokenizer.json: values of the wrong type ----------------------------------------------
def tokenizer_with(base, path, value):
    t = copy.deepcopy(base)
    node = t
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return t


for name, base, path, value, key in [
        ("bpe-byte-fallback", BPE, ["model", "byte_fallback"], "no", "model.byte_fallback"),
        ("bpe-unk-number", BPE, ["model", "unk_token"], 5, "model.unk_token"),
        ("bpe-ignore-merges", BPE, ["model", "ignore_merges"], 1, "model.ignore_merges"),
        ("bpe-type-number", BPE, ["model", "type"], 7, "model.type"),
        ("bpe-suffix-list", BPE, ["model", "end_of_word_suffix"], ["x"],
         "model.end_of_word_suffix"),
        ("bpe-prefix-space", BPE, ["pre_tokenizer", "pretokenizers", 1, "add_prefix_space"],
         "x", "pre_tokenizer.add_prefix_space"),
        ("bpe-added-special", BPE, ["added_tokens", 0, "special"], "true",
         "added_tokens.special"),
        ("bpe-pad-id", BPE, ["padding"], {"pad_id": "0"}, "padding.pad_id"),
        ("bpe-post-type", BPE, ["post_processor"], {"type": 3}, "post_processor.type"),
        ("wp-unk-number", WORDPIECE, ["model", "unk_token"], 100, "model.unk_token"),
        ("wp-max-chars", WORDPIECE, ["model", "max_input_chars_per_word"], "100",
         "model.max_input_chars_per_word"),
        ("wp-lowercase", WORDPIECE, ["normalizer", "lowercase"], "false",
         "normalizer.lowercase"),
        ("wp-normalizer-type", WORDPIECE, ["normalizer", "type"], 1, "normalizer.type")]:
    d = folder("tok-" + name, tokenizer=tokenizer_with(base, path, value))
    case("tok-" + name, 3, d, "tokenizer.json", "key '" + key + "'")


# ---- ONNX: malformed attributes, opsets, element types --------------------------------------
def onnx_file(name, nodes, opset=13, inits=(), x_type=TensorProto.FLOAT, x_shape=(1, 3, 8, 8),
              y_shape=None):
    x = helper.make_tensor_value_info("x", x_type, list(x_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)
    g = helper.make_graph(nodes, name, [x], [y], initializer=list(inits))
    ir = 7 if opset <= 13 else 8 if opset <= 17 else 9 if opset <= 20 else 10
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)
    path = os.path.join(OUT, name + ".onnx")
    open(path, "wb").write(m.SerializeToString())
    return path


W = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3],
                       np.random.default_rng(49).standard_normal(108).astype(np.float32))
W_GROUPED = helper.make_tensor("w", TensorProto.FLOAT, [4, 1, 3, 3],
                               np.ones(36, dtype=np.float32))


def conv(**attrs):
    return [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)]


case("onnx-ok", 0, onnx_file("onnx-ok", conv(pads=[1, 1, 1, 1]), inits=[W]))
for name, attrs, key in [("stride0", dict(strides=[0, 1]), "strides"),
                         ("dilation0", dict(dilations=[1, 0]), "dilations"),
                         ("kernel0", dict(kernel_shape=[0, 3]), "kernel_shape"),
                         ("group0", dict(group=0), "group"),
                         ("group-negative", dict(group=-3), "group"),
                         ("pads-negative", dict(pads=[-1, 0, 0, 0]), "pads"),
                         ("pads-2p40", dict(pads=[2 ** 40] * 4), "pads"),
                         ("pads-count", dict(pads=[1, 1]), "pads")]:
    case("onnx-conv-" + name, 3, onnx_file("conv-" + name, conv(**attrs), inits=[W]), "conv",
         key)
case("onnx-pool-stride0", 3,
     onnx_file("pool-stride0", [helper.make_node("MaxPool", ["x"], ["y"], name="pool",
                                                 kernel_shape=[2, 2], strides=[0, 2])]),
     "pool", "strides")
case("onnx-pool-pads", 3,
     onnx_file("pool-pads", [helper.make_node("AveragePool", ["x"], ["y"], name="pool",
                                              kernel_shape=[2, 2], pads=[2, 2, 2, 2])]),
     "pool", "pads")
case("onnx-flatten-axis9", 3,
     onnx_file("flatten-axis9", [helper.make_node("Flatten", ["x"], ["y"], name="flat",
                                                  axis=9)]), "flat", "axis")
case("onnx-resize-huge", 3,
     onnx_file("resize-huge", [helper.make_node("Resize", ["x", "", "s"], ["y"], name="up")],
               inits=[helper.make_tensor("s", TensorProto.FLOAT, [4], [1, 1, 1e12, 1e12])]),
     "up", "scales")
# Item 2: tiny models whose valid attributes imply activations no sample of memory holds are
# refused before the shape trace allocates them (exit 5, the value and its size named): Conv
# then Upsample x400 at opset 9 (the trace once passed 3 GB and grew), Conv with pads 3000 on
# 32 channels (peaked at 4.1 GB).
W32 = helper.make_tensor("w", TensorProto.FLOAT, [32, 3, 3, 3],
                         np.random.default_rng(2).standard_normal(864).astype(np.float32))
case("onnx-upsample-x400", 5,
     onnx_file("upsample-x400",
               [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                helper.make_node("Upsample", ["c"], ["u"], name="up", mode="nearest",
                                 scales=[1.0, 1.0, 400.0, 400.0]),
                helper.make_node("GlobalAveragePool", ["u"], ["y"], name="gap")],
               opset=9, inits=[W32], x_shape=(1, 3, 32, 32)),
     "value 'u'", "GB", "refused before allocating")
case("onnx-conv-pads3000", 5, onnx_file("conv-pads3000", conv(pads=[3000] * 4), inits=[W32]),
     "node 'conv'", "GB", "refused before allocating")
# A node that fails on the zero sample opening runs fails for what the file says: bad input
# naming the node, or unsupported where the op says so (was exit 5, "runtime failure"), found
# by tests/e2e/probe_hostile.py.
case("onnx-softmax-axis", 3,
     onnx_file("softmax-axis", [helper.make_node("Softmax", ["x"], ["y"], name="soft",
                                                 axis=2 ** 31 - 1)]),
     "does not run on a zero input", "node 'soft'", "axis")
case("onnx-split-parts", 3,
     onnx_file("split-parts", [helper.make_node("Split", ["x"], ["y", "z"], name="split",
                                                axis=0)]),
     "does not run on a zero input", "node 'split'", "parts")
case("onnx-resize-mode", 4,
     onnx_file("resize-mode", [helper.make_node("Resize", ["x", "", "s"], ["y"], name="up",
                                                mode="")],
               inits=[helper.make_tensor("s", TensorProto.FLOAT, [4], [1, 1, 2, 2])]),
     "does not run on a zero input", "node 'up'", "mode")
RELU = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
case("onnx-opset-28", 0, onnx_file("opset-28", RELU, opset=28))
case("onnx-opset-29", 4, onnx_file("opset-29", RELU, opset=29), "opset 29")
case("onnx-opset-999", 4, onnx_file("opset-999", RELU, opset=999), "opset 999")
case("onnx-elem-type-0", 3, onnx_file("elem-type-0", RELU, x_type=TensorProto.UNDEFINED),
     "graph input 'x'", "elem_type")

with open(os.path.join(OUT, "cases.tsv"), "w") as f:
    f.write("\n".join(CASES) + "\n")
print(len(CASES), "cases")
