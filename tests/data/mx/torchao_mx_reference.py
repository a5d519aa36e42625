"""torchao's reference MX and NVFP4 quantization of test data, for tests/unit/test_mx_formats.cpp.

    torchao_mx_reference.py OUT.npz

Writes the inputs (x: 2^21 values for MX, xnv: 2^20 for NVFP4) and, per element type and scale
mode, what torchao 0.18's mx_formats gives: the E8M0 / E4M3 scale bytes, the element codes (bit
patterns, one per byte) and the dequantized float32 values. The inputs cover magnitudes over
60 octaves (one factor per block of 16) and the edge cases: all-zero blocks, amax exactly a
power of two, amax between 6 and 8 (saturation in FLOOR mode), subnormal float32 inputs,
elements that become subnormal in the element type, -0 and values on rounding ties.
"""
import sys

import numpy as np
import torch
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.kernels import unpack_uint4
from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

g = torch.Generator().manual_seed(7)


def blocks_of_octaves(rows, cols, lo, hi):
    x = torch.randn(rows, cols, generator=g)
    f = torch.pow(2.0, torch.randint(lo, hi, (rows, cols // 16), generator=g).float())
    return (x.reshape(rows, cols // 16, 16) * f.unsqueeze(-1)).reshape(rows, cols)


def with_edges(x):
    cols = x.shape[1]
    x[0] = 0                                            # all-zero blocks
    x[1] = torch.linspace(-1, 1, cols)                  # amax exactly 1
    x[2] = torch.linspace(-8, 8, cols)                  # amax 8
    x[3] = torch.linspace(-7.9, 7.9, cols)              # amax between 6 and 8
    x[4] = 1e-40                                        # subnormal float32 inputs
    x[5] = torch.randn(cols, generator=g) * 1e-3
    x[5, ::16] = 4.0                                    # small elements under a large amax
    x[6] = torch.randn(cols, generator=g) * 2.0 ** -120  # near the bottom of the E8M0 range
    x[7] = -0.0
    x[8] = torch.arange(cols).float() * 0.0625 - 2      # values on the grids' ties
    x[9] = torch.arange(cols).float() * 0.03125 - 1
    x[10] = torch.randn(cols, generator=g) * 2.0 ** 100  # near the top of the E8M0 range
    return x.contiguous()


def main():
    out = sys.argv[1]
    x = with_edges(blocks_of_octaves(32768, 64, -30, 30))
    res = {"x": x.numpy()}
    elems = [("mxfp4", torch.float4_e2m1fn_x2), ("mxfp6_e2m3", "fp6_e2m3"),
             ("mxfp6_e3m2", "fp6_e3m2"), ("mxfp8_e4m3", torch.float8_e4m3fn),
             ("mxfp8_e5m2", torch.float8_e5m2)]
    for name, dt in elems:
        for mode in (ScaleCalculationMode.FLOOR, ScaleCalculationMode.RCEIL):
            scale, data = to_mx(x, dt, 32, mode)
            back = to_dtype(data, scale, dt, 32, torch.float32)
            codes = data.view(torch.uint8)
            if dt == torch.float4_e2m1fn_x2:
                codes = unpack_uint4(codes)
            key = "%s_%s" % (name, mode.name.lower())
            res[key + "_scale"] = scale.view(torch.uint8).reshape(x.shape[0], -1).numpy()
            res[key + "_codes"] = codes.reshape(x.shape).numpy()
            res[key + "_deq"] = back.reshape(x.shape).numpy()
    # NVFP4 with its per-tensor scale (the tensor's own amax), blocks of 16: magnitudes over
    # 12 octaves, since one tensor amax sets the range every block scale lives in.
    xnv = blocks_of_octaves(16384, 64, -6, 6)
    xnv[0] = 0
    xnv[1] = torch.linspace(-1, 1, 64)
    xnv[2] = -0.0
    xnv[3] = torch.randn(64, generator=g) * 1e-6         # block scales below E4M3's 2^-6 clamp
    xnv = xnv.contiguous()
    pts = per_tensor_amax_to_scale(xnv.abs().max())
    t = NVFP4Tensor.to_nvfp4(xnv, block_size=16, per_tensor_scale=pts)
    res["xnv"] = xnv.numpy()
    res["nvfp4_tensor_scale"] = np.array([pts.item()], np.float32)
    res["nvfp4_scale"] = t.scale.view(torch.uint8).reshape(xnv.shape[0], -1).numpy()
    res["nvfp4_codes"] = unpack_uint4(t.qdata.view(torch.uint8)).reshape(xnv.shape).numpy()
    res["nvfp4_deq"] = t.dequantize(torch.float32).numpy()
    np.savez(out, **res)
    print("ok")


if __name__ == "__main__":
    main()
