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

The scheduler orders several scatters into one buffer by program order, and a read of the
buffer after the scatters that precede it (``fuse/schedule.py``). An extern call reading
either buffer keeps the copy. A scatter of ``k`` rows into an ``n``-row input then writes
``k`` rows, not ``3n``.
"""
from __future__ import annotations

import dataclasses

import torch

from braze.ir import symbols
from braze.ir.expr import Op, load, rewrite
from braze.ir.graph import ComputeNode, ExternNode, Graph, InputNode, out_vars

aten = torch.ops.aten


def scatter_in_place(graph: Graph, gm: torch.fx.GraphModule) -> int:
    removed = 0
    while True:
        found = _removable_copy(graph, gm)
        if found is None:
            return removed
        copy, base, copy_back = found
        _rename(graph, copy.name, base)
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
    for copy in graph.nodes:
        base = _copied(graph, copy)
        if base is None or any(isinstance(n, ExternNode) for n in readers.get(copy.name, ())):
            continue
        others = [n for n in readers.get(base, ()) if n is not copy
                  and not (isinstance(n, ComputeNode) and n.is_scatter and n.mutates == base
                           and rank[n.name] < rank[copy.name])]
        if others:
            continue
        source = graph.producer(base)
        if isinstance(source, ComputeNode) and base not in outputs:
            return copy, base, None
        if isinstance(source, InputNode) and source.constant is None:
            copy_back = _copy_back(graph, copy.name, base, readers, rank)
            if copy_back is not None and _outputs_alias_input(graph, gm, copy.name, source):
                return copy, base, copy_back
    return None


def _readers(graph: Graph) -> dict:
    found: dict = {}
    for node in graph.nodes:
        for name in node.reads():
            found.setdefault(name, []).append(node)
    return found


def _copied(graph: Graph, node):
    """The buffer ``node`` is an exact copy of (same dtype, sizes and layout), or None."""
    if not isinstance(node, ComputeNode) or node.mutates or node.reduction is not None or node.body is None:
        return None
    body = node.body
    if body.op is not Op.LOAD or body.args != out_vars(node.sizes) or body.dtype != node.dtype:
        return None
    source = graph.producer(body.arg)
    if isinstance(source, ExternNode) or not symbols.same(source.sizes, node.sizes) or source.dtype != node.dtype:
        return None
    layout, own = graph.layout_of(body.arg), node.layout  # (compared as expressions: no size guard)
    if layout is None or own is None or not symbols.same(tuple(layout.strides) + (layout.offset,),
                                                         tuple(own.strides) + (own.offset,)):
        return None
    if isinstance(source, InputNode) and (source.storage_offset or source.elsewhere or source.host_scalar):
        return None
    return body.arg


def _copy_back(graph: Graph, chain: str, target: str, readers: dict, rank: dict):
    """The node that ends the graph by copying ``chain`` whole into the input ``target``,
    after every other reader of ``chain``; else None."""
    for node in graph.nodes:
        if isinstance(node, ComputeNode) and node.mutates == target and not node.is_scatter:
            later = [n for n in readers.get(chain, ()) if n is not node and rank[n.name] > rank[node.name]]
            body = node.body
            exact = body.op is Op.LOAD and body.arg == chain and body.args == out_vars(node.sizes) \
                and body.dtype == node.dtype
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


def _rename(graph: Graph, old: str, new: str) -> None:
    """Every read of, scatter into and output of ``old`` now of ``new``."""
    def visit(e, args):
        return load(new, args, e.dtype) if e.op is Op.LOAD and e.arg == old else None
    for node in graph.nodes:
        if isinstance(node, ComputeNode) and node.body is not None:
            if old in node.reads():
                node.body = rewrite(node.body, visit)
            if node.mutates == old:
                node.mutates = new
    for k, spec in enumerate(graph.outputs):
        if spec.buffer == old:
            graph.outputs[k] = dataclasses.replace(spec, buffer=new)
