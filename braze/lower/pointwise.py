"""Lowering rules for elementwise ops: arithmetic, math, comparisons, bitwise,
``where``, ``clamp`` and dtype conversions (division: ``division``).

Takes: ``TensorValue``s and Python scalars from ``braze.lower.core``.
Gives: one ``ComputeNode`` per op, computed in eager's dtypes: inputs promoted as
eager promotes them (``torch._prims_common.elementwise_dtypes``), bf16/fp16
computed in float32 and rounded once when stored.
"""
from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as Kind
from torch._prims_common import elementwise_dtypes

from braze import config
from braze.ir import dtypes
from braze.ir import symbols
from braze.ir.size_floats import is_size_float
from braze.ir.expr import Expr, Op, binary, cast, const, cuda_rsqrt, index, unary, where
from braze.ir.graph import out_vars
from braze.lower.core import TensorValue, Unsupported, register, sizes_of
from braze.lower.rounding import cpu_scalar_rounded, eager_rounded, reads_as_stored

aten = torch.ops.aten
prims = torch.ops.prims


# ----------------------------------------------------------------------------- helpers

def broadcast_sizes(*shapes) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for k, size in enumerate(shape):
            j = ndim - len(shape) + k
            if size != 1:
                if out[j] not in (1, size):
                    raise Unsupported(f"shapes {shapes} do not broadcast")
                out[j] = size
    return tuple(out)


def expand_to(tv: TensorValue, sizes) -> Expr:
    """``tv`` read at the output variables of ``sizes`` (right-aligned broadcast)."""
    sizes = tuple(sizes)
    if symbols.same(tv.sizes, sizes):  # (structurally: the general path below holds for any sizes)
        return tv.expr
    vars_ = out_vars(sizes)
    lead = len(sizes) - len(tv.sizes)
    return tv.at([index(0) if size == 1 else vars_[lead + k] for k, size in enumerate(tv.sizes)])


@lru_cache(maxsize=None)
def _stand_in(dtype, scalar: bool):
    return torch.empty(() if scalar else (1,), dtype=dtype, device="meta")


def promote(kind, *args) -> tuple:
    """(compute dtype, result dtype) of an elementwise op, as eager decides them."""
    stand_ins = [_stand_in(a.dtype, a.ndim == 0) if isinstance(a, TensorValue) else
                 2 if symbols.is_symbolic(a) else 2.0 if is_size_float(a) else a for a in args if a is not None]
    return elementwise_dtypes(*stand_ins, type_promotion_kind=kind)


def as_expr(value, sizes, dtype) -> Expr:
    if isinstance(value, TensorValue):
        return cast(expand_to(value, sizes), dtype)
    if isinstance(value, (bool, int, float)) or symbols.is_symbolic(value) or is_size_float(value):
        return const(value, dtype)
    raise Unsupported(f"argument {value!r}")


def result_dtype(ctx, default):
    out = ctx.out
    return out.dtype if isinstance(out, torch.Tensor) else default


def pointwise(ctx, fn, *args, kind=Kind.DEFAULT, compute=None, sizes=None) -> TensorValue:
    """A compute node applying ``fn`` to ``args`` broadcast together."""
    tensors = [a for a in args if isinstance(a, TensorValue)]
    if sizes is None:
        out = ctx.out
        sizes = sizes_of(out) if isinstance(out, torch.Tensor) else broadcast_sizes(*(t.sizes for t in tensors))
    promoted_compute, promoted_result = promote(kind, *args)
    compute = compute or promoted_compute
    result = result_dtype(ctx, promoted_result)
    for dt in (compute, result):
        if not dtypes.is_supported(dt):
            raise Unsupported(f"dtype {dt}")
    body = fn(*[as_expr(a, sizes, compute) for a in _in_common_dtype(args)])
    return finish(ctx, body, result, sizes)


