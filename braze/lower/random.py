"""Lowering rules for random numbers: ``rand``, ``randn``, ``randint`` (and their ``_like`` forms),
``bernoulli`` with a probability, ``uniform``, ``normal``, ``exponential``; dropout
reaches them through the decomposition in ``braze.decompositions``.

Takes: the op's sizes and dtype. Gives: compute nodes whose bodies compute their
random numbers in the kernel (``ir.expr.random``: Philox4x32-10 in Triton and
the same generator in C++), so a dropout mask is fused with what reads it instead
of splitting the kernel around an ATen call.

Each compiled call draws one int64 seed from torch's generator for the graph's
device (an extern ``randint``, so ``torch.manual_seed`` makes runs repeat). Numbers
are counted in Philox words (four per counter; a uniform takes one, a normal two):
the graph's ``k``-th random tensor starts at word ``base_k``, the words of the
tensors before it rounded up to a whole counter, so no two elements of a call share
a word and each tensor's first element starts a counter. The numbers are not
eager's (eager's generators are not reproducible inside a kernel):
``config.fallback_random`` runs these ops through ATen instead, which then matches
eager bit for bit from the same seed.

Low-precision results are uniform on the dtype's grid, ``floor(u * 2^d) / 2^d`` with
``d`` the dtype's mantissa digits, as eager draws them: rounding a float32 uniform
to bfloat16 would give 1.0 for ``u`` near 1.
"""
from __future__ import annotations

import math

import torch

from braze import config
from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir import traced
from braze.ir.expr import (COUNTER_WORDS, RANDOM_WORDS, Expr, Op, binary, cast, const, index, load, random, unary,
                            where)
from braze.ir.graph import out_vars
from braze.lower.core import TensorValue, Unsupported, register, sizes_of
from braze.lower.pointwise import as_expr, finish

aten = torch.ops.aten

SEED_HIGH = 2 ** 63 - 1  # seeds are drawn from [0, SEED_HIGH)
_DIGITS = {torch.bfloat16: 8, torch.float16: 11}  # mantissa digits eager's uniform keeps


def _seed(ctx) -> Expr:
    """This call's seed: an int64 drawn once per call by an extern ``randint``."""
    if ctx.random_seed is None:
        meta = torch.empty(1, dtype=torch.int64, device="meta")
        seeds = ctx.extern(aten.randint.low, (0, SEED_HIGH, [1]),
                           {"dtype": torch.int64, "device": ctx.graph.device}, meta=meta)
        ctx.random_seed = load(seeds.expr.arg, (index(0),), torch.int64)
    return ctx.random_seed


