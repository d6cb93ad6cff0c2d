"""The decomposition table braze hands to AOTAutograd.

Takes: nothing. Gives: ``table()``, a dict from ATen overload to a Python
decomposition: PyTorch's core-ATen table, plus decompositions of the fused ops
braze wants to see through (softmax, layer/batch/group norm and their
backwards), minus scaled-dot-product attention, which runs through ATen's fused
kernels: the core table's math decomposition of causal SDPA gave wrong gradients
on torch 2.11 to 2.13.
"""
from __future__ import annotations

import functools

import torch
import torch._decomp as decomp

aten = torch.ops.aten

# Fused ops whose parts braze fuses better than ATen's single kernel.
DECOMPOSE = [
    aten._softmax, aten._log_softmax, aten._softmax_backward_data, aten._log_softmax_backward_data,
    aten.native_layer_norm, aten.native_layer_norm_backward,
    aten.native_batch_norm, aten._native_batch_norm_legit, aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training, aten.native_batch_norm_backward,
    aten.native_group_norm, aten.native_group_norm_backward,
    aten.gelu_backward, aten.silu, aten.silu_backward, aten.embedding,
    aten.mse_loss, aten.mse_loss_backward, aten.addcmul, aten.addcdiv, aten.lerp,
]

# Ops kept whole: ATen's fused attention kernels are faster and their gradients right.
KEEP = [
    aten.scaled_dot_product_attention, aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
    aten._scaled_dot_product_attention_math, aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_flash_attention,
]


@functools.lru_cache(maxsize=1)
def table() -> dict:
    result = dict(decomp.core_aten_decompositions())
    result.update(decomp.get_decompositions(DECOMPOSE))
    keep = set()
    for packet in KEEP:
        keep.update(getattr(packet, name) for name in packet.overloads())
    return {op: fn for op, fn in result.items() if op not in keep}
