"""Lowering rules for cumulative ops: ``cumsum`` and ``cumprod``.

Takes: a ``TensorValue``, a dimension and an optional result dtype. Gives: a scan
node (``braze.ir.graph``): element ``k`` along ``dim`` folds the input at ``0..k``.
The input's expression is inlined into it; like a scatter, it fuses with no other
kernel. A scan along a dimension of one element is the input itself (a pointwise
node). C++ walks each row in order with the running value in double for float32,
as eager's CPU kernels do; Triton scans ``[XBLOCK, RBLOCK]`` chunks and carries
the running value from chunk to chunk. On a GPU that is one program per block of
rows, so a few long rows leave the device idle: the target says which scans are worth a
kernel (``Target.scans_rows``), the others run through ATen's device-wide scan.
"""
from __future__ import annotations

import torch

from braze.ir import dtypes
from braze.ir.expr import cast, scan
from braze.lower.core import Unsupported, register, sizes_of
from braze.lower.pointwise import finish
from braze.lower.views import norm_dim

aten = torch.ops.aten

COMBINES = {aten.cumsum.default: "sum", aten.cumprod.default: "prod"}


@register(aten.cumsum.default, aten.cumprod.default)
def _cumulative(ctx, x, dim, dtype=None):
    out_dtype, sizes = ctx.out.dtype, sizes_of(ctx.out)
    if not dtypes.is_supported(out_dtype):
        raise Unsupported(f"cumulative op into {out_dtype}")
    value = cast(x.expr, dtypes.compute_dtype(out_dtype))
    dim = norm_dim(dim, x.ndim)
    if x.ndim == 0 or sizes[dim] == 1 or x.numel == 0:
        return finish(ctx, value, out_dtype, sizes)
    rows = x.numel // sizes[dim]
    if not ctx.graph.target.scans_rows(rows, sizes[dim]):
        raise Unsupported(f"a scan of {rows} rows of {sizes[dim]} on {ctx.graph.target.name} "
                          "(ATen's device-wide scan is faster)")
    result = ctx.compute(out_dtype, sizes, scan(value, COMBINES[ctx.node.target], dim))
    ctx.pin(result.expr.arg, f"a cumulative {COMBINES[ctx.node.target]}")
    return result