def _in_common_dtype(args) -> list:
    """The integer and bool tensor operands of a bf16/fp16 op as eager converts them: to the
    operands' common dtype first (``int32 - bf16`` subtracts the int rounded to bf16), then to
    the compute dtype. Fuzzer seed 305, program 2625: 4099 - bf16(4099) was 3, eager's 0."""
    def exact(a):
        return not isinstance(a, TensorValue) or dtypes.is_float(a.dtype)
    if all(exact(a) for a in args):
        return list(args)
    common = promote(Kind.DEFAULT, *args)[1]
    if common not in dtypes.LOW_PRECISION:
        return list(args)
    return [a if exact(a) else TensorValue(common, a.sizes, cast(a.expr, common)) for a in args]


def finish(ctx, body: Expr, result, sizes) -> TensorValue:
    """Store ``body`` as a node of dtype ``result`` (low precision: rounded on store)."""
    keep_wide = result in dtypes.LOW_PRECISION and body.dtype is torch.float32
    if body.dtype != result and not keep_wide:
        body = cast(body, result)
    elif keep_wide and config.low_precision_rounding == "every_op":
        body = cast(cast(body, result), torch.float32)
    return ctx.compute(result, sizes, body)


def c(value, like: Expr) -> Expr:
    return const(value, like.dtype)


def add(a, b): return binary(Op.ADD, a, b)
def sub(a, b): return binary(Op.SUB, a, b)
def mul(a, b): return binary(Op.MUL, a, b)
def div(a, b): return binary(Op.TRUEDIV, a, b)


# ----------------------------------------------------------------------------- unary

FLOAT_UNARY = {
    aten.exp: Op.EXP, aten.exp2: Op.EXP2, aten.expm1: Op.EXPM1, aten.log: Op.LOG,
    aten.log2: Op.LOG2, aten.log10: Op.LOG10, aten.log1p: Op.LOG1P, aten.sqrt: Op.SQRT,
    aten.sin: Op.SIN, aten.cos: Op.COS, aten.tan: Op.TAN, aten.asin: Op.ASIN,
    aten.acos: Op.ACOS, aten.atan: Op.ATAN, aten.sinh: Op.SINH, aten.cosh: Op.COSH,
    aten.tanh: Op.TANH, aten.asinh: Op.ASINH, aten.acosh: Op.ACOSH, aten.atanh: Op.ATANH,
    aten.erf: Op.ERF, aten.erfc: Op.ERFC, aten.erfinv: Op.ERFINV, aten.lgamma: Op.LGAMMA,
    aten.digamma: Op.DIGAMMA, aten.sigmoid: Op.SIGMOID, aten.reciprocal: Op.RECIPROCAL,
}
ROUNDING = {aten.floor: Op.FLOOR, aten.ceil: Op.CEIL, aten.trunc: Op.TRUNC, aten.round: Op.ROUND}
PREDICATES = {aten.isnan: Op.ISNAN, aten.isinf: Op.ISINF, aten.signbit: Op.SIGNBIT}


def _unary_rule(op: Op, kind):
    def rule(ctx, x):
        return pointwise(ctx, lambda v: unary(op, v), x, kind=kind)
    return rule


for _packet, _op in FLOAT_UNARY.items():
    register(_packet.default)(_unary_rule(_op, Kind.INT_TO_FLOAT))
for _packet, _op in PREDICATES.items():
    register(_packet.default)(reads_as_stored(_unary_rule(_op, Kind.ALWAYS_BOOL)))


@register(aten.rsqrt.default)
def _rsqrt(ctx, x):
    return pointwise(ctx, _rsqrt_on(ctx), x, kind=Kind.INT_TO_FLOAT)


def _rsqrt_on(ctx):
    """Eager's rsqrt on the current node's device: CUDA's ``rsqrt`` function on CUDA (its
    kernels call it for ``rsqrt``, ``pow(x, -0.5)`` and LayerNorm's ``rstd``), ``1 / sqrt(x)``
    on the CPU."""
    return cuda_rsqrt if _on_cuda(ctx) else (lambda v: unary(Op.RSQRT, v))


