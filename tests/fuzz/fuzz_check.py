"""Run a fuzzed program eagerly and through braze (strict), and compare.

Takes: a ``Program``. Gives: ``run_and_compare(program)``, which raises
``Mismatch`` (an ``AssertionError``; ``kind`` is ``"wrong value"`` or ``"wrong
strides"``) naming the output, mutated input or gradient that differs, and
returns braze's compiled graphs; ``classify(program)``, the outcome as one of
``OUTCOMES`` and a message (for ``fuzz_run``); ``main(program)``, the entry of a
written reproducer: prints the outcome, exits 1 unless ok.

The rules:
- output structure, shapes and dtypes equal to eager's;
- integers and bools bit for bit;
- floats: ``torch.testing.assert_close`` with its default tolerances for the
  dtype (float32: rtol 1.3e-6, atol 1e-5; float16: rtol 1e-3, atol 1e-5;
  bfloat16: rtol 1.6e-2, atol 1e-5), NaN equal to NaN; failing that, against a
  float64 reference run (the float inputs upcast): braze's largest error is at
  most ``REFERENCE_SLACK`` (2) times eager's, or ``FLOOR_ULPS`` units in the last
  place at the output's largest reference magnitude: 32 of the output's dtype,
  or of float32 where the program has float32 values (libm's vector functions are
  a few ulp off, and ``exp(exp(x))`` multiplies that by 20; a float64 result
  computed through an explicit float32 cast carries that cast's rounding, which the
  reference run keeps too), 2 of bfloat16 or float16 where the program has such values
  (eager rounds each of them, braze only what it stores). braze computes bf16 and
  fp16 in float32 and rounds once on store, eager after every op; a chain of
  ops in fp16 also overflows in eager where braze's float32 does not, so the
  positions where eager is not finite but the reference is are left out. NaN
  and infinity positions must otherwise match eager's;
- the strides of every output along each dim of size > 1 equal eager's.

Inputs are made afresh for each run from their specs (cloning would make sliced
and expanded inputs contiguous); inputs changed in place are compared too. In a
gradient program (``program.grad``), the gradients of the float inputs for
seeded random cotangents of the float outputs are compared by the same value
rules (the reference: the same cotangents, in float64). Where the reference run
fails (an op whose operands must share a dtype, one of them cast by the program),
the reference is the program with every float dtype it names made float64, run
with float64 as the default dtype.

Every compile is strict, so a graph braze gives up on raises instead of running
eagerly. ``classify`` tells apart: ``fallback`` (braze declined the graph on
purpose: a ``BrazeError`` or ``LoweringError`` of its own, with no exception
under it), ``internal error`` (any other exception from braze, at compile time
or at the first run), ``invalid`` (eager or Dynamo rejects the program: a
generator bug).
"""
from __future__ import annotations

import os
import re
import sys
import traceback

import torch

import braze
from fuzz_program import LOW_PRECISION, wants_grad
from helpers import Compiled

REFERENCE_SLACK = 2.0
FLOOR_ULPS = {"full": 32, "low": 2}  # see the module docstring
OUTCOMES = ("ok", "wrong value", "wrong strides", "internal error", "fallback", "invalid")


class Mismatch(AssertionError):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _upcast(t):
    if isinstance(t, torch.Tensor) and t.dtype.is_floating_point:
        return t.double()
    return t


class _Reference:
    """The program run in float64 (its float inputs upcast), made when first needed."""

    def __init__(self, program, fn, expected):
        self.program, self.fn, self.expected, self._run = program, fn, expected, None

    def get(self):
        if self._run is None:
            try:
                self._run = self._reference(self.fn)
            except RuntimeError:  # an op whose operands must share a dtype, one of them cast in the program
                default = torch.get_default_dtype()
                torch.set_default_dtype(torch.float64)  # (and an integer's sin, say: float64 too)
                try:
                    self._run = self._reference(_in_float64(self.program).function())
                finally:
                    torch.set_default_dtype(default)
        return self._run

    def _reference(self, fn) -> tuple:
        args = [_upcast(a).detach() for a in self.program.make_inputs()]
        if self.program.grad:
            for spec, a in zip(self.program.inputs, args):
                if wants_grad(spec):
                    a.requires_grad_()
        outputs = fn(*args)
        grads = _gradients(outputs, args, like=self.expected) if self.program.grad else []
        return [o.detach() for o in outputs], [a.detach() for a in args], grads


def _in_float64(program):
    """The program with every float dtype it names made float64 (its casts too)."""
    from fuzz_program import Program
    lines = [re.sub(r"torch\.(bfloat16|float16|float32)\b", "torch.float64", line) for line in program.lines]
    return Program(program.inputs, lines, program.outputs, program.seed, program.grad)


