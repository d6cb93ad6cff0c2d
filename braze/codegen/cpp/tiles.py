"""Tiled pointwise kernels for the C++ backend: transposes, permutes, channels-last.

Takes: a ``CppKernel`` whose plan has no reduction. Gives: ``tile_var(kernel)``, the
outer loop to tile with the innermost one (or None: no transpose here), and
``emit_tiled(kernel)``, the kernel's loops.

A transposing kernel walks its innermost loop ``z`` contiguously for its stores and
some loads, and with a stride for others (``x.t() + y`` reads ``x`` down a column).
Both loops are cut into ``edge``×``edge`` tiles (in parallel). Inside a tile, each
strided load whose position runs contiguously along the other tiled loop ``a`` is
first copied into a local ``scratch`` array: rows of the tile read contiguously
(``a`` innermost, vectorized) and written transposed into L1-resident scratch; the
tile's body then reads scratch contiguously along ``z``, vectorized like the rest
(wider tiles were faster: docs/benchmarks.md, "CPU kernels").
Tiles are 64 wide while the scratch arrays fit in the L1 data cache, else 32. A load of
4-byte elements is copied row by row (contiguous stores) into a second array and transposed
from there in 8x8 blocks of registers (``b_transpose_tile32`` in the prelude), several times
faster than storing each element at its transposed place.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from braze import cpu_info
from braze.codegen.cpp.exprs import ctype
from braze.ir import simplify as S
from braze.ir.expr import Op, walk

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel

EDGES = (64, 32)  # tile edges, widest first
SCRATCH_BYTES = cpu_info.cache_bytes(1, "Data", 32 << 10)  # all scratch arrays of a tile: the L1 data cache
MIN_TILES = 2  # a tiled loop is at least this many tiles of the smallest edge


def tile_var(kernel: CppKernel):
    """An outer loop that some access walks contiguously while it walks the innermost
    loop with a stride (a transpose): tile the two together."""
    loops = kernel.plan.outer
    if len(loops) < 2 or loops[-1].size < MIN_TILES * EDGES[-1]:
        return None
    z = loops[-1]
    positions = [e.args[0] for e in walk(kernel.plan.expressions()) if e.op is Op.LOAD]
    positions += [m.store for m in kernel.plan.members if m.store is not None]
    for p in positions:
        if S.coefficient(p, z) in (0, 1, None):
            continue
        for a in loops[:-1]:
            if a.size >= MIN_TILES * EDGES[-1] and S.coefficient(p, a) == 1:
                return a
    return None


def _scratch_loads(kernel: CppKernel, a, z) -> list:
    """Loads to copy through scratch: strided along ``z``, contiguous along ``a``, at a
    position of plain index arithmetic, from a buffer the kernel does not write."""
    plan, found = kernel.plan, {}
    for e in walk(plan.expressions()):
        if e.op is not Op.LOAD or e.arg in plan.writes or id(e) in kernel.hoisted:
            continue
        pos = e.args[0]
        if S.coefficient(pos, z) in (0, 1, None) or S.coefficient(pos, a) != 1:
            continue
        if any(x.op is Op.LOAD for x in walk(pos)):
            continue
        found.setdefault(id(e), e)
    return list(found.values())


def _edge(loads) -> int:
    for edge in EDGES:
        if sum(e.dtype.itemsize * (2 if _staged(e) else 1) for e in loads) * edge * edge <= SCRATCH_BYTES:
            return edge
    return EDGES[-1]


def emit_tiled(kernel: CppKernel) -> None:
    em = kernel.emitter
    plan = kernel.plan
    a, z = tile_var(kernel), plan.outer[-1]
    loads = _scratch_loads(kernel, a, z)
    edge = _edge(loads)
    others = [v for v in plan.outer if v is not a and v is not z]
    em.emit("  ", kernel.parallel(len(others) + 2))
    inner = kernel.open_loops(others, "  ")
    em.emit(inner, f"for (int64_t {a.name}b = 0; {a.name}b < {a.size}; {a.name}b += {edge}) {{")
    em.emit(inner, f"  for (int64_t {z.name}b = 0; {z.name}b < {z.size}; {z.name}b += {edge}) {{")
    body = em.deeper(inner, 2)
    for v in (a, z):
        em.emit(body, f"const int64_t {v.name}e = {v.name}b + {edge} < {v.size} ? {v.name}b + {edge} : {v.size};")
    preset = _fill_scratch(kernel, loads, a, z, edge, body)
    em.emit(body, f"for (int64_t {a.name} = {a.name}b; {a.name} < {a.name}e; {a.name}++) {{")
    em.emit(body, "  #pragma omp simd")
    em.emit(body, f"  for (int64_t {z.name} = {z.name}b; {z.name} < {z.name}e; {z.name}++) {{")
    element = em.deeper(body, 2)
    printer = kernel.printer(element)
    printer.memo.update(preset)
    kernel.preload(plan.members, printer)
    for m in plan.members:
        kernel.compute(m, printer, element)
    em.emit(body, "  }")
    em.emit(body, "}")
    em.emit(inner, "  }")
    em.emit(inner, "}")
    kernel.close_loops(len(others), inner)


def _fill_scratch(kernel: CppKernel, loads: list, a, z, edge: int, indent: str) -> dict:
    """Copy each load's tile into a scratch array, transposed; gives the body's
    printer its reads of them (id of the load -> text)."""
    em = kernel.emitter
    preset = {}
    for k, load in enumerate(loads):
        name = f"{em.fresh('scratch')}_{k}"
        em.emit(indent, f"alignas(64) {ctype(load.dtype)} {name}[{edge}][{edge}];")
        staged = _staged(load)
        if staged:
            em.emit(indent, f"alignas(64) {ctype(load.dtype)} {name}_rows[{edge}][{edge}];")
        em.emit(indent, f"for (int64_t {z.name} = {z.name}b; {z.name} < {z.name}e; {z.name}++) {{")
        em.emit(indent, "  #pragma omp simd")
        em.emit(indent, f"  for (int64_t {a.name} = {a.name}b; {a.name} < {a.name}e; {a.name}++) {{")
        value = kernel.printer(em.deeper(indent, 2))(load)
        if staged:
            em.emit(indent, f"    {name}_rows[{z.name} - {z.name}b][{a.name} - {a.name}b] = {value};")
        else:
            em.emit(indent, f"    {name}[{a.name} - {a.name}b][{z.name} - {z.name}b] = {value};")
        em.emit(indent, "  }")
        em.emit(indent, "}")
        if staged:
            em.emit(indent, f"b_transpose_tile32({name}_rows, {name}, {edge}, {z.name}e - {z.name}b, "
                            f"{a.name}e - {a.name}b);")
        preset[id(load)] = f"{name}[{a.name} - {a.name}b][{z.name} - {z.name}b]"
    return preset


def _staged(load) -> bool:
    """Is the load copied row by row (contiguous stores) and then transposed in 8x8 register
    blocks (``b_transpose_tile32``)? For 4-byte elements; others are stored transposed one
    by one."""
    return load.dtype.itemsize == 4
