#!/usr/bin/env python3
"""Writes the golden files that tests/unit/test_quant_type.cpp reads: PyTorch's own outputs.

    ~/.cache/bitlens/venv/bin/python tests/data/quant/make_quant_golden.py

Every file is a small .npy (float arrays as f4, codes as i1/u1, bit patterns as u1/i2). Names:

  pt_<case>_{x,fq,q,params}   per-tensor affine: input, torch.fake_quantize_per_tensor_affine,
                              codes (torch.quantize_per_tensor(...).int_repr() for the 8-bit
                              ranges, rint(fq / scale) + zp for the narrower ones) and
                              [scale, zero_point, quant_min, quant_max] (f8).
  pc_<case>_{x,scale,zp,fq,q,params}
                              per-channel: torch.fake_quantize_per_channel_affine and
                              torch.quantize_per_channel; params = [axis, quant_min, quant_max].
  blk_<case>_{x,scale,zp,fq}  per-group and per-token, with the per-channel ops as the oracle on
                              the tensor reshaped to [blocks, elements per block]; scale and zero
                              point from PerChannelMinMaxObserver on that reshaped tensor.
  obs_<case>_{x,scale,zp,params}
                              MinMaxObserver / PerChannelMinMaxObserver calculate_qparams;
                              params = [quant_min, quant_max, symmetric, ch_axis (-1: tensor)].
  f8_{x,e4m3_bits,e5m2_bits}  x.to(float8_e4m3fn / float8_e5m2), in range and beyond it.
  f8s_<e4m3|e5m2>_{x,scale,bits,deq}
                              scaled FP8 as torchao does it: scale = amax / max per row,
                              bits = (x / scale).clamp(-max, max).to(float8).
  h_{x,fp16_bits,bf16_bits}   x.to(float16 / bfloat16) as int16 bit patterns.
  fp4_{x,codes}               FP4 E2M1 codes of unscaled values (reference below: nearest value,
                              ties to the even mantissa, saturating, sign kept).
  fp4s_{x,scale,codes,deq}    scaled FP4: scale = absmax / 6 per row, v = x * (1 / scale).
  nf4s_{x,scale,codes,deq}    NF4 as bitsandbytes' default (PyTorch) backend quantize_4bit does
                              it, blocks of 64: scaled = clamp(x * (1 / absmax), -1, 1),
                              code = argmin |scaled - NF4| (first index on ties).

The case tables (names, types) are repeated in the C++ test; change both together.
"""
import os
import warnings

import numpy as np
import torch
from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
F32 = np.float32

# bitsandbytes' NF4 code table (bitsandbytes/functional.py get_4bit_type("nf4"), the same values
# as dDequantizeNF4 in csrc/kernels.cu), transcribed.
NF4 = [
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
]
# The FP4 E2M1 magnitudes for the codes 0b0000..0b0111 (exponent bits 2..1, mantissa bit 0).
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]

written = []


def save(name, array):
    path = os.path.join(HERE, name + ".npy")
    array = np.asarray(array)
    np.save(path, array if array.flags.c_contiguous else array.copy(order="C"))  # keeps 0-d
    written.append(path)


def ties(scale, qmin, qmax, zp):
    """Values at and one or two float32 steps around every (k + 0.5) * scale of the range and
    just beyond it, plus values far out of range, zeros of both signs and tiny values."""
    out = []
    for k in range(qmin - zp - 3, qmax - zp + 3):
        t = F32((k + 0.5) * F32(scale))
        out += [t, np.nextafter(t, F32(np.inf)), np.nextafter(t, F32(-np.inf)),
                np.nextafter(np.nextafter(t, F32(np.inf)), F32(np.inf))]
        out.append(F32(k * F32(scale)))
    out += [0.0, -0.0, 1e-30, -1e-30, 1e-40, -1e-40, 1e3, -1e3, 1e6, -1e6, 3e38, -3e38]
    return np.array(out, dtype=F32)


