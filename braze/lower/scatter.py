"""Lowering rules that write at indices read from another tensor: ``scatter``,
``scatter_add``, ``scatter_reduce`` (sum), ``index_put`` and ``_unsafe_index_put``,
overwriting or accumulating; and ``as_strided_scatter``, whose positions are computed.

Takes: ``TensorValue``s and arguments. Gives: a stored copy of the tensor written
into (the fill or expression that made it: a zeros-then-scatter_add, a gather's
gradient, costs no extra pass) and a scatter node (``braze.ir.graph``) that, for
each element of its own iteration space (the index's), writes or adds a value at
target indices it loads; the op's result reads the copy. A scatter is a kernel of
its own: the expressions of its values and indices are inlined into it, but it
fuses with no other kernel. C++ writes each target element in index order (so sums are
deterministic, as eager's CPU ones), threads owning ranges of the target
(``codegen/cpp/scatter.py``); Triton adds with atomics, which exist for 32-
and 64-bit types only, so other accumulating dtypes (bf16) run through ATen there.

Indices are checked as eager checks them (``indexing.index_from``): an out-of-range one
is reported and written nowhere outside the target. With the checks off
(``config.runtime_checks``) they are clamped into the target's dimensions here, so code
generators need not clamp stores.

``slice_scatter`` and ``select_scatter`` whose result is copied back into their base, a
graph input (``x[:, 3:5] = v``, ``x[i] += 1``: an update of a part of an input), are a
scatter of their source at the computed positions of the part, so that
``braze.lower.in_place`` can write only the part into the input; anywhere else they are a
``where`` over the whole base (``indexing.merged_slice``), which fuses.

One special case fuses instead: a ``scatter`` of one element per slice along
``dim`` (the one-hot target of a cross-entropy backward) is ``where(position ==
index, src, base)``.
"""
from __future__ import annotations

import math

import torch

from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir.expr import Expr, Op, cast, const, index, load, scatter_store, where
from braze.ir.graph import ComputeNode, Layout, out_vars
from braze.lower.core import TensorValue, Unsupported, register, sizes_of, strides_of
from braze.lower.indexing import advanced_index, index_from, merged_select, merged_slice
from braze.lower.pointwise import expand_to, finish
from braze.lower.views import norm_dim, reshape, slice_bounds

aten = torch.ops.aten

def scatter_into(ctx, base: TensorValue, sizes, value, positions, accumulate: bool) -> TensorValue:
    """A copy of ``base`` with ``value`` (an expression over ``out_vars(sizes)``) written
    to, or added into, the element at ``positions`` for each element of ``sizes``."""
    dtype = base.dtype
    if not dtypes.is_supported(dtype):
        raise Unsupported(f"scatter into {dtype}")
    if base.numel == 0 and math.prod(sizes) > 0:
        raise Unsupported("scatter into an empty tensor")
    if accumulate and not ctx.graph.target.scatter_adds(dtype):
        raise Unsupported(f"accumulating scatter into {dtype} on {ctx.graph.target.name}")
    target = ctx.materialize(base, reason="scattered into")
    positions = [_inside(p, size) for p, size in zip(positions, base.sizes)]
    body = scatter_store(cast(value, dtypes.compute_dtype(dtype)), positions, accumulate)
    ctx.graph.add(ComputeNode(ctx.fresh(), dtype, tuple(sizes), [str(ctx.node.target)], body=body,
                              mutates=target, pinned=f"scatters into {target}"))
    return TensorValue(dtype, base.sizes, load(target, out_vars(base.sizes), dtype))


def _inside(position, size: int):
    """A target index clamped into ``[0, size)`` unless provably there: the flat position
    then stays affine in the loops that do not index (a row's elements, contiguous)."""
    lo, hi = S.bounds(position)
    return position if size == 0 or 0 <= lo and hi < size else S.clamp(position, 0, size - 1)


def _at(tv: TensorValue, vs) -> Expr:
    """``tv`` at the leading variables ``vs`` (a 0-d tensor at any; missing ones 0)."""
    vs = list(vs)[:tv.ndim]
    return tv.at(vs + [index(0)] * (tv.ndim - len(vs)))


# ----------------------------------------------------------------------------- scatter

