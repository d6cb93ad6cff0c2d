"""bf16/fp16 values as eager rounds them, for the lowering rules whose result the
rounding can change.

Takes: ``TensorValue``s of a graph being lowered (a bf16/fp16 intermediate is kept in
float32 inside a kernel and rounded once, when stored) and numbers added to them. Gives:
``eager_rounded`` (a value, and every bf16/fp16 op on its way from stored values, rounded
as eager rounds after each op), ``reads_as_stored`` (a rule decorator that reads all its
tensor operands so) and ``cpu_scalar_rounded`` (a number as eager's CPU ``add``/``sub``
take it). Which rules use them: ``docs/conformance.md``, "bf16 and fp16 intermediates".
"""
from __future__ import annotations

import functools
import weakref

import torch

from braze.ir import dtypes, size_floats
from braze.ir.expr import Expr, Op, cast, loads
from braze.ir.graph import ComputeNode, ExternNode, InputNode
from braze.ir.size_floats import SizeFloat
from braze.lower.core import TensorValue


def eager_rounded(ctx, value):
    """``value`` as eager computes it: a bf16/fp16 intermediate rounded to its dtype, and so
    is every bf16/fp16 op on its way from the last stored values.

    braze keeps such values in float32 inside a kernel (rounding once, when stored), which
    changes nothing a continuous consumer computes but can change what a discontinuous one
    does: ``round(x / 0.05)`` lands on the other integer, a comparison flips (``amin``'s
    backward compares the saved, rounded minimum with the input recomputed in the
    backward), a float16 value past 65504 is not yet infinite. Rules of such consumers read
    their operands through ``reads_as_stored``. A graph input or an ATen result is stored
    already and comes back as it is."""
    if not isinstance(value, TensorValue):
        return value
    expr = value.expr
    if expr.op is Op.LOAD and isinstance(ctx.graph.producer(expr.arg), (InputNode, ExternNode)):
        return value
    _round_each_op(ctx.graph, expr)
    if value.dtype not in dtypes.LOW_PRECISION or \
            expr.op is Op.CAST and expr.arg != "store" and expr.args[0].dtype is torch.float32:
        return value  # not rounded; or rounded already
    # (a stored node's value too: a reader fused into its kernel takes it unrounded,
    # ``fuse/kernel.value_of``; amax's backward compared the rounded maximum with the sum)
    return TensorValue(value.dtype, value.sizes, cast(cast(expr, torch.float32), value.dtype))


_WALKED = weakref.WeakKeyDictionary()  # per graph: the nodes _round_each_op has been through


def _round_each_op(graph, expr: Expr) -> None:
    """Round the result of every bf16/fp16 pointwise node on the way to ``expr`` from the
    last stored values (inputs, ATen results, reductions), through nodes of other dtypes
    (a float32 upcast), as ``low_precision_rounding="every_op"`` would."""
    walked = _WALKED.setdefault(graph, set())
    pending = [ld.arg for ld in loads(expr)]
    while pending:
        name = pending.pop()
        node = graph.producer(name)
        if name in walked or not isinstance(node, ComputeNode) or node.is_reduction or node.is_scatter \
                or node.is_scan:
            continue
        walked.add(name)
        if node.dtype in dtypes.LOW_PRECISION and node.body.dtype is torch.float32:
            node.body = cast(cast(node.body, node.dtype), torch.float32)
        pending.extend(ld.arg for ld in loads(node.body))


def reads_as_stored(rule):
    """``rule`` with its tensor operands rounded as eager stores them (``eager_rounded``)."""
    @functools.wraps(rule)
    def discontinuous(ctx, *args, **kwargs):
        return rule(ctx, *(eager_rounded(ctx, a) for a in args), **kwargs)
    return discontinuous


def cpu_scalar_rounded(ctx, value, alpha):
    """A number added to or subtracted from a bf16/fp16 tensor as eager's CPU kernels take
    it: rounded to the tensor's dtype (``x - 1e-5`` subtracts bf16's 1.0014e-05, ``x + 257``
    adds 256; CUDA's kernels, and CPU ``mul``/``div``, use the number as given)."""
    out = ctx.out
    number = isinstance(value, (int, float, SizeFloat)) and not isinstance(value, bool)
    if alpha != 1 or not number or not isinstance(out, torch.Tensor) or out.device.type != "cpu" \
            or out.dtype not in dtypes.LOW_PRECISION:
        return value
    value = size_floats.plain(value)  # (a float computed from sizes: decided by the call's sizes)
    return torch.tensor(value, dtype=torch.float64).to(out.dtype).item()
