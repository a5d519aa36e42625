#!/usr/bin/env python3
"""GPTQ as its paper and the authors' reference code (IST-DASLab/gptq, gptq.py: add_batch and
fasterquant) define it, written here in torch, independent of BitLens's C++. The rounding of one
column is torch's own fake quantization with per-row qparams from torch's
PerChannelMinMaxObserver, which is what BitLens's round-to-nearest is bit for bit.

Usage: gptq_reference.py DIR
  DIR/meta.txt   rows cols then one line per case: name bits symmetric group act_order
                 static_groups damp
  DIR/w.bin      float32 [rows, cols]
  DIR/x.bin      float32 [n, cols] (two batches: the first n // 2 rows, then the rest)
Writes DIR/h.bin (the reference Hessian) and DIR/<name>.bin (dequantized Q) per case, and
prints "<name> loss <value>".
"""
import math
import sys

import numpy as np
import torch


def hessian(x, batches):
    cols = x.shape[1]
    H = torch.zeros((cols, cols), dtype=torch.float32)
    nsamples = 0
    for inp in batches:
        tmp = inp.shape[0]
        inp = inp.t()
        H *= nsamples / (nsamples + tmp)
        nsamples += tmp
        inp = math.sqrt(2 / nsamples) * inp.float()
        H += inp.matmul(inp.t())
    return H


class Quantizer:
    """Per-row scale and zero point of a weight slice, rounding as torch fake-quantizes."""

    def __init__(self, bits, symmetric):
        self.qmin = -(2 ** (bits - 1))
        self.qmax = 2 ** (bits - 1) - 1
        self.symmetric = symmetric

    def find_params(self, w):
        scheme = torch.per_channel_symmetric if self.symmetric else torch.per_channel_affine
        obs = torch.ao.quantization.PerChannelMinMaxObserver(
            ch_axis=0, dtype=torch.qint8, qscheme=scheme, quant_min=self.qmin,
            quant_max=self.qmax)
        obs(w)
        self.scale, self.zero = obs.calculate_qparams()

    def quantize(self, w):
        return torch.fake_quantize_per_channel_affine(
            w.unsqueeze(1), self.scale, self.zero.to(torch.int32), 0, self.qmin,
            self.qmax).flatten()


def fasterquant(W, H, quantizer, blocksize=128, percdamp=0.01, groupsize=-1, actorder=False,
                static_groups=False):
    W = W.clone().float()
    H = H.clone()
    columns = W.shape[1]
    if groupsize == -1:
        quantizer.find_params(W)
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    if groupsize != -1:
        static_groups = True  # as BitLens: group scales are always static
    groups = []
    if static_groups:
        import copy
        for i in range(0, columns, groupsize):
            q = copy.deepcopy(quantizer)
            q.find_params(W[:, i:(i + groupsize)])
            groups.append(q)
    if groupsize == -1 and static_groups:
        pass
    if actorder:
        perm = torch.argsort(torch.diag(H), descending=True)
        W = W[:, perm]
        H = H[perm][:, perm]
        invperm = torch.argsort(perm)
    Losses = torch.zeros_like(W)
    Q = torch.zeros_like(W)
    damp = percdamp * torch.mean(torch.diag(H))
    diag = torch.arange(columns)
    H[diag, diag] += damp
    H = torch.linalg.cholesky(H)
    H = torch.cholesky_inverse(H)
    H = torch.linalg.cholesky(H, upper=True)
    Hinv = H
    for i1 in range(0, columns, blocksize):
        i2 = min(i1 + blocksize, columns)
        count = i2 - i1
        W1 = W[:, i1:i2].clone()
        Q1 = torch.zeros_like(W1)
        Err1 = torch.zeros_like(W1)
        Losses1 = torch.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        for i in range(count):
            w = W1[:, i]
            d = Hinv1[i, i]
            if groupsize != -1:
                if not static_groups:
                    if (i1 + i) % groupsize == 0:
                        quantizer.find_params(W[:, (i1 + i):(i1 + i + groupsize)])
                else:
                    idx = i1 + i
                    if actorder:
                        idx = perm[idx]
                    quantizer = groups[idx // groupsize]
            q = quantizer.quantize(w)
            Q1[:, i] = q
            Losses1[:, i] = (w - q) ** 2 / d ** 2
            err1 = (w - q) / d
            W1[:, i:] -= err1.unsqueeze(1).matmul(Hinv1[i, i:].unsqueeze(0))
            Err1[:, i] = err1
        Q[:, i1:i2] = Q1
        Losses[:, i1:i2] = Losses1 / 2
        W[:, i2:] -= Err1.matmul(Hinv[i1:i2, i2:])
    if actorder:
        Q = Q[:, invperm]
    return Q, float(torch.sum(Losses))


def main():
    d = sys.argv[1]
    lines = open(f"{d}/meta.txt").read().split("\n")
    rows, cols = (int(v) for v in lines[0].split())
    W = torch.from_numpy(np.fromfile(f"{d}/w.bin", dtype=np.float32).reshape(rows, cols))
    x = torch.from_numpy(np.fromfile(f"{d}/x.bin", dtype=np.float32).reshape(-1, cols))
    half = x.shape[0] // 2
    H = hessian(x, [x[:half], x[half:]])
    H.numpy().tofile(f"{d}/h.bin")
    for line in lines[1:]:
        if not line.strip():
            continue
        name, bits, sym, group, act, static, damp = line.split()
        Q, loss = fasterquant(W, H, Quantizer(int(bits), sym == "1"), percdamp=float(damp),
                              groupsize=int(group), actorder=act == "1",
                              static_groups=static == "1")
        Q.numpy().tofile(f"{d}/{name}.bin")
        print(name, "loss", repr(loss))


if __name__ == "__main__":
    main()
