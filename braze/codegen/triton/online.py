"""Online softmax: a row's max and its sum of exponentials in one loop.

Takes: a ``KernelPlan`` whose rows are looped over (the ``row_loop`` shape). Gives:
``fold_softmax_sums(plan)``: the plan, or a copy in which each SUM of ``exp(E - m)``
at level L+2, where ``m`` is the MAX of ``E`` at level L, is an ``OnlineSum`` member
at level L (when that leaves level L+2 empty, so one loop over the row goes away): a
softmax reads its row twice (max and sum, then the output) instead of three times, a
cross-entropy's log-sum-exp once. A rewrite of the Triton backend's own copy of the
plan; the C++ backend never sees it.

How the kernel folds an ``OnlineSum`` (family ``online`` in ``reduce``, helpers
``online_sum_exp`` / ``online_sum_total``): each lane keeps ``ref``, the largest
element it has seen, and ``total``, the sum of ``exp(x - ref)`` over its elements,
rescaled by ``exp(old ref - new ref)`` when ref grows. After the loop, with ``M`` the
MAX member's result, the sum is ``Σ_lanes total * exp(ref - M)``.

Numerics. ``total`` is float64 for float32 values (as every looped sum is). A term
``exp(x - ref)`` has ``x <= ref <= M``, so ``x - ref`` is rounded no worse than
eager's ``x - M``; the final ``exp(ref - M)`` is taken in float64 (once per lane, after
the loop). What the two-loop form does not have is the in-loop rescaling: a float32
exp (within 2 ulp) applied to the part of a lane's total gathered before its max grew,
once per growth. NaN, +inf and all-``-inf`` rows give NaN, as ``exp(x - M)`` does.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from braze.fuse.kernel import KernelPlan, Member
from braze.fuse.legality import REDUCTION
from braze.ir.expr import Op
from braze.ir.graph import ReduceOp

FLOAT_VALUES = (torch.float32, torch.float64)


@dataclass
class OnlineSum(Member):
    """A SUM of ``exp(value - max_member)`` folded in the loop of ``max_member``
    (its ``value`` is the MAX's value, the element each lane folds)."""
    max_member: str = ""


def fold_softmax_sums(plan: KernelPlan) -> KernelPlan:
    """``plan`` with every foldable softmax sum moved into its max's loop."""
    moved = {}
    for level in plan.levels:
        if level % 2 == 0:
            continue
        later = [m for m in plan.members if m.level == level + 2]
        found = [_max_of(s, plan.members, level) for s in later]
        if later and all(found):
            moved.update({s.name: OnlineSum(s.node, s.role, level, mx.value, s.store, None, mx.name)
                          for s, mx in zip(later, found)})
    if not moved:
        return plan
    return replace(plan, members=[moved.get(m.name, m) for m in plan.members])


def _max_of(member: Member, members: list, level: int) -> Member | None:
    """The level-``level`` MAX whose value ``E`` makes ``member`` a SUM of ``exp(E - max)``."""
    if member.role != REDUCTION or member.reduce_op is not ReduceOp.SUM or isinstance(member, OnlineSum):
        return None
    value = member.value
    if value.op is not Op.EXP or value.args[0].op is not Op.SUB:
        return None
    shifted, shift = value.args[0].args
    if shift.op is not Op.VALUE or shifted.dtype not in FLOAT_VALUES:
        return None
    for m in members:
        if m.name == shift.arg and m.level == level and m.reduce_op is ReduceOp.MAX and m.value is shifted:
            return m
    return None