def divide_differs(x, scale, zp, qmin, qmax):
    """How many elements x / scale would round differently from torch's x * (1 / scale)."""
    xs = torch.from_numpy(x)
    inv = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(scale, dtype=torch.float32)
    mul = torch.clamp(torch.round(xs * inv) + zp, qmin, qmax)
    div = torch.clamp(torch.round(xs / torch.tensor(scale, dtype=torch.float32)) + zp, qmin, qmax)
    return int((mul != div).sum())


def fake_quant_codes(x, scale, zp, qmin, qmax, fq):
    """The codes behind torch.fake_quantize_*: clamp(round(x * (1 / scale)) + zp), checked
    against the fake-quantized values."""
    inv = torch.tensor(1.0, dtype=torch.float32) / scale.float()
    q = torch.clamp(torch.round(x * inv) + zp, qmin, qmax)
    assert torch.equal((q - zp) * scale.float(), fq)
    return q.numpy().astype(np.int8 if qmin < 0 else np.uint8)


def per_tensor(gen):
    # name, scale, zero point, quant_min, quant_max, torch dtype for quantize_per_tensor
    cases = [
        ("int8_a", 0.1, 0, -128, 127, torch.qint8),
        ("int8_b", 0.0173, -7, -128, 127, torch.qint8),
        ("uint8_a", 0.05, 131, 0, 255, torch.quint8),
        ("uint8_b", 0.25, 128, 0, 255, torch.quint8),
        ("int4", 0.37, 0, -8, 7, None),
        ("int4_zp", 0.3, -3, -8, 7, None),
        ("uint4", 0.2, 6, 0, 15, None),
        ("int2", 0.5, 0, -2, 1, None),
    ]
    discriminating = 0
    for name, scale, zp, qmin, qmax, dtype in cases:
        scale = float(F32(scale))
        rand = (torch.randn(400, generator=gen) * (qmax - qmin) * scale / 3).numpy()
        x = np.concatenate([ties(scale, qmin, qmax, zp), rand]).astype(F32)
        xt = torch.from_numpy(x)
        fq = torch.fake_quantize_per_tensor_affine(xt, scale, zp, qmin, qmax)
        q = fake_quant_codes(xt, torch.tensor(scale), torch.tensor(zp), qmin, qmax, fq)
        if dtype is not None:
            qtorch = torch.quantize_per_tensor(xt, scale, zp, dtype).int_repr().numpy()
            save(f"pt_{name}_qtorch", qtorch)
            differ = int((qtorch.astype(np.int64) != q.astype(np.int64)).sum())
            assert differ == 0 or zp != 0, name
            print(f"pt_{name}: quantize_per_tensor differs from fake_quantize in {differ} codes")
        discriminating += divide_differs(x, scale, zp, qmin, qmax)
        save(f"pt_{name}_x", x)
        save(f"pt_{name}_fq", fq.numpy())
        save(f"pt_{name}_q", q)
        save(f"pt_{name}_params", np.array([scale, zp, qmin, qmax], dtype=np.float64))
    # The data must tell multiplying by the reciprocal from dividing, or it proves nothing.
    assert discriminating > 0
    print(f"per-tensor: {discriminating} values where x / scale rounds differently")


