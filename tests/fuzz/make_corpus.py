#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets (tests/fuzz/corpus/<format>/) from the small
files under tests/data and a few generated ones. Standard library only; run from anywhere:
    python3 tests/fuzz/make_corpus.py
The TorchScript / torch.save seeds are made by torch itself: with the venv's python
(~/.cache/bitlens/venv/bin/python) they are rebuilt, with a python without torch the committed
ones are kept. The pickle seeds are the data.pkl / constants.pkl members of those archives.
The outputs are committed (they total well under 1 MB); rerun after adding test data.
Files named regress_* are inputs that once crashed a reader (kept as seeds so the fix stays)."""

import gzip
import io
import shutil
import struct
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
OUT = HERE / "corpus"
MAX_SEED = 64 * 1024  # bytes; larger files slow every fuzz iteration down

COPIES = {
    "onnx": ["onnx/small_cnn.onnx", "hf/lstm_onnx.onnx", "qdq/*.onnx"],
    "safetensors": ["safetensors/all_dtypes.safetensors", "safetensors/sharded/*.safetensors"],
    "gguf": ["ggml/golden.gguf"],
    "npy": ["npy/*.npy", "onnx/small_cnn_input.npy"],
    "zip": ["npy/*.npz", "text/pkg_ok.whl", "text/pkg_evil.whl", "text/pkg_ok.tar.gz"],
    "image": ["images/*/*.png", "images/*/*.jpg"],
    "tokenizer": ["text/wp_vocab.txt", "text/wp_cased.json", "text/bpe_*.json"],
    "torchscript": ["torchscript/gru_trace.pt", "torchscript/mlp_trace.pt",
                    "torchscript/lstm_state_dict.pt"],
}
TORCH_SEEDS = ("torchscript", "pickle")  # kept when torch is not importable


def torch_archives():
    """Small archives written by torch: a scripted LSTM, state dicts (float, half, nested
    dict, tied weights), a bare tensor. None when torch is not importable."""
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(8)
    out = {}

    def save(name, obj, script=False):
        buf = io.BytesIO()
        if script:
            torch.jit.save(obj, buf)
        else:
            torch.save(obj, buf)
        out[name] = buf.getvalue()

    save("lstm4x8_script.pt", torch.jit.script(torch.nn.LSTM(4, 8)), script=True)
    save("lstm_state.pt", torch.nn.LSTM(3, 2, num_layers=2).state_dict())
    save("gru_bi_half_state.pt", torch.nn.GRU(2, 2, bidirectional=True).half().state_dict())
    lin = torch.nn.Linear(3, 2)
    save("nested_state.pt", {"model": lin.state_dict(), "step": 7,
                             "tied": {"a": lin.weight.data, "b": lin.weight.data[1:]},
                             "ints": torch.arange(5, dtype=torch.int64)})
    save("strided_tensor.pt", torch.arange(24, dtype=torch.float32).reshape(4, 6)[1:, ::2])
    save("empty_and_bool.pt", {"e": torch.zeros(0, 3), "b": torch.tensor([True, False])})
    return out


def pickles_of(archives):
    """The pickle members of each archive, raw (the unpickler's own seeds)."""
    out = {}
    for name, data in archives.items():
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for member in z.namelist():
                if member.endswith(".pkl"):
                    stem = name.rsplit(".", 1)[0]
                    out[stem + "_" + member.rsplit("/", 1)[-1]] = z.read(member)
    return out


def idx(type_code: int, dims, payload: bytes) -> bytes:
    head = bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    return head + payload


def generated():
    seeds = {}
    images = bytes((i * 37) % 256 for i in range(2 * 4 * 4))
    seeds["idx"] = {
        "images_u8.idx": idx(0x08, [2, 4, 4], images),
        "labels_u8.idx": idx(0x08, [5], bytes([0, 1, 2, 3, 9])),
        "matrix_f32.idx": idx(0x0D, [2, 3], b"".join(struct.pack(">f", v / 4) for v in range(6))),
        "vector_i16.idx": idx(0x0B, [3], struct.pack(">hhh", -1, 0, 300)),
        "images_u8.idx.gz": gzip.compress(idx(0x08, [2, 4, 4], images), mtime=0),
        "labels_i32.idx.gz": gzip.compress(idx(0x0C, [3], struct.pack(">iii", 1, -2, 3)), mtime=0),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        # Fixed timestamps: a rerun gives the same bytes.
        stamp = (2026, 1, 1, 0, 0, 0)
        z.writestr(zipfile.ZipInfo("notes.txt", stamp), "not an array\n" * 4,
                   zipfile.ZIP_DEFLATED)
        z.writestr(zipfile.ZipInfo("x.npy", stamp), (DATA / "npy" / "f4_le_c.npy").read_bytes(),
                   zipfile.ZIP_DEFLATED)
    seeds.setdefault("zip", {})["mixed.npz"] = buf.getvalue()
    seeds["zip"]["text.gz"] = gzip.compress(b"hello gzip\n" * 20, mtime=0)
    seeds["text"] = {
        "ascii.txt": b"In the beginning was the word.\nAnd the word was tokenized.\n",
        "unicode.txt": "Grüße aus Köln – ½ € 東京 😀\n\nzweite Zeile\r\n".encode(),
        "invalid_utf8.txt": b"valid \xc3\xa9 then bad \xff\xfe and \xe2\x82 cut",
        "empty_lines.txt": b"\n\n \n\t\n",
    }
    return seeds


def main():
    archives = torch_archives()
    # Reproducers of fixed findings (regress_*) stay; everything else is rebuilt (the torch
    # made seeds only when torch is here to rebuild them).
    for old in OUT.glob("*/*"):
        if old.name.startswith("regress_"):
            continue
        if archives is None and old.parent.name in TORCH_SEEDS:
            continue
        old.unlink()
    total = 0
    for fmt, patterns in COPIES.items():
        dst = OUT / fmt
        dst.mkdir(parents=True, exist_ok=True)
        for pattern in patterns:
            for src in sorted(DATA.glob(pattern)):
                if src.stat().st_size <= MAX_SEED:
                    name = src.relative_to(DATA).as_posix().replace("/", "_")
                    shutil.copyfile(src, dst / name)
                    total += src.stat().st_size
    seeds = generated()
    if archives is not None:
        seeds.setdefault("torchscript", {}).update(archives)
        extra = {"mlp_trace.pt": (DATA / "torchscript" / "mlp_trace.pt").read_bytes()}
        seeds["pickle"] = pickles_of({**archives, **extra})
    for fmt, files in seeds.items():
        dst = OUT / fmt
        dst.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (dst / name).write_bytes(data)
            total += len(data)
    print(f"seed corpora in {OUT}: {total} bytes")


if __name__ == "__main__":
    main()
