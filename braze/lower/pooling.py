"""Lowering rules for 2-D max pooling: ``max_pool2d_with_indices`` and its backward.

Takes: ``TensorValue``s of 3-D ``(C, H, W)`` or 4-D ``(N, C, H, W)`` tensors and the
pooling arguments (kernel size, stride, padding, dilation, ceil mode).
Gives: pointwise compute nodes over the output positions, each window unrolled into
loads guarded by bounds conditions, so pooling fuses with its producers and consumers.

Forward: eager's loop, replayed element by element in window order: an element
replaces the running maximum when it is the first valid one, is greater, or is NaN.
So ties keep the first maximum, a NaN propagates and its index is the window's last
NaN, and a window of ``-inf`` gives its first valid position, all as eager does. The
index output is ``ih * W + iw`` (int64), the flat position in the input plane.

Backward: ``grad_input[h, w]`` sums ``grad_output[oh, ow]`` over the few windows that
can contain ``(h, w)`` and whose saved index is ``h * W + w``, in eager's order
(ascending ``oh``, then ``ow``), in float32 for bf16/fp16 and rounded once.

Windows of more than ``MAX_UNROLLED`` elements, and backward positions covered by more
than ``MAX_UNROLLED`` windows, raise ``Unsupported``: the op runs through ATen.
"""
from __future__ import annotations

import math

import torch

from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir.expr import Expr, Op, binary, cast, const, unary, where
from braze.ir.graph import Layout, out_vars
from braze.lower.core import TensorValue, Unsupported, register, sizes_of, strides_of
from braze.lower.pointwise import finish

aten = torch.ops.aten

MAX_UNROLLED = 25  # elements of one window (forward), windows over one position (backward)
TRUE = const(True, torch.bool)
FALSE = const(False, torch.bool)


# ----------------------------------------------------------------------------- arguments

def _pair(value, default=None) -> tuple:
    """A pooling argument (int, or list of 1 or 2 ints) as ``(height, width)``."""
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        value = default
    if isinstance(value, int):
        return (value, value)
    if len(value) == 1:
        return (int(value[0]), int(value[0]))
    if len(value) != 2 or not all(isinstance(v, int) for v in value):
        raise Unsupported(f"pooling argument {value!r}")
    return tuple(value)


def _pool_arguments(kernel_size, stride, padding, dilation) -> tuple:
    """(kernel, stride, padding, dilation), each a ``(height, width)`` pair."""
    kernel = _pair(kernel_size)
    return kernel, _pair(stride, kernel), _pair(padding), _pair(dilation)


def _check_input(x: TensorValue) -> None:
    if x.ndim not in (3, 4):
        raise Unsupported(f"max pooling of a {x.ndim}-d tensor")
    if x.dtype is torch.bool or not dtypes.is_supported(x.dtype):
        raise Unsupported(f"max pooling of {x.dtype}")


# ----------------------------------------------------------------------------- booleans

def _logical(op: Op, a: Expr, b: Expr) -> Expr:
    """``a and b`` or ``a or b``, folding a constant operand (its identity drops out, its
    absorbing value wins)."""
    identity = op is Op.AND
    for x, y in ((a, b), (b, a)):
        if x.op is Op.CONST:
            return y if bool(x.arg) == identity else x
    return binary(op, a, b)


def _and(a: Expr, b: Expr) -> Expr:
    return _logical(Op.AND, a, b)


def _or(a: Expr, b: Expr) -> Expr:
    return _logical(Op.OR, a, b)


def _not(a: Expr) -> Expr:
    if a.op is Op.CONST:
        return FALSE if a.arg else TRUE
    return unary(Op.LOGICAL_NOT, a)


def _inside(position: Expr, size: int) -> Expr:
    """``0 <= position < size`` (index arithmetic, folded where bounds prove it)."""
    return _and(S.compare(Op.GE, position, 0), S.compare(Op.LT, position, size))


# ----------------------------------------------------------------------------- layouts

def _compute_like(ctx, meta, dtype, body: Expr) -> TensorValue:
    """A compute node for one result of a multi-result op, preferring ``meta``'s layout
    (eager's: channels-last pooling gives channels-last results)."""
    sizes = sizes_of(meta)
    value = ctx.compute(dtype, sizes, body)
    layout = Layout(sizes, strides_of(meta), 0)
    if layout.is_dense():
        ctx.graph.producer(value.expr.arg).preferred = layout
    return value


# ----------------------------------------------------------------------------- forward

def _lowest(dtype) -> Expr:
    """The running maximum before any element: ``-inf``, or the integer minimum."""
    if dtypes.is_float(dtype):
        return const(-math.inf, dtypes.compute_dtype(dtype))
    return const(torch.iinfo(dtype).min, dtype)


def _window_elements(x: TensorValue, out_sizes, kernel, stride, padding, dilation):
    """Each window element of output position ``out_vars(out_sizes)``, in eager's order:
    ``(valid, value, flat input position)``; ``valid`` is False inside the padding."""
    *batch, oh, ow = out_vars(out_sizes)
    height, width = x.sizes[-2:]
    acc = dtypes.compute_dtype(x.dtype)
    elements = []
    for ky in range(kernel[0]):
        ih = S.add(S.mul(oh, stride[0]), ky * dilation[0] - padding[0])
        for kx in range(kernel[1]):
            iw = S.add(S.mul(ow, stride[1]), kx * dilation[1] - padding[1])
            valid = _and(_inside(ih, height), _inside(iw, width))
            # eager reads the window's inside only: a check in x's expression checks only there
            value = where(valid, cast(x.at([*batch, ih, iw]), acc), const(0, acc), domain="then")
            position = cast(S.add(S.mul(ih, width), iw), torch.int64)
            elements.append((valid, value, position))
    return elements


