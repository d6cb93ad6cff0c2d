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

Reads of ``B`` that cannot tell either: a value not stored read only by such scatters, and
a scatter into ``T`` at distinct computed positions whose value reads ``B`` only at the very
positions it writes (``x[:, :16] += y``: each element of ``B`` is read before it is
written, once). A scatter that sets elements to themselves (``B[p] = B[p]``) goes too.

A copy is exact when each of its elements lies at the storage position it has in ``B``:
``T = B`` with ``B``'s sizes and layout, or ``T`` reading ``B`` through a view whose index map
lands every element where it lies in ``B`` (``x.view(-1)``, ``x.view(-1, 32)`` of a dense
``x``, ``x.t()`` stored transposed), both dense over the same elements. Removing such a copy
reads and scatters into ``B`` through the view's index map, and a graph output of all of
``T`` becomes that view of ``B``: ``x.view(-1).index_add_(0, idx, v)`` scatters into ``x``.
A value that is never stored and reads ``B`` at its own indices is no copy at all: its
readers read ``B``.

A copy ``T`` of part of ``B`` (a slice: ``x[2:50].index_add_(...)``) that is scattered into
and then put back where it came from becomes ``B`` seen through the slice when nothing else
reads ``T`` or ``B``: the scatters write into ``B`` at the slice's positions. Put back is
either the ``where`` of a ``slice_scatter(B, T)``, which then reads ``B`` at every position
(a copy of ``B`` the rules above remove), or, where the update is copied back into an input,
the scatter of ``T`` into a copy of ``B`` at the slice's positions that
``braze.lower.scatter`` makes of such a ``slice_scatter``, which then sets ``B``'s elements
to themselves. Each element of ``T`` lies at its own element of ``B`` (the slice's index map
is one to one), and the scatters' indices are checked against ``T``'s extents, so no
scatter writes outside the slice. A slice of a slice, or a slice of a select, is merged by
``where``s over the outer part and keeps a pass over it.

