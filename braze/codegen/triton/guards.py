"""Loads that only a ``where`` branch reads: masked by its condition, not clamped.

Takes: the expressions of one kernel plan (loads in storage form) and the storage
extent of each buffer. Gives: ``guarded_loads``: for each load whose position is not
provably inside its buffer, whose position is plain index arithmetic (no loaded
value in it), and which every use reaches through one branch of a ``where`` (or
several, nested), the conditions of those branches: ``[(condition, negated)]``,
keyed by ``id`` of the load.

The printer masks such a load by its conditions (and the block masks) instead of
clamping its position into the buffer, when one of them states index bounds (index
arithmetic only, or an ``and`` with such a term: ``_bounding``). A ``cat`` or ``pad`` lowers to
``where(i < n, a[i], b[i - n])``: each branch's position is inside its buffer exactly
where its condition holds, so the masked load reads what eager reads and nothing
outside the buffer. Clamping (``min(max(pos, 0), extent - 1)``) kept the addresses
in range too, but hid the contiguity of the position from Triton, so a clamped load
was never vectorized: rotary embedding's two halves were read 2 bytes at a time.
A gather (a position computed from loaded indices) stays clamped: an index out of
range must not fault.
"""
from __future__ import annotations

from braze.ir import simplify as S
from braze.ir.expr import Op, search, walk

MAX_WORK = 1 << 18  # where-branches times nodes: past this, every such load is clamped


def needs_clamp(load, extents: dict) -> bool:
    lo, hi = S.bounds(load.args[0])
    return lo < 0 or hi > extents[load.arg] - 1


def guarded_loads(roots: list, extents: dict) -> dict:
    nodes = walk(roots)
    candidates = {id(e) for e in nodes if e.op is Op.LOAD and needs_clamp(e, extents)
                  and not any(a.op is Op.LOAD for a in walk(e.args[0]))}
    if not candidates:
        return {}
    branches = [(w, k) for w in nodes if w.op is Op.WHERE for k in (1, 2)
                if candidates & {id(e) for e in walk(w.args[k])}]
    if len(branches) * len(nodes) > MAX_WORK:
        return {}
    guards: dict = {}
    for w, k in branches:
        inside = candidates & {id(e) for e in walk(w.args[k])}
        for load in inside - _reachable_without(roots, w, k):
            guards.setdefault(load, []).append((w.args[0], k == 2))
    return {load: conds for load, conds in guards.items() if any(_bounding(c, n) for c, n in conds)}


def _bounding(condition, negated: bool) -> bool:
    """Whether a branch condition states index bounds (as cat, pad and the scatters write
    them): index arithmetic only, or, taken as is, an ``and`` with such a term. A branch of
    a condition on loaded values (relu's backward: ``x <= 0``) proves nothing about where
    its loads may point, so they stay clamped."""
    if _index_only(condition):
        return True
    if negated or condition.op is not Op.AND:
        return False
    return any(_bounding(term, False) for term in condition.args)


def _index_only(condition) -> bool:
    return not any(e.op is Op.LOAD for e in walk(condition))


def _reachable_without(roots: list, where, branch: int) -> set:
    """ids of the nodes reachable from ``roots`` other than through ``where``'s ``branch``."""
    return {id(e) for e in search(roots, lambda e: [a for j, a in enumerate(e.args)
                                                    if not (e is where and j == branch)])}
