"""Lowering rules for view ops: each one is an index map, never a copy.

Takes: a ``TensorValue`` and the op's arguments. Gives: a ``TensorValue`` whose
expression reads the input at remapped indices (``view``/``reshape`` split and
merge dimensions with ``//`` and ``%``, which ``braze.ir.simplify`` folds back
into plain variables wherever the sizes line up).
"""
from __future__ import annotations

import math

import torch

from braze.ir import simplify as S
from braze.ir import traced
from braze.ir.expr import index
from braze.ir.graph import InputNode, out_vars
from braze.ir.expr import Op
from braze.lower.core import TensorValue, Unsupported, register, sizes_of

aten = torch.ops.aten


def remap(tv: TensorValue, sizes, indices_of) -> TensorValue:
    """A view of ``tv`` with ``sizes``: element ``v`` is ``tv[indices_of(v)]``."""
    sizes = tuple(traced.concrete(s) for s in sizes)
    return TensorValue(tv.dtype, sizes, tv.at(indices_of(out_vars(sizes))))


def norm_dim(dim: int, ndim: int) -> int:
    ndim = max(ndim, 1)
    if not -ndim <= dim < ndim:
        raise IndexError(f"dimension {dim} out of range for a tensor of {ndim} dimensions")
    return dim % ndim


def infer_sizes(sizes, numel: int) -> tuple:
    sizes = list(sizes)
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        sizes[sizes.index(-1)] = numel // known if known else 0
    return tuple(sizes)


def reshape_groups(old, new) -> list:
    """Pair runs of old and new dimensions with equal products: [(old dims, new dims)]."""
    groups, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        gi, gj = [i] if i < len(old) else [], [j] if j < len(new) else []
        po = old[i] if i < len(old) else 1
        pn = new[j] if j < len(new) else 1
        i, j = i + bool(gi), j + bool(gj)
        while po != pn:
            if po < pn and i < len(old):
                po *= old[i]
                gi.append(i)
                i += 1
            elif j < len(new):
                pn *= new[j]
                gj.append(j)
                j += 1
            else:
                raise Unsupported(f"reshape {old} -> {new}")
        groups.append((gi, gj))
    return groups


def reshape(tv: TensorValue, sizes) -> TensorValue:
    new = infer_sizes(sizes, tv.numel)
    old = tv.sizes
    if new == old:
        return tv
    if math.prod(new) != tv.numel:
        raise Unsupported(f"reshape of {list(old)} to {list(new)}")
    if tv.numel == 0:
        return TensorValue(tv.dtype, new, tv.expr)

    def indices_of(vs):
        out = [None] * len(old)
        for old_dims, new_dims in reshape_groups(list(old), list(new)):
            flat = S.ravel([vs[j] for j in new_dims], [new[j] for j in new_dims])
            for k, idx in zip(old_dims, S.unravel(flat, [old[k] for k in old_dims])):
                out[k] = idx
        return out
    return remap(tv, new, indices_of)


@register(aten.sym_size.int)
def _sym_size(ctx, x, dim):
    """A size of a tensor (an int, or a symbolic size): read from the value braze lowered,
    never from the traced one (stale when a graph is compiled per shape)."""
    return x.sizes[dim]


@register(aten.sym_numel.default)
def _sym_numel(ctx, x):
    return x.numel


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _view(ctx, x, sizes):
    return reshape(x, sizes)


@register(aten.alias.default, aten.lift_fresh.default, aten.detach.default)
def _alias(ctx, x):
    return x


@register(aten.permute.default)
def _permute(ctx, x, dims):
    dims = [norm_dim(d, x.ndim) for d in dims]
    inverse = [dims.index(k) for k in range(x.ndim)]
    return remap(x, [x.sizes[d] for d in dims], lambda vs: [vs[inverse[k]] for k in range(x.ndim)])


@register(aten.transpose.int)
def _transpose(ctx, x, d0, d1):
    if x.ndim == 0:
        return x
    d0, d1 = norm_dim(d0, x.ndim), norm_dim(d1, x.ndim)
    order = list(range(x.ndim))
    order[d0], order[d1] = order[d1], order[d0]
    return _permute(ctx, x, order)


