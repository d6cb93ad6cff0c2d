"""C++ for scatter kernels: a scatter node's elements written (or added) at positions read
from memory, by one thread or by several, each target element in index order.

Takes: a ``CppKernel`` (``braze.codegen.cpp.kernel``) whose plan holds one scatter node.
Gives: ``emit_scatter(kernel)``, the statements of its body.

Order. Eager's CPU scatters run in index order: an accumulating one adds the values of
duplicate indices in that order (its rounding), an overwriting one keeps the last write.
Threads cannot take rows by index (two indices may name one row), so they split the
*target*: thread ``t`` owns a contiguous range of the target's storage (whole cache lines,
``owned_range``), every thread walks every index in order and writes only the elements it
owns. Each element is written by one thread, in index order: the result is one thread's,
bit for bit, whatever the thread count.

Cost. Where the innermost loop stores along the target (``base + c * x``: a row of an
``index_add_``), each thread clips that loop to its range once per row and the loop stays
SIMD; elsewhere each element tests its position. Each thread reads every index (and runs
its check): a few loads per row beside the row's own work. The threads start only when
the elements reach ``SCATTER_PARALLEL_MIN_WORK`` (an OpenMP ``if``); below, one thread
runs the plain loops. A scatter whose values read its own target (none are lowered so)
stays in one thread.

What does not vary along the innermost loop (the loaded index, its check, the row's base
position, per-row values) is computed once per row, before that loop: a check is a
conditional call, and GCC vectorizes no loop holding one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from braze.codegen.cpp.exprs import CPrinter
from braze.ir import simplify as S
from braze.ir import symbols
from braze.ir.expr import Expr, Op, binary, cast, free_vars, walk

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel

SCATTER_PARALLEL_MIN_WORK = 1 << 15  # elements scattered below which one thread runs them
OWN_LINE_BYTES = 64  # threads own whole cache lines of the target: no line written by two


def emit_scatter(kernel: CppKernel) -> None:
    plan, em = kernel.plan, kernel.emitter
    shared = _shared(kernel)
    indent = "  "
    if shared:
        em.emit(indent, f"#pragma omp parallel num_threads({kernel.team}){_threads_clause(plan)}")
        em.emit(indent, "{")
        indent = em.deeper(indent)
        em.emit_lines(indent, owned_range(plan.extents[plan.members[0].target],
                                          plan.dtypes[plan.members[0].target].itemsize))
    rows = kernel.open_loops(plan.outer[:-1], indent)
    exprs = [(m, _stored_value(m)) for m in plan.members]
    if not plan.outer:
        _body(kernel, rows, exprs, kernel.printer(rows), None)
    else:
        _innermost(kernel, rows, exprs, plan.outer[-1], shared)
    kernel.close_loops(len(plan.outer) - 1 if plan.outer else 0, rows)
    if shared:
        em.emit(em.shallower(indent), "}")


def owned_range(extent, itemsize: int) -> list:
    """C lines setting ``b_own_lo, b_own_hi``: the part of a target of ``extent`` elements
    this thread of the region writes, whole lines of ``OWN_LINE_BYTES``, split evenly."""
    line = max(1, OWN_LINE_BYTES // itemsize)
    size = symbols.text_of(extent, "c") if symbols.is_symbolic(extent) else str(extent)
    return [
        "const int64_t b_team = omp_get_num_threads(), b_tid = omp_get_thread_num();",
        f"const int64_t b_lines = ((int64_t)({size}) + {line - 1}) / {line};",
        f"const int64_t b_own_lo = i_min(b_lines * b_tid / b_team * {line}, (int64_t)({size}));",
        f"const int64_t b_own_hi = i_min(b_lines * (b_tid + 1) / b_team * {line}, (int64_t)({size}));",
    ]


def _shared(kernel: CppKernel) -> bool:
    """Do several threads share the scatter (where its work is large enough)?"""
    plan = kernel.plan
    if kernel.nested or not plan.outer or len(plan.members) != 1:
        return False
    m = plan.members[0]
    if any(e.op is Op.LOAD and e.arg == m.target for e in walk(m.value)):
        return False
    return symbols.known(plan.outer_numel(), ">=", SCATTER_PARALLEL_MIN_WORK) is not False


def _threads_clause(plan) -> str:
    """The region's ``if``: none where the work is surely enough, else the test."""
    work = plan.outer_numel()
    if symbols.known(work, ">=", SCATTER_PARALLEL_MIN_WORK):
        return ""
    return f" if(parallel: {symbols.text_of(work, 'c')} >= {SCATTER_PARALLEL_MIN_WORK})"


