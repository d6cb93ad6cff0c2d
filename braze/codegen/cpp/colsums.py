"""Sums over the rows of a C++ row kernel: per-thread column partials.

Takes: a ``CppKernel`` of shape ``row`` whose plan has column members (role
``column``, ``KernelPlan.columns``: sums over the outer loops, one per reduce element,
such as a LayerNorm backward's weight and bias gradients beside its row reductions;
not the ``column`` shape of ``columns``, a reduction down a strided dimension).
Gives: ``ColumnSums``, which opens the kernel's parallel region with one array of
double partials per column member and thread, adds each element into it where the
row loop computes the element, and after the last row adds the threads' partials
in thread order (deterministic) and stores the sums.

Why: computed by a kernel of its own, such a sum reads again, from memory, what the
row kernel had in registers (and the row kernel stores it for that reader alone).
Here it costs one add per element into an array that stays in the thread's cache.
The partials are double, so a sum over many rows keeps the float32 accuracy of the
column kernel's double accumulators (``columns``). The MLP training step's backward
runs 3 kernels instead of 8 (docs/benchmarks.md, "CPU kernels").
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from braze.codegen.cpp.exprs import CPrinter, convert
from braze.ir import simplify as S

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel


class ColumnSums:
    def __init__(self, kernel: CppKernel):
        self.kernel = kernel
        self.plan = kernel.plan
        self.names = {m.name: f"colsum{k}" for k, m in enumerate(self.plan.columns)}
        self.size = self.plan.reduce_numel()
        self.flat = S.ravel(list(self.plan.reduce), [v.size for v in self.plan.reduce])

    def open_region(self, indent: str) -> str:
        """The parallel region and each thread's zeroed partials; returns its indent."""
        k, em = self.kernel, self.kernel.emitter
        for name in self.names.values():
            em.emit(indent, f"double* {name}_of[{k.team}];  // each thread's partials")
        em.emit(indent, k.region())
        em.emit(indent, "{")
        inner = em.deeper(indent)
        em.emit(inner, "const int tid = omp_get_thread_num();")
        for name in self.names.values():
            em.emit(inner, f"double {name}[{self.size}];")
            em.emit(inner, "#pragma omp simd")
            em.emit(inner, f"for (int64_t j = 0; j < {self.size}; j++) {name}[j] = 0;")
            em.emit(inner, f"{name}_of[tid] = {name};")
        return inner

    def loop_pragma(self, collapse: int) -> str:
        """The pragma of the loop over the rows: shared by the region's threads."""
        return self.kernel.shared_loop(collapse, nowait=False)

    def add(self, member, printer: CPrinter, indent: str) -> None:
        """Add one element of ``member`` into this thread's partial."""
        value = convert(printer(member.value), member.value_dtype, torch.float64)
        self.kernel.emitter.emit(indent, f"{self.names[member.name]}[{printer(self.flat)}] += {value};")

    def close_region(self, indent: str) -> None:
        """After the rows (the loop's barrier): each column's partials in thread order."""
        k, em = self.kernel, self.kernel.emitter
        em.emit(indent, "const int nth = omp_get_num_threads();")
        em.emit(indent, self.loop_pragma(len(self.plan.reduce)))
        inner = k.open_loops(self.plan.reduce, indent)
        printer = k.printer(inner)
        flat = printer(self.flat)
        for m in self.plan.columns:
            name = self.names[m.name]
            em.emit(inner, f"double {name}_sum = {name}_of[0][{flat}];")
            em.emit(inner, f"for (int t = 1; t < nth; t++) {name}_sum += {name}_of[t][{flat}];")
            stored = convert(f"{name}_sum", torch.float64, m.node.dtype)
            em.emit(inner, f"{m.target}[{printer(m.store)}] = {stored};")
        k.close_loops(len(self.plan.reduce), inner)
        em.emit(em.shallower(indent), "}")