def run_and_compare(program, backend: str = "cpp", dynamic: bool = False):
    fn = program.function()
    eager_args, braze_args = program.make_inputs(), program.make_inputs()
    expected = fn(*eager_args)
    expected_grads = _gradients(expected, eager_args) if program.grad else []
    torch._dynamo.reset()
    with Compiled() as compiled, braze.config.patch(strict=True, graph_cache=False, trace_cache=False,
                                                    cpu_backend=backend,
                                                    triton_bounds_check=True):
        actual = torch.compile(fn, backend="braze", fullgraph=True, dynamic=dynamic or None)(*braze_args)
        actual_grads = _gradients(actual, braze_args, like=expected) if program.grad else []
    assert compiled.graphs, "braze compiled no graph"
    assert not compiled.failures, f"braze ran a graph eagerly: {compiled.failures}"
    reference = _Reference(program, fn, expected)
    low_eps = _low_precision_eps(program)
    f32_eps = torch.finfo(torch.float32).eps if torch.float32 in _float_dtypes(program) else 0.0
    if len(actual) != len(expected):
        raise Mismatch("wrong value", f"{len(actual)} outputs, expected {len(expected)}")
    for k, (a, e) in enumerate(zip(actual, expected)):
        compare(a, e, lambda k=k: reference.get()[0][k], f"output {k} ({program.outputs[k]})", low_eps, f32_eps)
    for k, (a, e) in enumerate(zip(braze_args, eager_args)):
        compare(a.detach(), e.detach(), lambda k=k: reference.get()[1][k], f"input a{k} after the call", low_eps, f32_eps)
    for k, (a, e) in enumerate(zip(actual_grads, expected_grads)):
        if a is not None or e is not None:
            if a is None or e is None:
                raise Mismatch("wrong value", f"gradient {k}: {a} vs {e}")
            compare(a, e, lambda k=k: reference.get()[2][k], f"gradient {k} (of a float input)", low_eps, f32_eps)
    for k, (a, e) in enumerate(zip(actual, expected)):
        compare_strides(a, e, what=f"output {k} ({program.outputs[k]})")
    return compiled


def _low_precision_eps(program) -> float:
    """The largest epsilon of the bfloat16/float16 values the program has (0.0: none)."""
    return max((torch.finfo(d).eps for d in _float_dtypes(program) & frozenset(LOW_PRECISION)), default=0.0)


def _float_dtypes(program) -> set:
    """The float dtypes of the program's inputs and explicit casts."""
    found = {spec.dtype for spec in program.inputs if spec.dtype.is_floating_point}
    return found | {d for d in FLOATS if any(str(d) in line for line in program.lines)}


FLOATS = frozenset({torch.float64, torch.float32, torch.float16, torch.bfloat16})


def _gradients(outputs, args, like=None) -> list:
    """Gradients of the inputs that require grad, for seeded cotangents of the float
    outputs (``like``: the eager outputs whose dtypes the cotangents take, so that a
    float64 reference run gets the same values)."""
    like = like if like is not None else outputs
    pairs = [(o, e) for o, e in zip(outputs, like) if o.requires_grad]
    leaves = [a for a in args if a.requires_grad]
    if not pairs or not leaves:
        return []
    gen = torch.Generator().manual_seed(7)
    cotangents = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(e.dtype).to(o.dtype)
                  for o, e in pairs]
    return list(torch.autograd.grad([o for o, _ in pairs], leaves, cotangents, allow_unused=True))


def compare(actual, expected, reference, what: str, low_eps: float = 0.0, f32_eps: float = 0.0) -> None:
    """``reference``: a callable giving the float64 run's tensor (or None); ``low_eps``:
    the machine epsilon of the program's lowest-precision values (0: none below float32);
    ``f32_eps``: float32's, where the program has float32 values (0: none)."""
    if not isinstance(actual, torch.Tensor):
        raise Mismatch("wrong value", f"{what}: expected a tensor, got {type(actual)}")
    actual, expected = actual.detach(), expected.detach()
    if actual.shape != expected.shape:
        raise Mismatch("wrong value", f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}")
    if actual.dtype != expected.dtype:
        raise Mismatch("wrong value", f"{what}: dtype {actual.dtype} != {expected.dtype}")
    if not expected.dtype.is_floating_point:
        if not torch.equal(actual, expected):
            raise Mismatch("wrong value", f"{what}: {expected.dtype} values differ\n{_diff(actual, expected)}")
        return
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True)
        return
    except AssertionError as exc:
        if reference is None:
            raise Mismatch("wrong value", f"{what}: {exc}\n{_diff(actual, expected)}") from None
        first = str(exc).splitlines()[0]
    _against_reference(actual, expected, reference().detach(), what, first, low_eps, f32_eps)


