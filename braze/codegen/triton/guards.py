"""Loads that only a ``where`` branch reads: masked by its condition, not clamped.

Takes: the expressions of one kernel plan (loads in storage form) and the storage
extent of each buffer. Gives: ``guarded_loads``: for each load whose position is not
provably inside its buffer, whose position is plain index arithmetic (no loaded
value in it), and whose every use lies inside one branch of a ``where`` (or several,
nested), the index-bound terms of each path's conditions: ``[[(term, negated), ...], ...]``,
one list per distinct path, keyed by ``id`` of the load.

The printer masks such a load by the union of its paths' bound terms (and the block
masks) instead of clamping its position into the buffer, when every path holds such a
term (a condition of index arithmetic only, or one of an ``and``'s: ``_bounds_of``).
A ``cat`` or ``pad`` lowers to ``where(i < n, a[i], b[i - n])``: each branch's position
is inside its buffer exactly where its condition holds, so the masked load reads what
eager reads and nothing outside the buffer. A load shared by
two paths (a circular pad's corners read the same element through different nested
branches) is inside its buffer only where one path's conditions all hold: masking it by
the conditions the paths have in common let lanes of neither path read far outside
(an illegal address on the H100). Clamping (``min(max(pos, 0), extent - 1)``) kept
the addresses in range too, but hid the contiguity of the position from Triton, so a
clamped load was never vectorized: rotary embedding's two halves were read 2 bytes at
a time. A gather (a position computed from loaded indices) stays clamped: an index
out of range must not fault.
"""
from __future__ import annotations

from braze.ir import simplify as S
from braze.ir.expr import Op, walk

MAX_WORK = 1 << 18  # (node, path) visits: past this, every such load is clamped
MAX_PATHS = 8  # distinct paths to one load: past this, it is clamped


def needs_clamp(load, extents: dict) -> bool:
    lo, hi = S.bounds(load.args[0])
    return lo < 0 or hi > extents[load.arg] - 1


def guarded_loads(roots: list, extents: dict) -> dict:
    nodes = walk(roots)
    candidates = {id(e) for e in nodes if e.op is Op.LOAD and needs_clamp(e, extents) and _index_only(e.args[0])}
    if not candidates:
        return {}
    paths = _paths_to(roots, nodes, candidates)
    if paths is None:
        return {}
    guards = {}
    for load, found in paths.items():
        bounds = [[b for c, n in path for b in _bounds_of(c, n)] for path in found.values()]
        if len(bounds) <= MAX_PATHS and all(bounds):
            guards[load] = bounds
    return guards


def _bounds_of(condition, negated: bool) -> list:
    """The index-bound terms of a branch condition, ``[(term, negated)]``: the condition itself
    when it is index arithmetic only, the index-only terms of an ``and`` taken as is (as cat,
    pad and the scatters write them), else none. Only these mask a load: they keep its
    position inside its buffer, and they can be printed wherever the load is, while a term
    on loaded values (relu's backward: ``x <= 0``; a label that is not ``ignore_index``) may
    read a value the kernel computes later (a row's log-sum-exp) and proves nothing about
    where the load points."""
    if _index_only(condition):
        return [(condition, negated)]
    if negated or condition.op is not Op.AND:
        return []
    return [b for term in condition.args for b in _bounds_of(term, False)]


def _paths_to(roots: list, nodes: list, candidates: set) -> dict | None:
    """For each candidate load, the distinct where-branch paths from ``roots`` that reach it
    (each a tuple of ``(condition, negated)``, outermost first), or None past ``MAX_WORK``."""
    leads = set(candidates)  # nodes with a candidate at or below them
    for e in nodes:  # children first
        if any(id(a) in leads for a in e.args):
            leads.add(id(e))
    paths: dict = {}
    seen: set = set()
    stack = [(r, ()) for r in roots if id(r) in leads]
    while stack:
        node, path = stack.pop()
        key = (id(node), tuple((id(c), n) for c, n in path))
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > MAX_WORK:
            return None
        if id(node) in candidates:
            paths.setdefault(id(node), {}).setdefault(key[1], path)
            continue
        for k, arg in enumerate(node.args):
            if id(arg) in leads:
                inner = path + ((node.args[0], k == 2),) if node.op is Op.WHERE and k else path
                stack.append((arg, inner))
    return paths


def _index_only(condition) -> bool:
    """No loaded or computed value in it (``VALUE``: a result the kernel computes, perhaps later)."""
    return not any(e.op in (Op.LOAD, Op.VALUE) for e in walk(condition))
