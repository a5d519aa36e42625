#!/usr/bin/env python3
"""Writes the golden files that tests/unit/test_ggml_quants.cpp and test_gguf.cpp read.

    pip install --target /tmp/libggml libggml-python==0.20.2.post1   # ggml itself, as an oracle
    PYTHONPATH=/tmp/libggml ~/.cache/bitlens/venv/bin/python tests/data/ggml/make_golden.py

The oracle is ggml's own C library (libggml-base.so from the libggml-python wheel), called with
ctypes: quantize_row_<type>_ref gives the reference bytes, dequantize_row_<type> the floats.
Where gguf-py 0.19 (the venv's `gguf`) also implements a type, the script checks that its
numpy port gives the same bytes and floats, so two independent references agree.

tests/data/ggml/:
  inputs.npy          float32 [6, 512]: the rows every type is quantized from (see ROWS)
  <TYPE>.bin          the ggml reference quantization of all rows, blocks back to back
  <TYPE>_deq.npy      float32 [6, 512]: ggml's dequantization of <TYPE>.bin
  golden.gguf         a GGUF v3 file written by gguf.GGUFWriter: every metadata value type,
                      nested arrays, general.alignment = 64, and tensors of F32, F16, BF16, Q8_0,
                      Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, Q2_K, Q3_K, Q5_K and I32
  golden_tensors.npz  the float32 values a reader must get from each tensor of golden.gguf
"""
import ctypes
import glob
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# name, ggml function suffix, values per block, bytes per block
TYPES = [
    ("Q4_0", "q4_0", 32, 18),
    ("Q4_1", "q4_1", 32, 20),
    ("Q5_0", "q5_0", 32, 22),
    ("Q5_1", "q5_1", 32, 24),
    ("Q8_0", "q8_0", 32, 34),
    ("Q2_K", "q2_K", 256, 84),
    ("Q3_K", "q3_K", 256, 110),
    ("Q4_K", "q4_K", 256, 144),
    ("Q5_K", "q5_K", 256, 176),
    ("Q6_K", "q6_K", 256, 210),
    ("Q8_K", "q8_K", 256, 292),
]
# ggml exports no dequantize_row for Q8_1; it is checked against the C++ dequantizer's
# definition (d * q) in the unit test instead.
QUANTIZE_ONLY = [("Q8_1", "q8_1", 32, 36)]


def make_rows():
    """Six rows of 512 values that reach the corners of every quantizer."""
    rng = np.random.default_rng(20240917)
    rows = np.zeros((6, 512), dtype=np.float32)
    rows[0] = rng.standard_normal(512)                          # plain weights
    rows[1] = rng.uniform(-3.0, 5.0, 512)                       # lopsided range
    rows[2] = rng.standard_normal(512) * 0.02                   # small weights ...
    rows[2, ::37] *= 40.0                                       # ... with outliers
    rows[3, 256:] = np.linspace(-1.0, 1.0, 256)                 # an all-zero super-block
    rows[4, :32] = 0.7                                          # a constant block
    rows[4, 32:64] = rng.uniform(0.5, 1.5, 32)                  # all positive
    rows[4, 64:96] = -rng.uniform(0.5, 1.5, 32)                 # all negative
    rows[4, 96:128] = 0.0
    rows[4, 100] = -2.0                                         # one value in a zero block
    rows[4, 128:256] = rng.standard_normal(128) * 1e-3
    rows[4, 256:] = rng.standard_normal(256) * 1e3
    rows[5] = (rng.integers(-8, 8, 512) * 0.25)                 # exact ties for many scales
    rows[5, 480:] = rng.standard_normal(32) * 1e-20             # below ggml's group epsilon
    return rows


def load_ggml():
    try:
        import libggml
    except ImportError:
        sys.exit("libggml-python is needed: see the docstring")
    libdir = os.path.join(os.path.dirname(libggml.__file__), "lib64")
    path = sorted(glob.glob(os.path.join(libdir, "libggml-base.so*")))[0]
    return ctypes.CDLL(path)


