"""What a compile leaves running: a model's per-call time right after its first compiled call.

Run: ``python -m benchmarks.after_compile --backend braze --model gpt2 [--seconds 8]`` (a
CUDA device; run it twice with one ``BRAZE_CACHE_DIR`` for a cold and a warm compile).

Takes: a model of ``benchmarks.model_zoo`` (inference, bf16 autocast, random weights) and a
backend. Gives: the first compiled call's seconds, then per window of 0.25 s the time per call
(the calls of a window issued back to back, one synchronization at its end) and the CPU seconds
that every descendant process of this one (compile workers) used in that window, read from
``/proc``: work left behind by a compile shows there, and in the first windows' call times.
"""
from __future__ import annotations

import argparse
import glob
import os
import time

import torch

from benchmarks.model_zoo import Step, build, case

WINDOW_S = 0.25


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="braze")
    parser.add_argument("--model", default="gpt2")
    parser.add_argument("--seconds", type=float, default=8.0)
    ns = parser.parse_args(argv)
    import braze  # noqa: F401  (registers the backend)
    model_case = case(ns.model, False)
    step = Step(model_case, build(model_case, "cuda"), "infer", "cuda")
    step(step.model)
    torch.cuda.synchronize()
    fn = torch.compile(step.model, backend=ns.backend)
    start = time.perf_counter()
    step(fn)
    torch.cuda.synchronize()
    print(f"{ns.backend} {ns.model}: first call {time.perf_counter() - start:.2f} s", flush=True)
    start, (cpu, _) = time.perf_counter(), _descendants_cpu()
    while time.perf_counter() - start < ns.seconds:
        window, calls = time.perf_counter(), 0
        while time.perf_counter() - window < WINDOW_S:
            step(fn)
            calls += 1
        torch.cuda.synchronize()
        ms = (time.perf_counter() - window) / calls * 1e3
        now, count = _descendants_cpu()
        print(f"  t={time.perf_counter() - start:5.2f} s  {ms:6.2f} ms a call  "
              f"descendants' CPU {now - cpu:5.2f} s ({count} processes)", flush=True)
        cpu = now


def _descendants_cpu() -> tuple:
    """(user + system CPU seconds of every descendant process, their count)."""
    stats = {}
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(path).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(path.split("/")[2])] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    family, grown = {os.getpid()}, True
    while grown:
        more = {pid for pid, (parent, _) in stats.items() if parent in family} - family
        family, grown = family | more, bool(more)
    family.discard(os.getpid())
    return sum(stats[pid][1] for pid in family if pid in stats), len(family)


if __name__ == "__main__":
    main()
