"""C++ for the two kernel shapes whose elements depend on order: scatters and scans.

Takes: a ``CppKernel`` (``braze.codegen.cpp.kernel``) whose plan holds one scatter
node or one scan node. Gives: the statements of its body, appended to the kernel.

- ``emit_scatter``: one thread, in index order, so an accumulating scatter adds
  as eager's CPU kernels do (the same rounding for the same indices); the
  innermost loop is SIMD where each of its steps stores to its own element (a
  row of an embedding's gradient), else scalar.
- ``emit_scan``: rows in parallel; each row in blocks of ``SCAN_BLOCK``: the
  block's values first, in a SIMD loop (an ``exp`` before a cumsum vectorizes),
  then folded in order into the running value, kept in double for float32 as
  eager's CPU kernels keep it.
"""
from __future__ import annotations

import torch

from braze.codegen.cpp.exprs import convert, ctype
from braze.ir import simplify as S
from braze.ir.expr import Expr, Op, binary, cast

SCAN_BLOCK = 256  # elements of a row a scan computes (vectorized) before folding them in order


def emit_scatter(k) -> None:
    plan = k.plan
    inner = k._open_loops(plan.outer[:-1], "  ")
    if plan.outer and _distinct_stores(plan, plan.outer[-1]):
        k._emit(inner, "#pragma omp simd")
    inner = k._open_loops(plan.outer[-1:], inner)
    k._emit(inner, "{")
    printer = k._printer(inner + "  ")
    for m in plan.members:
        value = m.value
        if m.node.accumulates:
            old = Expr(Op.LOAD, m.node.dtype, (m.store,), m.target)
            value = binary(Op.ADD, cast(old, value.dtype), value)
        k._compute(m, printer, inner + "  ", exprs=(value, m.store))
    k._emit(inner, "}")
    k._close_loops(len(plan.outer), inner)


def _distinct_stores(plan, v) -> bool:
    """Does each step of loop ``v`` store to its own element (``v`` in the positions
    linearly, not through a loaded index), so that its steps may run as SIMD lanes?"""
    return all(S.coefficient(m.store, v) not in (None, 0) for m in plan.members)


def emit_scan(k) -> None:
    plan, m = k.plan, k.plan.scan
    prod = m.node.body.arg[0] == "prod"
    acc = torch.float64 if m.value.dtype is torch.float32 else m.value.dtype
    r = plan.reduce[0]
    block = min(SCAN_BLOCK, r.size)
    if plan.outer:
        k._emit("  ", k._parallel(len(plan.outer)))
    inner = k._open_loops(plan.outer, "  ")
    row, step = inner + "  ", inner + "      "
    k._emit(inner, "{")
    k._emit(row, f"{ctype(acc)} running = {1 if prod else 0};")
    k._emit(row, f"for (int64_t rb = 0; rb < {r.size}; rb += {block}) {{")
    k._emit(row, f"  const int64_t len = {r.size} - rb < {block} ? {r.size} - rb : {block};")
    k._emit(row, f"  {ctype(m.value.dtype)} vals[{block}];")
    k._emit(row, "  #pragma omp simd")
    printer = _block_loop(k, row, step, r)
    k._emit(step, f"vals[l] = {printer(m.value)};")
    k._emit(row, "  }")
    printer = _block_loop(k, row, step, r)
    k._emit(step, f"running = running {'*' if prod else '+'} {convert('vals[l]', m.value.dtype, acc)};")
    k._emit(step, f"{m.target}[{printer(m.store)}] = {convert('running', acc, m.node.dtype)};")
    k._emit(row, "  }")
    k._emit(row, "}")
    k._emit(inner, "}")
    k._close_loops(len(plan.outer), inner)


def _block_loop(k, row: str, step: str, r):
    """Open a loop over the block's elements (``r`` = ``rb + l``); a printer for its body."""
    k._emit(row, "  for (int64_t l = 0; l < len; l++) {")
    k._emit(step, f"const int64_t {r.name} = rb + l;")
    return k._printer(step)
