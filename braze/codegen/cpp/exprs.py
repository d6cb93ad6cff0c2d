"""C++ text for IR expressions.

Takes: expressions of a kernel plan (loads in storage form), the C names of loop
variables and in-kernel values. Gives: ``CPrinter``, a ``PrintScope`` of the kernel's
``Emitter`` (``braze.codegen.emitter``), which appends one ``const T tN = ...;``
statement per distinct subexpression (common subexpressions are computed once) and
returns the C expression of the root.

Loads whose position is not provably inside the buffer (``braze.ir.simplify``
bounds) are clamped, so a load in a ``where`` branch that is not taken (cat,
pad) never leaves its buffer. A run-time check (``Op.CHECK``) calls the prelude's
``b_check_index`` or ``b_check_divisor``, which report to the kernel's error record.
"""
from __future__ import annotations

import math

import torch

from braze.codegen.emitter import Emitter, PrintScope
from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir import symbols
from braze.ir.expr import COMPARISONS, Expr, Op
from braze.ir.graph import ERROR_RECORD

CTYPES = {
    torch.float32: "float", torch.float64: "double", torch.float16: "f16_t", torch.bfloat16: "bf16_t",
    torch.int64: "int64_t", torch.int32: "int32_t", torch.int16: "int16_t", torch.int8: "int8_t",
    torch.uint8: "uint8_t", torch.bool: "bool", dtypes.INDEX: "int64_t",
}
# half and bfloat16 are stored as uint16_t and converted by these (codegen/cpp/prelude.py)
FROM_LOW = {torch.float16: "f16_to_f32", torch.bfloat16: "bf16_to_f32"}
TO_LOW = {torch.float16: "f32_to_f16", torch.bfloat16: "f32_to_bf16"}
ROUND_TO_LOW = {torch.float16: "round_to_f16", torch.bfloat16: "round_to_bf16"}

FLOAT_FUNCS = {
    Op.EXP: "exp", Op.EXP2: "exp2", Op.EXPM1: "expm1", Op.LOG: "log", Op.LOG2: "log2",
    Op.LOG10: "log10", Op.LOG1P: "log1p", Op.SQRT: "sqrt", Op.SIN: "sin", Op.COS: "cos",
    Op.TAN: "tan", Op.ASIN: "asin", Op.ACOS: "acos", Op.ATAN: "atan", Op.SINH: "sinh",
    Op.COSH: "cosh", Op.TANH: "tanh", Op.ASINH: "asinh", Op.ACOSH: "acosh", Op.ATANH: "atanh",
    Op.ERF: "erf", Op.ERFC: "erfc", Op.FLOOR: "floor", Op.CEIL: "ceil", Op.ROUND: "nearbyint",
    Op.TRUNC: "trunc", Op.ABS: "fabs", Op.POW: "pow", Op.ATAN2: "atan2", Op.HYPOT: "hypot",
    Op.COPYSIGN: "copysign", Op.NEXTAFTER: "nextafter", Op.FMOD: "b_fmod",
}
FLOAT_HELPERS = {Op.MAXIMUM: "b_max", Op.MINIMUM: "b_min", Op.FMAX: "b_fmax", Op.FMIN: "b_fmin",
                 Op.SIGN: "b_sign", Op.SIGMOID: "b_sigmoid",
                 Op.FLOORDIV: "f_floordiv", Op.MOD: "f_mod", Op.LGAMMA: "b_lgamma"}
INT_HELPERS = {Op.MAXIMUM: "i_max", Op.MINIMUM: "i_min", Op.FMAX: "i_max", Op.FMIN: "i_min",
               Op.SIGN: "i_sign", Op.FLOORDIV: "i_floordiv", Op.TRUNCDIV: "i_truncdiv", Op.MOD: "i_mod",
               Op.FMOD: "i_fmod", Op.POW: "i_pow", Op.LSHIFT: "i_shl", Op.RSHIFT: "i_shr"}
