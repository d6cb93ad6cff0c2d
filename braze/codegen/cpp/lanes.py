"""The lane loops of the C++ backend's row kernels, and their moments in two passes.

Takes: a ``CppKernel`` (shape ``row``, or ``split`` for ``emit_lanes``). Gives:
- ``reduce_lanes``: how many lanes the innermost reduce loop keeps (more than a vector's
  where the loop is long: independent accumulators hide each fold's latency).
- ``merge_lanes``: a block's lanes folded into lane 0, as a tree.
- ``emit_lanes``: one loop over the innermost reduce variable, in blocks of ``lanes``
  elements (``omp simd`` across the block, one accumulator per lane), then the tail
  element by element. A wide sum (float32 accumulated in double) folds each block into
  a float32 partial per lane instead, added into the double every ``CHUNK`` blocks
  (in an ``omp simd`` loop: GCC otherwise adds lane by lane): one float add per
  element instead of a conversion and a double add at half the width, while a
  partial holds only ``CHUNK`` elements, so the sum stays within the default
  tolerance of the exact sum rounded to float32 (at 8 elements it no longer does, on
  2048-element sums).
- ``moment_keeps`` and ``TwoPass``: a row's mean and M2 (LayerNorm's var_mean) as a sum,
  then the sum of squared deviations from the mean over the row kept in a scratch
  array, instead of Welford's update in double (a serial chain of six double
  operations per element), float64 moments corrected by the deviations' sum (a float64
  sum of equal values may miss their mean; float32's, in double, cannot). Two passes are
  at least as exact as Welford; the kept row
  also serves the normalizing loop, which then reads one float instead of recomputing
  the row from its inputs. Timings of both: docs/benchmarks.md, "CPU kernels".
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from braze import config
from braze.codegen.cpp.accumulate import Accumulator
from braze.codegen.cpp.exprs import ctype
from braze.codegen.cpp.rows import SCRATCH_MAX
from braze.ir import symbols
from braze.ir.expr import Op
from braze.ir.graph import ReduceOp

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel

CHUNK = 4  # blocks of lanes summed in float32 before a fold into the double accumulator
LANE_FOLDS_MIN = 8  # elements each lane folds at least where a reduce loop takes more lanes than cpp_lanes


def reduce_lanes(kernel: CppKernel) -> int:
    """Accumulator lanes of the innermost reduce loop of a row or split kernel: its
    ``lanes_for``, doubled up to ``cpp_reduce_lanes_max`` while each lane still folds at
    least ``LANE_FOLDS_MIN`` elements and, where the tail is not spread over the lanes
    (inside other reduce loops), the tail grows no longer. A fold's latency (4 cycles for
    an add; a max's compare and selects more) bounds a loop with one vector of
    accumulators: an amax over a whole fp16 tensor ran 0.6x as long at 64 lanes."""
    r = kernel.plan.reduce[-1]
    lanes = kernel.lanes_for(r.size)
    if not isinstance(r.size, int):
        return lanes
    spread = len(kernel.plan.reduce) == 1
    while (lanes * 2 <= config.cpp_reduce_lanes_max and r.size >= LANE_FOLDS_MIN * lanes * 2
           and (spread or r.size % (lanes * 2) == r.size % lanes)):
        lanes *= 2
    return lanes


def emit_lanes(kernel: CppKernel, indent: str, var, lanes: int, body: Callable[[str, dict | None], None],
               partials=(), head: Callable[[str], None] | None = None, pragma: str = "",
               tail_guard: str = "", foot: Callable[[str], None] | None = None, spread_tail: bool = False) -> None:
    """The loop over ``var``: blocks of ``lanes`` (``head(indent)`` starts each block,
    after ``pragma``; ``foot(indent)`` ends it), then the tail. ``body(indent, narrow)``
    emits one element's statements; ``narrow`` maps id(accumulator) to its float partial
    in the blocks and is None in the tail. ``partials``: the wide sums to fold through float partials.
    ``spread_tail``: the tail's elements fold into lanes 0, 1, ... (``_emit_tail``)."""
    em = kernel.emitter
    main = var.size - var.size % lanes
    text = str(main)
    if not isinstance(main, int):  # computed once, not in each loop's bounds
        text = kernel.array_name(f"{var.name}_main")
        em.emit(indent, f"const int64_t {text} = {main};")
    if symbols.possible(main, ">", 0):  # (for a symbolic size: both loops, either may run none)
        narrow = {id(a): a.narrow() for a in partials}
        inner, start, stop = _open_chunks(kernel, indent, main, text, lanes, narrow)
        if pragma:
            em.emit(inner, pragma)
        em.emit(inner, f"for (int64_t rb = {start}; rb < {stop}; rb += {lanes}) {{")
        block, element = em.deeper(inner), em.deeper(inner, 2)
        if head:
            head(block)
        em.emit(block, "#pragma omp simd")
        em.emit(block, f"for (int64_t l = 0; l < {lanes}; l++) {{")
        em.emit(element, f"const int64_t {var.name} = rb + l;")
        body(element, narrow)
        em.emit(block, "}")
        if foot:
            foot(block)
        em.emit(inner, "}")
        _close_chunks(kernel, indent, inner, partials, narrow, lanes)
    if symbols.possible(main, "<", var.size):
        _emit_tail(kernel, indent, var, text, body, tail_guard, spread_tail)


