"""Lowering rules for reductions: sum, mean, prod, amax/amin, max/min with
indices, argmax/argmin, var/std and var_mean/std_mean (one-pass Welford; var and std
of float32 accumulated in double on the CPU, as eager's), any/all.

Takes: a ``TensorValue``, the reduced dims and keepdim. Gives: reduction nodes
(``ComputeNode`` with a ``Reduction``) whose body reads the input with reduced
dims replaced by reduction variables ``r0, r1, ...``, followed where needed by a
pointwise node (``mean = sum / n``, ``var = m2 / (n - correction)``).
"""
from __future__ import annotations

import math

import torch

from braze.ir import dtypes
from braze.ir import symbols, unbacked
from braze.ir.expr import Op, binary, cast, const, index, unary
from braze.ir.graph import ReduceOp, Reduction, out_vars, reduce_vars
from braze.lower.core import TensorValue, Unsupported, register
from braze.lower.pointwise import finish, truthy
from braze.lower.rounding import eager_rounded
from braze.lower.views import norm_dim

aten = torch.ops.aten


def reduced_dims(x: TensorValue, dims) -> list[int]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.ndim))
    if isinstance(dims, int):
        dims = [dims]
    dims = sorted({norm_dim(d, x.ndim) for d in dims})
    return dims if x.ndim else []  # a 0-d tensor "reduced" over dim 0 or -1


def _kept_sizes(x: TensorValue, dims, keepdim: bool) -> tuple:
    dims = reduced_dims(x, dims)
    if keepdim:
        return tuple(1 if k in dims else s for k, s in enumerate(x.sizes))
    return tuple(s for k, s in enumerate(x.sizes) if k not in dims)


def reduce(ctx, x: TensorValue, dims, keepdim: bool, op: ReduceOp, dtype, body_dtype=None) -> TensorValue:
    """A reduction node folding ``x`` over ``dims`` with ``op``; result ``dtype``."""
    dims = reduced_dims(x, dims)
    kept = [k for k in range(x.ndim) if k not in dims]
    out_sizes = tuple(1 if k in dims else x.sizes[k] for k in range(x.ndim)) if keepdim else \
        tuple(x.sizes[k] for k in kept)
    red_sizes = tuple(x.sizes[k] for k in dims)
    ovars = out_vars(out_sizes)
    rvars = reduce_vars(red_sizes)
    indices = [None] * x.ndim
    for pos, k in enumerate(dims):
        indices[k] = rvars[pos]
    for pos, k in enumerate(kept):
        indices[k] = ovars[k if keepdim else pos]
    body = x.at(indices)
    if body_dtype is not None:
        body = cast(body, body_dtype)
    numel = math.prod(red_sizes)
    if op not in (ReduceOp.SUM, ReduceOp.PROD, ReduceOp.ANY, ReduceOp.ALL) \
            and unbacked.decide(numel, "==", 0, unbacked=True):  # (eager raises where it is empty)
        raise Unsupported(f"{op.value} over an empty dimension")
    if unbacked.decide(numel, "<=", 1, unbacked=False):
        return _trivial(ctx, op, body, numel, dtype, out_sizes)
    return ctx.compute(dtype, out_sizes, body, reduction=Reduction(op, red_sizes))


def _trivial(ctx, op: ReduceOp, body, numel: int, dtype, sizes) -> TensorValue:
    """A reduction over zero or one element is pointwise."""
    if numel == 0:
        empty = {ReduceOp.SUM: 0, ReduceOp.PROD: 1, ReduceOp.ANY: False, ReduceOp.ALL: True}[op]
        return finish(ctx, const(empty, dtypes.compute_dtype(dtype)), dtype, sizes)
    from braze.ir.expr import substitute
    body = substitute(body, {v: index(0) for v in _rvars_of(body)})
    if op in (ReduceOp.ARGMAX, ReduceOp.ARGMIN):
        return finish(ctx, const(0, torch.int64), dtype, sizes)
    if op is ReduceOp.WELFORD_M2:  # (x - mean)^2 with mean = x, as eager: NaN for a NaN or an inf
        diff = binary(Op.SUB, body, body)
        return finish(ctx, binary(Op.MUL, diff, diff), dtype, sizes)
    if op in (ReduceOp.ANY, ReduceOp.ALL):
        body = truthy(body)
    body = cast(body, dtypes.compute_dtype(dtype))
    if op in (ReduceOp.SUM, ReduceOp.WELFORD_MEAN) and dtypes.is_float(body.dtype):
        body = binary(Op.ADD, body, const(0.0, body.dtype))  # eager's 0 + x: a sum (mean) of -0.0 is +0.0
    return finish(ctx, body, dtype, sizes)


