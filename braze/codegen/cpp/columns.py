"""Column kernels of the C++ backend: reductions down a strided dimension (``x.sum(0)``).

Takes: a ``CppKernel`` of shape ``column`` (the innermost outer dimension ``x`` is
contiguous, the reduced one strided; not the ``column`` role of ``colsums``, sums over
a row kernel's rows). Gives: ``emit_column(kernel)``, its loops.

Columns are cut into blocks, in parallel. A block keeps one accumulator per
column (in L1) and walks the reduced rows in order; each row's slice of the block
is read contiguously, vectorized across the columns. Blocks are as wide as
``ACC_BYTES`` of accumulators allow (narrower only to give every thread a block):
a wide slice is a long run the hardware prefetcher follows, where a narrow one
(64 columns of a 2048-wide fp32 matrix: 256 bytes, then the next row 8 KiB away)
waits on memory every row. The row loop is unrolled ``UNROLL`` times, each copy
folding one row in order, so each column still sums its rows one by one (the same
result) while its accumulator is loaded and stored once per ``UNROLL`` rows (4 was
faster than 2 or 8). A float32 sum kept in double adds the unrolled rows in float and
the partial into the double once, not a conversion and a double add per element.
Timings: docs/benchmarks.md, "CPU kernels".
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from braze.codegen.cpp.accumulate import accumulator_for
from braze.codegen.cpp.exprs import ctype
from braze.ir import symbols, unbacked

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel

ACC_BYTES = 1 << 14  # accumulators and epilogue values of a block (half of L1)
MIN_BLOCK = 64  # columns, however large a column's accumulators
UNROLL = 4  # rows folded per pass over a block's accumulators
CBYTES = {  # sizes of the C types of accumulator fields and epilogue values
    "double": 8, "float": 4, "int64_t": 8, "int32_t": 4, "int16_t": 2, "int8_t": 1, "uint8_t": 1,
    "uint16_t": 2, "uint32_t": 4, "uint64_t": 8,
    "bool": 1, "f16_t": 2, "bf16_t": 2,
}


def emit_column(kernel: CppKernel) -> None:
    em = kernel.emitter
    plan = kernel.plan
    *outer, x_in = plan.outer
    block = block_width(kernel)
    indent = "  "
    em.emit(indent, kernel.parallel(len(outer) + 1))
    inner = kernel.open_loops(outer, indent)
    em.emit(inner, f"for (int64_t xb = 0; xb < {x_in.size}; xb += {block}) {{")
    inner = em.deeper(inner)
    em.emit(inner, f"const int64_t nb = {x_in.size} - xb < {block} ? {x_in.size} - xb : {block};")
    for level in plan.levels:
        members = kernel.members_at(level)
        if level % 2 == 0:
            _epilogue(kernel, members, inner, block, x_in)
        else:
            _reduce(kernel, level, members, inner, block, x_in)
    em.emit(em.shallower(inner), "}")
    kernel.close_loops(len(outer), em.shallower(inner))


def block_width(kernel: CppKernel) -> int:
    """Columns per block: a power of two whose accumulators fit ``ACC_BYTES``, at most
    the columns there are (in whole lanes), narrower where threads would go idle."""
    plan, lanes = kernel.plan, kernel.lanes
    x_in = plan.outer[-1]
    per_column = _bytes_per_column(plan)
    width = MIN_BLOCK
    while 2 * width * per_column <= ACC_BYTES:
        width *= 2
    if unbacked.unbacked_in(plan.outer_numel()):  # (known once the graph runs: the last block takes the rest)
        return width
    width = min(width, _round_up(x_in.size, lanes))
    threads = kernel.threads if kernel.threaded() else 1
    blocks_wanted = -(-threads // (plan.outer_numel() // x_in.size))  # per row of columns
    if blocks_wanted > 1:
        width = min(width, _round_up(-(-x_in.size // blocks_wanted), lanes))
    return width


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def _bytes_per_column(plan) -> int:
    """Stack bytes a column takes in a block: accumulator fields (one set per distinct
    reduction) and epilogue values."""
    total, seen = 0, set()
    for m in plan.members:
        if m.reduce_op is not None:
            acc = accumulator_for(m, "")
            if (acc.family, id(m.value)) not in seen:  # siblings share one (``CppKernel.accumulators``)
                seen.add((acc.family, id(m.value)))
                total += sum(CBYTES[t] for _, t, _ in acc.fields())
        elif m.level % 2 == 0:
            total += CBYTES[ctype(m.value.dtype)]
    return max(total, 1)


def _reduce(kernel: CppKernel, level: int, members, indent: str, block: int, x_in) -> None:
    """One reduce level: accumulators for the block, the rows folded in, results stored."""
    em = kernel.emitter
    plan = kernel.plan
    accs = kernel.accumulators([m for m in members if m.reduce_op])
    kernel.declare(accs, block, indent, count="nb")
    counted = any(a.family == "welford" for a in accs)
    blocks = f"blocks{level}" if counted else ""  # one counter per reduce level of the kernel
    if counted:
        em.emit(indent, f"double {blocks} = 0;  // every column has seen this many elements")
    *outer_r, last = plan.reduce
    r_inner = kernel.open_loops(outer_r, indent)
    unroll = 1 if counted else symbols.at_most(UNROLL, last.size)
    main = last.size - last.size % unroll
    partials = [(acc, acc.narrow()) for acc in kernel.wide_sums(level)] if unroll > 1 else []
    for _, partial in partials:
        em.emit(indent, f"float {partial.field('v')}[{block}];")
    _rows(kernel, level, r_inner, x_in, f"for (int64_t rb = 0; rb < {main}; rb += {unroll})", unroll, blocks,
          partials)
    if symbols.possible(main, "<", last.size):
        _rows(kernel, level, r_inner, x_in, f"for (int64_t rb = {main}; rb < {last.size}; rb++)", 1, blocks)
    kernel.close_loops(len(outer_r), r_inner)
    kernel.set_results(level, lambda acc: (lambda s: f"{acc.field(s)}[l]"))
    if any(m.store is not None for m in members if m.reduce_op):
        em.emit(indent, "for (int64_t l = 0; l < nb; l++) {")
        em.emit(em.deeper(indent), f"const int64_t {x_in.name} = xb + l;")
        kernel.store_results(level, em.deeper(indent))
        em.emit(indent, "}")


def _rows(kernel: CppKernel, level: int, indent: str, x_in, loop: str, count: int, blocks: str,
          partials=()) -> None:
    """``loop`` over rows ``rb``; in its body the block's columns (vectorized) fold in
    rows ``rb`` .. ``rb + count - 1``, in order. A float32 sum kept in double
    (``partials``: its accumulator and float partial) adds the ``count`` rows in float
    first and the partial into its double once: one float add an element instead of a
    conversion and a double add."""
    em = kernel.emitter
    r = kernel.plan.reduce[-1]
    em.emit(indent, loop + " {")
    body = em.deeper(indent)
    if blocks:  # Welford's count of the rows folded in so far
        em.emit(body, f"{blocks} += 1;")
        em.emit(body, f"const double inv_blocks = 1.0 / {blocks};")
    em.emit(body, "#pragma omp simd")
    em.emit(body, "for (int64_t l = 0; l < nb; l++) {")
    em.emit(body, f"  const int64_t {x_in.name} = xb + l;")
    for _, partial in partials:
        em.emit(body, f"  {partial.field('v')}[l] = 0;")
    for u in range(count):
        em.emit(body, "  {")
        em.emit(body, f"    const int64_t {r.name} = rb + {u};")
        kernel.lane_body(level, em.deeper(body, 2), "l", (blocks, "inv_blocks") if blocks else None,
                         {id(acc): partial for acc, partial in partials})
        em.emit(body, "  }")
    for acc, partial in partials:
        em.emit(body, "  " + acc.fold(partial, "l"))
    em.emit(body, "}")
    em.emit(indent, "}")


def _epilogue(kernel: CppKernel, members, indent: str, block: int, x_in) -> None:
    """Per-column values between reduce levels, kept in a block array for the next."""
    em = kernel.emitter
    if not members:
        return
    for m in members:
        em.emit(indent, f"{ctype(m.value.dtype)} o_{m.name}[{block}];")
    em.emit(indent, "#pragma omp simd")
    em.emit(indent, "for (int64_t l = 0; l < nb; l++) {")
    body = em.deeper(indent)
    em.emit(body, f"const int64_t {x_in.name} = xb + l;")
    printer = kernel.printer(body)
    kernel.preload(members, printer)
    for m in members:
        value = kernel.compute(m, printer, body)
        em.emit(body, f"o_{m.name}[l] = {value};")
    em.emit(indent, "}")
    for m in members:
        kernel.values[m.name] = f"o_{m.name}[l]"
