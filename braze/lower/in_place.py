"""Scatters into their base's own storage: the copies a functional scatter makes, removed.

Takes: a lowered ``Graph`` and its FX graph. Gives: ``scatter_in_place(graph, gm)``, which
rewrites the graph and returns the number of copies it removed.

Lowering is functional: ``x.index_add_(0, idx, src)`` comes from AOTAutograd as
``index_put(x, ...)`` and ``copy_(x, that)``, and lowers to a copy of all of ``x``, a
scatter of the few rows into the copy, and a copy back into ``x``. Each further scatter into
the result copies the whole tensor again. Here a copy ``T = B`` goes when nothing can tell
``T`` from ``B``:

- ``B`` is a buffer nothing else reads (apart from the scatters into ``B`` before the copy)
  and no graph output is: ``T``'s scatters write into ``B`` and ``T``'s readers read ``B``
  (a chain of scatters shares one buffer);
- ``B`` is a graph input ``A`` that only the copy reads, and the graph ends by copying the
  chain's buffer back into ``A`` (an in-place update): the scatters write into ``A``, the copy
  back goes, and a graph output of the chain is ``A`` itself, as eager's ``copy_`` returns
  its destination (only where the FX output is that ``copy_``).

A copy is exact when each of its elements lies at the storage position it has in ``B``:
``T = B`` with ``B``'s sizes and layout, or ``T`` reading ``B`` through a view whose index map
lands every element where it lies in ``B`` (``x.view(-1)``, ``x.view(-1, 32)`` of a dense
``x``, ``x.t()`` stored transposed), both dense over the same elements. Removing such a copy
reads and scatters into ``B`` through the view's index map, and a graph output of all of
``T`` becomes that view of ``B``: ``x.view(-1).index_add_(0, idx, v)`` scatters into ``x``.
A view of part of ``B`` (a slice) keeps its copy. A value that is never stored and reads
``B`` at its own indices is no copy at all: its readers read ``B``.

The scheduler orders several scatters into one buffer by program order, and a read of the
buffer after the scatters that precede it (``fuse/schedule.py``). An extern call reading
either buffer keeps the copy. A scatter of ``k`` rows into an ``n``-row input then writes
``k`` rows, not ``3n``.
"""
from __future__ import annotations

import dataclasses

import torch

from braze.ir import symbols
from braze.ir.expr import Expr, Op, load, rewrite, substitute
from braze.ir.graph import ComputeNode, ExternNode, Graph, InputNode, out_vars

aten = torch.ops.aten


def scatter_in_place(graph: Graph, gm: torch.fx.GraphModule) -> int:
    removed = 0
    while True:
        found = _removable_copy(graph, gm)
        if found is None:
            return removed
        copy, (base, view), copy_back = found
        _rename(graph, copy, base, view)
        for node in (copy, copy_back):
            if node is not None:
                graph.nodes.remove(node)
                del graph.by_name[node.name]
        removed += 1


def _removable_copy(graph: Graph, gm):
    """``(copy node, the buffer it copies, the copy back into an input or None)``."""
    readers = _readers(graph)
    rank = {n.name: k for k, n in enumerate(graph.nodes)}
    outputs = {o.buffer for o in graph.outputs if o.buffer is not None}
    scattered = {n.mutates for n in graph.nodes if isinstance(n, ComputeNode) and n.is_scatter}
    for copy in graph.nodes:
        copied = _copied(graph, copy, scattered)
        if copied is None or any(isinstance(n, ExternNode) for n in readers.get(copy.name, ())):
            continue
        base = copied[0]
        others = [n for n in readers.get(base, ()) if n is not copy
                  and not (isinstance(n, ComputeNode) and n.is_scatter and n.mutates == base
                           and rank[n.name] < rank[copy.name])]
        if others:
            continue
        source = graph.producer(base)
        if isinstance(source, ComputeNode) and base not in outputs:
            return copy, copied, None
        if isinstance(source, InputNode) and source.constant is None:
            copy_back = _copy_back(graph, copy.name, base, readers, rank)
            if copy_back is not None and _outputs_alias_input(graph, gm, copy.name, source):
                return copy, copied, copy_back
    return None


def _readers(graph: Graph) -> dict:
    found: dict = {}
    for node in graph.nodes:
        for name in node.reads():
            found.setdefault(name, []).append(node)
    return found