def merge_lanes(kernel: CppKernel, accs: list[Accumulator], lanes: int, indent: str) -> None:
    """Fold the lanes of each accumulator into lane 0, as a tree: lane ``l + w`` into
    lane ``l`` for ``w`` = lanes / 2, ..., 1, each level one vector step, where lanes 1 ..
    15 into lane 0 one by one were a chain of 15 dependent steps (a row of 31 elements
    spent more on it than on its elements). Every merge keeps eager's numerics: NaN
    propagates, an arg-reduction's tie goes to the lower index (``combine``)."""
    em = kernel.emitter
    if lanes <= 1 or not accs:
        return
    width = lanes // 2
    while width >= 1:
        for lane in range(width):
            for acc in accs:
                em.emit_lines(indent, acc.combine(lambda s, a=acc, k=lane: f"{a.field(s)}[{k}]",
                                                  lambda s, a=acc, k=lane + width: f"{a.field(s)}[{k}]"))
        width //= 2


def _emit_tail(kernel: CppKernel, indent: str, var, main: str, body, tail_guard: str, spread: bool) -> None:
    """The elements after the last whole block, from ``main`` (its C text). ``spread``:
    element ``main + l`` folds into lane ``l`` (fewer than ``lanes`` of them), so the tail
    has no chain through one lane and vectorizes (a row of 31 elements is half tail)."""
    em = kernel.emitter
    inner = indent
    if spread and tail_guard:
        em.emit(indent, f"{tail_guard}{{")
        inner, tail_guard = em.deeper(indent), ""
    if spread:
        em.emit(inner, "#pragma omp simd")
    em.emit(inner, f"{tail_guard}for (int64_t {var.name} = {main}; {var.name} < {var.size}; {var.name}++) {{")
    em.emit(em.deeper(inner), f"const int64_t l = {var.name} - {main};" if spread else "const int64_t l = 0;")
    body(em.deeper(inner), None)
    em.emit(inner, "}")
    if inner != indent:
        em.emit(indent, "}")


def _open_chunks(kernel: CppKernel, indent: str, main, text: str, lanes: int, narrow: dict) -> tuple:
    """Open the loop over chunks of ``CHUNK`` blocks (if there are more blocks) and declare
    the float partials. ``main``: the elements in whole blocks, ``text`` its C. Gives the
    indent inside and the bounds of a chunk's blocks."""
    if not narrow:
        return indent, "0", text
    span = CHUNK * lanes
    inner, start, stop = indent, "0", text
    if symbols.possible(main, ">", span):
        kernel.emitter.emit(indent, f"for (int64_t cb = 0; cb < {text}; cb += {span}) {{")
        inner, start = kernel.emitter.deeper(indent), "cb"
        stop = f"cb + {span}" if symbols.known(main % span, "==", 0) else f"(cb + {span} < {text} ? cb + {span} : {text})"
    kernel.declare(list(narrow.values()), lanes, inner)
    return inner, start, stop


def _close_chunks(kernel: CppKernel, indent: str, inner: str, partials, narrow: dict, lanes: int) -> None:
    """Fold the float partials into their accumulators; close the chunk loop."""
    if not narrow:
        return
    em = kernel.emitter
    em.emit(inner, "#pragma omp simd")  # else GCC folds lane by lane, in scalar code
    em.emit(inner, f"for (int64_t l = 0; l < {lanes}; l++) {{")
    for acc in partials:
        em.emit(em.deeper(inner), acc.fold(narrow[id(acc)], "l"))
    em.emit(inner, "}")
    if inner != indent:
        em.emit(indent, "}")


def _two_pass_rows(plan) -> bool:
    """Rows short enough to keep: one reduce loop of at most ``SCRATCH_MAX`` elements."""
    return len(plan.reduce) == 1 and plan.reduce[0].size <= SCRATCH_MAX


def _welford(member) -> bool:
    return member.reduce_op in (ReduceOp.WELFORD_MEAN, ReduceOp.WELFORD_M2)