def _on_cuda(ctx) -> bool:
    """Does the current node compute on a CUDA device (whose kernels eager's numerics follow)?"""
    return isinstance(ctx.out, torch.Tensor) and ctx.out.device.type == "cuda"


def _rounding_rule(op: Op):
    @reads_as_stored
    def rule(ctx, x):
        if not dtypes.is_float(x.dtype):
            return pointwise(ctx, lambda v: v, x)
        return pointwise(ctx, lambda v: unary(op, v), x)
    return rule


for _packet, _op in ROUNDING.items():
    register(_packet.default)(_rounding_rule(_op))


@register(aten.polygamma.default)
def _polygamma(ctx, n, x):
    if n != 0:
        raise Unsupported(f"polygamma of order {n}")
    return pointwise(ctx, lambda v: unary(Op.DIGAMMA, v), x, kind=Kind.INT_TO_FLOAT)


@register(aten.round.decimals)
@reads_as_stored
def _round_decimals(ctx, x, decimals=0):
    """Eager's ``nearbyint(x * 10^d) / 10^d`` (``nearbyint(x / 10^-d) * 10^-d`` for d < 0).
    CUDA's kernel computes in the tensor's dtype: a bf16/fp16 product is rounded to it before
    ``nearbyint`` (measured on the H100: 0 of 65,536 differ so, thousands in float32)."""
    if not dtypes.is_float(x.dtype):
        raise Unsupported("round with decimals of an integer tensor")
    scale = float(10 ** abs(decimals))
    if decimals < 0:
        return pointwise(ctx, lambda v: mul(unary(Op.ROUND, div(v, c(scale, v))), c(scale, v)), x)
    in_dtype = _on_cuda(ctx) and x.dtype in dtypes.LOW_PRECISION

    def product(v):
        p = mul(v, c(scale, v))
        return cast(cast(p, x.dtype), v.dtype) if in_dtype else p
    return pointwise(ctx, lambda v: div(unary(Op.ROUND, product(v)), c(scale, v)), x)


@register(aten.angle.default)
def _angle(ctx, x):
    """Of a real number: pi if negative, else 0; NaN stays NaN."""
    def fn(v):
        return where(unary(Op.ISNAN, v), v, where(binary(Op.LT, v, c(0, v)), c(math.pi, v), c(0, v)))
    return pointwise(ctx, fn, x, kind=Kind.INT_TO_FLOAT)


@register(aten.neg.default)
def _neg(ctx, x):
    return pointwise(ctx, lambda v: unary(Op.NEG, v), x)


@register(aten.abs.default)
def _abs(ctx, x):
    return pointwise(ctx, lambda v: v if v.dtype is torch.bool else unary(Op.ABS, v), x)


@register(aten.sign.default, aten.sgn.default)
@reads_as_stored
def _sign(ctx, x):
    return pointwise(ctx, lambda v: v if v.dtype is torch.bool else unary(Op.SIGN, v), x)


@register(aten.bitwise_not.default)
def _bitwise_not(ctx, x):
    if x.dtype is torch.bool:
        return pointwise(ctx, lambda v: unary(Op.LOGICAL_NOT, v), x)
    return pointwise(ctx, lambda v: unary(Op.BITWISE_NOT, v), x)


@register(aten.logical_not.default)
@reads_as_stored
def _logical_not(ctx, x):
    return pointwise(ctx, lambda v: unary(Op.LOGICAL_NOT, truthy(v)), x, kind=Kind.ALWAYS_BOOL,
                     compute=x.dtype if dtypes.compute_dtype(x.dtype) == x.dtype else torch.float32)


