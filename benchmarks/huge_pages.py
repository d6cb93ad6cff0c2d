"""What a fresh CPU output costs to fault in, with and without transparent huge pages.

Run: ``python -m benchmarks.huge_pages [--threads N] [--mb 16,64,256]``

Takes: output sizes. Gives: a markdown table, per size, of the median time of a pointwise
kernel (``x * 2 + 1`` on float32, a fresh output each call) in eager, braze with
``huge_pages`` off and braze with it on (``runtime/pages.py``), with the page faults per
call of each (``getrusage``), and the machine's THP mode. Each braze column is its own
compile of the same function, in one process, timed in interleaved rounds
(``benchmarks.measure.time_cpu``).
"""
from __future__ import annotations

import argparse
import platform
import resource
import statistics

import torch

import braze
from benchmarks.measure import time_cpu


def _kernel(x):
    return x * 2 + 1


def _faults(fn, x, calls: int = 10) -> float:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn(x)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def _with_pages(advised: bool):
    compiled = braze.compile(_kernel)

    def call(x):
        with braze.config.patch(huge_pages=advised):
            return compiled(x)
    return call


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int)
    parser.add_argument("--mb", default="4,16,64,256", help="output sizes, MB")
    ns = parser.parse_args(argv)
    if ns.threads:
        torch.set_num_threads(ns.threads)
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        mode = f.read().strip()
    print(f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, THP: {mode}\n")
    print("| output | eager ms (faults) | braze, 4 KB pages | braze, huge pages |")
    print("|---|---|---|---|")
    calls = {"eager": _kernel, "braze 4K": _with_pages(False), "braze huge": _with_pages(True)}
    for mb in (int(m) for m in ns.mb.split(",")):
        sets = [torch.randn(mb << 18) for _ in range(2)]
        times = time_cpu(calls, sets, budget_s=1.0)
        cells = [f"{statistics.median(times[name]):.2f} ({_faults(fn, sets[0]):.0f})"
                 for name, fn in calls.items()]
        print(f"| {mb} MB | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
