"""Symbolic sizes: integer polynomials over size symbols, and guarded decisions.

Takes: symbol names (``s0``: a size of a graph input, as Dynamo's ``ShapeEnv`` names
it), their ranges, and the values of the call being compiled (hints). Gives: ``Size``,
an immutable, hashable polynomial over symbols and ``a // d``, ``a % d`` atoms, that the
compiler computes with as with an ``int``; ``Context``, the facts and hints in force
while a graph is compiled (``deciding``), which records every decision made on a size; and
``sizes_of`` / ``strides_of`` / ``offset_of`` / ``concrete``: traced values (Dynamo's
``SymInt``s, via ``from_sympy``) as ints or ``Size``s.

A comparison of sizes is a Python ``bool``. When the ranges prove it (``s0 - 1 < s0``;
``s0 >= 2`` for a dimension Dynamo made dynamic), that is all. Otherwise the hints
decide it and the context records the outcome as a guard: the code compiled is valid
for every size for which all guards hold, and the wrapper checks them cheaply at each
call (``runtime/symbolic.py``). Using a size as a plain integer (``__index__``,
``range(n)``, ``math.gcd``) guards that it equals its hint: such a variant serves one
value of that size, correctly; ``Context.specialized`` says where that happened.
A symbol in ``Context.unbacked`` (``u0``: the size of a ``nonzero``'s result, known only
once the graph runs) cannot be guarded: ``ir/unbacked.py`` decides on it.

Constants are plain ``int``: a ``Size`` is never constant. Its text (``str``, f-strings)
is C's unless ``language("python")`` is in force; in both, and in Triton kernels (whose
``//`` and ``%`` truncate), a quotient of a dividend that may be negative is floored.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import sys
from dataclasses import dataclass, field

INF = math.inf
_CONTEXT: contextvars.ContextVar = contextvars.ContextVar("braze_sizes", default=None)
_LANGUAGE: contextvars.ContextVar = contextvars.ContextVar("braze_size_language", default="c")


class Atom:
    """A factor of a monomial: a symbol, ``a // d`` or ``a % d`` (interned by key)."""

    __slots__ = ("kind", "args", "key")
    _table: dict = {}

    def __new__(cls, kind: str, args: tuple):
        key = kind if not args else f"{kind}({text_of(args[0], 'plain')},{text_of(args[1], 'plain')})"
        atom = cls._table.get(key)
        if atom is None:
            atom = object.__new__(cls)
            atom.kind, atom.args, atom.key = kind, args, key
            cls._table[key] = atom
        return atom

    def __reduce__(self):  # (unpickled through the table, as made: one atom per key)
        return (Atom, (self.kind, self.args))

    def text(self, lang: str) -> str:
        """``lang``: "c", "python", or "plain" (Python that names no derived size)."""
        if not self.args:
            return self.kind
        context = _CONTEXT.get()
        if lang != "plain" and context is not None and self.key in context.derived:
            return context.derived[self.key]
        return self.definition(lang)

    def definition(self, lang: str) -> str:
        a, d = (text_of(x, lang) for x in self.args)
        if self._signs_known():  # floor and truncation agree: each language's own operator
            op = "%" if self.kind == "mod" else ("/" if lang == "c" else "//")
            return f"({a} {op} {d})"
        if lang != "c":  # the same in Python (floor) and in Triton kernels (truncating)
            mod = f"((({a} % {d}) + {d}) % {d})"
            return f"(({a} - {mod}) // {d})" if self.kind == "div" else mod
        return f"i_{'floordiv' if self.kind == 'div' else 'mod'}<int64_t>({a}, {d})"

    def _signs_known(self) -> bool:
        """Is the dividend >= 0 and the divisor > 0 (sizes are; a value read by ``item()``
        has its own range), so that ``//`` and ``%`` floor and truncate alike?"""
        ranges = _ranges()
        return bounds_of(self.args[0], ranges)[0] >= 0 and bounds_of(self.args[1], ranges)[0] > 0

    def value(self, env: dict) -> int:
        if not self.args:
            return env[self.kind]
        a, d = (value_of(x, env) for x in self.args)
        return a // d if self.kind == "div" else a % d

    def bounds(self, ranges: dict) -> tuple:
        if not self.args:
            return ranges.get(self.kind, (0, INF))
        (alo, ahi), (dlo, dhi) = (bounds_of(x, ranges) for x in self.args)
        if dlo <= 0 or alo < 0:
            return (-INF, INF)
        if self.kind == "mod":
            return (0, min(dhi - 1, ahi))
        return (alo // dhi if dhi != INF else 0, ahi // dlo if ahi != INF else INF)


def _comparison(op: str):
    """A comparison method of ``Size``: decided by the ranges, else by the hints and guarded."""
    return lambda self, other: _compare(self, other, op)


def symbol(name: str) -> "Size":
    return Size._make({(Atom(name, ()),): 1})


class Size:
    """A polynomial with integer coefficients (``terms``: sorted ``(monomial, k)``,
    a monomial a sorted tuple of atoms, ``()`` for the constant)."""

    __slots__ = ("terms", "_hash")

    @staticmethod
    def _make(terms: dict):
        items = tuple(sorted(((m, k) for m, k in terms.items() if k), key=lambda t: [a.key for a in t[0]]))
        if not items:
            return 0
        if len(items) == 1 and items[0][0] == ():
            return items[0][1]
        size = object.__new__(Size)
        size.terms, size._hash = items, hash(("Size", tuple((tuple(a.key for a in m), k) for m, k in items)))
        return size

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return (_rebuild, (self.terms,))

    # ---------------------------------------------------------------- arithmetic
    def __add__(self, other):
        if isinstance(other, float):
            return other if math.isinf(other) else NotImplemented
        if not isinstance(other, (int, Size)):
            return NotImplemented
        terms = dict(self.terms)
        for m, k in _terms(other):
            terms[m] = terms.get(m, 0) + k
        return Size._make(terms)

    __radd__ = __add__

    def __neg__(self):
        return Size._make({m: -k for m, k in self.terms})

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, other):
        if isinstance(other, float):
            return _times_infinite(self, other)
        if not isinstance(other, (int, Size)):
            return NotImplemented
        terms: dict = {}
        for m1, k1 in self.terms:
            for m2, k2 in _terms(other):
                m = tuple(sorted(m1 + m2, key=lambda a: a.key))
                terms[m] = terms.get(m, 0) + k1 * k2
        return Size._make(terms)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return floordiv(self, other) if isinstance(other, (int, Size)) else NotImplemented

    def __rfloordiv__(self, other):
        return floordiv(other, self) if isinstance(other, int) else NotImplemented

    def __mod__(self, other):
        return modulo(self, other) if isinstance(other, (int, Size)) else NotImplemented

    def __rmod__(self, other):
        return modulo(other, self) if isinstance(other, int) else NotImplemented

    def __divmod__(self, other):
        return (self // other, self % other)

    def __rdivmod__(self, other):
        return (other // self, other % self)

    def __abs__(self):
        return self if self >= 0 else -self

    # ---------------------------------------------------------------- decisions
    __lt__, __le__, __gt__ = _comparison("<"), _comparison("<="), _comparison(">")
    __ge__, __eq__, __ne__ = _comparison(">="), _comparison("=="), _comparison("!=")

    def __bool__(self):
        return _compare(self, 0, "!=")

    def __index__(self):
        return _specialize(self)

    __int__ = __index__

    def __float__(self):
        return float(_specialize(self))

    def __truediv__(self, other):  # (a float computed from sizes divides itself: ``size_floats``)
        return _specialize(self) / other if isinstance(other, (int, float, Size)) else NotImplemented

    def __rtruediv__(self, other):
        return other / _specialize(self) if isinstance(other, (int, float)) else NotImplemented

    def __pow__(self, other):
        if isinstance(other, int) and other >= 0:
            return math.prod([self] * other) if other else 1
        return _specialize(self) ** other

    # ---------------------------------------------------------------- text
    def text(self, lang: str) -> str:
        parts = []
        for m, k in sorted(self.terms, key=lambda t: t[0] == ()):
            factors = [a.text(lang) for a in m]
            if abs(k) != 1 or not factors:
                factors.insert(0, str(abs(k)))
            body = "*".join(factors)
            sign = "-" if k < 0 else "+"
            parts.append((f"-{body}" if k < 0 else body) if not parts else f"{sign} {body}")
        text = " ".join(parts)
        atomic = len(self.terms) == 1 and self.terms[0][1] == 1 and len(self.terms[0][0]) == 1
        return text if atomic else f"({text})"  # an operand anywhere: ``x // (s0*s1)``

    def __format__(self, spec: str) -> str:
        return self.text(spec or _LANGUAGE.get())

    def __str__(self):
        return self.text(_LANGUAGE.get())

    __repr__ = __str__

    def symbols(self) -> set:
        return {a.kind for m, _ in self.terms for a in m for a in _atoms_in(a)}


def _rebuild(terms):
    return Size._make(dict(terms))


def divisions_in(x) -> list:
    """The quotient and remainder atoms of ``x``, each after those inside it."""
    found: list = []
    for m, _ in _terms(x):
        for a in m:
            if a.args:
                found += [b for arg in a.args for b in divisions_in(arg)] + [a]
    return list(dict.fromkeys(found))


def _atoms_in(atom: Atom) -> list:
    if not atom.args:
        return [atom]
    return [b for x in atom.args if isinstance(x, Size) for m, _ in x.terms for a in m for b in _atoms_in(a)]


def _terms(x) -> tuple:
    return x.terms if isinstance(x, Size) else (((), x),)


def _times_infinite(size: Size, other: float):
    if not math.isinf(other):
        return _specialize(size) * other
    lo, hi = bounds_of(size, _ranges())
    if lo > 0:
        return other
    if hi < 0:
        return -other
    return _specialize(size) * other


def same(a: tuple, b: tuple) -> bool:
    """Are two tuples of sizes the same expressions? No decision is made: ``(s0, s1)`` and
    ``(s1, s0)`` differ even when the call's values agree."""
    return len(a) == len(b) and all(x is y or (type(x) is type(y) and (x.terms == y.terms if isinstance(x, Size)
                                                                      else x == y)) for x, y in zip(a, b))


def is_symbolic(x) -> bool:
    return isinstance(x, Size)


def symbol_names(x) -> set:
    """The names of the symbols in ``x`` (none for an int)."""
    return x.symbols() if isinstance(x, Size) else set()


def text_of(x, lang: str | None = None) -> str:
    return x.text(lang or _LANGUAGE.get()) if isinstance(x, Size) else str(x)


def value_of(x, env: dict) -> int:
    if not isinstance(x, Size):
        return x
    total = 0
    for m, k in x.terms:
        total += k * math.prod(a.value(env) for a in m)
    return total


def bounds_of(x, ranges: dict) -> tuple:
    if not isinstance(x, Size):
        return (x, x)
    common = _common_factor(x, ranges)
    if common is not None:  # s*(t - 1) with s >= 0: the sign is t - 1's
        return _interval_times(bounds_of(floordiv(x, symbol(common.kind)), ranges), common.bounds(ranges))
    lo = hi = 0
    for m, k in x.terms:
        tlo, thi = 1, 1
        for a in m:
            tlo, thi = _interval_times((tlo, thi), a.bounds(ranges))
        tlo, thi = _interval_times((tlo, thi), (k, k))
        lo, hi = lo + tlo, hi + thi
    return _quotient_out(x, ranges, (lo, hi))


def _quotient_out(x: Size, ranges: dict, found: tuple) -> tuple:
    """``found`` narrowed by writing a term ``c * (a // d)`` as ``c * (a - a % d) / d``, so
    that ``s - s // 2`` is seen to be ``(s + s % 2) / 2 >= 0`` (its terms' own bounds are not)."""
    for m, c in x.terms:
        if len(m) == 1 and m[0].kind == "div" and isinstance(m[0].args[1], int) and m[0].args[1] > 0:
            (a, d), terms = m[0].args, {mm: cc * m[0].args[1] for mm, cc in x.terms if mm != m}
            for ma, ka in _terms(a):
                terms[ma] = terms.get(ma, 0) + c * ka
            lo, hi = bounds_of(Size._make(terms), ranges)
            lo, hi = lo + min(0, -c * (d - 1)), hi + max(0, -c * (d - 1))  # - c * (a % d), a % d in [0, d - 1]
            return (max(found[0], -(-lo // d) if lo != -INF else lo), min(found[1], hi // d if hi != INF else hi))
    return found


def _common_factor(x: Size, ranges: dict):
    """A symbol that is a factor of every term of ``x`` (of several terms), or None."""
    if len(x.terms) < 2:
        return None
    shared = set(x.terms[0][0])
    for m, _ in x.terms[1:]:
        shared &= set(m)
    found = [a for a in shared if not a.args and a.bounds(ranges)[0] >= 0]
    return min(found, key=lambda a: a.key) if found else None


def _interval_times(a: tuple, b: tuple) -> tuple:
    products = [0 if x == 0 or y == 0 else x * y for x in a for y in b]
    return (min(products), max(products))


def floordiv(a, d):
    """``a // d`` (floor), exact where the ranges allow."""
    if isinstance(d, int):
        if not isinstance(a, Size):
            return a // d
        if d == 1:
            return a
        if d <= 0:
            return Size._make({(Atom("div", (a, d)),): 1})
    from braze.ir.divisors import divide  # (built on Size)
    quotient, rest = divide(a, d)
    if _is_zero(rest):
        return quotient
    lo, hi = bounds_of(rest, _ranges())
    if lo >= 0 and _proves(d - rest, ">"):
        return quotient
    if hi < 0 and _proves(rest + d, ">="):  # -d <= rest < 0
        return quotient - 1
    if not isinstance(rest, Size) and not isinstance(d, Size):
        return quotient + rest // d
    return quotient + Size._make({(Atom("div", (rest, d)),): 1})


def modulo(a, d):
    """``a % d`` (floor), exact where the ranges allow."""
    if isinstance(d, int) and not isinstance(a, Size):
        return a % d
    if isinstance(d, int) and d == 1:
        return 0
    from braze.ir.divisors import divide
    _, rest = divide(a, d)
    if _is_zero(rest):
        return 0
    lo, _ = bounds_of(rest, _ranges())
    if lo >= 0 and _proves(d - rest, ">"):
        return rest
    if not isinstance(rest, Size) and not isinstance(d, Size):
        return rest % d
    return Size._make({(Atom("mod", (rest, d)),): 1})


def next_power_of_two(n, cap: int | None = None) -> int:
    """``min(cap, the least power of two >= n)`` for a symbolic ``n``: the answer for the
    hint, its class guarded (``n > cap // 2``, or ``p // 2 < n <= p``)."""
    if cap is not None and n > cap // 2:
        return cap
    p = 1
    while not n <= p:
        p *= 2
    return p


def _is_zero(x) -> bool:
    """Structurally zero (a ``Size`` never is: constants are ints); no decision is made."""
    return not isinstance(x, Size) and x == 0


# ---------------------------------------------------------------------- context

@dataclass
class Context:
    """What is known while one variant of a graph compiles: each symbol's range and
    its value in the call being compiled; the guards its decisions added."""
    hints: dict
    ranges: dict
    guards: dict = field(default_factory=dict)  # "size op 0" (Python) -> the file:line that decided it
    specialized: list = field(default_factory=list)  # (symbolic size, value, where)
    names: list = field(default_factory=list)  # the symbols, in the order kernels take them
    bindings: dict = field(default_factory=dict)  # symbol -> the wrapper's text that reads it
    unbacked: dict = field(default_factory=dict)  # symbol -> what it stands for (a data-dependent size)
    derived: dict = field(default_factory=dict)  # quotient or remainder atom's key -> its parameter's name

    def add_guard(self, size: "Size", op: str) -> None:
        late = sorted(size.symbols() & set(self.unbacked)) if isinstance(size, Size) else []
        if late:
            from braze.ir.unbacked import UnbackedDecision
            raise UnbackedDecision(late[0], self.unbacked[late[0]], f"{text_of(size, 'plain')} {op} 0", _caller())
        self.guards.setdefault(f"{text_of(size, 'plain')} {op} 0", _caller())


_FORGETTERS: list = []  # what forgets results that compared sizes (``forgotten_on_context_change``)


def forgotten_on_context_change(forget):
    """Register ``forget``, run on entering and leaving each ``deciding``: a result that
    compared sizes holds under one context's ranges and hints only, and a decision
    must add its guard to the context that makes it, so no cache may carry one over."""
    _FORGETTERS.append(forget)
    return forget


@contextlib.contextmanager
def deciding(context: Context):
    for forget in _FORGETTERS:
        forget()
    token = _CONTEXT.set(context)
    try:
        yield context
    finally:
        _CONTEXT.reset(token)
        for forget in _FORGETTERS:
            forget()


@contextlib.contextmanager
def language(lang: str):
    token = _LANGUAGE.set(lang)
    try:
        yield
    finally:
        _LANGUAGE.reset(token)


def active() -> bool:
    """Is a graph with symbolic sizes being compiled?"""
    return _CONTEXT.get() is not None


def parameters() -> list:
    """The size symbols the kernels being compiled take as arguments, in order."""
    context = _CONTEXT.get()
    return list(context.names) if context is not None else []


def bindings() -> dict:
    """Symbol -> the wrapper's text that reads its value from ``args``."""
    context = _CONTEXT.get()
    return dict(context.bindings) if context is not None else {}


def unbacked() -> dict:
    """Symbol -> what it stands for, for each size known only once an op of the graph has
    run (the wrapper reads it from that op's result)."""
    context = _CONTEXT.get()
    return dict(context.unbacked) if context is not None else {}


def _ranges() -> dict:
    context = _CONTEXT.get()
    return context.ranges if context is not None else {}


_HOLDS = {"<": lambda lo, hi: (hi < 0, lo >= 0), "<=": lambda lo, hi: (hi <= 0, lo > 0),
          ">": lambda lo, hi: (lo > 0, hi <= 0), ">=": lambda lo, hi: (lo >= 0, hi < 0),
          "==": lambda lo, hi: (lo == hi == 0, lo > 0 or hi < 0),
          "!=": lambda lo, hi: (lo > 0 or hi < 0, lo == hi == 0)}
_NEGATION = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_PYTHON = {"<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__, "==": int.__eq__,
           "!=": int.__ne__}


def known(a, op: str, b):
    """``a op b`` where the ranges decide it, else None: no guard is added (the caller
    decides at run time instead, as an OpenMP ``if`` clause does)."""
    diff = a - b
    if not isinstance(diff, Size):
        return _PYTHON[op](diff, 0)
    proven, disproven = _HOLDS[op](*bounds_of(diff, _ranges()))
    return proven if proven or disproven else None


def possible(a, op: str, b) -> bool:
    """Could ``a op b`` hold? False only where the ranges disprove it; no guard is added
    (code for a loop that may run no iteration is emitted, and runs none)."""
    outcome = known(a, op, b)
    return True if outcome is None else outcome


def at_most(cap: int, size):
    """``min(cap, size)`` where known; ``cap`` for a size the ranges do not bound below it
    (a loop blocked by ``cap`` then runs only its tail for a smaller size), with no guard."""
    if known(size, "<", cap) is not True:
        return cap
    context = _CONTEXT.get()
    late = isinstance(size, Size) and context is not None and size.symbols() & set(context.unbacked)
    return bounds_of(size, _ranges())[1] if late else size  # (u0: its bound, no decision)


def hint(x) -> int:
    """``x``'s value in the call being compiled, with no guard: for a heuristic whose
    choice any size of the class runs correctly with (an order to try fusions in)."""
    if not isinstance(x, Size):
        return x
    return value_of(x, _require_context(x).hints)


def specialize(x) -> int:
    """``x``'s value in the call being compiled, guarded equal to it (an int as it is)."""
    return _specialize(x) if isinstance(x, Size) else x


def add_guard_text(text: str) -> None:
    """A guard given as Python over the symbols (``(float(s0) - 1.0) != 0``), decided true
    by the caller for the call being compiled."""
    _require_context(text).guards.setdefault(text, _caller())


def _proves(diff, op: str) -> bool:
    """Do the ranges alone prove ``diff op 0``?"""
    return _HOLDS[op](*bounds_of(diff, _ranges()))[0]


def _compare(a: Size, b, op: str) -> bool:
    if isinstance(b, float):
        if math.isinf(b):
            return {"<": b > 0, "<=": b > 0, ">": b < 0, ">=": b < 0, "==": False, "!=": True}[op]
        b = math.floor(b) if op in (">", "<=") else math.ceil(b)
    elif not isinstance(b, (int, Size)):
        return NotImplemented
    diff = a - b
    if not isinstance(diff, Size):
        return _PYTHON[op](diff, 0)
    proven, disproven = _HOLDS[op](*bounds_of(diff, _ranges()))
    if proven or disproven:
        return proven
    context = _require_context(diff)
    if diff.symbols() & set(context.unbacked):
        from braze.ir.unbacked import size_oblivious
        return size_oblivious(diff, op, context)
    outcome = _PYTHON[op](value_of(diff, context.hints), 0)
    context.add_guard(diff, op if outcome else _NEGATION[op])
    return outcome


def _specialize(size: Size) -> int:
    context = _require_context(size)
    value = value_of(size, context.hints)
    context.add_guard(size - value, "==")
    context.specialized.append((size, value, _caller()))
    return value


_DECIDERS = {__file__, __file__.replace("symbols.py", "unbacked.py"),
             __file__.replace("symbols.py", "size_floats.py")}  # (not where a decision was asked)


def _caller() -> str:
    """``file:line`` of the first frame outside this module and ``size_floats`` (what made a
    decision)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in _DECIDERS:
        frame = frame.f_back
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}" if frame is not None else "?"


def _require_context(size: Size) -> Context:
    context = _CONTEXT.get()
    if context is None:
        raise TypeError(f"a decision on the symbolic size {size} outside a compile (no hints)")
    return context
