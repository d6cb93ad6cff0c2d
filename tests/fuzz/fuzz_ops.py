"""The fuzzer's op catalogue: pointwise ops, casts and reductions
(views, indexing and in-place ops on inputs are in ``fuzz_ops_shape``; LayerNorm,
more scans, in-place ops on intermediates and more views in ``fuzz_ops_more``).

Takes: a ``fuzz_generate.Builder``. Gives: ``OPS``, a dict from rule name to a rule:
``rule(builder) -> Value | None`` draws its operands (``builder.pick``) and
parameters, and emits one expression; None when no operand fits.

Operand rules keep programs valid and comparisons meaningful: integer divisors
are at least 1 (no division by zero, no INT_MIN / -1), float -> integer casts
clamp into the target's range first (out-of-range conversion is undefined),
and discontinuous ops take exact operands only (see ``fuzz_generate``).
"""
from __future__ import annotations

import math

import torch

from fuzz_program import is_float, is_int

FLOAT_SCALARS = ("0.5", "-1.5", "2.0", "3.25", "1e-3", "-0.0")
CAST_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int32: (-1000, 1000),
               torch.int64: (-100000, 100000), torch.bool: (0, 1)}


def numeric(v) -> bool:
    return v.dtype is not torch.bool


def floating(v) -> bool:
    return is_float(v.dtype)


def integral(v) -> bool:
    return is_int(v.dtype)


def exact(v) -> bool:
    return v.exact or not is_float(v.dtype)


def scalar_for(b, dtype) -> str:
    """A Python scalar of the value's kind (no promotion, except by choice)."""
    if dtype is torch.bool:
        return b.choice(["True", "False"])
    if is_float(dtype) or b.integer(0, 5) == 0:  # sometimes a float scalar for an int tensor
        return b.choice(FLOAT_SCALARS)
    low = 0 if dtype is torch.uint8 else -5
    return str(b.integer(low, 5))


def partner(b, a, accept=lambda v: True):
    """A second operand broadcastable with ``a``: an existing value or a new input."""
    def fits(v):
        try:
            shape = torch.broadcast_shapes(a.shape, v.shape)
        except RuntimeError:
            return False
        return accept(v) and torch.Size(shape).numel() <= 20000
    if b.integer(0, 3) == 0:
        from fuzz_generate import broadcast_shape
        v = b.data_input(broadcast_shape(b, a.shape))
        if fits(v):
            return v
    return b.pick(fits)


# ---------------------------------------------------------------- unary

def unary(template: str, accept=lambda v: True, keeps_exact=False):
    def rule(b):
        a = b.pick(accept)
        return a and b.emit(template.format(a=a.name), keeps_exact and a.exact)
    return rule


def discontinuous(template: str, accept=numeric):
    """Rounding-like ops: exact operands only."""
    return unary(template, lambda v: accept(v) and exact(v), keeps_exact=True)


def clamp(b):
    a = b.pick(numeric)
    if a is None:
        return None
    lo, hi = sorted((scalar_for(b, a.dtype), scalar_for(b, a.dtype)), key=float)
    return b.emit(f"{a.name}.clamp({lo}, {hi})", a.exact)


def cast(b):
    target = b.choice(b.config.dtypes)
    a = b.pick(lambda v: not (floating(v) and not is_float(target)) or exact(v))
    if a is None:
        return None
    if floating(a) and not is_float(target) and target is not torch.bool:
        lo, hi = CAST_RANGES[target]
        return b.emit(f"{a.name}.clamp({lo}, {hi}).to({target})", True)
    return b.emit(f"{a.name}.to({target})", a.exact)


# ---------------------------------------------------------------- binary

def arithmetic(symbol: str, accept=lambda v: True):
    def rule(b):
        a = b.pick(accept)
        if a is None:
            return None
        if b.coin():
            s = scalar_for(b, a.dtype)
            return b.emit(f"{a.name} {symbol} {s}" if b.coin() else f"{s} {symbol} {a.name}", False)
        other = partner(b, a, accept)
        return other and b.emit(f"{a.name} {symbol} {other.name}", False)
    return rule


def true_divide(b):
    a = b.pick(numeric)
    other = a and partner(b, a, numeric)
    return other and b.emit(f"{a.name} / ({other.name}.abs() + 1)", False)


def integer_division(b):
    a = b.pick(integral)
    if a is None:
        return None
    mode = b.choice(['rounding_mode="floor"', 'rounding_mode="trunc"', "%"])
    if b.coin():
        divisor = str(b.choice([1, 2, 3, 7, -3, -1] if a.dtype is not torch.uint8 else [1, 2, 3, 7]))
    else:
        other = partner(b, a, integral)
        if other is None:
            return None
        divisor = f"({other.name} % 7 + 1)"
    if mode == "%":
        return b.emit(f"{a.name} % {divisor}", True)
    return b.emit(f"torch.div({a.name}, {divisor}, {mode})", True)


