#!/usr/bin/env python3
"""Writes the golden files that tests/unit/test_safetensors.cpp reads, with the pip
`safetensors` package (0.8) as the reference writer.

    ~/.cache/bitlens/venv/bin/python tests/data/safetensors/make_golden.py

tests/data/safetensors/:
  all_dtypes.safetensors     one [2, 3] tensor per dtype (named after it, lower case) with the
                             values of value(dtype) below, an empty [0, 4] F32 tensor "empty",
                             a 0-d F32 "scalar" (= 2.5) and __metadata__ {"format": "pt",
                             "note": "golden"}
  sharded/model.safetensors.index.json + model-0000{1,2}-of-00002.safetensors:
                             "a.weight" [4, 4] and "a.bias" [4] in shard 1, "b.weight" [2, 4] in
                             shard 2, all F32 arange(n) * 0.25 - 1
The values are repeated in the C++ test; change both together.
"""
import json
import os

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
}


def value(dtype):
    """[2, 3]: arange(6) * 1.5 - 3 for float types, arange(6) * 7 - 20 for signed integers,
    arange(6) * 40 for U8, arange(6) % 2 == 0 for BOOL."""
    base = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    if dtype == torch.bool:
        return (torch.arange(6).reshape(2, 3) % 2) == 0
    if dtype == torch.uint8:
        return (base * 40).to(dtype)
    if dtype.is_floating_point:
        return (base * 1.5 - 3).to(dtype)
    return (base * 7 - 20).to(dtype)


def main():
    tensors = {name.lower(): value(dt) for name, dt in DTYPES.items()}
    tensors["empty"] = torch.zeros((0, 4), dtype=torch.float32)
    tensors["scalar"] = torch.tensor(2.5, dtype=torch.float32)
    save_file(tensors, os.path.join(HERE, "all_dtypes.safetensors"),
              metadata={"format": "pt", "note": "golden"})

    shard_dir = os.path.join(HERE, "sharded")
    os.makedirs(shard_dir, exist_ok=True)
    def ar(*shape):
        n = 1
        for s in shape:
            n *= s
        return (torch.arange(n, dtype=torch.float32) * 0.25 - 1).reshape(shape)
    shards = {
        "model-00001-of-00002.safetensors": {"a.weight": ar(4, 4), "a.bias": ar(4)},
        "model-00002-of-00002.safetensors": {"b.weight": ar(2, 4)},
    }
    weight_map = {}
    total = 0
    for fname, ts in shards.items():
        save_file(ts, os.path.join(shard_dir, fname), metadata={"format": "pt"})
        for k, t in ts.items():
            weight_map[k] = fname
            total += t.numel() * t.element_size()
    with open(os.path.join(shard_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


if __name__ == "__main__":
    main()
