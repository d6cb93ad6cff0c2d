"""Ops that braze hands to ATen on purpose (matrix products, convolutions,
attention), and ``copy_`` into graph inputs.

Takes: lowered arguments. Gives: ``ExternNode``s (not counted as fallbacks), and
for ``copy_`` a compute node that writes the new value into the input's storage.
"""
from __future__ import annotations

import torch

from braze import config
from braze.ir.expr import Op
from braze.ir.graph import ComputeNode, InputNode, Layout, out_vars
from braze.lower.core import LOWERINGS, Unsupported, register, sizes_of
from braze.lower.matmul_groups import group_of, lower_member
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


@register(aten.mm.default, aten.addmm.default)  # replaces the plain rule above
def _matmul_rule(ctx, *args, **kwargs):
    """A CUDA matrix product whose rows are not a multiple of 16 bytes long is stored
    with padded rows: cuBLAS then takes an aligned kernel, several times faster on
    GPT-2's 50257-word logits (the wrapper pads the right operand).
    An ``addmm`` whose bias braze's kernels can add is split (``bias_in_kernels``);
    products of one left operand in an inference graph run as one (``matmul_groups``)."""
    group = group_of(ctx, ctx.node)
    if group is not None:
        return lower_member(ctx, group, ctx.node)
    if ctx.node.target is aten.addmm.default and bias_in_kernels(ctx.node):
        bias, mat1, mat2 = args
        product = ctx.extern(aten.mm.default, (mat1, mat2), {}, layout=padded_rows(ctx.out))
        return LOWERINGS[aten.add.Tensor](ctx, product, bias)
    return ctx.extern(ctx.node.target, args, kwargs, layout=padded_rows(ctx.out))


def bias_in_kernels(node) -> bool:
    """Is ``addmm(bias, a, b)`` better as ``mm(a, b) + bias``, the addition inlined into
    the kernels that read the product? So when every reader (through views) is an op
    braze generates code for: the bias then costs no pass of its own, where cuBLAS's
    addmm first copies the bias into the result (CPU) or picks a slower kernel with a
    bias epilogue (fp32 on an H100: BERT's 768-wide projections). Only in float32: in
    bf16 the split made BERT, ViT and GPT-2 inference slightly slower on the GPU and
    would round the product before the bias (docs/benchmarks.md, "Matrix products")."""
    if not config.addmm_bias_in_kernels or node.kwargs.get("alpha", 1) != 1 or node.kwargs.get("beta", 1) != 1:
        return False
    bias = node.args[0]
    if not isinstance(bias, torch.fx.Node) or bias.meta["val"].dim() != 1:
        return False
    if node.meta["val"].dtype != torch.float32:  # bf16/fp16: cuBLAS's bias epilogue is as fast, one rounding
        return False
    return _generated_readers(node)


def _generated_readers(node) -> bool:
    if not node.users:
        return False
    for user in node.users:
        target = user.target
        if user.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            return False
        if target.is_view:
            if not _generated_readers(user):
                return False
        elif target not in LOWERINGS or target in EXTERNS or target is aten.copy_.default:
            return False
    return True


def padded_rows(val) -> Layout | None:
    """The padded layout of a 2-D CUDA product ``val``, or None where it needs none."""
    setting = config.pad_matmul_rows
    wanted = setting == "on" or setting == "auto" and val.device.type == "cuda"
    if not wanted or val.dim() != 2 or any(n <= 1 for n in sizes_of(val)):
        return None
    rows, cols = sizes_of(val)
    per_16_bytes = max(16 // val.dtype.itemsize, 1)
    if cols % per_16_bytes == 0:
        return None
    return Layout((rows, cols), (cols + (-cols) % per_16_bytes, 1), 0)


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
