"""Random numbers on the GPU: kernels that draw one number per element, eager vs Inductor
vs braze.

What it measures: ``dropout(x, 0.1)`` (training mode) of 64M bfloat16, ``x +
randn_like(x)`` and ``x * rand_like(x)`` of 64M float32: microseconds per call
(``triton.testing.do_bench`` median) and the bytes read and written as a percentage of
the device-to-device copy rate (``benchmarks.measure.copy_bandwidth``). braze draws
Philox4x32-10 inside the kernel, four numbers to a counter (``lower/random.py``); a
kernel that runs at the copy's rate pays nothing for its random numbers.

Device: an NVIDIA GPU (written for the H100).

    python -m benchmarks.random_numbers

Results and what braze takes from them: docs/benchmarks.md, "Random numbers".
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import braze  # noqa: F401 (registers the backend)
from benchmarks.measure import copy_bandwidth, gpu_cells

CASES = [  # label, function, dtype of the 64M-element input
    ("dropout(x, 0.1)", lambda x: F.dropout(x, 0.1, training=True), torch.bfloat16),
    ("x + randn_like(x)", lambda x: x + torch.randn_like(x), torch.float32),
    ("x * rand_like(x)", lambda x: x * torch.rand_like(x), torch.float32),
]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    copy = copy_bandwidth("cuda")
    print(f"{torch.cuda.get_device_name()}, copy {copy:.0f} GB/s (bytes read and written)")
    print("\n| case | eager us (% of copy) | Inductor us (%) | braze us (%) |")
    print("|---|---|---|---|")
    for label, fn, dtype in CASES:
        x = torch.randn(1 << 26, device="cuda", dtype=dtype)
        moved = 2 * x.numel() * x.element_size()
        cells = gpu_cells(fn, x, moved, copy)
        print(f"| {label} {str(dtype).removeprefix('torch.')} | {' | '.join(cells)} |", flush=True)
        del x


if __name__ == "__main__":
    main()