def float_division(b):
    """floor division / remainder / fmod of exact floats by a divisor away from 0."""
    a = b.pick(lambda v: floating(v) and exact(v))
    other = a and partner(b, a, lambda v: floating(v) and exact(v))
    if other is None:
        return None
    op = b.choice(['torch.div({a}, {d}, rounding_mode="floor")', "torch.remainder({a}, {d})",
                   "torch.fmod({a}, {d})"])
    return b.emit(op.format(a=a.name, d=f"({other.name}.abs() + 0.5)"), False)


def extremum(b):
    a = b.pick()
    other = a and partner(b, a)
    if other is None:
        return None
    op = b.choice(["maximum", "minimum"])
    return b.emit(f"torch.{op}({a.name}, {other.name})", a.exact and other.exact)


def compare(b):
    a = b.pick(exact)
    if a is None:
        return None
    symbol = b.choice(["==", "!=", "<", "<=", ">", ">="])
    if b.coin() or a.dtype is torch.bool:
        other = partner(b, a, exact)
        return other and b.emit(f"{a.name} {symbol} {other.name}", True)
    return b.emit(f"{a.name} {symbol} {scalar_for(b, a.dtype)}", True)


def bitwise(b):
    a = b.pick(lambda v: not floating(v))
    other = a and partner(b, a, lambda v: not floating(v))
    if other is None:
        return None
    return b.emit(f"{a.name} {b.choice(['&', '|', '^'])} {other.name}", True)


def shift(b):
    a = b.pick(integral)
    if a is None:
        return None
    symbol = b.choice(["<<", ">>"])
    if b.coin():
        return b.emit(f"{a.name} {symbol} {b.integer(0, 4)}", True)
    other = partner(b, a, integral)
    return other and b.emit(f"{a.name} {symbol} ({other.name} % 5)", True)


def logical(b):
    a = b.pick(exact)
    other = a and partner(b, a, exact)
    if other is None:
        return None
    op = b.choice(["logical_and", "logical_or", "logical_xor"])
    return b.emit(f"torch.{op}({a.name}, {other.name})", True)


def where(b):
    if b.integer(0, 2) == 0:
        return where_compare(b)
    cond = b.pick(lambda v: v.dtype is torch.bool)
    a = cond and partner(b, cond)
    if a is None:
        return None
    if b.coin():
        return b.emit(f"torch.where({cond.name}, {a.name}, {scalar_for(b, a.dtype)})", a.exact)
    other = partner(b, a)
    if other is None or not _broadcastable(cond, a, other):
        return None
    return b.emit(f"torch.where({cond.name}, {a.name}, {other.name})", a.exact and other.exact)


def where_compare(b):
    """A condition made on the spot: a comparison of an exact value, or (any float
    value) a select continuous across it (leaky ReLU: rounding near 0 moves the output
    by as little as it moves the operand)."""
    a = b.pick(numeric)
    if a is None:
        return None
    if exact(a) and b.coin():
        other = partner(b, a)
        if other is not None:
            return b.emit(f"torch.where({a.name} > 0, {other.name}, {a.name})", a.exact and other.exact)
    if not floating(a):
        return None
    return b.emit(f"torch.where({a.name} > 0, {a.name}, {b.choice(['0.0', '0.125'])} * {a.name})", a.exact)


def _broadcastable(*values) -> bool:
    try:
        torch.broadcast_shapes(*(v.shape for v in values))
        return True
    except RuntimeError:
        return False


def power(b):
    a = b.pick(numeric)
    if a is None:
        return None
    if integral(a):
        return b.emit(f"{a.name} ** {b.choice([2, 3])}", True)
    if b.coin():
        return b.emit(f"({a.name}.abs() + 0.5) ** {b.choice(['0.5', '2', '3', '-1', '1.5'])}", False)
    other = partner(b, a, numeric)
    return other and b.emit(f"torch.pow({a.name}.abs() + 0.5, {other.name}.clamp(-2, 2))", False)


def hypot(b):
    a = b.pick(floating)
    other = a and partner(b, a, floating)
    return other and b.emit(f"torch.hypot({a.name}, {other.name})", False)


def atan2(b):
    """atan2 jumps by 2*pi across y = 0 for x < 0 (and sees the sign of zero): exact operands."""
    a = b.pick(lambda v: numeric(v) and exact(v))
    other = a and partner(b, a, lambda v: numeric(v) and exact(v))
    return other and b.emit(f"torch.atan2({a.name}, {other.name})", False)


# ---------------------------------------------------------------- reductions

def dims_arg(b, a, single=False) -> str | None:
    """'' (all dims), 'd' or '[d0, d1]' for a reduction over ``a``."""
    if a.ndim == 0 or (not single and b.integer(0, 3) == 0):
        return ""
    if single or b.coin():
        return str(b.dim(a))
    chosen = sorted({b.integer(0, a.ndim - 1) for _ in range(b.integer(1, a.ndim))})
    return "[" + ", ".join(map(str, chosen)) + "]"


