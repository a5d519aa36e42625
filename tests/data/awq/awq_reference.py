#!/usr/bin/env python3
"""AWQ as its paper (Lin et al. 2023, Eq. 4-5) and the reference code (llm-awq / AutoAWQ:
auto_scale's duo-scaling grid search, auto_clip's per-group shrink search) define it, written
here in torch, independent of BitLens's C++. Per layer: the paper's objective
||Q(W diag(s)) (diag(s)^-1 X) - W X||^2, evaluated over all calibration rows through
H = 2/N X^T X (BitLens's documented choice, where AutoAWQ measures a module's output on
sampled tokens). Rounding is torch's own fake quantization with per-row-group qparams from
torch's PerChannelMinMaxObserver, which BitLens's round-to-nearest is bit for bit.

Usage: awq_reference.py DIR
  DIR/meta.txt   rows cols n then one line per case: name bits symmetric group clip grid
  DIR/w.bin      float32 [rows, cols]
  DIR/x.bin      float32 [n, cols] calibration rows
  DIR/h.bin      float32 [cols, cols] the Hessian the engine accumulated from x
Writes DIR/xmean.bin, and per case DIR/<name>.scales.bin, <name>.clip.bin (if clipped),
<name>.q.bin (the rounded, scaled weight), and prints "<name> ratio <r> loss <l> rtn <l0>".
"""
import sys

import numpy as np
import torch


def rtn(w, bits, symmetric, group):
    """Round to nearest, one (scale, zero point) per row and group of `group` inputs."""
    rows, cols = w.shape
    v = w.reshape(rows * (cols // group), group)
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    scheme = torch.per_channel_symmetric if symmetric else torch.per_channel_affine
    obs = torch.ao.quantization.PerChannelMinMaxObserver(
        ch_axis=0, dtype=torch.qint8, qscheme=scheme, quant_min=qmin, quant_max=qmax)
    obs(v)
    scale, zero = obs.calculate_qparams()
    q = torch.fake_quantize_per_channel_affine(v, scale, zero.to(torch.int32), 0, qmin, qmax)
    return q.reshape(rows, cols)


def layer_error(w, q, h):
    d = w.double() - q.double()
    return ((d @ h) * d).sum().item() / 2.0


def awq(w, h, x_mean, bits, symmetric, group, clip, grid, max_shrink=0.5):
    rows, cols = w.shape
    hd = h.double()
    loss_rtn = layer_error(w, rtn(w, bits, symmetric, group), hd)
    # auto_scale, duo scaling: x_mean^r / w_mean^(1 - r), normalised by sqrt(max * min).
    wa = w.abs().reshape(rows, cols // group, group)
    w_mean = (wa / (wa.amax(-1, keepdim=True) + 1e-6)).reshape(rows, cols).mean(0)
    best, best_s, best_r = float("inf"), None, None
    for i in range(grid):
        r = i / grid
        s = (x_mean.pow(r) / (w_mean.pow(1 - r) + 1e-4)).clamp(min=1e-4)
        s = s / (s.max() * s.min()).sqrt()
        loss = layer_error(w, rtn(w * s, bits, symmetric, group) / s, hd)
        if loss < best:
            best, best_s, best_r = loss, s, r
    scaled = w * best_s
    clip_max = None
    if clip:
        # auto_clip on the scaled layer: its inputs are X / s, whose Hessian is H / (s s^T).
        inv = (1.0 / best_s).double()
        hs = hd * inv[:, None] * inv[None, :]
        clipped = scaled.clone()
        clip_max = torch.empty(rows, cols // group)
        for g in range(cols // group):
            sl = slice(g * group, (g + 1) * group)
            wg, hg = scaled[:, sl], hs[sl, sl]
            org_max = wg.abs().amax(1, keepdim=True)
            best_err = torch.full((rows,), float("inf"), dtype=torch.float64)
            best_max = org_max.clone()
            for k in range(max(int(max_shrink * grid), 1)):
                mv = org_max * np.float32(1 - k / grid)
                cur = torch.clamp(wg, -mv, mv)
                q = rtn(cur, bits, symmetric, group)
                d = wg.double() - q.double()
                err = ((d @ hg) * d).sum(1) / 2.0
                better = err < best_err
                best_err = torch.where(better, err, best_err)
                best_max = torch.where(better[:, None], mv, best_max)
            clipped[:, sl] = torch.clamp(wg, -best_max, best_max)
            clip_max[:, g] = best_max[:, 0]
        scaled = clipped
    q = rtn(scaled, bits, symmetric, group)
    return best_r, best_s, clip_max, q, layer_error(w, q / best_s, hd), loss_rtn


def main():
    d = sys.argv[1]
    lines = open(d + "/meta.txt").read().split("\n")
    rows, cols, n = map(int, lines[0].split())
    w = torch.from_numpy(np.fromfile(d + "/w.bin", dtype=np.float32).reshape(rows, cols))
    x = torch.from_numpy(np.fromfile(d + "/x.bin", dtype=np.float32).reshape(n, cols))
    h = torch.from_numpy(np.fromfile(d + "/h.bin", dtype=np.float32).reshape(cols, cols))
    # mean |x| per input channel, summed in float64 over the rows.
    x_mean = (x.abs().double().sum(0) / n).float()
    x_mean.numpy().tofile(d + "/xmean.bin")
    for line in lines[1:]:
        if not line.strip():
            continue
        name, bits, sym, group, clip, grid = line.split()
        group = cols if int(group) < 0 else int(group)
        r, s, clip_max, q, loss, loss_rtn = awq(w, h, x_mean, int(bits), sym == "1", group,
                                                clip == "1", int(grid))
        s.numpy().tofile(d + "/" + name + ".scales.bin")
        q.numpy().tofile(d + "/" + name + ".q.bin")
        if clip_max is not None:
            clip_max.numpy().tofile(d + "/" + name + ".clip.bin")
        print(f"{name} ratio {r} loss {loss!r} rtn {loss_rtn!r}")


if __name__ == "__main__":
    main()
