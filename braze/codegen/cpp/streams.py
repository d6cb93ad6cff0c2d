"""Non-temporal stores for the outputs of large kernels of the C++ backend.

Takes: a ``CppKernel`` of shape ``pointwise`` or ``row``. Gives:
- ``streamed(kernel)``: the members of a pointwise kernel whose stores go around the
  cache (or []), and ``emit_streamed(kernel, members)``, its loops with those members
  computed a block at a time into scratch arrays that ``b_stream`` (prelude) then
  writes with non-temporal stores (float16 loads widened and stores narrowed a block at a
  time: ``halves``);
- ``RowStream(kernel)``: the same for the values a row kernel's last loop stores along
  the row (RMSNorm's and LayerNorm's outputs), a block of lanes at a time (their write
  prefetches dropped).

A plain store first reads its cache line from memory (the write-allocate), so a kernel
that writes a buffer too large to stay in the cache moves its bytes twice. A
non-temporal store writes whole lines without reading them. Each thread fences its own
stores before the region's barrier, so readers after the kernel see them.

Only where the kernel moves at least ``config.cpp_stream_min_bytes`` (the last-level
cache): a smaller output would still be in the cache for its reader. Blocks of a few
hundred elements stream best; much larger ones lose the scratch array from L1. A
transposing kernel's tile rows keep plain stores: its strided reads bound it, and
streaming them gained nothing. Timings: docs/benchmarks.md, "CPU kernels".
"""
from __future__ import annotations

import platform
from typing import TYPE_CHECKING

from braze import config
from braze.codegen.cpp.calls import LIBRARY_CALLS
from braze.codegen.cpp.exprs import ctype
from braze.codegen.cpp.halves import block_halves, narrows_half
from braze.codegen.cpp.lanes import reduce_lanes
from braze.ir import simplify as S
from braze.ir import unbacked
from braze.ir.expr import free_vars, walk

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel

BLOCK = 128  # elements a pointwise kernel computes into its scratch arrays between two writes
MIN_RUN = 64  # a contiguous run (innermost loop, row) shorter than this is not streamed
_X86 = platform.machine().lower() in ("x86_64", "amd64")


def _worth_it(kernel: CppKernel, run: int, elements: int) -> bool:
    """x86, not inside a foreach region, runs long enough, and a kernel that moves at
    least the threshold's bytes."""
    plan, threshold = kernel.plan, config.cpp_stream_min_bytes
    late = any(unbacked.unbacked_in(n) for n in (run, elements, *plan.extents.values()))
    if not _X86 or threshold < 0 or kernel.nested or late or run < MIN_RUN:  # (late: no class to stream for)
        return False
    moved = sum(min(plan.extents[b], elements) * plan.dtypes[b].itemsize for b in set(plan.reads) | set(plan.writes))
    return moved >= threshold


def _streamable(plan, m, along) -> bool:
    """Stored contiguously along ``along`` into a buffer the kernel does not read."""
    return m.store is not None and m.target not in plan.reads and S.coefficient(m.store, along) == 1


def _open_region(kernel: CppKernel, indent: str) -> str:
    """The parallel region of a kernel that streams (each thread fences at its end)."""
    em = kernel.emitter
    em.emit(indent, kernel.region())
    em.emit(indent, "{")
    return em.deeper(indent)


def _close_region(kernel: CppKernel, indent: str) -> None:
    em = kernel.emitter
    em.emit(indent, "b_stream_fence();")
    em.emit(em.shallower(indent), "}")


def _write_stages(kernel: CppKernel, members: list, stages: dict, at: dict, indent: str, count: str) -> None:
    """``b_stream`` each member's scratch array to its place (``at``: loop variable ->
    the C value it starts from)."""
    em = kernel.emitter
    start = kernel.printer(indent, at)
    for m in members:
        stage = stages[m.name]
        em.emit(indent, f"b_stream(&{m.target}[{start(m.store)}], {stage}, {count} * sizeof({stage}[0]));")


# ---------------------------------------------------------------------- pointwise

def streamed(kernel: CppKernel) -> list:
    plan = kernel.plan
    if not plan.outer or not _worth_it(kernel, plan.outer[-1].size, plan.outer_numel()):
        return []
    return [m for m in plan.members if _streamable(plan, m, plan.outer[-1])]


