"""Command line: run many fuzzed programs from a seed, count the outcomes, write reproducers.

Takes: ``--count N`` programs (the i-th from seed ``SEED * 1_000_000 + i``, so each is
rebuilt alone with ``--only i``), ``--backend cpp`` or ``triton`` (Triton's
interpreter on CPU tensors), ``--minutes`` (stop earlier), ``--out DIR``.
Gives: a summary on stdout, the counts of ``ok``, ``wrong value``, ``wrong
strides``, ``internal error``, ``fallback`` and ``invalid`` (see
``fuzz_check.OUTCOMES``), and the failures grouped by their first message line;
in ``DIR`` one standalone reproducer per failing program (``<outcome>-<i>.py``,
shrunk: outputs and statements dropped while the outcome stays the same), which
prints the outcome when run.

  BRAZE_CACHE_DIR=/tmp/bc-fuzz python -m tests.fuzz.fuzz_run --count 2000 --seed 0
  BRAZE_CACHE_DIR=/tmp/bc-fuzz python tests/fuzz/fuzz_run.py --backend triton --count 100
  python tests/fuzz/fuzz_run.py --seed 0 --only 17        # one program, printed and run
  python tests/fuzz/fuzz_run.py --dynamic --count 500      # compiled with dynamic=True

Every compile is strict (a graph braze gives up on is a failure, not an eager run).
Programs have 3 to 12 ops by default (``--min-ops``, ``--max-ops``); the ops quarantined
in ``test_fuzz.KNOWN_BUGS`` are left out unless ``--all``.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [p for p in (HERE, os.path.dirname(HERE)) if p not in sys.path]

import torch  # noqa: E402

from fuzz_check import OUTCOMES, classify  # noqa: E402
from fuzz_generate import FuzzConfig, program_from_seed  # noqa: E402
from fuzz_program import Program  # noqa: E402


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout("the program ran past --timeout")


def run_one(program: Program, backend: str, timeout: int, dynamic: bool = False) -> tuple:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        return classify(program, backend, dynamic)
    except Timeout as exc:
        return "internal error", f"Timeout: {exc}"
    finally:
        signal.alarm(0)
        torch._dynamo.reset()


def signature(outcome: str, message: str) -> str:
    """The first line of a failure, numbers and value names blanked: failures alike group."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    first = re.sub(r"\b[va]\d+\b", "_", first)
    first = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", first)
    return f"{outcome}: {first[:140]}"


def _error_name(message: str) -> str:
    return message.split(":", 1)[0]


def shrink(program: Program, outcome: str, message: str, backend: str, timeout: int, budget: int,
           dynamic: bool = False) -> Program:
    """Drop outputs, then statements, then gradients and input layouts, while the
    outcome (and, for an error, its exception type) stays the same; at most
    ``budget`` compiles."""
    tries = [0]

    def same(candidate: Program) -> bool:
        if tries[0] >= budget:
            return False
        tries[0] += 1
        got, text = run_one(candidate, backend, timeout, dynamic)
        return got == outcome and (outcome != "internal error" or _error_name(text) == _error_name(message))

    best = program
    if len(best.outputs) > 1:
        for name in reversed(best.outputs):
            candidate = _with(best, outputs=[name])
            if same(candidate):
                best = candidate
                break
    k = len(best.lines) - 1
    while k >= 0 and tries[0] < budget:
        candidate = _without_line(best, k)
        if candidate is not None and same(candidate):
            best = candidate
        k -= 1
    if best.grad and same(_with(best, grad=False)):
        best = _with(best, grad=False)
    for j, spec in enumerate(best.inputs):
        if spec.layout != "contiguous" and tries[0] < budget:
            inputs = list(best.inputs)
            inputs[j] = type(spec)(spec.shape, spec.dtype, low=spec.low, high=spec.high, unique=spec.unique)
            if same(_with(best, inputs=inputs)):
                best = _with(best, inputs=inputs)
    return best


def _with(program: Program, **changes) -> Program:
    fields = dict(inputs=list(program.inputs), lines=list(program.lines), outputs=list(program.outputs),
                  seed=program.seed, grad=program.grad)
    fields.update(changes)
    return Program(**fields)