def ggml_quantize(lib, fn, x, block, size):
    n = x.size
    out = (ctypes.c_uint8 * (n // block * size))()
    f = getattr(lib, "quantize_row_%s_ref" % fn)
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    f(np.ascontiguousarray(x, dtype=np.float32).ctypes.data, out, n)
    return np.frombuffer(bytes(out), dtype=np.uint8)


def ggml_dequantize(lib, fn, data, n):
    out = np.zeros(n, dtype=np.float32)
    f = getattr(lib, "dequantize_row_%s" % fn)
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    buf = np.ascontiguousarray(data)
    f(buf.ctypes.data, out.ctypes.data, n)
    return out


def main():
    import gguf
    from gguf import GGMLQuantizationType as Q

    lib = load_ggml()
    rows = make_rows()
    np.save(os.path.join(HERE, "inputs.npy"), rows)
    flat = rows.reshape(-1)

    quantized = {}
    for name, fn, block, size in TYPES + QUANTIZE_ONLY:
        data = ggml_quantize(lib, fn, flat, block, size)
        if name == "Q8_K":
            # ggml leaves bsums unset in an all-zero block; our quantizer writes zeros there.
            blocks = data.reshape(-1, size).copy()
            zero = blocks[:, :4].view(np.float32)[:, 0] == 0
            blocks[zero, 4 + 256:] = 0
            data = blocks.reshape(-1)
        quantized[name] = data
        data.tofile(os.path.join(HERE, name + ".bin"))
        qtype = Q[name]
        try:
            ours = gguf.quants.quantize(rows, qtype).reshape(-1)
        except NotImplementedError:
            ours = None
        if ours is not None:
            assert np.array_equal(ours, data), "gguf-py and ggml disagree on " + name
            print(name, "quantize: ggml == gguf-py")
        if (name, fn, block, size) in QUANTIZE_ONLY:
            continue
        deq = ggml_dequantize(lib, fn, data, flat.size).reshape(rows.shape)
        np.save(os.path.join(HERE, name + "_deq.npy"), deq)
        try:
            ref = gguf.quants.dequantize(data.reshape(rows.shape[0], -1), qtype)
            assert np.array_equal(ref.view(np.uint32), deq.view(np.uint32)), name
            print(name, "dequantize: ggml == gguf-py")
        except NotImplementedError:
            pass

    # A GGUF file with every value type and a tensor of each readable type.
    path = os.path.join(HERE, "golden.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "grüße, ggml")
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", -2.5e300)
    w.add_array("test.strings", ["a", "", "tokens ▁x"])
    w.add_array("test.ints", [1, -2, 3])
    w.add_array("test.floats", [0.5, -1.25])
    w.add_array("test.nested", [[1, 2], [3]])
    w.add_custom_alignment(64)
    w.add_token_list(["<s>", "</s>", "hello"])

    tensors = {}
    rng = np.random.default_rng(7)
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    w.add_tensor("f32", f32)
    tensors["f32"] = f32
    f16 = rng.standard_normal((4, 32)).astype(np.float16)
    w.add_tensor("f16", f16)
    tensors["f16"] = f16.astype(np.float32)
    bf16_src = rng.standard_normal((2, 16)).astype(np.float32)
    bf16 = gguf.quants.quantize(bf16_src, Q.BF16)
    w.add_tensor("bf16", bf16, raw_dtype=Q.BF16)  # uint8 bytes: the shape is in bytes
    tensors["bf16"] = gguf.quants.dequantize(bf16, Q.BF16)
    i32 = np.arange(-3, 3, dtype=np.int32).reshape(2, 3)
    w.add_tensor("i32", i32)
    tensors["i32"] = i32.astype(np.float32)
    # Quantized tensors: 2 rows of one super-block (ne = [256, 2]), bytes from ggml.
    for name, fn, block, size in TYPES:
        if name == "Q8_K":
            continue
        cols = 256 if block == 256 else 64
        src = rows[:2, :cols].reshape(-1)
        data = ggml_quantize(lib, fn, src, block, size)
        w.add_tensor(name.lower(), data.reshape(2, -1), raw_dtype=Q[name])
        tensors[name.lower()] = ggml_dequantize(lib, fn, data, src.size).reshape(2, cols)
    # A 3-d tensor: ne = [32, 3, 2].
    cube = rng.standard_normal((2, 3, 32)).astype(np.float32)
    w.add_tensor("cube_q8_0", gguf.quants.quantize(cube, Q.Q8_0), raw_dtype=Q.Q8_0)
    tensors["cube_q8_0"] = gguf.quants.dequantize(gguf.quants.quantize(cube, Q.Q8_0), Q.Q8_0)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    np.savez(os.path.join(HERE, "golden_tensors.npz"), **tensors)
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(HERE, "*")))
    print("wrote tests/data/ggml (%d bytes)" % total)


if __name__ == "__main__":
    main()