def emit_streamed(kernel: CppKernel, members: list) -> None:
    """Threads share the outer loops (or the blocks of a single loop); each block of the
    innermost loop is computed in SIMD, its streamed values into scratch arrays, then
    written."""
    em = kernel.emitter
    plan = kernel.plan
    loops, z = plan.outer, plan.outer[-1]
    stages = {m.name: f"stage{i}" for i, m in enumerate(members)}
    indent = _open_region(kernel, "  ")
    if len(loops) > 1:
        em.emit(indent, kernel.shared_loop(len(loops) - 1))
    inner = kernel.open_loops(loops[:-1], indent)
    if len(loops) == 1:
        em.emit(inner, kernel.shared_loop(1))
    em.emit(inner, f"for (int64_t zb = 0; zb < {z.size}; zb += {BLOCK}) {{")
    body, element = em.deeper(inner), em.deeper(inner, 2)
    count = str(BLOCK) if z.size % BLOCK == 0 else f"({z.size} - zb < {BLOCK} ? {z.size} - zb : {BLOCK})"
    em.emit(body, f"const int64_t zn = {count};")
    for m in members:
        em.emit(body, f"alignas(64) {ctype(m.node.dtype)} {stages[m.name]}[{BLOCK}];")
    halves = block_halves(kernel, plan.expressions(), plan.members, BLOCK, z, kernel.hoisted, frozenset(stages),
                          count="zn", start="zb")
    narrowed = {m.name: f"f{stages[m.name]}" for m in members if narrows_half(m)}
    for name in narrowed.values():
        em.emit(body, f"alignas(64) float {name}[{BLOCK}];")
    if halves:
        halves.emit_head(body, kernel.hoisted)
    em.emit(body, "#pragma omp simd")
    em.emit(body, "for (int64_t l = 0; l < zn; l++) {")
    em.emit(element, f"const int64_t {z.name} = zb + l;")
    printer = kernel.printer(element)
    printer.memo.update(halves.memo() if halves else {})
    kernel.preload(plan.members, printer)
    for m in plan.members:
        narrow = f"{narrowed[m.name]}[l]" if m.name in narrowed else halves and halves.stage_of(m)
        kernel.compute(m, printer, element, stage=f"{stages[m.name]}[l]" if m.name in stages else None,
                       float_stage=narrow)
    em.emit(body, "}")
    if halves:
        halves.flush(body, kernel.hoisted)
    for m in members:
        if m.name in narrowed:
            em.emit(body, f"b_narrow_f16({narrowed[m.name]}, {stages[m.name]}, zn);")
    _write_stages(kernel, members, stages, {z: "zb"}, body, "zn")
    em.emit(inner, "}")
    kernel.close_loops(len(loops) - 1, inner)
    _close_region(kernel, indent)


# ---------------------------------------------------------------------- rows

def _calls_library(plan, level: int, r) -> bool:
    """Does the loop at ``level`` compute (or read kept) vector-math calls along the row?"""
    return any(n.op in LIBRARY_CALLS and r in free_vars(n)
               for n in walk([m.value for m in plan.members if m.level == level]))


class RowStream:
    """The values a row kernel's last loop stores along the row: each block of lanes is
    computed into a scratch array and streamed at the block's end (the tail of the row
    keeps plain stores): RMSNorm's rows then move each output byte once. Not where the
    loop holds a vector-math call (``erff`` of LayerNorm+GELU, softmax's ``expf``, kept
    from the loop before): a loop bound by its arithmetic hides the line reads of plain
    stores, and its non-temporal stores then only cost. Streaming a whole row at its end
    instead of each block was slower on both (docs/benchmarks.md, "CPU kernels")."""

    def __init__(self, kernel: CppKernel):
        self.kernel = kernel
        self.members: list = []
        self.stages: dict = {}  # member name -> its scratch array
        self.wide: dict = {}  # float16 member name -> its float scratch array (``halves``)
        self.level = None  # the row's last loop, where there is something to stream
        plan = kernel.plan
        if len(plan.reduce) != 1 or not plan.outer or plan.columns:  # (column sums: a region of their own)
            return
        self.r = r = plan.reduce[0]
        self.lanes = reduce_lanes(kernel)  # (the row loop's blocks)
        if self.lanes < 4 or not _worth_it(kernel, r.size, plan.outer_numel() * r.size):
            return
        last = [level for level in plan.levels if level % 2][-1]
        if _calls_library(plan, last, r):
            return
        self.members = [m for m in plan.members if m.level == last and m.reduce_op is None
                        and _streamable(plan, m, r)]
        self.stages = {m.name: f"stage{i}" for i, m in enumerate(self.members)}
        self.wide = {m.name: f"fstage{i}" for i, m in enumerate(self.members) if narrows_half(m)}
        self.level = last if self.members else None

    @property
    def targets(self) -> list:
        return [m.target for m in self.members]

    def stage_of(self, member) -> str | None:
        """The scratch element ``member`` is stored into in a block, or None (in place)."""
        return f"{self.stages[member.name]}[l]" if member.name in self.stages else None

    def float_stage_of(self, member) -> str | None:
        """The float scratch element of a float16 ``member``, narrowed into its stage at the
        block's end, or None."""
        return f"{self.wide[member.name]}[l]" if member.name in self.wide else None

    def open_region(self, indent: str) -> str:
        return _open_region(self.kernel, indent)

    def loop_pragma(self, collapse: int) -> str:
        """The pragma of the loop over the rows: shared by the region's threads."""
        return self.kernel.shared_loop(collapse)

    def declare(self, indent: str) -> None:
        """Each streamed member's scratch array (a block of lanes)."""
        for m in self.members:
            self.kernel.emitter.emit(indent, f"alignas(64) {ctype(m.node.dtype)} {self.stages[m.name]}[{self.lanes}];")
        for name in self.wide.values():
            self.kernel.emitter.emit(indent, f"alignas(64) float {name}[{self.lanes}];")

    def flush(self, indent: str) -> None:
        """At the end of a block of the last loop: its staged values written."""
        for name, wide in self.wide.items():
            self.kernel.emitter.emit(indent, f"b_narrow_f16({wide}, {self.stages[name]}, {self.lanes});")
        _write_stages(self.kernel, self.members, self.stages, {self.r: "rb"}, indent, str(self.lanes))

    def close_region(self, indent: str) -> None:
        _close_region(self.kernel, indent)
