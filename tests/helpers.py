"""Compare braze with eager PyTorch: forward values and gradients, fresh random inputs."""
from __future__ import annotations

import os

import pytest
import torch
import torch.utils._pytree as pytree

import braze
from braze import backend as braze_backend_module


# A Triton-only test file: ``pytestmark = TRITON_ONLY`` (skipped with BRAZE_TEST_TRITON=0;
# every test runs on the Triton backend through the interpreter: conftest.triton_interpreter).
TRITON_ONLY = [pytest.mark.skipif(os.environ.get("BRAZE_TEST_TRITON", "1") != "1",
                                  reason="BRAZE_TEST_TRITON=0: Triton tests left out"),
               pytest.mark.usefixtures("triton_interpreter")]


def rand(*shape, dtype=torch.float32, low=None, high=None, grad=False):
    """A fresh random tensor, never zeros: floats uniform in ``[low, high)`` (default
    ``[-3, 3)``), integers in ``[low, high)`` (default ``[-50, 100)``, ``[0, 100)`` for uint8),
    bools half true; ``grad`` makes a float tensor require grad."""
    if dtype is torch.bool:
        return torch.rand(shape) > 0.5
    if not dtype.is_floating_point:
        lo = max(0, low or 0) if dtype is torch.uint8 else (-50 if low is None else low)
        return torch.randint(lo, 100 if high is None else high, shape, dtype=dtype)
    t = torch.rand(shape, dtype=torch.float64) * ((high or 3) - (low if low is not None else -3)) + \
        (low if low is not None else -3)
    return t.to(dtype).requires_grad_(grad)


class Compiled(braze_backend_module.Recording):
    """Counts the graphs braze compiled (so a test cannot pass by running eagerly)."""

    @property
    def kernels(self):
        return [k for g in self.graphs for k in g.kernels]


def clone_inputs(args):
    return pytree.tree_map(lambda a: a.detach().clone().requires_grad_(a.requires_grad)
                           if isinstance(a, torch.Tensor) else a, args)


def assert_same(actual, expected, *, atol=None, rtol=None, what="output"):
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual)}"
        assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
        assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.device == expected.device, f"{what}: device {actual.device} != {expected.device}"
        if expected.dtype.is_floating_point and expected.dtype in (torch.float16, torch.bfloat16):
            return  # low precision: checked against a float64 reference by check_low_precision
        if expected.dtype.is_floating_point or expected.dtype.is_complex:
            torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True, msg=lambda m: f"{what}: {m}")
        else:
            assert torch.equal(actual, expected), f"{what}: integer results differ:\n{actual}\n{expected}"
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{what}: {len(actual)} results, expected {len(expected)}"
        for k, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, atol=atol, rtol=rtol, what=f"{what}[{k}]")
    else:
        assert actual == expected, f"{what}: {actual} != {expected}"


# BRAZE_TEST_DYNAMIC=1: ``check`` compiles with every size symbolic (``dynamic=True``): the
# numerics suite run through braze's symbolic sizes (runtime/symbolic.py); kernel counts,
# which may differ by size class, are not asserted then
DYNAMIC = True if os.environ.get("BRAZE_TEST_DYNAMIC") == "1" else None


def check(fn, *args, grad=False, atol=None, rtol=None, expect_kernels=None, reference="eager"):
    """Run ``fn`` eagerly and through braze on copies of ``args``; compare outputs and,
    with ``grad``, the gradients of every input that requires grad.

    ``reference="float64"`` compares with ``fn`` computed on float64 copies of the float
    inputs instead, rounded to eager's dtypes (gradients too, from the same cotangents): for
    float32 sums of many elements, where eager's own rounding error is near the tolerance."""
    eager_args, braze_args = clone_inputs(args), clone_inputs(args)
    expected = fn(*eager_args)
    expected_grads = None
    if reference == "float64":
        expected, expected_grads = _float64_reference(fn, args, expected, grad)
    else:
        assert reference == "eager", reference
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze", dynamic=DYNAMIC)(*braze_args)
        assert_same(actual, expected, atol=atol, rtol=rtol)
        if grad:
            if expected_grads is None:
                _backward(expected)
            _backward(actual)
    assert compiled.graphs, "braze compiled no graph"
    assert not compiled.failures, f"braze fell back to eager: {compiled.failures}"
    if grad:
        if expected_grads is None:
            expected_grads = [e.grad if isinstance(e, torch.Tensor) else None for e in pytree.tree_leaves(eager_args)]
        for k, (a, e, given) in enumerate(zip(pytree.tree_leaves(braze_args), expected_grads, pytree.tree_leaves(args))):
            if isinstance(given, torch.Tensor) and given.requires_grad:
                assert_same(a.grad, e, atol=atol, rtol=rtol, what=f"grad of input {k}")
    if expect_kernels is not None and not DYNAMIC:
        assert len(compiled.kernels) == expect_kernels, [str(k) for k in compiled.kernels]
    return compiled


