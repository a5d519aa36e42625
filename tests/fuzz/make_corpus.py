#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets (tests/fuzz/corpus/<format>/) from the small
files under tests/data and a few generated ones. Standard library only; run from anywhere:
    python3 tests/fuzz/make_corpus.py
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
}


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
        z.writestr("notes.txt", "not an array\n" * 4)
        z.writestr("x.npy", (DATA / "npy" / "f4_le_c.npy").read_bytes())
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
    # Reproducers of fixed findings (regress_*) stay; everything else is rebuilt.
    for old in OUT.glob("*/*"):
        if not old.name.startswith("regress_"):
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
    for fmt, files in generated().items():
        dst = OUT / fmt
        dst.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (dst / name).write_bytes(data)
            total += len(data)
    print(f"seed corpora in {OUT}: {total} bytes")


if __name__ == "__main__":
    main()
