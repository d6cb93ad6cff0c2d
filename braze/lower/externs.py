"""Ops that braze hands to ATen on purpose (matrix products, convolutions,
attention), and ``copy_`` into graph inputs.

Takes: lowered arguments. Gives: ``ExternNode``s (not counted as fallbacks), and
for ``copy_`` a compute node that writes the new value into the input's storage.
"""
from __future__ import annotations

import torch

from braze.ir.expr import Op
from braze.ir.graph import ComputeNode, InputNode, out_vars
from braze.lower.core import Unsupported, register
from braze.lower.pointwise import convert

aten = torch.ops.aten

EXTERNS = [
    aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
    aten.addmv.default, aten.addbmm.default,
    aten.convolution.default, aten.convolution_backward.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_efficient_attention_backward.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_flash_attention_backward.default,
    aten._scaled_dot_product_cudnn_attention.default,
    aten._scaled_dot_product_cudnn_attention_backward.default,
]


def _extern_rule(ctx, *args, **kwargs):
    return ctx.extern(ctx.node.target, args, kwargs, fallback=False)


for _op in EXTERNS:
    register(_op)(_extern_rule)


@register(aten.copy_.default)
def _copy_(ctx, dst, src, non_blocking=False):
    """``copy_`` into a graph input (AOTAutograd's input mutations): a node that
    writes the new value into the input's storage. Returns the new value."""
    e = dst.expr
    if e.op is not Op.LOAD or e.args != out_vars(dst.sizes):
        raise Unsupported("copy_ into a view")
    target = ctx.graph.producer(e.arg)
    if not isinstance(target, InputNode) or target.constant is not None:
        raise Unsupported("copy_ into a non-input")
    value = convert(ctx, src, dst.dtype, dst.sizes)
    ctx.graph.add(ComputeNode(ctx.fresh(), dst.dtype, dst.sizes, ["aten.copy_.default"], body=value.expr,
                              layout=target.layout, mutates=e.arg, pinned="writes a graph input"))
    return value