def _against_reference(actual, expected, reference, what: str, first: str, low_eps: float,
                       f32_eps: float) -> None:
    a, e, r = actual.double(), expected.double(), reference.double()
    dtype_max = torch.finfo(expected.dtype).max
    meaningful = ~(torch.isfinite(r) & (r.abs() <= dtype_max) & ~torch.isfinite(e))  # eager overflowed alone
    for name, test in (("NaN", torch.isnan), ("infinity", torch.isinf)):
        if not torch.equal(test(a)[meaningful], test(e)[meaningful]):
            raise Mismatch("wrong value", f"{what}: {name} positions differ from eager's ({first})\n"
                                          f"{_diff(actual, expected)}")
    finite = torch.isfinite(e) & torch.isfinite(r) & torch.isfinite(a)
    if not finite.any():
        return
    err_braze = (a - r)[finite].abs().max().item()
    err_eager = (e - r)[finite].abs().max().item()
    eps = max(torch.finfo(expected.dtype).eps, f32_eps)
    floor = max(FLOOR_ULPS["full"] * eps, FLOOR_ULPS["low"] * low_eps) * r[finite].abs().max().item()
    if err_braze > max(REFERENCE_SLACK * err_eager, floor):
        raise Mismatch("wrong value", f"{what}: {first}; largest error against the float64 reference "
                                      f"{err_braze:.4g} > {REFERENCE_SLACK} x eager's {err_eager:.4g}\n"
                                      f"{_diff(actual, expected)}")


def compare_strides(actual, expected, what: str) -> None:
    dims = [d for d in range(expected.ndim) if expected.shape[d] > 1]
    if any(actual.stride(d) != expected.stride(d) for d in dims):
        raise Mismatch("wrong strides", f"{what}: strides {actual.stride()} != eager's {expected.stride()} "
                                        f"(shape {tuple(expected.shape)}, {expected.dtype})")


def _diff(actual, expected, limit: int = 6) -> str:
    a, e = actual.detach().reshape(-1), expected.detach().reshape(-1)
    if e.dtype.is_floating_point:
        bad = ~torch.isclose(a.double(), e.double(), equal_nan=True, rtol=1.3e-6, atol=1e-5)
    else:
        bad = a != e
    where = bad.nonzero().flatten()[:limit].tolist()
    lines = [f"  flat index {i}: braze {a[i].item()!r}, eager {e[i].item()!r}" for i in where]
    return f"{int(bad.sum())} of {e.numel()} elements differ\n" + "\n".join(lines)


# ---------------------------------------------------------------- outcomes

def _chain(exc):
    """``exc`` and the exceptions under it (causes, contexts, Dynamo's inner exception)."""
    seen = []
    while exc is not None and all(exc is not s for s in seen):
        seen.append(exc)
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return seen


def _braze_failure(exc) -> str | None:
    """``fallback`` or ``internal error`` for an exception from braze; None if not braze's."""
    from braze.errors import BrazeError
    from braze.lower import LoweringError
    chain = _chain(exc)
    for k, e in enumerate(chain):
        if isinstance(e, (BrazeError, LoweringError)):
            below = chain[k + 1:]
            if all(isinstance(b, (BrazeError, LoweringError)) for b in below):
                return "fallback"
            return "internal error"
    if any("braze" in (frame.filename or "") for e in chain
           for frame in traceback.extract_tb(e.__traceback__)):
        return "internal error"
    return None


def classify(program, backend: str = "cpp", dynamic: bool = False) -> tuple:
    """(outcome, message) of one program; see ``OUTCOMES``. ``dynamic``: compiled with
    ``dynamic=True`` (every size symbolic)."""
    try:
        program.function()(*program.make_inputs())
    except Exception as exc:  # the program itself is wrong
        return "invalid", f"eager: {type(exc).__name__}: {exc}"
    try:
        run_and_compare(program, backend, dynamic)
    except Mismatch as exc:
        return exc.kind, str(exc)
    except Exception as exc:
        kind = _braze_failure(exc) or "invalid"
        inner = _chain(exc)[-1]
        return kind, f"{type(inner).__name__}: {inner}"[:2000]
    return "ok", ""


def main(program, backend: str = "cpp", dynamic: bool = False) -> None:
    """A reproducer's entry: print the outcome (and the program's source)."""
    if backend == "triton":
        os.environ["TRITON_INTERPRET"] = "1"
    print(program.source())
    outcome, message = classify(program, backend, dynamic)
    print(f"{outcome}: {message}" if message else outcome)
    sys.exit(0 if outcome == "ok" else 1)
