"""A/B of one braze knob on every workload: the check that a change of a default slows nothing.

Run: ``python -m benchmarks.knob_ab --knob cpp_vector_bits --values 0,512 [--device cpu]
[--threads 16] [--budget 0.3] [--only NAME,...] [--sweep SEED --points N --elements E]``

Takes: a knob of ``braze.config`` and two or more values of it (parsed as the knob's
environment variable is), the device, the thread count on the CPU and the workloads of
``benchmarks.workloads`` (substrings of their names; all by default), or with ``--sweep`` the
points of ``benchmarks.sweep_grid`` drawn from that seed (workloads no list was tuned for). Gives: a markdown
table with, per workload, the median ms of braze compiled under each value (each through
``torch.compile(..., options={knob: value})``, so each value has its own kernels), Inductor's
median beside them for scale, and each value's time relative to the first. On the CPU the
variants are timed in interleaved rounds over rotated input sets in one process
(``benchmarks.measure.time_cpu``), so load from other processes hits each alike; on a GPU
each through ``do_bench``. Results are checked against eager before they are timed.
"""
from __future__ import annotations

import argparse

import torch

from benchmarks.measure import compare, input_set_count, run_on_clone, summarize, sync, time_cpu, time_gpu, warm_up
from benchmarks.sweep_grid import build, draw
from benchmarks.workloads import WORKLOADS, tensor_bytes


def main(argv=None) -> None:
    import braze.config
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--knob", required=True)
    parser.add_argument("--values", required=True, help="comma-separated")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    parser.add_argument("--budget", type=float, default=0.3, help="CPU: seconds of timed calls per variant")
    parser.add_argument("--only", default="", help="comma-separated workload names (substrings)")
    parser.add_argument("--sweep", type=int, help="the sweep's points of this seed instead of the workloads")
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--elements", type=int, default=1 << 20)
    ns = parser.parse_args(argv)
    knob = braze.config._BY_NAME[ns.knob]
    values = [knob.kind(v) for v in ns.values.split(",")]
    if ns.threads:
        torch.set_num_threads(ns.threads)
    workloads = WORKLOADS if ns.sweep is None else [_SweepPoint(p) for p in draw(ns.sweep, ns.points, ns.elements)]
    names = [w for w in workloads if not ns.only or any(s in w.name for s in ns.only.split(","))]
    print(f"{ns.device}, {torch.get_num_threads()} threads, knob {ns.knob}\n")
    heads = " | ".join(f"{ns.knob}={v} ms" for v in values)
    print(f"| workload | Inductor ms | {heads} | " + " | ".join(f"{v} / {values[0]}" for v in values[1:]) + " |")
    print("|---|---|" + "---|" * (2 * len(values) - 1))
    warm_up(ns.device)
    for w in names:
        print(_row(w, ns.knob, values, ns.device, ns.budget), flush=True)


class _SweepPoint:
    """A point of the sweep as a workload: its function, fresh random inputs per set."""
    mutates, reference = False, None

    def __init__(self, point):
        self.point, self.name = point, point.name

    def build(self, device: str):
        self.device, (self.fn, _, _) = device, build(self.point, device)
        return self

    def make_inputs(self, seed: int):
        torch.manual_seed(seed)
        return build(self.point, self.device)[1]

    @staticmethod
    def run(fn, args):
        return fn(*args)


def _row(w, knob: str, values: list, device: str, budget: float) -> str:
    case = w.build(device)
    torch._dynamo.reset()  # (the sweep's points share one code object: Dynamo's recompile limit)
    fns = {"inductor": torch.compile(case.fn)}
    fns.update({v: torch.compile(case.fn, backend="braze", options={knob: v}) for v in values})
    first = case.make_inputs(0)
    expected = run_on_clone(case, case.fn, first)
    note = ""
    for name, fn in fns.items():
        actual = run_on_clone(case, fn, first)
        ok, _, why = compare(actual, case.reference(first, actual) if case.reference else expected)
        if not ok and name != "inductor":
            return f"| {w.name} | wrong result of {name}: {why} |"
        note = note or ("" if ok else " (Inductor's result differs from eager's)")
    calls = {name: (lambda args, f=f: case.run(f, args)) for name, f in fns.items()}
    if torch.device(device).type == "cuda":
        ms = {name: time_gpu(call, first) for name, call in calls.items()}
    else:
        sets = [first] + [case.make_inputs(s) for s in range(1, input_set_count(tensor_bytes(first)))]
        ms = {name: summarize(t)["median"] for name, t in time_cpu(calls, sets, budget).items()}
    sync(device)
    ratios = " | ".join(f"{ms[v] / ms[values[0]]:.2f}" for v in values[1:])
    return f"| {w.name}{note} | {ms['inductor']:.3f} | " + " | ".join(f"{ms[v]:.3f}" for v in values) + f" | {ratios} |"


if __name__ == "__main__":
    main()