def _rvars_of(body):
    from braze.ir.expr import free_vars
    return [v for v in free_vars(body) if v.name.startswith("r")]


def _out_dtype(ctx, default):
    out = ctx.out
    if isinstance(out, torch.Tensor):
        return out.dtype
    if isinstance(out, (list, tuple)) and isinstance(out[0], torch.Tensor):
        return out[0].dtype
    return default


@register(aten.sum.dim_IntList, aten.sum.default)
def _sum(ctx, x, dims=None, keepdim=False, dtype=None):
    out = _out_dtype(ctx, dtype)
    return reduce(ctx, x, dims, keepdim, ReduceOp.SUM, out, body_dtype=dtypes.sum_dtype(out))


@register(aten.prod.dim_int, aten.prod.default)
def _prod(ctx, x, dim=None, keepdim=False, dtype=None):
    out = _out_dtype(ctx, dtype)
    return reduce(ctx, x, dim, keepdim, ReduceOp.PROD, out, body_dtype=dtypes.sum_dtype(out))


@register(aten.mean.dim, aten.mean.default)
def _mean(ctx, x, dims=None, keepdim=False, dtype=None):
    out = _out_dtype(ctx, dtype)
    acc = dtypes.compute_dtype(out)
    total = reduce(ctx, x, dims, keepdim, ReduceOp.SUM, acc, body_dtype=acc)
    n = math.prod(x.sizes[k] for k in reduced_dims(x, dims))
    return finish(ctx, binary(Op.TRUEDIV, total.expr, const(n, acc)), out, total.sizes)


@register(aten.amax.default)
def _amax(ctx, x, dims=(), keepdim=False):
    if x.dtype is torch.bool:  # the max of booleans is "any"
        return reduce(ctx, x, dims, keepdim, ReduceOp.ANY, torch.bool)
    return reduce(ctx, x, dims, keepdim, ReduceOp.MAX, x.dtype, body_dtype=dtypes.compute_dtype(x.dtype))


@register(aten.amin.default)
def _amin(ctx, x, dims=(), keepdim=False):
    if x.dtype is torch.bool:  # the min of booleans is "all"
        return reduce(ctx, x, dims, keepdim, ReduceOp.ALL, torch.bool)
    return reduce(ctx, x, dims, keepdim, ReduceOp.MIN, x.dtype, body_dtype=dtypes.compute_dtype(x.dtype))


@register(aten.max.default)
def _max_all(ctx, x):
    return _amax(ctx, x)


@register(aten.min.default)
def _min_all(ctx, x):
    return _amin(ctx, x)


@register(aten.max.dim)
def _max_dim(ctx, x, dim, keepdim=False):
    return (_amax(ctx, x, [dim], keepdim), _arg(ctx, x, dim, keepdim, ReduceOp.ARGMAX))


@register(aten.min.dim)
def _min_dim(ctx, x, dim, keepdim=False):
    return (_amin(ctx, x, [dim], keepdim), _arg(ctx, x, dim, keepdim, ReduceOp.ARGMIN))


