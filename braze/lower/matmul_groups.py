"""Grouped matrix products: several products of one left operand run as one.

Takes: the FX graph being lowered and a matrix product in it. Gives: ``group_of``,
the group the product belongs to (or None), and ``lower_member``, its columns of
the group's one product.

``mm(x, W1ᵀ)``, ``mm(x, W2ᵀ)``, ``mm(x, W3ᵀ)`` (a transformer's query, key and value
projections; LLaMA's gate and up) become ``mm(x, cat([W1, W2, W3])ᵀ)``, each
original product a column slice of it; ``addmm`` groups concatenate their biases
too. One product instead of three: fewer cuBLAS calls, whose host time (several times
a plain kernel launch's) is what inference at small batches waits for, and one
wider matrix whose tiles fill the GPU better. The concatenation is one kernel per
call, fused with whatever produces the weights (autocast's casts to bf16).

Only inference graphs are grouped: a training forward saves its products' views
for the backward, which was traced with their strides as separate tensors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from braze.lower.core import LOWERINGS, TensorValue, sizes_of
from braze.lower.indexing import piecewise
from braze.lower.views import slice_value

aten = torch.ops.aten
PRODUCTS = (aten.mm.default, aten.addmm.default)
TRANSPOSES = (aten.permute.default, aten.t.default)
SAME_VALUE_OPS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten._to_copy.default,
                  torch.ops.prims.convert_element_type.default)
_ANCESTOR_LIMIT = 16  # nodes a weight's or bias's producer chain may have


@dataclass
class Group:
    members: list  # FX product nodes, in graph order
    columns: list = field(default_factory=list)  # each member's TensorValue, once lowered


def group_of(ctx, node) -> Group | None:
    """The group of ``node``, a matrix product, in the graph ``ctx`` lowers."""
    if ctx.matmul_groups is None:
        ctx.matmul_groups = find_groups(ctx.gm.graph) if ctx.group_matmuls else {}
    return ctx.matmul_groups.get(node)


def find_groups(graph: torch.fx.Graph) -> dict:
    """{product node: Group} for every left operand read by two or more groupable products."""
    order = {node: k for k, node in enumerate(graph.nodes)}
    by_operand: dict = {}
    for node in graph.nodes:
        if node.op == "call_function" and node.target in PRODUCTS and _groupable(node):
            by_operand.setdefault((node.target, _same_value(_left(node)), node.meta["val"].dtype), []).append(node)
    groups = {}
    for members in by_operand.values():
        if len(members) > 1 and _independent(members, order):
            group = Group(members)
            groups.update({m: group for m in members})
    return groups


def lower_member(ctx, group: Group, node) -> TensorValue:
    """``node``'s columns of the group's product (built when its first member is lowered)."""
    if not group.columns:
        group.columns = _lower_group(ctx, group)
    return group.columns[group.members.index(node)]


def _lower_group(ctx, group: Group) -> list:
    from braze.lower.externs import bias_in_kernels  # (externs imports this module)
    members = group.members
    weights = [ctx.lower_ahead(_weight(m)) for m in members]
    widths = [w.sizes[0] for w in weights]
    stacked = ctx.stored(_concatenated(ctx, weights), reason="the weights of grouped matrix products")
    right = LOWERINGS[aten.permute.default](ctx, stacked, [1, 0])
    left = ctx.env[_left(members[0])]
    first = members[0].meta["val"]  # (its row count may be a symbol: no int taken from it)
    meta = first.new_empty((first.shape[0], sum(m.meta["val"].shape[1] for m in members)))
    with_bias = members[0].target is aten.addmm.default
    biases = [ctx.lower_ahead(m.args[0]) for m in members] if with_bias else []
    split = with_bias and all(bias_in_kernels(m) for m in members)
    if with_bias and not split:
        product = ctx.extern(aten.addmm.default, (_concatenated(ctx, biases), left, right), {}, meta=meta)
    else:
        product = ctx.extern(aten.mm.default, (left, right), {}, meta=meta)
    columns, start = [], 0
    for member, width, bias in zip(members, widths, biases or [None] * len(members)):
        part = slice_value(product, 1, start, start + width)
        columns.append(ctx.as_node(member, LOWERINGS[aten.add.Tensor], part, bias) if split else part)
        start += width
    return columns


def _concatenated(ctx, values: list) -> TensorValue:
    """``values`` one after the other along their first dimension."""
    pieces, start = [], 0
    for value in values:
        pieces.append((value, start, value.sizes[0]))
        start += value.sizes[0]
    return piecewise(ctx, pieces, 0, values[0].dtype, (start, *values[0].sizes[1:]))


def _same_value(node):
    """A key equal for nodes that compute the same value: ``F.linear`` of a 3-D input views
    it as 2-D once per product, and autocast casts it to bf16 once per product."""
    if isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in SAME_VALUE_OPS:
        args = tuple(tuple(a) if isinstance(a, list) else a for a in node.args[1:])
        return (node.target, _same_value(node.args[0]), args, tuple(sorted(node.kwargs.items())))
    return node


def _left(node):
    return node.args[1] if node.target is aten.addmm.default else node.args[0]


def _weight(node):
    """``W`` of a product whose right operand is ``Wᵀ``."""
    return node.args[-1].args[0]


def _groupable(node) -> bool:
    """A 2-D product ``x @ Wᵀ`` (``+ b`` with a 1-D bias, unit scales) whose row of
    results stays 16-byte aligned at every column offset."""
    val, right = node.meta.get("val"), node.args[-1]
    if not isinstance(val, torch.Tensor) or val.dim() != 2 or not isinstance(right, torch.fx.Node):
        return False
    if right.target not in TRANSPOSES or right.target is aten.permute.default and list(right.args[1]) != [1, 0]:
        return False
    if (sizes_of(val)[1] * val.element_size()) % 16:
        return False
    if node.target is aten.addmm.default:
        bias = node.args[0]
        scales_one = node.kwargs.get("alpha", 1) == 1 and node.kwargs.get("beta", 1) == 1
        return scales_one and isinstance(bias, torch.fx.Node) and bias.meta["val"].dim() == 1
    return True


def _independent(members: list, order: dict) -> bool:
    """Can every member's weight and bias be computed before the first member? Their
    producers must be few, free of side effects and randomness, and read no member."""
    first = order[members[0]]
    for member in members:
        sources = [_weight(member)] + ([member.args[0]] if member.target is aten.addmm.default else [])
        if any(not _computable_before(s, first, order, set(members)) for s in sources):
            return False
    return True


def _computable_before(node, first: int, order: dict, members: set) -> bool:
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        if n in members:
            return False
        if order[n] < first:
            continue  # lowered by then
        if n.op != "call_function" or not _pure(n.target) or len(seen) >= _ANCESTOR_LIMIT:
            return False
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return True


def _pure(target) -> bool:
    schema = getattr(target, "_schema", None)
    if schema is None or schema.is_mutable:
        return False
    return torch.Tag.nondeterministic_seeded not in getattr(target, "tags", ())