def per_channel(gen):
    # name, shape, axis, scales, zero points, quant_min, quant_max, torch dtype
    cases = [
        ("int8_ax0", (6, 150), 0, [0.1, 0.25, 0.0173, 1.0 / 3.0, 0.5, 2.0], [0, 0, -5, 3, 0, 0],
         -128, 127, torch.qint8),
        ("uint8_ax1", (60, 5), 1, [0.05, 0.125, 0.01, 0.7, 0.0625], [128, 0, 255, 17, 131],
         0, 255, torch.quint8),
        ("int4_ax0", (4, 100), 0, [0.37, 0.25, 0.1, 0.9], [0, -3, 2, 7], -8, 7, None),
        ("uint4_ax1", (50, 3), 1, [0.2, 0.5, 0.03], [6, 0, 15], 0, 15, None),
    ]
    for name, shape, axis, scales, zps, qmin, qmax, dtype in cases:
        s = torch.tensor(scales, dtype=torch.float32)
        z = torch.tensor(zps, dtype=torch.int32)
        x = torch.randn(shape, generator=gen) * 0.4 * (qmax - qmin) * s.view(
            [-1 if d == axis else 1 for d in range(len(shape))])
        # Exact ties on the first few elements of every channel.
        xm = x.movedim(axis, 0).contiguous()
        for c in range(xm.shape[0]):
            for j, k in enumerate([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 100.0, -100.0]):
                xm.view(xm.shape[0], -1)[c, j] = F32(k) * s[c]
        x = xm.movedim(0, axis).contiguous()
        fq = torch.fake_quantize_per_channel_affine(x, s, z, axis, qmin, qmax)
        bshape = [-1 if d == axis else 1 for d in range(len(shape))]
        q = fake_quant_codes(x, s.view(bshape), z.view(bshape), qmin, qmax, fq)
        if dtype is not None:
            qtorch = torch.quantize_per_channel(x, s.double(), z.long(), axis, dtype).int_repr()
            save(f"pc_{name}_qtorch", qtorch.numpy())
            differ = int((qtorch.numpy().astype(np.int64) != q.astype(np.int64)).sum())
            print(f"pc_{name}: quantize_per_channel differs from fake_quantize in {differ} codes")
        save(f"pc_{name}_x", x.numpy())
        save(f"pc_{name}_scale", s.numpy())
        save(f"pc_{name}_zp", z.long().numpy())
        save(f"pc_{name}_fq", fq.numpy())
        save(f"pc_{name}_q", q)
        save(f"pc_{name}_params", np.array([axis, qmin, qmax], dtype=np.int64))


def blocks(gen):
    """Per-group and per-token: PyTorch has no such ops, but they are per-channel quantization
    of the tensor reshaped to [blocks, elements per block]; that is the oracle."""
    # name, x, [blocks, per block] view of x, scale shape, observer settings
    w = torch.randn(8, 256, generator=gen)
    w[3, 64:128] = 0.0  # an all-zero group
    w[5, 128:192] = 0.75  # a constant group
    w2 = torch.randn(64, 8, generator=gen) * 3.0
    act = torch.randn(2, 3, 40, generator=gen) * 2.0
    act[1, 2, :] = 0.0  # an all-zero token
    cases = [
        ("int4_g64", w, w.reshape(32, 64), (8, 4), torch.qint8, -8, 7,
         torch.per_channel_affine),
        ("int8_g32", w, w.reshape(64, 32), (8, 8), torch.qint8, -128, 127,
         torch.per_channel_symmetric),
        # Groups of 32 along axis 0 of a [64, 8] weight: rows are the 8 columns.
        ("uint8_g32_ax0", w2, w2.t().reshape(16, 32), (8, 2), torch.quint8, 0, 255,
         torch.per_channel_affine),
        ("int8_tok", act, act.reshape(6, 40), (6,), torch.qint8, -128, 127,
         torch.per_channel_symmetric),
    ]
    for name, x, view, scale_shape, dtype, qmin, qmax, qscheme in cases:
        custom = {} if (qmin, qmax) in ((-128, 127), (0, 255)) else {
            "quant_min": qmin, "quant_max": qmax}
        observer = PerChannelMinMaxObserver(ch_axis=0, dtype=dtype, qscheme=qscheme, **custom)
        observer(view)
        scale, zp = observer.calculate_qparams()
        fq = torch.fake_quantize_per_channel_affine(view, scale.float(), zp.int(), 0, qmin, qmax)
        if name == "uint8_g32_ax0":
            fq = fq.reshape(8, 64).t()
        save(f"blk_{name}_x", x.contiguous().numpy())
        save(f"blk_{name}_scale", scale.float().reshape(scale_shape).numpy())
        save(f"blk_{name}_zp", zp.long().reshape(scale_shape).numpy())
        save(f"blk_{name}_fq", fq.reshape(x.shape).contiguous().numpy())