def _arg(ctx, x, dim, keepdim, op):
    x = eager_rounded(ctx, x)  # (ties and order as eager sees them)
    body = torch.uint8 if x.dtype is torch.bool else dtypes.compute_dtype(x.dtype)  # bool: compared as 0/1
    if dim is None:
        from braze.lower.views import reshape
        flat = reshape(x, [x.numel])
        result = reduce(ctx, flat, [0], False, op, torch.int64, body)
        if keepdim:
            return reshape(result, [1] * x.ndim)
        return result
    return reduce(ctx, x, [dim], keepdim, op, torch.int64, body)


@register(aten.argmax.default)
def _argmax(ctx, x, dim=None, keepdim=False):
    return _arg(ctx, x, dim, keepdim, ReduceOp.ARGMAX)


@register(aten.argmin.default)
def _argmin(ctx, x, dim=None, keepdim=False):
    return _arg(ctx, x, dim, keepdim, ReduceOp.ARGMIN)


def _logical(ctx, x, dims, keepdim, op):
    x = eager_rounded(ctx, x)  # (a float16 1e-8 is 0)
    body_x = TensorValue(torch.bool, x.sizes, truthy(cast(x.expr, dtypes.compute_dtype(x.dtype))))
    out = _out_dtype(ctx, torch.bool)
    result = reduce(ctx, body_x, dims, keepdim, op, torch.bool)
    if out is not torch.bool:
        return finish(ctx, cast(result.expr, out), out, result.sizes)
    return result


@register(aten.any.default, aten.any.dim, aten.any.dims)
def _any(ctx, x, dims=None, keepdim=False):
    return _logical(ctx, x, dims, keepdim, ReduceOp.ANY)


@register(aten.all.default, aten.all.dim, aten.all.dims)
def _all(ctx, x, dims=None, keepdim=False):
    return _logical(ctx, x, dims, keepdim, ReduceOp.ALL)


def welford(ctx, x, dims, keepdim, correction, acc=None):
    """(variance, mean) of ``x`` over ``dims`` in one pass, accumulated in ``acc`` (default:
    the dtype ``x`` computes in)."""
    (var, sizes), mean = _moments(ctx, x, dims, keepdim, correction, acc)
    var = finish(ctx, var, x.dtype, sizes)
    if x.dtype != mean.dtype:
        mean = finish(ctx, mean.expr, x.dtype, mean.sizes)
    return var, mean


def _moments(ctx, x, dims, keepdim, correction, acc=None):
    """((the variance's expression, its sizes), the mean's node), both of dtype ``acc``: the
    variance unrounded, for a ``sqrt`` to read."""
    if not dtypes.is_float(x.dtype):
        raise Unsupported("variance of an integer tensor")
    acc = acc or dtypes.compute_dtype(x.dtype)
    if math.prod(x.sizes[k] for k in reduced_dims(x, dims)) == 0:  # eager: NaN, NaN
        from braze.lower.indexing import filled
        sizes = _kept_sizes(x, dims, keepdim)
        return (const(math.nan, acc), sizes), filled(ctx, math.nan, acc, sizes)
    mean = reduce(ctx, x, dims, keepdim, ReduceOp.WELFORD_MEAN, acc, body_dtype=acc)
    m2 = reduce(ctx, x, dims, keepdim, ReduceOp.WELFORD_M2, acc, body_dtype=acc)
    n = math.prod(x.sizes[k] for k in reduced_dims(x, dims))
    correction = 1 if correction is None else correction
    if symbols.is_symbolic(n) and float(correction).is_integer():  # a symbolic count stays symbolic
        correction = int(correction)
    denom = const(max(0, n - correction), acc)
    return (binary(Op.TRUEDIV, m2.expr, denom), m2.sizes), mean


def _moment_dtype(ctx, dtype):
    """The accumulator of ``var``/``std`` as eager's: float32 moments in double on the CPU
    (ATen's ``acc_type`` there), so that squares past float32's range stay finite."""
    if dtype is torch.float32 and ctx.graph.device.type == "cpu":
        return torch.float64
    return dtypes.compute_dtype(dtype)


