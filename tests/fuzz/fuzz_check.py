"""Run a fuzzed program eagerly and through braze (strict), and compare.

Takes: a ``Program``. Gives: ``run_and_compare(program)``, which raises
``AssertionError`` naming the output (or mutated input) that differs, and
returns braze's compiled graphs (for fallback statistics).

The rules:
- output structure, shapes and dtypes equal to eager's;
- integers and bools bit for bit;
- float32/float64: ``torch.testing.assert_close`` with its default tolerances for
  the dtype, NaN equal to NaN;
- a program that touches bfloat16 anywhere: each float output either passes the
  rule above (bf16's default tolerances), or braze's largest error against a
  float64 reference run is at most twice eager's (braze computes bf16 in float32
  and rounds once on store, eager after every op); NaN and infinity positions
  must match eager's.

Inputs are made afresh for each run from their specs (cloning would make sliced
and expanded inputs contiguous); inputs changed in place are compared too. In a
gradient program (``program.grad``), the gradients of the float32/float64 inputs
for seeded random cotangents of the outputs are compared by the same rules.
"""
from __future__ import annotations

import torch

from helpers import Compiled

REFERENCE_SLACK = 2.0


def _upcast(t):
    if isinstance(t, torch.Tensor) and t.dtype.is_floating_point:
        return t.double()
    return t


def _fresh(program) -> list:
    return program.make_inputs()


def run_and_compare(program):
    fn = program.function()
    eager_args, braze_args = _fresh(program), _fresh(program)
    expected = fn(*eager_args)
    torch._dynamo.reset()
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze", fullgraph=True)(*braze_args)
        if program.grad:
            actual_grads = _gradients(actual, braze_args)
    assert compiled.graphs, "braze compiled no graph"
    assert not compiled.failures, f"braze ran a graph eagerly: {compiled.failures}"
    uses_bf16 = "bfloat16" in program.repro()
    reference = None
    if uses_bf16:
        ref_args = [_upcast(a).detach() for a in _fresh(program)]
        reference = (fn(*ref_args), ref_args)
    assert len(actual) == len(expected), f"{len(actual)} outputs, expected {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        ref = reference[0][k] if reference else None
        compare(a, e, ref, what=f"output {k} ({program.outputs[k]})")
    for k, (a, e) in enumerate(zip(braze_args, eager_args)):
        ref = reference[1][k] if reference else None
        compare(a.detach(), e.detach(), ref, what=f"input a{k} after the call")
    if program.grad:
        for k, (a, e) in enumerate(zip(actual_grads, _gradients(expected, eager_args))):
            if a is not None or e is not None:
                assert a is not None and e is not None, f"gradient of a{k}: {a} vs {e}"
                compare(a, e, None, what=f"gradient of input a{k}")
    return compiled


def _gradients(outputs, args) -> list:
    """Gradients of the inputs that require grad, for seeded cotangents of the float outputs."""
    outs = [o for o in outputs if o.requires_grad]
    leaves = [a for a in args if a.requires_grad]
    if not outs or not leaves:
        return []
    gen = torch.Generator().manual_seed(7)
    cotangents = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in outs]
    return list(torch.autograd.grad(outs, leaves, cotangents, allow_unused=True))


def compare(actual, expected, reference, what: str) -> None:
    assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual)}"
    actual, expected = actual.detach(), expected.detach()
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if not expected.dtype.is_floating_point:
        if not torch.equal(actual, expected):
            raise AssertionError(f"{what}: {expected.dtype} values differ\n{_diff(actual, expected)}")
        return
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True)
        return
    except AssertionError as exc:
        if reference is None:
            raise AssertionError(f"{what}: {exc}\n{_diff(actual, expected)}") from None
    _against_reference(actual, expected, reference, what)


def _against_reference(actual, expected, reference, what: str) -> None:
    a, e, r = actual.double(), expected.double(), reference.double()
    for name, test in (("NaN", torch.isnan), ("infinity", torch.isinf)):
        if not torch.equal(test(a), test(e)):
            raise AssertionError(f"{what}: {name} positions differ from eager's\n{_diff(actual, expected)}")
    finite = torch.isfinite(e)
    err_braze = (a - r)[finite].abs().max().item() if finite.any() else 0.0
    err_eager = (e - r)[finite].abs().max().item() if finite.any() else 0.0
    if err_braze > REFERENCE_SLACK * err_eager:
        raise AssertionError(f"{what}: largest error against the float64 reference {err_braze:.4g} "
                             f"> {REFERENCE_SLACK} x eager's {err_eager:.4g}\n{_diff(actual, expected)}")


def _diff(actual, expected, limit: int = 6) -> str:
    a, e = actual.detach().reshape(-1), expected.detach().reshape(-1)
    if e.dtype.is_floating_point:
        bad = ~torch.isclose(a.double(), e.double(), equal_nan=True, rtol=1.3e-6, atol=1e-5)
    else:
        bad = a != e
    where = bad.nonzero().flatten()[:limit].tolist()
    lines = [f"  flat index {i}: braze {a[i].item()!r}, eager {e[i].item()!r}" for i in where]
    return f"{int(bad.sum())} of {e.numel()} elements differ\n" + "\n".join(lines)