The scheduler orders several scatters into one buffer by program order, and a read of the
buffer after the scatters that precede it (``fuse/schedule.py``). An extern call reading
either buffer keeps the copy. A scatter of ``k`` rows into an ``n``-row input then writes
``k`` rows, not ``3n``.
"""
from __future__ import annotations

import dataclasses

import torch

from braze.ir import symbols
from braze.ir.expr import Expr, Op, load, loads, rewrite, substitute
from braze.ir.graph import ComputeNode, ExternNode, Graph, InputNode, out_vars

aten = torch.ops.aten


def scatter_in_place(graph: Graph, gm: torch.fx.GraphModule) -> int:
    removed = 0
    while True:
        uses = _Uses.of(graph)
        if not (_drop_copy(graph, gm, uses) or _drop_part_copy(graph, uses) or _drop_idle_scatter(graph)):
            return removed
        removed += 1


@dataclasses.dataclass
class _Uses:
    """Who reads each buffer, each node's place in program order, the buffers the graph
    outputs and those scattered into: built once per removal, as each removal renames."""
    readers: dict
    rank: dict
    outputs: set
    scattered: set

    @staticmethod
    def of(graph: Graph) -> "_Uses":
        readers: dict = {}
        for node in graph.nodes:
            for name in node.reads():
                readers.setdefault(name, []).append(node)
        return _Uses(readers, {n.name: k for k, n in enumerate(graph.nodes)},
                     {o.buffer for o in graph.outputs if o.buffer is not None},
                     {n.mutates for n in graph.nodes if isinstance(n, ComputeNode) and n.is_scatter})


def _drop_copy(graph: Graph, gm, uses: _Uses) -> bool:
    found = _removable_copy(graph, gm, uses)
    if found is None:
        return False
    copy, (base, view), copy_back = found
    _rename(graph, copy, base, view)
    _remove(graph, copy, copy_back)
    return True


def _drop_part_copy(graph: Graph, uses: _Uses) -> bool:
    found = _part_copy(graph, uses)
    if found is None:
        return False
    copy, base, view = found
    _rename(graph, copy, base, view)
    _remove(graph, copy)
    return True


def _drop_idle_scatter(graph: Graph) -> bool:
    """Remove a scatter that sets elements of its target to themselves (``B[p] = B[p]``): the
    scatter that put a slice's copy back, once the copy is the slice of ``B`` itself, and any
    other."""
    for node in graph.nodes:
        if isinstance(node, ComputeNode) and node.is_scatter and not node.accumulates:
            value, *indices = node.body.args
            if _one_to_one(indices) and _inlined(graph, value) is load(node.mutates, indices, value.dtype):
                _remove(graph, node)
                return True
    return False


def _remove(graph: Graph, *nodes) -> None:
    for node in nodes:
        if node is not None:
            graph.nodes.remove(node)
            del graph.by_name[node.name]


def _removable_copy(graph: Graph, gm, uses: _Uses):
    """``(copy node, the buffer it copies, the copy back into an input or None)``."""
    for copy in graph.nodes:
        copied = _copied(graph, copy, uses.scattered)
        if copied is None or any(isinstance(n, ExternNode) for n in uses.readers.get(copy.name, ())):
            continue
        base = copied[0]
        if not all(_harmless(graph, n, copy, copied, uses) for n in uses.readers.get(base, ())):
            continue
        source = graph.producer(base)
        if isinstance(source, ComputeNode) and base not in uses.outputs or copy.layout is None and copied[1] is None:
            return copy, copied, None  # (a value not stored is read where it is used: ``B`` itself)
        if isinstance(source, InputNode) and source.constant is None:
            copy_back = _copy_back(graph, copy.name, base, uses)
            if copy_back is not None and _outputs_alias_input(graph, gm, copy.name, source):
                return copy, copied, copy_back
    return None


def _harmless(graph: Graph, node, copy, copied: tuple, uses: _Uses) -> bool:
    """May ``node``, a reader of ``B`` (``copied[0]``), read ``B`` when ``copy`` is ``B``
    itself? The copy; a scatter into ``B`` before the copy; a scatter into the copy at
    distinct computed positions that reads ``B`` only at the very positions it writes (``x[:,
    :16] += y`` on a copy of ``x``: into ``B``, each element is read before it is written,
    once); a value not stored that only such nodes read."""
    base = copied[0]
    if node is copy:
        return True
    if _unstored(node):
        users = uses.readers.get(node.name, ())
        return bool(users) and all(_harmless(graph, n, copy, copied, uses) for n in users)
    if not (isinstance(node, ComputeNode) and node.is_scatter):
        return False
    if node.mutates == base:
        return uses.rank[node.name] < uses.rank[copy.name]
    if node.mutates != copy.name or copied[1] is not None:
        return False
    value, *indices = node.body.args
    return _one_to_one(indices) and all(e.args == tuple(indices) for e in loads(_inlined(graph, value))
                                        if e.arg == base)


def _unstored(node) -> bool:
    return isinstance(node, ComputeNode) and node.layout is None and not node.mutates and \
        node.reduction is None and node.body is not None and not node.is_scatter and not node.is_scan


def _inlined(graph: Graph, value: Expr) -> Expr:
    """``value`` with its loads of values not stored replaced by what they compute."""
    def visit(e, args):
        source = graph.producer(e.arg) if e.op is Op.LOAD else None
        if not _unstored(source):
            return None
        return _inlined(graph, substitute(source.body, dict(zip(out_vars(source.sizes), args))))
    return rewrite(value, visit)


def _one_to_one(indices) -> bool:
    """Are ``indices`` a one-to-one map of the loop variables they use (each a variable, or a
    variable plus a constant, or a constant; each variable once), loading nothing?"""
    used = [_variable_of(i) for i in indices]
    variables = [id(v) for v in used if v is not True]
    return None not in used and len(variables) == len(set(variables))


def _part_copy(graph: Graph, uses: _Uses):
    """``(T, B, view)``: a stored copy ``T`` of part of buffer ``B``, ``T[y] = B[view(y)]``,
    whose scatters can write ``B`` itself: besides those scatters, one node reads ``T``, and
    it leaves ``B`` as the scatters made it (``_merges_back``); nothing else reads ``B`` but
    ``_harmless`` nodes."""
    for copy in graph.nodes:
        view = _slice_view(graph, copy)
        if view is None or copy.name in uses.outputs:
            continue
        base = copy.body.arg
        merges = [n for n in uses.readers.get(copy.name, ())
                  if not (isinstance(n, ComputeNode) and n.is_scatter and n.mutates == copy.name)]
        if len(merges) != 1:
            continue
        merge = _merges_back(graph, merges[0], copy, base, view, uses.rank)
        others = [n for n in uses.readers.get(base, ()) if n not in (merge, merges[0])
                  and not _harmless(graph, n, copy, (base, view), uses)]
        if merge is not None and not others:
            return copy, base, view
    return None


def _merges_back(graph: Graph, reader, copy, base: str, view, rank: dict):
    """The node that reads ``base`` when ``reader``, the one reader of ``copy``, puts the
    copy's elements back where they came from, else None. With ``copy`` read as ``base``
    through ``view``, either ``reader`` is a load of ``base`` (the ``where`` of a
    ``slice_scatter`` that merges the copy back), or it is a scatter that sets a later
    exact copy of ``base`` at distinct positions to ``base`` at those very positions (an
    update of a slice of an input, ``braze.lower.scatter``): that copy reads ``base``."""
    if not isinstance(reader, ComputeNode) or reader.reduction is not None or reader.body is None:
        return None
    through = _through(copy, view)

    def visit(e, args):
        return load(base, through(args), e.dtype) if e.op is Op.LOAD and e.arg == copy.name else None
    if not reader.is_scatter:
        merged = rewrite(reader.body, visit)
        return reader if not reader.mutates and merged.op is Op.LOAD and merged.arg == base else None
    value, *indices = reader.body.args
    target = graph.producer(reader.mutates)
    if reader.accumulates or not _one_to_one(indices) or not isinstance(target, ComputeNode) or \
            rewrite(value, visit) is not load(base, indices, value.dtype):
        return None
    exact = target.body is not None and not target.mutates and target.reduction is None and \
        target.body is load(base, out_vars(target.sizes), target.dtype)
    return target if exact and rank[target.name] > rank[copy.name] else None


def _plain_copy(graph: Graph, node):
    """``(load, its buffer's producer)`` when ``node`` only loads one element of a buffer of
    its own dtype that a graph node computes or an input holds at its own storage; else None."""
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
    return body, source


def _slice_view(graph: Graph, node):
    """The indices into ``B`` of a stored copy ``node[x] = B[view(x)]`` of part of ``B``,
    one to one (``_one_to_one``); else None."""
    plain = _plain_copy(graph, node)
    if plain is None or node.layout is None or not graph.layout_of(plain[0].arg):
        return None
    body, source = plain
    variables = {id(v) for v in out_vars(node.sizes) if v.op is Op.VAR}
    used = {id(_variable_of(i)) for i in body.args} - {id(True)}
    if not _one_to_one(body.args) or used != variables or len(body.args) != len(source.sizes):
        return None
    return None if body.args == out_vars(node.sizes) else body.args


def _variable_of(index: Expr):
    """The variable of ``x`` or ``x + c``; True for a constant; else None."""
    if index.op is Op.CONST:
        return True
    if index.op is Op.VAR:
        return index
    if index.op is Op.ADD:
        ops = {a.op: a for a in index.args}
        if set(ops) == {Op.VAR, Op.CONST}:
            return ops[Op.VAR]
    return None


def _copied(graph: Graph, node, scattered: set):
    """``(B, view)`` when ``node`` is an exact copy of buffer ``B`` (same dtype, and each
    element at the storage position it has in ``B``), else None. ``view``: None when
    ``node`` has ``B``'s sizes and layout; else ``node`` reads ``B`` through a view (a
    reshape of a dense tensor, a permutation laid out as ``B`` is), ``node[x] = B[view(x)]``.
    Views, and values not stored, only where ``node`` or ``B`` is ``scattered`` into."""
    plain = _plain_copy(graph, node)
    if plain is None:
        return None
    body, source = plain
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


def _copy_back(graph: Graph, chain: str, target: str, uses: _Uses):
    """The node that ends the graph by copying ``chain`` whole into the input ``target``
    (element for element of their storage), after every other reader of ``chain``; else None."""
    for node in graph.nodes:
        if isinstance(node, ComputeNode) and node.mutates == target and not node.is_scatter:
            later = [n for n in uses.readers.get(chain, ()) if n is not node and uses.rank[n.name] > uses.rank[node.name]]
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
