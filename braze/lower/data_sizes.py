"""Sizes an op decides from its input's values: ``nonzero``, ``x[mask]``, ``masked_select``,
``unique``...

Takes: the lowering context and an FX node whose result's size is known only once the op
has run (Dynamo traces it, with ``capture_dynamic_output_shape_ops``, as an unbacked symbol
``u0``), and the nodes Dynamo adds around such a size: ``sym_size``, comparisons of sizes,
``_assert_scalar`` and ``sym_constrain_range``. Gives: the op as an extern call into ATen,
whose result's size is a symbol of the graph like any other (``ir/symbols.py``), bound by
the wrapper from the result once the op has run (``runtime/wrapper.py``; its range from the
ShapeEnv, ``runtime/symbolic.py``); the assertions on such sizes proven by those ranges, or
refused with the condition and the symbol named.

A graph compiled per concrete shape has no symbols: there the op is refused, as before, and
the graph runs eagerly.
"""
from __future__ import annotations

import operator

import torch

from braze.ir import symbols, unbacked
from braze.ir.traced import sizes_of
from braze.lower.core import LoweringError, Unsupported, describe_inputs, register

aten = torch.ops.aten

_SIZED_BY_VALUES = {getattr(aten, name) for name in (
    "_unique", "_unique2", "unique_dim", "unique_consecutive", "nonzero", "masked_select", "bincount",
    "repeat_interleave", "one_hot", "index")}
_COMPARISONS = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=", operator.eq: "==",
                operator.ne: "!="}


def values_decide_size(node, target) -> bool:
    """``nonzero``, ``_unique``, ``masked_select``...: an output's size is known only once the
    op has run. Tracing gives such an output a symbolic size, or on some versions a fixed
    guess (``_unique`` in the backward of ``index_fill`` was traced as size 1 under torch 2.11,
    where the tag alone did not catch it). These have a fixed size when given:
    ``index`` with integer indices, ``one_hot`` with ``num_classes``, ``repeat_interleave`` with
    ``output_size``."""
    packet, args, kwargs = target.overloadpacket, node.args, node.kwargs
    if torch.Tag.dynamic_output_shape not in target.tags and packet not in _SIZED_BY_VALUES:
        return False
    if packet is aten.index:
        masks = [i for i in args[1] if isinstance(i, torch.fx.Node)
                 and i.meta["val"].dtype in (torch.bool, torch.uint8)]
        return bool(masks)
    if packet is aten.one_hot:
        return (args[1] if len(args) > 1 else kwargs.get("num_classes", -1)) == -1
    if packet is aten.repeat_interleave:
        return kwargs.get("output_size") is None
    return True


def sized_by_values(ctx, node, target, args, kwargs):
    """The op through ATen, where its sizes are symbols the wrapper binds from its result
    (``symbols.unbacked``); else a ``LoweringError``: a compile per shape has no symbol to
    give them."""
    late = symbols.unbacked()
    if not symbols.active() or not any(s in late for s in _symbols_in(node.meta.get("val"))):
        raise LoweringError(target, f"the size of its result depends on its input's values (traced as "
                            f"{_traced_sizes(node)}); braze compiles such a size only as the symbol Dynamo traces "
                            "it as (unbacked), so it cannot compile this graph", describe_inputs(node))
    return ctx.extern(target, args, kwargs)


@register(aten._local_scalar_dense.default)
def _item(ctx, x):
    """``item()`` traced as an unbacked symbol (``capture_scalar_outputs``): the value
    through ATen, which the wrapper names ``u0`` for the sizes and code after it."""
    traced = ctx.out
    name = str(traced.node.expr) if isinstance(traced, torch.SymInt) else ""
    if name not in symbols.unbacked():
        raise Unsupported("a scalar no size uses")
    value = ctx.extern(aten._local_scalar_dense.default, (x,), {})
    ctx.graph.nodes[-1].value_of = name
    return value


_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def condition(node, target, args):
    """A ``SymBool`` node's value: a ``unbacked.Condition`` where every reader asserts it
    (or negates it for an assertion: ``torch._check(n != 3)`` traced by torch 2.11 as
    ``sym_not(n == 3)``), else None."""
    if not _asserted(node):
        return None
    if target is torch.sym_not and isinstance(args[0], unbacked.Condition):
        return unbacked.Condition(args[0].a, _NEGATED[args[0].op], args[0].b)
    if target not in _COMPARISONS:
        return None
    return unbacked.Condition(args[0], _COMPARISONS[target], args[1])


def _asserted(node) -> bool:
    """Is every reader of ``node`` an assertion, directly or through ``sym_not``?"""
    return bool(node.users) and all(
        user.target is aten._assert_scalar.default or user.target is torch.sym_not and _asserted(user)
        for user in node.users)


@register(aten._assert_scalar.default)
def _assert_scalar(ctx, holds, message):
    """Dynamo's assertion on sizes (``u0 >= 0``, ``u0 <= 40`` for ``x[mask]`` of 40
    elements, or the user's ``torch._check``): nothing to run where the symbols' ranges prove
    it (those ranges are the ShapeEnv's, which these assertions refined); else ATen's
    ``_assert_scalar`` in the wrapper, on the condition evaluated at each call."""
    if isinstance(holds, unbacked.Condition):
        if symbols.known(holds.a, holds.op, holds.b) is True:
            return None
        return ctx.extern(aten._assert_scalar.default, (holds, message), {})
    if holds is True:
        return None
    raise LoweringError(aten._assert_scalar.default, f"an assertion braze cannot read: {holds!r} ({message!r})",
                        describe_inputs(ctx.node))


@register(aten.sym_constrain_range.default, aten.sym_constrain_range_for_size.default)
def _constrain_range(ctx, size, min=None, max=None):
    """A range for a size: already among the ShapeEnv's ranges the compile reads."""
    return None


def _symbols_in(val) -> set:
    """The size symbols of a traced value's sizes (of each tensor of a tuple)."""
    out = set()
    for v in val if isinstance(val, (list, tuple)) else [val]:
        if isinstance(v, torch.Tensor):
            for n in sizes_of(v):
                out |= symbols.symbol_names(n)
    return out


def _traced_sizes(node) -> str:
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    return ", ".join(str(sizes_of(v)) for v in vals if isinstance(v, torch.Tensor)) or "no tensor"
