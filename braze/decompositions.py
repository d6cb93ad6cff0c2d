"""The decomposition table braze hands to AOTAutograd.

Takes: whether random ops stay in ATen. Gives: ``table(fallback_random)``, a dict from ATen overload to a Python
decomposition: PyTorch's core-ATen table, plus decompositions of the fused ops
braze wants to see through (softmax, layer/batch/group norm and their
backwards), minus scaled-dot-product attention, which runs through ATen's fused
kernels: the core table's math decomposition of causal SDPA gave wrong gradients
on torch 2.11 to 2.13. Decompositions that disagree with eager or cost more than
braze's own are replaced (``REPLACE``: integer ``linspace``; on the CPU, GELU's
derivative with one exp). Training dropout becomes a float32 uniform compared with ``1 - p`` (``braze.lower.random`` draws it in the kernel), unless
``config.fallback_random`` keeps ATen's ``native_dropout`` and eager's numbers.
"""
from __future__ import annotations

import functools
import math

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


def _linspace(start, end, steps, *, dtype=None, layout=torch.strided, device=None, pin_memory=False,
              requires_grad=False):
    """``linspace`` as eager computes it for integer dtypes: start and end truncated to
    integers first, then ``start + step * i`` (first half) or ``end - step * (steps - 1 - i)``
    in double, truncated. PyTorch's reference skips the first truncation and works in
    float32 (``linspace(4.3, -3, 50, dtype=torch.int64)[1]`` is 4 there, 3 in eager)."""
    integral = dtype is not None and not (dtype.is_floating_point or dtype.is_complex or dtype is torch.bool)
    if not integral or steps < 2:
        return torch._refs.linspace(start, end, steps, dtype=dtype, layout=layout, device=device,
                                    pin_memory=pin_memory, requires_grad=requires_grad)

    def truncated(value):
        if isinstance(value, torch.Tensor):
            return value.to(torch.float64).trunc()
        return float(math.trunc(value))
    first, last = truncated(start), truncated(end)
    step = (last - first) / (steps - 1)
    i = torch.arange(steps, dtype=torch.float64, device=device)
    out = torch.where(i < steps // 2, first + step * i, last - step * (steps - 1 - i))
    return out.to(dtype)


# Abramowitz and Stegun 7.1.26: erf(z) = 1 - t * P(t) * exp(-z^2), t = 1 / (1 + p z), z >= 0,
# |error| <= 1.5e-7. ATen's CPU GELU kernels compute erf with this formula.
_AS_P = 0.3275911
_AS_POLY = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
_TORCH_GELU_BACKWARD = decomp.decomposition_table[aten.gelu_backward.default]


def _gelu_backward(grad, self, approximate="none"):
    """GELU's derivative ``Phi(x) + x phi(x)`` on the CPU with one exp instead of an exp and
    an erf: ``e = exp(-x^2 / 2)`` is both the density's exponential and the ``exp(-z^2)`` of
    the erf formula above at ``z = |x| / sqrt(2)``, which is ATen's own CPU formula, so
    results agree with eager's kernel. (An erf costs as much as an exp in a fused C++ loop.)
    The tanh form, float64 and GPU tensors keep PyTorch's decomposition (exact erf)."""
    if approximate != "none" or self.device.type != "cpu" or torch.float64 in (grad.dtype, self.dtype):
        return _TORCH_GELU_BACKWARD(grad, self, approximate)
    out_dtype = torch.promote_types(grad.dtype, self.dtype)
    x, g = self.to(torch.float32), grad.to(torch.float32)
    e = torch.exp(x * x * -0.5)
    t = (x.abs() * (_AS_P * math.sqrt(0.5)) + 1.0).reciprocal()
    poly = _AS_POLY[0]
    for coefficient in _AS_POLY[1:]:
        poly = poly * t + coefficient
    half_tail = t * poly * e * 0.5                      # (1 - erf(|x| / sqrt(2))) / 2
    cdf = torch.where(x >= 0, 1.0 - half_tail, half_tail)
    pdf = e * (1.0 / math.sqrt(2.0 * math.pi))
    return (g * (cdf + x * pdf)).to(out_dtype)


_TORCH_NORM_BACKWARD = {op: decomp.decomposition_table[op.default] for op in (
    aten.native_layer_norm_backward, aten.native_group_norm_backward, aten.native_batch_norm_backward)}
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _as_stored(input, *stats):
    """``input`` rounded to its own dtype where the normalization's statistics were: on the
    CPU, eager's layer, group and batch norms save mean and rstd in a bf16/fp16 input's
    dtype. braze keeps a bf16/fp16 value computed in the same kernel in float32, so a
    backward that recomputes its input would subtract the rounded mean from the unrounded
    input: for a row of one element (``layer_norm(x, (1,))``), whose mean is the element
    itself, ``x - mean`` is x's rounding error, not 0, amplified by ``rstd = 1 / sqrt(eps)``
    (an input gradient of -21 where eager's is 0). Rounded input and rounded statistics,
    as in eager, give ``x - mean`` as eager does. (Explicit casts round in braze; the first
    ``to`` only reads the value.)"""
    if input.dtype in _LOW_PRECISION and any(isinstance(s, torch.Tensor) and s.dtype in _LOW_PRECISION
                                             for s in stats):
        return input.to(torch.float32).to(input.dtype)
    return input


def _layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    return _TORCH_NORM_BACKWARD[aten.native_layer_norm_backward](
        grad_out, _as_stored(input, mean, rstd), normalized_shape, mean, rstd, weight, bias, output_mask)


def _group_norm_backward(grad_output, input, mean, rstd, gamma, N, C, HxW, group, output_mask):
    return _TORCH_NORM_BACKWARD[aten.native_group_norm_backward](
        grad_output, _as_stored(input, mean, rstd), mean, rstd, gamma, N, C, HxW, group, output_mask)


def _batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
                         output_mask):
    stats = (save_mean, save_invstd) if train else (running_mean, running_var)
    return _TORCH_NORM_BACKWARD[aten.native_batch_norm_backward](
        grad_out, _as_stored(input, *stats), weight, running_mean, running_var, save_mean, save_invstd, train,
        eps, output_mask)


