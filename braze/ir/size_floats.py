"""Python floats computed from size symbols: what Dynamo traces as a ``SymFloat``.

Takes: ``Size``s and Python numbers, through the arithmetic a traced graph does on them
(``torch.sym_float(s0)``, ``2.0 / (f - 1.0)`` in a variance's backward, ``s0 * 0.5``).
Gives: ``SizeFloat``, the same arithmetic kept as a small tree, op by op in the graph's
order, so that a kernel computes from its size arguments the double that Python computes
for one shape (``ir/expr.size_float`` turns it into float64 IR: an int operand becomes a
float first, as in Python, and a product is never fused with a sum). An op that uses it
rounds it as it rounds a Python float (``expr.const``).

What the tree does not hold (``float()``, a comparison, ``//``, ``**``) is decided by the
values of the call being compiled: each symbol it reads is specialized (guarded equal to
its value, ``symbols``) and the answer is a plain float. A division guards its divisor
non-zero, where Python raises: one class never mixes sizes that raise with sizes that do
not. ``text`` is the Python source of the value over the symbols (for guards and messages).
"""
from __future__ import annotations

import math

from braze.ir import symbols
from braze.ir.symbols import Size

OPS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}


class SizeFloat:
    """``op`` "float" (``args``: one ``Size``), "neg" or "sqrt" (one ``SizeFloat``), or a binary
    op of ``OPS`` (``SizeFloat``s or floats)."""

    __slots__ = ("op", "args")

    def __init__(self, op: str, args: tuple):
        self.op, self.args = op, args

    @staticmethod
    def of(size) -> "SizeFloat":
        return size if isinstance(size, SizeFloat) else SizeFloat("float", (size,))

    # ---------------------------------------------------------------- arithmetic
    def _binary(self, op: str, other, reflected: bool = False):
        other = _operand(other)
        if other is None:
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        if op == "truediv":
            _guard_nonzero(b)
        return SizeFloat(op, (a, b))

    def __add__(self, other): return self._binary("add", other)
    def __radd__(self, other): return self._binary("add", other, True)
    def __sub__(self, other): return self._binary("sub", other)
    def __rsub__(self, other): return self._binary("sub", other, True)
    def __mul__(self, other): return self._binary("mul", other)
    def __rmul__(self, other): return self._binary("mul", other, True)
    def __truediv__(self, other): return self._binary("truediv", other)
    def __rtruediv__(self, other): return self._binary("truediv", other, True)

    def __neg__(self):
        return SizeFloat("neg", (self,))

    def __pos__(self):
        return self

    def __sym_float__(self):  # ``torch.sym_float``
        return self

    def __sym_sqrt__(self):  # ``torch._sym_sqrt``: IEEE's square root, correctly rounded everywhere
        if self.value() < 0:
            raise ValueError(f"math domain error: sqrt({self.text()})")
        return SizeFloat("sqrt", (self,))

    # ---------------------------------------------------------------- decided by the hints
    def __float__(self):
        return specialize(self)

    def __bool__(self):
        return specialize(self) != 0

    def __abs__(self):
        return abs(specialize(self))

    def __floordiv__(self, other): return specialize(self) // _plain(other)
    def __rfloordiv__(self, other): return _plain(other) // specialize(self)
    def __mod__(self, other): return specialize(self) % _plain(other)
    def __rmod__(self, other): return _plain(other) % specialize(self)
    def __pow__(self, other): return specialize(self) ** _plain(other)
    def __rpow__(self, other): return _plain(other) ** specialize(self)
    def __lt__(self, other): return specialize(self) < _plain(other)
    def __le__(self, other): return specialize(self) <= _plain(other)
    def __gt__(self, other): return specialize(self) > _plain(other)
    def __ge__(self, other): return specialize(self) >= _plain(other)
    def __eq__(self, other): return specialize(self) == _plain(other)
    def __ne__(self, other): return specialize(self) != _plain(other)
    __hash__ = object.__hash__

    # ---------------------------------------------------------------- reading
    def value(self, env: dict | None = None) -> float:
        """The double Python computes, for the symbols' values ``env`` (default: the hints
        of the call being compiled; no guard is added)."""
        if self.op == "float":
            size = self.args[0]
            return float(symbols.hint(size) if env is None else symbols.value_of(size, env))
        args = [a.value(env) if isinstance(a, SizeFloat) else a for a in self.args]
        if self.op == "neg":
            return -args[0]
        if self.op == "sqrt":
            return math.sqrt(args[0])
        a, b = args
        return {"add": a + b, "sub": a - b, "mul": a * b}[self.op] if self.op != "truediv" else a / b

    def sizes(self) -> list:
        """The ``Size``s it reads."""
        if self.op == "float":
            return [self.args[0]]
        return [s for a in self.args if isinstance(a, SizeFloat) for s in a.sizes()]

    def text(self, lang: str = "python") -> str:
        """Python; ``lang`` "plain" names no derived size (``symbols.Atom.text``)."""
        if self.op == "float":
            return f"float({symbols.text_of(self.args[0], lang)})"
        args = [a.text(lang) if isinstance(a, SizeFloat) else repr(float(a)) for a in self.args]
        if self.op in ("neg", "sqrt"):
            return f"-{args[0]}" if self.op == "neg" else f"math.sqrt({args[0]})"
        return f"({args[0]} {OPS[self.op]} {args[1]})"

    def __repr__(self):
        return self.text()

    __str__ = __repr__


def _operand(x):
    """A ``SizeFloat`` or float for an operand of arithmetic, as Python converts it; None
    for anything else."""
    if isinstance(x, SizeFloat):
        return x
    if isinstance(x, Size):
        return SizeFloat.of(x)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    return None


def _plain(x):
    return specialize(x) if isinstance(x, SizeFloat) else x


def _guard_nonzero(divisor) -> None:
    """Python raises ``ZeroDivisionError`` for a zero divisor: guard that it is not, so
    the per-shape outcome (an error) is never replaced by a kernel's infinity."""
    if not isinstance(divisor, SizeFloat):
        if divisor == 0:
            raise ZeroDivisionError("float division by zero")
        return
    if divisor.value() == 0:
        raise ZeroDivisionError(f"float division by zero ({divisor.text()} is 0)")
    if divisor.op == "float" and symbols.known(divisor.args[0], "!=", 0):
        return  # (the ranges prove it: a dimension Dynamo made dynamic is at least 2)
    if _python_exact(divisor):
        symbols.add_guard_text(f"{divisor.text('plain')} != 0")
    else:
        specialize(divisor)


def _python_exact(x) -> bool:
    """Is ``x.text()`` plain Python arithmetic that computes ``x`` (no sqrt)?"""
    return not isinstance(x, SizeFloat) or x.op != "sqrt" and all(
        _python_exact(a) for a in x.args if isinstance(a, SizeFloat))


def specialize(x: SizeFloat) -> float:
    """``x``'s value in the call being compiled, every size it reads guarded to its value."""
    for size in x.sizes():
        symbols.specialize(size)
    return x.value()


def is_size_float(x) -> bool:
    return isinstance(x, SizeFloat)


def plain(value):
    """``value`` with every ``SizeFloat`` in it (a list, a tuple, a dict's values)
    specialized: for a place that needs a number."""
    if isinstance(value, SizeFloat):
        return specialize(value)
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def holds(value) -> bool:
    """Does ``value`` (a list, tuple or dict too) hold a ``SizeFloat``?"""
    if isinstance(value, SizeFloat):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds(v) for v in value)
    if isinstance(value, dict):
        return any(holds(v) for v in value.values())
    return False