SYMBOLS = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.TRUEDIV: "/", Op.EQ: "==", Op.NE: "!=",
           Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}


def ctype(dtype) -> str:
    return CTYPES[dtype]


def pointer_type(dtype) -> str:
    """The element type of a buffer parameter: a bool buffer is read as ``uint8_t`` (and
    tested ``!= 0``): GCC 12 vectorizes no loop that loads through a ``bool*``."""
    return "uint8_t" if dtype is torch.bool else CTYPES[dtype]


def literal(value, dtype) -> str:
    if dtype is torch.bool:
        return "true" if value else "false"
    if dtype in dtypes.FLOATS:
        if value != value:
            text = "NAN"
        elif math.isinf(value):
            text = "INFINITY" if value > 0 else "(-INFINITY)"
        else:
            text = repr(float(value))
        if dtype is torch.float64:
            return text if math.isfinite(value) else f"((double){text})"  # NAN, INFINITY: float
        if dtype in dtypes.LOW_PRECISION:
            return f"{TO_LOW[dtype]}((float){text})"
        return f"(({ctype(dtype)}){text})"
    if symbols.is_symbolic(value):
        return f"(({ctype(dtype)}){symbols.text_of(value, 'c')})"
    value = int(value)
    if value == -(2 ** 63):
        return "INT64_MIN"
    if dtype is dtypes.INDEX:
        return str(value) if abs(value) < 2 ** 31 else f"{value}LL"
    return f"(({ctype(dtype)}){value}LL)"


