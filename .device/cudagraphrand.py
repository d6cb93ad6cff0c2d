"""Dropout under braze's CUDA graphs: each replay draws new numbers, the same seed repeats them.
python .device/cudagraphrand.py"""
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, ".")
import braze  # noqa: E402

x = torch.randn(1 << 20, device="cuda")
f = torch.compile(lambda t: F.dropout(t * 2, 0.25, training=True) + 1, backend="braze",
                  options={"cudagraphs": True})
outs = [f(x).clone() for _ in range(4)]
torch.manual_seed(123)
a = f(x).clone()
torch.manual_seed(123)
b = f(x).clone()
kept = [(o != 1).float().mean().item() for o in outs]
print("kept fractions", [round(k, 4) for k in kept])
print("consecutive calls differ:", all(not torch.equal(outs[i], outs[i + 1]) for i in range(3)))
print("same seed repeats:", torch.equal(a, b))
