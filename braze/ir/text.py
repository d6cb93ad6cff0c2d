"""The text form of IR expressions: one line, or several with shared parts named.

Takes: ``Expr`` nodes. Gives: ``to_text(e)`` (``exp(buf0[x0, x1]) * 2.0``, memoised on
the node) and ``format_body(root)`` (lines ``t3 = exp(t1)``, each shared subexpression
bound once), as ``Graph.to_text`` and bug reports print them. Symbolic sizes print as
Python (``s0*64``).
"""
from __future__ import annotations

from braze.ir import dtypes, symbols
from braze.ir.expr import APPROX, ROUNDED, Expr, Op, walk


_INFIX = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.TRUEDIV: "/", Op.FLOORDIV: "//", Op.MOD: "%",
          Op.EQ: "==", Op.NE: "!=", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">=",
          Op.AND: "&", Op.OR: "|", Op.XOR: "^", Op.LSHIFT: "<<", Op.RSHIFT: ">>"}


def to_text(e: Expr) -> str:
    """A one-line readable form, e.g. ``exp(load(buf0, [x0, x1])) * 2.0``."""
    memo = e.memo()
    text = memo.get("text")
    if text is None:
        text = _format(e)
        memo["text"] = text
    return text


def _format(e: Expr) -> str:
    op, args = e.op, e.args
    if op is Op.CONST:
        if symbols.is_symbolic(e.arg):
            return symbols.text_of(e.arg, "python")
        return repr(e.arg) if not isinstance(e.arg, bool) else str(e.arg)
    if op is Op.VAR:
        return e.arg[0]
    if op is Op.VALUE:
        return f"<{e.arg}>"
    if op is Op.LOAD:
        return f"{e.arg}[{', '.join(to_text(a) for a in args)}]"
    if op is Op.CAST:
        return f"{dtypes.short(e.dtype)}({to_text(args[0])})"
    if op is Op.CHECK:
        return _check_text(e, to_text(args[0]))
    if op in _INFIX and e.arg != ROUNDED:
        return f"({to_text(args[0])} {_INFIX[op]} {to_text(args[1])})"
    return f"{_name(e)}({', '.join(to_text(a) for a in args)})"


def _check_text(e: Expr, value: str) -> str:
    kind, site, size = e.arg
    return f"check_{kind}({value}{f', {size}' if kind != 'divisor' else ''}; site {site})"


def format_body(root: Expr, name: str = "out") -> list[str]:
    """Several lines with shared subexpressions bound once: ``t3 = exp(t1)``."""
    uses: dict = {}
    for node in walk(root):
        for child in node.args:
            uses[id(child)] = uses.get(id(child), 0) + 1
    names: dict = {}
    lines: list[str] = []

    def show(node: Expr) -> str:
        if id(node) in names:
            return names[id(node)]
        if node.op in (Op.CONST, Op.VAR):
            return to_text(node)
        saved = {}
        for child in node.args:
            saved[id(child)] = show(child)
        text = _format_with(node, saved)
        if uses.get(id(node), 0) > 1 and node.op is not Op.LOAD or len(text) > 100:
            label = f"t{len(lines)}"
            lines.append(f"{label} = {text}")
            names[id(node)] = label
            return label
        return text

    for node in walk(root):
        if uses.get(id(node), 0) > 1 and node.op not in (Op.CONST, Op.VAR):
            show(node)
    lines.append(f"{name} = {show(root)}")
    return lines


def _format_with(e: Expr, shown: dict) -> str:
    args = [shown[id(a)] for a in e.args]
    op = e.op
    if op is Op.LOAD:
        return f"{e.arg}[{', '.join(args)}]"
    if op is Op.CAST:
        return f"{dtypes.short(e.dtype)}({args[0]})"
    if op is Op.CHECK:
        return _check_text(e, args[0])
    if op in _INFIX and e.arg != ROUNDED:
        return f"({args[0]} {_INFIX[op]} {args[1]})"
    return f"{_name(e)}({', '.join(args)})"


_FLAGGED_NAMES = {ROUNDED: "mul_rn", APPROX: "cuda_rsqrt", "rand": "rand", "randn": "randn"}


def _name(e: Expr) -> str:
    return _FLAGGED_NAMES.get(e.arg, e.op.value) if isinstance(e.arg, str) else e.op.value
