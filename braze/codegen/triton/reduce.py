"""Reduction accumulators for the Triton backend.

Takes: a reduction member of a kernel plan. Gives: ``Accumulator``: the fields
of its partial result (one tensor each), their dtypes and neutral values, the
fields of a single element, the helper that merges two partials (used both
element-wise, for the per-lane accumulators of a reduction loop, and by
``tl.reduce`` across a block), and which field holds each member's result. The
families, a boolean's family and which field holds a result are
``braze.ir.reductions``'; ``online`` is this backend's own.

Numerics follow the C++ backend: in reduction loops (one accumulator per lane,
a long sequential chain each) float32 sums and moments accumulate in float64,
as C++ does; a block's own tree reduction stays in float32. float32 products are
always folded in float64. max/min propagate NaN; argmax/argmin return
the first index of the extreme value (NaN counts as the extreme); variance is
Welford's, partials merged with Chan's formula; any/all and the max/min of
booleans are folded as int8. The ``online`` family is a softmax's sum of
``exp(x - max)`` folded in the same loop as the max (``online``): fields are each
lane's reference (its largest element so far) and its total relative to it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from braze.codegen.triton.exprs import TL_TYPES, literal
from braze.ir import dtypes
from braze.ir.graph import ReduceOp
from braze.ir.reductions import BOOL_FAMILY, FAMILY, INDEX_RESULTS, RESULT_FIELD, WIDE_FAMILIES

COMBINE = {"sum": "add", "prod": "multiply", "max": "maximum_nan", "min": "minimum_nan",
           "any": "maximum_nan", "all": "minimum_nan", "argmax": "argmax_combine",
           "argmin": "argmin_combine", "welford": "welford_combine", "online": "online_sum_exp"}
INDEX_MAX = str(2 ** 63 - 1)
LOOP_WIDE_FAMILIES = (*WIDE_FAMILIES, "online")  # (an online softmax sum is a sum)


@dataclass
class Field:
    suffix: str
    dtype: object  # torch dtype
    neutral: str  # Triton text of the neutral value

    @property
    def tl(self) -> str:
        return TL_TYPES[self.dtype]


@dataclass
class Accumulator:
    name: str
    family: str
    dtype: object  # dtype of the values folded in
    wide: bool = False  # float32 sums and moments kept in float64 (long sequential chains)

    @property
    def acc_dtype(self):
        """float64 for float32 products (a tree of partial products must not overflow
        where eager's running product does not), and for float32 sums and moments
        folded in loops."""
        if self.dtype is torch.float32 and (self.family == "prod" or self.wide and self.family in LOOP_WIDE_FAMILIES):
            return torch.float64
        return self.dtype

    @property
    def combine(self) -> str:
        """The helper merging two partials, field by field."""
        return COMBINE[self.family]

    def fields(self) -> list:
        d, f = self.acc_dtype, self.family
        if f == "welford":
            zero = literal(0.0, d)
            return [Field("mean", d, zero), Field("m2", d, zero), Field("weight", d, zero)]
        if f in ("argmax", "argmin"):
            return [Field("value", d, _extreme(d, lowest=f == "argmax")), Field("index", torch.int64, INDEX_MAX)]
        if f in ("any", "all"):
            return [Field("", torch.int8, "0" if f == "any" else "1")]
        if f == "online":
            return [Field("ref", self.dtype, _extreme(self.dtype, lowest=True)), Field("total", d, literal(0, d))]
        neutral = {"sum": lambda: literal(0, d), "prod": lambda: literal(1, d),
                   "max": lambda: _extreme(d, lowest=True), "min": lambda: _extreme(d, lowest=False)}[f]()
        return [Field("", d, neutral)]

    def field_names(self) -> list:
        return [self.name + (f"_{x.suffix}" if x.suffix else "") for x in self.fields()]

    def element(self, value: str, index: str | None) -> list:
        """The fields of a partial holding one element (``value``, at flat ``index``);
        None for a field that is a constant (see ``constant_fields``)."""
        f = self.family
        if f == "online":  # the value itself: the helper forms exp(value - ref)
            return [value]
        if self.acc_dtype != self.dtype:
            value = f"{value}.to({TL_TYPES[self.acc_dtype]})"
        if f == "welford":
            return [value, None, None]
        if f in ("argmax", "argmin"):
            return [value, f"{index}.to(tl.int64)"]
        if f in ("any", "all"):
            return [f"{value}.to(tl.int8)"]
        return [value]

    def constant_fields(self, mask: str, shape: str) -> list:
        """Welford's weight of one element: 1 where ``mask`` (else 0). Its m2, 0, is never
        written out: a loop folds an element by ``welford_step(mean, m2, weight, x, w, step)``."""
        t = TL_TYPES[self.acc_dtype]
        return [None, None, f"tl.broadcast_to({mask}.to({t}), {shape})"]

    def result(self, op: ReduceOp, fields: list) -> str:
        """The member's result, from the texts of the final fields."""
        names = [x.suffix for x in self.fields()]
        k = names.index(RESULT_FIELD[op]) if op in RESULT_FIELD else 0
        text = fields[-1] if self.family == "online" else fields[k]
        if self.family in ("any", "all"):
            return f"({text} != 0)"
        if self.acc_dtype != self.dtype and op not in INDEX_RESULTS:
            return f"{text}.to({TL_TYPES[self.dtype]})"
        return text


def _extreme(dtype, lowest: bool) -> str:
    if dtypes.is_float(dtype):
        return 'float("-inf")' if lowest else 'float("inf")'
    info = torch.iinfo(dtype)
    return str(info.min if lowest else info.max)


def accumulator_for(member, name: str, wide: bool = False) -> Accumulator:
    family = FAMILY[member.reduce_op]
    dtype = member.value.dtype
    if dtype is torch.bool:
        family = BOOL_FAMILY.get(family, family)
    return Accumulator(name, family, dtype, wide)