class CPrinter(PrintScope[str]):
    """Emit statements for expressions into ``emitter`` (at ``indent``). ``names``: the C
    names of loop variables; ``values``: of in-kernel values (``VALUE``, by member name);
    ``extents``: each buffer's elements (loads beyond them are clamped)."""

    def __init__(self, emitter: Emitter, indent: str, names: dict, values: dict, extents: dict,
                 preset: dict | None = None):
        super().__init__(emitter, indent, preset)
        self.names, self.values, self.extents = names, values, extents

    def __call__(self, root: Expr) -> str:
        """Print ``root``, emitting statements for the parts not printed yet (never
        descending below an expression this scope already has)."""
        stack = [(root, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in self.memo:
                continue
            if ready:
                self.memo[id(e)] = self._node(e)
                continue
            stack.append((e, True))
            stack.extend((a, False) for a in reversed(_operands(e)) if id(a) not in self.memo)
        return self.memo[id(root)]

    def _temp(self, dtype, text: str) -> str:
        return self.emitter.assign(self.indent, "t", text, f"const {ctype(dtype)} ", ";")

    def _node(self, e: Expr) -> str:
        op = e.op
        if op is Op.CONST:
            return literal(e.arg, e.dtype)
        if op is Op.VAR:
            return self.names[e]
        if op is Op.VALUE:
            return self.values[e.arg]
        if _round_trip(e):
            return self._temp(e.dtype, f"{ROUND_TO_LOW[e.args[0].dtype]}({self.memo[id(e.args[0].args[0])]})")
        args = [self.memo[id(a)] for a in e.args]
        if op is Op.LOAD:
            element = f"{e.arg}[{self._position(e)}]"
            return self._temp(e.dtype, f"({element} != 0)" if e.dtype is torch.bool else element)
        if op is Op.CAST:
            return self._temp(e.dtype, convert(args[0], e.args[0].dtype, e.dtype, _truncated_float(e.args[0])))
        if op is Op.WHERE:
            return self._temp(e.dtype, f"({args[0]} ? {args[1]} : {args[2]})")
        if op is Op.RANDOM:
            return self._temp(e.dtype, f"b_{e.arg}({args[0]}, {args[1]})")
        if op is Op.CHECK:
            return self._temp(e.dtype, checked_text(e, args[0]))
        if e.dtype is dtypes.INDEX or (op in COMPARISONS and e.args[0].dtype is dtypes.INDEX):
            return self._temp(e.dtype, self._index_op(e, args))
        return self._temp(e.dtype, value_op(op, e.args[0].dtype, args, e.dtype))

    def _position(self, load: Expr) -> str:
        pos = load.args[0]
        text = self.memo[id(pos)]
        lo, hi = S.bounds(pos)
        extent = self.extents[load.arg]
        if lo < 0 or hi > extent - 1:
            return f"idx_clamp({text}, {max(extent - 1, 0)})"
        return text

    def _index_op(self, e: Expr, args: list) -> str:
        op = e.op
        if op in SYMBOLS:
            return f"({args[0]} {SYMBOLS[op]} {args[1]})"
        if op in (Op.FLOORDIV, Op.MOD):
            nonneg = S.bounds(e.args[0])[0] >= 0 and e.args[1].op is Op.CONST and e.args[1].arg > 0
            if nonneg:
                return f"({args[0]} {'/' if op is Op.FLOORDIV else '%'} {args[1]})"
            return f"{'idx_floordiv' if op is Op.FLOORDIV else 'idx_mod'}({args[0]}, {args[1]})"
        if op is Op.MINIMUM:
            return f"i_min<int64_t>({args[0]}, {args[1]})"
        if op is Op.MAXIMUM:
            return f"i_max<int64_t>({args[0]}, {args[1]})"
        if op is Op.NEG:
            return f"(-{args[0]})"
        raise NotImplementedError(f"index op {op}")


def _round_trip(e: Expr) -> bool:
    """Is ``e`` a float32 value rounded to bf16 or fp16 and widened back (an intermediate
    rounded as eager rounds it)? It is printed as one rounding in float registers."""
    inner = e.args[0] if e.op is Op.CAST and e.dtype is torch.float32 else None
    return (inner is not None and inner.op is Op.CAST and inner.dtype in dtypes.LOW_PRECISION
            and inner.args[0].dtype is torch.float32)


def _operands(e: Expr) -> tuple:
    """What ``e`` is printed from: a round trip (``_round_trip``) from the float32 value."""
    return (e.args[0].args[0],) if _round_trip(e) else e.args


def checked_text(e: Expr, value: str) -> str:
    """A run-time check (``Op.CHECK``), reporting to the kernel's error record."""
    kind, site, size = e.arg
    if kind != "divisor":
        lo = -size if kind == "index" else 0
        return f"b_check_index({value}, {lo}, {size}, {site}, {ERROR_RECORD})"
    return f"b_check_divisor<{ctype(e.dtype)}>({value}, {site}, {ERROR_RECORD})"


def convert(text: str, source, target, truncated_float: bool = False) -> str:
    """C converting ``text`` from ``source`` to ``target``; ``truncated_float`` says the
    integer operand is itself a float cast to an integer."""
    if source is torch.bool and target in dtypes.FLOATS:  # a select: GCC vectorizes no bool-to-float cast
        wide = target is torch.float64
        text, source = (f"({text} ? 1.0 : 0.0)", target) if wide else (f"({text} ? 1.0f : 0.0f)", torch.float32)
        if source is target:
            return text
    if truncated_float and target in dtypes.FLOATS:
        # an integer 0 gives +0.0: GCC without trapping math folds ``(float)(int)x`` of a
        # float ``x`` into ``truncf(x)``, which gives -0.0 for ``x`` in (-1, 0)
        wide = target is torch.float64
        cast = f"({'double' if wide else 'float'})({text})"
        text, source = f"({text} == 0 ? {'0.0' if wide else '0.0f'} : {cast})", torch.float64 if wide else torch.float32
        if source is target:
            return text
    if source in dtypes.LOW_PRECISION:  # stored as uint16_t: widened by bit arithmetic
        text, source = f"{FROM_LOW[source]}({text})", torch.float32
        if target is torch.float32:
            return text
    if target in dtypes.LOW_PRECISION:
        return f"{TO_LOW[target]}({text if source is torch.float32 else f'(float)({text})'})"
    if target is torch.bool:
        return f"({text} != 0)"
    return f"(({ctype(target)})({text}))"


def _truncated_float(e: Expr) -> bool:
    """Whether ``e`` is a float value cast to an integer type (through integer casts)."""
    while e.op is Op.CAST and e.dtype in dtypes.INTEGERS and e.dtype is not torch.bool:
        e = e.args[0]
        if e.dtype in dtypes.FLOATS:
            return True
    return False


def value_op(op: Op, dtype, args: list, result) -> str:
    """C for an arithmetic op on values of ``dtype`` (already the compute dtype)."""
    if dtype in dtypes.FLOATS:
        return _float_op(op, dtype, args)
    if dtype is torch.bool:
        return _bool_op(op, args)
    return _int_op(op, dtype, args, result)


def _float_op(op: Op, dtype, args: list) -> str:
    suffix = "f" if dtype is torch.float32 else ""
    if op in SYMBOLS:
        return f"({args[0]} {SYMBOLS[op]} {args[1]})"
    if op in FLOAT_FUNCS:
        return f"{FLOAT_FUNCS[op]}{suffix}({', '.join(args)})"
    if op in FLOAT_HELPERS:
        return f"{FLOAT_HELPERS[op]}({', '.join(args)})"
    one = "1.0f" if dtype is torch.float32 else "1.0"
    simple = {
        Op.NEG: f"(-{args[0]})",
        Op.RECIPROCAL: f"({one} / {args[0]})",
        Op.RSQRT: f"({one} / sqrt{suffix}({args[0]}))",
        Op.TRUNCDIV: f"trunc{suffix}({args[0]} / {args[-1]})",
        Op.ISNAN: f"({args[0]} != {args[0]})",
        Op.ISINF: f"(fabs{suffix}({args[0]}) == INFINITY)",
        Op.SIGNBIT: f"(signbit({args[0]}) != 0)",
        Op.ERFINV: f"(({ctype(dtype)})b_erfinv({args[0]}))",
        Op.DIGAMMA: f"(({ctype(dtype)})b_digamma({args[0]}))",
    }
    if op in simple:
        return simple[op]
    raise NotImplementedError(f"cpp: {op.value} on {dtype}")


def _bool_op(op: Op, args: list) -> str:
    table = {Op.AND: "&&", Op.OR: "||", Op.XOR: "!=", Op.EQ: "==", Op.NE: "!=", Op.LT: "<",
             Op.LE: "<=", Op.GT: ">", Op.GE: ">="}
    if op in table:
        return f"({args[0]} {table[op]} {args[1]})"
    if op is Op.LOGICAL_NOT:
        return f"(!{args[0]})"
    if op in (Op.ISNAN, Op.ISINF, Op.SIGNBIT):
        return "false"
    raise NotImplementedError(f"cpp: {op.value} on bool")


def _int_op(op: Op, dtype, args: list, result) -> str:
    t = ctype(dtype)
    if op in COMPARISONS:
        return f"({args[0]} {SYMBOLS[op]} {args[1]})"
    if op in (Op.ADD, Op.SUB, Op.MUL):
        return f"(({t})({args[0]} {SYMBOLS[op]} {args[1]}))"
    if op in INT_HELPERS:
        return f"{INT_HELPERS[op]}<{t}>({', '.join(args)})"
    table = {Op.AND: "&", Op.OR: "|", Op.XOR: "^"}
    if op in table:
        return f"(({t})({args[0]} {table[op]} {args[1]}))"
    simple = {
        Op.NEG: f"(({t})(-{args[0]}))",
        Op.ABS: f"(({t})({args[0]} < 0 ? -{args[0]} : {args[0]}))",
        Op.BITWISE_NOT: f"(({t})(~{args[0]}))",
        Op.LOGICAL_NOT: f"(!{args[0]})",
        Op.ISNAN: "false", Op.ISINF: "false",
        Op.SIGNBIT: f"({args[0]} < 0)",
    }
    if op in simple:
        return simple[op]
    raise NotImplementedError(f"cpp: {op.value} on {dtype}")