def _stored_value(m) -> Expr:
    """What the member stores: its value, added to the target's element if it accumulates."""
    value = m.value
    if m.node.accumulates:
        old = Expr(Op.LOAD, m.node.dtype, (m.store,), m.target)
        value = binary(Op.ADD, cast(old, value.dtype), value)
    return value


def _innermost(kernel: CppKernel, rows: str, exprs: list, v, shared: bool) -> None:
    """The innermost loop over ``v``, after what does not vary along it (once per row)."""
    em = kernel.emitter
    row_printer = _row_invariants(kernel, rows, exprs, v)
    step = _step(exprs, v)
    lo, hi = "0", str(v.size)
    test = None
    if shared and step:
        base = row_printer(S.sub(exprs[0][0].store, S.mul(v, step)))
        lo, hi = _clipped(em, rows, base, step, v)
    elif shared:
        test = "b_own_lo <= {0} && {0} < b_own_hi"
    if step:  # each step stores its own element: SIMD lanes
        em.emit(rows, "#pragma omp simd")
    em.emit(rows, f"for (int64_t {v.name} = {lo}; {v.name} < {hi}; {v.name}++) {{")
    body = em.deeper(rows)
    _body(kernel, body, exprs, kernel.printer(body, preset=row_printer.memo), test)
    em.emit(rows, "}")


def _step(exprs: list, v):
    """``c`` where every store is ``base + c * v`` with one constant ``c > 0``, else None."""
    steps = {S.coefficient(m.store, v) for m, _ in exprs}
    step = steps.pop() if len(steps) == 1 else None
    return step if isinstance(step, int) and step > 0 else None


def _clipped(em, indent: str, base: str, step: int, v) -> tuple:
    """Bounds of the loop over ``v`` whose stores ``base + step * v`` this thread owns."""
    if step == 1:
        em.emit(indent, f"const int64_t b_lo = i_max(b_own_lo - {base}, (int64_t)0);")
        em.emit(indent, f"const int64_t b_hi = i_min(b_own_hi - {base}, (int64_t){v.size});")
    else:  # ceil((own - base) / step) = -floor((base - own) / step)
        em.emit(indent, f"const int64_t b_lo = i_max(-idx_floordiv({base} - b_own_lo, {step}), (int64_t)0);")
        em.emit(indent, f"const int64_t b_hi = i_min(-idx_floordiv({base} - b_own_hi, {step}), (int64_t){v.size});")
    return "b_lo", "b_hi"


def _row_invariants(kernel: CppKernel, rows: str, exprs: list, v) -> CPrinter:
    """A printer at the row's indent holding what the loop over ``v`` reads but does not
    vary along it; never a load of a target (read again after each store)."""
    printer = kernel.printer(rows)
    targets = {m.target for m, _ in exprs}
    for m, value in exprs:
        for e in walk([value, m.store]):
            if e.op in (Op.CONST, Op.VAR, Op.VALUE) or v in free_vars(e):
                continue
            if not any(n.op is Op.LOAD and n.arg in targets for n in walk(e)):
                printer(e)
    return printer


def _body(kernel: CppKernel, indent: str, exprs: list, printer: CPrinter, test: str | None) -> None:
    """Each member's value stored at its position (``test``: only where the position passes it)."""
    em = kernel.emitter
    for m, value in exprs:
        if test is None:
            kernel.compute(m, printer, indent, exprs=(value, m.store))
            continue
        em.emit(indent, f"if ({test.format(printer(m.store))}) {{")
        inner = em.deeper(indent)
        kernel.compute(m, kernel.printer(inner, preset=printer.memo), inner, exprs=(value, m.store))
        em.emit(indent, "}")