# Decompositions braze replaces: PyTorch's disagree with eager, or cost more than braze's.
REPLACE = {aten.linspace: _linspace, aten.gelu_backward: _gelu_backward,
           aten.native_layer_norm_backward: _layer_norm_backward,
           aten.native_group_norm_backward: _group_norm_backward,
           aten.native_batch_norm_backward: _batch_norm_backward}


def _native_dropout(input, p, train):
    """Training dropout as eager's CUDA kernel computes it: keep where a float32 uniform is
    below ``1 - p``, scale by ``1 / (1 - p)``. (PyTorch's decomposition draws the uniform in
    the input's dtype: on bfloat16's grid of 1/256 steps, p = 0.1 keeps 230/256 = 89.8 %.)"""
    if not train or p == 0 or p == 1 or not input.dtype.is_floating_point:
        return decomp.decomposition_table[aten.native_dropout.default](input, p, train)
    keep = torch.rand(input.shape, dtype=torch.float32, device=input.device) < 1.0 - p
    return input * keep * (1.0 / (1.0 - p)), keep


# Overloads braze lowers itself: ``std`` takes the square root of its unrounded variance,
# accumulated as eager's (``lower/reductions.py``), where ``sqrt(var(x))`` would round first;
# ``select_scatter`` copied back into an input writes only the select (``lower/scatter.py``),
# where the core table's ``where`` over all of the input passes over all of it.
LOWERED = [aten.std.correction, aten.std_mean.correction, aten.select_scatter.default]


@functools.lru_cache(maxsize=2)
def table(fallback_random: bool = False) -> dict:
    """The table; ``fallback_random`` leaves dropout to ATen's kernel."""
    result = dict(decomp.core_aten_decompositions())
    result.update(decomp.get_decompositions(DECOMPOSE))
    if not fallback_random:
        result[aten.native_dropout.default] = _native_dropout
    for packet, fn in REPLACE.items():
        result.update({getattr(packet, name): fn for name in packet.overloads() if "out" not in name})
    keep = set()
    for packet in KEEP:
        keep.update(getattr(packet, name) for name in packet.overloads())
    keep.update(LOWERED)
    return {op: fn for op, fn in result.items() if op not in keep}
