"""Triton text for IR expressions.

Takes: expressions of a kernel plan (loads in storage form), the Triton names
of loop variables and in-kernel values (each with the block axes it varies
along), kernel parameter names of buffers, their extents, and the masks of the
block axes. Gives: ``Printer``, a ``PrintScope`` of the kernel's ``Emitter``
(``braze.codegen.emitter``), which appends one ``tmpN = ...`` line per
distinct value subexpression (common subexpressions are computed once), keeps
index arithmetic inline, and returns a ``Term``: the text of the root and the
block axes it depends on.

Loads whose position is not provably inside the buffer (``simplify.bounds``)
are masked by the conditions of the ``where`` branches that read them (cat,
pad: ``guards``), or else clamped, so a load in a branch that is not taken
never leaves its buffer; every load is masked by the axes it varies along.
Float32 division and square root use the IEEE-rounded forms (``div_rn``,
``sqrt_rn``): plain ``/`` and ``tl.sqrt`` are approximate on NVIDIA GPUs; a
division by a power of two is the product by its exact reciprocal (same bits).
Float negation flips the sign bit (helper ``negate``): Triton's unary minus is
``0 - x``, which gives +0.0 for 0.0 and keeps the sign of NaN. A float32 ``erf``
is printed when first used; where that use is ``1 + erf(z)`` (GELU and its
derivative) it becomes the helper ``erf_plus_one(z)``, half the instructions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from braze.codegen.emitter import Emitter, PrintScope
from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir import symbols
from braze.ir.expr import APPROX, COMPARISONS, ROUNDED, Expr, Op, walk
from braze.ir.graph import ERROR_RECORD

TL_TYPES = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int64: "tl.int64", torch.int32: "tl.int32",
    torch.int16: "tl.int16", torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}
LIBDEVICE = {
    Op.EXP: "exp", Op.EXP2: "exp2", Op.EXPM1: "expm1", Op.LOG: "log", Op.LOG2: "log2", Op.LOG10: "log10",
    Op.LOG1P: "log1p", Op.SIN: "sin", Op.COS: "cos", Op.TAN: "tan", Op.ASIN: "asin", Op.ACOS: "acos",
    Op.ATAN: "atan", Op.SINH: "sinh", Op.COSH: "cosh", Op.TANH: "tanh", Op.ASINH: "asinh",
    Op.ACOSH: "acosh", Op.ATANH: "atanh", Op.ERF: "erf", Op.ERFC: "erfc", Op.ERFINV: "erfinv",
    Op.LGAMMA: "lgamma", Op.ROUND: "nearbyint", Op.TRUNC: "trunc", Op.POW: "pow", Op.ATAN2: "atan2",
    Op.HYPOT: "hypot", Op.COPYSIGN: "copysign", Op.NEXTAFTER: "nextafter", Op.FMOD: "fmod",
}
SYMBOLS = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.EQ: "==", Op.NE: "!=", Op.LT: "<", Op.LE: "<=",
           Op.GT: ">", Op.GE: ">=", Op.AND: "&", Op.OR: "|", Op.XOR: "^"}
INT_HELPERS = {Op.FLOORDIV: "py_floordiv_int", Op.TRUNCDIV: "c_truncdiv_int", Op.MOD: "py_mod_int",
               Op.FMOD: "c_fmod_int"}
BITS = {torch.int8: 8, torch.uint8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64}
_PRECEDENCE = {Op.ADD: 1, Op.SUB: 1, Op.MUL: 2, Op.FLOORDIV: 2, Op.MOD: 2}


def tl_type(dtype, index_type: str = "tl.int32") -> str:
    return index_type if dtype is dtypes.INDEX else TL_TYPES[dtype]


@dataclass(frozen=True)
class Term:
    """Printed expression: its text, the block axes it varies along, and whether it
    is a plain Python literal (which takes its dtype from the tensor it meets)."""
    text: str
    axes: frozenset = frozenset()
    literal: bool = False
    precedence: int = 3  # for inline index arithmetic
    deferred: bool = False  # a float32 erf, printed at its first use (``Printer._printed``)


def literal(value, dtype) -> str:
    if dtype is torch.bool:
        return "True" if value else "False"
    if dtype in dtypes.FLOATS:
        if value != value:
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(float(value))
    if symbols.is_symbolic(value):  # a size argument, or arithmetic on them
        text = symbols.text_of(value, "python")
        return text if text.isidentifier() else f"({text})"
    value = int(value)
    if dtype in BITS:  # wrap into the dtype's range, as C++ does with its casts
        bits = BITS[dtype]
        value %= 1 << bits
        if dtype is not torch.uint8 and value >= 1 << (bits - 1):
            value -= 1 << bits
    return str(value)


def exact_reciprocal(divisor: float):
    """``1 / divisor`` for a power of two whose reciprocal is a normal float32: ``x * (1 / d)``
    is then ``x / d`` rounded once, the same bits as the division (which Triton's ``div_rn``
    computes at full cost, branch to its slow path included); else None."""
    if not math.isfinite(divisor):
        return None
    mantissa, exponent = math.frexp(abs(divisor))
    return 1.0 / divisor if mantissa == 0.5 and -125 <= exponent - 1 <= 126 else None


def negative_zero(dtype) -> str:
    """-0.0 as a tensor: Triton builds every zero constant as +0.0 (and its unary minus is
    ``0 - x``), so the sign bit is set through an integer."""
    if dtype is torch.float64:
        return "tl.full([], -9223372036854775808, tl.int64).to(tl.float64, bitcast=True)"
    text = "tl.full([], -2147483648, tl.int32).to(tl.float32, bitcast=True)"
    return text if dtype is torch.float32 else f"{text}.to({tl_type(dtype)})"


def full(value_text: str, dtype, shape: str = "[]", index_type: str = "tl.int32") -> str:
    """A tensor of ``shape`` filled with a literal. A bfloat16 one is made in float32
    and rounded: Triton builds a bfloat16 constant from ``std::to_string`` of the value
    (six decimals, so 1e-7 becomes 0), and its interpreter cannot build one at all;
    float32 then bfloat16 rounds as eager's ``full`` does (double to float to bfloat16)."""
    if dtype is torch.bfloat16:
        return f"tl.full({shape}, {value_text}, tl.float32).to(tl.bfloat16)"
    return f"tl.full({shape}, {value_text}, {tl_type(dtype, index_type)})"


