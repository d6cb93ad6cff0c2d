"""Lowering rules that build or index tensors: ``full``, ``arange``, ``iota``,
``scalar_tensor``; ``cat``, ``constant_pad_nd``, ``slice_scatter`` and
``select_scatter`` (``merged_slice``, ``merged_select``: registered in
``braze.lower.scatter``), ``diagonal_scatter``; ``gather``, ``index_select`` and
``index`` (indirect loads). Scatters at loaded indices: ``braze.lower.scatter``.

Takes: ``TensorValue``s and arguments. Gives: compute nodes whose bodies select
between inputs with ``where`` (cat, pad, scatters) or load at indices read from
another tensor. A load in a branch that is not taken may see an out-of-range
index; code generators clamp every index they cannot prove in range, so such
loads stay inside their buffer.

A loaded index is checked where it is used (``index_from``: ``Op.CHECK``): one outside
``[-size, size)`` makes the kernel report it, and the wrapper raises eager's exception
(``CheckSite``: its type and wording come from the user's op before decompositions). An
index the kernels never read (an element of a gather that only a slice of its result
needs) is not checked. ``config.runtime_checks`` off: indices are wrapped and clamped into their dimension
(unsafe: an index out of range reads or writes another element of the same row, silently).
"""
from __future__ import annotations

import torch

from braze.ir import dtypes
from braze.ir import simplify as S
from braze import config
from braze.ir.expr import Op, binary, cast, checked, const, index, where
from braze.ir.graph import out_vars
from braze.lower.checks import check_site, trusted, wraps_negative
from braze.lower.core import TensorValue, Unsupported, register, sizes_of
from braze.lower.pointwise import broadcast_sizes, expand_to, finish
from braze.lower.views import norm_dim

aten = torch.ops.aten
prims = torch.ops.prims


def _out(ctx):
    out = ctx.out
    return out.dtype, sizes_of(out)


# ----------------------------------------------------------------------------- creation

def filled(ctx, value, dtype, sizes) -> TensorValue:
    if not dtypes.is_supported(dtype):
        raise Unsupported(f"dtype {dtype}")
    if isinstance(value, TensorValue):
        raise Unsupported("fill with a tensor value")
    held = cast(const(value, dtype), dtypes.compute_dtype(dtype))  # bf16's 0.1, in float32
    return finish(ctx, held, dtype, sizes)


@register(aten.full.default, aten.full_like.default)
def _full(ctx, size_or_like, value, **kwargs):
    return filled(ctx, value, *_out(ctx))


@register(aten.new_full.default)
def _new_full(ctx, x, size, value, **kwargs):
    return filled(ctx, value, *_out(ctx))


@register(aten.scalar_tensor.default)
def _scalar_tensor(ctx, value, **kwargs):
    dtype, sizes = _out(ctx)
    return filled(ctx, value, dtype, sizes)


@register(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default,
          aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default,
          aten.empty_strided.default, aten.empty_permuted.default, aten.new_empty_strided.default,
          aten._efficientzerotensor.default)
def _zeros(ctx, *args, **kwargs):
    dtype, sizes = _out(ctx)
    return filled(ctx, 0, dtype, sizes)


@register(aten.ones.default, aten.ones_like.default, aten.new_ones.default)
def _ones(ctx, *args, **kwargs):
    dtype, sizes = _out(ctx)
    return filled(ctx, 1, dtype, sizes)


@register(aten.fill.Scalar)
def _fill(ctx, x, value):
    return filled(ctx, value, x.dtype, x.sizes)


def _ramp(ctx, start, step) -> TensorValue:
    dtype, sizes = _out(ctx)
    i = cast(out_vars(sizes)[0], torch.int64) if sizes[0] > 1 else const(0, torch.int64)
    if dtypes.is_float(dtype):
        value = binary(Op.ADD, const(start, torch.float64),
                       binary(Op.MUL, const(step, torch.float64), cast(i, torch.float64)))
    else:
        value = binary(Op.ADD, const(int(start), torch.int64), binary(Op.MUL, const(int(step), torch.int64), i))
    return finish(ctx, cast(value, dtype), dtype, sizes)