def reduction(method: str, accept, keeps_exact: bool, single=False):
    """``a.method(dims, keepdim)`` or ``a.method()``; ``single``: one dim at most. A float
    sum or product depends on the order of its terms: exact only over integers. A float
    product's factors are clamped to [-1.5, 1.5], so that no partial product overflows
    (inf * 0 is NaN: the order would decide between NaN and 0), and it runs over one dim
    of a float value of more than 64 elements (a product of hundreds of roundings is as
    far from eager's as the order of the factors makes it)."""
    def rule(b):
        a = b.pick(accept)
        if a is None:
            return None
        keeps = keeps_exact and not (method in ("sum", "prod") and floating(a))
        name = f"{a.name}.clamp(-1.5, 1.5)" if method == "prod" and floating(a) else a.name
        if single:
            long = method == "prod" and floating(a) and a.ndim > 0 and math.prod(a.shape) > 64
            dims = "" if a.ndim == 0 or (b.coin() and not long) else str(b.dim(a))
        else:
            dims = dims_arg(b, a)
        if dims == "":
            return b.emit(f"{name}.{method}()", keeps and a.exact)
        return b.emit(f"{name}.{method}({dims}, keepdim={b.coin()})", keeps and a.exact)
    return rule


def max_with_indices(b):
    a = b.pick(lambda v: numeric(v) and exact(v) and v.ndim > 0)
    if a is None:
        return None
    part = b.choice(["values", "indices"])
    return b.emit(f"torch.{b.choice(['max', 'min'])}({a.name}, {b.dim(a)}, keepdim={b.coin()}).{part}", True)


def variance(b):
    a = b.pick(lambda v: floating(v) and v.ndim > 0)
    if a is None:
        return None
    fn, correction = b.choice(["var", "std"]), b.choice([0, 1])
    return b.emit(f"torch.{fn}({a.name}, {dims_arg(b, a, single=True)}, correction={correction}, "
                  f"keepdim={b.coin()})", False)


def softmax_like(b):
    a = b.pick(lambda v: floating(v) and v.ndim > 0)
    if a is None:
        return None
    fn = b.choice(["torch.softmax({a}, {d})", "torch.log_softmax({a}, {d})", "torch.logsumexp({a}, {d})",
                   "torch.linalg.vector_norm({a}, dim={d})"])
    return b.emit(fn.format(a=a.name, d=b.dim(a)), False)


def scan(b):
    a = b.pick(lambda v: numeric(v) and v.ndim > 0)
    if a is None:
        return None
    return b.emit(f"{a.name}.{b.choice(['cumsum', 'cumprod'])}({b.dim(a)})", False)


OPS = {
    "exp": unary("torch.exp({a})"), "tanh": unary("torch.tanh({a})"),
    "sigmoid": unary("torch.sigmoid({a})"), "sin": unary("torch.sin({a})"),
    "erf": unary("torch.erf({a})"), "atan": unary("torch.atan({a})"),
    "log1p_abs": unary("torch.log1p({a}.abs())", numeric),
    "sqrt_abs": unary("torch.sqrt({a}.abs())", numeric),
    "rsqrt": unary("torch.rsqrt({a}.abs() + 1)", numeric),
    "gelu": unary("F.gelu({a})", floating), "gelu_tanh": unary('F.gelu({a}, approximate="tanh")', floating),
    "silu": unary("F.silu({a})", floating), "softplus": unary("F.softplus({a})", floating),
    "neg": unary("-{a}", numeric, keeps_exact=True), "abs": unary("{a}.abs()", numeric, keeps_exact=True),
    "relu": unary("torch.relu({a})", numeric, keeps_exact=True),
    "floor": discontinuous("torch.floor({a})"), "ceil": discontinuous("torch.ceil({a})"),
    "round": discontinuous("torch.round({a})"), "trunc": discontinuous("torch.trunc({a})"),
    "sign": discontinuous("torch.sign({a})"), "frac": discontinuous("torch.frac({a})", floating),
    "logical_not": discontinuous("torch.logical_not({a})", lambda v: True),
    "bitwise_not": unary("~{a}", lambda v: not floating(v), keeps_exact=True),
    "square": unary("{a} * {a}"), "clamp": clamp, "cast": cast,
    "add": arithmetic("+"), "sub": arithmetic("-", numeric), "mul": arithmetic("*"),
    "true_divide": true_divide, "integer_division": integer_division, "float_division": float_division,
    "extremum": extremum, "compare": compare, "bitwise": bitwise, "shift": shift, "logical": logical,
    "where": where, "power": power, "hypot": hypot, "atan2": atan2,
    "sum": reduction("sum", lambda v: True, True),
    "mean": reduction("mean", floating, False),
    "amax": reduction("amax", lambda v: numeric(v), True),
    "amin": reduction("amin", lambda v: numeric(v), True),
    "prod": reduction("prod", numeric, True, single=True),
    "argmax": reduction("argmax", lambda v: numeric(v) and exact(v), True, single=True),
    "argmin": reduction("argmin", lambda v: numeric(v) and exact(v), True, single=True),
    "any": reduction("any", exact, True), "all": reduction("all", exact, True),
    "max_with_indices": max_with_indices, "variance": variance, "softmax_like": softmax_like,
    "scan": scan,
}

from fuzz_ops_more import MORE_OPS  # noqa: E402
from fuzz_ops_shape import SHAPE_OPS  # noqa: E402  (after the helpers it imports)

OPS.update(SHAPE_OPS)
OPS.update(MORE_OPS)