@register(aten.t.default)
def _t(ctx, x):
    return x if x.ndim < 2 else _transpose(ctx, x, 0, 1)


@register(aten.expand.default)
def _expand(ctx, x, sizes, implicit=False):
    lead = len(sizes) - x.ndim
    new = [x.sizes[k - lead] if s == -1 else s for k, s in enumerate(sizes)]

    def indices_of(vs):
        return [index(0) if size == 1 else vs[lead + k] for k, size in enumerate(x.sizes)]
    return remap(x, new, indices_of)


@register(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def _squeeze(ctx, x, dims=None):
    if dims is None:
        dims = range(x.ndim)
    elif isinstance(dims, int):
        dims = [dims]
    drop = {norm_dim(d, x.ndim) for d in dims if x.ndim} & {k for k, s in enumerate(x.sizes) if s == 1}
    keep = [k for k in range(x.ndim) if k not in drop]

    def indices_of(vs):
        pos = {k: i for i, k in enumerate(keep)}
        return [vs[pos[k]] if k in pos else index(0) for k in range(x.ndim)]
    return remap(x, [x.sizes[k] for k in keep], indices_of)


@register(aten.unsqueeze.default)
def _unsqueeze(ctx, x, dim):
    dim = norm_dim(dim, x.ndim + 1)
    sizes = list(x.sizes)
    sizes.insert(dim, 1)
    return remap(x, sizes, lambda vs: [v for k, v in enumerate(vs) if k != dim])


OPEN_END = 2 ** 63 - 1  # the end of ``x[a:]`` in an ATen slice


def slice_bounds(size: int, start, end, step: int) -> tuple:
    start = 0 if start is None else start
    end = size if end is None or (isinstance(end, int) and end == OPEN_END) else end  # (no size passes it)
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, (end - start + step - 1) // step


def slice_value(x: TensorValue, dim: int, start, end, step: int = 1) -> TensorValue:
    dim = norm_dim(dim, x.ndim)
    first, length = slice_bounds(x.sizes[dim], start, end, step)
    sizes = list(x.sizes)
    sizes[dim] = length

    def indices_of(vs):
        out = list(vs)
        out[dim] = S.add(S.mul(vs[dim], step), first)
        return out
    return remap(x, sizes, indices_of)


@register(aten.slice.Tensor)
def _slice(ctx, x, dim=0, start=None, end=None, step=1):
    if step <= 0:
        raise Unsupported("slice with a non-positive step")
    return slice_value(x, dim, start, end, step)


def select_value(x: TensorValue, dim: int, i: int) -> TensorValue:
    dim = norm_dim(dim, x.ndim)
    i = i + x.sizes[dim] if i < 0 else i
    if not 0 <= i < x.sizes[dim]:
        raise IndexError(f"select index {i} out of range for size {x.sizes[dim]}")
    sizes = x.sizes[:dim] + x.sizes[dim + 1:]
    return remap(x, sizes, lambda vs: list(vs[:dim]) + [index(i)] + list(vs[dim:]))


@register(aten.select.int)
def _select(ctx, x, dim, i):
    return select_value(x, dim, i)


@register(aten.split.Tensor)
def _split(ctx, x, split_size, dim=0):
    dim = norm_dim(dim, x.ndim)
    size = x.sizes[dim]
    starts = range(0, size, split_size) if size else [0]
    return [slice_value(x, dim, s, s + split_size) for s in starts]


@register(aten.split_with_sizes.default)
def _split_with_sizes(ctx, x, sizes, dim=0):
    dim = norm_dim(dim, x.ndim)
    out, start = [], 0
    for s in sizes:
        out.append(slice_value(x, dim, start, start + s))
        start += s
    return out


@register(aten.unbind.int)
def _unbind(ctx, x, dim=0):
    dim = norm_dim(dim, x.ndim)
    return [select_value(x, dim, i) for i in range(x.sizes[dim])]


@register(aten.diagonal.default)
def _diagonal(ctx, x, offset=0, dim1=0, dim2=1):
    d1, d2 = norm_dim(dim1, x.ndim), norm_dim(dim2, x.ndim)
    rest = [k for k in range(x.ndim) if k not in (d1, d2)]
    sizes = sizes_of(ctx.out)

    def indices_of(vs):
        out = [None] * x.ndim
        for pos, k in enumerate(rest):
            out[k] = vs[pos]
        diag = vs[-1]
        out[d1] = S.add(diag, max(-offset, 0))
        out[d2] = S.add(diag, max(offset, 0))
        return out
    return remap(x, sizes, indices_of)


@register(aten.as_strided.default)
def _as_strided(ctx, x, sizes, strides, storage_offset=None):
    base = ctx.node.args[0].meta["val"]
    buffer = ctx.storage_of(x, reason="read by as_strided")
    if buffer is None or not ctx.graph.layout_of(buffer).is_dense():
        raise Unsupported("as_strided of a computed or non-dense tensor")
    layout = ctx.graph.layout_of(buffer)
    node = ctx.graph.producer(buffer)
    base_offset = node.storage_offset if isinstance(node, InputNode) else base.storage_offset()
    start = (base.storage_offset() if storage_offset is None else storage_offset) - base_offset
    return remap(x, sizes, lambda vs: layout.indices_at(S.flat_offset(vs, strides, start)))


# ----------------------------------------------------------------------------- copies

def copied(ctx, value):
    """A new node computing ``value`` (or each of a list): a copy op must not alias its input."""
    if isinstance(value, (list, tuple)):
        return type(value)(copied(ctx, v) for v in value)
    return ctx.compute(value.dtype, value.sizes, value.expr, origin=str(ctx.node.target))


def _copy_of(rule):
    def copy_rule(ctx, *args, **kwargs):
        return copied(ctx, rule(ctx, *args, **kwargs))
    return copy_rule


COPY_VARIANTS = {
    aten.view_copy.default: _view, aten.alias_copy.default: _alias, aten.permute_copy.default: _permute,
    aten.transpose_copy.int: _transpose, aten.t_copy.default: _t, aten.expand_copy.default: _expand,
    aten.squeeze_copy.default: _squeeze, aten.squeeze_copy.dim: _squeeze, aten.squeeze_copy.dims: _squeeze,
    aten.unsqueeze_copy.default: _unsqueeze, aten.slice_copy.Tensor: _slice, aten.select_copy.int: _select,
    aten.split_copy.Tensor: _split, aten.split_with_sizes_copy.default: _split_with_sizes,
    aten.unbind_copy.int: _unbind, aten.diagonal_copy.default: _diagonal, aten.detach_copy.default: _alias,
    aten.as_strided_copy.default: _as_strided,
}
for _op, _rule in COPY_VARIANTS.items():
    register(_op)(_copy_of(_rule))


@register(aten.narrow_copy.default)
def _narrow_copy(ctx, x, dim, start, length):
    return copied(ctx, slice_value(x, dim, start, start + length))


@register(aten.flip.default)
def _flip(ctx, x, dims):
    """An index map (a copy, since flip is not a view): element v is x[size - 1 - v]."""
    flipped = {norm_dim(d, x.ndim) for d in dims} if x.ndim else set()

    def indices_of(vs):
        return [S.sub(x.sizes[k] - 1, v) if k in flipped and x.sizes[k] > 1 else v for k, v in enumerate(vs)]
    return copied(ctx, remap(x, x.sizes, indices_of))


@register(aten.repeat.default)
def _repeat(ctx, x, repeats):
    """Tiles of ``x``: element v is x[v % size] in each of its trailing dimensions."""
    lead = len(repeats) - x.ndim
    sizes = [r * (x.sizes[k - lead] if k >= lead else 1) for k, r in enumerate(repeats)]
    if 0 in sizes:
        from braze.lower.indexing import filled
        return filled(ctx, 0, x.dtype, tuple(sizes))

    def indices_of(vs):
        return [S.mod(vs[lead + k], s) if s > 1 else index(0) for k, s in enumerate(x.sizes)]
    return copied(ctx, remap(x, sizes, indices_of))


def is_identity_load(tv: TensorValue) -> bool:
    return tv.expr.op is Op.LOAD and tv.expr.args == out_vars(tv.sizes)
