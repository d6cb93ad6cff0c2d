"""The C++/OpenMP target: what the passes may assume when a graph runs as C++ on the CPU.

Takes: the graph's CPU device and ``braze.config`` (threads). Gives: ``CppTarget``
(``braze.target.Target``): threads take whole rows (no programs to fill), scatters write
each element in index order (so they add into any dtype), sums over rows may join a row kernel
(per-thread partials), every scan is worth a kernel, and the op costs inlining weighs.

Op costs. The vector math (glibc's libmvec) costs tens of cheap ops per element; on one
AVX2 core (fp32, in L2), in adds: divide 3, sqrt 6, rsqrt 12, exp/log/sin/cos/atan 21-25,
erf/sigmoid/log1p/tanh/expm1 29-47, pow 140, lgamma/digamma/erfinv (scalar code) 490-1600;
an element written to memory and read back costs about 20. So a buffer holding such an op
that two kernels would each recompute is cheaper stored (an MLP backward's GELU derivative,
read by its row and its column reductions); ``exp(x - max)`` of a softmax, read by one row
kernel that keeps it, stays inlined. A random number (Philox's 10 rounds) counts 25.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from braze import config
from braze.ir.expr import EXPENSIVE, Op
from braze.target import Target

OP_COSTS = {
    **dict.fromkeys(EXPENSIVE, 4), Op.RECIPROCAL: 4, Op.RSQRT: 12,
    **dict.fromkeys((Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.LOG10, Op.SIN, Op.COS, Op.TAN, Op.ASIN,
                     Op.ACOS, Op.ATAN, Op.SINH, Op.COSH, Op.HYPOT), 20),
    **dict.fromkeys((Op.ERF, Op.ERFC, Op.TANH, Op.SIGMOID, Op.EXPM1, Op.LOG1P, Op.ATAN2, Op.ASINH,
                     Op.ACOSH, Op.ATANH), 40),
    **dict.fromkeys((Op.POW, Op.LGAMMA, Op.DIGAMMA, Op.ERFINV), 100),
    Op.RANDOM: 25,  # Philox: 10 rounds of 2 high and 2 low products, 4 xors, 2 adds; by SIMD lanes
}


@dataclass
class CppTarget(Target):
    name: str = "cpp"
    op_costs: dict = field(default_factory=lambda: OP_COSTS)
    column_sums: bool = True
    supports_foreach: bool = True
    takes_sizes: bool = True

    @classmethod
    def for_device(cls, device) -> "CppTarget":
        return cls(device=torch.device(device), threads=config.num_threads or torch.get_num_threads())

    def scatter_adds(self, dtype) -> bool:
        return dtype is not torch.bool  # each element in index order

    def compile(self, plans):
        from braze.codegen.cpp import CppBackend
        return CppBackend().compile(plans)
