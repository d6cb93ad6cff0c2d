"""``braze.profile`` against the benchmark tables' own timing, one process, same inputs.

Run: ``python -m benchmarks.profile_agreement [--device cuda] [--workloads "softmax,SwiGLU"]``

Takes: workloads of ``benchmarks/workloads.py`` that are one call of a function (no training
step), by name; by default LayerNorm+GELU, softmax, cross-entropy 32k vocab and SwiGLU.
Gives, per workload: braze's time per call as ``benchmarks.run`` measures it (the median of
``triton.testing.do_bench`` on a GPU, of ``measure.time_cpu`` on the CPU), ``braze.profile``'s
time per run (CUDA events around each run; wall time on the CPU) and the time its kernels
took, with each of the two as a share of the benchmark's number. A markdown table on stdout.

Where the two differ: ``do_bench`` clears the L2 cache between calls and takes the median,
``braze.profile`` times back-to-back runs and takes the mean; the kernel sum leaves out
extern calls and the wrapper's own host work.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.measure import time_cpu, time_gpu
from benchmarks.workloads import by_name

DEFAULT = ("LayerNorm+GELU", "softmax", "cross-entropy 32k vocab", "SwiGLU")


def benchmark_ms(fn, args, device: str) -> float:
    """braze's ms per call, measured as ``benchmarks.run`` measures it."""
    if device == "cuda":
        return time_gpu(lambda a: fn(*a), args)
    return statistics.median(time_cpu({"braze": lambda a: fn(*a)}, [args], budget_s=1.0)["braze"])


def agreement(name: str, device: str) -> dict:
    import braze
    case = by_name(name).build(device)
    if case.step is not None:
        raise SystemExit(f"{name}: a training step; braze.profile times one call of a function")
    args = case.make_inputs(0)
    torch._dynamo.reset()
    bench = benchmark_ms(torch.compile(case.fn, backend="braze"), args, device)
    torch._dynamo.reset()
    profile = braze.profile(case.fn, *args).profile
    in_kernels = sum(k.ms for k in profile.kernels)
    return {"name": name, "shape": case.shape, "bench": bench, "run": profile.run_ms,
            "kernels": in_kernels, "count": len(profile.kernels)}


def table(rows: list, device: str) -> str:
    lines = [f"braze.profile against the benchmark's timing ({device})", "",
             "| workload | shape | benchmark ms | profile ms/run | profile in kernels ms | run / benchmark "
             "| kernels / benchmark |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['shape']} | {r['bench']:.4f} | {r['run']:.4f} | {r['kernels']:.4f} "
                     f"({r['count']}) | {r['run'] / r['bench']:.3f} | {r['kernels'] / r['bench']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--workloads", default=",".join(DEFAULT), help="comma-separated workload names")
    ns = p.parse_args(argv)
    rows = [agreement(name.strip(), ns.device) for name in ns.workloads.split(",")]
    print(table(rows, ns.device))


if __name__ == "__main__":
    main()