def _kept_value(plan, member):
    """The expression a Welford member reduces: the member it names (``VALUE``, a
    buffer computed in the same loop) resolved to that member's expression, so that a
    later loop recomputing the expression finds it kept."""
    e = member.value
    if e.op is Op.VALUE:
        named = next(m for m in plan.members if m.name == e.arg)
        if named.reduce_op is None and named.level == member.level:
            return named.value
    return e


def moment_keeps(plan) -> list:
    """(value, level) of every Welford reduction of a row kernel computed in two passes:
    the values to keep in a scratch array for the second pass."""
    if not _two_pass_rows(plan):
        return []
    found: dict = {}
    for m in plan.members:
        if _welford(m):
            e = _kept_value(plan, m)
            found.setdefault(id(e), (e, m.level))
    return list(found.values())


class TwoPass:
    """The Welford reductions of one level of a row kernel, computed in two passes."""

    def __init__(self, kernel: CppKernel, level: int, accs: list):
        self.kernel = kernel
        self.moments = []  # (the sum accumulator, the kept value, the members)
        if not _two_pass_rows(kernel.plan):
            self.accs = accs
            return
        groups: dict = {}  # id(Welford accumulator) -> (its sum, the value, the members)
        for m in kernel.members_at(level):
            if not _welford(m):
                continue
            acc = kernel.accs[m.name]
            if id(acc) not in groups:
                total = Accumulator(acc.name + "s", "sum", acc.dtype)
                groups[id(acc)] = (total, _kept_value(kernel.plan, m), [])
            kernel.accs[m.name] = groups[id(acc)][0]
            groups[id(acc)][2].append(m)
        self.moments = list(groups.values())
        self.accs = [groups[id(a)][0] if id(a) in groups else a for a in accs]

    def emit_second_pass(self, indent: str, lanes: int) -> None:
        """After the first pass's lanes are merged, for each moment: the mean, the sum of
        squared deviations from it over the kept row, and the members' values."""
        for total, value, members in self.moments:
            self._squares(total, self.kernel.reuse_ids[id(value)], members, indent, lanes)

    def _squares(self, total, kept: str, members: list, indent: str, lanes: int) -> None:
        kernel, r = self.kernel, self.kernel.plan.reduce[0]
        em = kernel.emitter
        t = ctype(total.dtype)
        mean = f"{total.name}_mean"
        count = f"(double){symbols.text_of(r.size, 'c')}" if symbols.is_symbolic(r.size) else repr(float(r.size))
        em.emit(indent, f"const {t} {mean} = ({t})({total.field('v')}[0] / {count});")
        squares = Accumulator(total.name + "q", "sum", total.dtype)
        # a float64 sum of equal values may miss their mean (float32's, in double, cannot)
        deviations = Accumulator(total.name + "e", "sum", total.dtype) if total.dtype is torch.float64 else None
        sums = [squares] + ([deviations] if deviations else [])
        kernel.declare(sums, lanes, indent)

        def body(ind: str, narrow: dict | None) -> None:
            target = (narrow or {}).get(id(squares), squares)
            em.emit(ind, f"const {t} d_ = {kept}[{r.name}] - {mean};")
            em.emit_lines(ind, target.update(lambda s: f"{target.field(s)}[l]", "d_ * d_", None))
            if deviations:
                em.emit_lines(ind, deviations.update(lambda s: f"{deviations.field(s)}[l]", "d_", None))
        emit_lanes(kernel, indent, r, lanes, body, [squares] if squares.wide else [], spread_tail=True)
        merge_lanes(kernel, sums, lanes, indent)
        m2 = f"(({t}){squares.field('v')}[0])"
        if deviations:
            mean, m2 = _corrected(em, indent, total.name, mean, m2, deviations.field("v") + "[0]", count)
        for m in members:
            kernel.moments[m.name] = mean if m.reduce_op is ReduceOp.WELFORD_MEAN else m2


def _corrected(em, indent: str, name: str, mean: str, m2: str, deviations: str, count: str) -> tuple:
    """The corrected two-pass moments: the mean moved by the deviations' mean, m2 less the
    deviations' sum squared over n (at least 0; NaN stays). A row of equal values then has
    its own value as mean and m2 exactly 0, as eager's Welford (std's gradient masks there)."""
    em.emit(indent, f"const double {name}_meanc = {mean} + {deviations} / {count};")
    em.emit(indent, f"const double {name}_m2c = {m2} - {deviations} * {deviations} / {count};")
    return f"{name}_meanc", f"({name}_m2c < 0 ? 0.0 : {name}_m2c)"
