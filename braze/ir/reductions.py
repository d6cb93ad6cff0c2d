"""How each reduction op folds its elements: the vocabulary of both code generators'
accumulators.

Takes: a ``ReduceOp`` (``braze.ir.graph``). Gives:
- ``FAMILY``: the op's family, the kind of accumulator that folds it: ``sum``, ``prod``,
  ``max``, ``min``, ``any``, ``all``; ``argmax`` and ``argmin`` (the extreme value and the
  first index holding it); ``welford`` (mean, m2 and count: a variance's mean and m2 of one
  value fold into one accumulator).
- ``BOOL_FAMILY``: the family a reduction of booleans folds as: max and sum are ``any``,
  min and prod ``all``.
- ``RESULT_FIELD``: for the families with several fields, the one holding the op's result
  (``index``, ``mean``, ``m2``); every other op reads its accumulator's one value. Each
  backend spells the fields in its own text (``codegen.cpp.accumulate``,
  ``codegen.triton.reduce``).
- ``INDEX_RESULTS``: the ops whose result is an index (int64, never rounded to the dtype of
  the values).
- ``WIDE_FAMILIES``: the families whose float32 accumulators are kept in float64 where a
  lane folds a long sequence of elements: more than ``LANE_CHAIN_MAX``. A lane that folds
  fewer, its lanes merged as a tree, is as exact in float32 as eager's reductions.
"""
from __future__ import annotations

from braze.ir.graph import ReduceOp

FAMILY: dict[ReduceOp, str] = {
    ReduceOp.SUM: "sum", ReduceOp.PROD: "prod", ReduceOp.MAX: "max", ReduceOp.MIN: "min",
    ReduceOp.ANY: "any", ReduceOp.ALL: "all", ReduceOp.ARGMAX: "argmax", ReduceOp.ARGMIN: "argmin",
    ReduceOp.WELFORD_MEAN: "welford", ReduceOp.WELFORD_M2: "welford",
}
BOOL_FAMILY: dict[str, str] = {"max": "any", "sum": "any", "min": "all", "prod": "all"}
RESULT_FIELD: dict[ReduceOp, str] = {
    ReduceOp.ARGMAX: "index", ReduceOp.ARGMIN: "index", ReduceOp.WELFORD_MEAN: "mean", ReduceOp.WELFORD_M2: "m2",
}
INDEX_RESULTS = frozenset({ReduceOp.ARGMAX, ReduceOp.ARGMIN})
WIDE_FAMILIES = ("sum", "welford")
LANE_CHAIN_MAX = 32  # elements a float32 lane folds in sequence before it needs float64
