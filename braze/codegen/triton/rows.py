"""Reductions over a row held in registers (the ``row`` shape), as plain tree reductions.

Takes: the ``TritonKernel`` being generated, the accumulators of a reduce level with
the members each folds, and the level's printer. Gives: ``finish_level``: each
accumulator's final fields (``[XBLOCK, 1]`` tensors) emitted into the kernel and bound
to its members (``row_fields``: the fields of one accumulator). Where
the whole row is in registers, some families are cheaper as several single-field
reductions than as one ``tl.reduce`` with a multi-field combine:

- variance (Welford's mean and m2): two passes over the register-resident row, a
  mean from a sum, then the sum of the squared deviations from it. No cancellation on
  rows with a large mean, as with Welford's, and no division per combine step.
- argmax/argmin: the extreme by a NaN-propagating max/min (so NaN is the extreme),
  then the smallest index holding it (holding NaN, where the extreme is NaN; lanes
  past the row never count): ties and NaN resolve to the first index, as
  ``argmax_combine`` does.

Sums that one level folds side by side (a LayerNorm backward's two sums) share one
tree: one ``tl.reduce`` of a tuple (``tree_sums``), so the block's warps exchange
partials through shared memory once for all of them. Each field is folded in the same
order as alone (the same results, bit for bit).

Every other family (and booleans) goes through ``tl.reduce`` with its combine, as in
the loops. max/min combine with ``maximum_nan``/``minimum_nan``:
``tl.maximum(..., propagate_nan=ALL)``, one ``max.NaN.f32`` instruction on sm_80 and
later, no dearer than ``tl.max``, which would drop a NaN.
Sums are float32 trees, as in the loops (a block's tree reduction stays in float32).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from braze.codegen.triton.exprs import Printer, exact_reciprocal, literal
from braze.ir import symbols

if TYPE_CHECKING:
    from braze.codegen.triton.kernel import TritonKernel

INDEX_LIMITS = {"tl.int32": str(2 ** 31 - 1), "tl.int64": str(2 ** 63 - 1)}


def finish_level(kernel: TritonKernel, accumulators: list, printer: Printer) -> None:
    """Reduce a level's accumulators along the row and bind their members' results;
    the level's plain sums, if more than one, as one tree."""
    sums = [(acc, owners) for acc, owners in accumulators if acc.family == "sum"]
    if len(sums) < 2:
        sums = []
    texts = [kernel.elements(acc, owners[0], printer)[0] for acc, owners in sums]
    for (acc, owners), total in zip(sums, tree_sums(kernel, texts, printer.indent)):
        kernel.finish(acc, owners, [total], printer)
    for acc, owners in accumulators:
        if all(acc is not other for other, _ in sums):
            kernel.finish(acc, owners, row_fields(kernel, acc, owners[0], printer), printer)


def row_fields(kernel: TritonKernel, acc, member, printer: Printer) -> list:
    if acc.family == "welford":
        return _moments(kernel, acc, member, printer)
    if acc.family in ("argmax", "argmin") and acc.dtype is not torch.bool:
        return _arg_extreme(kernel, acc, member, printer)
    return kernel.reduce(acc, kernel.elements(acc, member, printer), printer.indent)


def _moments(kernel: TritonKernel, acc, member, printer: Printer) -> list:
    """[mean, m2, count]: the mean from a sum, then the sum of squared deviations from it
    (two passes over the register-resident row, as Inductor's persistent Welford). The
    mean's rounding error d adds n * d^2 to m2, relatively (d / std)^2: 1e-8 for a row of
    4096 near 1000 with unit spread. Correcting it by the deviations' sum would cost a third
    row sum, which a memory-bound LayerNorm+GELU row pays for in time
    (``python -m benchmarks.layernorm_variants``; docs/benchmarks.md, "Normalizations"):
    only float64 moments take it (the corrected two-pass), so that a row of equal values has
    its own value as mean and m2 exactly 0, as eager's Welford."""
    value = printer(member.value)
    text = acc.element(printer.tensor(value, member.value.dtype), None)[0]
    dtype = acc.acc_dtype
    numel = kernel.plan.reduce_numel()
    count = "(rnumel * 1.0)" if symbols.is_symbolic(numel) else literal(float(numel), dtype)
    total, = tree_sums(kernel, [kernel.as_lanes(text, value.axes, "0.0")], printer.indent)
    mean = printer.temp(_divide(total, count, dtype), {"x"})
    centered = printer.temp(kernel.as_lanes(f"{text} - {mean.text}", value.axes | {"x"}, "0.0"), {"x", "r"})
    if dtype is not torch.float64:
        squares, = tree_sums(kernel, [f"{centered.text} * {centered.text}"], printer.indent)
        return [mean.text, squares, count]
    # a float64 sum of equal values may miss their mean: the corrected two-pass moments
    squares, deviations = tree_sums(kernel, [f"{centered.text} * {centered.text}", centered.text], printer.indent)
    corrected = printer.temp(f"{mean.text} + {deviations} / {count}", {"x"})
    m2 = printer.temp(f"{squares} - {deviations} * {deviations} / {count}", {"x"})
    return [corrected.text, f"tl.where({m2.text} < 0, 0.0, {m2.text})", count]


def _divide(text: str, count: str, dtype) -> str:
    """``text / count``, IEEE-rounded in float32 as everywhere else (a power of two: the
    product by its exact reciprocal, the same bits; a symbolic count, ``rnumel``, divides)."""
    reciprocal = exact_reciprocal(float(count)) if "rnumel" not in count else None
    if reciprocal is not None:
        return f"({text} * {literal(reciprocal, dtype)})"
    if dtype is torch.float32:
        return f"tl.math.div_rn({text}, tl.full([], {count}, tl.float32))"
    return f"{text} / {count}"


def _arg_extreme(kernel: TritonKernel, acc, member, printer: Printer) -> list:
    """[extreme value, its first index (int64)]."""
    value, index = printer(member.value), printer(member.reduce_index)
    neutral = acc.fields()[0].neutral
    lanes = printer.temp(kernel.as_lanes(printer.tensor(value, member.value.dtype), value.axes, neutral), {"x", "r"})
    combine = "maximum_nan" if acc.family == "argmax" else "minimum_nan"
    extreme = _tree(kernel, lanes.text, combine, printer.indent)
    hit = f"({lanes.text} == {extreme})"
    if acc.dtype.is_floating_point:
        hit = f"({hit} | (({extreme} != {extreme}) & ({lanes.text} != {lanes.text})))"
    if "r" not in kernel.unmasked:
        hit = f"({hit} & rmask)"
    limit = INDEX_LIMITS[kernel.index_type]
    candidates = printer.temp(f"tl.where({hit}, {index.text}, {limit})", {"x", "r"})
    first = _tree(kernel, candidates.text, "minimum_nan", printer.indent)
    return [extreme, printer.temp(f"{first}.to(tl.int64)", {"x"}).text]


def _tree(kernel: TritonKernel, text: str, combine: str, indent: str) -> str:
    """``text`` reduced along the row by ``combine``; the name of the result."""
    return kernel.tree([text], combine, indent)[0]


def tree_sums(kernel: TritonKernel, texts: list, indent: str) -> list:
    """The row sums of ``texts``, up to three to a ``tl.reduce`` (``add2``, ``add3``); the
    names of the results."""
    outs = []
    for start in range(0, len(texts), 3):
        chunk = texts[start:start + 3]
        outs += kernel.tree(chunk, f"add{len(chunk)}" if len(chunk) > 1 else "add", indent)
    return outs
