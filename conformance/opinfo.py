"""The OpInfo sweep: every op of PyTorch's ``op_db`` through braze, against eager.

Usage::

    python -m conformance.opinfo --out docs/conformance.md            # full sweep, C++ backend
    python -m conformance.opinfo --backend triton --out docs/conformance.md
    python -m conformance.opinfo --ops sum,cat,where                    # a few ops, printed
    python -m conformance.opinfo --table-only --out docs/conformance.md # re-render saved results

Takes: command-line options. Gives: ``conformance/results/<backend>.json`` (one
result per op and dtype; a run with ``--ops`` updates only those entries) and,
with ``--out``, the markdown table of every backend's saved results.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

from conformance import pool
from conformance.subset import CI_SUBSET

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
BACKENDS = ("cpp", "triton", "cuda")  # cuda: the samples made on the GPU (Triton compiled for it)


def results_path(backend: str) -> str:
    return os.path.join(RESULTS, f"{backend}.json")


def load_results(backend: str) -> dict | None:
    path = results_path(backend)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def save_results(backend: str, found: dict, seconds: float, full: bool, jobs: int) -> dict:
    import torch
    old = load_results(backend) or {}
    ops = {} if full else dict(old.get("ops", {}))
    ops.update(found)
    data = {"backend": backend, "torch": torch.__version__,
            "date": datetime.date.today().isoformat(),
            "sweep_seconds": round(seconds, 1) if full else old.get("sweep_seconds"),
            "jobs": jobs if full else old.get("jobs"),
            "ops": dict(sorted(ops.items()))}
    os.makedirs(RESULTS, exist_ok=True)
    with open(results_path(backend), "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    return data


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m conformance.opinfo", description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=BACKENDS, default="cpp", help="braze's code generator for CPU tensors, or cuda: the samples on the GPU")
    p.add_argument("--ops", default="", help="comma-separated op keys (name or name.variant); default all")
    p.add_argument("--subset", action="store_true", help="only the CI subset (conformance/subset.py)")
    p.add_argument("--dtypes", default="float32,bfloat16,int64,bool")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--op-timeout", type=int, default=300, help="seconds one (op, dtype) may take")
    p.add_argument("--out", default="", help="write the markdown table here")
    p.add_argument("--table-only", action="store_true", help="render saved results, run nothing")
    p.add_argument("--resume", action="store_true",
                   help="keep the ops an interrupted sweep finished (results/<backend>.partial.jsonl)")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def select(args) -> list:
    keys = list(pool.ops_by_key())
    if args.subset:
        return [k for k in keys if k in CI_SUBSET]
    if args.ops:
        wanted = [w.strip() for w in args.ops.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in keys]
        if unknown:
            sys.exit(f"unknown op keys: {', '.join(unknown)}")
        return [k for k in keys if k in wanted]
    return keys


def progress_printer(total: int, quiet: bool):
    done = {"n": 0, "ops": set()}
    start = time.monotonic()

    def report(key, name, result):
        done["ops"].add(key)
        if quiet:
            return
        line = f"[{len(done['ops'])}/{total} {time.monotonic() - start:6.0f}s] {key} {name}: {result['outcome']}"
        if result["outcome"] not in ("pass", "pass-through") and result.get("detail"):
            line += f" -- {result.get('sample', '')} {result['detail'][:160]}"
        print(line, flush=True)
    return report


def main(argv=None) -> int:
    args = parse(argv if argv is not None else sys.argv[1:])
    if not args.table_only:
        run_sweep(args)
    if args.out:
        from conformance.table import render
        text = render({b: load_results(b) for b in BACKENDS})
        with open(args.out, "w") as f:
            f.write(text)
        print(f"wrote {args.out}")
    return 0


def run_sweep(args) -> None:
    if args.backend == "triton":
        os.environ["TRITON_INTERPRET"] = "1"
    from conformance.pipeline import ensure_backend
    ensure_backend(args.backend)
    keys = select(args)
    dtype_names = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    full = not (args.ops or args.subset) and tuple(dtype_names) == pool.DTYPES
    os.makedirs(RESULTS, exist_ok=True)
    partial = os.path.join(RESULTS, f"{args.backend}.partial.jsonl")
    done, spent = _resumed(partial) if args.resume else ({}, 0.0)
    todo = [k for k in keys if k not in done]
    log = os.path.join(RESULTS, f"{args.backend}-stderr.log")
    with open(log, "a" if args.resume else "w"), open(partial, "a" if args.resume else "w"):
        pass
    start = time.monotonic()

    def finished(key, results):
        with open(partial, "a") as f:
            f.write(json.dumps({"key": key, "results": results, "elapsed": spent + time.monotonic() - start})
                    + "\n")
    found = pool.sweep(todo, dtype_names, args.backend, jobs=args.jobs, op_timeout=args.op_timeout,
                       progress=progress_printer(len(todo), args.quiet), finished=finished, stderr_path=log)
    seconds = spent + time.monotonic() - start
    found = {**done, **found}
    data = save_results(args.backend, found, seconds, full, args.jobs)
    os.remove(partial)
    from conformance.table import summary_lines
    print("\n".join(summary_lines(data, only=set(found))))
    print(f"{len(keys)} ops in {seconds:.0f} s with {args.jobs} worker(s)")


def _resumed(path):
    """Ops an interrupted sweep finished, and the time it had spent."""
    done, spent = {}, 0.0
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    entry = json.loads(line)
                    done[entry["key"]] = entry["results"]
                    spent = max(spent, entry["elapsed"])
    return done, spent


if __name__ == "__main__":
    sys.exit(main())
