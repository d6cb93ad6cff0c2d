"""Scatters into a graph input: what an in-place ``index_add_`` costs for k rows of n.

Run: ``python -m benchmarks.scatter_in_place [--device cpu] [--rows 200000] [--ks 16,1024,65536]``

Takes: the device, the rows ``n`` of a float32 ``n×64`` input and the numbers of rows ``k``
scattered. Gives: a markdown table: per ``k``, the median ms of ``x.index_add_(0, idx, src)``
in eager, Inductor and braze (each timed in interleaved rounds, ``benchmarks.measure``), and
braze's kernels. A scatter in place writes ``k`` rows; a functional one copies the ``n`` rows
of the input (``lower/in_place.py``).
"""
from __future__ import annotations

import argparse
import statistics

import torch

import braze
from benchmarks.measure import sync, time_cpu, time_gpu


def _index_add(x, idx, src):
    x.index_add_(0, idx, src)
    return x


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rows", type=int, default=200000)
    parser.add_argument("--ks", default="16,1024,65536")
    ns = parser.parse_args(argv)
    n, device = ns.rows, ns.device
    print(f"{n}×64 float32 on {device}, {torch.get_num_threads()} threads\n")
    print("| k rows | eager ms | Inductor ms | braze ms | braze kernels |")
    print("|---|---|---|---|---|")
    for k in (int(v) for v in ns.ks.split(",")):
        x = torch.randn(n, 64, device=device)
        idx = torch.randint(0, n, (k,), device=device)
        src = torch.randn(k, 64, device=device)
        calls = {"eager": _index_add}
        for backend in ("inductor", "braze"):
            torch._dynamo.reset()
            calls[backend] = torch.compile(_index_add, backend=backend, dynamic=False)
            calls[backend](x, idx, src)
        sync(device)
        if device == "cpu":
            times = time_cpu({name: (lambda args, c=c: c(*args)) for name, c in calls.items()}, [(x, idx, src)])
            ms = {name: statistics.median(t) for name, t in times.items()}
        else:
            ms = {name: time_gpu(lambda args, c=c: c(*args), (x, idx, src)) for name, c in calls.items()}
        kernels = len(braze.explain(_index_add, x.clone(), idx, src).kernels)
        print(f"| {k} | {ms['eager']:.3f} | {ms['inductor']:.3f} | {ms['braze']:.3f} | {kernels} |")


if __name__ == "__main__":
    main()
