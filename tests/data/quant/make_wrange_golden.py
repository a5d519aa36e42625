#!/usr/bin/env python3
"""Writes the golden files of the int8 weight range option (wrange=127, codes [-127, 127]) that
tests/unit/test_quant_type.cpp (QuantWrange.*) reads: PyTorch's and onnxruntime's own outputs.

    ~/.cache/bitlens/venv/bin/python tests/data/quant/make_wrange_golden.py

  wrange_w                 [8, 48] float32 weights (row 1 all zero, row 2 constant negative,
                           row 3 whose extreme is negative so code -127 is reached).
  wrange_ch_{scale,zp,fq,q}
                           PerChannelMinMaxObserver(qint8, per_channel_symmetric, quant_min=-127,
                           quant_max=127) on wrange_w, then torch.fake_quantize_per_channel_affine
                           and torch.quantize_per_channel(...).int_repr() with them.
  wrange_big_fq            fake_quantize_per_channel_affine of 1.5 * wrange_w with the same
                           qparams: values beyond the range clamp at -127 / 127 (never -128).
  wrange_t_{scale,zp,fq}   MinMaxObserver(qint8, per_tensor_symmetric, -127, 127) and
                           fake_quantize_per_tensor_affine, on the whole of wrange_w.
  wrange_full_ch_scale     the default range's scale (absmax / 127.5), for contrast.
  wrange_ort_{scale,q}     onnxruntime.quantization.quant_utils.quantize_data(row, INT8,
                           symmetric=True) per row: the quantizer onnxruntime's
                           quantize_static runs for per-channel int8 weights (qmin -127).
"""
import os
import warnings

import numpy as np
import onnxruntime
import torch
from onnx import TensorProto
from onnxruntime.quantization.quant_utils import get_qmin_qmax_for_qType, quantize_data
from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, array):
    np.save(os.path.join(HERE, name + ".npy"), np.ascontiguousarray(np.asarray(array)))


def main():
    gen = torch.Generator().manual_seed(20261207)
    w = torch.randn(8, 48, generator=gen) * 0.4
    w[1] = 0.0
    w[2] = -0.3
    w[3] = w[3].abs()
    w[3, 7] = -1.3  # the extreme of row 3 is negative: absmax / scale = -127 exactly
    save("wrange_w", w.numpy())

    observer = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8,
                                        qscheme=torch.per_channel_symmetric,
                                        quant_min=-127, quant_max=127)
    observer(w)
    scale, zp = observer.calculate_qparams()
    scale = scale.float()
    fq = torch.fake_quantize_per_channel_affine(w, scale, zp.int(), 0, -127, 127)
    q = torch.quantize_per_channel(w, scale.double(), zp.long(), 0, torch.qint8).int_repr()
    assert int(q.min()) >= -127, "torch picked -128 under a [-127, 127] observer"
    save("wrange_ch_scale", scale.numpy())
    save("wrange_ch_zp", zp.long().numpy())
    save("wrange_ch_fq", fq.numpy())
    save("wrange_ch_q", q.numpy())
    big = torch.fake_quantize_per_channel_affine(w * 1.5, scale, zp.int(), 0, -127, 127)
    save("wrange_big_fq", big.numpy())

    observer = MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric,
                              quant_min=-127, quant_max=127)
    observer(w)
    ts, tz = observer.calculate_qparams()
    save("wrange_t_scale", ts.float().reshape(()).numpy())
    save("wrange_t_zp", tz.long().reshape(()).numpy())
    save("wrange_t_fq",
         torch.fake_quantize_per_tensor_affine(w, float(ts), int(tz), -127, 127).numpy())

    full = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8,
                                    qscheme=torch.per_channel_symmetric)
    full(w)
    save("wrange_full_ch_scale", full.calculate_qparams()[0].float().numpy())

    assert tuple(int(v) for v in get_qmin_qmax_for_qType(TensorProto.INT8, symmetric=True)) == (-127, 127)
    ort_scale, ort_q = [], []
    for row in w.numpy():
        _, s, codes = quantize_data(row, TensorProto.INT8, symmetric=True)
        ort_scale.append(np.float32(s))
        ort_q.append(codes.astype(np.int8))
    save("wrange_ort_scale", np.array(ort_scale, dtype=np.float32))
    save("wrange_ort_q", np.stack(ort_q))
    print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}: wrote wrange_*.npy")


if __name__ == "__main__":
    main()
