"""Split reductions of the C++ backend: few outer elements, long reductions (a full sum).

Takes: a ``CppKernel`` of shape ``split``. Gives: ``emit_split(kernel)``, its loops: each
reduce loop is shared by all threads of one parallel region, each thread folds its share
into per-lane accumulators, publishes the merged partial, and every thread merges the
partials in thread order (so the result does not depend on timing: deterministic).
Thread 0 alone stores the results and the epilogues between reduce loops.
"""
from __future__ import annotations


def emit_split(kernel) -> None:
    plan = kernel.plan
    inner = kernel._open_loops(plan.outer, "  ")
    partial_accs = kernel._accumulators([m for m in plan.members if m.reduce_op])
    for acc in partial_accs:
        for suffix, t, _ in acc.fields():
            kernel._emit(inner, f"{t} p_{acc.field(suffix)}[{kernel.threads}];")
    kernel._emit(inner, f"#pragma omp parallel num_threads({kernel.threads})")
    kernel._emit(inner, "{")
    body = inner + "  "
    kernel._emit(body, "const int tid = omp_get_thread_num();")
    kernel._emit(body, "const int nth = omp_get_num_threads();")
    for level in plan.levels:
        members = kernel._members_at(level)
        if level % 2 == 0:
            printer = kernel._printer(body)
            kernel._preload(members, printer)
            for m in members:
                kernel._compute(m, printer, body, store_guard="if (tid == 0) ")
            continue
        lanes = kernel._lanes_for(plan.reduce[-1].size)
        accs = list({id(kernel.accs[m.name]): kernel.accs[m.name] for m in members if m.reduce_op}.values())
        kernel._declare(accs, lanes, body)
        kernel._reduce_loops(level, body, lanes, distribute=True)
        kernel._merge_lanes(accs, lanes, body)
        _share_partials(kernel, accs, body)
        kernel._set_results(level, lambda acc: (lambda s: f"f_{acc.field(s)}"))
        kernel._store_results(level, body, guard="if (tid == 0) ")
    kernel._emit(inner, "}")
    kernel._close_loops(len(plan.outer), inner)


def _share_partials(kernel, accs, indent: str) -> None:
    """Each thread publishes its partial; all merge them in thread order."""
    for acc in accs:
        for suffix, _, _ in acc.fields():
            kernel._emit(indent, f"p_{acc.field(suffix)}[tid] = {acc.field(suffix)}[0];")
    kernel._emit(indent, "#pragma omp barrier")
    for acc in accs:
        for suffix, t, _ in acc.fields():
            kernel._emit(indent, f"{t} f_{acc.field(suffix)} = p_{acc.field(suffix)}[0];")
        kernel._emit(indent, "for (int k = 1; k < nth; k++) {")
        for stmt in acc.combine(lambda s, a=acc: f"f_{a.field(s)}", lambda s, a=acc: f"p_{a.field(s)}[k]"):
            kernel._emit(indent + "  ", stmt)
        kernel._emit(indent, "}")
