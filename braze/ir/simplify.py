"""Index arithmetic in canonical form.

Takes: index expressions (dtype ``INDEX``): loop variables, constants, and the
ops ``+ - * // %``, comparisons, min/max and ``where`` over them.
Gives: builders that keep every index expression in one canonical form, so that
equal affine expressions are the same interned node, and ``bounds(e)``, the
interval an index expression lies in.

Canonical form: a sum of terms ``atom * coefficient`` sorted by atom, then a
constant. Atoms are variables, ``a // d``, ``a % d`` and products of non-constant
factors. Division and modulo by a positive constant are simplified using the
variables' extents: ``(x0*64 + x1) // 64 -> x0`` when ``x1 < 64``, and
``(t // k)*k + t % k -> t``. Floor semantics throughout (Python's ``//``, ``%``).
"""
from __future__ import annotations

import math
import operator

import torch

from braze.ir import dtypes, symbols
from braze.ir.expr import COMPARISONS, Expr, Op, index

INDEX = dtypes.INDEX
INF = math.inf


# ----------------------------------------------------------------------------- linear form

def linear(e: Expr) -> tuple[dict, int]:
    """``e`` as ``({atom: coefficient}, constant)``; the dict must not be mutated."""
    memo = e.memo()
    found = memo.get("linear")
    if found is None:
        found = _linear(e)
        memo["linear"] = found
    return found


def _linear(e: Expr) -> tuple[dict, int]:
    if e.op is Op.CONST:
        return {}, e.arg
    if e.op is Op.ADD:
        return _combine(linear(e.args[0]), linear(e.args[1]), 1)
    if e.op is Op.SUB:
        return _combine(linear(e.args[0]), linear(e.args[1]), -1)
    if e.op is Op.MUL and e.args[1].op is Op.CONST:
        terms, const = linear(e.args[0])
        c = e.args[1].arg
        return {t: k * c for t, k in terms.items()}, const * c
    return {e: 1}, 0


def _combine(a: tuple, b: tuple, sign: int) -> tuple[dict, int]:
    terms = dict(a[0])
    for t, k in b[0].items():
        terms[t] = terms.get(t, 0) + sign * k
    return terms, a[1] + sign * b[1]


def _sort_key(atom: Expr):
    if atom.op is Op.VAR:
        return (0, atom.arg[0])
    return (1, repr(atom))


def _merge_div_mod(terms: dict) -> tuple[dict, int]:
    """``(t // k) * (c*k) + (t % k) * c  ->  t * c``, repeated until nothing merges;
    returns the terms and a constant."""
    extra = 0
    merged = True
    while merged:
        merged = False
        for m in [t for t in terms if t.op is Op.MOD and t.args[1].op is Op.CONST]:
            t, k = m.args[0], m.args[1].arg
            div = floordiv(t, k)
            c = terms.get(m)
            if not c or terms.get(div) != c * k:
                continue
            del terms[m]
            del terms[div]
            inner, inner_const = linear(t)
            for atom, coeff in inner.items():
                terms[atom] = terms.get(atom, 0) + coeff * c
            terms = {a: v for a, v in terms.items() if v}
            extra += inner_const * c
            merged = True
            break
    return terms, extra


# ----------------------------------------------------------------------------- builders

def as_index(value) -> Expr:
    return value if isinstance(value, Expr) else index(value)


def add(a, b) -> Expr:
    a, b = as_index(a), as_index(b)
    terms, const = _combine(linear(a), linear(b), 1)
    return _canonical(terms, const)


def sub(a, b) -> Expr:
    a, b = as_index(a), as_index(b)
    terms, const = _combine(linear(a), linear(b), -1)
    return _canonical(terms, const)


def _canonical(terms: dict, const: int) -> Expr:
    merged, extra = _merge_div_mod({t: k for t, k in terms.items() if k != 0})
    const += extra
    result = None
    for atom in sorted(merged, key=_sort_key):
        k = merged[atom]
        if k == 0:
            continue
        term = atom if k == 1 else Expr(Op.MUL, INDEX, (atom, index(k)))
        result = term if result is None else Expr(Op.ADD, INDEX, (result, term))
    if result is None:
        return index(const)
    if const:
        result = Expr(Op.ADD, INDEX, (result, index(const)))
    return result