def _scatter_along(ctx, base, dim, idx, src, accumulate: bool) -> TensorValue:
    """``base`` with ``src[i]`` written (or added) at ``i`` with its ``dim`` coordinate
    replaced by ``idx[i]``, for each element ``i`` of ``idx``."""
    if idx.numel == 0:  # (an empty index may have any rank)
        return finish(ctx, base.expr, base.dtype, base.sizes)
    if idx.ndim != base.ndim and max(idx.ndim, base.ndim) > 1:
        raise Unsupported("scatter with an index of another rank than the tensor")
    sizes = idx.sizes
    vs = out_vars(sizes)
    positions = []
    if base.ndim:
        dim = norm_dim(dim, base.ndim)
        positions = list(vs) if idx.ndim else [index(0)]
        positions[dim] = index_from(ctx, _at(idx, vs), base.sizes[dim], dim, base.sizes)
    acc = dtypes.compute_dtype(base.dtype)
    value = _at(src, vs) if isinstance(src, TensorValue) else const(src, acc)
    return scatter_into(ctx, base, sizes, value, positions, accumulate)


@register(aten.slice_scatter.default)
def _slice_scatter(ctx, base, src, dim=0, start=None, end=None, step=1):
    dim = norm_dim(dim, base.ndim)
    first, length = slice_bounds(base.sizes[dim], start, end, step)
    if not _copied_back(ctx):
        return merged_slice(ctx, base, src, dim, first, length, step)
    vs = out_vars(src.sizes)
    positions = list(vs)
    positions[dim] = S.add(S.mul(vs[dim], step), first)
    return scatter_into(ctx, base, src.sizes, src.at(vs), positions, accumulate=False)


@register(aten.select_scatter.default)
def _select_scatter(ctx, base, src, dim, i):
    dim = norm_dim(dim, base.ndim)
    i = i + base.sizes[dim] if i < 0 else i
    if not _copied_back(ctx):
        return merged_select(ctx, base, src, dim, i)
    vs = out_vars(src.sizes)
    positions = list(vs[:dim]) + [index(i)] + list(vs[dim:])
    return scatter_into(ctx, base, src.sizes, src.at(vs), positions, accumulate=False)


def _copied_back(ctx) -> bool:
    """Does this op's result end, through further updates of parts of it, copied back into
    the graph input it updates (``copy_(x, slice_scatter(slice_scatter(x, ..), ..))``)?"""
    node = ctx.node
    if node is None or not node.args:
        return False
    root = node.args[0]
    while isinstance(root, torch.fx.Node) and root.target in _PART_WRITES:
        root = root.args[0]
    if not (isinstance(root, torch.fx.Node) and root.op == "placeholder"):
        return False
    while True:
        if any(u.target is aten.copy_.default and u.args[0] is root and u.args[1] is node for u in node.users):
            return True
        later = [u for u in node.users if u.target in _PART_WRITES and u.args[0] is node]
        if len(later) != 1:
            return False
        node = later[0]


_PART_WRITES = (aten.slice_scatter.default, aten.select_scatter.default)


@register(aten.scatter.value, aten.scatter.src)
def _scatter(ctx, base, dim, idx, src):
    if base.ndim and tuple(idx.sizes) == _one_per_slice(base.sizes, norm_dim(dim, base.ndim)):
        return _one_hot(ctx, base, norm_dim(dim, base.ndim), idx, src)
    return _scatter_along(ctx, base, dim, idx, src, accumulate=False)


def _one_per_slice(sizes, dim: int) -> tuple:
    return tuple(sizes[:dim]) + (1,) + tuple(sizes[dim + 1:])


def _one_hot(ctx, base, dim: int, idx, src) -> TensorValue:
    """One element per slice: ``where(position == index, src, base)``, which fuses."""
    dtype, sizes = base.dtype, tuple(base.sizes)
    vs = out_vars(sizes)
    first = list(vs)
    first[dim] = index(0)
    acc = dtypes.compute_dtype(dtype)
    value = src.at(first) if isinstance(src, TensorValue) else const(src, acc)
    hit = S.compare(Op.EQ, vs[dim], index_from(ctx, idx.at(first), sizes[dim], dim, sizes))
    return finish(ctx, where(hit, cast(value, acc), cast(base.expr, acc)), dtype, sizes)


@register(aten.scatter_add.default)
def _scatter_add(ctx, base, dim, idx, src):
    return _scatter_along(ctx, base, dim, idx, src, accumulate=True)