def _copied(graph: Graph, node, scattered: set):
    """``(B, view)`` when ``node`` is an exact copy of buffer ``B`` (same dtype, and each
    element at the storage position it has in ``B``), else None. ``view``: None when
    ``node`` has ``B``'s sizes and layout; else ``node`` reads ``B`` through a view (a
    reshape of a dense tensor, a permutation laid out as ``B`` is), ``node[x] = B[view(x)]``.
    Views, and values not stored, only where ``node`` or ``B`` is ``scattered`` into."""
    if not isinstance(node, ComputeNode) or node.mutates or node.reduction is not None or node.body is None:
        return None
    body = node.body
    if body.op is not Op.LOAD or body.dtype != node.dtype:
        return None
    source = graph.producer(body.arg)
    if isinstance(source, ExternNode) or source.dtype != node.dtype:
        return None
    if isinstance(source, InputNode) and (source.storage_offset or source.elsewhere or source.host_scalar):
        return None
    layout, own = graph.layout_of(body.arg), node.layout
    identity = body.args == out_vars(node.sizes) and symbols.same(source.sizes, node.sizes)
    near_scatter = body.arg in scattered or node.name in scattered
    if identity and own is None and near_scatter and all(o.buffer != node.name for o in graph.outputs):
        return body.arg, None  # (a value not stored: its readers may read its source)
    if layout is None or own is None:
        return None
    if identity:  # (compared as expressions: no size guard)
        same = symbols.same(tuple(layout.strides) + (layout.offset,), tuple(own.strides) + (own.offset,))
        return (body.arg, None) if same else None
    if near_scatter and _same_storage(own, layout, node.sizes, body.args):
        return body.arg, body.args
    return None


def _same_storage(own, layout, sizes, view) -> bool:
    """Does element ``x`` of a buffer laid out as ``own`` lie where element ``view(x)`` of one
    laid out as ``layout`` lies, both dense over the same elements (so each is the other's
    storage seen through a view)? Concrete sizes only."""
    if not all(isinstance(n, int) for n in (*own.sizes, *layout.sizes)) or own.numel != layout.numel:
        return False
    if not (own.is_dense() and layout.is_dense()):
        return False
    return own.position(out_vars(sizes)) == layout.position(view)


def _copy_back(graph: Graph, chain: str, target: str, readers: dict, rank: dict):
    """The node that ends the graph by copying ``chain`` whole into the input ``target``
    (element for element of their storage), after every other reader of ``chain``; else None."""
    for node in graph.nodes:
        if isinstance(node, ComputeNode) and node.mutates == target and not node.is_scatter:
            later = [n for n in readers.get(chain, ()) if n is not node and rank[n.name] > rank[node.name]]
            body = node.body
            exact = body.op is Op.LOAD and body.arg == chain and body.dtype == node.dtype and (
                body.args == out_vars(node.sizes)
                or _same_storage(graph.layout_of(target), graph.layout_of(chain), node.sizes, body.args))
            return node if exact and not later else None
    return None


def _outputs_alias_input(graph: Graph, gm, chain: str, source: InputNode) -> bool:
    """Is every graph output that returns ``chain`` the FX graph's ``copy_`` into ``source``?"""
    fx_outputs = list(gm.graph.output_node().args[0]) if gm is not None else []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"] if gm is not None else []
    for k, spec in enumerate(graph.outputs):
        if spec.buffer != chain:
            continue
        node = fx_outputs[k] if k < len(fx_outputs) else None
        if not (isinstance(node, torch.fx.Node) and node.target is aten.copy_.default
                and source.position < len(placeholders) and node.args[0] is placeholders[source.position]):
            return False
    return True


def _rename(graph: Graph, copy: ComputeNode, new: str, view) -> None:
    """Every read of, scatter into and output of ``copy`` now of ``new`` (through ``view``,
    when ``copy`` is ``new`` seen through one: see ``_copied``)."""
    old = copy.name
    through = _through(copy, view)

    def visit(e, args):
        return load(new, through(args), e.dtype) if e.op is Op.LOAD and e.arg == old else None
    for node in graph.nodes:
        if isinstance(node, ComputeNode) and node.body is not None:
            if old in node.reads():
                node.body = rewrite(node.body, visit)
            if node.mutates == old:
                node.mutates = new
                if view is not None and node.is_scatter:  # its target indices, into ``new``
                    body = node.body
                    node.body = Expr(body.op, body.dtype, (body.args[0],) + through(body.args[1:]), body.arg)
    for k, spec in enumerate(graph.outputs):
        if spec.buffer == old:
            graph.outputs[k] = _output_of(spec, new, copy.layout if view is not None else None,
                                          graph.layout_of(new))


def _through(copy: ComputeNode, view):
    """Indices into ``copy`` -> the indices into the buffer it is a view of."""
    if view is None:
        return tuple
    variables = out_vars(copy.sizes)
    return lambda indices: tuple(substitute(v, dict(zip(variables, indices))) for v in view)


def _output_of(spec, new: str, seen_as, layout):
    """A graph output of a copy now returning ``new``. Storage positions are the same in
    both; an output of the whole copy, when the copy was a view (laid out as ``seen_as``)
    of ``new``, is that view of ``new``; a view that is all of ``new`` as laid out, ``new``."""
    if seen_as is None:
        return dataclasses.replace(spec, buffer=new)
    if spec.kind == "buffer":
        spec = dataclasses.replace(spec, kind="view", sizes=tuple(seen_as.sizes),
                                   strides=tuple(seen_as.strides), offset=seen_as.offset)
    if spec.kind == "view" and layout is not None and (spec.sizes, spec.strides, spec.offset) == \
            (tuple(layout.sizes), tuple(layout.strides), layout.offset):
        spec = dataclasses.replace(spec, kind="buffer", sizes=(), strides=(), offset=0)
    return dataclasses.replace(spec, buffer=new)
