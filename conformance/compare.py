"""How a braze result is judged against eager PyTorch.

Takes: braze's result, eager's result, and for low-precision floats the result of
the same op on float64 copies of the inputs. Gives: ``None`` when they agree, else
a one-line reason.

The rules (docs/conformance.md repeats them):

- structure, tensor shapes and dtypes must be equal; non-tensor leaves equal;
- integer and bool tensors: bit for bit;
- float32: ``torch.testing.assert_close`` with its default tolerances for the dtype
  (rtol 1.3e-6, atol 1e-5), NaN equal to NaN;
- bfloat16/float16: the default tolerances for the dtype (rtol 1.6e-2 / 1e-3,
  atol 1e-5) against eager's result, or else braze's largest error against the
  float64 reference is at most twice eager's largest error (braze computes in
  float32 and rounds once on store; eager rounds after every op, so neither
  result is the exact one). NaN and infinity positions must still match eager's.
- nondeterministic ops (random numbers, uninitialized memory): only structure,
  shapes and dtypes.
"""
from __future__ import annotations

import math

import torch
import torch.utils._pytree as pytree

LOW_PRECISION = (torch.bfloat16, torch.float16)
SLACK = 2.0  # braze's error may be this many times eager's error (low precision only)


def compare(actual, expected, reference=None, *, values: bool = True, what: str = "output") -> str | None:
    """None if ``actual`` agrees with ``expected``, else why not."""
    a_leaves, a_spec = pytree.tree_flatten(actual)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        return f"{what}: {len(a_leaves)} results, eager has {len(e_leaves)}"
    r_leaves = pytree.tree_leaves(reference) if reference is not None else [None] * len(e_leaves)
    if len(r_leaves) != len(e_leaves):
        r_leaves = [None] * len(e_leaves)
    for k, (a, e, r) in enumerate(zip(a_leaves, e_leaves, r_leaves)):
        name = f"{what}[{k}]" if len(e_leaves) > 1 else what
        problem = compare_leaf(a, e, r, values=values, what=name)
        if problem:
            return problem
    return None


def compare_leaf(a, e, r, *, values: bool, what: str) -> str | None:
    if isinstance(e, torch.Tensor):
        if not isinstance(a, torch.Tensor):
            return f"{what}: got {type(a).__name__}, eager gives a tensor"
        if a.shape != e.shape:
            return f"{what}: shape {list(a.shape)}, eager {list(e.shape)}"
        if a.dtype != e.dtype:
            return f"{what}: dtype {a.dtype}, eager {e.dtype}"
        if not values:
            return None
        return compare_tensor(a.detach(), e.detach(), r.detach() if isinstance(r, torch.Tensor) else None,
                              what)
    if isinstance(e, float) and isinstance(a, float):
        if math.isnan(e) and math.isnan(a) or math.isclose(a, e, rel_tol=1.3e-6, abs_tol=1e-5):
            return None
        return f"{what}: {a!r}, eager {e!r}"
    if not values and type(a) is type(e):
        return None
    return None if a == e else f"{what}: {_short(a)}, eager {_short(e)}"


def compare_tensor(a: torch.Tensor, e: torch.Tensor, r, what: str) -> str | None:
    if a.layout is not torch.strided or e.layout is not torch.strided:
        a, e = a.to_dense(), e.to_dense()
    if a.dtype is torch.complex32:  # few kernels take it: compare as complex64
        a, e = a.to(torch.complex64), e.to(torch.complex64)
    if a.is_complex() or not (a.dtype.is_floating_point):
        if torch.equal(a, e) or (a.is_complex() and _close(a, e)):
            return None
        return f"{what}: {_count(a != e)} of {e.numel()} elements differ ({_first_diff(a, e)})"
    if _close(a, e):
        return None
    if a.dtype in LOW_PRECISION and r is not None:
        return _low_precision(a, e, r, what)
    return f"{what}: {_mismatch_text(a, e, r)}"


def _close(a, e) -> bool:
    try:
        torch.testing.assert_close(a, e, equal_nan=True, check_stride=False)
        return True
    except AssertionError:
        return False


def _low_precision(a, e, r, what) -> str | None:
    """Braze's error against float64 at most SLACK times eager's, same non-finite positions."""
    a64, e64, r64 = a.double(), e.double(), r.double()
    odd = ~torch.isfinite(a64) | ~torch.isfinite(e64)
    if not torch.equal(a64[odd].nan_to_num(nan=0.5), e64[odd].nan_to_num(nan=0.5)):
        return f"{what}: NaN/inf positions differ from eager ({_first_diff(a, e)})"
    finite = torch.isfinite(a64) & torch.isfinite(r64)
    err_braze = _max_abs(a64 - r64, finite)
    err_eager = _max_abs(e64 - r64, finite)
    if err_braze <= SLACK * err_eager:
        return None
    return (f"{what}: max error vs float64 {err_braze:.3g}, eager's {err_eager:.3g} "
            f"(> {SLACK:g}x; {_first_diff(a, e)})")


def _max_abs(diff, mask) -> float:
    diff = diff[mask]
    return float(diff.abs().max()) if diff.numel() else 0.0


def _mismatch_text(a, e, r) -> str:
    bad = ~torch.isclose(a.double(), e.double(), rtol=1.3e-6, atol=1e-5, equal_nan=True)
    text = f"{_count(bad)} of {e.numel()} elements differ ({_first_diff(a, e)})"
    if isinstance(r, torch.Tensor) and r.shape == a.shape:
        finite = torch.isfinite(r.double()) & torch.isfinite(a.double()) & torch.isfinite(e.double())
        text += (f"; max error vs float64: braze {_max_abs(a.double() - r.double(), finite):.3g}, "
                 f"eager {_max_abs(e.double() - r.double(), finite):.3g}")
    return text


def _first_diff(a, e) -> str:
    if a.dtype.is_floating_point:
        bad = ~torch.isclose(a.double(), e.double(), rtol=1.3e-6, atol=1e-5, equal_nan=True)
    else:
        bad = a != e
    where = bad.nonzero()
    if not len(where):
        return "no element differs"
    idx = tuple(int(i) for i in where[0])
    return f"at {list(idx)}: {a[idx].item()!r} vs eager {e[idx].item()!r}"


def _count(mask) -> int:
    return int(mask.sum())


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."