@register(aten.var_mean.correction)
def _var_mean(ctx, x, dims=None, *, correction=None, keepdim=False):
    return welford(ctx, x, dims, keepdim, correction)


@register(aten.var.correction)
def _var(ctx, x, dims=None, *, correction=None, keepdim=False):
    return welford(ctx, x, dims, keepdim, correction, _moment_dtype(ctx, x.dtype))[0]


@register(aten.std.correction)
def _std(ctx, x, dims=None, *, correction=None, keepdim=False):
    (var, sizes), _ = _moments(ctx, x, dims, keepdim, correction, _moment_dtype(ctx, x.dtype))
    return finish(ctx, unary(Op.SQRT, var), x.dtype, sizes)


@register(aten.std_mean.correction)
def _std_mean(ctx, x, dims=None, *, correction=None, keepdim=False):
    (var, sizes), mean = _moments(ctx, x, dims, keepdim, correction, _moment_dtype(ctx, x.dtype))
    std = finish(ctx, unary(Op.SQRT, var), x.dtype, sizes)
    return std, (finish(ctx, mean.expr, x.dtype, mean.sizes) if x.dtype != mean.dtype else mean)


@register(aten.linalg_vector_norm.default)
def _vector_norm(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """``||x||_ord`` over ``dim``: a sum (or max/min) of |x| in the result's compute
    dtype, then the root; the same reduction ATen performs."""
    out = _out_dtype(ctx, dtype)
    if not dtypes.is_float(out) or isinstance(ord, bool):
        raise Unsupported(f"vector norm to {out}")
    acc = dtypes.compute_dtype(out)
    magnitude = TensorValue(acc, x.sizes, unary(Op.ABS, cast(x.expr, acc)))
    return norm_of(ctx, magnitude, ord, dim, keepdim, out)


@register(aten.dist.default)
def _dist(ctx, x, y, p=2):
    """``||x - y||_p`` over every element."""
    from braze.lower.pointwise import broadcast_sizes, expand_to
    out = _out_dtype(ctx, torch.float32)
    if not dtypes.is_float(out):
        raise Unsupported(f"dist to {out}")
    acc = dtypes.compute_dtype(out)
    sizes = broadcast_sizes(x.sizes, y.sizes)
    diff = binary(Op.SUB, cast(expand_to(x, sizes), acc), cast(expand_to(y, sizes), acc))
    return norm_of(ctx, TensorValue(acc, sizes, unary(Op.ABS, diff)), p, None, False, out)


def norm_of(ctx, magnitude: TensorValue, ord, dim, keepdim, out) -> TensorValue:
    """The ``ord``-norm of non-negative ``magnitude`` (in its compute dtype) as ``out``."""
    acc = magnitude.dtype
    if ord in (math.inf, -math.inf):
        op = ReduceOp.MAX if ord > 0 else ReduceOp.MIN
        total = reduce(ctx, magnitude, dim, keepdim, op, acc, body_dtype=acc)
        return finish(ctx, total.expr, out, total.sizes)
    if ord == 0:
        nonzero = TensorValue(acc, magnitude.sizes, cast(binary(Op.NE, magnitude.expr, const(0, acc)), acc))
        total = reduce(ctx, nonzero, dim, keepdim, ReduceOp.SUM, acc, body_dtype=dtypes.sum_dtype(acc))
        return finish(ctx, total.expr, out, total.sizes)
    power = {1: lambda e: e, 2: lambda e: binary(Op.MUL, e, e)}.get(
        ord, lambda e: binary(Op.POW, e, const(float(ord), acc)))
    terms = TensorValue(acc, magnitude.sizes, power(magnitude.expr))
    total = reduce(ctx, terms, dim, keepdim, ReduceOp.SUM, acc, body_dtype=dtypes.sum_dtype(acc))
    root = {1: lambda e: e, 2: lambda e: unary(Op.SQRT, e)}.get(
        ord, lambda e: binary(Op.POW, e, const(1.0 / ord, acc)))
    return finish(ctx, root(cast(total.expr, acc)), out, total.sizes)
