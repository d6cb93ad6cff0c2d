"""Exact division of size polynomials, and chains of sizes each dividing the next.

Takes: ``Size`` polynomials and ints (``ir/symbols.py``). Gives: ``divide``, a size split
into the part a divisor divides exactly (divided) and the rest (``symbols.floordiv`` and
``modulo`` use it), ``divide_by_polynomial``, the exact quotient of a size by a polynomial
of several terms, and ``divisor_chain``, sizes ordered so that
each divides the next (the loop nest of a kernel with symbolic extents, ``fuse/legality``).
Structural only: no range is consulted and no guard is added.
"""
from __future__ import annotations

from braze.ir.symbols import Size, _is_zero, _terms


def divisor_chain(values) -> list | None:
    """``values`` (positive) ordered so that each divides the next, or None where that
    is not proven (``s0`` and ``s1``: either could be larger). No guard is added."""
    def degree(v):
        if not isinstance(v, Size):
            return (0, v)
        monomial, k = _leading(v)
        return (len(monomial), k)
    keys = [degree(v) for v in values]
    if None in keys:
        return None
    order = [v for _, v in sorted(zip(keys, values), key=lambda t: t[0])]
    for a, b in zip(order, order[1:]):
        if not _is_zero(b % a if not isinstance(a, Size) and not isinstance(b, Size) else divide(b, a)[1]):
            return None
    return order


def divide_by_polynomial(a, d: Size, steps: int = 64) -> tuple:
    """Long division by ``d`` in a graded lexicographic order of the monomials: the leading
    term of what is left is divided by ``d``'s, until nothing is left (``d`` divides ``a``:
    one polynomial is a Groebner basis of the multiples of it, so the division leaves
    nothing exactly when it divides) or a leading term is not a multiple of ``d``'s. Integer
    coefficients only; ``(0, a)`` where no exact quotient is found."""
    keys = sorted({atom.key for m, _ in _terms(a) + d.terms for atom in m})

    def order(term):
        counts = [atom.key for atom in term[0]]
        return (len(term[0]), [counts.count(key) for key in keys])
    dm, dk = max(d.terms, key=order)
    quotient, rest = 0, a
    for _ in range(steps):
        if _is_zero(rest):
            return quotient, 0
        m, k = max(_terms(rest), key=order)
        left = _without(m, dm)
        if left is None or k % dk:
            break
        step = Size._make({left: k // dk})
        quotient, rest = quotient + step, rest - step * d
    return (0, a)


def _leading(v: Size) -> tuple:
    """The term of ``v`` of the highest degree (the first such in ``v``'s order)."""
    return max(v.terms, key=lambda t: len(t[0]))


def divide(a, d) -> tuple:
    """``(q, r)`` with ``a == q*d + r``: the terms of ``a`` that ``d`` divides exactly,
    divided, and the rest (``d`` an int or a single monomial); for a ``d`` of several
    terms, ``(q, 0)`` where ``d`` divides ``a`` exactly (``768*s + 768`` over ``64*s + 64``,
    ``s0*s1 - s0 - s1 + 1`` over ``s1 - 1``), else ``(0, a)``."""
    if isinstance(d, Size) and len(d.terms) != 1:
        return divide_by_polynomial(a, d)
    dm, dk = d.terms[0] if isinstance(d, Size) else ((), d)
    quotient, rest = {}, {}
    for m, k in _terms(a):
        left = _without(m, dm)
        if left is not None and k % dk == 0:
            quotient[left] = quotient.get(left, 0) + k // dk
        else:
            rest[m] = k
    return Size._make(quotient), Size._make(rest)


def _without(m: tuple, dm: tuple):
    left = list(m)
    for a in dm:
        if a not in left:
            return None
        left.remove(a)
    return tuple(left)
