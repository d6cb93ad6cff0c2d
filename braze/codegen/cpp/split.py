"""Split reductions of the C++ backend: few outer elements, long reductions (a full sum).

Takes: a ``CppKernel`` of shape ``split``. Gives: ``emit_split(kernel)``, its loops: each
reduce loop is shared by all threads of one parallel region, each thread folds its share
into per-lane accumulators, publishes the merged partial, and every thread merges the
partials in thread order (so the result does not depend on timing: deterministic).
Thread 0 alone stores the results and the epilogues between reduce loops.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from braze.codegen.cpp.lanes import merge_lanes, reduce_lanes

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel


def emit_split(kernel: CppKernel) -> None:
    em = kernel.emitter
    plan = kernel.plan
    inner = kernel.open_loops(plan.outer, "  ")
    partial_accs = kernel.accumulators([m for m in plan.members if m.reduce_op])
    for acc in partial_accs:
        for suffix, t, _ in acc.fields():
            em.emit(inner, f"{t} p_{acc.field(suffix)}[{kernel.team}];")
    em.emit(inner, f"#pragma omp parallel num_threads({kernel.team})")
    em.emit(inner, "{")
    body = em.deeper(inner)
    em.emit(body, "const int tid = omp_get_thread_num();")
    em.emit(body, "const int nth = omp_get_num_threads();")
    for level in plan.levels:
        members = kernel.members_at(level)
        if level % 2 == 0:
            printer = kernel.printer(body)
            kernel.preload(members, printer)
            for m in members:
                kernel.compute(m, printer, body, store_guard="if (tid == 0) ")
            continue
        lanes = reduce_lanes(kernel)
        accs = list({id(kernel.accs[m.name]): kernel.accs[m.name] for m in members if m.reduce_op}.values())
        kernel.declare(accs, lanes, body)
        kernel.reduce_loops(level, body, lanes, distribute=True)
        merge_lanes(kernel, accs, lanes, body)
        _share_partials(kernel, accs, body)
        kernel.set_results(level, lambda acc: (lambda s: f"f_{acc.field(s)}"))
        kernel.store_results(level, body, guard="if (tid == 0) ")
    em.emit(inner, "}")
    kernel.close_loops(len(plan.outer), inner)


def _share_partials(kernel: CppKernel, accs: list, indent: str) -> None:
    """Each thread publishes its partial; all merge them in thread order."""
    em = kernel.emitter
    for acc in accs:
        for suffix, _, _ in acc.fields():
            em.emit(indent, f"p_{acc.field(suffix)}[tid] = {acc.field(suffix)}[0];")
    em.emit(indent, "#pragma omp barrier")
    for acc in accs:
        for suffix, t, _ in acc.fields():
            em.emit(indent, f"{t} f_{acc.field(suffix)} = p_{acc.field(suffix)}[0];")
        em.emit(indent, "for (int k = 1; k < nth; k++) {")
        em.emit_lines(em.deeper(indent), acc.combine(lambda s, a=acc: f"f_{a.field(s)}",
                                                      lambda s, a=acc: f"p_{a.field(s)}[k]"))
        em.emit(indent, "}")
