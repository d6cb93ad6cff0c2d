"""How many programs a split reduction launches, on the GPU: braze's split column
reductions compiled with ``shapes.SPLIT_FILLS`` at 2 (braze's value), 4, 8 and 16, next
to Inductor.

What it measures: a split reduction cuts each block of columns into row chunks, one
program each, and merges the partials in a second kernel; ``SPLIT_FILLS`` times the
device's fill of programs is how many it aims for. More programs mean more loads in
flight but more partials to write and merge. Per case (``var_mean`` and ``sum`` over the
rows of bfloat16 and float32 8192x8192, BatchNorm-like ``var_mean`` of 200704x64 and
12544x256 bfloat16, a bfloat16 32768x1024 ``sum``): microseconds per call
(``triton.testing.do_bench`` median) and the bytes read as a percentage of the copy rate
(``benchmarks.measure.copy_bandwidth``). The constant is set on the module for the
experiment (braze compiled without its graph and trace caches) and restored after.

Device: an NVIDIA GPU (written for the H100).

    python -m benchmarks.split_fills

Results and what braze takes from them: docs/benchmarks.md, "Reductions by layout".
"""
from __future__ import annotations

import argparse

import torch

import braze
import braze.codegen.triton.shapes as shapes
from benchmarks.measure import copy_bandwidth, time_gpu

FILLS = (2, 4, 8, 16)
OPS = {"var_mean": lambda x: torch.var_mean(x, 0), "sum": lambda x: x.sum(0)}
CASES = [  # rows, columns, dtype, op
    (8192, 8192, torch.bfloat16, "var_mean"), (8192, 8192, torch.float32, "var_mean"),
    (8192, 8192, torch.bfloat16, "sum"), (8192, 8192, torch.float32, "sum"),
    (200704, 64, torch.bfloat16, "var_mean"), (12544, 256, torch.bfloat16, "var_mean"),
    (32768, 1024, torch.bfloat16, "sum"),
]


def time_braze(fn, x, fills: int) -> tuple:
    """(ms, kernel shapes) of ``fn(x)`` compiled by braze with ``SPLIT_FILLS = fills``."""
    built = shapes.SPLIT_FILLS
    shapes.SPLIT_FILLS = fills
    try:
        torch._dynamo.reset()
        with braze.config.patch(graph_cache=False, trace_cache=False):
            kernels = "+".join(k.shape for k in braze.explain(fn, x).kernels)
            compiled = torch.compile(fn, backend="braze")
            compiled(x)
        return time_gpu(compiled, x), kernels
    finally:
        shapes.SPLIT_FILLS = built


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    copy = copy_bandwidth("cuda")
    print(f"{torch.cuda.get_device_name()}, copy {copy:.0f} GB/s; braze's SPLIT_FILLS is {shapes.SPLIT_FILLS}")
    print("\n| case | " + " | ".join(f"fills {f} us (%)" for f in FILLS) + " | Inductor us (%) | braze kernels |")
    print("|---|" + "---|" * (len(FILLS) + 2))
    for rows, cols, dtype, op in CASES:
        fn = OPS[op]
        x = torch.randn(rows, cols, device="cuda").to(dtype)
        reads = x.numel() * x.element_size()
        cells, kernels = [], ""
        for fills in FILLS:
            ms, kernels = time_braze(fn, x, fills)
            cells.append(f"{ms * 1e3:.1f} ({reads / ms / 1e6 / copy * 100:.0f} %)")
        torch._dynamo.reset()
        inductor = torch.compile(fn)
        inductor(x)
        ms = time_gpu(inductor, x)
        cells.append(f"{ms * 1e3:.1f} ({reads / ms / 1e6 / copy * 100:.0f} %)")
        print(f"| {op} {rows}x{cols} {str(dtype).removeprefix('torch.')} | {' | '.join(cells)} | {kernels} |",
              flush=True)
        del x


if __name__ == "__main__":
    main()
