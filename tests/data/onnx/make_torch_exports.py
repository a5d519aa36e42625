#!/usr/bin/env python3
"""Exports small MobileNet-style torch.nn models with torch.onnx.export (the TorchScript
exporter, dynamo=False: it needs no onnxscript and works offline) at opsets 9, 11, 13 and 17,
and writes onnxruntime's outputs on a random batch:

    OUTDIR/<model>_op<N>.onnx, OUTDIR/<model>_op<N>.ort.npy, OUTDIR/x.npy, OUTDIR/models.txt

The models cover Hardswish, Hardsigmoid, ReLU6 (Clip), nearest and bilinear interpolate
(Upsample at opset 9, Resize later) and ConvTranspose2d. Usage: make_torch_exports.py OUTDIR
"""
import os
import sys
import warnings

import numpy as np
import onnxruntime as ort
import torch
from torch import nn
from torch.nn import functional as F

OUT = sys.argv[1]
torch.manual_seed(7)
warnings.filterwarnings("ignore")


class InvertedResidual(nn.Module):
    """MobileNetV3-style block: 1x1 expand, Hardswish, depthwise 3x3, squeeze-excite with
    Hardsigmoid, 1x1 project, residual."""

    def __init__(self, c, expand):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(c, expand, 1), nn.BatchNorm2d(expand), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(expand, expand, 3, padding=1, groups=expand),
                                nn.BatchNorm2d(expand), nn.ReLU6())
        self.se_reduce = nn.Conv2d(expand, 4, 1)
        self.se_expand = nn.Conv2d(4, expand, 1)
        self.project = nn.Conv2d(expand, c, 1)

    def forward(self, x):
        y = self.dw(self.expand(x))
        s = F.adaptive_avg_pool2d(y, 1)
        s = F.hardsigmoid(self.se_expand(F.relu(self.se_reduce(s))))
        return x + self.project(y * s)


class MobileNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                                  nn.Hardswish())
        self.block = InvertedResidual(8, 16)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y = self.block(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class Decoder(nn.Module):
    """U-Net-style decoder: ConvTranspose2d, nearest and bilinear upsampling, ReLU6."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 6, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1)
        self.mix = nn.Conv2d(4, 4, 3, padding=1)
        self.out = nn.Conv2d(4, 2, 3, stride=4, padding=1)

    def forward(self, x):
        y = F.relu6(self.down(x))
        y = F.relu6(self.up(y))
        y = F.interpolate(y, scale_factor=2, mode="nearest")
        y = F.hardswish(self.mix(y))
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        return self.out(y)


x = torch.randn(8, 3, 16, 16)
np.save(os.path.join(OUT, "x.npy"), x.numpy())
names = []
for label, model in [("mobilenetish", MobileNetish()), ("decoder", Decoder())]:
    model.eval()
    with torch.no_grad():  # give BatchNorm non-trivial statistics
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    for opset in (9, 11, 13, 17):
        name = f"{label}_op{opset}"
        path = os.path.join(OUT, name + ".onnx")
        torch.onnx.export(model, (x,), path, opset_version=opset, dynamo=False,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        np.save(os.path.join(OUT, name + ".ort.npy"), session.run(None, {"x": x.numpy()})[0])
        names.append(name)
with open(os.path.join(OUT, "models.txt"), "w") as f:
    f.write("\n".join(names) + "\n")
