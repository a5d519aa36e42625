#!/usr/bin/env python3
"""Writes the golden files that tests/unit/test_npy.cpp and test_dataset.cpp read.

    ~/.cache/bitlens/venv/bin/python tests/data/npy/make_npy_golden.py

tests/data/npy/:    one (2, 3) array per dtype, byte order and memory order, named
                    <dtype>_<le|be>_<c|f>.npy (single-byte dtypes: <dtype>_<c|f>.npy), with the
                    values of VALUES below; plus a 0-d, an empty, a 1-d and a 3-d Fortran array,
                    format versions 2.0 and 3.0, and .npz archives (stored and deflated).
tests/data/images/: an image folder (two classes, 8x8 pixels): PNGs written here by hand with
                    zlib (RGB, grey, RGBA) and a hand-made baseline JPEG whose single 8x8 block
                    has only a DC coefficient, so that every decoder yields exactly grey 144.

The values are repeated in the C++ tests; change both together.
"""
import os
import struct
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES = os.path.join(os.path.dirname(HERE), "images")

# Chosen so that a wrong byte order, sign or width gives a different value.
VALUES = {
    "f2": [[-1.5, 0.0, 0.25], [2.0, 65504.0, -0.125]],
    "f4": [[-1.5, 0.0, 3.25], [16777216.0, -0.0078125, 7.0]],
    "f8": [[-1.5, 0.0, 0.1], [1e300, -2.5, 7.0]],
    "i1": [[-128, -1, 0], [1, 2, 127]],
    "u1": [[0, 1, 2], [128, 254, 255]],
    "i2": [[-32768, -1, 0], [1, 258, 32767]],
    "i4": [[-2147483648, -1, 0], [1, 66051, 2147483647]],
    "i8": [[-9223372036854775808, -1, 0], [1, 72623859790382856, 9223372036854775807]],
    "u2": [[0, 1, 258], [32768, 65534, 65535]],
    "u4": [[0, 1, 66051], [2147483648, 4294967294, 4294967295]],
    "b1": [[True, False, True], [False, False, True]],
}


def write_npy_files():
    for old in os.listdir(HERE):
        if old.endswith(".npy") or old.endswith(".npz"):
            os.remove(os.path.join(HERE, old))
    for code, values in VALUES.items():
        dtype = np.dtype("?" if code == "b1" else code)
        orders = ["<", ">"] if dtype.itemsize > 1 else [""]
        for order in orders:
            a = np.array(values, dtype=dtype.newbyteorder(order) if order else dtype)
            suffix = {"<": "_le", ">": "_be", "": ""}[order]
            np.save(os.path.join(HERE, f"{code}{suffix}_c.npy"), np.ascontiguousarray(a))
            f = np.asfortranarray(a)
            assert f.flags.f_contiguous and not f.flags.c_contiguous
            np.save(os.path.join(HERE, f"{code}{suffix}_f.npy"), f)

    np.save(os.path.join(HERE, "scalar_f8.npy"), np.array(3.5, dtype="<f8"))
    np.save(os.path.join(HERE, "empty_f4.npy"), np.zeros((0, 3), dtype="<f4"))
    np.save(os.path.join(HERE, "vector_i8.npy"), np.array([5, -6, 7, -8, 9], dtype="<i8"))
    cube = np.asfortranarray(np.arange(24, dtype=">f4").reshape(2, 3, 4))
    np.save(os.path.join(HERE, "cube_be_f.npy"), cube)
    for major in (2, 3):
        with open(os.path.join(HERE, f"version{major}_f4.npy"), "wb") as out:
            np.lib.format.write_array(out, np.array(VALUES["f4"], dtype="<f4"),
                                      version=(major, 0))

    x = (np.arange(16, dtype="<f4") / 8).reshape(4, 1, 2, 2)
    y = np.array([0, 1, 2, 1], dtype="<i8")
    np.savez(os.path.join(HERE, "stored.npz"), x=x, y=y)
    np.savez_compressed(os.path.join(HERE, "deflated.npz"), x=x, y=y)
    np.savez(os.path.join(HERE, "single.npz"), np.array([[1, 2], [3, 4]], dtype="<i4"))
    np.savez(os.path.join(HERE, "inputs_labels.npz"), inputs=x[:3], labels=y[:3])


def png(path, width, height, color_type, channels, pixel):
    """A PNG with filter 0 on every row; pixel(x, y) gives a tuple of `channels` bytes."""
    rows = b"".join(
        b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
            chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))
    assert channels == {0: 1, 2: 3, 6: 4}[color_type]
    with open(path, "wb") as out:
        out.write(data)


def grey_jpeg(path, value):
    """An 8x8 baseline greyscale JPEG of one flat block: quantisation 1, DC = 8 * (value - 128).

    Worked example for value 144: DC = 8 * 16 = 128, Huffman category 8, so the scan is the DC
    code '0', the 8 bits 10000000, the AC end-of-block code '0', then 1-padding: 0x40 0x3F.
    """
    dc = 8 * (value - 128)
    assert 128 <= dc <= 255, "this writer only encodes category-8 positive DC values"
    bits = "0" + format(dc, "08b") + "0"
    bits += "1" * (-len(bits) % 8)
    scan = bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))
    assert b"\xff" not in scan

    def segment(marker, payload):
        return b"\xff" + bytes([marker]) + struct.pack(">H", len(payload) + 2) + payload

    counts_one_code = bytes([1] + [0] * 15)
    data = (b"\xff\xd8" +
            segment(0xDB, b"\x00" + bytes([1] * 64)) +
            segment(0xC0, struct.pack(">BHHB", 8, 8, 8, 1) + b"\x01\x11\x00") +
            segment(0xC4, b"\x00" + counts_one_code + b"\x08") +
            segment(0xC4, b"\x10" + counts_one_code + b"\x00") +
            segment(0xDA, b"\x01\x01\x00\x00\x3f\x00") +
            scan + b"\xff\xd9")
    with open(path, "wb") as out:
        out.write(data)


def write_images():
    for cls in ("circle", "square"):
        os.makedirs(os.path.join(IMAGES, cls), exist_ok=True)
    png(os.path.join(IMAGES, "circle", "a.png"), 8, 8, 2, 3,
        lambda x, y: (x * 32, y * 32, (x + y) * 16))
    png(os.path.join(IMAGES, "circle", "b.png"), 8, 8, 0, 1, lambda x, y: (x * 16 + y,))
    grey_jpeg(os.path.join(IMAGES, "square", "c.jpg"), 144)
    png(os.path.join(IMAGES, "square", "d.png"), 8, 8, 6, 4, lambda x, y: (255, 0, 0, 128))
    with open(os.path.join(IMAGES, "square", "notes.txt"), "w") as out:
        out.write("Not an image: readers skip files that are not PNG or JPEG.\n")


if __name__ == "__main__":
    write_npy_files()
    write_images()