def _without_line(program: Program, k: int) -> Program | None:
    """The program without statement ``k`` (None where a later statement reads what it defines)."""
    line = program.lines[k]
    defined = line.split(" = ", 1)[0] if " = " in line else None
    rest = program.lines[:k] + program.lines[k + 1:]
    if defined is not None and any(re.search(rf"\b{defined}\b", other) for other in rest):
        return None
    outputs = [o for o in program.outputs if o != defined]
    if not outputs or not rest:
        return None
    return _with(program, lines=rest, outputs=outputs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--start", type=int, default=0, help="index of the first program (a sanitized rerun near a crash)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, default=None, help="run program i of the seed alone, printing it")
    parser.add_argument("--backend", choices=("cpp", "triton"), default="cpp")
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per program")
    parser.add_argument("--out", default=None, help="folder for reproducers (default /tmp/braze-fuzz-BACKEND-SEED)")
    parser.add_argument("--min-ops", type=int, default=3)
    parser.add_argument("--max-ops", type=int, default=12)
    parser.add_argument("--shrink", type=int, default=40, help="compiles spent shrinking one failure (0: none)")
    parser.add_argument("--all", action="store_true", help="also the ops quarantined in test_fuzz.KNOWN_BUGS")
    parser.add_argument("--dynamic", action="store_true", help="compile with dynamic=True: every size symbolic")
    parser.add_argument("--trace", default=None,
                        help="a file to write each program's index to before it runs (a crash names its program)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")  # eager's (std over one element...); braze's are errors here
    if args.backend == "triton":
        os.environ["TRITON_INTERPRET"] = "1"
    from test_fuzz import KNOWN_BUGS
    config = FuzzConfig(min_ops=args.min_ops, max_ops=args.max_ops,
                        disabled=frozenset() if args.all else frozenset(KNOWN_BUGS))
    out = args.out or f"/tmp/braze-fuzz-{args.backend}-{args.seed}"
    os.makedirs(out, exist_ok=True)
    indices = [args.only] if args.only is not None else range(args.start, args.start + args.count)
    counts = collections.Counter()
    groups: dict = collections.defaultdict(list)
    start = time.monotonic()
    done = 0
    for i in indices:
        if args.minutes is not None and time.monotonic() - start > 60 * args.minutes:
            break
        program = program_from_seed(args.seed * 1_000_000 + i, config)
        done += 1
        if program is None:
            counts["no program"] += 1
            continue
        if args.only is not None:
            print(program.source())
        if args.trace:
            with open(args.trace, "w") as f:
                f.write(f"{i}\n")
        outcome, message = run_one(program, args.backend, args.timeout, args.dynamic)
        counts[outcome] += 1
        if outcome != "ok":
            key = signature(outcome, message)
            groups[key].append(i)
            shrunk = program
            if args.shrink and len(groups[key]) <= 2:  # the first two of a kind
                shrunk = shrink(program, outcome, message, args.backend, args.timeout, args.shrink, args.dynamic)
            header = (f"fuzz_run --backend {args.backend}{' --dynamic' if args.dynamic else ''} --seed {args.seed} --only {i}: {outcome}\n"
                      + message[:1500])
            path = os.path.join(out, f"{outcome.replace(' ', '_')}-{i}.py")
            with open(path, "w") as f:
                f.write(shrunk.repro(args.backend, header, args.dynamic))
            print(f"[{i}] {outcome}: {message.splitlines()[0][:160] if message else ''} -> {path}", flush=True)
        if done % 50 == 0:
            print(f"... {done} programs, {time.monotonic() - start:.0f} s: {dict(counts)}", flush=True)
    elapsed = time.monotonic() - start
    print(f"\n{done} programs ({args.backend}{', dynamic' if args.dynamic else ''}, seed {args.seed}) in {elapsed:.0f} s")
    for outcome in OUTCOMES + ("no program",):
        print(f"  {outcome:15} {counts.get(outcome, 0)}")
    if groups:
        print(f"\nfailures by kind (reproducers in {out}):")
        for key, found in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(found):4}  {key}  (programs {', '.join(map(str, found[:8]))})")
    return 0 if not groups else 1


if __name__ == "__main__":
    sys.exit(main())