@register(aten.isfinite.default)
@reads_as_stored
def _isfinite(ctx, x):
    if not dtypes.is_float(x.dtype):
        return pointwise(ctx, lambda v: const(True, torch.bool), x, kind=Kind.ALWAYS_BOOL)
    return pointwise(ctx, lambda v: binary(Op.EQ, sub(v, v), c(0.0, v)), x, kind=Kind.ALWAYS_BOOL)


@register(aten.frac.default)
@reads_as_stored
def _frac(ctx, x):
    return pointwise(ctx, lambda v: sub(v, unary(Op.TRUNC, v)), x)


@register(aten.relu.default)
def _relu(ctx, x):
    if x.dtype is torch.bool:
        return pointwise(ctx, lambda v: v, x)
    return pointwise(ctx, lambda v: where(binary(Op.GT, v, c(0, v)), v,
                                          where(unary(Op.ISNAN, v), v, c(0, v)) if dtypes.is_float(v.dtype)
                                          else c(0, v)), x)


@register(aten.gelu.default)
def _gelu(ctx, x, approximate="none"):
    def fn(v):
        half = mul(c(0.5, v), v)
        if approximate == "tanh":
            inner = mul(c(math.sqrt(2 / math.pi), v), add(v, mul(c(0.044715, v), mul(v, mul(v, v)))))
            return mul(half, add(c(1.0, v), unary(Op.TANH, inner)))
        return mul(half, add(c(1.0, v), unary(Op.ERF, mul(v, c(math.sqrt(0.5), v)))))
    return pointwise(ctx, fn, x, kind=Kind.INT_TO_FLOAT)


@register(aten.silu.default)
def _silu(ctx, x):
    return pointwise(ctx, lambda v: div(v, add(c(1.0, v), unary(Op.EXP, unary(Op.NEG, v)))), x,
                     kind=Kind.INT_TO_FLOAT)


@register(aten.leaky_relu.default)
def _leaky_relu(ctx, x, negative_slope=0.01):
    return pointwise(ctx, lambda v: where(binary(Op.GT, v, c(0, v)), v, mul(v, c(negative_slope, v))), x)


@register(aten.elu.default)
def _elu(ctx, x, alpha=1, scale=1, input_scale=1):
    def fn(v):
        negative = mul(c(alpha * scale, v), unary(Op.EXPM1, mul(v, c(input_scale, v))))
        return where(binary(Op.GT, v, c(0, v)), mul(c(scale, v), v), negative)
    return pointwise(ctx, fn, x)


@register(aten.hardtanh.default)
def _hardtanh(ctx, x, min_val=-1, max_val=1):
    return _clamp(ctx, x, min_val, max_val)


def truthy(v: Expr) -> Expr:
    return v if v.dtype is torch.bool else binary(Op.NE, v, c(0, v))


# ----------------------------------------------------------------------------- binary

@register(aten.add.Tensor, aten.add.Scalar, size_floats=True)
def _add(ctx, a, b, alpha=1):
    a, b = cpu_scalar_rounded(ctx, a, alpha), cpu_scalar_rounded(ctx, b, alpha)

    def fn(x, y):
        if x.dtype is not torch.bool:
            return add(x, _scaled(y, alpha))
        return binary(Op.OR, x, y) if alpha else x  # bool: x + alpha * y
    return pointwise(ctx, fn, a, b)


@register(aten.sub.Tensor, aten.sub.Scalar, size_floats=True)
def _sub(ctx, a, b, alpha=1):
    a, b = cpu_scalar_rounded(ctx, a, alpha), cpu_scalar_rounded(ctx, b, alpha)
    return pointwise(ctx, lambda x, y: sub(x, _scaled(y, alpha)), a, b)


@register(prims.fma.default)
def _fma(ctx, a, b, c):
    """``a * b + c`` (from addcmul's decomposition); rounded twice, within eager's tolerance."""
    return pointwise(ctx, lambda x, y, z: add(mul(x, y), z), a, b, c)


