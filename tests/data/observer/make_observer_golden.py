"""Golden values for tests/unit/test_observer.cpp, produced by PyTorch's own observers.

Run from the repository root with the bootstrap venv:
    ~/.cache/bitlens/venv/bin/python tests/data/observer/make_observer_golden.py
Writes, next to this script:
    batches.npy                  float32 [6, 257]: six calibration batches, fed in order
    minmax.npy                   float32 [2]: MinMaxObserver's (min_val, max_val)
    moving_average_0.01.npy      float32 [2]: MovingAverageMinMaxObserver(averaging_constant=0.01)
    moving_average_0.3.npy       float32 [2]: MovingAverageMinMaxObserver(averaging_constant=0.3)
"""
import os
import warnings

import numpy as np
import torch
from torch.ao.quantization.observer import MinMaxObserver, MovingAverageMinMaxObserver

warnings.filterwarnings("ignore")  # torch.ao is deprecated upstream; its numerics are the reference
here = os.path.dirname(os.path.abspath(__file__))
g = torch.Generator().manual_seed(20240603)
# Batches whose extremes move both ways, so both the running min/max and the average are tested.
scales = [1.0, 3.0, 0.5, 2.0, 7.0, 0.25]
shifts = [0.0, 1.0, -2.0, 0.5, 0.0, 3.0]
batches = torch.stack([torch.randn(257, generator=g) * s + t for s, t in zip(scales, shifts)])
np.save(os.path.join(here, "batches.npy"), batches.numpy().astype(np.float32))


def run(obs):
    for b in batches:
        obs(b)
    return np.array([obs.min_val.item(), obs.max_val.item()], dtype=np.float32)


np.save(os.path.join(here, "minmax.npy"), run(MinMaxObserver()))
for c in (0.01, 0.3):
    np.save(os.path.join(here, f"moving_average_{c}.npy"),
            run(MovingAverageMinMaxObserver(averaging_constant=c)))
