"""Exact division of size polynomials, and chains of sizes each dividing the next.

Takes: ``Size`` polynomials and ints (``ir/symbols.py``). Gives: ``divide_by_polynomial``,
the exact quotient of a size by a polynomial of several terms (``symbols.floordiv`` and
``modulo`` use it through ``symbols._divide``), and ``divisor_chain``, sizes ordered so that
each divides the next (the loop nest of a kernel with symbolic extents, ``fuse/legality``).
Structural only: no range is consulted and no guard is added.
"""
from __future__ import annotations

from braze.ir.symbols import Size, _divide, _is_zero, _terms, _without


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
        if not _is_zero(b % a if not isinstance(a, Size) and not isinstance(b, Size) else _divide(b, a)[1]):
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
