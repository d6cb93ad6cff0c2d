"""Reduction accumulators for the C++ backend.

Takes: a reduction member of a kernel plan. Gives: ``Accumulator``: the C fields
it keeps (one array element per SIMD lane or column), their initial values, the
statement that folds one value in, the statement that merges two partial
results (lanes, threads), and which field holds each member's result. The families
and which field holds a result are ``braze.ir.reductions``'; the C fields are ``v``
(the value), ``i`` (the index), ``mean``, ``m2`` and ``n`` (the count).

Numerics follow eager: max/min propagate NaN; argmax/argmin return the first
index of the extreme value (NaN counts as the extreme); variance is Welford's
one-pass update, merged with Chan's formula.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from braze.codegen.cpp.exprs import ctype, literal
from braze.ir import dtypes
from braze.ir.expr import Op, walk
from braze.ir.reductions import BOOL_FAMILY, FAMILY, INDEX_RESULTS, RESULT_FIELD, WIDE_FAMILIES

SUFFIX = {"value": "v", "index": "i", "mean": "mean", "m2": "m2"}  # a result field's C suffix


@dataclass
class Accumulator:
    name: str
    family: str
    dtype: object  # dtype of the values folded in
    # each lane folds few elements in sequence (at most ``LANE_CHAIN_MAX``: a short row's, or
    # a float32 partial of a few blocks, ``narrow``): float32 is as exact as double there
    short: bool = False
    # a bool accumulator's bytes: those of the widest element it loads or computes in floating
    # point (``_widest_value``), so that a vectorized loop keeps one lane width (an ``any`` of
    # float32 comparisons in bytes: 3x slower)
    bool_bytes: int = 1

    @property
    def wide(self) -> bool:
        """float32 sums and moments accumulate in double: a long sequential
        sum then loses no more than eager's cascade summation. Not where each lane folds
        few elements: lanes merged as a tree are as exact, and a short row's double lanes
        cost more than its elements (a sum over 31 elements: 0.5x Inductor)."""
        return not self.short and self.dtype is torch.float32 and self.family in WIDE_FAMILIES

    def narrow(self) -> "Accumulator":
        """The float32 partial of a wide sum, folded into it every few blocks: each
        element costs one float add instead of a conversion and a double add."""
        return Accumulator(self.name + "c", self.family, self.dtype, short=True)

    def fold(self, partial: "Accumulator", lane: str) -> str:
        """The statement adding lane ``lane`` of ``partial`` into this accumulator."""
        v = f"{self.field('v')}[{lane}]"
        return f"{v} = ({v} + (double)({partial.field('v')}[{lane}]));"

    @property
    def t(self) -> str:
        return "double" if self.wide else ctype(self.dtype)

    def fields(self) -> list:
        """(field suffix, C type, initial value)."""
        t, d = self.t, self.dtype
        if self.family == "welford":
            return [("mean", t, "0"), ("m2", t, "0"), ("n", t, "0")]
        if self.family in ("argmax", "argmin"):
            return [("v", t, _extreme(d, lowest=self.family == "argmax")), ("i", "int64_t", "0")]
        if d is torch.bool:  # (unsigned integers, not bool: GCC vectorizes no loop that carries a bool)
            return [("v", f"uint{8 * self.bool_bytes}_t", "1" if BOOL_FAMILY.get(self.family, self.family) == "all" else "0")]
        init = {"sum": "0", "prod": "1", "any": "false", "all": "true",
                "max": _extreme(d, lowest=True), "min": _extreme(d, lowest=False)}[self.family]
        return [("v", t, init)]

    def field(self, suffix: str) -> str:
        return f"{self.name}_{suffix}"

    def update(self, at, value: str, index: str | None, block: tuple | None = None) -> list:
        """Statements folding ``value`` into the fields ``at(suffix)`` (lvalues).
        ``block``: (count, 1/count) shared by every lane of a block, so that Welford
        multiplies instead of dividing per element."""
        v = at("v")
        f = self.family
        if self.wide:
            value = f"(double)({value})"
        if f == "welford":
            mean, m2, n = at("mean"), at("m2"), at("n")
            count, scale = block if block else (f"{n} + 1", f"1 / {n}")
            return [f"{n} = {count};", f"{{ const {self.t} d_ = {value} - {mean}; {mean} += d_ * ({scale}); "
                                       f"{m2} += d_ * ({value} - {mean}); }}"]
        if f in ("argmax", "argmin"):
            better = ">" if f == "argmax" else "<"
            i = at("i")
            # ties (and NaN after NaN) keep the smaller index: loops may not run in index order
            tie = f"({value} == {v} && (int64_t)({index}) < {i})"
            if dtypes.is_float(self.dtype):
                nan = (f"(({value} != {value}) && ({v} == {v} || (int64_t)({index}) < {i}))")
                keep_nan = f"({v} != {v})"
                take = f"(!{keep_nan} && (({value} {better} {v}) || {tie})) || {nan}"
            else:
                take = f"({value} {better} {v}) || {tie}"
            return [f"{{ const bool take_ = {take}; "
                    f"{v} = take_ ? {value} : {v}; {i} = take_ ? (int64_t)({index}) : {i}; }}"]
        return [f"{v} = {self._fold(v, value)};"]

    def combine(self, dst, src) -> list:
        """Statements merging partial result ``src(suffix)`` into ``dst(suffix)``."""
        f = self.family
        if f == "welford":
            t = self.t
            return [f"{{ const {t} nb_ = {src('n')}; if (nb_ > 0) {{ const {t} na_ = {dst('n')}; "
                    f"const {t} n_ = na_ + nb_; const {t} d_ = {src('mean')} - {dst('mean')}; "
                    f"const {t} f_ = nb_ / n_; {dst('mean')} += d_ * f_; "
                    f"{dst('m2')} += {src('m2')} + d_ * d_ * na_ * f_; {dst('n')} = n_; }} }}"]
        if f in ("argmax", "argmin"):
            av, ai, bv, bi = dst("v"), dst("i"), src("v"), src("i")
            better = ">" if f == "argmax" else "<"
            if dtypes.is_float(self.dtype):
                take = (f"(({av} != {av}) ? ({bv} != {bv} && {bi} < {ai}) : "
                        f"({bv} != {bv} || {bv} {better} {av} || ({bv} == {av} && {bi} < {ai})))")
            else:
                take = f"({bv} {better} {av} || ({bv} == {av} && {bi} < {ai}))"
            return [f"{{ const bool take_ = {take}; if (take_) {{ {av} = {bv}; {ai} = {bi}; }} }}"]
        return [f"{dst('v')} = {self._fold(dst('v'), src('v'))};"]

    def _fold(self, acc: str, value: str) -> str:
        f, d = self.family, self.dtype
        if d is torch.bool or f in ("any", "all"):
            # (bitwise, not || and &&: GCC vectorizes no loop that short-circuits)
            return f"({acc} | (bool)({value}))" if BOOL_FAMILY.get(f, f) == "any" else f"({acc} & (bool)({value}))"
        if f == "sum":
            return f"({acc} + {value})"
        if f == "prod":
            return f"({acc} * {value})"
        helper = ("b_" if dtypes.is_float(d) else "i_") + ("max" if f == "max" else "min")
        return f"{helper}({acc}, {value})" if dtypes.is_float(d) else f"{helper}<{self.t}>({acc}, {value})"


def _extreme(dtype, lowest: bool) -> str:
    if dtypes.is_float(dtype):
        return "(-INFINITY)" if lowest else "INFINITY"
    info = torch.iinfo(dtype)
    return literal(info.min if lowest else info.max, dtype)


def accumulator_for(member, name: str, short: bool = False) -> Accumulator:
    op = member.reduce_op
    return Accumulator(name, FAMILY[op], member.value.dtype, short=short, bool_bytes=_widest_value(member.value))


def _widest_value(value) -> int:
    """The bytes of the widest element ``value`` loads or computes in floating point (bf16 and
    fp16 in float32); not of integer casts, which GCC folds (``i64(b) > 0`` of a bool ``b``)."""
    nodes = walk(value)
    return max([e.dtype.itemsize for e in nodes if e.op is Op.LOAD and e.dtype is not dtypes.INDEX]
               + [dtypes.compute_dtype(e.dtype).itemsize for e in nodes if dtypes.is_float(e.dtype)], default=1)


def result_of(member, acc: Accumulator, at) -> str:
    """The member's result read from fields ``at(suffix)``, in the member's dtype."""
    field = at(SUFFIX[RESULT_FIELD.get(member.reduce_op, "value")])
    if acc.wide and member.reduce_op not in INDEX_RESULTS:
        return f"((float){field})"
    return field