@register(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(ctx, *args, **kwargs):
    numbers = [a for a in args if isinstance(a, (int, float))]
    if ctx.node.target is aten.arange.default:
        start, step = 0, 1
    elif ctx.node.target is aten.arange.start:
        start, step = numbers[0], 1
    else:
        start, step = numbers[0], numbers[2] if len(numbers) > 2 else kwargs.get("step", 1)
    return _ramp(ctx, start, step)


@register(prims.iota.default)
def _iota(ctx, length, *, start, step, dtype, device, requires_grad):
    return _ramp(ctx, start, step)


# ----------------------------------------------------------------------------- piecewise

def piecewise(ctx, pieces, dim: int, dtype, sizes) -> TensorValue:
    """Concatenate ``pieces`` (value, start, length) along ``dim``."""
    acc = dtypes.compute_dtype(dtype)
    vs = out_vars(sizes)
    body = None
    for tv, start, length in reversed(pieces):
        idx = list(vs)
        idx[dim] = S.sub(vs[dim], start)
        value = cast(tv.at(idx), acc)
        body = value if body is None else where(S.compare(Op.LT, vs[dim], start + length), value, body,
                                                 domain="both")
    return finish(ctx, body, dtype, sizes)


@register(aten.cat.default)
def _cat(ctx, tensors, dim=0):
    dtype, sizes = _out(ctx)
    pieces, start = [], 0
    live = [t for t in tensors if not (t.ndim == 1 and t.sizes[0] == 0)]
    if not live:
        return filled(ctx, 0, dtype, sizes)
    dim = norm_dim(dim, live[0].ndim)
    for tv in live:
        if tv.sizes[dim]:
            pieces.append((tv, start, tv.sizes[dim]))
        start += tv.sizes[dim]
    if not pieces:
        return filled(ctx, 0, dtype, sizes)
    return piecewise(ctx, pieces, dim, dtype, sizes)


@register(aten.constant_pad_nd.default)
def _pad(ctx, x, pad, value=0):
    dtype, sizes = _out(ctx)
    acc = dtypes.compute_dtype(dtype)
    vs = out_vars(sizes)
    idx = list(vs)
    inside = None
    for k in range(len(pad) // 2):
        d = x.ndim - 1 - k
        left = pad[2 * k]
        idx[d] = S.sub(vs[d], left)
        conds = [S.compare(Op.GE, idx[d], 0), S.compare(Op.LT, idx[d], x.sizes[d])]
        for cond in conds:
            if cond.op is Op.CONST and cond.arg:
                continue
            inside = cond if inside is None else binary(Op.AND, inside, cond)
    value_e = const(value, acc)
    body = cast(x.at(idx), acc)
    if inside is not None:
        body = where(inside, body, value_e, domain="both")
    return finish(ctx, body, dtype, sizes)


def merged_slice(ctx, base, src, dim: int, first, length, step: int):
    """``slice_scatter`` as a ``where`` over all of ``base``, which fuses with its readers
    (``braze.lower.scatter`` writes only the slice where the result is copied back into an
    input)."""
    dtype, sizes = _out(ctx)
    vs = out_vars(sizes)
    acc = dtypes.compute_dtype(dtype)
    rel = S.sub(vs[dim], first)
    idx = list(vs)
    idx[dim] = S.floordiv(rel, step)
    inside = binary(Op.AND, S.compare(Op.GE, rel, 0), S.compare(Op.LT, rel, length * step))
    if step != 1:
        inside = binary(Op.AND, inside, S.compare(Op.EQ, S.mod(rel, step), 0))
    body = where(inside, cast(src.at(idx), acc), cast(base.expr, acc), domain="then")
    return finish(ctx, body, dtype, sizes)


def merged_select(ctx, base, src, dim: int, i):
    """``select_scatter`` as a ``where`` over all of ``base`` (see ``merged_slice``)."""
    dtype, sizes = _out(ctx)
    vs = out_vars(sizes)
    acc = dtypes.compute_dtype(dtype)
    src_idx = list(vs[:dim]) + list(vs[dim + 1:])
    body = where(S.compare(Op.EQ, vs[dim], i), cast(src.at(src_idx), acc), cast(base.expr, acc))
    return finish(ctx, body, dtype, sizes)


@register(aten.diagonal_scatter.default)
def _diagonal_scatter(ctx, base, src, offset=0, dim1=0, dim2=1):
    """``base`` with its diagonal (``offset``, ``dim1``, ``dim2``) replaced by ``src``,
    whose last dimension runs along the diagonal."""
    dtype, sizes = _out(ctx)
    d1, d2 = norm_dim(dim1, base.ndim), norm_dim(dim2, base.ndim)
    vs = out_vars(sizes)
    acc = dtypes.compute_dtype(dtype)
    row, col = vs[d1], vs[d2]
    on_diagonal = S.compare(Op.EQ, S.sub(col, row), offset)
    along = row if offset >= 0 else col  # position along the diagonal
    src_idx = [v for k, v in enumerate(vs) if k not in (d1, d2)] + [along]
    body = where(on_diagonal, cast(src.at(src_idx), acc), cast(base.expr, acc), domain="then")
    return finish(ctx, body, dtype, sizes)


# ----------------------------------------------------------------------------- indirect

def index_from(ctx, value, size: int, dim: int = 0, shape=()):
    """A loaded index value as an index expression into dimension ``dim`` (of ``size``) of a
    tensor of ``shape``: negative values wrapped, and checked unless ``config.runtime_checks``
    is off or its range is known to be valid."""
    i = cast(value, dtypes.INDEX)
    lo, hi = S.bounds(i)
    if trusted(ctx) or (0 <= lo and hi < size):
        return S.where(S.compare(Op.LT, i, 0), S.add(i, size), i)
    if not config.runtime_checks:  # unsafe: wrong values, but inside the dimension
        return S.clamp(S.where(S.compare(Op.LT, i, 0), S.add(i, size), i), 0, size - 1)
    kind = "index" if wraps_negative(ctx) else "position"
    return checked(i, kind, check_site(ctx, "index", dim, size, shape), size)


@register(aten.gather.default)
def _gather(ctx, x, dim, idx, sparse_grad=False):
    dtype, sizes = _out(ctx)
    if x.ndim == 0:  # every index is 0
        return ctx.compute(dtype, sizes, x.at([]))
    dim = norm_dim(dim, x.ndim)
    vs = out_vars(sizes)
    positions = list(vs) + [index(0)] * (x.ndim - len(vs))
    positions[dim] = index_from(ctx, idx.at(vs), x.sizes[dim], dim, x.sizes)
    return ctx.compute(dtype, sizes, x.at(positions[:x.ndim]))


@register(aten.index_select.default)
def _index_select(ctx, x, dim, idx):
    dtype, sizes = _out(ctx)
    dim = norm_dim(dim, x.ndim)
    vs = out_vars(sizes)
    positions = list(vs)
    if x.ndim:
        positions[dim] = index_from(ctx, idx.at([vs[dim]] if idx.ndim else []), x.sizes[dim], dim, x.sizes)
    return ctx.compute(dtype, sizes, x.at(positions))


def advanced_index(ctx, x: TensorValue, indices) -> tuple:
    """``x[indices]`` (tensors or None per leading dimension): the result's sizes and the
    position in ``x`` of the result's element at ``out_vars(sizes)``. The broadcast index
    dimensions stand where the indexed dimensions were if those are adjacent, else first."""
    if any(t is not None and t.dtype in (torch.bool, torch.uint8) for t in indices):
        raise Unsupported("boolean mask indexing")
    indices = list(indices) + [None] * (x.ndim - len(indices))
    indexed = [k for k, t in enumerate(indices) if t is not None]
    bsizes = broadcast_sizes(*(indices[k].sizes for k in indexed))
    first = indexed[0] if indexed == list(range(indexed[0], indexed[-1] + 1)) else 0
    kept = [k for k in range(x.ndim) if k not in indexed]
    sizes = tuple(x.sizes[k] for k in kept[:first]) + tuple(bsizes) + tuple(x.sizes[k] for k in kept[first:])
    vs = out_vars(sizes)
    bvars = vs[first:first + len(bsizes)]
    rest = iter(vs[:first] + vs[first + len(bsizes):])
    positions = []
    for k in range(x.ndim):
        if k in indexed:
            t = indices[k]
            broadcast = TensorValue(t.dtype, bsizes, expand_to(t, bsizes))
            positions.append(index_from(ctx, broadcast.at(bvars), x.sizes[k], k, x.sizes))
        else:
            positions.append(next(rest))
    return sizes, positions


@register(aten.index.Tensor)
def _index(ctx, x, indices):
    dtype, sizes = _out(ctx)
    found, positions = advanced_index(ctx, x, indices)
    assert found == sizes, (found, sizes)
    return ctx.compute(dtype, sizes, x.at(positions))
