"""Kernel plans: what one fused kernel computes, for any backend.

Takes: the nodes of one scheduled group and the buffers other kernels (or the
caller) need from it. Gives: ``KernelPlan``: loop variables (outer, then
reduce, outermost first), and per node a ``Member``: its level, its value as an
expression over the loop variables, its reduction, and where it is stored.

In a plan, loads are in storage form ``LOAD(buffer, [position])`` (strides
applied), a value computed earlier in the same kernel is ``VALUE(node)``, and an
inner node read at a later level is recomputed there. Loops are reordered so the
largest store (or load) is contiguous innermost, then adjacent loops that every
access walks as one are merged. A scan node's plan is its own (``_scan_plan``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from braze.fuse.legality import COLUMN, INNER, REDUCTION, Nest, assign_levels, build_nest, write_index
from braze.ir import simplify as S
from braze.ir import dtypes
from braze.ir.expr import Expr, Op, cast, free_vars, rewrite, store_cast, substitute, var, walk
from braze.ir.graph import (ERROR_RECORD, ERROR_RECORD_SIZE, ComputeNode, Graph, ReduceOp, out_vars,
                            reduce_vars)


@dataclass
class Member:
    node: ComputeNode
    role: str
    level: int
    value: Expr  # over loop variables
    store: Expr | None = None  # storage position, if the buffer is written to memory
    reduce_index: Expr | None = None  # flat reduction index (argmax/argmin)

    @property
    def scatters(self) -> bool:
        """Is the store at positions read from memory (a scatter node)?"""
        return self.node.is_scatter

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def reduce_op(self) -> ReduceOp | None:
        return self.node.reduction.op if self.node.is_reduction else None

    @property
    def target(self) -> str:
        return self.node.target

    @property
    def value_dtype(self):
        """The dtype of the member's in-kernel value (a reduction's result dtype)."""
        return value_of(self.node).dtype


@dataclass
class KernelPlan:
    name: str
    outer: list  # loop VARs, outermost first
    reduce: list
    members: list
    reads: list = field(default_factory=list)  # buffers loaded from memory
    writes: list = field(default_factory=list)  # buffers stored
    dtypes: dict = field(default_factory=dict)  # buffer -> dtype
    extents: dict = field(default_factory=dict)  # buffer -> storage elements (for clamping)
    parts: list = field(default_factory=list)  # a foreach kernel: independent pointwise plans

    @property
    def is_foreach(self) -> bool:
        return bool(self.parts)

    @property
    def is_reduction(self) -> bool:
        return bool(self.reduce)

    @property
    def scatters(self) -> bool:
        return any(m.scatters for m in self.members)

    @property
    def in_place(self) -> list:
        """The existing buffers the kernel writes in place (a scatter's base, an updated input)."""
        found = []
        for m in self.members + [m for p in self.parts for m in p.members]:
            if m.node.mutates and m.node.mutates not in found:
                found.append(m.node.mutates)
        return found

    @property
    def columns(self) -> list:
        """The members that sum over the rows (``legality.COLUMN``), stored after the last row."""
        return [m for m in self.members if m.role == COLUMN]

    @property
    def scan(self) -> Member | None:
        """The member of a scan plan (``_scan_plan``), else None."""
        return self.members[0] if len(self.members) == 1 and self.members[0].node.is_scan else None

    @property
    def levels(self) -> list:
        return sorted({m.level for m in self.members})

    @property
    def origins(self) -> list:
        seen = []
        for m in self.members + [m for p in self.parts for m in p.members]:
            for o in m.node.origins:
                if o not in seen:
                    seen.append(o)
        return seen

    @property
    def sources(self) -> list:
        """The ATen graph nodes (by name) whose values the kernel computes (copies aside)."""
        return list(dict.fromkeys(s for m in self.members + [m for p in self.parts for m in p.members]
                                  for s in m.node.sources))

    def outer_numel(self) -> int:
        return math.prod(v.size for v in self.outer)

    def reduce_numel(self) -> int:
        return math.prod(v.size for v in self.reduce)

    def expressions(self) -> list:
        out = []
        for m in self.members:
            out.append(m.value)
            if m.store is not None:
                out.append(m.store)
            if m.reduce_index is not None:
                out.append(m.reduce_index)
        return out


def foreach_plan(name: str, parts: list) -> KernelPlan:
    """One launch running independent pointwise plans (named ``name_p0``, ...)."""
    plan = KernelPlan(name, [], [], [], parts=parts)
    for k, part in enumerate(parts):
        part.name = f"{name}_p{k}"
        plan.reads += [b for b in part.reads if b not in plan.reads]
        plan.writes += [b for b in part.writes if b not in plan.writes]
        plan.dtypes.update(part.dtypes)
        plan.extents.update(part.extents)
    return plan


def plan_kernel(graph: Graph, nodes: list, name: str, escaping: set) -> KernelPlan:
    if len(nodes) == 1 and nodes[0].is_scan:
        return _scan_plan(graph, nodes[0], name)
    nest = build_nest(nodes)
    verdict = nest if not isinstance(nest, Nest) else assign_levels(nodes, nest, graph)
    if not verdict.ok:  # (legality asked the same for a merge; a group of one node is planned unasked)
        what = "the nodes the scheduler fused" if len(nodes) > 1 else "a node alone"
        raise AssertionError(f"kernel {name}: no common loop nest for {what} ({verdict.reason.value}): "
                             + ", ".join(f"{n.name} {tuple(n.sizes)}" for n in nodes))
    members = _members(graph, nodes, nest, escaping)
    kvars = nest.kernel_vars()
    outer, reduce = kvars[:nest.n_outer], kvars[nest.n_outer:]
    plan = KernelPlan(name, outer, reduce, members)
    _reorder_and_merge(plan)
    _collect_buffers(plan, graph)
    return plan


def _scan_plan(graph: Graph, node: ComputeNode, name: str) -> KernelPlan:
    """A scan node's kernel: its other dimensions are the outer loops, the scanned one
    the reduce loop ``r0``, walked in order with a running value."""
    dim = node.body.arg[1]
    vs = out_vars(node.sizes)
    r = var("r0", node.sizes[dim])
    member = Member(node, REDUCTION, 1, _to_positions(substitute(node.body.args[0], {vs[dim]: r}), graph))
    member.store = node.layout.position([r if k == dim else v for k, v in enumerate(vs)])
    outer = [v for k, v in enumerate(vs) if k != dim and v.op is Op.VAR]
    plan = KernelPlan(name, outer, [r], [member])
    _collect_buffers(plan, graph)
    return plan


def _members(graph: Graph, nodes: list, nest: Nest, escaping: set) -> list:
    by_name = {n.name: n for n in nodes}
    expanded: dict = {}  # inner node -> its value with inner reads recomputed
    members = []
    for node in nodes:
        role, level = nest.roles[node.name], nest.levels[node.name]
        body = substitute(node.body, nest.maps[node.name])
        if node.is_scatter:  # SCATTER(value, indices): stored at the indices it computes
            body, written_at = body.args[0], body.args[1:]
        else:
            written_at = write_index(node, nest)
        if not node.is_reduction:
            body = unrounded(body)
        value = _resolve(body, by_name, nest, level, expanded, same_level_values=True)
        if role == INNER:
            expanded[node.name] = _resolve(body, by_name, nest, level, expanded, same_level_values=False)
        member = Member(node, role, level, value)
        if node.name in escaping or node.mutates or role == COLUMN:
            layout = graph.layout_of(node.target) if node.mutates else node.layout
            member.store = layout.position(written_at)
        if node.is_reduction and node.reduction.op in (ReduceOp.ARGMAX, ReduceOp.ARGMIN):
            rvars = reduce_vars(node.reduction.sizes)
            mapped = [nest.maps[node.name].get(v, S.as_index(0)) for v in rvars]
            member.reduce_index = S.ravel(mapped, node.reduction.sizes)
        members.append(member)
    for m in members:
        m.value = _to_positions(m.value, graph)
        if m.node.is_scatter:
            m.store = _to_positions(m.store, graph)  # its indices are loaded
    return members


def _resolve(body: Expr, members: dict, nest: Nest, level: int, expanded: dict,
             same_level_values: bool) -> Expr:
    """Replace reads of other members: ``VALUE`` where the value is live at ``level``,
    else (an inner node of an earlier level) its recomputation."""
    def visit(e: Expr, args: tuple):
        if e.op is not Op.LOAD or e.arg not in members:
            return None
        producer = members[e.arg]
        role = nest.roles[e.arg]
        if role == INNER and (nest.levels[e.arg] != level or not same_level_values):
            return store_cast(expanded[e.arg], producer.dtype)
        if producer.is_reduction and producer.dtype in dtypes.LOW_PRECISION:
            # eager returns a bf16/fp16 reduction rounded (a sum past 65504 is inf in fp16)
            return cast(value_of(producer), producer.dtype)
        return store_cast(value_of(producer), producer.dtype)
    return rewrite(body, visit)


def unrounded(body: Expr) -> Expr:
    """A pointwise body without the rounding to its stored dtype that ends it (a store casts
    it again). Readers in the kernel take a member's value unrounded, whether they read its
    live ``VALUE`` or recompute it in a later loop: every read then sees one value (a
    LayerNorm's mean and the elements it subtracts it from agree)."""
    return body.args[0] if body.op is Op.CAST and body.arg == "store" else body


def value_of(node: ComputeNode) -> Expr:
    """The in-kernel value of a member (not rounded to its stored dtype)."""
    import torch
    if node.is_reduction:
        op = node.reduction.op
        if op in (ReduceOp.ARGMAX, ReduceOp.ARGMIN):
            dtype = torch.int64
        elif op in (ReduceOp.ANY, ReduceOp.ALL):
            dtype = torch.bool
        else:
            dtype = node.body.dtype
    else:
        dtype = unrounded(node.body).dtype
    return Expr(Op.VALUE, dtype, (), node.name)


def _to_positions(e: Expr, graph: Graph) -> Expr:
    """Logical loads -> ``LOAD(buffer, [storage position])``."""
    def visit(node: Expr, args: tuple):
        if node.op is not Op.LOAD or len(args) == 1 and node.arg.startswith("@"):
            return None
        layout = graph.layout_of(node.arg)
        return Expr(Op.LOAD, node.dtype, (layout.position(args),), node.arg)
    return rewrite(e, visit)


# ----------------------------------------------------------------------------- loops

def _positions_and_other_vars(values: list, stores: list) -> tuple:
    """Storage positions of every access, and variables used anywhere else."""
    positions, other = list(stores), set()
    for root in values + stores:
        stack = [(root, root in stores)]
        seen = set()
        while stack:
            e, in_position = stack.pop()
            if (id(e), in_position) in seen:
                continue
            seen.add((id(e), in_position))
            if e.op is Op.LOAD:
                positions.append(e.args[0])
                stack.append((e.args[0], True))
            elif e.op is Op.VAR and not in_position:
                other.add(e)
            else:
                stack.extend((a, in_position) for a in e.args)
    return positions, other


def _reorder_and_merge(plan: KernelPlan) -> None:
    stores = [m.store for m in plan.members if m.store is not None]
    values = [m.value for m in plan.members] + [m.reduce_index for m in plan.members if m.reduce_index is not None]
    positions, other = _positions_and_other_vars(values, stores)
    primary = _primary_access(plan, stores, positions)
    plan.outer = _ordered(plan.outer, _column_load(plan, positions) or primary, plan.reduce)
    plan.reduce = _ordered(plan.reduce, _primary_load(plan, positions) or primary, [])
    mapping = {}
    plan.outer = _merge(plan.outer, positions, other, mapping, "x")
    plan.reduce = _merge(plan.reduce, positions, other, mapping, "r")
    if mapping:
        for m in plan.members:
            m.value = substitute(m.value, mapping)
            m.store = substitute(m.store, mapping) if m.store is not None else None
            m.reduce_index = substitute(m.reduce_index, mapping) if m.reduce_index is not None else None


def _primary_access(plan, stores, positions):
    if stores:
        return max(stores, key=lambda p: len(free_vars(p)))
    return positions[0] if positions else None


def _column_load(plan, positions):
    """A reduction's load that walks every reduce loop with a stride and some outer loop
    contiguously (a sum over W of a channels-last tensor), else None. The outer loops are
    ordered by it rather than by the stores: that loop comes innermost, and the kernel
    reads whole lines of memory along it (a column reduction) instead of one element of
    each line per row. Such a load moves a row's worth of bytes for each element a store
    writes."""
    load = _primary_load(plan, positions) if plan.reduce else None
    if load is None or any(S.coefficient(load, r) == 1 for r in plan.reduce):
        return None
    return load if any(S.coefficient(load, x) == 1 for x in plan.outer) else None


def _primary_load(plan, positions):
    rset = set(plan.reduce)
    best = [p for p in positions if free_vars(p) & rset]
    return max(best, key=lambda p: len(free_vars(p) & rset)) if best else None


def _ordered(loop_vars: list, primary, _unused) -> list:
    """Loops sorted so the primary access walks memory outermost-first (stable)."""
    if primary is None or len(loop_vars) < 2:
        return loop_vars

    def stride(v):
        k = S.coefficient(primary, v)
        return math.inf if k is None else abs(k)
    return sorted(loop_vars, key=lambda v: -stride(v))


def _merge(loop_vars: list, positions: list, other: set, mapping: dict, prefix: str) -> list:
    """Merge adjacent loops that every access walks contiguously; rename to prefix0..."""
    groups = [[v] for v in loop_vars]
    k = len(groups) - 1
    while k > 0:
        outer_v, inner_v = groups[k - 1][-1], groups[k][0]
        if _mergeable(outer_v, inner_v, groups[k], positions, other):
            groups[k - 1] = groups[k - 1] + groups[k]
            del groups[k]
        k -= 1
    result = []
    for j, group in enumerate(groups):
        size = math.prod(v.size for v in group)
        new = var(f"{prefix}{j}", size)
        result.append(new)
        suffix = 1
        for v in reversed(group):
            mapping[v] = S.mod(S.floordiv(new, suffix), v.size) if suffix * v.size != size else \
                S.floordiv(new, suffix)
            suffix *= v.size
    return [v for v in result if v.op is Op.VAR]


def _mergeable(outer_v, inner_v, inner_group, positions, other) -> bool:
    if outer_v in other or any(v in other for v in inner_group):
        return False
    inner_size = math.prod(v.size for v in inner_group)
    for p in positions:
        a, b = S.coefficient(p, outer_v), S.coefficient(p, inner_group[-1])
        if a is None or b is None:
            return False
        chain = [S.coefficient(p, v) for v in inner_group]
        if any(c is None for c in chain):
            return False
        if a != b * inner_size:
            return False
    return True


def _collect_buffers(plan: KernelPlan, graph: Graph) -> None:
    for e in walk(plan.expressions()):
        if e.op is Op.LOAD and e.arg not in plan.reads:
            plan.reads.append(e.arg)
    for m in plan.members:
        if m.store is not None and m.target not in plan.writes:
            plan.writes.append(m.target)
    for name in plan.reads + plan.writes:
        plan.dtypes[name] = graph.dtype_of(name)
        plan.extents[name] = graph.layout_of(name).storage_numel()
    if any(e.op is Op.CHECK for e in walk(plan.expressions())):
        plan.writes.append(ERROR_RECORD)  # written only when a check fails
        plan.dtypes[ERROR_RECORD], plan.extents[ERROR_RECORD] = torch.int64, ERROR_RECORD_SIZE
