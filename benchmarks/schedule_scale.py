"""How braze's front half scales: lower, inline and schedule a ~5,000-node graph.

Run: ``python -m benchmarks.schedule_scale [--blocks N] [--repeat R] [--profile] [--out docs/benchmarks.md]``

Takes: nothing. Builds a realistic ATen FX graph with ``make_fx`` through
braze's decomposition table (``braze.decompositions.table()``), fake tensors,
from a deep stack of transformer-like blocks: LayerNorm, casts to bf16 and back,
a matmul (an ATen call, so its inputs are stored), head-splitting views and
transposes, softmax, GELU, a residual, a column mean over the sequence, slices
and ``cat``. Many buffers get stored (reductions, matmul inputs, values read by
several expensive readers), so the scheduler has real work.
Gives: node counts (FX, IR after lowering, stored after inlining, groups after
scheduling, fusion-log records) and the time of each phase
(``braze.lower.lower``, ``braze.fuse.inline.inline``,
``braze.fuse.schedule.schedule``): the median of ``--repeat`` runs and the
first. With ``--profile`` (or when the three phases take over a second) a
cProfile of one run, the functions with the most own time.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import braze
from benchmarks.run import source_id, write_section
from braze.codegen import target_for
from braze.decompositions import table
from braze.fuse.inline import inline
from braze.fuse.schedule import schedule
from braze.ir.expr import clear_intern_table
from braze.ir.graph import ComputeNode, ExternNode
from braze.lower import graph_device, lower

GOAL_S = 1.0
BATCH, SEQ, DIM, HEADS = 2, 64, 128, 4


def block(x, w_norm, b_norm, w_proj):
    h = F.layer_norm(x, (DIM,), w_norm, b_norm)
    h = h.to(torch.bfloat16).to(torch.float32)                     # casts
    a = (h.reshape(BATCH * SEQ, DIM) @ w_proj).view(BATCH, SEQ, HEADS, DIM // HEADS)
    a = torch.softmax(a.transpose(1, 2) * 0.125, dim=-1)            # views + row reduction
    a = a.transpose(1, 2).reshape(BATCH, SEQ, DIM)
    x = x + a * F.gelu(h)
    x = x - x.mean(dim=1, keepdim=True)                             # column reduction
    half = DIM // 2
    return torch.cat([x[..., :half] * 0.5, torch.tanh(x[..., half:])], dim=-1)  # slices + cat


def build_graph(blocks: int) -> torch.fx.GraphModule:
    def model(x, w_norm, b_norm, w_proj):
        for _ in range(blocks):
            x = block(x, w_norm, b_norm, w_proj)
        return x
    args = (torch.randn(BATCH, SEQ, DIM), torch.randn(DIM), torch.randn(DIM), torch.randn(DIM, DIM))
    return make_fx(model, decomposition_table=table(), tracing_mode="fake")(*args)


def run_once(gm) -> tuple[dict, dict]:
    """Wall-clock and CPU seconds of each phase, and the node counts."""
    clear_intern_table()
    times = {}
    clock = _Clock()
    graph, fallbacks = lower(gm, target_for(graph_device(gm)))
    times["lower"] = clock.lap()
    lowered = sum(isinstance(n, (ComputeNode, ExternNode)) for n in graph.nodes)
    decisions = inline(graph)
    times["inline"] = clock.lap()
    sched = schedule(graph)
    times["schedule"] = clock.lap()
    counts = {"IR nodes after lowering (compute + ATen calls)": lowered,
              "fallbacks": len(fallbacks),
              "buffers stored after inlining": sum(d.stored for d in decisions),
              "buffers inlined": sum(not d.stored for d in decisions),
              "groups after scheduling (kernels + ATen calls)": len(sched.groups),
              "fusion-log records": len(sched.log),
              "fusions": sum(r.fused for r in sched.log)}
    return times, counts


class _Clock:
    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        result = (wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu
        return result


def profile_once(gm) -> tuple[str, float]:
    """cProfile of one run: the top functions by cumulative time, then by own time."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    run_once(gm)
    profiler.disable()
    seconds = time.perf_counter() - start
    parts = []
    for key, top in (("cumulative", 22), ("tottime", 12)):
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats(key).print_stats(top)
        parts.append(_trim(stream.getvalue()))
    return "\n\n".join(parts), seconds


