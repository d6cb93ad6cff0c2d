"""The scheduler: group stored buffers into kernels.

Takes: an inlined ``Graph``. Gives: ``Schedule``: the groups in an order that
respects every dependency (each group becomes one kernel, or one ATen call), and
the fusion log: every candidate pair considered, with its score and verdict.

Candidates are producer -> consumer edges and siblings reading the same buffer,
scored by the bytes of memory traffic fusion saves. They are accepted greedily,
best first; a pair is fused only if ``braze.fuse.legality`` finds one loop nest
that computes both (same iteration space, same indices on every edge between
them) and merging does not create a cycle. A path that makes the cycle through a
node writing in place into a buffer the pair shares is reported as such
(``Reason.MUTATION``): the write must run after one and before the other.

Cycle check: the groups are kept in a topological order. Any path from group A
to a later group B visits only groups between them in that order, so a search
bounded by that window decides whether merging A and B closes a cycle; the
merged group takes A's place, with the window's descendants of A moved after it.
Cost: proportional to the window, so near-linear for local fusions.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from braze import config
from braze.fuse.legality import Reason, Verdict, check_merge, group_domain
from braze.ir import dtypes, symbols, unbacked
from braze.ir.expr import walk
from braze.ir.graph import BufferArg, ComputeNode, ExternNode, Graph
from braze.ir.collectives import starts_collective, waits


@dataclass
class FusionRecord:
    first: str
    second: str
    score: int  # bytes of memory traffic the fusion saves
    kind: str  # "producer-consumer" or "siblings"
    fused: bool
    reason: Reason
    detail: str = ""

    def __str__(self) -> str:
        verdict = "fused" if self.fused else f"not fused: {self.reason.value}"
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.first} + {self.second} [{self.kind}, saves {self.score} bytes]: {verdict}{detail}"


@dataclass(eq=False)
class Group:
    id: int
    nodes: list  # graph nodes in topological order
    extern: bool = False
    preds: set = field(default_factory=set)
    succs: set = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.nodes[0].name


@dataclass
class Schedule:
    groups: list  # in a valid execution order
    log: list  # FusionRecord per considered pair


def schedule(graph: Graph) -> Schedule:
    return Scheduler(graph).run()


class Scheduler:
    def __init__(self, graph: Graph):
        self.graph = graph
        work = [n for n in graph.nodes if isinstance(n, (ComputeNode, ExternNode))]
        self.groups = [Group(k, [n], isinstance(n, ExternNode)) for k, n in enumerate(work)]
        self.group_of = {}  # buffer or node name -> group
        for g in self.groups:
            self.group_of[g.nodes[0].name] = g
            if g.extern:
                for out in g.nodes[0].outputs:
                    if out is not None:
                        self.group_of[out[0]] = g
        self.log: list[FusionRecord] = []
        self.rank = {n.name: k for k, n in enumerate(graph.nodes)}
        self._link()
        self.order = _topological(self.groups)
        self.position = {g.id: k for k, g in enumerate(self.order)}

    # ------------------------------------------------------------------ graph

    def _link(self) -> None:
        """Edges: reads of a produced buffer, and reads of a buffer written in place in
        program order: after the scatters into it that precede the read (the scattered
        result; several scatters into one buffer run in order), before a later scatter and
        before a copy into an input (the old value)."""
        writers: dict = {}
        for g in self.groups:
            if not g.extern and g.nodes[0].mutates:
                writers.setdefault(g.nodes[0].mutates, []).append(g)
        self._chain_collectives()
        self._after_unbacked_sizes()
        for g in self.groups:
            for name in g.nodes[0].reads():
                producer = self.group_of.get(name)
                if producer is not None and producer is not g:
                    self._edge(producer, g)
                for writer in writers.get(name, ()):
                    if writer is g:
                        continue
                    if writer.nodes[0].is_scatter and self.rank[writer.nodes[0].name] < self.rank[g.nodes[0].name]:
                        self._edge(writer, g)
                    else:
                        self._edge(g, writer)

    def _chain_collectives(self) -> None:
        """Collectives run in program order, as on every other rank: a collective that
        no data orders after another is ordered after it all the same."""
        started = [g for g in self.groups if g.extern and starts_collective(g.nodes[0].target)]
        for a, b in zip(started, started[1:]):
            self._edge(a, b)

    def _after_unbacked_sizes(self) -> None:
        """A node whose sizes or code use a size known only once an op has run (``u0`` of
        ``nonzero``) runs after that op, whose result the wrapper reads it from, even where
        it reads no buffer of it (``zeros(y.shape[0])``)."""
        given = symbols.bindings()  # (a backward's unbacked sizes are its arguments)
        late = {name for name in symbols.unbacked() if name not in given}
        if not late:
            return
        binder: dict = {}
        for g in self.groups:
            used = _symbols_used(g.nodes[0]) & late
            for name in sorted(used):
                if name in binder:
                    self._edge(binder[name], g)
                elif g.extern:
                    binder[name] = g  # (the first extern that mentions it gives it: ``runtime/wrapper._bind``)

    def _edge(self, a: Group, b: Group) -> None:
        a.succs.add(b)
        b.preds.add(a)

    # ------------------------------------------------------------------ driving

    def run(self) -> Schedule:
        if config.fuse and not config.one_kernel_per_op:
            candidates = self._candidates()
            for _ in range(3):
                if not self._fuse_round(candidates):
                    break
        return Schedule([g for g in self.order if g is not None], self.log)

    def _candidates(self) -> list:
        found = {}
        readers: dict = {}
        for g in self.groups:
            node = g.nodes[0]
            for name in node.reads():
                readers.setdefault(name, []).append(g)
                producer = self.group_of.get(name)
                if producer is not None and producer is not g:
                    found[(producer.id, g.id)] = (self._bytes(name), "producer-consumer", producer, g)
        if config.fuse_horizontal:
            for name, gs in readers.items():
                for a, b in zip(gs, gs[1:]):
                    key = (a.id, b.id)
                    if key not in found:
                        found[key] = (self._bytes(name), "siblings", a, b)
        # (ranked by the sizes of this call: an order, which no size of the class depends on)
        ranked = sorted(found.values(), key=lambda c: (-symbols.hint(c[0]), abs(c[2].id - c[3].id), c[2].id))
        return ranked

    def _bytes(self, buffer: str) -> int:
        node = self.graph.producer(buffer)
        numel = node.numel if not isinstance(node, ExternNode) else _extern_numel(node, buffer)
        dtype = self.graph.dtype_of(buffer)
        return numel * (dtype.itemsize if dtype is not dtypes.INDEX else 8)

    def _fuse_round(self, candidates) -> bool:
        """Try every candidate once; later rounds retry the refused ones (their groups
        may have grown into a shape that fits) and update their log records."""
        merged_any = False
        first_round = not self.log
        for k, (score, kind, a0, b0) in enumerate(candidates):
            record = None if first_round else self.log[k]
            if record is not None and (record.fused or record.reason is Reason.SAME_KERNEL):
                continue
            a, b = self._find(a0), self._find(b0)
            if record is not None and a is b:
                continue
            verdict = self._try(a, b)
            if record is None:
                self.log.append(FusionRecord(a0.name, b0.name, score, kind, verdict.ok, verdict.reason,
                                             verdict.detail))
            else:
                record.fused, record.reason, record.detail = verdict.ok, verdict.reason, verdict.detail
            merged_any |= verdict.ok
        return merged_any

    def _try(self, a: Group, b: Group) -> Verdict:
        if a is b:
            return Verdict(False, Reason.SAME_KERNEL)
        if a.extern or b.extern:
            return Verdict(False, Reason.EXTERN)
        if self.position[a.id] > self.position[b.id]:
            a, b = b, a
        verdict = check_merge(self.graph, a.nodes, b.nodes)
        if not verdict.ok:
            return verdict
        descendants = self._descendants_before(a, b)
        if descendants is None:
            return self._cycle_verdict(a, b)
        self._merge(a, b, descendants)
        return Verdict(True)

    def _cycle_verdict(self, a: Group, b: Group) -> Verdict:
        """Why a path from ``a`` to ``b`` keeps them apart: a node on it that writes in place
        into a buffer ``a`` or ``b`` reads or writes (the scattered base that ``a`` computes
        and ``b`` reads; an input ``a`` reads before its update and ``b`` after), or else
        any other kernel between them (a cycle)."""
        touched = {name for g in (a, b) for n in g.nodes for name in (n.name, n.target, *n.reads())}
        for g in self._between(a, b):
            for n in g.nodes:
                if getattr(n, "mutates", None) in touched:
                    return Verdict(False, Reason.MUTATION, f"{n.name} writes {n.mutates} in place")
        return Verdict(False, Reason.CYCLE)

    def _between(self, a: Group, b: Group) -> list:
        """The groups on some path from ``a`` to ``b`` (each between them in order)."""
        lo, hi = self.position[a.id], self.position[b.id]

        def reach(start, step) -> dict:
            seen, stack = {}, list(start)
            while stack:
                g = stack.pop()
                if g.id not in seen and lo < self.position[g.id] < hi:
                    seen[g.id] = g
                    stack.extend(step(g))
            return seen
        down, up = reach(a.succs, lambda g: g.succs), reach(b.preds, lambda g: g.preds)
        return [g for k, g in down.items() if k in up]

    # ------------------------------------------------------------------ union and order

    def _find(self, g: Group) -> Group:
        while hasattr(g, "merged_into"):
            g = g.merged_into
        return g

    def _descendants_before(self, a: Group, b: Group):
        """Groups strictly between a and b (in order) reachable from a; None if one reaches b."""
        limit = self.position[b.id]
        seen, stack = set(), [s for s in a.succs if s is not b]
        while stack:
            g = stack.pop()
            if g.id in seen or self.position[g.id] >= limit:
                continue
            seen.add(g.id)
            if b in g.succs:
                return None
            stack.extend(g.succs)
        return seen

    def _merge(self, a: Group, b: Group, descendants: set) -> None:
        start, end = self.position[a.id], self.position[b.id]
        window = [g for g in self.order[start + 1:end] if g is not None]
        before = [g for g in window if g.id not in descendants]
        after = [g for g in window if g.id in descendants]
        a.nodes = sorted(a.nodes + b.nodes, key=lambda n: self.rank[n.name])
        b.merged_into = a
        for p in b.preds:
            p.succs.discard(b)
            if p is not a:
                p.succs.add(a)
                a.preds.add(p)
        for s in b.succs:
            s.preds.discard(b)
            if s is not a:
                s.preds.add(a)
                a.succs.add(s)
        a.succs.discard(a)
        a.preds.discard(a)
        # b's slot (and earlier ones) stay as holes, so no position outside the window moves
        placed = before + [a] + after
        self.order[start:end + 1] = placed + [None] * (end - start + 1 - len(placed))
        for k, g in enumerate(placed, start):
            self.position[g.id] = k


def _extern_numel(node: ExternNode, buffer: str) -> int:
    for out in node.outputs:
        if out is not None and out[0] == buffer:
            return out[2].numel
    return 0


__all__ = ["schedule", "Schedule", "Group", "FusionRecord", "Reason", "group_domain"]


def _symbols_used(node) -> set:
    """The size symbols in a node's sizes, loop extents, constants and ATen arguments."""
    found: set = set()

    def add(value) -> None:
        if symbols.is_symbolic(value) or isinstance(value, unbacked.Condition):
            found.update(value.symbols())
        elif isinstance(value, (list, tuple)):
            for v in value:
                add(v)
        elif isinstance(value, BufferArg):
            add((value.sizes, value.strides, value.offset))
    add(node.sizes)
    if isinstance(node, ComputeNode):
        add(node.reduction.sizes if node.reduction is not None else ())
        for e in walk(node.body) if node.body is not None else ():
            add(e.arg)
    else:
        add((node.args, tuple(node.kwargs.values()), [out[2].sizes for out in node.outputs if out is not None]))
        found.update([node.value_of] if node.value_of else [])
    return found


def _topological(groups: list) -> list:
    """``groups`` in an order that respects every edge, as close to the given order as
    possible. Graph order already respects producer edges; a read of an input's old
    value may come after the node that overwrites it (``step.add_(1)`` then a read of
    ``step`` inlined from before the add) and moves ahead of that write. The wait of a
    collective moves down to just before its first reader: what runs in between
    overlaps the communication."""
    waiting = {g.id: len(g.preds) for g in groups}
    ready = [_priority(g) for g in groups if not g.preds]
    heapq.heapify(ready)
    by_id = {g.id: g for g in groups}
    order = []
    while ready:
        g = by_id[heapq.heappop(ready)[1]]
        order.append(g)
        for s in g.succs:
            waiting[s.id] -= 1
            if not waiting[s.id]:
                heapq.heappush(ready, _priority(s))
    if len(order) != len(groups):
        raise RuntimeError("braze: a cycle between reads of an input and its overwrite")
    return order


def _priority(g: Group) -> tuple:
    """Where ``g`` goes among the ready groups: its place in the program, or a wait's
    first reader's (the last place when nothing in the graph reads it)."""
    if g.extern and waits(g.nodes[0].target):
        return (min((s.id for s in g.succs), default=math.inf), g.id)
    return (g.id, g.id)
