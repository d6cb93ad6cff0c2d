"""Per-call time with symbolic sizes against static sizes, every workload of ``workloads.py``.

Takes (command line): ``--device cpu|cuda``, ``--only NAMES``, ``--budget S`` (CPU seconds
per compiler). Gives: a Markdown table on stdout: per workload the median per-call time
of Inductor and braze, each compiled with static sizes and with ``dynamic=True`` (every
size symbolic: one compile serves all sizes), the ratio dynamic / static of each, how
many size classes braze compiled, and the geometric mean of the ratios.

Timing as ``benchmarks.run``: interleaved rounds over rotated input sets on the CPU,
``do_bench`` medians on the GPU; every compiled result is checked against eager first.
"""
from __future__ import annotations

import argparse
import math
import sys

import torch

from benchmarks.measure import compare, input_set_count, summarize, sync, time_cpu, time_gpu, warm_up
from benchmarks.workloads import WORKLOADS, tensor_bytes


def compiled(case, compiler: str, dynamic: bool):
    if compiler == "inductor":
        return torch.compile(case.fn, dynamic=dynamic)
    return torch.compile(case.fn, backend="braze", dynamic=dynamic)


def run_workload(w, device: str, budget: float) -> dict:
    import braze
    case = w.build(device)
    first = case.make_inputs(0)
    expected = case.run(case.fn, first)
    fns, checks = {}, {}
    with braze.backend.Recording() as recording:
        for compiler in ("inductor", "braze"):
            for dynamic in (False, True):
                name = f"{compiler}{' dynamic' if dynamic else ''}"
                fn = compiled(case, compiler, dynamic)
                try:
                    actual = case.run(fn, first)
                    checks[name] = compare(actual, case.reference(first, actual) if case.reference else expected)
                    fns[name] = fn
                except Exception as exc:  # a crash is a result too
                    checks[name] = (False, math.inf, f"crashed: {type(exc).__name__}: {exc}"[:200])
        calls = {name: (lambda args, f=f: case.run(f, args)) for name, f in fns.items()}
        if torch.device(device).type == "cuda":
            times = {name: time_gpu(call, first) for name, call in calls.items()}
        else:
            sets = [first] + [case.make_inputs(s) for s in range(1, input_set_count(tensor_bytes(first)))]
            times = {name: summarize(t)["median"] for name, t in time_cpu(calls, sets, budget).items()}
        sync(device)
    classes = sum(1 for g in recording.graphs if getattr(g, "sizes", None) is not None)
    return {"name": w.name, "times": times, "checks": checks, "classes": classes}


def ratio(row: dict, compiler: str):
    t = row["times"]
    if compiler in t and f"{compiler} dynamic" in t:
        return t[f"{compiler} dynamic"] / t[compiler]
    return None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", default="")
    parser.add_argument("--budget", type=float, default=1.0)
    ns = parser.parse_args(argv)
    torch._dynamo.config.cache_size_limit = 256
    warm_up(ns.device)
    rows = []
    for w in WORKLOADS:
        if ns.only and not any(s.strip().lower() in w.name.lower() for s in ns.only.split(",")):
            continue
        print(f"[dynamic] {w.name} ...", file=sys.stderr, flush=True)
        rows.append(run_workload(w, ns.device, ns.budget))
    print("| workload | inductor ms | inductor dynamic ms | ratio | braze ms | braze dynamic ms | ratio "
          "| braze classes | checks |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = r["times"]
        cells = [f"{t[k]:.4f}" if k in t else "—" for k in ("inductor", "inductor dynamic", "braze", "braze dynamic")]
        ri, rb = (f"{x:.3f}" if x else "—" for x in (ratio(r, "inductor"), ratio(r, "braze")))
        bad = [f"{k}: {c[2]}" for k, c in r["checks"].items() if not c[0]]
        print(f"| {r['name']} | {cells[0]} | {cells[1]} | {ri} | {cells[2]} | {cells[3]} | {rb} | "
              f"{r['classes']} | {'; '.join(bad) or 'ok'} |")
    for compiler in ("inductor", "braze"):
        ratios = [x for x in (ratio(r, compiler) for r in rows) if x]
        if ratios:
            geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            print(f"\n{compiler}: dynamic / static per-call time, geomean {geo:.3f}, worst {max(ratios):.3f} "
                  f"({len(ratios)} workloads)")


if __name__ == "__main__":
    main()
