"""Where a CPU's cores go: large memory-bound kernels at several thread counts.

Run: ``python -m benchmarks.cpu_scaling [--threads 1,4,16] [--backends eager,inductor,braze]``

Takes: thread counts and backends. Gives: a markdown table: per kernel (16M-element fp32
pointwise, 8192×2048 reductions along either dimension and a softmax, a full reduction)
and per backend, the median ms of 30 calls at each thread count, and the minor page faults
per call (``getrusage``). Each (backend, thread count) runs in a fresh process
(``--one``), so no OpenMP pool, compile worker or allocator state carries over; the
process also lists the OpenMP runtimes it loaded (``/proc/self/maps``).
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import torch


def _relu(x):
    return (x + 1.0).relu()


def _sin_cos(x):
    return torch.sin(x) ** 2 + torch.cos(x) ** 2


def _var_mean_columns(x):
    return torch.var_mean(x, dim=0)


def _row_sums(x):
    return x.sum(1)


def _softmax(x):
    return torch.softmax(x, -1)


def _mean_square(x):
    return (x * x).mean()


KERNELS = {"(x + 1).relu()": (_relu, (1 << 24,)), "sin²+cos²": (_sin_cos, (1 << 24,)),
           "var_mean(x, 0)": (_var_mean_columns, (8192, 2048)), "x.sum(1)": (_row_sums, (8192, 2048)),
           "softmax": (_softmax, (8192, 2048)), "(x*x).mean()": (_mean_square, (1 << 24,))}


def _one(backend: str, threads: int) -> dict:
    torch.set_num_threads(threads)
    if backend == "braze":
        __import__("braze")  # registers the backend
    results = {}
    for name, (fn, shape) in KERNELS.items():
        x = torch.randn(shape)
        call = fn if backend == "eager" else torch.compile(fn, backend=backend)
        for _ in range(3):
            call(x)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        times = []
        for _ in range(30):
            t = time.perf_counter()
            call(x)
            times.append((time.perf_counter() - t) * 1e3)
        faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / 30
        results[name] = (statistics.median(times), faults)
    with open("/proc/self/maps") as f:
        runtimes = sorted({line.split()[-1] for line in f if "gomp" in line or "iomp" in line})
    return {"results": results, "runtimes": runtimes}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,4,16")
    parser.add_argument("--backends", default="eager,inductor,braze")
    parser.add_argument("--one", nargs=2, metavar=("BACKEND", "THREADS"), help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.one:
        print(json.dumps(_one(ns.one[0], int(ns.one[1]))))
        return
    counts, backends = [int(t) for t in ns.threads.split(",")], ns.backends.split(",")
    runs = {}
    for backend in backends:
        for threads in counts:
            done = subprocess.run([sys.executable, "-m", "benchmarks.cpu_scaling", "--one", backend, str(threads)],
                                  capture_output=True, text=True, check=True)
            runs[backend, threads] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"OpenMP runtimes loaded: {sorted({r for run in runs.values() for r in run['runtimes']})}\n")
    print("| kernel | backend | " + " | ".join(f"{t} thread{'s' if t > 1 else ''} ms (faults)" for t in counts) + " |")
    print("|---|---|" + "---|" * len(counts))
    for name in KERNELS:
        for backend in backends:
            cells = [f"{runs[backend, t]['results'][name][0]:.2f} ({runs[backend, t]['results'][name][1]:.0f})"
                     for t in counts]
            print(f"| {name} | {backend} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
