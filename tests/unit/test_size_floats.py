"""Floats computed from size symbols (``braze.ir.size_floats``): the double Python computes
for one shape, op by op; a zero divisor guarded as Python raises; whatever the tree does not
hold decided by the hints with the sizes guarded; and the float64 IR the kernels compute."""
import pytest
import torch

from braze.ir import symbols
from braze.ir.expr import Op, const, size_float, walk
from braze.ir.size_floats import SizeFloat
from braze.ir.symbols import Context, deciding, symbol


def context(**hints):
    return Context(dict(hints), {name: (2, symbols.INF) for name in hints})


def python_value(text: str, **values) -> float:
    return eval(text, {"__builtins__": {"float": float}}, values)


def test_a_variance_scale_is_the_double_python_computes_for_each_size():
    s0 = symbol("s0")
    for n in (2, 3, 7, 10, 4099):
        with deciding(context(s0=n)) as ctx:
            scale = 2.0 / (SizeFloat.of(s0) - 1.0)  # var's backward: 2 / (n - correction)
            assert scale.value() == 2.0 / (float(n) - 1.0) == python_value(scale.text(), s0=n)
        assert list(ctx.guards) == ["(float(s0) - 1.0) != 0"]  # (Python raises where it is 0)
        assert not ctx.specialized


def test_a_divisor_the_ranges_prove_nonzero_adds_no_guard():
    s0, s1 = symbol("s0"), symbol("s1")
    with deciding(context(s0=6, s1=4)) as ctx:
        mean = 1 / SizeFloat.of(s0 * s1)
        half = SizeFloat.of(s0) * 0.5 + s1 / SizeFloat.of(3)
        assert mean.value() == 1 / 24 and half.value() == 6 * 0.5 + 4 / 3
    assert not ctx.guards and not ctx.specialized


def test_a_zero_divisor_raises_as_python_does():
    s0 = symbol("s0")
    with deciding(Context({"s0": 1}, {"s0": (0, symbols.INF)})):
        with pytest.raises(ZeroDivisionError, match=r"float\(s0\) - 1.0"):
            1.0 / (SizeFloat.of(s0) - 1.0)
        with pytest.raises(ZeroDivisionError):
            SizeFloat.of(s0) / 0.0


def test_what_the_tree_does_not_hold_specializes_the_sizes_it_reads():
    s0, s1 = symbol("s0"), symbol("s1")
    with deciding(context(s0=8, s1=3)) as ctx:
        scale = SizeFloat.of(s0) * 0.25
        assert scale > 1.5 and float(scale) == 2.0 and scale ** 2 == 4.0
    assert list(ctx.guards) == ["(s0 - 8) == 0"]  # s1 is not read: not guarded
    assert [size for size, _, _ in ctx.specialized] == [s0, s0, s0]


def test_the_kernels_compute_it_in_float64_from_the_size_arguments():
    s0 = symbol("s0")
    with deciding(context(s0=7)):
        scale = 2.0 / (SizeFloat.of(s0) - 1.0) * 3.0
        e = size_float(scale)
        rounded = const(scale, torch.float32)  # as a float32 op takes a Python number
        low = const(scale, torch.bfloat16)  # double, float32, then bfloat16 (as ``full`` rounds)
    ops = [x.op for x in walk(e)]
    assert e.dtype is torch.float64 and Op.TRUEDIV in ops and Op.SUB in ops
    assert e.op is Op.MUL and e.arg is not None  # a product never fused into a neighbour
    # the size argument itself (structurally: IR nodes are interned, so an earlier test's
    # equal ``s0`` may be the object the node holds)
    assert any(x.op is Op.CONST and symbols.same((x.arg,), (s0,)) for x in walk(e))
    assert rounded.op is Op.CAST and rounded.dtype is torch.float32 and rounded.args[0] is e
    assert low.args[0].dtype is torch.float32 and low.args[0].args[0] is e
