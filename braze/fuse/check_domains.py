"""Run-time checks inside a ``cat``'s, ``pad``'s or a scatter's operand, or a pooling window:
checked only in the elements eager computes.

Takes: a stored compute node's body after inlining (the bodies inlined into it included). Gives: ``checks_in_domain(body)``, the body
with each run-time check (``Op.CHECK``) that lies inside a domain branch of a ``where``
(``where(..., domain=...)``, ``ir/expr.py``) checking its value only in the lanes that take
that branch: ``check(where(taken, value, safe))``, ``safe`` being 0 for an index and 1 for
a divisor.

Why: eager computes a ``cat``'s operands, a ``pad``'s input, a ``slice_scatter``'s or
``diagonal_scatter``'s source and a pooling window's elements over their own elements. braze computes such an operand's expression in every lane of
the output and selects; in a lane the branch does not take, an index computed from the
position (``mask[arange(n)]`` padded to a multiple of 8, as CUDA's attention pads its mask)
runs past its dimension and would raise an ``IndexError`` eager never raises. A lane taken
through several paths is checked where any of them holds; one reached outside every domain
branch is checked everywhere. ``torch.where`` computes both branches everywhere in eager, so
checks under it stay as they are.
"""
from __future__ import annotations

from braze.ir.expr import Expr, Op, binary, const, rewrite, unary, walk, where


def checks_in_domain(body: Expr) -> Expr:
    nodes = walk(body)  # children first
    if not any(n.op is Op.CHECK for n in nodes) or not any(n.op is Op.WHERE and n.arg for n in nodes):
        return body
    taken = _lanes_taken(body, nodes)
    guarded = {id(n): taken[id(n)] for n in nodes if n.op is Op.CHECK and taken.get(id(n)) is not None}
    if not guarded:
        return body

    def visit(node: Expr, args: tuple):
        lanes = guarded.get(id(node))
        if lanes is None:
            return None
        value = args[0]
        safe = const(1 if node.arg[0] == "divisor" else 0, value.dtype)
        return Expr(Op.CHECK, node.dtype, (where(lanes, value, safe),), node.arg)
    return rewrite(body, visit)


_EVERYWHERE = "everywhere"


def _lanes_taken(body: Expr, nodes: list) -> dict:
    """id of each node -> the condition under which eager computes it (a bool Expr), or None
    where that is every lane. Parents first: a node's lanes are the union over its uses."""
    lanes: dict = {id(body): _EVERYWHERE}
    for node in reversed(nodes):  # (every node is reached from the root before its children)
        mine = lanes[id(node)]
        for k, arg in enumerate(node.args):
            cond = _branch_condition(node, k)
            theirs = mine if cond is None else cond if mine is _EVERYWHERE else binary(Op.AND, mine, cond)
            lanes[id(arg)] = _union(lanes.get(id(arg)), theirs)
    return {key: (None if v is _EVERYWHERE else v) for key, v in lanes.items()}


def _branch_condition(node: Expr, k: int) -> Expr | None:
    if node.op is not Op.WHERE or not node.arg or k == 0:
        return None
    cond = node.args[0]
    if k == 1:
        return cond
    return unary(Op.LOGICAL_NOT, cond) if node.arg == "both" else None


def _union(a, b):
    if a is None:
        return b
    if a is _EVERYWHERE or b is _EVERYWHERE:
        return _EVERYWHERE
    return a if a is b else binary(Op.OR, a, b)
