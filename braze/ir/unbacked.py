"""Sizes known only once the graph runs: decisions on them, without guards.

Takes: a ``symbols.Context`` whose ``unbacked`` symbols (Dynamo's ``u0``: the size of a
``nonzero``'s result, an ``item()``) the wrapper reads from an op's result during the call,
after the variant was picked, so no guard on them can be checked. Gives: the rules every
decision on such a symbol follows. One its range does not settle is taken as if it were at
least 2, as PyTorch's size-oblivious tracing did (``u0 == 1`` is false, so the code is the
general one, a loop that runs once or never for such a size); an equality still open is
false; any other raises ``UnbackedDecision``, naming the symbol, what it stands for and the
line that asked. Code that has a general path says which (``decide``, ``unbacked_in``).
And ``Condition``, a comparison of sizes left for the wrapper to evaluate (an assertion).
"""
from __future__ import annotations

from dataclasses import dataclass

from braze.ir.symbols import (_CONTEXT, _HOLDS, _PYTHON, INF, Context, Size, _compare, bounds_of, known, symbol_names,
                              text_of)

class UnbackedDecision(Exception):
    """A decision the ranges do not settle on a symbol known only once the graph runs (the
    size of a ``nonzero``'s result): no guard can be checked before the call."""

    def __init__(self, name: str, meaning: str, condition: str, where: str):
        self.name, self.meaning, self.condition, self.where = name, meaning, condition, where
        super().__init__(f"{where} decided {condition} on {name} ({meaning}), a size known only once the graph "
                         "runs; no guard can check it before the call")


@dataclass(frozen=True)
class Condition:
    """``a op b`` on sizes, left undecided: a run-time assertion (Dynamo's ``_assert_scalar``)
    whose text (``repr``, in the language in force) the wrapper evaluates at each call."""
    a: object
    op: str
    b: object

    def symbols(self) -> set:
        return symbol_names(self.a) | symbol_names(self.b)

    def __repr__(self):
        return f"({text_of(self.a)} {self.op} {text_of(self.b)})"


def size_oblivious(diff: Size, op: str, context: Context) -> bool:
    """``diff op 0`` on a symbol known only once the graph runs, where its range does not
    decide: decided as if each such symbol were at least 2 (as PyTorch traced the graph:
    the code for a size of 0 or 1 is the general code, a loop that runs none or once);
    an equality still open is false (the general code); any other decision raises."""
    oblivious = dict(context.ranges)
    for name in diff.symbols() & set(context.unbacked):
        lo, hi = oblivious.get(name, (0, INF))
        oblivious[name] = (max(lo, 2), max(hi, 2))
    proven, disproven = _HOLDS[op](*bounds_of(diff, oblivious))
    if proven or disproven:
        return proven
    if op in ("==", "!="):
        return op == "!="
    context.add_guard(diff, op)  # (raises UnbackedDecision)
    raise AssertionError("unreachable")


def unbacked_in(x) -> bool:
    """Does ``x`` rest on a symbol known only once the graph runs (``Context.unbacked``)?"""
    context = _CONTEXT.get()
    return isinstance(x, Size) and context is not None and bool(x.symbols() & set(context.unbacked))


def decide(a, op: str, b, unbacked: bool) -> bool:
    """``a op b``, guarded as any comparison is; but where it rests on a symbol known only
    once the graph runs (``Context.unbacked``) and the ranges do not settle it, ``unbacked``:
    the caller's choice that is right for every value (the general code)."""
    diff = a - b
    context = _CONTEXT.get()
    if isinstance(diff, Size) and context is not None and diff.symbols() & set(context.unbacked):
        outcome = known(a, op, b)
        return unbacked if outcome is None else outcome
    return _compare(diff, 0, op) if isinstance(diff, Size) else _PYTHON[op](diff, 0)
