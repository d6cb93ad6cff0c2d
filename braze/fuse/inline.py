"""Inlining: which buffers are stored, which are recomputed in their readers.

Takes: a lowered ``Graph``. Gives: the same graph with every compute node either
realized (``layout`` set, kept) or inlined (removed, its body substituted into
each reader), dead nodes dropped, and ``decisions``: for each compute node, why
it was stored or inlined. This is the only place such a decision is made.

The cost model, in order:
- stored: reductions, graph outputs, inputs of ATen calls, writes into inputs;
- dropped: nothing reads it;
- stored: everything else, with ``config.one_kernel_per_op`` (bisecting);
- stored (Triton only): an expression that gathers (loads at indices it loads), read
  by a reduction of few long rows (``Target.gathers_slowly``): each program would
  wait for its gathers chunk after chunk. A loss's per-row pick from the logits, read
  by its mean, is stored by the kernel that computed the rows' max and sum;
- inlined: read at one index by one reader, or only by pointwise readers at the
  element they compute whose values all end in one expression (``t = tanh(x);
  (t + 1) * (1 - t * t)`` computes ``t`` once), unless its expression has grown
  past ``config.inline_max_body`` ops;
- stored: read at several indices or by several readers, its value compared for
  equality (``amax``'s backward: ``input == result``): two loops recomputing it need not
  round alike (in C++ one may call libmvec's vector ``sin``, the other libm's), and a
  maximum that matches no element gives a gradient of 0 / 0;
- stored: read at several indices or by several readers and loading more than
  ``config.inline_max_loads`` buffers of its own size (a chain of gradient sums
  through residual connections): readers in other kernels would each re-read them;
- inlined: read at several indices or by several readers, if recomputing it costs
  at most ``config.inline_max_ops`` cheap ops (an add or a multiply), each op
  weighed by what it costs on the graph's target (``op_cost``);
- stored otherwise: recomputing it would cost more than a load. Readers that
  land in the same kernel as a stored buffer take its value without a load.

Op costs (``op_cost``) come from the target (``Target.op_costs``): what recomputing each
op costs per element, in adds, on the C++ or the Triton target (their ``policy`` modules
say why). Costly ops count 4 in a buffer of one element (Adam's bias corrections): each
kernel that reads it computes it once, hoisted out of its loops, where storing it would
take a kernel of its own.
"""
from __future__ import annotations

from dataclasses import dataclass

from braze import config
from braze.fuse.check_domains import checks_in_domain
from braze.fuse.legality import gathers
from braze.ir import symbols
from braze.ir.expr import LEAVES, Expr, Op, const, op_count, rewrite, store_cast, substitute, walk
from braze.ir.graph import ComputeNode, ExternNode, Graph, Layout, out_vars


def op_cost(body: Expr, target, numel: int) -> int:
    """Cheap ops (adds, multiplies) that recomputing ``body``, a buffer of ``numel``
    elements, costs per element on ``target`` (for one element: ``op_count``'s flat
    weights)."""
    if numel <= 1:
        return op_count(body)
    return sum(target.op_costs.get(n.op, 1) for n in walk(body) if n.op not in LEAVES)


@dataclass(frozen=True)
class Decision:
    node: str
    stored: bool
    reason: str


def inline(graph: Graph) -> list[Decision]:
    uses = _count_uses(graph)
    sites = _sites(graph, uses)
    gathered_slowly = _read_by_few_long_rows(graph)
    compared = _compared(graph)
    bodies: dict[str, Expr] = {}  # final body of each inlined node
    decisions: list[Decision] = []
    kept = []
    empty = _empty_buffers(graph)
    for node in graph.nodes:
        if isinstance(node, ComputeNode):
            if empty:
                node.body = _without_reads_of(node.body, empty)
            node.origins = _merged_origins(node, bodies, graph)
            node.sources = _merged_sources(node, bodies, graph)
            node.body = _substitute_inlined(node.body, bodies, graph)
            stored, reason = _decide(node, sites[node.name], graph, node.name in gathered_slowly,
                                     node.name in compared)
            decisions.append(Decision(node.name, stored, reason))
            if not stored:
                if uses.get(node.name, 0):
                    bodies[node.name] = node.body
                continue
            if node.layout is None:
                node.layout = node.preferred or Layout.contiguous(node.sizes)
            if graph.checks:  # (a body inlined into its readers is guarded there)
                node.body = checks_in_domain(node.body)
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


