"""Inlining: which buffers are stored, which are recomputed in their readers.

Takes: a lowered ``Graph``. Gives: the same graph with every compute node either
realized (``layout`` set, kept) or inlined (removed, its body substituted into
each reader), dead nodes dropped, and ``decisions``: for each compute node, why
it was stored or inlined. This is the only place such a decision is made.

The cost model, in order:
- stored: reductions, graph outputs, inputs of ATen calls, writes into inputs;
- dropped: nothing reads it;
- inlined: read at one index by one reader, unless its expression has grown past
  ``config.inline_max_body`` ops;
- stored: read at several indices or by several readers and loading more than
  ``config.inline_max_loads`` buffers of its own size (a chain of gradient sums
  through residual connections): readers in other kernels would each re-read them;
- inlined: read at several indices or by several readers, if it costs at most
  ``config.inline_max_ops`` ops (expensive math counts 4);
- stored otherwise: recomputing it would cost more than a load.
"""
from __future__ import annotations

from dataclasses import dataclass

from braze import config
from braze.ir.expr import Expr, Op, op_count, rewrite, store_cast, substitute, walk
from braze.ir.graph import ComputeNode, ExternNode, Graph, InputNode, Layout, out_vars


@dataclass(frozen=True)
class Decision:
    node: str
    stored: bool
    reason: str


def inline(graph: Graph) -> list[Decision]:
    uses = _count_uses(graph)
    bodies: dict[str, Expr] = {}  # final body of each inlined node
    decisions: list[Decision] = []
    kept = []
    for node in graph.nodes:
        if isinstance(node, ComputeNode):
            node.origins = _merged_origins(node, bodies, graph)
            node.body = _substitute_inlined(node.body, bodies, graph)
            stored, reason = _decide(node, uses.get(node.name, 0), graph)
            decisions.append(Decision(node.name, stored, reason))
            if not stored:
                if uses.get(node.name, 0):
                    bodies[node.name] = node.body
                continue
            if node.layout is None:
                node.layout = node.preferred or Layout.contiguous(node.sizes)
        kept.append(node)
    graph.nodes = kept
    graph.by_name = {}
    for node in kept:
        graph.add_name(node)
    _drop_dead(graph, decisions)
    return decisions


def _count_uses(graph: Graph) -> dict[str, int]:
    """Distinct reads of each buffer (a buffer read at three indices counts three)."""
    uses: dict[str, int] = {}
    for node in graph.nodes:
        if isinstance(node, ComputeNode):
            for e in walk(node.body):
                if e.op is Op.LOAD:
                    uses[e.arg] = uses.get(e.arg, 0) + 1
        else:
            for name in node.reads():
                uses[name] = uses.get(name, 0) + 1
    for out in graph.outputs:
        if out.buffer is not None:
            uses[out.buffer] = uses.get(out.buffer, 0) + 1
    return uses


def _decide(node: ComputeNode, uses: int, graph: Graph) -> tuple[bool, str]:
    if node.is_reduction:
        return True, "reduction"
    if node.pinned:
        return True, node.pinned
    if uses == 0:
        return False, "unused"
    cost = op_count(node.body)
    if cost > config.inline_max_body:
        return True, f"expression of {cost} ops is too large to recompute"
    if uses == 1:
        return False, "read once"
    loads = _full_size_loads(node, graph)
    if loads > config.inline_max_loads:
        return True, f"read {uses} times, loads {loads} buffers of its size"
    if cost <= config.inline_max_ops:
        return False, f"read {uses} times, cheap to recompute ({cost} ops)"
    return True, f"read {uses} times, costly to recompute ({cost} ops)"


def _full_size_loads(node: ComputeNode, graph: Graph) -> int:
    """Distinct buffers of at least the node's element count that its expression loads."""
    names = {e.arg for e in walk(node.body) if e.op is Op.LOAD}
    return sum(1 for name in names if _numel(graph, name) >= node.numel)


def _numel(graph: Graph, name: str) -> int:
    layout = graph.layout_of(name)
    return layout.numel if layout is not None else graph.producer(name).numel


def _merged_origins(node: ComputeNode, bodies: dict, graph: Graph) -> list:
    """The node's ATen ops plus those of every producer inlined into it."""
    origins = []
    for name in node.reads():
        if name in bodies:
            origins.extend(o for o in graph.producer(name).origins if o not in origins)
    origins.extend(o for o in node.origins if o not in origins)
    return origins


def _substitute_inlined(body: Expr, bodies: dict, graph: Graph) -> Expr:
    if not bodies:
        return body
    memo: dict = {}

    def visit(e: Expr, args: tuple):
        if e.op is not Op.LOAD or e.arg not in bodies:
            return None
        producer = graph.producer(e.arg)
        value = substitute(bodies[e.arg], dict(zip(out_vars(producer.sizes), args)))
        return store_cast(value, producer.dtype)
    return rewrite(body, visit, memo)


def _drop_dead(graph: Graph, decisions: list) -> None:
    """Remove stored nodes no output, mutation or extern call depends on."""
    live: set = {o.buffer for o in graph.outputs if o.buffer is not None}
    for node in graph.nodes:
        if isinstance(node, ExternNode) or (isinstance(node, ComputeNode) and node.mutates):
            live.add(node.name)
    for node in reversed(graph.nodes):
        names = _names(node)
        if names & live:
            live.update(node.reads())
    dropped = {n.name for n in graph.nodes if isinstance(n, ComputeNode) and not (_names(n) & live)}
    if not dropped:
        return
    graph.nodes = [n for n in graph.nodes if n.name not in dropped]
    for k, d in enumerate(decisions):
        if d.node in dropped:
            decisions[k] = Decision(d.node, False, "unused")


def _names(node) -> set:
    if isinstance(node, ExternNode):
        return {node.name} | {o[0] for o in node.outputs if o is not None}
    return {node.name}