def _float64_reference(fn, args, expected, grad):
    """``fn`` on float64 copies of the float inputs: its results rounded to the dtypes of
    eager's (``expected``), and with ``grad`` the gradients, rounded to each input's dtype,
    of the cotangents ``_backward`` draws for eager's results."""
    wide = pytree.tree_map(lambda a: a.detach().double().requires_grad_(a.requires_grad)
                           if isinstance(a, torch.Tensor) and a.dtype.is_floating_point else a, args)
    out = fn(*wide)
    out_leaves, expected_leaves = pytree.tree_leaves(out), pytree.tree_leaves(expected)
    rounded = pytree.tree_unflatten([o.detach().to(e.dtype) if isinstance(o, torch.Tensor) else o
                                     for o, e in zip(out_leaves, expected_leaves)], pytree.tree_structure(expected))
    if not grad:
        return rounded, None
    pairs = [(o, e) for o, e in zip(out_leaves, expected_leaves) if isinstance(o, torch.Tensor) and o.requires_grad]
    if pairs:
        torch.autograd.backward([o for o, _ in pairs],
                                [torch.randn_like(e, generator=torch.Generator(e.device).manual_seed(7)).double()
                                 for _, e in pairs])
    grads = [w.grad.to(a.dtype) if isinstance(w, torch.Tensor) and w.grad is not None else None
             for w, a in zip(pytree.tree_leaves(wide), pytree.tree_leaves(args))]
    return rounded, grads


def _backward(out):
    leaves = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    if leaves:
        torch.autograd.backward(leaves, [torch.randn_like(t, generator=torch.Generator(t.device).manual_seed(7))
                                         if t.dtype.is_floating_point else None for t in leaves])


def check_low_precision(fn, *args, slack=2.0, floor=1e-3):
    """bf16/fp16: braze's error against a float64 reference is at most ``slack`` times
    eager's (braze rounds once on store, eager after every op)."""
    ref = fn(*[a.double() if isinstance(a, torch.Tensor) and a.dtype.is_floating_point else a for a in args])
    eager = fn(*clone_inputs(args))
    with Compiled() as compiled:
        out = torch.compile(fn, backend="braze", dynamic=DYNAMIC)(*clone_inputs(args))
    assert compiled.graphs and not compiled.failures
    for o, e, r in zip(pytree.tree_leaves(out), pytree.tree_leaves(eager), pytree.tree_leaves(ref)):
        assert o.dtype == e.dtype and o.shape == e.shape
        err_braze = (o.double() - r).abs().max().item()
        err_eager = (e.double() - r).abs().max().item()
        scale = r.abs().max().item() or 1.0
        assert err_braze <= max(slack * err_eager, floor * scale), (err_braze, err_eager)
    return compiled


def kernel_source(compiled) -> str:
    """The generated kernel functions of the one compiled graph (no prelude)."""
    (graph,) = compiled.graphs
    return graph.source[graph.source.index("// kernel"):]


def compiled_source(fn, *args):
    """braze's result and its kernels' source (one graph, compiled, no fallback)."""
    torch._dynamo.reset()
    with Compiled() as compiled:
        out = torch.compile(fn, backend="braze")(*args)
    assert len(compiled.graphs) == 1 and not compiled.failures
    source = compiled.graphs[0].source
    return out, source[source.index("// kernel"):]