@register(aten.rsub.Tensor, aten.rsub.Scalar, size_floats=True)
def _rsub(ctx, a, b, alpha=1):
    a, b = cpu_scalar_rounded(ctx, a, alpha), cpu_scalar_rounded(ctx, b, alpha)
    return pointwise(ctx, lambda x, y: sub(y, _scaled(x, alpha)), a, b)


def _scaled(y: Expr, alpha) -> Expr:
    return y if alpha == 1 else mul(y, const(alpha, y.dtype))


@register(aten.mul.Tensor, aten.mul.Scalar, size_floats=True)
def _mul(ctx, a, b):
    return pointwise(ctx, lambda x, y: mul(x, y) if x.dtype is not torch.bool else binary(Op.AND, x, y), a, b)


SIMPLE_BINARY = {
    aten.atan2: (Op.ATAN2, Kind.INT_TO_FLOAT), aten.hypot: (Op.HYPOT, Kind.DEFAULT),
    aten.copysign: (Op.COPYSIGN, Kind.INT_TO_FLOAT), aten.nextafter: (Op.NEXTAFTER, Kind.NO_OPMATH),
    aten.maximum: (Op.MAXIMUM, Kind.DEFAULT), aten.minimum: (Op.MINIMUM, Kind.DEFAULT),
    aten.fmax: (Op.FMAX, Kind.DEFAULT), aten.fmin: (Op.FMIN, Kind.DEFAULT),
}


def _binary_rule(op: Op, kind):
    def rule(ctx, a, b):
        if op in (Op.MAXIMUM, Op.MINIMUM, Op.FMAX, Op.FMIN) and promote(kind, a, b)[1] is torch.bool:
            logical = Op.OR if op in (Op.MAXIMUM, Op.FMAX) else Op.AND
            return pointwise(ctx, lambda x, y: binary(logical, x, y), a, b, kind=kind)
        return pointwise(ctx, lambda x, y: binary(op, x, y), a, b, kind=kind)
    return rule


for _packet, (_op, _kind) in SIMPLE_BINARY.items():
    register(_packet, overloads=True)(_binary_rule(_op, _kind))


