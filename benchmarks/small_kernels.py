"""Small CPU kernels: pointwise math on tensors too small for threads.

Run: ``python -m benchmarks.small_kernels [--threads 1] [--budget 0.5]``

Takes: the thread count and the seconds of timed calls per compiler. Gives: a markdown
table with, per function and shape (each under braze's ``PARALLEL_MIN_WORK`` of 32768
elements, so its kernel runs in the calling thread), the median µs per call of eager,
Inductor and braze, timed in interleaved rounds (``benchmarks.measure.time_cpu``), after a
check against eager. What it shows: the vector code of kernels that run without threads,
and the per-call cost of each compiler's wrapper around them.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from benchmarks.measure import compare, summarize, time_cpu

CASES = {
    "sin²+cos²": (lambda x: torch.sin(x) ** 2 + torch.cos(x) ** 2, (64, 40)),
    "GELU": (F.gelu, (64, 256)),
    "silu(x) * x": (lambda x: F.silu(x) * x, (128, 128)),
    "tanh(x) + exp(-x)": (lambda x: torch.tanh(x) + torch.exp(-x), (32, 512)),
    "x * 2 + 1": (lambda x: x * 2 + 1, (128, 128)),
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--budget", type=float, default=0.5)
    ns = parser.parse_args(argv)
    torch.set_num_threads(ns.threads)
    print(f"cpu, {ns.threads} threads\n")
    print("| function | shape | eager µs | Inductor µs | braze µs |")
    print("|---|---|---|---|---|")
    for name, (fn, shape) in CASES.items():
        x = torch.randn(shape)
        calls = {"eager": fn, "inductor": torch.compile(fn), "braze": torch.compile(fn, backend="braze")}
        for backend in ("inductor", "braze"):
            ok, _, why = compare(calls[backend](x), fn(x))
            if not ok:
                raise SystemExit(f"{name}: {backend} differs from eager: {why}")
        times = time_cpu({k: (lambda args, f=f: f(*args)) for k, f in calls.items()}, [(x,)], ns.budget)
        us = {k: summarize(t)["median"] * 1000 for k, t in times.items()}
        print(f"| {name} | {'×'.join(map(str, shape))} | {us['eager']:.1f} | {us['inductor']:.1f} | "
              f"{us['braze']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
