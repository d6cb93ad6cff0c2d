"""OpInfo sample inputs as the sweep uses them.

Takes: ``SampleInput`` objects. Gives: exact copies of their tensors (same sizes,
strides and storage offset, fresh storage, a leaf with the same requires_grad),
float64 copies for the reference run, seeded cotangents, and a short readable
description (``f32[3, 4] nc, dim=1``) used in the table.
"""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

SHORT = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16", torch.float16: "f16",
         torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
         torch.uint8: "u8", torch.bool: "b8"}


def copy_tensor(t: torch.Tensor, dtype=None) -> torch.Tensor:
    """``t`` on fresh storage with the same layout; a leaf that keeps requires_grad."""
    if t.layout is not torch.strided or t.is_complex() or t.is_quantized:
        out = t.detach().clone()
    else:
        with torch.no_grad():
            storage = t.untyped_storage().clone()
            out = torch.empty(0, dtype=t.dtype, device=t.device)
            out.set_(storage, t.storage_offset(), t.size(), t.stride())
    if dtype is not None and out.dtype.is_floating_point:
        out = out.detach().to(dtype)
    if t.requires_grad and out.dtype.is_floating_point:
        out.requires_grad_(True)
    return out


def copy_sample(sample, dtype=None):
    """(input, args, kwargs) of ``sample`` with every tensor copied. With ``dtype`` (a
    reference run), float tensors and float dtype arguments become ``dtype``."""
    def convert(a):
        if isinstance(a, torch.Tensor):
            return copy_tensor(a, dtype)
        if dtype is not None and isinstance(a, torch.dtype) and a.is_floating_point:
            return dtype
        return a
    return pytree.tree_map(convert, (sample.input, tuple(sample.args), dict(sample.kwargs)))


def grad_inputs(struct) -> list:
    """The tensors of a copied sample that require grad (leaves)."""
    return [a for a in pytree.tree_leaves(struct) if isinstance(a, torch.Tensor) and a.requires_grad]


def grad_outputs(out) -> list:
    """The float outputs that carry a gradient."""
    return [t for t in pytree.tree_leaves(out)
            if isinstance(t, torch.Tensor) and t.requires_grad and t.dtype.is_floating_point]


def cotangents(outputs, seed: int) -> list:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(t.shape, generator=gen).to(t.device, t.dtype) for t in outputs]  # same draws for float64


def describe_value(value) -> str:
    if isinstance(value, torch.Tensor):
        text = f"{SHORT.get(value.dtype, str(value.dtype).replace('torch.', ''))}{list(value.shape)}"
        if value.layout is torch.strided and value.numel() > 1 and not value.is_contiguous():
            text += " nc"
        return text
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe_value(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={describe_value(v)}" for k, v in value.items()) + "}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe(sample) -> str:
    """``f32[3, 4] nc, 2, dim=1``: the sample's input, args and kwargs, briefly."""
    parts = [describe_value(sample.input)] + [describe_value(a) for a in sample.args]
    parts += [f"{k}={describe_value(v)}" for k, v in sample.kwargs.items()]
    return ", ".join(parts)


def has_tensor(struct) -> bool:
    return any(isinstance(a, torch.Tensor) for a in pytree.tree_leaves(struct))


def signature(sample) -> tuple:
    """What a compiled graph depends on: structure, tensor metadata, other arguments.
    Samples with equal signatures differ only in tensor values."""
    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    parts = []
    for a in leaves:
        if isinstance(a, torch.Tensor):
            strided = a.layout is torch.strided
            parts.append(("tensor", tuple(a.shape), a.stride() if strided else str(a.layout), a.dtype,
                          a.requires_grad, a.storage_offset() if strided else 0))
        else:
            parts.append((type(a).__name__, repr(a)))
    return (str(spec), tuple(parts))


def pick_evenly(items: list, cap: int) -> list:
    """At most ``cap`` of ``items``, spread evenly over the list (first and last kept)."""
    if len(items) <= cap:
        return list(items)
    if cap == 1:
        return [items[0]]
    return [items[round(k * (len(items) - 1) / (cap - 1))] for k in range(cap)]
