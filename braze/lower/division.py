"""Lowering rules for division: true division, ``div`` with a rounding mode,
``floor_divide``, ``remainder`` and ``fmod``.

Takes: ``TensorValue``s and Python numbers. Gives: compute nodes that divide as eager does
on each device: on CUDA a float division by a CPU scalar is eager's multiplication by the
rounded reciprocal (``_reciprocal_divisor``), on the CPU a division; an integer divisor is
checked where eager checks it (``divisor``: a zero raises ``ZeroDivisionError`` on the CPU,
``Op.CHECK``), and on CUDA gives what braze's integer helpers give.
"""
from __future__ import annotations

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as Kind

from braze import config
from braze.ir import dtypes
from braze.ir.expr import Expr, Op, binary, checked, const, rounded_mul, unary, where
from braze.lower.checks import check_site
from braze.lower.core import TensorValue, is_host_scalar, register
from braze.lower.pointwise import add, c, div, mul, pointwise, promote, sub
from braze.lower.rounding import eager_rounded, reads_as_stored

aten = torch.ops.aten


@register(aten.div.Tensor, aten.div.Scalar, size_floats=True)
def _div(ctx, a, b):
    return _div_mode(ctx, a, b)


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(ctx, a, b, rounding_mode=None):
    if rounding_mode is not None:  # (rounded: discontinuous)
        a, b = eager_rounded(ctx, a), eager_rounded(ctx, b)
    if rounding_mode is None:
        fn = _times_reciprocal if _reciprocal_divisor(ctx, a, b) else div
        return pointwise(ctx, fn, a, b, kind=Kind.INT_TO_FLOAT)
    if rounding_mode == "trunc":
        if _reciprocal_divisor(ctx, a, b):
            return pointwise(ctx, lambda x, y: unary(Op.TRUNC, _times_reciprocal(x, y)), a, b)
        return pointwise(ctx, lambda x, y: binary(Op.TRUNCDIV, x, divisor(ctx, y)), a, b)
    return _floor_divide(ctx, a, b)


@register(aten.floor_divide.default, aten.floor_divide.Scalar)
@reads_as_stored
def _floor_divide(ctx, a, b):
    if not isinstance(b, TensorValue) and _reciprocal_divisor(ctx, a, b):
        return pointwise(ctx, _floordiv_by_reciprocal, a, b)
    return pointwise(ctx, lambda x, y: binary(Op.FLOORDIV, x, divisor(ctx, y)), a, b)


def divisor(ctx, y: Expr) -> Expr:
    """An integer divisor checked where eager checks it: on the CPU a zero raises
    ``ZeroDivisionError`` (on CUDA eager gives a value, so does braze)."""
    out = ctx.out
    if not config.runtime_checks or y.dtype not in dtypes.INTEGERS or \
            not isinstance(out, torch.Tensor) or out.device.type != "cpu" or (y.op is Op.CONST and y.arg != 0):
        return y
    return checked(y, "divisor", check_site(ctx, "divisor"))


def _reciprocal_divisor(ctx, a, b) -> bool:
    """Whether eager divides by multiplying with ``1 / b``: on CUDA, when the divisor is a
    CPU scalar to ATen's TensorIterator (a Python number or a 0-d CPU tensor) and the
    division is in floating point. Eager's CUDA kernels for true, trunc and floor division
    do so, rounding the reciprocal once in the op's math type; on the CPU they divide."""
    out = ctx.out
    if not isinstance(out, torch.Tensor) or out.device.type != "cuda":
        return False
    if isinstance(b, TensorValue) and not is_host_scalar(ctx.node.args[1].meta.get("val")):
        return False  # (a TensorValue divisor comes from an FX node)
    return dtypes.is_float(promote(Kind.INT_TO_FLOAT, a, b)[0]) and dtypes.is_float(out.dtype)


def _times_reciprocal(x: Expr, b: Expr) -> Expr:
    return rounded_mul(x, _reciprocal(b))


def _reciprocal(b: Expr) -> Expr:
    """``1 / b`` rounded once in float64 or float32 (eager's math type for float16 and
    bfloat16 too): its ``inv_b``; folded here for a constant ``b``."""
    if b.op is not Op.CONST:
        return div(c(1.0, b), b)
    math_type = torch.float64 if b.dtype is torch.float64 else torch.float32
    one = torch.tensor(1.0, dtype=math_type)
    return const((one / torch.tensor(b.arg, dtype=math_type)).item(), b.dtype)


def _floordiv_by_reciprocal(x: Expr, b: Expr) -> Expr:
    """Python's ``x // b`` as eager's CUDA kernel computes it for a scalar ``b``: the
    exact ``fmod``, the quotient of ``x - fmod`` times the reciprocal, moved down for a
    remainder of the wrong sign and rounded to the nearest integer (a zero quotient keeps
    the sign of ``x / b``). Division by zero is a true division (``x * inf``)."""
    inv = _reciprocal(b)
    if b.arg == 0:
        return mul(x, inv)
    m = binary(Op.FMOD, x, b)
    zero, one = c(0, x), c(1, x)
    past = binary(Op.GT if b.arg < 0 else Op.LT, m, zero)  # a remainder of the other sign than b
    q = rounded_mul(sub(x, m), inv)
    q = where(past, sub(q, one), q)
    f = unary(Op.FLOOR, q)
    f = where(binary(Op.GT, sub(q, f), c(0.5, x)), add(f, one), f)
    return where(binary(Op.EQ, q, zero), binary(Op.COPYSIGN, zero, mul(x, inv)), f)


@register(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)
@reads_as_stored
def _remainder(ctx, a, b):
    return pointwise(ctx, lambda x, y: binary(Op.MOD, x, divisor(ctx, y)), a, b)


@register(aten.fmod.Tensor, aten.fmod.Scalar)
@reads_as_stored
def _fmod(ctx, a, b):
    return pointwise(ctx, lambda x, y: binary(Op.FMOD, x, divisor(ctx, y)), a, b)
