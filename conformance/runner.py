"""One OpInfo op: run its samples for each dtype and decide the outcomes.

Takes: an OpInfo, dtype names and a braze backend (a ``torch.compile`` backend
function). Gives: per dtype a result dict (``outcome``, ``samples``, first
failing ``sample``, ``detail``, ``fallbacks``, ``notes``, ``grad``, ``seconds``)
as ``docs/conformance.md`` shows it.

Outcomes, best first:
  pass          braze compiled every graph and every value (and gradient) agrees
  pass-through  values agree; some ATen ops ran through ATen (``fallbacks``)
  failed        braze failed on a graph and ran it eagerly (no wrong result reached
                the user, but braze compiled nothing there)
  mismatch      a value or gradient disagrees with eager beyond tolerance
  error         an exception escaped to the user
  skip          nothing to judge (no samples, no graph, or torch.compile fails the
                same way without braze); the reason is recorded

Speed: the samples of one dtype run in one compiled function (one Dynamo trace,
one AOTAutograd run, one C++ build); a dtype that is not clean is bisected
(``conformance.search``) to its failing sample. (All dtypes in one function was
tried and measured slower: 222 s against 182 s on 60 random ops, since the
merged graph had to be run again per dtype whenever an op ran through ATen, to
say which dtype did.)
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from conformance import compare as C
from conformance import notes
from conformance.pipeline import Group, compiled_run, eager, seed_of
from conformance.samples import describe, pick_evenly, signature

RANK = {"error": 0, "mismatch": 1, "failed": 2, "pass-through": 3, "pass": 4}
PROBLEM_RANK = {**RANK, "nograph": 5}
MAX_SIGNATURES = 64  # distinct sample signatures run per (op, dtype); the rest is noted


def op_key(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def wants_grad(op, dtype) -> bool:
    return dtype is torch.float32 and op.supports_autograd


@dataclass
class Case:
    """One (op, dtype): its samples and eager's results for the usable ones."""
    key: str
    fn: object
    dtype: torch.dtype
    grad: bool
    samples: list
    groups: list             # pipeline.Group: samples eager can run, by signature
    expected: dict           # index -> (output, grads)
    values: bool             # compare values (False: nondeterministic op)
    notes: list = field(default_factory=list)
    random: set = field(default_factory=set)  # samples whose eager values depend on the seed

    @property
    def count(self) -> int:
        return sum(len(g.members) for g in self.groups)


def result(outcome, grad, samples=0, sample="", detail="", fallbacks=(), result_notes=()) -> dict:
    return {"outcome": outcome, "samples": samples, "sample": sample, "detail": detail,
            "fallbacks": sorted(set(fallbacks)), "notes": list(result_notes), "grad": grad}


def prepare(op, dtype, device="cpu"):
    """A ``Case`` of the op's samples made on ``device``, or a skip result when there is
    nothing to judge."""
    key, grad = op_key(op), wants_grad(op, dtype)
    if key in notes.SKIP:
        return result("skip", grad, detail=notes.SKIP[key])
    samples = list(op.sample_inputs(device, dtype, requires_grad=grad))
    if not samples:
        return result("skip", grad, detail="OpInfo has no samples for this dtype")
    by_signature: dict = {}
    for i, sample in enumerate(samples):
        by_signature.setdefault(signature(sample), []).append(i)
    kept = pick_evenly(list(by_signature.values()), MAX_SIGNATURES)
    fn = op.get_op()
    values = key not in notes.NONDETERMINISTIC
    expected, problems, random = _eager_all(fn, samples, [i for members in kept for i in members], grad, values)
    case = Case(key, fn, dtype, grad, samples, [], expected, values, problems, random=random)
    case.groups = [Group(case, [i for i in members if i in expected]) for members in kept]
    case.groups = [g for g in case.groups if g.members]
    if not case.groups:
        return result("skip", grad, len(samples), detail="every sample raises in eager: " + problems[0])
    if len(kept) < len(by_signature):
        case.notes.append(f"ran {sum(len(m) for m in kept)} of {len(samples)} samples: {len(kept)} of "
                          f"{len(by_signature)} distinct signatures, evenly spread (cap {MAX_SIGNATURES})")
    if not case.values:
        case.notes.append("values not compared: " + notes.NONDETERMINISTIC[key])
    elif random:
        case.notes.append(f"{len(random)} samples draw random numbers (eager differs between two seeds): "
                          f"their values are not compared, first #{min(random)}")
    return case