def random_values(ctx, kind: str, sizes) -> Expr:
    """``kind`` numbers over ``sizes`` (float32), element ``i`` in row-major order drawing
    the ``i``-th number of ``kind`` from word ``base`` on (``base`` a whole counter)."""
    sizes = tuple(traced.concrete(s) for s in sizes)
    if config.fallback_random:
        raise Unsupported("fallback_random is on")
    seed = _seed(ctx)
    flat = cast(S.ravel(out_vars(sizes), sizes), torch.int64)
    base = -(-ctx.random_offset // COUNTER_WORDS) * COUNTER_WORDS
    ctx.random_offset = base + math.prod(sizes) * RANDOM_WORDS[kind]
    first = base // RANDOM_WORDS[kind]
    offset = binary(Op.ADD, flat, const(first, torch.int64)) if first else flat
    return random(seed, offset, kind)


def _result(ctx) -> tuple:
    """The op's result dtype and sizes; float64 keeps ATen's 53 random bits (ours have 24)."""
    out = ctx.out
    if out.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise Unsupported(f"random numbers of dtype {out.dtype}")
    return out.dtype, sizes_of(out)


def _on_grid(u: Expr, dtype) -> Expr:
    """``u`` in [0, 1) rounded down to a multiple of 2^-digits of ``dtype`` (exact there)."""
    digits = _DIGITS.get(dtype)
    if digits is None:
        return u
    scale = float(2 ** digits)
    return binary(Op.MUL, unary(Op.FLOOR, binary(Op.MUL, u, const(scale, torch.float32))),
                  const(1.0 / scale, torch.float32))


def _generator_free(kwargs) -> None:
    if kwargs.get("generator") is not None:
        raise Unsupported("an explicit generator")


@register(aten.rand.default, aten.rand_like.default)
def _rand(ctx, *args, **kwargs):
    _generator_free(kwargs)
    dtype, sizes = _result(ctx)
    return finish(ctx, _on_grid(random_values(ctx, "rand", sizes), dtype), dtype, sizes)


@register(aten.randn.default, aten.randn_like.default)
def _randn(ctx, *args, **kwargs):
    _generator_free(kwargs)
    dtype, sizes = _result(ctx)
    return finish(ctx, random_values(ctx, "randn", sizes), dtype, sizes)


@register(aten.randint.default, aten.randint.low, aten.randint_like.default, aten.randint_like.low_dtype)
def _randint(ctx, *args, **kwargs):
    """``low + word % (high - low)`` with a 32-bit word, as eager's CUDA generator forms
    integers below 2^32 apart (wider ranges take 64 bits there: through ATen here)."""
    _generator_free(kwargs)
    low, high = _bounds(ctx.node.target, args)
    out = ctx.out
    if out.dtype is torch.bool or not 0 < high - low <= 2 ** 32:
        raise Unsupported(f"randint from {low} to {high} of dtype {out.dtype}")
    sizes = sizes_of(out)
    drawn = binary(Op.MOD, random_values(ctx, "bits", sizes), const(high - low, torch.int64))
    value = binary(Op.ADD, drawn, const(low, torch.int64)) if low else drawn
    return finish(ctx, cast(value, dtypes.compute_dtype(out.dtype)), out.dtype, sizes)


def _bounds(target, args) -> tuple:
    """(low, high) of a randint call: ``(high, size)``, ``(low, high, size)``, ``(x, high)``,
    ``(x, low, high)``."""
    if target in (aten.randint.default, aten.randint_like.default):
        return 0, int(args[1] if target == aten.randint_like.default else args[0])
    first = 1 if target == aten.randint_like.low_dtype else 0
    return int(args[first]), int(args[first + 1])


@register(aten.bernoulli.p)
def _bernoulli(ctx, x, p=0.5, **kwargs):
    """1 with probability ``p``: a float32 uniform below ``p`` (eager's comparison)."""
    _generator_free(kwargs)
    if not dtypes.is_float(x.dtype) and x.dtype is not torch.bool and x.dtype not in dtypes.INTEGERS:
        raise Unsupported(f"bernoulli of dtype {x.dtype}")
    hit = binary(Op.LT, random_values(ctx, "rand", x.sizes), const(float(p), torch.float32))
    return finish(ctx, cast(hit, dtypes.compute_dtype(x.dtype)), x.dtype, x.sizes)


@register(aten.uniform.default)
def _uniform(ctx, x, low=0.0, high=1.0, **kwargs):
    """``low + (high - low) * u``, ``u`` uniform in [0, 1) on the dtype's grid."""
    _generator_free(kwargs)
    dtype, sizes = _result(ctx)
    u = _on_grid(random_values(ctx, "rand", sizes), dtype)
    span = binary(Op.MUL, u, const(float(high) - float(low), torch.float32))
    return finish(ctx, binary(Op.ADD, span, const(float(low), torch.float32)), dtype, sizes)


def _normal_of(ctx, mean, std) -> TensorValue:
    """``mean + std * z``, ``z`` standard normal, over the op's result (means and deviations
    broadcast, tensors or numbers)."""
    dtype, sizes = _result(ctx)
    z = random_values(ctx, "randn", sizes)
    spread = binary(Op.MUL, as_expr(std, sizes, torch.float32), z)
    return finish(ctx, binary(Op.ADD, as_expr(mean, sizes, torch.float32), spread), dtype, sizes)


@register(aten.normal.Tensor_Tensor, aten.normal.Tensor_float, aten.normal.float_Tensor)
def _normal(ctx, mean=0.0, std=1.0, **kwargs):
    _generator_free(kwargs)
    return _normal_of(ctx, mean, std)


@register(aten.normal.float_float)
def _normal_sized(ctx, mean, std, size, **kwargs):
    _generator_free(kwargs)
    return _normal_of(ctx, mean, std)


@register(aten.normal_functional.default)
def _normal_functional(ctx, x, mean=0.0, std=1.0, **kwargs):
    _generator_free(kwargs)
    return _normal_of(ctx, mean, std)


@register(aten.exponential.default)
def _exponential(ctx, x, lambd=1.0, **kwargs):
    """``-log(u) / lambd`` as eager's CUDA transformation: ``u`` within half an epsilon of 1
    takes ``log(u) = -eps / 2``, so no result is 0."""
    _generator_free(kwargs)
    dtype, sizes = _result(ctx)
    u = random_values(ctx, "rand", sizes)
    half_eps = torch.finfo(torch.float32).eps / 2
    log_u = where(binary(Op.GE, u, const(1.0 - half_eps, torch.float32)), const(-half_eps, torch.float32),
                  unary(Op.LOG, u))
    return finish(ctx, binary(Op.MUL, log_u, const(-1.0 / float(lambd), torch.float32)), dtype, sizes)