def observers(gen):
    rand = torch.randn(300, generator=gen) * 1.7 + 0.3
    inputs = {
        "rand": rand,
        "const": torch.full((50,), 2.5),
        "zeros": torch.zeros(40),
        "neg": -torch.rand(60, generator=gen) - 0.5,
        "pos": torch.rand(60, generator=gen) + 0.5,
        "tiny": torch.randn(40, generator=gen) * 1e-9,
        # min / scale = -2.5 exactly: the zero point rounds half to even (2, not 3).
        "tie": torch.tensor([-0.15625, 15.78125, 1.0, -0.1]),
    }
    # name, input, dtype, quant range (None: the dtype's), symmetric, per-channel axis
    per_tensor = [
        ("int8_sym", "rand", torch.qint8, None, True),
        ("int8_aff", "rand", torch.qint8, None, False),
        ("uint8_sym", "rand", torch.quint8, None, True),
        ("uint8_aff", "rand", torch.quint8, None, False),
        ("int4_sym", "rand", torch.qint8, (-8, 7), True),
        ("int4_aff", "rand", torch.qint8, (-8, 7), False),
        ("uint4_sym", "rand", torch.quint8, (0, 15), True),
        ("uint4_aff", "rand", torch.quint8, (0, 15), False),
        ("int2_sym", "rand", torch.qint8, (-2, 1), True),
        ("int2_aff", "rand", torch.qint8, (-2, 1), False),
        ("const_uint8_aff", "const", torch.quint8, None, False),
        ("const_int8_sym", "const", torch.qint8, None, True),
        ("zeros_int8_sym", "zeros", torch.qint8, None, True),
        ("zeros_uint8_aff", "zeros", torch.quint8, None, False),
        ("neg_int8_aff", "neg", torch.qint8, None, False),
        ("neg_uint8_aff", "neg", torch.quint8, None, False),
        ("pos_uint8_aff", "pos", torch.quint8, None, False),
        ("pos_int4_sym", "pos", torch.qint8, (-8, 7), True),
        ("tiny_int8_sym", "tiny", torch.qint8, None, True),
        ("tiny_uint8_aff", "tiny", torch.quint8, None, False),
        ("tie_uint8_aff", "tie", torch.quint8, None, False),
        ("tie_int8_aff", "tie", torch.qint8, None, False),
    ]
    for name, key, dtype, qrange, symmetric in per_tensor:
        qscheme = torch.per_tensor_symmetric if symmetric else torch.per_tensor_affine
        extra = {} if qrange is None else {"quant_min": qrange[0], "quant_max": qrange[1]}
        observer = MinMaxObserver(dtype=dtype, qscheme=qscheme, **extra)
        observer(inputs[key])
        scale, zp = observer.calculate_qparams()
        qmin, qmax = observer.quant_min, observer.quant_max
        save(f"obs_{name}_x", inputs[key].numpy())
        save(f"obs_{name}_scale", scale.float().reshape(()).numpy())
        save(f"obs_{name}_zp", zp.long().reshape(()).numpy())
        save(f"obs_{name}_params", np.array([qmin, qmax, int(symmetric), -1], dtype=np.int64))

    w = torch.randn(4, 64, generator=gen)
    w[1] = 0.0
    w[2] = -0.3
    w3 = torch.randn(32, 3, generator=gen) + torch.tensor([0.0, 2.0, -2.0])
    per_channel = [
        ("ch_int8_sym", w, 0, torch.qint8, None, True),
        ("ch_int8_aff", w, 0, torch.qint8, None, False),
        ("ch_uint8_sym", w, 0, torch.quint8, None, True),
        ("ch_uint8_aff_ax1", w3, 1, torch.quint8, None, False),
        ("ch_int4_aff", w, 0, torch.qint8, (-8, 7), False),
        ("ch_uint4_sym_ax1", w3, 1, torch.quint8, (0, 15), True),
    ]
    for name, x, axis, dtype, qrange, symmetric in per_channel:
        qscheme = torch.per_channel_symmetric if symmetric else torch.per_channel_affine
        extra = {} if qrange is None else {"quant_min": qrange[0], "quant_max": qrange[1]}
        observer = PerChannelMinMaxObserver(ch_axis=axis, dtype=dtype, qscheme=qscheme, **extra)
        observer(x)
        scale, zp = observer.calculate_qparams()
        qmin, qmax = observer.quant_min, observer.quant_max
        save(f"obs_{name}_x", x.contiguous().numpy())
        save(f"obs_{name}_scale", scale.float().numpy())
        save(f"obs_{name}_zp", zp.long().numpy())
        save(f"obs_{name}_params", np.array([qmin, qmax, int(symmetric), axis], dtype=np.int64))


