"""Reductions on a drawn grid: eager, Inductor and braze side by side, in one run.

Run: ``python -m benchmarks.sweep --device cuda [--seed 1] [--points 60] [--elements 16777216]
[--json FILE] [--max-minutes M]``; ``python -m benchmarks.sweep_plot FILE DIR`` draws the
heat-maps from the JSON.

Takes: the points of ``benchmarks.sweep_grid`` (seeded: every seed is a new sweep).
Gives: a markdown table on stdout: per point the microseconds of eager, Inductor and braze, the
GB/s each reaches as a share of the device's copy bandwidth measured in the same run (on the
CPU: ms only), braze's speed-up over Inductor, whether each compiled result matches eager
(``benchmarks.measure.compare``) and the cold compile seconds of Inductor and braze; then the
summary the sweep is judged by: the share of points where braze ≥ Inductor, the lowest ratio,
the geomean, and the points moving ≥ 64 MB that are under 85 % of the copy bandwidth.
Each point runs after ``torch._dynamo.reset()``, so no point inherits another's compiled code.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time

import torch

from benchmarks.measure import compare, copy_bandwidth, sync, time_cpu, time_gpu
from benchmarks.run import private_caches
from benchmarks.sweep_grid import build, draw

COMPILERS = ("eager", "inductor", "braze")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--points", type=int, default=60)
    parser.add_argument("--elements", type=int, default=1 << 24, help="input elements per point (about)")
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--max-minutes", type=float, default=1e9, help="stop drawing new points after this")
    ns = parser.parse_args(argv)
    import braze  # noqa: F401  (registers the backend)
    # fresh caches: cold compiles, and no Inductor kernel from a run at another thread count
    # (Inductor's CPU kernels keep the count they were compiled for)
    private_caches(tempfile.mkdtemp(prefix="braze-sweep-"))
    copy = copy_bandwidth(ns.device) if ns.device != "cpu" else None
    start, rows = time.time(), []
    for point in draw(ns.seed, ns.points, ns.elements):
        if time.time() - start > ns.max_minutes * 60:
            print(f"[sweep] time is up after {len(rows)} points", file=sys.stderr)
            break
        print(f"[sweep] {point.name}", file=sys.stderr, flush=True)
        rows.append(measure(point, ns.device, copy))
    print(render(rows, ns, copy))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"device": _device_name(ns.device), "copy_gbs": copy, "rows": rows}, f, indent=1)


def measure(point, device: str, copy) -> dict:
    """One point: results checked against eager, cold compile seconds, run times."""
    fn, args, moved = build(point, device)
    row = {"name": point.name, "kind": point.kind, "axes": point.axes, "layout": point.layout,
           "dtype": str(point.dtype).replace("torch.", ""), "reduced": point.reduced, "kept": point.kept,
           "moved": moved}
    expected = fn(*args)
    torch._dynamo.reset()
    calls = {"eager": fn}
    for name, options in (("inductor", {}), ("braze", {"backend": "braze"})):
        compiled = torch.compile(fn, **options)
        t = time.perf_counter()
        try:
            actual = compiled(*args)
            sync(device)
        except Exception as exc:  # reported in the table, never hidden
            row[f"{name}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            continue
        row[f"{name}_compile_s"] = time.perf_counter() - t
        ok, _, note = compare(actual, expected)
        row[f"{name}_ok"], row[f"{name}_note"] = ok, note
        calls[name] = compiled
    for name, us in _times(calls, args, device).items():
        row[f"{name}_us"] = us
        if copy:
            row[f"{name}_bw"] = moved / (us * 1e-6) / 1e9 / copy
    return row


def _times(calls: dict, args, device: str) -> dict:
    if device == "cpu":
        per_call = time_cpu({n: (lambda a, c=c: c(*a)) for n, c in calls.items()}, [args], budget_s=0.3)
        return {n: statistics.median(v) * 1e3 for n, v in per_call.items()}
    return {n: time_gpu(lambda a, c=c: c(*a), args) * 1e3 for n, c in calls.items()}


# ----------------------------------------------------------------------------- report

def render(rows: list, ns, copy) -> str:
    lines = [f"`python -m benchmarks.sweep --device {ns.device} --seed {ns.seed} --points {ns.points} "
             f"--elements {ns.elements}` on {_device_name(ns.device)}, torch {torch.__version__}"
             + (f", copy bandwidth {copy:.0f} GB/s" if copy else f", {torch.get_num_threads()} threads"), ""]
    unit = "us (% copy)" if copy else "us"
    lines += [f"| point | MB | eager {unit} | Inductor {unit} | braze {unit} | braze / Inductor | "
              "matches eager (I, b) | compile s (I, b) |", "|---|---|---|---|---|---|---|---|"]
    lines += [_row(r, copy) for r in rows]
    lines += ["", *summary(rows)]
    problems = [f"- {r['name']}: " + "; ".join(
        f"{n} {r.get(n + '_error') or r.get(n + '_note')}" for n in ("inductor", "braze")
        if r.get(n + "_error") or not r.get(n + "_ok", True)) for r in rows
        if any(r.get(n + "_error") or not r.get(n + "_ok", True) for n in ("inductor", "braze"))]
    if problems:
        lines += ["", "Results that differ from eager or failed:", *problems]
    return "\n".join(lines)


def _row(r: dict, copy) -> str:
    def cell(name):
        us = r.get(f"{name}_us")
        if us is None:
            return "failed"
        return f"{us:.1f} ({r[name + '_bw'] * 100:.0f} %)" if copy else f"{us:.1f}"
    ratio = speedup(r)
    marks = " ".join("✓" if r.get(f"{n}_ok") else "✗" for n in ("inductor", "braze"))
    compile_s = " / ".join(f"{r[n + '_compile_s']:.1f}" if n + "_compile_s" in r else "-"
                           for n in ("inductor", "braze"))
    return (f"| {r['name']} | {r['moved'] / 1e6:.1f} | {cell('eager')} | {cell('inductor')} | {cell('braze')} | "
            f"{'-' if ratio is None else f'{ratio:.2f}×'} | {marks} | {compile_s} |")


def speedup(r: dict):
    """Inductor's time over braze's (above 1: braze is faster)."""
    if r.get("inductor_us") is None or r.get("braze_us") is None:
        return None
    return r["inductor_us"] / r["braze_us"]


def summary(rows: list) -> list:
    ratios = [s for s in (speedup(r) for r in rows) if s is not None]
    if not ratios:
        return ["No point ran under both compilers."]
    slow = [r for r in rows if r["moved"] >= 64e6 and r.get("braze_bw") is not None and r["braze_bw"] < 0.85]
    compile_i = [r["inductor_compile_s"] for r in rows if "inductor_compile_s" in r]
    compile_b = [r["braze_compile_s"] for r in rows if "braze_compile_s" in r]
    lines = [f"- braze ≥ Inductor on {sum(s >= 1 for s in ratios)} of {len(ratios)} points "
             f"({100 * sum(s >= 1 for s in ratios) / len(ratios):.0f} %); ≥ 0.95× on "
             f"{sum(s >= 0.95 for s in ratios)}; lowest {min(ratios):.2f}×; geomean "
             f"{math.exp(statistics.fmean(math.log(s) for s in ratios)):.2f}×",
             f"- cold compile, median per point: Inductor {statistics.median(compile_i):.2f} s, "
             f"braze {statistics.median(compile_b):.2f} s" if compile_i and compile_b else "- compile: -"]
    if any(r.get("braze_bw") is not None for r in rows):
        lines.append(f"- points moving ≥ 64 MB under 85 % of copy bandwidth in braze: {len(slow)}"
                     + "".join(f"\n  - {r['name']}: braze {r['braze_bw'] * 100:.0f} %, Inductor "
                               f"{r.get('inductor_bw', 0) * 100:.0f} %" for r in slow))
    return lines


def _device_name(device: str) -> str:
    if device == "cpu":
        import platform
        return platform.processor() or platform.machine()
    return torch.cuda.get_device_name(torch.device(device))


if __name__ == "__main__":
    main()