def convert(text: str, source, target, index_type: str = "tl.int32") -> str:
    """``text`` (of dtype ``source``) converted to ``target`` as C++ converts it."""
    if target is torch.bool and source is not torch.bool:
        return f"({text} != 0)"
    return f"{text}.to({tl_type(target, index_type)})"


class Printer(PrintScope[Term]):
    """Emit statements for expressions into ``emitter`` (at ``indent``)."""

    def __init__(self, kernel, emitter: Emitter, indent: str):
        """``kernel``: a ``TritonKernel``, for its names, values, params, extents, masks,
        index type, guarded loads and helpers."""
        super().__init__(emitter, indent)
        self.k = kernel

    def __call__(self, root: Expr) -> Term:
        for e in walk(root):
            if id(e) not in self.memo:
                self.memo[id(e)] = self._node(e)
        return self._printed(root)

    def _printed(self, e: Expr) -> Term:
        """``e``'s term, printing a deferred float32 ``erf`` now that a reader needs it."""
        term = self.memo[id(e)]
        if term.deferred:
            z = self._printed(e.args[0])
            term = self.memo[id(e)] = self.temp(f"libdevice.erf({self.tensor(z, e.dtype)})", z.axes)
        return term

    def _erf_plus_one(self, e: Expr):
        """``1 + erf(z)`` in float32 as the helper, if ``e`` is that sum and its erf is not printed yet."""
        if e.op is not Op.ADD or e.dtype is not torch.float32:
            return None
        for one, erf in (e.args, e.args[::-1]):
            if one.op is Op.CONST and one.arg == 1.0 and self.memo[id(erf)].deferred:
                z = self._printed(erf.args[0])
                return self.temp(f"{self._use('erf_plus_one')}({self.tensor(z, e.dtype)})", z.axes)
        return None

    def tensor(self, term: Term, dtype) -> str:
        """``term`` as a tensor of its own dtype (literals materialized)."""
        return full(term.text, dtype, index_type=self.k.index_type) if term.literal else term.text

    # ------------------------------------------------------------------ nodes

    def temp(self, text: str, axes) -> Term:
        """``text`` (varying along ``axes``) as a fresh temporary."""
        return Term(self.emitter.assign(self.indent, "tmp", text), frozenset(axes))

    def _node(self, e: Expr) -> Term:
        op = e.op
        if op is Op.CONST:
            if e.dtype in dtypes.FLOATS and e.arg == 0 and math.copysign(1.0, e.arg) < 0:
                return self.temp(negative_zero(e.dtype), ())
            return Term(literal(e.arg, e.dtype), literal=True)
        if op is Op.VAR:
            return self.k.names[e]
        if op is Op.VALUE:
            return self.k.values[e.arg]
        if op is Op.ERF and e.dtype is torch.float32:
            return Term("", deferred=True)
        fused = self._erf_plus_one(e)
        if fused is not None:
            return fused
        args = [self._printed(a) for a in e.args]
        axes = frozenset().union(*(a.axes for a in args))
        if op is Op.LOAD:
            return self._load(e, args[0])
        if op is Op.CHECK:
            return self._check(e, axes)
        if e.dtype is dtypes.INDEX or (op in COMPARISONS and e.args[0].dtype is dtypes.INDEX):
            return self._index(e, args, axes)
        args = [Term(f"({a.text})", a.axes, a.literal) if a.precedence < 3 else a for a in args]
        if op is Op.WHERE:
            a, b = args[1:]
            if a.literal and b.literal:
                a, b = Term(self.tensor(a, e.dtype)), Term(self.tensor(b, e.dtype))
            return self.temp(f"tl.where({args[0].text}, {a.text}, {b.text})", axes)
        if op not in SYMBOLS or e.arg == ROUNDED or all(a.literal for a in args):
            # Python literals take their dtype from the tensor they meet in an operator;
            # anywhere else they are made tensors of their own dtype
            args = [Term(self.tensor(a, x.dtype)) for a, x in zip(args, e.args)]
        if op is Op.CAST:
            return self.temp(convert(args[0].text, e.args[0].dtype, e.dtype, self.k.index_type), axes)
        return self.temp(self._value_op(e, [a.text for a in args]), axes)

    def _load(self, e: Expr, pos: Term) -> Term:
        text, axes = pos.text, pos.axes
        lo, hi = S.bounds(e.args[0])
        extent = self.k.extents[e.arg]
        guards = self.k.guards.get(id(e), []) if lo < 0 or hi > extent - 1 else []
        clamp = (lo < 0 or hi > extent - 1) and not guards
        if clamp:
            text = f"tl.minimum(tl.maximum({text}, 0), {max(extent - 1, 0)})"
        paths = [self._conjunction(path) for path in guards]  # read only where a path's branches are all taken
        for _, path_axes in paths:
            axes = axes | path_axes
        # the block masks of every axis the position or a condition varies along: a condition
        # along x (a diagonal: x1 - x0 == 2) holds in lanes past the x extent too
        masks = [m for m in [self.k.mask_for(axes)] if m]
        if paths:
            masks.append(paths[0][0] if len(paths) == 1 else "(" + " | ".join(f"({t})" for t, _ in paths) + ")")
        mask_text = f", {' & '.join(masks)}" if masks else ""
        if clamp or pos.precedence < 3:
            text = f"({text})"
        if masks and not pos.axes:  # one address under a mask that varies: a block of it, as Triton needs
            text = f"tl.where({' & '.join(masks)}, {text}, 0)"
        return self.temp(f"tl.load({self.k.params[e.arg]} + {text}{mask_text})", axes)

    def _check(self, e: Expr, axes) -> Term:
        """A run-time check (``Op.CHECK``) of the value before its cast to the index type (an
        int64 index must not wrap into range): a device assertion (compiled where the kernel
        has one: ``launch.Launch.debug``) and, for the interpreter, a report to the error
        record in the lanes that fail; the result is 0 there."""
        kind, site, size = e.arg
        raw = e.args[0].args[0] if e.args[0].op is Op.CAST and kind != "divisor" else e.args[0]
        term = self._printed(raw)
        value = self.tensor(term, raw.dtype) if term.literal else term.text
        bad = {"divisor": f"{value} == 0", "position": f"({value} < 0) | ({value} >= {size})",
               "index": f"({value} < -{size}) | ({value} >= {size})"}[kind]
        bad = self.temp(bad, axes).text
        lanes = self.k.mask_for(axes)
        fail = f"{bad} & {lanes}" if lanes else bad
        what = "integer division by zero" if kind == "divisor" else f"index out of bounds: 0 <= index < {size}"
        record = self.k.params[ERROR_RECORD]
        self.emitter.emit_lines(self.indent, [f'tl.device_assert(~({fail}), "braze check {site}: {what}")',
                                              f"tl.store({record} + {bad}.to(tl.int32) * 0, {site + 1}, mask={fail})",
                                              f"tl.store({record} + 1 + {bad}.to(tl.int32) * 0, {value}, mask={fail})"])
        if kind == "divisor":
            return Term(value, axes)
        wrapped = f"tl.where({value} < 0, {value} + {size}, {value})" if kind == "index" else value
        index_type = self.k.index_type
        return self.temp(f"tl.where({bad}, 0, {wrapped}).to({index_type})", axes)

    def _conjunction(self, path: list) -> tuple:
        """(text, axes) of the conditions of the where-branches along one path."""
        texts, axes = [], frozenset()
        for cond, negated in path:
            term = self(cond)  # (a path through a later branch: its condition is printed now)
            cond_text = term.text if term.precedence >= 3 else f"({term.text})"
            texts.append(f"~{cond_text}" if negated else cond_text)
            axes = axes | term.axes
        return " & ".join(texts), axes

    # ------------------------------------------------------------------ index arithmetic

    def _index(self, e: Expr, args: list, axes) -> Term:
        op, k = e.op, self.k
        if op is Op.CAST:
            source = self.tensor(args[0], e.args[0].dtype) if args[0].literal else self._wrap(args[0], 3)
            return Term(f"{source}.to({tl_type(e.dtype, k.index_type)})", axes)
        if op is Op.WHERE:
            return Term(f"tl.where({args[0].text}, {args[1].text}, {args[2].text})", axes)
        if op in COMPARISONS:
            return Term(f"({args[0].text} {SYMBOLS[op]} {args[1].text})", axes)
        if op in (Op.MINIMUM, Op.MAXIMUM):
            fn = "tl.minimum" if op is Op.MINIMUM else "tl.maximum"
            return Term(f"{fn}({args[0].text}, {args[1].text})", axes)
        if op is Op.NEG:
            return Term(f"-{self._wrap(args[0], 3)}", axes, precedence=2)
        if op in (Op.FLOORDIV, Op.MOD):
            nonneg = S.bounds(e.args[0])[0] >= 0 and e.args[1].op is Op.CONST and e.args[1].arg > 0
            if not nonneg:
                helper = "index_floordiv" if op is Op.FLOORDIV else "index_mod"
                k.helpers.add(helper)
                return Term(f"{helper}({args[0].text}, {args[1].text})", axes)
            symbol = "//" if op is Op.FLOORDIV else "%"
        elif op in (Op.ADD, Op.SUB, Op.MUL):
            symbol = SYMBOLS[op]
        else:
            raise NotImplementedError(f"triton: index op {op}")
        prec = _PRECEDENCE[op]
        if op is Op.ADD and e.args[1].op is Op.CONST and e.args[1].arg < 0:
            return Term(f"{self._wrap(args[0], prec)} - {-e.args[1].arg}", axes, precedence=prec)
        text = f"{self._wrap(args[0], prec)} {symbol} {self._wrap(args[1], prec + 1)}"
        return Term(text, axes, literal=all(a.literal for a in args), precedence=prec)

    @staticmethod
    def _wrap(term: Term, at_least: int) -> str:
        return term.text if term.precedence >= at_least else f"({term.text})"

    # ------------------------------------------------------------------ values

    def _value_op(self, e: Expr, args: list) -> str:
        dtype = e.args[0].dtype
        if e.op is Op.RANDOM:
            return f"{self._use('philox_' + e.arg)}({args[0]}, {args[1]})"
        if e.arg == ROUNDED and dtype in (torch.float32, torch.float64):
            return f"libdevice.mul_rn({args[0]}, {args[1]})"  # PTX mul.rn: never contracted
        if e.arg == APPROX and dtype in (torch.float32, torch.float64):
            return f"libdevice.rsqrt({args[0]})"  # what CUDA's rsqrt calls
        divisor = e.args[-1]
        if e.op is Op.TRUEDIV and dtype in dtypes.FLOATS and divisor.op is Op.CONST:
            reciprocal = exact_reciprocal(divisor.arg)
            if reciprocal is not None:
                return f"{args[0]} * {literal(reciprocal, dtype)}"
        if dtype in dtypes.FLOATS:
            return self._float_op(e.op, dtype, args)
        if dtype is torch.bool:
            return _bool_op(e.op, args)
        return self._int_op(e.op, dtype, args)

    def _use(self, helper: str) -> str:
        self.k.helpers.add(helper)
        return helper

    def _float_op(self, op: Op, dtype, args: list) -> str:
        a = args[0]
        f32 = dtype is torch.float32
        if op in SYMBOLS:
            return f"{a} {SYMBOLS[op]} {args[1]}"
        if op is Op.NEXTAFTER and dtype in (torch.bfloat16, torch.float16):
            return f"{self._use('nextafter_16')}({a}, {args[1]})"
        if op in LIBDEVICE:
            return f"libdevice.{LIBDEVICE[op]}({', '.join(args)})"
        t = TL_TYPES[dtype]
        div = (lambda x, y: f"tl.math.div_rn({x}, {y})") if f32 else (lambda x, y: f"({x}) / ({y})")
        sqrt = "tl.sqrt_rn" if f32 else "tl.sqrt"
        simple = {
            Op.TRUEDIV: lambda: div(a, args[-1]),
            Op.NEG: lambda: f"{self._use('negate')}({a})",
            Op.ABS: lambda: f"tl.abs({a})",
            Op.SQRT: lambda: f"{sqrt}({a})",
            Op.RSQRT: lambda: div("1.0", f"{sqrt}({a})"),
            Op.RECIPROCAL: lambda: div("1.0", a),
            Op.SIGMOID: lambda: div("1.0", f"1.0 + libdevice.exp(-{a})"),
            Op.FLOOR: lambda: f"tl.floor({a})",
            Op.CEIL: lambda: f"tl.ceil({a})",
            Op.TRUNCDIV: lambda: f"libdevice.trunc({div(a, args[-1])})",
            Op.MAXIMUM: lambda: f"{self._use('maximum_nan')}({a}, {args[-1]})",
            Op.MINIMUM: lambda: f"{self._use('minimum_nan')}({a}, {args[-1]})",
            Op.FMAX: lambda: f"{self._use('fmax')}({a}, {args[-1]})",
            Op.FMIN: lambda: f"{self._use('fmin')}({a}, {args[-1]})",
            Op.FLOORDIV: lambda: f"{self._use('py_floordiv_float')}({a}, {args[-1]})",
            Op.MOD: lambda: f"{self._use('py_mod_float')}({a}, {args[-1]})",
            Op.DIGAMMA: lambda: f"{self._use('digamma')}({a})",
            Op.SIGN: lambda: f"({a} > 0).to({t}) - ({a} < 0).to({t})",
            Op.ISNAN: lambda: f"{a} != {a}",
            Op.ISINF: lambda: f'tl.abs({a}) == float("inf")',
            Op.SIGNBIT: lambda: f"libdevice.signbit({a}) != 0",
        }
        if op in simple:
            return simple[op]()
        raise NotImplementedError(f"triton: {op.value} on {dtype}")

    def _int_op(self, op: Op, dtype, args: list) -> str:
        a = args[0]
        t = TL_TYPES[dtype]
        if op in SYMBOLS:
            return f"{a} {SYMBOLS[op]} {args[1]}"
        if op in INT_HELPERS:
            return f"{self._use(INT_HELPERS[op])}({a}, {args[1]})"
        simple = {
            Op.MAXIMUM: lambda: f"tl.maximum({a}, {args[-1]})",
            Op.FMAX: lambda: f"tl.maximum({a}, {args[-1]})",
            Op.MINIMUM: lambda: f"tl.minimum({a}, {args[-1]})",
            Op.FMIN: lambda: f"tl.minimum({a}, {args[-1]})",
            Op.POW: lambda: f"{self._use('int_pow')}({a}, {args[-1]}, {BITS[dtype]})",
            Op.LSHIFT: lambda: f"{self._use('shift_left')}({a}, {args[-1]}, {BITS[dtype]})",
            Op.RSHIFT: lambda: f"{self._use('shift_right')}({a}, {args[-1]}, {BITS[dtype]})",
            Op.NEG: lambda: f"-{a}",
            Op.ABS: lambda: f"tl.where({a} < 0, -{a}, {a})",
            Op.BITWISE_NOT: lambda: f"~{a}" if dtype is not torch.uint8 else f"{a} ^ 255",
            Op.LOGICAL_NOT: lambda: f"{a} == 0",
            Op.SIGN: lambda: f"({a} > 0).to({t}) - ({a} < 0).to({t})",
            Op.ISNAN: lambda: f"{a} != {a}",
            Op.ISINF: lambda: f"{a} != {a}",
            Op.SIGNBIT: lambda: f"{a} < 0",
        }
        if op in simple:
            return simple[op]()
        raise NotImplementedError(f"triton: {op.value} on {dtype}")


def _bool_op(op: Op, args: list) -> str:
    if op in SYMBOLS and op not in (Op.ADD, Op.SUB, Op.MUL):
        return f"{args[0]} {SYMBOLS[op]} {args[1]}"
    if op is Op.LOGICAL_NOT:
        return f"{args[0]} == 0"
    if op in (Op.ISNAN, Op.ISINF, Op.SIGNBIT):
        return f"{args[0]} != {args[0]}"
    raise NotImplementedError(f"triton: {op.value} on bool")
