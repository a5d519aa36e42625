"""Rewrites a GGUF with the quantized tensors whose names match a pattern dequantized to F32
(gguf-py's own dequantizer), every other tensor and all metadata copied as they are. llama.cpp
multiplies F32 weights by F32 activations, so the rewritten file tells the weights' effect from
llama.cpp's rounding of the activations it feeds a quantized matmul (Q8_0 / Q8_1 / Q8_K blocks).

  gguf_dequantize.py IN.gguf OUT.gguf REGEX
REGEX is searched in "NAME TYPE" of each tensor ("blk.0.ffn_down.weight Q4_K"): "." takes
every quantized tensor, " Q[2-6]_K$" the K-quants.
Prints one JSON line: {"dequantized": N, "types": {"Q4_K": N, ...}} (the types it undid).
"""
import json
import re
import sys

import gguf
import numpy as np
from gguf.quants import dequantize


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst, pattern = argv[1], argv[2], re.compile(argv[3])
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(dst, arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)
    undone = {}
    data = []
    plain = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16,
             gguf.GGMLQuantizationType.BF16)
    for t in reader.tensors:
        if pattern.search(f"{t.name} {t.tensor_type.name}") and t.tensor_type not in plain:
            values = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
            undone[t.tensor_type.name] = undone.get(t.tensor_type.name, 0) + 1
            writer.add_tensor_info(t.name, values.shape, values.dtype, values.nbytes,
                                   gguf.GGMLQuantizationType.F32)
            data.append(values)
        else:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes,
                                   t.tensor_type)
            data.append(t.data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for values in data:
        writer.write_tensor_data(values, tensor_endianess=reader.endianess)
    writer.close()
    print(json.dumps({"dequantized": sum(undone.values()), "types": undone}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