def report(blocks: int, repeat: int, profile: bool) -> str:
    t = time.perf_counter()
    gm = build_graph(blocks)
    trace_s = time.perf_counter() - t
    fx_nodes = len(gm.graph.nodes)
    fx_ops = sum(n.op == "call_function" for n in gm.graph.nodes)
    runs = [run_once(gm) for _ in range(repeat)]
    counts = runs[0][1]
    phases = {p: [r[0][p] for r in runs] for p in ("lower", "inline", "schedule")}
    totals = [tuple(map(sum, zip(*r[0].values()))) for r in runs]
    median_total = statistics.median(t[0] for t in totals)
    median_cpu = statistics.median(t[1] for t in totals)
    lines = ["<!-- results:schedule-scale start -->", "## Schedule scale: lower + inline + schedule", "",
             f"Command: `python -m benchmarks.schedule_scale {' '.join(sys.argv[1:])}`  ",
             f"braze {source_id(os.path.dirname(braze.__file__))}  ",
             f"torch {torch.__version__}; graph traced with make_fx (fake tensors, braze's decomposition table) "
             f"in {trace_s:.1f} s; {blocks} blocks of {BATCH}×{SEQ}×{DIM}, {HEADS} heads.", "",
             "| count | value |", "|---|---|", f"| FX nodes (all) | {fx_nodes} |", f"| FX ATen calls | {fx_ops} |"]
    lines += [f"| {k} | {v} |" for k, v in counts.items()]
    lines += ["", f"| phase | wall ms, median of {repeat} | CPU ms, median | wall ms, first run |",
              "|---|---|---|---|"]
    for p, ts in phases.items():
        lines.append(f"| {p} | {1000 * statistics.median(t[0] for t in ts):.0f} | "
                     f"{1000 * statistics.median(t[1] for t in ts):.0f} | {1000 * ts[0][0]:.0f} |")
    verdict = "meets" if median_total < GOAL_S else "**misses**"
    lines += [f"| **total** | **{1000 * median_total:.0f}** | **{1000 * median_cpu:.0f}** | "
              f"{1000 * totals[0][0]:.0f} |", "",
              f"Goal: a 5,000-node graph scheduled in under {GOAL_S:.0f} s: braze {verdict} it "
              f"({median_total:.2f} s wall, {median_cpu:.2f} s CPU, for {fx_ops} ATen calls; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores).", ""]
    if profile or median_total > GOAL_S:
        text, seconds = profile_once(gm)
        lines += [f"cProfile of one run (the profiled run took {seconds:.1f} s, "
                  f"{seconds / median_total:.1f}× the unprofiled median):", "", "```", text, "```", ""]
    lines.append("<!-- results:schedule-scale end -->")
    return "\n".join(lines)


def _trim(text: str) -> str:
    keep = [line.rstrip() for line in text.splitlines() if line.strip()]
    start = next((k for k, line in enumerate(keep) if "ncalls" in line), 0)
    return "\n".join(keep[max(0, start - 2):]).replace(os.getcwd() + "/", "")


def main() -> None:
    parser = argparse.ArgumentParser(description="braze lower/inline/schedule on a ~5,000-node graph")
    parser.add_argument("--blocks", type=int, default=143, help="transformer-like blocks (35 ATen calls each)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="always add a cProfile of one run")
    parser.add_argument("--out", help="replace the schedule-scale section of this markdown file")
    ns = parser.parse_args()
    text = report(ns.blocks, ns.repeat, ns.profile)
    print(text)
    if ns.out:
        write_section(ns.out, "schedule-scale", text)


if __name__ == "__main__":
    main()
