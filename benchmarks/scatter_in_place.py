"""Scatters into a graph input: what an in-place ``index_add_`` costs for k rows of n.

Run: ``python -m benchmarks.scatter_in_place [--device cpu] [--rows 200000] [--ks 16,1024,65536]
[--ops index_add_,index_put_,scatter_add_,index_copy_,view_index_add_] [--threads 2]``

Takes: the device, the rows ``n`` of a float32 ``n×64`` input, the numbers of rows ``k``
scattered, the in-place ops (``index_add_`` by default; ``view_index_add_`` adds ``k``
elements through the flat view, ``x.view(-1).index_add_(0, idx, src)``; ``slice_index_add_``
adds ``k`` rows into ``x[1:]``; ``slice_set`` assigns ``k`` rows, ``x[7:7 + k] = src``, as
a cache update does; ``gelu_index_add_`` and ``gelu_index_put_`` add values computed from
``src``, ``gelu(src) * 0.5``, a prologue braze fuses into the scatter) and on the CPU the
thread count (by default torch's). Gives: a markdown table: per op and ``k``, the median ms
of the update (``x.index_add_(0, idx, src)``, ...) in eager, Inductor and braze (each timed
in interleaved rounds, ``benchmarks.measure``), and braze's kernels. A scatter in place
writes ``k`` rows; a functional one copies the ``n`` rows of the input (``lower/in_place.py``).
The indices are random, with duplicates (``index_copy_``: distinct, as eager requires for a
defined result).
"""
from __future__ import annotations

import argparse
import statistics

import torch

import braze
from benchmarks.measure import sync, time_cpu, time_gpu, warm_up


def _index_add(x, idx, src):
    x.index_add_(0, idx, src)
    return x


def _index_put(x, idx, src):
    x.index_put_((idx,), src, accumulate=True)
    return x


def _scatter_add(x, idx, src):
    x.scatter_add_(0, idx[:, None].expand(-1, x.shape[1]), src)
    return x


def _index_copy(x, idx, src):
    x.index_copy_(0, idx, src)
    return x


def _index_add_flat(x, idx, src):
    x.view(-1).index_add_(0, idx, src)
    return x


def _slice_index_add(x, idx, src):
    x[1:].index_add_(0, idx, src)
    return x


def _slice_set(x, idx, src):
    x[7:7 + src.shape[0]] = src
    return x


def _gelu_index_add(x, idx, src):
    x.index_add_(0, idx, torch.nn.functional.gelu(src) * 0.5)
    return x


def _gelu_index_put(x, idx, src):
    x.index_put_((idx,), torch.nn.functional.gelu(src) * 0.5, accumulate=True)
    return x


OPS = {"index_add_": _index_add, "index_put_": _index_put, "scatter_add_": _scatter_add, "index_copy_": _index_copy,
       "view_index_add_": _index_add_flat, "slice_index_add_": _slice_index_add, "slice_set": _slice_set,
       "gelu_index_add_": _gelu_index_add, "gelu_index_put_": _gelu_index_put}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rows", type=int, default=200000)
    parser.add_argument("--ks", default="16,1024,65536")
    parser.add_argument("--ops", default="index_add_", help=f"comma-separated, of {', '.join(OPS)}")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    ns = parser.parse_args(argv)
    n, device = ns.rows, ns.device
    if ns.threads:
        torch.set_num_threads(ns.threads)
    print(f"{n}×64 float32 on {device}, {torch.get_num_threads()} threads\n")
    warm_up(device)  # the first rows of a table timed at idle clocks measured 2-5x slower
    print("| op | k rows | eager ms | Inductor ms | braze ms | braze kernels |")
    print("|---|---|---|---|---|---|")
    for op, k in ((op, int(v)) for op in ns.ops.split(",") for v in ns.ks.split(",")):
        _row(OPS[op], op, n, k, device)


def _row(fn, op: str, n: int, k: int, device: str) -> None:
    x = torch.randn(n, 64, device=device)
    if op == "view_index_add_":  # k elements of the flat view
        idx, src = torch.randint(0, n * 64, (k,), device=device), torch.randn(k, device=device)
    else:
        idx = torch.randint(0, n - 1, (k,), device=device) if op != "index_copy_" else \
            torch.randperm(n, device=device)[:k]
        src = torch.randn(k, 64, device=device)
    calls = {"eager": fn}
    for backend in ("inductor", "braze"):
        torch._dynamo.reset()
        calls[backend] = torch.compile(fn, backend=backend, dynamic=False)
        calls[backend](x, idx, src)
    sync(device)
    if device == "cpu":
        times = time_cpu({name: (lambda args, c=c: c(*args)) for name, c in calls.items()}, [(x, idx, src)])
        ms = {name: statistics.median(t) for name, t in times.items()}
    else:
        ms = {name: time_gpu(lambda args, c=c: c(*args), (x, idx, src)) for name, c in calls.items()}
    kernels = len(braze.explain(fn, x.clone(), idx, src).kernels)
    print(f"| {op} | {k} | {ms['eager']:.3f} | {ms['inductor']:.3f} | {ms['braze']:.3f} | {kernels} |", flush=True)


if __name__ == "__main__":
    main()
