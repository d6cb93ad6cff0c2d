"""float16 and bfloat16 on the CPU: eager, Inductor, and braze with and without block conversions.

What it measures: row kernels that read and write halves (RMSNorm with a residual,
``x.float().sum(-1)``, LayerNorm + GELU in bfloat16) and pointwise ones (``x.half() * 2``,
``a + b`` in float16), each timed as eager, Inductor, braze with ``cpp_half_blocks`` off
(conversions per element, in the prelude's bit arithmetic) and on (a block of lanes at a
time, AVX-512 or F16C where the build has them), in interleaved rounds of
``torch.utils.benchmark`` in one process, each call on the next of several input sets (so
they are not all in the cache), at each thread count asked for. Prints medians in ms and checks
every compiled result against eager.

    python -m benchmarks.half_precision [--threads 1,2] [--only rms,sum] [--budget 1.0]

Results: docs/benchmarks.md, "Half precision and transposes".
"""
from __future__ import annotations

import argparse
import itertools
import statistics

import torch
import torch.nn.functional as F
import torch.utils.benchmark as benchmark

import braze
from benchmarks.measure import compare, input_set_count

ROUNDS = 5  # each compiler timed once per round, the rounds interleaved


def _rms(x, r, w):
    hf = (x + r).float()
    return (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6) * w).half()


def _layernorm_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, x.shape[-1:], w, b))


WORKLOADS = {  # name -> (function, inputs of one set)
    "RMSNorm with residual, fp16 512x5120": (
        _rms, lambda: [torch.randn(512, 5120).half(), torch.randn(512, 5120).half(), torch.randn(5120)]),
    "RMSNorm with residual, fp16 2048x5120 (output streamed)": (
        _rms, lambda: [torch.randn(2048, 5120).half(), torch.randn(2048, 5120).half(), torch.randn(5120)]),
    "x.float().sum(-1), fp16 4096^2": (lambda x: x.float().sum(-1), lambda: [torch.randn(4096, 4096).half()]),
    "LayerNorm+GELU, bf16 1024x4096": (
        _layernorm_gelu, lambda: [torch.randn(1024, 4096).bfloat16(), torch.randn(4096).bfloat16(),
                                  torch.randn(4096).bfloat16()]),
    "x.half() * 2, 4M elements": (lambda x: x.half() * 2, lambda: [torch.randn(1 << 22)]),
    "a + b, fp16 4M elements": (lambda a, b: a + b, lambda: [torch.randn(1 << 22).half(), torch.randn(1 << 22).half()]),
}


def _compilers(fn) -> dict:
    torch._dynamo.reset()
    return {"eager": fn, "inductor": torch.compile(fn, backend="inductor"),
            "braze, per element": braze.compile(fn, options={"cpp_half_blocks": False}),
            "braze, blocks": braze.compile(fn, options={"cpp_half_blocks": True})}


def run(name: str, threads: int, budget: float) -> dict:
    fn, make = WORKLOADS[name]
    torch.set_num_threads(threads)
    first = make()
    sets = [first] + [make() for _ in range(input_set_count(sum(t.nbytes for t in first)) - 1)]
    calls = _compilers(fn)
    expected = fn(*first)
    for label, call in calls.items():
        if not compare(call(*first), expected)[0]:
            print(f"  {name}: {label} differs from eager beyond the dtype's tolerance")
    return _medians(calls, sets, budget, threads)


def _medians(calls: dict, sets: list, budget: float, threads: int) -> dict:
    """Name -> median ms per call over ``ROUNDS`` interleaved rounds of
    ``torch.utils.benchmark`` (each call on the next input set)."""
    times: dict = {name: [] for name in calls}
    cycle = itertools.cycle(sets)
    for _ in range(ROUNDS):
        for name, call in calls.items():
            timer = benchmark.Timer("call(*next(cycle))", globals={"call": call, "cycle": cycle}, num_threads=threads)
            times[name] += [t * 1000 for t in timer.blocked_autorange(min_run_time=budget / ROUNDS).times]
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--only", default="", help="comma-separated substrings of workload names")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timed calls per compiler")
    args = parser.parse_args()
    names = [n for n in WORKLOADS if not args.only or any(s in n for s in args.only.split(","))]
    print("| workload | threads | eager | Inductor | braze, per element | braze, blocks |")
    print("|---|---|---|---|---|---|")
    for threads in (int(t) for t in args.threads.split(",")):
        for name in names:
            ms = run(name, threads, args.budget)
            print(f"| {name} | {threads} | " + " | ".join(f"{v:.2f}" for v in ms.values()) + " |", flush=True)


if __name__ == "__main__":
    main()
