"""Timing and checking, for CPU and GPU.

Takes: callables that run one step of a workload. Gives:
- ``time_cpu``: per-call wall-clock times (ms) of several callables, measured in
  interleaved rounds (so load from other processes hits each one alike), each
  call on the next of several input sets (rotated so that the inputs of
  consecutive calls are not already in the CPU caches);
- ``time_gpu``: ``triton.testing.do_bench`` median (CUDA events; do_bench clears
  the L2 cache before each call);
- ``warm_up``: a second of back-to-back small kernels before a table of microsecond
  rows, so that its first rows are not timed on a GPU (and host) still at idle clocks;
- ``copy_bandwidth``: device-to-device copy GB/s (bytes read + written), the
  yardstick for a memory-bound kernel;
- ``run_on_clone``: one call of a workload on copies of its inputs, for checking;
- ``compare``: the largest difference from eager relative to eager's largest
  value, and whether it is within the tolerance of the dtype.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch
import torch.utils._pytree as pytree

ROTATE_BYTES = 64 << 20  # rotate input sets until they fill twice a 32 MiB L3 cache
MAX_SETS = 8


def input_set_count(set_bytes: int) -> int:
    return max(1, min(MAX_SETS, math.ceil(ROTATE_BYTES / max(set_bytes, 1))))


def sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_cpu(calls: dict, input_sets: list, budget_s: float = 1.0, rounds: int = 10,
             min_calls: int = 30, max_calls: int = 3000) -> dict:
    """``calls``: name -> f(args). Returns name -> list of per-call ms."""
    estimate = {}
    for name, call in calls.items():  # warm-up, and a first estimate of each call's cost
        t = time.perf_counter()
        for args in input_sets * 2:
            call(args)
        estimate[name] = (time.perf_counter() - t) / (2 * len(input_sets))
    per_round = {name: max(math.ceil(min_calls / rounds),
                           min(max_calls // rounds, math.ceil(budget_s / rounds / max(est, 1e-7))))
                 for name, est in estimate.items()}
    times: dict = {name: [] for name in calls}
    k = 0
    for _ in range(rounds):
        for name, call in calls.items():
            for _ in range(per_round[name]):
                args = input_sets[k % len(input_sets)]
                k += 1
                t = time.perf_counter()
                call(args)
                times[name].append((time.perf_counter() - t) * 1000)
    return times


CLOCK_WARM_S = 0.3  # busy GPU time before each timing


def time_gpu(call: Callable, args) -> float:
    """Median ms of ``call(args)`` through ``triton.testing.do_bench``, after ``CLOCK_WARM_S``
    of busy GPU: a compile leaves it idle for seconds, and a loop of host-bound tiny kernels
    does not bring its clocks back up (on the H200 a one-row scatter timed right after a
    compile took 13-36 us, and 4 us after a cached one)."""
    from triton.testing import do_bench
    warm_up("cuda", CLOCK_WARM_S)
    return do_bench(lambda: call(args), warmup=25, rep=200, return_mode="median")


def warm_up(device: str, seconds: float = 1.0) -> None:
    """Keep the device busy with small kernels for ``seconds`` (nothing on the CPU)."""
    if torch.device(device).type != "cuda":
        return
    x, end = torch.ones(1 << 20, device=device), time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(100):
            x.mul_(1.0)
        torch.cuda.synchronize()


def copy_bandwidth(device: str, nbytes: int = 1 << 30) -> float:
    """GB/s of ``dst.copy_(src)`` on the device, counting bytes read and written."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    if torch.device(device).type == "cuda":
        ms = time_gpu(lambda a: dst.copy_(a), src)
    else:
        ms = statistics.median(time_cpu({"copy": lambda a: dst.copy_(a)}, [src], budget_s=0.5)["copy"])
    return 2 * nbytes / (ms * 1e-3) / 1e9


def summarize(times: list) -> dict:
    q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return {"median": statistics.median(times), "p25": q[0], "p75": q[2], "min": min(times), "n": len(times)}


def clone_tree(tree):
    return pytree.tree_map(lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t, tree)


def run_on_clone(case, fn, args):
    """``case.run(fn, args)`` on a copy of ``args``: its result (and the arguments after
    the call, where the case mutates them), copied."""
    args = clone_tree(args)
    out = case.run(fn, args)
    return clone_tree((out, args) if case.mutates else out)


TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def compare(actual, expected) -> tuple[bool, float, str]:
    """(ok, worst relative error, message). Integers and booleans must match exactly."""
    a_leaves, e_leaves = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    if len(a_leaves) != len(e_leaves):
        return False, math.inf, f"{len(a_leaves)} results, eager gave {len(e_leaves)}"
    ok, worst, notes = True, 0.0, []
    for k, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if not isinstance(e, torch.Tensor):
            continue
        if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
            return False, math.inf, f"result {k}: {_describe(a)} vs eager {_describe(e)}"
        if not e.dtype.is_floating_point:
            if not torch.equal(a, e):
                ok = False
                notes.append(f"result {k}: {int((a != e).sum())} integer elements differ")
            continue
        if not torch.equal(a.isnan(), e.isnan()):
            ok = False
            notes.append(f"result {k}: NaNs in different places")
        a64, e64 = a.double().nan_to_num(), e.double().nan_to_num()
        scale = e64.abs().max().item() if e64.numel() else 0.0
        err = (a64 - e64).abs().max().item() / max(scale, 1e-30) if e64.numel() else 0.0
        worst = max(worst, err)
        if err > TOLERANCE.get(e.dtype, 1e-4):
            ok = False
            notes.append(f"result {k} ({e.dtype}): max error {err:.2e} of its largest value")
    return ok, worst, "; ".join(notes)


def _describe(t) -> str:
    return f"{tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__


def gpu_cells(fn, x, moved: int, copy: float) -> list:
    """Eager, Inductor and braze on one CUDA input: ``"us (% of copy)"`` each, for ``moved``
    bytes at ``copy`` GB/s."""
    cells = []
    for compiled in (fn, torch.compile(fn), torch.compile(fn, backend="braze")):
        compiled(x)
        us = time_gpu(compiled, x) * 1e3
        cells.append(f"{us:.1f} ({moved / us / 1e3 / copy * 100:.0f} %)")
    return cells