@register(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def _pow(ctx, a, b):
    if symbols.is_symbolic(b):  # eager's kernels special-case small integer exponents: match them
        b = int(b)
    if isinstance(b, (int, float)) and not isinstance(b, bool) and isinstance(a, TensorValue) \
            and a.dtype in dtypes.LOW_PRECISION:
        # Eager's kernels (CPU and CUDA) take a scalar exponent in the base's dtype: in bf16
        # ``x ** -0.999`` is ``x ** -1``, finite for x < 0 (``asin(x) ** 1e-3``'s gradient).
        rounded = torch.tensor(b, dtype=torch.float64).to(a.dtype).item()
        b = b if rounded == b else rounded
    if isinstance(b, (int, float)) and not isinstance(b, bool) and isinstance(a, TensorValue):
        special = _pow_special(b) if b != -0.5 else (lambda x, y: _rsqrt_on(ctx)(x))
        if special is not None and (dtypes.is_float(a.dtype) or b in (1, 2, 3)):
            return pointwise(ctx, special, a, b)
    result = result_dtype(ctx, None)
    if isinstance(b, TensorValue) and b.ndim == 0 and result in dtypes.LOW_PRECISION and b.dtype != result:
        # So is a 0-d tensor exponent (a float32 one beside a bf16 base): eager converts it
        # to the common dtype first.
        return pointwise(ctx, lambda x, y: binary(Op.POW, x, cast(cast(y, result), y.dtype)), a, b,
                         kind=Kind.BOOL_TO_LONG)
    return pointwise(ctx, lambda x, y: binary(Op.POW, x, y), a, b, kind=Kind.BOOL_TO_LONG)


def _pow_special(exponent):
    """Exponents eager computes without ``pow`` (so results match it bit for bit)."""
    table = {
        0.5: lambda x, y: unary(Op.SQRT, x),
        1: lambda x, y: x,
        2: lambda x, y: mul(x, x),
        3: lambda x, y: mul(mul(x, x), x),
        -1: lambda x, y: unary(Op.RECIPROCAL, x),
        -2: lambda x, y: unary(Op.RECIPROCAL, mul(x, x)),
    }
    return table.get(exponent)


@register(aten.ldexp.Tensor)
def _ldexp(ctx, x, other):
    """Eager's ``x * pow(2.0, other)``: the power in ``other``'s float dtype (float32
    for integers), rounded as eager rounds it, then the product with promotion."""
    power_dtype = other.dtype if dtypes.is_float(other.dtype) else torch.float32
    acc = dtypes.compute_dtype(power_dtype)
    power = finish(ctx, binary(Op.POW, const(2.0, acc), cast(other.expr, acc)), power_dtype, other.sizes)
    return pointwise(ctx, mul, x, power)


# ----------------------------------------------------------------------------- comparisons, logic

COMPARE = {aten.eq: Op.EQ, aten.ne: Op.NE, aten.lt: Op.LT, aten.le: Op.LE, aten.gt: Op.GT, aten.ge: Op.GE}


def _compare_rule(op: Op):
    @reads_as_stored
    def rule(ctx, a, b):
        return pointwise(ctx, lambda x, y: binary(op, x, y), a, b, kind=Kind.ALWAYS_BOOL)
    return rule


for _packet, _op in COMPARE.items():
    register(_packet.Tensor, _packet.Scalar)(_compare_rule(_op))

BITWISE = {aten.bitwise_and: Op.AND, aten.bitwise_or: Op.OR, aten.bitwise_xor: Op.XOR,
           aten.bitwise_left_shift: Op.LSHIFT, aten.bitwise_right_shift: Op.RSHIFT,
           aten.__lshift__: Op.LSHIFT, aten.__rshift__: Op.RSHIFT}


def _bitwise_rule(op: Op):
    def rule(ctx, a, b):
        if any(isinstance(v, TensorValue) and dtypes.is_float(v.dtype) for v in (a, b)) or \
                any(isinstance(v, float) for v in (a, b)):
            raise Unsupported("bitwise op on floats")
        return pointwise(ctx, lambda x, y: binary(op, x, y), a, b)
    return rule


for _packet, _op in BITWISE.items():
    register(_packet, overloads=True)(_bitwise_rule(_op))

LOGICAL = {aten.logical_and: Op.AND, aten.logical_or: Op.OR, aten.logical_xor: Op.XOR}


def _logical_rule(op: Op):
    @reads_as_stored
    def rule(ctx, a, b):
        return pointwise(ctx, lambda x, y: binary(op, truthy(x), truthy(y)), a, b,
                         kind=Kind.ALWAYS_BOOL)
    return rule


for _packet, _op in LOGICAL.items():
    register(_packet.default)(_logical_rule(_op))


# ----------------------------------------------------------------------------- where, clamp

@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(ctx, cond, a, b):
    compute, result = promote(Kind.NO_OPMATH, a, b)
    sizes = sizes_of(ctx.out)
    cond_e = as_expr(cond, sizes, torch.bool)
    body = where(cond_e, as_expr(a, sizes, dtypes.compute_dtype(result)),
                 as_expr(b, sizes, dtypes.compute_dtype(result)))
    return finish(ctx, body, result_dtype(ctx, result), sizes)


@register(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(ctx, x, lo=None, hi=None):
    if ctx.node.target is aten.clamp_max.default:
        lo, hi = None, lo
    bounds = [v for v in (lo, hi) if v is not None]

    def fn(v, *limits):
        limits = list(limits)
        lo_e = limits.pop(0) if lo is not None else None
        hi_e = limits.pop(0) if hi is not None else None
        if v.dtype is torch.bool:
            raise Unsupported("clamp of bool")
        if not dtypes.is_float(v.dtype):
            out = binary(Op.MAXIMUM, v, lo_e) if lo_e is not None else v
            return binary(Op.MINIMUM, out, hi_e) if hi_e is not None else out
        out = _keeping_equal(Op.FMAX, v, lo_e) if lo_e is not None else v
        out = _keeping_equal(Op.FMIN, out, hi_e) if hi_e is not None else out
        return where(unary(Op.ISNAN, v), v, out)
    return pointwise(ctx, fn, x, *bounds)


def _keeping_equal(op: Op, v, bound):
    """``fmax``/``fmin`` of ``v`` and a bound, but ``v`` itself where they compare equal, as
    eager's clamp gives: ``clamp(+0.0, min=-0.0)`` is +0.0 (``fmax`` may give either zero,
    and ``atan2`` of the result tells them apart)."""
    return where(binary(Op.EQ, v, bound), v, binary(op, v, bound))


@register(aten.clamp.Tensor, aten.clamp_min.Tensor, aten.clamp_max.Tensor)
def _clamp_tensor(ctx, x, lo=None, hi=None):
    if ctx.node.target is aten.clamp_max.Tensor:
        lo, hi = None, lo
    bounds = [v for v in (lo, hi) if v is not None]

    def fn(v, *limits):
        limits = list(limits)
        out = v
        boolean = v.dtype is torch.bool  # max is or, min is and
        if lo is not None:
            out = binary(Op.OR if boolean else Op.MAXIMUM, out, limits.pop(0))
        if hi is not None:
            out = binary(Op.AND if boolean else Op.MINIMUM, out, limits.pop(0))
        return out
    return pointwise(ctx, fn, x, *bounds)


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(ctx, x, mask, value):
    if isinstance(value, TensorValue) and value.ndim:
        raise Unsupported("masked_fill with a non-scalar value")
    sizes = sizes_of(ctx.out)
    dt = dtypes.compute_dtype(x.dtype)
    body = where(as_expr(mask, sizes, torch.bool), as_expr(value, sizes, dt), as_expr(x, sizes, dt))
    return finish(ctx, body, x.dtype, sizes)


# ----------------------------------------------------------------------------- conversions

def convert(ctx, x: TensorValue, dtype, sizes=None) -> TensorValue:
    """``x`` (broadcast to ``sizes``) converted to ``dtype`` as an explicit cast: a
    conversion to bf16/fp16 rounds even when the result is read in float32 later."""
    dtype = dtype or x.dtype
    if not dtypes.is_supported(dtype):
        raise Unsupported(f"conversion to {dtype}")
    sizes = x.sizes if sizes is None else tuple(sizes)
    if not dtypes.is_float(dtype):  # (to an integer or bool: discontinuous)
        x = eager_rounded(ctx, x)
    body = expand_to(x, sizes)
    if dtype is torch.bool:
        body = truthy(cast(body, dtypes.compute_dtype(x.dtype)))
    return finish(ctx, cast(body, dtype), dtype, sizes)


@register(prims.convert_element_type.default)
def _convert_element_type(ctx, x, dtype):
    return convert(ctx, x, dtype)


@register(aten._to_copy.default)
def _to_copy(ctx, x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    if device is not None and torch.device(device) != ctx.out.device:
        raise Unsupported("device copy")
    if device is not None and ctx.out.device != _device_of(ctx, x):
        raise Unsupported("device copy")
    return convert(ctx, x, dtype or x.dtype)


def _device_of(ctx, x):
    arg = ctx.node.args[0]
    return arg.meta["val"].device


@register(aten.clone.default, aten.lift_fresh_copy.default)
def _clone(ctx, x, memory_format=None):
    return ctx.compute(x.dtype, x.sizes, x.expr, origin=str(ctx.node.target))


@register(aten.copy.default)
def _copy(ctx, dst, src, non_blocking=False):
    return convert(ctx, src, dst.dtype, dst.sizes)
