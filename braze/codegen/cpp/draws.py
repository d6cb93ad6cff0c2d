"""Random numbers drawn a block of lanes at a time in the C++ backend.

Takes: the expressions of a loop that runs in blocks of ``lanes`` elements
(``lanes.emit_lanes``) and the loop's variable. Gives: ``BlockDraws``, which emits
at the head of each block one Philox per counter the block's elements take
(``b_philox_block``: four words each, one ``omp simd`` loop over the counters),
and the text that reads an element's number from those words.

Without it each element runs Philox itself for the one word (``rand``) or two
(``randn``) it takes of its counter's four: four times the work for uniforms. A
random value qualifies when its offset steps by one per step of the loop variable
(element ``i`` of a row-major tensor along its last dimension), so a block of
``lanes`` numbers covers ``lanes * words / 4`` counters, plus one where the block
does not start at a counter's first word. The tail after the last block, and the
loop shapes that do not run in blocks, draw per element (the same numbers, bit for
bit). Timings: docs/benchmarks.md, "CPU kernels".
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir.expr import COUNTER_WORDS, RANDOM_WORDS, Expr, Op, walk

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel


_READ = {"rand": "b_uniform({w}])", "bits": "((int64_t){w}])",  # {w}: the word's element, unclosed
         "randn": "b_box_muller({w}], {w} + 1])"}


def _lane_step(offset: Expr, var):
    """How far ``offset`` (an int64 random offset: an index cast to int64, plus
    constants) moves per step of ``var``; None when it is not affine in ``var``."""
    if offset.op is Op.ADD and offset.args[1].op is Op.CONST:
        return _lane_step(offset.args[0], var)
    if offset.op is Op.CAST and offset.args[0].dtype is dtypes.INDEX:
        return S.coefficient(offset.args[0], var)
    return None


def _drawn_by_block(e: Expr, var) -> bool:
    seed, offset = e.args
    return _lane_step(offset, var) == 1 and not any(n is var for n in walk([seed]))


class BlockDraws:
    """The random values of a blocked loop over ``var`` that are drawn per block."""

    def __init__(self, kernel: CppKernel, exprs, var, lanes: int):
        self.kernel, self.var, self.lanes = kernel, var, lanes
        seen: dict = {}
        for e in walk(exprs):
            if e.op is Op.RANDOM and _drawn_by_block(e, var):
                seen.setdefault(id(e), e)
        self.draws = list(seen.values())
        self.names = {id(e): kernel.emitter.fresh("d") for e in self.draws}

    def __bool__(self) -> bool:
        return bool(self.draws)

    def emit_head(self, indent: str, start: str = "rb") -> None:
        """At the top of a block starting at ``var == start``: each value's words."""
        em = self.kernel.emitter
        printer = self.kernel.printer(indent, {self.var: start})
        for e in self.draws:
            name, words = self.names[id(e)], RANDOM_WORDS[e.arg]
            counters = self.lanes * words // COUNTER_WORDS + 1
            seed, first = printer(e.args[0]), printer(e.args[1])
            em.emit(indent, f"uint32_t {name}[{COUNTER_WORDS * counters}];")
            scaled = first if words == 1 else f"{first} * {words}"
            em.emit(indent, f"const int64_t {name}_w = {scaled};  // the block's first word")
            em.emit(indent, f"b_philox_block<{counters}>({seed}, {name}_w >> 2, {name});")

    def memo(self, lane: str = "l") -> dict:
        """id(random value) -> the C expression of lane ``lane``'s number in the block."""
        out = {}
        for e in self.draws:
            name = self.names[id(e)]
            step = lane if RANDOM_WORDS[e.arg] == 1 else f"{RANDOM_WORDS[e.arg]} * {lane}"
            out[id(e)] = _READ[e.arg].format(w=f"{name}[({name}_w & 3) + {step}")
        return out
