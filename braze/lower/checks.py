"""Where a compiled graph must raise as eager raises: the record of each run-time check.

Takes: the lowering context of the node being lowered. Gives: ``check_site``, which
records what a failing ``Op.CHECK`` raises (``braze.ir.graph.CheckSite``: eager's exception
type and wording for the op the user called) and returns its number, the ``site`` the
check's expression carries; ``user_op``, the op the user called before decompositions;
``wraps_negative``, whether that op takes -1 for the last element; ``trusted``, whether the
node's indices need no check.
"""
from __future__ import annotations

from braze.ir.graph import CheckSite

# eager's exception for an index out of range, by the user's op (IndexError elsewhere), and
# its wording where it names no index
_RUNTIME_ERROR_OPS = frozenset({"gather", "scatter", "scatter_add", "scatter_reduce", "index_add"})
_UNNAMED_INDEX_OPS = frozenset({"index_select", "embedding"})
# ops whose negative indices eager refuses where the op braze lowers them as would wrap them
_POSITIVE_INDEX_OPS = _RUNTIME_ERROR_OPS | _UNNAMED_INDEX_OPS | {"index_copy"}


def user_op(ctx) -> str:
    """The name of the op the user called (``embedding``), before braze's and AOTAutograd's
    decompositions made the node in hand (``index_select``)."""
    op = ctx.node.meta.get("original_aten") or ctx.node.target
    return getattr(op, "_opname", None) or str(op).split(".")[-2 if str(op).count(".") > 1 else -1]


def wraps_negative(ctx) -> bool:
    """Does the user's op take ``-1`` for the last element (``x[idx]``, ``index_put``), or
    refuse it (``gather``, ``index_select``, ``scatter_add``, ``index_add``, ``index_copy``)?"""
    return user_op(ctx) not in _POSITIVE_INDEX_OPS


def trusted(ctx) -> bool:
    """Is the node an ATen ``_unsafe_*`` op, whose indices a decomposition computed in range
    (an upsample's, an embedding's backward: its forward checked them)?"""
    return getattr(ctx.node.target, "__name__", "").startswith("_unsafe")


def check_site(ctx, kind: str, dim: int = 0, size: int = 0, shape=()) -> int:
    """Record what a failing check raises (``CheckSite``); returns its number."""
    op = user_op(ctx)
    exception = "RuntimeError" if kind == "divisor" or op in _RUNTIME_ERROR_OPS else "IndexError"
    message = "index out of range in self" if op in _UNNAMED_INDEX_OPS else ""
    ctx.graph.checks.append(CheckSite(kind, op, exception, dim, size, tuple(shape), message))
    return len(ctx.graph.checks) - 1
