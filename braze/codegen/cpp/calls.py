"""Vector math calls: their vector width, and a row kernel's calls in loops of their own.

Takes: a kernel plan; a ``CppKernel`` (shape ``row`` or ``split``), the expressions one
reduce loop computes and its lane variable. Gives: ``width_attribute``, the function
attribute that makes GCC call libmvec's widest variants in a kernel that calls any
(knob ``cpp_math_vector_bits``); ``BlockCalls``: emits, at the head of each
block of lanes, one ``omp simd`` loop that computes the arguments of the block's
glibc vector-math calls (``expf``, ``erff``, ...) into scratch arrays and one that
calls them; the block's main loop then reads the results (``memo``).

Why: libmvec's functions follow the vector ABI, which saves no vector register
across a call. In a loop body that keeps many values live around the call (GELU's
derivative inside a LayerNorm backward: the gradient, the normalized input, the
partial sums), GCC spills and reloads them around every call. In a loop of their
own, the calls see only their argument and result (timings: docs/benchmarks.md,
"CPU kernels").

Why the width: on an AVX-512 CPU whose tuning prefers 256-bit vectors (GCC's for recent
Intel Xeons) GCC calls libmvec's 8-lane AVX2 variants, and 4-lane SSE ones in a loop's
tail; the AVX-512 variants take 16 lanes a call. Kernels without such calls keep the
tuning: 512-bit vectors made bf16 LayerNorm kernels 6-16 % slower there ("CPU servers and
vector ISAs" in docs/benchmarks.md).

Only where the main loop needs part of an argument as well (GELU's input, whose
square goes to ``expf``): that part is kept from the arguments loop in a scratch
array. Where nothing but the call's result is live across it (softmax's
``exp(x - max)``, summed and kept), the loops of their own only add scratch traffic
(a softmax was slower with them). Only calls whose argument holds no other
call are moved (a call of a call stays in the main loop), and only calls that depend
on the lane variable: the others are computed once per row already.

The arguments loop runs at the head of the block, before the main loop, so it can
read only what is ready there: loads, the lane and row variables, ``known`` values,
and the results of members finished before the loop. A call whose argument reads the
value of a member the same loop computes (``VALUE`` of a buffer fused into the loop
and also stored, such as a LayerNorm output that a ``where`` then reads) stays in the
main loop (``pending``: the names of those members).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from braze import config
from braze.codegen.cpp.exprs import FLOAT_FUNCS, ctype, value_op
from braze.codegen.cpp.prelude import VECTOR_MATH
from braze.ir.expr import Expr, Op, free_vars, search, walk

if TYPE_CHECKING:
    from braze.codegen.cpp.kernel import CppKernel

LIBRARY_CALLS = frozenset(op for op, name in FLOAT_FUNCS.items() if name in VECTOR_MATH)


def width_attribute(plan) -> str:
    """``__attribute__((target("prefer-vector-width=N")))`` and a space where ``plan``
    (or a part of a foreach plan) calls a vector-math function; else ""."""
    bits = config.cpp_math_vector_bits
    plans = plan.parts if plan.is_foreach else [plan]
    if bits and any(_calls_math(n) for p in plans for e in p.expressions() for n in walk(e)):
        return f'__attribute__((target("prefer-vector-width={bits}"))) '
    return ""


def _calls_math(e: Expr) -> bool:
    """A library call, or a prelude helper that makes one (``b_sigmoid``: expf; a normal
    draw: logf and cosf)."""
    return (e.op in LIBRARY_CALLS or e.op is Op.SIGMOID or (e.op is Op.RANDOM and e.arg == "randn")) \
        and e.dtype in (torch.float32, torch.float64)


def _is_call(e: Expr, lane_var) -> bool:
    return (e.op in LIBRARY_CALLS and e.dtype in (torch.float32, torch.float64)
            and lane_var in free_vars(e))


def block_calls(kernel: CppKernel, exprs: list, known: dict, lanes: int, lane_var,
                pending: frozenset = frozenset()) -> BlockCalls | None:
    """The block's calls to move out of ``exprs``, or None where none would pay off.
    ``known``: id -> name of what the block reads ready-made (a value an earlier loop
    kept): its calls are not the block's. ``pending``: names of the members the block's
    main loop computes; a call whose argument reads one (``VALUE``) is not moved."""
    computed = search(exprs, lambda e: [] if id(e) in known else e.args)
    calls = [e for e in computed if id(e) not in known and _is_call(e, lane_var)
             and not any(_is_call(n, lane_var) for a in e.args for n in walk(a))
             and _ready(e.args, known, pending)]
    shared = shared_operands(calls, exprs, known, lane_var) if calls else []
    return BlockCalls(kernel, calls, shared, lanes, lane_var) if shared else None


def _ready(args, known: dict, pending: frozenset) -> bool:
    """Can the head of the block compute ``args``: do they read no value of ``pending``
    (outside of what is ``known``)?"""
    reached = search(args, lambda e: [] if id(e) in known else e.args)
    return not any(e.op is Op.VALUE and e.arg in pending for e in reached if id(e) not in known)


def shared_operands(calls: list, exprs: list, known: dict, lane_var) -> list:
    """The largest parts of the calls' arguments that the main loop also needs (GELU's
    input, whose square goes to ``expf``): kept from the arguments loop, not computed
    twice. A bare load is read again instead."""
    moved = {id(c) for c in calls}
    used = {id(n) for n in search(exprs, lambda e: [] if id(e) in moved or id(e) in known else e.args)}
    found = search([a for c in calls for a in c.args], lambda e: [] if id(e) in used else e.args)
    return [e for e in found if id(e) in used and e.op not in (Op.LOAD, Op.CONST, Op.VAR)
            and lane_var in free_vars(e)]


class BlockCalls:
    def __init__(self, kernel: CppKernel, calls: list, shared: list, lanes: int, lane_var):
        self.kernel, self.calls, self.shared, self.lanes, self.lane_var = kernel, calls, shared, lanes, lane_var
        self.names = [kernel.array_name("c") for _ in calls]
        self.shared_names = [kernel.array_name("c") for _ in self.shared]

    def emit_head(self, indent: str, preset: dict) -> None:
        """The arguments loop and the calls loop of one block; ``preset``: what the
        block's printer may read (row invariants, values kept by earlier loops)."""
        k, n = self.kernel, self.lanes
        em = k.emitter
        body = em.deeper(indent)
        for call, name in zip(self.calls, self.names):
            t = ctype(call.dtype)
            em.emit(indent, f"{t} {name}[{n}];")
            for j in range(len(call.args)):
                em.emit(indent, f"{ctype(call.args[j].dtype)} {name}_{j}[{n}];")
        for e, name in zip(self.shared, self.shared_names):
            em.emit(indent, f"{ctype(e.dtype)} {name}[{n}];")
        em.emit(indent, "#pragma omp simd")
        em.emit(indent, f"for (int64_t l = 0; l < {n}; l++) {{")
        em.emit(body, f"const int64_t {self.lane_var.name} = rb + l;")
        printer = k.printer(body)
        printer.memo.update(preset)
        for e, name in zip(self.shared, self.shared_names):
            em.emit(body, f"{name}[l] = {printer(e)};")
        for call, name in zip(self.calls, self.names):
            for j, a in enumerate(call.args):
                em.emit(body, f"{name}_{j}[l] = {printer(a)};")
        em.emit(indent, "}")
        lanes = min(n, config.cpp_call_lanes)
        em.emit(indent, f"#pragma omp simd simdlen({lanes})" if lanes else "#pragma omp simd")
        em.emit(indent, f"for (int64_t l = 0; l < {n}; l++) {{")
        for call, name in zip(self.calls, self.names):
            args = [f"{name}_{j}[l]" for j in range(len(call.args))]
            em.emit(body, f"{name}[l] = {value_op(call.op, call.args[0].dtype, args, call.dtype)};")
        em.emit(indent, "}")

    def memo(self) -> dict:
        """id(call or shared operand) -> its value in the block's main loop."""
        pairs = list(zip(self.calls, self.names)) + list(zip(self.shared, self.shared_names))
        return {id(e): f"{name}[l]" for e, name in pairs}