def _eager_all(fn, samples, indices, grad, values):
    """Eager's results; notes on samples eager cannot run; samples whose values depend
    on the RNG seed (run twice with different seeds)."""
    expected, problems, random = {}, [], set()
    for i in indices:
        try:
            expected[i] = eager(fn, samples[i], i, grad)
            if values and C.compare(eager(fn, samples[i], i, False, seed=seed_of(i) + 1)[0], expected[i][0]):
                random.add(i)
        except Exception as exc:  # noqa: BLE001 - such samples are left out, and said so
            first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ""
            problems.append(f"sample #{i} ({describe(samples[i])}) raises in eager and is left out: "
                            f"{type(exc).__name__}: {first}")
            expected.pop(i, None)
    more = [f"{len(problems) - 1} more samples raise in eager"] if len(problems) > 1 else []
    return expected, problems[:1] + more, random


def run_op(op, dtype_names, backend, announce=None, device="cpu") -> dict:
    """Results of ``op`` for each named dtype it supports on ``device``. ``announce`` is
    told which dtype runs next."""
    announce = announce or (lambda name: None)
    supported = op.supported_dtypes(device)
    out = {}
    for name in [n for n in dtype_names if getattr(torch, n) in supported]:
        announce(name)
        start = time.perf_counter()
        case = prepare(op, getattr(torch, name), device)
        if isinstance(case, Case):
            case = judge(case, backend)
        out[name] = _timed(case, time.perf_counter() - start)
    return out


def _timed(res: dict, seconds: float) -> dict:
    res["seconds"] = round(seconds, 2)
    return res


def batch_problem(case, run, groups):
    """(kind, sample index or None, detail) of the first problem of a run, or None."""
    if run.error:
        one = groups[0].members if len(groups) == 1 else None
        return ("error", one[min(run.error_round, len(one) - 1)] if one else None, run.error)
    if run.failures:
        return ("failed", groups[0].members[0] if len(groups) == 1 else None, run.failures[0])
    if not run.graphs:
        return ("nograph", None, "Dynamo gave braze no graph")
    for k, g in enumerate(groups):
        for m, i in enumerate(g.members):
            problem = sample_problem(case, i, run.outputs[k][m], run.grads[k][m])
            if problem:
                return ("mismatch", i, problem)
    return None


def sample_problem(case, i, out, grads, expected=None) -> str | None:
    """Why braze's output/gradients of sample ``i`` disagree with eager's, or None."""
    exp_out, exp_grads = expected or case.expected[i]
    values = case.values and i not in case.random
    problem = C.compare(out, exp_out, values=values)
    if problem and case.dtype in C.LOW_PRECISION and values:
        reference = _reference(case, i, case.dtype)
        problem = C.compare(out, exp_out, reference) if reference is not None else problem
    if problem and case.dtype is torch.float32:
        return problem + _f32_context(case, i, out, exp_out)
    if problem is None and exp_grads is not None:
        if grads is None:
            return "no gradient through braze"
        problem = C.compare(list(grads), list(exp_grads), values=values, what="grad")
        if problem and case.dtype is torch.float32:
            problem += _f32_context(case, i, list(grads), list(exp_grads), grad=True)
    return problem


def _reference(case, i, dtype, grad=False):
    """The op on float64 copies of sample ``i``: output, or gradients (None if it
    cannot run so)."""
    try:
        out, grads = eager(case.fn, case.samples[i], i, grad, torch.float64)
        return list(grads) if grad else out
    except Exception:  # noqa: BLE001 - no float64 reference: the plain tolerance applies
        return None


def _f32_context(case, i, actual, expected, grad=False) -> str:
    """For a float32 mismatch, each side's distance to a float64 run (not used to judge)."""
    reference = _reference(case, i, torch.float64, grad)
    if reference is None:
        return ""
    text = C.compare(actual, expected, reference, what="grad" if grad else "output")
    return "" if text is None or "vs float64" not in text else " [" + text.split("; ", 1)[-1] + "]"


def judge(case, backend) -> dict:
    """Outcome of one (op, dtype): all samples at once, bisected if not clean."""
    from conformance.search import find_problem
    run = compiled_run(case.fn, case.groups, backend)
    problem = batch_problem(case, run, case.groups)
    if problem is None:
        return result("pass-through" if run.fallbacks else "pass", case.grad, case.count,
                      fallbacks=run.fallbacks, result_notes=case.notes)
    return find_problem(case, backend, problem)