def _sites(graph: Graph, uses: dict) -> dict[str, int]:
    """Per compute node, how many times it would be computed if it were inlined: its
    reads, or 1 where they all end in one expression (see the module docstring)."""
    readers: dict[str, list] = {}  # buffer -> a reader per read, None if not at its element
    for node in graph.nodes:
        if isinstance(node, ComputeNode):
            at_element = None if node.is_reduction else out_vars(node.sizes)
            for e in walk(node.body):
                if e.op is Op.LOAD:
                    readers.setdefault(e.arg, []).append(node if e.args == at_element else None)
    sites: dict[str, int] = {}
    ends: dict[str, str] = {}  # node -> the node whose expression its value ends in
    for node in reversed(graph.nodes):
        if isinstance(node, ComputeNode):
            rs, n = readers.get(node.name, []), uses.get(node.name, 0)
            together = len(rs) == n and None not in rs
            found = {ends[r.name] for r in rs} if together else set()
            sites[node.name] = len(found) if together else n
            single = len(found) == 1 and not (node.pinned or node.is_reduction)
            ends[node.name] = found.pop() if single else node.name
    return sites


def _read_by_few_long_rows(graph: Graph) -> set:
    """Buffers read by a reduction of few long rows that gathers slowly on the target
    (``Target.gathers_slowly``)."""
    found: set = set()
    for node in graph.nodes:
        if isinstance(node, ComputeNode) and node.is_reduction \
                and graph.target.gathers_slowly(node.numel, node.reduction.numel):
            found.update(node.reads())
    return found


def _compared(graph: Graph) -> set:
    """Float buffers whose value reaches an operand of an equality comparison (``amax``'s
    backward: ``input == result``), directly or through the pointwise nodes computed from
    them. A reduction's result is one stored value whatever its input's recomputation does,
    so its input is not followed (logsumexp's ``isinf(amax)`` leaves its input inlined)."""
    found: set = set()
    for node in reversed(graph.nodes):
        if not isinstance(node, ComputeNode):
            continue
        for e in walk(node.body):
            if e.op in (Op.EQ, Op.NE):
                found.update(x.arg for operand in e.args for x in walk(operand) if x.op is Op.LOAD)
        if node.name in found and not node.is_reduction:
            found.update(node.reads())
    return {name for name in found if isinstance(graph.producer(name), ComputeNode)
            and graph.producer(name).dtype.is_floating_point}


def _decide(node: ComputeNode, uses: int, graph: Graph, read_by_few_long_rows: bool,
            compared: bool = False) -> tuple[bool, str]:
    if node.is_reduction:
        return True, "reduction"
    if node.pinned:
        return True, node.pinned
    if uses == 0:
        return False, "unused"
    if config.one_kernel_per_op:
        return True, "one kernel per op (one_kernel_per_op)"
    if read_by_few_long_rows and gathers(node.body):
        return True, "gathers for a reduction of few long rows"
    size = op_count(node.body)
    if size > config.inline_max_body:
        return True, f"expression of {size} ops is too large to recompute"
    if uses == 1:
        return False, "read once"
    if compared:  # one value for every reader: recomputed in two loops, it may round differently
        return True, f"read {uses} times, compared for equality"
    loads = _full_size_loads(node, graph)
    if loads > config.inline_max_loads:
        return True, f"read {uses} times, loads {loads} buffers of its size"
    cost = op_cost(node.body, graph.target, node.numel)
    if cost <= config.inline_max_ops:
        return False, f"read {uses} times, cheap to recompute ({cost} ops)"
    return True, f"read {uses} times, costly to recompute ({cost} ops)"


def _full_size_loads(node: ComputeNode, graph: Graph) -> int:
    """Distinct buffers of at least the node's element count that its expression loads."""
    names = {e.arg for e in walk(node.body) if e.op is Op.LOAD}
    numel = symbols.hint(node.numel)  # a cost estimate: the compiling call's sizes decide it, unguarded
    return sum(1 for name in names if symbols.hint(_numel(graph, name)) >= numel)


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


def _merged_sources(node: ComputeNode, bodies: dict, graph: Graph) -> list:
    """The ATen graph nodes the node computes, with those of every producer inlined into it."""
    sources = [s for name in node.reads() if name in bodies for s in graph.producer(name).sources]
    return list(dict.fromkeys(sources + node.sources))


def _empty_buffers(graph: Graph) -> set:
    """Names of the buffers that hold no element."""
    names = set()
    for node in graph.nodes:
        outputs = node.outputs if isinstance(node, ExternNode) else [(node.name, None, node.layout)]
        for out in outputs:
            if out is not None and (out[2].numel if out[2] is not None else node.numel) == 0:
                names.add(out[0])
    return names


def _without_reads_of(body: Expr, empty: set) -> Expr:
    """``body`` with its loads from ``empty`` buffers read as 0. Such a load runs only on
    the side of a condition that never holds (an element of a ``slice_scatter`` outside an
    empty slice); kernels compute both sides of a condition, and the load itself must not
    touch memory (a buffer of no elements may have no memory at all)."""
    return rewrite(body, lambda e, args: const(0, e.dtype) if e.op is Op.LOAD and e.arg in empty else None)


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