def mul(a, b) -> Expr:
    a, b = as_index(a), as_index(b)
    if a.op is Op.CONST:
        a, b = b, a
    if b.op is Op.CONST:
        terms, const = linear(a)
        c = b.arg
        return _canonical({t: k * c for t, k in terms.items()}, const * c)
    first, second = sorted((a, b), key=_sort_key)
    return Expr(Op.MUL, INDEX, (first, second))


def neg(a) -> Expr:
    return mul(a, -1)


def sum_of(values) -> Expr:
    result = index(0)
    for v in values:
        result = add(result, v)
    return result


def floordiv(a, d) -> Expr:
    a, d = as_index(a), as_index(d)
    if d.op is not Op.CONST or d.arg <= 0:
        return Expr(Op.FLOORDIV, INDEX, (a, d))
    d = d.arg
    if d == 1:
        return a
    if a.op is Op.CONST:
        return index(a.arg // d)
    terms, const = linear(a)
    quotient = {t: k // d for t, k in terms.items() if k % d == 0}
    rest = {t: k for t, k in terms.items() if k % d != 0}
    q_const, r_const = divmod(const, d)
    return add(_canonical(quotient, q_const), _div_rest(rest, r_const, d))


def _div_rest(rest: dict, const: int, d: int) -> Expr:
    if not rest:
        return index(const // d)
    r = _canonical(rest, const)
    lo, hi = bounds(r)
    if lo >= 0 and hi < d:
        return index(0)
    g = _gcd(d, const, *rest.values())
    if g > 1:
        return floordiv(_canonical({t: k // g for t, k in rest.items()}, const // g), d // g)
    if len(rest) == 1 and not const:
        (atom, k), = rest.items()
        if k == 1 and atom.op is Op.FLOORDIV and atom.args[1].op is Op.CONST:
            return floordiv(atom.args[0], atom.args[1].arg * d)
    split = _split_leading(rest, const, d)
    if split is not None:
        atom, c, _ = split
        return floordiv(atom, d // c)
    return Expr(Op.FLOORDIV, INDEX, (r, index(d)))


def _gcd(*values) -> int:
    """The gcd of integers; 1 where one is a symbolic size (nothing to factor out)."""
    return math.gcd(*values) if all(isinstance(v, int) for v in values) else 1


def _split_leading(rest: dict, const: int, d: int):
    """Find ``c*t`` in ``rest`` with ``c | d`` and the remainder in ``[0, c)``."""
    for atom, c in sorted(rest.items(), key=lambda item: -abs(item[1])):
        if c <= 1 or d % c:
            continue
        others = {t: k for t, k in rest.items() if t is not atom}
        lo, hi = bounds(_canonical(others, const))
        if lo >= 0 and hi < c:
            return atom, c, _canonical(others, const)
    return None


def mod(a, d) -> Expr:
    a, d = as_index(a), as_index(d)
    if d.op is not Op.CONST or d.arg <= 0:
        return Expr(Op.MOD, INDEX, (a, d))
    d = d.arg
    if d == 1:
        return index(0)
    if a.op is Op.CONST:
        return index(a.arg % d)
    terms, const = linear(a)
    rest = {t: k for t, k in terms.items() if k % d != 0}
    const %= d
    if not rest:
        return index(const)
    r = _canonical(rest, const)
    lo, hi = bounds(r)
    if lo >= 0 and hi < d:
        return r
    g = _gcd(d, const, *rest.values())
    if g > 1:
        inner = mod(_canonical({t: k // g for t, k in rest.items()}, const // g), d // g)
        return mul(inner, g)
    if len(rest) == 1 and not const:
        (atom, k), = rest.items()
        if k == 1 and atom.op is Op.MOD and atom.args[1].op is Op.CONST and atom.args[1].arg % d == 0:
            return mod(atom.args[0], d)
    split = _split_leading(rest, const, d)
    if split is not None:
        atom, c, remainder = split
        return add(mul(mod(atom, d // c), c), remainder)
    return Expr(Op.MOD, INDEX, (r, index(d)))


def minimum(a, b) -> Expr:
    a, b = as_index(a), as_index(b)
    (alo, ahi), (blo, bhi) = bounds(a), bounds(b)
    if ahi <= blo:
        return a
    if bhi <= alo:
        return b
    return Expr(Op.MINIMUM, INDEX, (a, b))


def maximum(a, b) -> Expr:
    a, b = as_index(a), as_index(b)
    (alo, ahi), (blo, bhi) = bounds(a), bounds(b)
    if alo >= bhi:
        return a
    if blo >= ahi:
        return b
    return Expr(Op.MAXIMUM, INDEX, (a, b))


def clamp(a, lo: int, hi: int) -> Expr:
    """``a`` limited to ``[lo, hi]``; free when bounds already prove it."""
    return minimum(maximum(a, lo), hi)


def compare(op: Op, a, b) -> Expr:
    a, b = as_index(a), as_index(b)
    lo, hi = bounds(sub(a, b))
    holds, fails = _FOLDS[op]
    if holds(lo, hi):
        return Expr(Op.CONST, torch.bool, (), True)
    if fails(lo, hi):
        return Expr(Op.CONST, torch.bool, (), False)
    return Expr(op, torch.bool, (a, b))


def _sure(bound, op: str) -> bool:
    """``bound op 0`` proven by the symbols' ranges alone. A comparison the ranges leave open
    stays in the code, evaluated at run time: folding it by the sizes of the call being
    compiled would add a guard, and a size class per outcome (``(s0 + 1) % 8 != 0``: eight)."""
    if isinstance(bound, symbols.Size):
        return symbols.known(bound, op, 0) is True
    return _COMPARE[op](bound, 0)


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _zero(lo, hi) -> bool:
    return _sure(lo, ">=") and _sure(hi, "<=")


def _nonzero(lo, hi) -> bool:
    return _sure(lo, ">") or _sure(hi, "<")


# op -> (does ``a - b`` in [lo, hi] prove ``a op b``, does it disprove it); only the one asked is evaluated
_FOLDS = {
    Op.LT: (lambda lo, hi: _sure(hi, "<"), lambda lo, hi: _sure(lo, ">=")),
    Op.LE: (lambda lo, hi: _sure(hi, "<="), lambda lo, hi: _sure(lo, ">")),
    Op.GT: (lambda lo, hi: _sure(lo, ">"), lambda lo, hi: _sure(hi, "<=")),
    Op.GE: (lambda lo, hi: _sure(lo, ">="), lambda lo, hi: _sure(hi, "<")),
    Op.EQ: (_zero, _nonzero), Op.NE: (_nonzero, _zero),
}


def where(cond: Expr, a, b) -> Expr:
    a, b = as_index(a), as_index(b)
    if cond.op is Op.CONST:
        return a if cond.arg else b
    if a is b:
        return a
    return Expr(Op.WHERE, INDEX, (cond, a, b))


def build(op: Op, args: tuple, arg=None) -> Expr:
    """Rebuild an index node of kind ``op`` (payload ``arg``) from new children."""
    if op is Op.ADD:
        return add(*args)
    if op is Op.SUB:
        return sub(*args)
    if op is Op.MUL:
        return mul(*args)
    if op is Op.FLOORDIV:
        return floordiv(*args)
    if op is Op.MOD:
        return mod(*args)
    if op is Op.MINIMUM:
        return minimum(*args)
    if op is Op.MAXIMUM:
        return maximum(*args)
    if op is Op.NEG:
        return neg(args[0])
    if op in COMPARISONS:
        return compare(op, *args)
    return Expr(op, INDEX, args, arg)


# ----------------------------------------------------------------------------- bounds

def bounds(e: Expr) -> tuple:
    """Inclusive ``(lo, hi)`` of an index expression (``±inf`` when unknown)."""
    memo = e.memo()
    found = memo.get("bounds")
    if found is None:
        found = _bounds(e)
        memo["bounds"] = found
    return found


def _bounds(e: Expr) -> tuple:
    op = e.op
    if op is Op.CONST:
        return (e.arg, e.arg)
    if op is Op.VAR:
        return (0, e.arg[1] - 1)
    if op is Op.CAST:
        return _dtype_range(e.args[0].dtype)
    if op is Op.ADD:
        (a, b), (c, d) = bounds(e.args[0]), bounds(e.args[1])
        return (a + c, b + d)
    if op is Op.SUB:
        (a, b), (c, d) = bounds(e.args[0]), bounds(e.args[1])
        return (a - d, b - c)
    if op is Op.NEG:
        a, b = bounds(e.args[0])
        return (-b, -a)
    if op is Op.MUL:
        (a, b), (c, d) = bounds(e.args[0]), bounds(e.args[1])
        products = [_times(x, y) for x in (a, b) for y in (c, d)]
        return (min(products), max(products))
    if op is Op.FLOORDIV and e.args[1].op is Op.CONST and e.args[1].arg > 0:
        a, b = bounds(e.args[0])
        d = e.args[1].arg
        return (_floor_div(a, d), _floor_div(b, d))
    if op is Op.MOD and e.args[1].op is Op.CONST and e.args[1].arg > 0:
        a, b = bounds(e.args[0])
        d = e.args[1].arg
        if a >= 0 and b < d:
            return (a, b)
        return (0, d - 1)
    if op is Op.CHECK and e.arg[0] != "divisor":
        return (0, max(e.arg[2] - 1, 0))
    if op is Op.CHECK:
        return bounds(e.args[0])
    if op is Op.WHERE:
        (a, b), (c, d) = bounds(e.args[1]), bounds(e.args[2])
        return (min(a, c), max(b, d))
    if op is Op.MINIMUM:
        (a, b), (c, d) = bounds(e.args[0]), bounds(e.args[1])
        return (min(a, c), min(b, d))
    if op is Op.MAXIMUM:
        (a, b), (c, d) = bounds(e.args[0]), bounds(e.args[1])
        return (max(a, c), max(b, d))
    return (-INF, INF)


def _times(x, y):
    if x == 0 or y == 0:
        return 0
    return x * y


def _floor_div(x, d):
    return x if isinstance(x, float) and math.isinf(x) else x // d


def _dtype_range(dtype) -> tuple:
    if dtype is torch.bool:
        return (0, 1)
    if dtype in dtypes.INTEGERS:
        info = torch.iinfo(dtype)
        return (info.min, info.max)
    return (-INF, INF)


# ----------------------------------------------------------------------------- layouts

def flat_offset(indices, strides, offset: int = 0) -> Expr:
    """Storage position of a logical index under ``strides``."""
    terms: dict = {}
    const = offset
    for idx, stride in zip(indices, strides):
        t, c = linear(as_index(idx))
        for atom, k in t.items():
            terms[atom] = terms.get(atom, 0) + k * stride
        const += c * stride
    return _canonical(terms, const)


def unravel(flat: Expr, sizes) -> list[Expr]:
    """Row-major indices of a flat position over ``sizes``."""
    out = []
    suffix = 1
    for size in reversed(sizes):
        out.append(mod(floordiv(flat, suffix), size) if size != 1 else index(0))
        suffix *= size
    return out[::-1]


def ravel(indices, sizes) -> Expr:
    """Row-major flat position of ``indices`` over ``sizes``."""
    strides = row_major_strides(sizes)
    return flat_offset(indices, strides)


def row_major_strides(sizes) -> list[int]:
    strides = []
    acc = 1
    for size in reversed(list(sizes)):
        strides.append(acc)
        acc *= max(size, 1)
    return strides[::-1]


def coefficient(e: Expr, v: Expr):
    """The coefficient of variable ``v`` in ``e`` if ``e`` is affine in ``v``, else None."""
    terms, _ = linear(e)
    k = terms.get(v, 0)
    for atom in terms:
        if atom is not v and v in _vars_of(atom):
            return None
    return k


def _vars_of(e: Expr) -> frozenset:
    from braze.ir.expr import free_vars
    return free_vars(e)
