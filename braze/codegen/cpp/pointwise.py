"""Pointwise kernels of the C++ backend: every member computed per element, no reduction.

Takes: a ``CppKernel`` of shape ``pointwise``. Gives: ``emit_pointwise(kernel)``, its
loops: the outer loops in parallel, the innermost one ``omp simd``; or, where it pays,
the innermost loop cut into pieces where a condition on its index flips (``pieces``),
over a symbolic extent in blocks of lanes,
in blocks whose random numbers are drawn together (``draws``) or whose float16 loads
and stores are converted together (``halves``), or with its outputs
streamed around the cache (``streams``). A kernel with no loop (a scalar) is one block.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from braze.codegen.cpp.draws import BlockDraws
from braze.codegen.cpp.halves import BlockHalves, block_halves
from braze.codegen.cpp.lanes import emit_lanes
from braze.codegen.cpp.pieces import over_piece, piece_name, piece_var, pieces
from braze.codegen.cpp.streams import emit_streamed, streamed
from braze.ir.expr import Op, free_vars, walk

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel


def emit_pointwise(kernel: CppKernel) -> None:
    plan, em = kernel.plan, kernel.emitter
    indent = "  "
    loops = plan.outer
    if not loops and kernel.nested:
        em.emit(indent, "#pragma omp single nowait")
    cuts = pieces(kernel)
    draws = _pointwise_draws(kernel, cuts)
    stream = [] if cuts or draws else streamed(kernel)
    if stream:
        emit_streamed(kernel, stream)
        return
    halves = None if cuts else _pointwise_halves(kernel)
    if len(loops) == 1 and not draws and not halves:
        em.emit(indent, kernel.parallel(1, simd=True))
    elif len(loops) > 1:
        em.emit(indent, kernel.parallel(len(loops) - 1))
    inner = kernel.open_loops(loops[:-1], indent)
    if cuts or draws or halves:
        if draws or halves:
            _pointwise_blocks(kernel, inner, draws, halves)
        for k, (lo, hi) in enumerate(cuts):
            _pointwise_piece(kernel, inner, k, lo, hi)
        kernel.close_loops(len(loops) - 1, inner)
        return
    _innermost_loop(kernel, inner)


def _innermost_loop(kernel: CppKernel, indent: str) -> None:
    """The innermost loop (``omp simd``) and its body: every member, per element; a
    kernel with no loop, one block."""
    em, loops = kernel.emitter, kernel.plan.outer
    checked = _outer_checks(kernel, indent, loops[-1]) if len(loops) > 1 else {}
    if len(loops) > 1 and _in_blocks(kernel, loops[-1]):
        emit_lanes(kernel, indent, loops[-1], kernel.lanes_for(loops[-1].size),
                   lambda ind, _narrow: _emit_members(kernel, ind, known=checked), spread_tail=True)
        kernel.close_loops(len(loops) - 1, indent)
        return
    if len(loops) > 1:
        em.emit(indent, "#pragma omp simd")
    inner = kernel.open_loops(loops[-1:], indent)
    if not loops:
        em.emit(inner, "{")
    _emit_members(kernel, inner, known=checked)
    if not loops:
        em.emit(inner, "}")
    kernel.close_loops(len(loops), inner)


def _emit_members(kernel: CppKernel, indent: str, known: dict | None = None, rewrite=None, stage_of=None) -> None:
    """Every member computed and stored, per element, at ``indent``. ``known``: names of
    values printed before the loop (the printer's memo); ``rewrite(expr)``: a member's
    value and store as a piece sees them (pieces never overwrite what they read, so
    nothing is preloaded there); ``stage_of(member)``: where its float32 value goes
    (``halves``)."""
    printer = kernel.printer(indent)
    printer.memo.update(known or {})
    if rewrite is None:
        kernel.preload(kernel.plan.members, printer)
    for m in kernel.plan.members:
        exprs = (rewrite(m.value), rewrite(m.store)) if rewrite else None
        kernel.compute(m, printer, indent, exprs=exprs, float_stage=stage_of(m) if stage_of else None)


def _in_blocks(kernel: CppKernel, z) -> bool:
    """Does the innermost loop over ``z``, inside outer loops, run in blocks of lanes and a
    tail? Where its extent is symbolic: GCC's vector loop over a count it does not know
    tests and peels at each entry, which for short rows (rotary's halves of 64) cost 10-15 %
    against the static kernel; a block of a constant count is straight vector code."""
    return not isinstance(z.size, int) and kernel.lanes_for(z.size) >= 4


def _outer_checks(kernel: CppKernel, indent: str, inner_var) -> dict:
    """Run-time checks (``Op.CHECK``) that do not vary along the innermost loop (a row's
    index: ``x[rows]``, an embedding), printed before it: a check is a conditional call,
    which GCC does not vectorize. Returns their printed names, for the loop's printer."""
    printer = kernel.printer(indent)
    for e in walk(kernel.plan.expressions()):
        if e.op is Op.CHECK and inner_var not in free_vars(e) and not any(n.op is Op.VALUE for n in walk(e)):
            printer(e)
    return printer.memo


def _pointwise_draws(kernel: CppKernel, cuts) -> BlockDraws | None:
    """The random values the innermost loop draws a block at a time (``draws``), if it
    runs whole (no pieces) and not inside a foreach kernel's parallel region."""
    loops = kernel.plan.outer
    lanes = kernel.lanes_for(loops[-1].size) if loops else 0
    if cuts or kernel.nested or lanes < 4:
        return None
    return BlockDraws(kernel, kernel.plan.expressions(), loops[-1], lanes)


def _pointwise_halves(kernel: CppKernel) -> BlockHalves | None:
    """The float16 loads and stores the innermost loop converts a block of lanes at a time
    (``halves``), if it runs whole and not inside a foreach kernel's parallel region."""
    loops = kernel.plan.outer
    if not loops or kernel.nested:
        return None
    return block_halves(kernel, kernel.plan.expressions(), kernel.plan.members, kernel.lanes_for(loops[-1].size),
                        loops[-1], kernel.hoisted)


def _pointwise_blocks(kernel: CppKernel, indent: str, draws: BlockDraws | None, halves: BlockHalves | None) -> None:
    """The innermost loop in blocks of lanes, each block's random words drawn and float16
    loads widened first, its float16 stores narrowed last."""
    plan = kernel.plan

    def head(ind: str) -> None:
        if halves:
            halves.emit_head(ind, kernel.hoisted)
        if draws:
            draws.emit_head(ind)

    def body(ind: str, narrow: dict | None) -> None:
        if narrow is None:  # the tail, element by element
            _emit_members(kernel, ind)
            return
        _emit_members(kernel, ind, known={**(halves.memo() if halves else {}), **(draws.memo() if draws else {})},
                      stage_of=halves.stage_of if halves else None)

    def foot(ind: str) -> None:
        halves.flush(ind, kernel.hoisted)
    pragma = kernel.parallel(1) if len(plan.outer) == 1 else ""
    lanes = draws.lanes if draws else halves.lanes
    emit_lanes(kernel, indent, plan.outer[-1], lanes, body, head=head, pragma=pragma,
               foot=foot if halves and halves.stores else None)


def _pointwise_piece(kernel: CppKernel, indent: str, k: int, lo, hi) -> None:
    """The innermost loop over piece ``k``, ``[lo, hi)`` (``pieces``), its expressions rewritten."""
    em = kernel.emitter
    z = kernel.plan.outer[-1]
    name, v = piece_name(z, k), piece_var(z, k, lo, hi)
    if v.op is Op.VAR:  # (a piece of one element is the constant 0)
        kernel.names[v] = name
    memo: dict = {}

    def rewrite(e):
        return over_piece(e, z, k, lo, hi, memo)
    if v.op is Op.VAR and _in_blocks(kernel, v):
        emit_lanes(kernel, indent, v, kernel.lanes_for(v.size),
                   lambda ind, _narrow: _emit_members(kernel, ind, rewrite=rewrite), spread_tail=True)
        return
    em.emit(indent, "#pragma omp simd")
    em.emit(indent, f"for (int64_t {name} = 0; {name} < {hi - lo}; {name}++) {{")
    _emit_members(kernel, em.deeper(indent), rewrite=rewrite)
    em.emit(indent, "}")
