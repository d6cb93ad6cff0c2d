"""Compile time of one workload with one compiler, measured in a fresh process.

Takes (command line): ``--workload NAME --backend inductor|braze --device D``;
the caller sets ``BRAZE_BENCH_SRC`` (where its snapshot of braze is) and
``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``, ``BRAZE_CACHE_DIR``: empty
directories for a cold-cache compile, the same directories again (in a new
process) for a warm-cache one.
Gives: one JSON line on stdout: ``compile_ms`` (the first compiled call minus
one eager call), ``first_call_ms``, ``eager_ms`` and, for braze, ``braze_ms``
(braze's own phases summed over the graphs it compiled: what it spends after
Dynamo and AOTAutograd), ``graphs``, ``cache_hits`` and ``failures`` (graphs
that ran eagerly).

Both compilers' Python modules are imported before the clock starts (``import
braze``; ``torch._inductor.compile_fx``), and one eager call runs first, so the
clock sees compilation and the first run, not imports or PyTorch's first-use
set-up. Inductor's compile worker pool starts inside the clock: a user's first
compile pays it too.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def measure(name: str, backend: str, device: str) -> dict:
    if os.environ.get("BRAZE_BENCH_SRC"):  # the run's snapshot of braze (benchmarks.run)
        sys.path.insert(0, os.environ["BRAZE_BENCH_SRC"])
    import torch

    import braze
    import torch._inductor.compile_fx  # noqa: F401  (import before the clock)
    from benchmarks.measure import sync
    from benchmarks.workloads import by_name

    case = by_name(name).build(device)
    args = case.make_inputs(0)
    recording = braze.backend.Recording().__enter__()  # for the rest of this one-shot process
    graphs = recording.graphs
    compiled = torch.compile(case.fn, backend="braze") if backend == "braze" else torch.compile(case.fn)

    case.run(case.fn, args)  # PyTorch's own first-use costs, outside the clock
    sync(device)
    t = time.perf_counter()
    case.run(compiled, args)
    sync(device)
    first_ms = (time.perf_counter() - t) * 1000
    eager = []
    for _ in range(5):
        t = time.perf_counter()
        case.run(case.fn, args)
        sync(device)
        eager.append((time.perf_counter() - t) * 1000)
    eager_ms = statistics.median(eager)
    result = {"workload": name, "backend": backend, "first_call_ms": first_ms, "eager_ms": eager_ms,
              "compile_ms": first_ms - eager_ms}
    if backend == "braze":
        result.update(braze_ms=sum(sum(g.timings.values()) for g in graphs), graphs=len(graphs),
                      cache_hits=sum(bool(g.cache_hit) for g in graphs),
                      failures=[message for _, _, message in recording.failures])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", required=True)
    parser.add_argument("--backend", choices=["inductor", "braze"], required=True)
    parser.add_argument("--device", default="cpu")
    ns = parser.parse_args()
    print(json.dumps(measure(ns.workload, ns.backend, ns.device)))


if __name__ == "__main__":
    main()