def float8(gen):
    vals = []
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        # Every finite value of the format and the midpoints between neighbours (exact ties).
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).float()
        finite = torch.sort(codes[torch.isfinite(codes)]).values.unique()
        mids = (finite[1:].double() + finite[:-1].double()) / 2
        keep = mids.float().double() == mids  # only midpoints float32 holds exactly
        vals += [finite, mids[keep].float()]
    vals.append(torch.randn(200, generator=gen) * 40.0)
    vals.append(torch.exp(torch.randn(200, generator=gen) * 6.0))  # wide range of exponents
    vals.append(torch.tensor([
        0.0, -0.0, 1e-40, -1e-40, 2.0**-10, 2.0**-9 * 0.5, 2.0**-9 * 1.5, 2.0**-17,
        448.0, 449.0, 463.99, 464.0, 464.01, 470.0, 479.9, 480.0, 500.0, 1e6,
        57344.0, 57345.0, 61439.0, 61440.0, 61441.0, 65535.0, 65536.0, 1e30, 3e38,
        float("inf"), float("nan")]))
    x = torch.cat(vals).float()
    x = torch.cat([x, -x])
    save("f8_x", x.numpy())
    save("f8_e4m3_bits", x.to(torch.float8_e4m3fn).view(torch.uint8).numpy())
    save("f8_e5m2_bits", x.to(torch.float8_e5m2).view(torch.uint8).numpy())

    w = torch.randn(4, 64, generator=gen) * torch.tensor([[1.0], [1e-3], [300.0], [0.0]])
    for tag, dtype in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)):
        fmax = torch.finfo(dtype).max
        scale = w.abs().amax(dim=1) / fmax
        scale = torch.clamp(scale, min=torch.finfo(torch.float32).tiny)  # all-zero row
        q = (w / scale[:, None]).clamp(-fmax, fmax).to(dtype)
        save(f"f8s_{tag}_x", w.numpy())
        save(f"f8s_{tag}_scale", scale.numpy())
        save(f"f8s_{tag}_bits", q.view(torch.uint8).numpy())
        save(f"f8s_{tag}_deq", (q.float() * scale[:, None]).numpy())


def halves(gen):
    x = torch.cat([
        torch.randn(200, generator=gen) * 100.0,
        torch.exp(torch.randn(200, generator=gen) * 15.0),
        # Ties: 1 + 2^-11 is halfway between two halves, 1 + 2^-8 between two bfloat16s.
        torch.tensor([1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8,
                      65504.0, 65519.0, 65520.0, 1e5, 2.0**-24, 2.0**-25, 2.0**-25 * 3,
                      1e-40, 3.3895314e38, 3.4e38, 0.0, -0.0, float("inf"), float("nan")]),
    ]).float()
    x = torch.cat([x, -x])
    save("h_x", x.numpy())
    save("h_fp16_bits", x.to(torch.float16).view(torch.int16).numpy())
    save("h_bf16_bits", x.to(torch.bfloat16).view(torch.int16).numpy())


