"""C++ for scan kernels, whose elements depend on order (scatters: ``scatter``).

Takes: a ``CppKernel`` (``braze.codegen.cpp.kernel``) whose plan holds one scan node.
Gives: the statements of its body, appended to the kernel.

- ``emit_scan``: rows in parallel; each row in blocks of ``SCAN_BLOCK``: the
  block's values first, in a SIMD loop (an ``exp`` before a cumsum vectorizes),
  then folded in order into the running value, kept in double for float32 as
  eager's CPU kernels keep it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from braze.codegen.cpp.exprs import CPrinter, convert, ctype

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel

SCAN_BLOCK = 256  # elements of a row a scan computes (vectorized) before folding them in order


def emit_scan(kernel: CppKernel) -> None:
    em = kernel.emitter
    plan, m = kernel.plan, kernel.plan.scan
    prod = m.node.body.arg[0] == "prod"
    acc = torch.float64 if m.value.dtype is torch.float32 else m.value.dtype
    r = plan.reduce[0]
    block = min(SCAN_BLOCK, r.size)
    if plan.outer:
        em.emit("  ", kernel.parallel(len(plan.outer)))
    inner = kernel.open_loops(plan.outer, "  ")
    row, step = em.deeper(inner), em.deeper(inner, 3)
    em.emit(inner, "{")
    em.emit(row, f"{ctype(acc)} running = {1 if prod else 0};")
    em.emit(row, f"for (int64_t rb = 0; rb < {r.size}; rb += {block}) {{")
    em.emit(row, f"  const int64_t len = {r.size} - rb < {block} ? {r.size} - rb : {block};")
    em.emit(row, f"  {ctype(m.value.dtype)} vals[{block}];")
    em.emit(row, "  #pragma omp simd")
    printer = _block_loop(kernel, row, step, r)
    em.emit(step, f"vals[l] = {printer(m.value)};")
    em.emit(row, "  }")
    printer = _block_loop(kernel, row, step, r)
    em.emit(step, f"running = running {'*' if prod else '+'} {convert('vals[l]', m.value.dtype, acc)};")
    em.emit(step, f"{m.target}[{printer(m.store)}] = {convert('running', acc, m.node.dtype)};")
    em.emit(row, "  }")
    em.emit(row, "}")
    em.emit(inner, "}")
    kernel.close_loops(len(plan.outer), inner)


def _block_loop(kernel: CppKernel, row: str, step: str, r) -> CPrinter:
    """Open a loop over the block's elements (``r`` = ``rb + l``); a printer for its body."""
    em = kernel.emitter
    em.emit(row, "  for (int64_t l = 0; l < len; l++) {")
    em.emit(step, f"const int64_t {r.name} = rb + l;")
    return kernel.printer(step)
