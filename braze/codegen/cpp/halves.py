"""float16 loads and stores of a block of lanes, converted a block at a time (C++ backend).

Takes: a ``CppKernel``, the expressions and members of a loop that runs in blocks of
``lanes`` elements (``lanes.emit_lanes``), its lane variable and what the block reads
ready-made (``known``). Gives: ``BlockHalves`` (None where the block has nothing to convert):
- ``emit_head(indent)``: at the head of each block, every float16 buffer the block reads
  along the lane (a widening to float32 of a load that steps by one element per lane)
  widened into a float scratch array (prelude ``b_widen_f16``), and every float32 buffer
  it reads rounded through float16 (``x.half()``, then float32 math) rounded into one
  (``b_round_f16``);
- ``memo()``: those widenings as elements of the arrays, for the block's printer;
- ``stage_of(member)``: the float scratch element of a member whose float16 store steps by
  one element per lane; ``flush(indent)``, at the foot of the block, narrows the arrays into
  their buffers (``b_narrow_f16``).

Why: GCC 12 vectorizes no ``_Float16`` conversion, and the prelude's portable
``f16_to_f32``/``f32_to_f16`` cost about a dozen vector instructions per 8 halves. F16C
converts 8 in one (``vcvtph2ps``/``vcvtps2ph``), AVX-512 16, reached only through whole
vectors: the block's head and foot convert those, the vectorized body reads and writes
floats. The prelude picks the instructions by the build's macros (``__AVX512F__``,
``__F16C__``) and falls back to the portable functions without them (the same bits).
Timings: docs/benchmarks.md, "Half precision".

Loads and stores qualify only where the position is plain index arithmetic, stays inside
the buffer (no clamp), and the buffer is not both read and written by the kernel (the
block's stores move to its foot). The tail after the last block converts per element.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from braze import config
from braze.ir import simplify as S
from braze.ir.expr import Expr, Op, search, walk

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel

MIN_LANES = 8  # F16C converts 8 at a time; shorter blocks stay per element


def _contiguous(position: Expr, var, extent) -> bool:
    """Does ``position`` step by one element per step of ``var``, as index arithmetic only,
    inside a buffer of ``extent`` elements for every value of the loop variables?"""
    if S.coefficient(position, var) != 1 or any(n.op in (Op.LOAD, Op.VALUE, Op.CHECK) for n in walk(position)):
        return False
    lo, hi = S.bounds(position)
    return lo >= 0 and hi <= extent - 1


def _widened_load(e: Expr) -> Expr | None:
    """The load whose float16 value ``e`` widens to float32: a float16 load, or a float32 load
    rounded to float16 (``x.half()`` of a float32 input, read on as float32); else None."""
    if e.op is not Op.CAST or e.dtype is not torch.float32 or e.args[0].dtype is not torch.float16:
        return None
    inner = e.args[0]
    if inner.op is Op.CAST and inner.args[0].dtype is torch.float32:
        inner = inner.args[0]
    return inner if inner.op is Op.LOAD else None


def _widened(e: Expr, var, plan) -> bool:
    """A float16 value widened to float32 (``_widened_load``), its load read along the lane
    from a buffer only read."""
    load = _widened_load(e)
    return (load is not None and load.arg not in plan.writes
            and _contiguous(load.args[0], var, plan.extents[load.arg]))


def float_of(value: Expr) -> Expr:
    """The float32 value a float16 member narrows: its value, or what its cast narrows."""
    if value.op is Op.CAST and value.dtype is torch.float16:
        return value.args[0]
    return value


def narrows_half(m) -> bool:
    """Is ``m`` stored as float16 from a float32 value, and are such stores narrowed a block
    at a time (``config.cpp_half_blocks``)?"""
    return (m.store is not None and m.reduce_op is None and m.node.dtype is torch.float16
            and float_of(m.value).dtype is torch.float32 and config.cpp_half_blocks)


def _narrowed(m, var, plan) -> bool:
    """A member stored as float16 from a float32 value along the lane, into a buffer only written."""
    return narrows_half(m) and m.target not in plan.reads and _contiguous(m.store, var, plan.extents[m.target])


class BlockHalves:
    """``lanes``: the size of the block's arrays; ``count``: the C count of its elements
    (a block shorter than its arrays: the last one of ``streams``); ``start``: the C name
    of the lane variable's value at the block's first element."""

    def __init__(self, kernel: CppKernel, loads: list, stores: list, lanes: int, var,
                 count: str | None = None, start: str = "rb"):
        self.kernel, self.loads, self.stores, self.lanes, self.var = kernel, loads, stores, lanes, var
        self.count, self.start = count or str(lanes), start
        self.names = {id(e): kernel.array_name("h") for e in loads}
        self.stages = {m.name: kernel.array_name("h") for m in stores}

    def emit_head(self, indent: str, preset: dict) -> None:
        """The block's scratch arrays; its loads widened (``preset``: what the head's printer
        may read ready-made: the row's invariants)."""
        em = self.kernel.emitter
        for name in [*self.names.values(), *self.stages.values()]:
            em.emit(indent, f"alignas(64) float {name}[{self.lanes}];")
        printer = self.kernel.printer(indent, {self.var: self.start}, preset)
        for e in self.loads:
            load = _widened_load(e)
            helper = "b_widen_f16" if load.dtype is torch.float16 else "b_round_f16"
            em.emit(indent, f"{helper}(&{load.arg}[{printer(load.args[0])}], {self.names[id(e)]}, {self.count});")

    def memo(self) -> dict:
        """id(widening) -> its element of the block's array."""
        return {id(e): f"{self.names[id(e)]}[l]" for e in self.loads}

    def stage_of(self, member) -> str | None:
        return f"{self.stages[member.name]}[l]" if member.name in self.stages else None

    def flush(self, indent: str, preset: dict) -> None:
        """At the foot of the block: the staged floats narrowed into their buffers."""
        printer = self.kernel.printer(indent, {self.var: self.start}, preset)
        for m in self.stores:
            self.kernel.emitter.emit(indent, f"b_narrow_f16({self.stages[m.name]}, &{m.target}[{printer(m.store)}], "
                                             f"{self.count});")


def block_halves(kernel: CppKernel, exprs: list, members: list, lanes: int, var, known: dict,
                 staged: frozenset = frozenset(), count: str | None = None, start: str = "rb") -> BlockHalves | None:
    """The block's float16 conversions to do a block at a time, or None. ``exprs``: what the
    block computes; ``members``: those it computes and stores; ``known``: id -> name of what
    it reads ready-made (not converted again); ``staged``: names of members whose stores
    are already staged (``streams``)."""
    if lanes < MIN_LANES or not config.cpp_half_blocks:
        return None
    plan = kernel.plan
    computed = search(exprs, lambda e: [] if id(e) in known else e.args)
    loads = [e for e in computed if id(e) not in known and _widened(e, var, plan)]
    stores = [m for m in members if m.name not in staged and _narrowed(m, var, plan)]
    if not loads and not stores:
        return None
    return BlockHalves(kernel, loads, stores, lanes, var, count, start)
