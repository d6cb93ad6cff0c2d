"""What a row kernel of the C++ backend keeps and prefetches between the loops of a row.

Takes: a kernel plan of shape ``row`` whose rows are walked by more than one loop
(softmax: max; sum of exp(x - max); exp(x - max) / sum). Gives:
- ``keeps(plan)``: per-element values that one loop over a row computes and a
  later loop of the same row needs again: kept in a per-row array (when the row
  has at most ``SCRATCH_MAX`` elements) instead of recomputed. These are the largest
  shared subexpressions that hold a costly op (``EXPENSIVE``): softmax's
  exp(x - max) once per element, a masked softmax's ``x / t + mask`` with it.
- ``prefetches(plan)``: the next row's lines to prefetch during a later loop of
  this row: what the first loop loads and what the last loop stores, when they
  walk the row contiguously. The first loop then finds its row in cache while
  the costly loops of the row before ran; the hardware prefetcher alone
  follows only the loop that streams (docs/benchmarks.md, "CPU kernels").
"""
from __future__ import annotations

from dataclasses import dataclass

from braze.ir import simplify as S
from braze.ir.expr import EXPENSIVE, Op, free_vars, search, walk

SCRATCH_MAX = 1 << 14  # longest row whose costly values are kept for a later loop


@dataclass(frozen=True)
class Prefetch:
    buffer: str
    position: object  # storage position (Expr) in this row
    row_step: int  # storage elements from this row to the next
    write: bool


def _row_loops(plan) -> list:
    """The levels that loop over the row (odd ones), when there is one reduce loop."""
    if len(plan.reduce) != 1:
        return []
    return [level for level in plan.levels if level % 2]


def keeps(plan) -> list:
    """(expression, level of the loop that computes and keeps it), in order."""
    loops = _row_loops(plan)
    if len(loops) < 2 or plan.reduce[0].size > SCRATCH_MAX:
        return []
    r = plan.reduce[0]
    first: dict = {}  # id(expr) -> the first loop computing it
    chosen: dict = {}  # id(expr) -> (expr, that loop)
    for level in loops:
        roots = [m.value for m in plan.members if m.level == level]
        for e in _shared(roots, first, level, r):
            chosen.setdefault(id(e), (e, first[id(e)]))
        for e in walk(roots):
            if r in free_vars(e):
                first.setdefault(id(e), level)
    return list(chosen.values())


def _shared(roots: list, first: dict, level: int, r) -> list:
    """The largest subexpressions of ``roots`` that an earlier loop computed and that
    hold a costly op of the row (searched from the roots down)."""
    def kept(e) -> bool:
        return first.get(id(e), level) != level and _costly(e, r)
    return [e for e in search(roots, lambda e: [] if kept(e) else e.args) if kept(e)]


def _costly(e, r) -> bool:
    return any(n.op in EXPENSIVE and r in free_vars(n) for n in walk(e))


def prefetches(plan, skip: set = frozenset()) -> dict:
    """Level -> ``Prefetch``es to issue in that loop: the first loop's contiguous loads
    during the second loop, the last loop's contiguous stores during the last (but to
    the buffers in ``skip``: written by non-temporal stores, ``streams``)."""
    loops = _row_loops(plan)
    if len(loops) < 2 or not plan.outer:
        return {}
    x, r = plan.outer[-1], plan.reduce[0]
    found: dict = {}
    loads = [e for m in plan.members if m.level == loops[0] for e in walk(m.value) if e.op is Op.LOAD]
    for e in loads:
        _add(found, loops[1], Prefetch(e.arg, e.args[0], S.coefficient(e.args[0], x), False), r)
    for m in plan.members:
        if m.level == loops[-1] and m.store is not None and m.reduce_op is None and m.target not in skip:
            _add(found, loops[-1], Prefetch(m.target, m.store, S.coefficient(m.store, x), True), r)
    return found


def _add(found: dict, level: int, p: Prefetch, r) -> None:
    """Keep ``p`` if its position walks the row contiguously, moves to the next row by a
    known step, and is plain index arithmetic (no indirect load)."""
    if p.row_step in (None, 0) or S.coefficient(p.position, r) != 1:
        return
    if any(n.op in (Op.LOAD, Op.VALUE) for n in walk(p.position)):
        return
    entries = found.setdefault(level, [])
    if all((q.buffer, id(q.position)) != (p.buffer, id(p.position)) for q in entries):
        entries.append(p)
