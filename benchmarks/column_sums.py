"""Column reductions on the GPU: ``x.sum(0)`` and ``torch.var_mean(x, 0)`` over several
shapes, float32 and bfloat16, eager vs Inductor vs braze.

What it measures: per shape, each compiler's time (``triton.testing.do_bench`` median,
the L2 cleared before each call) and the bytes it must read over that time as a
percentage of the device-to-device copy rate (a 1 GiB copy, bytes read and written, as in
``benchmarks.run``'s tables); for braze also the kernel shapes it chose (``column``, or
``split``: row chunks over several programs, the partials merged in order by a second
kernel). The shapes are where braze's column rules change: few or many blocks of 64
columns against the SM count (``legality.few_programs``: split or not), half-width inputs
(``shapes._half_width``: larger tiles), and Welford's ``var_mean``.
A column reduction only reads: its ceiling is a read-only kernel's rate, a few points
above 90 % of the copy on the H100.

Device: an NVIDIA GPU (written for the H100).

    python -m benchmarks.column_sums
    python -m benchmarks.column_sums --only bfloat16

Results and what braze takes from them: docs/benchmarks.md, "Reductions by layout".
"""
from __future__ import annotations

import argparse

import torch

import braze
from benchmarks.measure import copy_bandwidth, gpu_cells

OPS = {"sum": lambda x: x.sum(0), "var_mean": lambda x: torch.var_mean(x, 0)}
CASES = [  # rows, columns, dtype, op
    (8192, 8192, torch.float32, "sum"), (16384, 8192, torch.float32, "sum"),
    (32768, 5120, torch.float32, "sum"), (2048, 16384, torch.float32, "sum"),
    (4096, 32000, torch.float32, "sum"), (65536, 1024, torch.float32, "sum"),
    (8192, 8192, torch.bfloat16, "sum"), (16384, 4096, torch.bfloat16, "sum"),
    (32768, 1024, torch.bfloat16, "sum"), (4096, 16384, torch.bfloat16, "sum"),
    (2048, 16384, torch.bfloat16, "sum"), (4096, 32000, torch.bfloat16, "sum"),
    (16384, 16384, torch.bfloat16, "sum"),
    (8192, 8192, torch.float32, "var_mean"), (8192, 8192, torch.bfloat16, "var_mean"),
]


def braze_shapes(fn, x) -> str:
    """The kernel shapes braze compiles ``fn(x)`` to, e.g. ``split+split``."""
    with braze.config.patch(graph_cache=False, trace_cache=False):
        return "+".join(k.shape for k in braze.explain(fn, x).kernels)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated words: run the cases whose label holds one")
    args = parser.parse_args(argv)
    copy = copy_bandwidth("cuda")
    print(f"{torch.cuda.get_device_name()}, copy {copy:.0f} GB/s (bytes read and written)")
    print("\n| case | eager us (%) | Inductor us (%) | braze us (%) | braze kernels |")
    print("|---|---|---|---|---|")
    words = [w for w in args.only.split(",") if w]
    for rows, cols, dtype, op in CASES:
        label = f"{op} {rows}x{cols} {str(dtype).removeprefix('torch.')}"
        if words and not any(w in label for w in words):
            continue
        fn = OPS[op]
        x = torch.randn(rows, cols, device="cuda").to(dtype)
        reads = x.numel() * x.element_size()
        torch._dynamo.reset()
        cells = gpu_cells(fn, x, reads, copy)
        print(f"| {label} | {' | '.join(cells)} | {braze_shapes(fn, x)} |", flush=True)
        del x


if __name__ == "__main__":
    main()
