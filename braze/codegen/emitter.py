"""The text side of both code generators, behind one small interface.

Takes: statements of generated source (text) and the indents they go at, prefixes of
names, and IR expressions as printed by a backend. Gives:

- ``Emitter``: the lines of one generated function (or of a part of one), the indent
  unit of its language (``deeper`` and ``shallower`` step an indent by it), and fresh
  names numbered by one counter (``fresh``; ``assign`` declares one on a line of its own).
  Indents are explicit strings, handed down the calls that emit nested code.
- ``PrintScope``: the base of the backends' expression printers (``cpp.exprs.CPrinter``,
  ``triton.exprs.Printer``): statements into an ``Emitter`` at one indent, and ``memo``,
  what each subexpression printed in this scope (or ``preset`` from an enclosing one)
  reads as, so a common subexpression is written once. The memo is keyed by
  ``id(expression)``: IR expressions are interned, so an expression's identity is its
  value.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar

Printed = TypeVar("Printed")  # how a backend holds a printed expression: C text, a Triton Term

CPP_INDENT = "  "
PYTHON_INDENT = "    "


class Emitter:
    """Generated lines, their language's indent unit, and a counter of fresh names."""

    def __init__(self, indent_unit: str, lines: list[str] | None = None,
                 counter: Iterator[int] | None = None) -> None:
        """``lines``: lines already written (a function's head); ``counter``: the numbers of
        another emitter's names, to go on with them (the parts of a foreach kernel)."""
        self.indent_unit = indent_unit
        self.lines: list[str] = [] if lines is None else lines
        self.counter: Iterator[int] = itertools.count() if counter is None else counter

    def emit(self, indent: str, text: str) -> None:
        """Append the line ``text`` at ``indent``."""
        self.lines.append(indent + text)

    def emit_lines(self, indent: str, texts: Iterable[str]) -> None:
        """Append each of ``texts`` at ``indent``."""
        self.lines.extend(indent + text for text in texts)

    def deeper(self, indent: str, levels: int = 1) -> str:
        """``indent`` moved in by ``levels`` units."""
        return indent + self.indent_unit * levels

    def shallower(self, indent: str, levels: int = 1) -> str:
        """``indent`` moved out by ``levels`` units."""
        return indent[:len(indent) - len(self.indent_unit) * levels]

    def fresh(self, prefix: str) -> str:
        """A name not given before by this counter: ``prefix`` and the next number."""
        return f"{prefix}{next(self.counter)}"

    def assign(self, indent: str, prefix: str, text: str, declaration: str = "", end: str = "") -> str:
        """A fresh name set to ``text`` on a line of its own (``{declaration}{name} = {text}{end}``:
        ``const float t3 = ...;`` in C++, ``tmp3 = ...`` in Triton); gives the name."""
        name = self.fresh(prefix)
        self.emit(indent, f"{declaration}{name} = {text}{end}")
        return name

    def text(self) -> str:
        """The lines, joined."""
        return "\n".join(self.lines)


class PrintScope(Generic[Printed]):
    """Statements for expressions, into ``emitter`` at ``indent``, each distinct
    subexpression once: ``memo`` maps ``id(expression)`` to how it reads here."""

    def __init__(self, emitter: Emitter, indent: str, preset: Mapping[int, Printed] | None = None) -> None:
        """``preset``: the expressions an enclosing scope computed already."""
        self.emitter, self.indent = emitter, indent
        self.memo: dict[int, Printed] = dict(preset or {})