def fp4_code(v):
    """E2M1 code of one float32 value: nearest magnitude, ties to the even mantissa bit (the
    even code index), saturating at 6; sign bit 3 kept (so -0.1 gives -0, 0b1000)."""
    m = abs(float(v))
    if m >= 6.0:
        return (8 if np.signbit(v) else 0) | 7  # (distances to 3e38 would all round equal)
    dist = [abs(m - e) for e in E2M1]
    best = min(dist)
    candidates = [i for i, d in enumerate(dist) if d == best]
    idx = candidates[0] if len(candidates) == 1 else [i for i in candidates if i % 2 == 0][0]
    return (8 if np.signbit(v) else 0) | idx


def fp4(gen):
    mids = [(a + b) / 2 for a, b in zip(E2M1[:-1], E2M1[1:])]
    vals = E2M1 + mids + [np.nextafter(F32(m), F32(9)) for m in mids] + \
        [np.nextafter(F32(m), F32(-1)) for m in mids] + [6.5, 7.0, 100.0, 3e38, 1e-40, -0.0]
    x = np.concatenate([np.array(vals, dtype=F32),
                        (torch.randn(150, generator=gen) * 3).numpy()]).astype(F32)
    x = np.concatenate([x, -x])
    save("fp4_x", x)
    save("fp4_codes", np.array([fp4_code(v) for v in x], dtype=np.uint8))

    table = np.array(E2M1 + [-e for e in E2M1], dtype=F32)
    w = (torch.randn(4, 64, generator=gen) * torch.tensor([[1.0], [0.01], [50.0], [1.0]]))
    w[3, :8] = torch.tensor([1.0, -1.0, 0.5, 0.25, 0.125, -0.0625, 0.0, -0.0]) * w[3].abs().max()
    scale = w.abs().amax(dim=1) / 6.0
    v = w * (torch.tensor(1.0) / scale)[:, None]
    codes = np.array([fp4_code(e) for e in v.flatten().numpy()], dtype=np.uint8).reshape(4, 64)
    deq = torch.from_numpy(table[codes]) * scale[:, None]
    save("fp4s_x", w.numpy())
    save("fp4s_scale", scale.numpy())
    save("fp4s_codes", codes)
    save("fp4s_deq", deq.numpy())


def nf4(gen):
    code = torch.tensor(NF4, dtype=torch.float32)
    w = torch.randn(4, 256, generator=gen)
    w[2, 64:128] *= 1e-3
    blocks_ = w.reshape(-1, 64)
    absmax = blocks_.abs().max(dim=-1)[0]
    scaled = torch.clamp(blocks_ * (1 / absmax.view(-1, 1)), -1, 1)
    codes = torch.argmin(torch.abs(scaled.reshape(-1, 1) - code), dim=-1).to(torch.uint8)
    # bitsandbytes' CUDA kernel decides by thresholds instead of argmin; keep the data away from
    # the midpoints, where the two could disagree in the last bit.
    mids = (code[1:] + code[:-1]) / 2
    assert (scaled.reshape(-1, 1) - mids).abs().min() > 1e-6
    deq = (code[codes.long()].reshape(-1, 64) * absmax.view(-1, 1)).reshape(4, 256)
    save("nf4s_x", w.numpy())
    save("nf4s_scale", absmax.reshape(4, 4).numpy())
    save("nf4s_codes", codes.reshape(4, 256).numpy())
    save("nf4s_deq", deq.numpy())


def main():
    for old in os.listdir(HERE):
        if old.endswith(".npy"):
            os.remove(os.path.join(HERE, old))
    gen = torch.Generator().manual_seed(20240607)
    per_tensor(gen)
    per_channel(gen)
    blocks(gen)
    observers(gen)
    float8(gen)
    halves(gen)
    fp4(gen)
    nf4(gen)
    total = sum(os.path.getsize(p) for p in written)
    print(f"torch {torch.__version__}: wrote {len(written)} files, {total} bytes")


if __name__ == "__main__":
    main()