def _replaces_maximum(value: Expr, best: Expr, first: Expr) -> Expr:
    """Whether a valid element replaces the running maximum ``best`` (eager's rule)."""
    greater = binary(Op.GT, value, best)
    if dtypes.is_float(value.dtype):
        greater = _or(greater, unary(Op.ISNAN, value))
    return _or(first, greater)


def _window_maximum(elements, dtype) -> tuple[Expr, Expr]:
    """(maximum, flat position of the element eager picks) over ``elements``."""
    best, position = _lowest(dtype), const(0, torch.int64)
    seen = FALSE  # whether some earlier element was valid
    for valid, value, flat in elements:
        update = _and(valid, _replaces_maximum(value, best, _not(seen)))
        best, position = where(update, value, best), where(update, flat, position)
        seen = _or(seen, valid)
    return best, position


@register(aten.max_pool2d_with_indices.default)
def _max_pool2d_with_indices(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    _check_input(x)
    kernel, stride, padding, dilation = _pool_arguments(kernel_size, stride, padding, dilation)
    if kernel[0] * kernel[1] > MAX_UNROLLED:
        raise Unsupported(f"pooling window of {kernel[0] * kernel[1]} elements")
    values_meta, indices_meta = ctx.out
    out_sizes = sizes_of(values_meta)
    elements = _window_elements(x, out_sizes, kernel, stride, padding, dilation)
    best, position = _window_maximum(elements, x.dtype)
    if x.dtype not in dtypes.LOW_PRECISION:  # low precision: the float32 body is rounded on store
        best = cast(best, x.dtype)
    values = _compute_like(ctx, values_meta, x.dtype, best)
    indices = _compute_like(ctx, indices_meta, torch.int64, position)
    return values, indices


# ----------------------------------------------------------------------------- backward

def _windows_per_position(kernel: int, stride: int, dilation: int) -> int:
    """The most output windows along one dimension that contain one input position."""
    extent = (kernel - 1) * dilation + 1
    return -(-extent // stride)


def _covering_windows(position: Expr, out_size: int, kernel, stride, padding, dilation):
    """The output positions along one dimension whose windows may contain input
    ``position``, ascending: ``(output index, whether it is a real window over it)``."""
    padded = S.add(position, padding)
    last = S.floordiv(padded, stride)
    extent = (kernel - 1) * dilation + 1
    count = _windows_per_position(kernel, stride, dilation)
    windows = []
    for back in reversed(range(count)):
        out = S.sub(last, back)
        covers = S.compare(Op.LE, S.sub(padded, S.mul(out, stride)), extent - 1)
        windows.append((out, _and(_inside(out, out_size), covers)))
    return windows


def _gradient_sum(grad_output: TensorValue, indices: TensorValue, in_sizes, kernel, stride,
                  padding, dilation) -> Expr:
    """``grad_input`` at ``out_vars(in_sizes)``: the gradients of the windows whose
    maximum was this position, added in eager's order in the compute dtype."""
    *batch, h, w = out_vars(in_sizes)
    out_h, out_w = grad_output.sizes[-2:]
    target = cast(S.add(S.mul(h, in_sizes[-1]), w), torch.int64)
    acc = dtypes.compute_dtype(grad_output.dtype)
    total = const(0, acc)
    rows = _covering_windows(h, out_h, kernel[0], stride[0], padding[0], dilation[0])
    cols = _covering_windows(w, out_w, kernel[1], stride[1], padding[1], dilation[1])
    for oh, row_ok in rows:
        for ow, col_ok in cols:
            at = [*batch, oh, ow]
            ok = _and(row_ok, col_ok)  # a window that exists: eager reads nothing else
            index = where(ok, indices.at(at), const(-1, indices.dtype), domain="then")  # -1: no target
            grad = where(ok, cast(grad_output.at(at), acc), const(0, acc), domain="then")
            total = where(binary(Op.EQ, index, target), binary(Op.ADD, total, grad), total)
    return total


@register(aten.max_pool2d_with_indices_backward.default)
def _max_pool2d_with_indices_backward(ctx, grad_output, x, kernel_size, stride, padding, dilation,
                                      ceil_mode, indices):
    _check_input(x)
    if not dtypes.is_float(grad_output.dtype) or indices.dtype is not torch.int64:
        raise Unsupported(f"max pooling backward of {grad_output.dtype}")
    kernel, stride, padding, dilation = _pool_arguments(kernel_size, stride, padding, dilation)
    overlap = math.prod(_windows_per_position(*args) for args in zip(kernel, stride, dilation))
    if overlap > MAX_UNROLLED:
        raise Unsupported(f"{overlap} pooling windows over one input position")
    if tuple(grad_output.sizes) != tuple(indices.sizes):
        raise Unsupported("gradient and indices of different sizes")
    body = _gradient_sum(grad_output, indices, x.sizes, kernel, stride, padding, dilation)
    return finish(ctx, body, grad_output.dtype, x.sizes)
