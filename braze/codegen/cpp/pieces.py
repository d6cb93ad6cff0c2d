"""Pointwise kernels whose innermost loop is cut where a condition on its index flips.

Takes: a pointwise ``CppKernel`` with several loops. Gives: ``pieces(kernel)``, the
ranges ``[lo, hi)`` of the innermost loop between the points where a comparison of
that loop's variable with a constant changes value (``torch.cat`` and ``F.pad`` along
the last dimension: ``x2 < 64``), and ``over_piece``, which rewrites an expression over
a variable of one range. In a piece such a comparison is a constant, so a ``where``
keeps one branch, and the loads of the branch not taken disappear with their clamped
positions (which GCC vectorizes as gathers, not contiguous loads): a rotary
embedding's ``cat([-x2, x1])`` runs several times faster in two pieces than in one
loop (docs/benchmarks.md, "CPU kernels"). A symbolic width (``x[..., s0 // 2:]``) cuts
the loop at a symbolic point, where the comparison has slope 1 or -1; the pieces' extents
are sizes, and the ranges of their variables decide the comparison in each.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from braze.ir import dtypes, symbols
from braze.ir import simplify as S
from braze.ir.expr import COMPARISONS, Op, const, rewrite, var, walk

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel

MAX_PIECES = 8  # more: the copies of the loop body cost more code than the branches they drop


def pieces(kernel: CppKernel) -> list:
    """``[(lo, hi), ...]`` covering the innermost loop, or [] when it is not cut."""
    plan = kernel.plan
    if len(plan.outer) < 2 or set(plan.reads) & set(plan.writes):
        return []
    z = plan.outer[-1]
    points = sorted({p for e in walk(plan.expressions()) for p in _flips(e, z)})
    if not points or len(points) >= MAX_PIECES:
        return []
    edges = [0, *points, z.size]
    return list(zip(edges, edges[1:]))


def _flips(e, z) -> list:
    """Where the index comparison ``e`` changes value along ``z`` alone (no other
    variable in it): the ``p`` in (0, z.size) with ``e(p - 1) != e(p)``."""
    if e.op not in COMPARISONS or e.args[0].dtype is not dtypes.INDEX:
        return []
    terms, const = S.linear(S.sub(e.args[0], e.args[1]))
    if set(terms) != {z}:
        return []
    slope = terms[z]
    if symbols.is_symbolic(const):
        return _symbolic_flip(e.op, slope, const, z)
    edge = math.floor(-const / slope)
    holds = _TRUTH[e.op]
    return [p for p in range(edge - 1, edge + 3)
            if 0 < p < z.size and holds(slope * p + const) != holds(slope * (p - 1) + const)]


def _symbolic_flip(op, slope: int, const, z) -> list:
    """Where ``slope*z + const op 0`` flips, ``const`` symbolic: ``z < b`` and ``z >= b``
    at ``b``, ``z <= b`` and ``z > b`` at ``b + 1`` (guarded inside the loop)."""
    if slope not in (1, -1) or op not in _MIRROR:
        return []
    bound, op = (-const, op) if slope == 1 else (const, _MIRROR[op])
    point = bound if op in (Op.LT, Op.GE) else bound + 1
    return [point] if 0 < point < z.size else []


_MIRROR = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE}  # -z + c op 0 is z op' c
_TRUTH = {Op.LT: lambda d: d < 0, Op.LE: lambda d: d <= 0, Op.GT: lambda d: d > 0,
          Op.GE: lambda d: d >= 0, Op.EQ: lambda d: d == 0, Op.NE: lambda d: d != 0}


def piece_name(z, k: int) -> str:
    return f"{z.name}_{k}"


def piece_var(z, k: int, lo, hi):
    """The loop variable of piece ``k``, ``[lo, hi)``: ``z - lo``, over ``hi - lo`` values."""
    return var(piece_name(z, k), hi - lo)


def over_piece(e, z, k: int, lo, hi, memo: dict):
    """``e`` with ``z`` replaced by ``lo`` + the piece's variable, conditions folded:
    comparisons that the piece decides, then ``and``/``or``/``not`` of them (``F.pad``:
    ``x2 >= 2 and x2 < 11``) and the ``where`` they select with."""
    if e is None:
        return None
    shifted = S.add(piece_var(z, k, lo, hi), lo)
    return rewrite(e, lambda node, args: shifted if node is z else _fold_logic(node, args), memo)


def _fold_logic(node, args):
    """A logical op on a constant operand, folded (None: rebuild as is)."""
    if node.op is Op.LOGICAL_NOT and args[0].op is Op.CONST:
        return const(not args[0].arg, torch.bool)
    if node.op in (Op.AND, Op.OR) and node.dtype is torch.bool:
        absorbing = node.op is Op.OR  # True decides an or, False an and
        for known, other in (args, args[::-1]):
            if known.op is Op.CONST:
                return known if bool(known.arg) == absorbing else other
    return None