@register(aten.scatter_reduce.two)
def _scatter_reduce(ctx, base, dim, idx, src, reduce, include_self=True):
    if reduce != "sum":
        raise Unsupported(f"scatter_reduce with reduce={reduce!r}")
    if not include_self:
        base = _scatter_along(ctx, base, dim, idx, 0, accumulate=False)
    return _scatter_along(ctx, base, dim, idx, src, accumulate=True)


# ----------------------------------------------------------------------------- index_put

@register(aten.index_put.default, aten._unsafe_index_put.default)
def _index_put(ctx, x, indices, values, accumulate=False):
    """``x[indices] = values`` (``+=`` with ``accumulate``), values broadcast to the shape
    of ``x[indices]``."""
    if not any(t is not None for t in indices):
        raise Unsupported("index_put without index tensors")
    sizes, positions = advanced_index(ctx, x, indices)
    lead = values.ndim - len(sizes)
    if lead > 0:
        if any(s != 1 for s in values.sizes[:lead]):
            raise Unsupported(f"index_put of values {list(values.sizes)} into {list(sizes)}")
        values = reshape(values, values.sizes[lead:])
    if accumulate and not ctx.graph.target.scatter_adds(x.dtype):
        return _index_add(ctx, x, indices, values)
    return scatter_into(ctx, x, sizes, expand_to(values, sizes), positions, accumulate)


def _index_add(ctx, x, indices, values):
    """An accumulating ``index_put`` into a dtype Triton has no atomic add for (bf16),
    with one index tensor on the first dimension (an embedding's backward): ATen's
    ``index_add``, which adds with atomics on a GPU; eager's ``index_put`` sorts the
    indices first (a radix sort and tens of kernels per call)."""
    idx = indices[0] if len(indices) == 1 else None
    if idx is None or idx.dtype not in (torch.int64, torch.int32) or x.ndim == 0 or x.dtype is torch.bool \
            or torch.are_deterministic_algorithms_enabled():
        raise Unsupported(f"accumulating index_put into {x.dtype} other than along the first dimension")
    if tuple(values.sizes) != tuple(idx.sizes) + tuple(x.sizes[1:]):
        raise Unsupported("index_put with broadcast values")
    rows = math.prod(idx.sizes)
    flat = reshape(idx, (rows,))
    wrapped = ctx.compute(torch.int64, (rows,), cast(index_from(ctx, flat.expr, x.sizes[0], 0, x.sizes), torch.int64))
    return ctx.extern(aten.index_add.default, (x, 0, wrapped, reshape(values, (rows,) + tuple(x.sizes[1:]))), {})


# ----------------------------------------------------------------------------- as_strided_scatter

@register(aten.as_strided_scatter.default)
def _as_strided_scatter(ctx, base, src, size, stride, storage_offset=None):
    """A copy of ``base`` (laid out as ATen's ``clone`` lays it out) with ``src`` written
    into its ``as_strided(size, stride, storage_offset)`` view: each element of ``src``
    goes to the storage position its index gives, turned back into ``base``'s indices.
    Views that reach outside the storage (ATen raises) or write one element twice (in
    the order of eager's copy) go to ATen."""
    meta = ctx.node.args[0].meta["val"]
    size, stride, offset = list(size), list(stride), storage_offset or 0
    if tuple(src.sizes) != tuple(size):
        raise Unsupported(f"as_strided_scatter of {list(src.sizes)} into a view of {size}")
    if math.prod(size) == 0:
        return finish(ctx, base.expr, base.dtype, base.sizes)
    clone = Layout(sizes_of(meta), strides_of(meta))
    clone = clone if clone.is_dense() else Layout.contiguous(base.sizes)
    view = Layout(tuple(size), tuple(stride), offset)
    if offset < 0 or min(stride, default=0) < 0 or view.storage_numel() > base.numel or _overlaps(size, stride):
        raise Unsupported(f"as_strided_scatter view (size {size}, stride {stride}, offset {offset}) "
                          f"of a tensor of {base.numel} elements")
    positions = clone.indices_at(view.position(out_vars(size)))
    return scatter_into(ctx, base, size, src.expr, positions, accumulate=False)


def _overlaps(size, stride) -> bool:
    """Do two indices of the view reach one storage position?"""
    reach = 0
    for n, st in sorted(((n, st) for n, st in zip(size, stride) if n > 1), key=lambda d: d[1]):
        if st <= reach:
            return True
        reach += (n - 1) * st
    return False
