"""The scalar expression node of braze's loop IR.

Takes: nothing but Python values. Gives: ``Expr``, one immutable, interned node
type with one op enum (``Op``), and the functions that build, walk, rewrite and
print expressions.

An ``Expr`` is ``(op, dtype, args, arg)``: ``args`` are child expressions, ``arg``
a plain hashable payload (a constant's value, a variable's ``(name, size)``, a
load's buffer name). Nodes are interned, so structurally equal expressions are
the same object: equality is ``is``, hashing is by identity, common
subexpressions are shared for free and memo tables keyed by node are cheap.

A loop variable carries its extent (``VAR`` arg ``(name, size)``), so index
ranges are known from the expression alone; a variable of extent 1 is the
constant 0. ``LOAD`` reads one element of a buffer at per-dimension logical
indices; what those mean in memory (strides) belongs to the buffer's layout.

Index arithmetic has dtype ``INDEX`` and is built through ``braze.ir.simplify``,
which keeps it in canonical form; value arithmetic (any torch dtype) is kept
exactly as written.
"""
from __future__ import annotations

import enum
import functools
import math
from typing import Callable, Iterable, Iterator

import torch

from braze.ir import dtypes
from braze.ir.size_floats import SizeFloat
from braze.ir.symbols import Size, forgotten_on_context_change


class Op(enum.Enum):
    # leaves
    CONST = "const"
    VAR = "var"
    LOAD = "load"
    VALUE = "value"  # a value computed earlier in the same kernel (arg: the node's name)
    # conversions and selection
    CAST = "cast"
    WHERE = "where"
    # unary
    NEG = "neg"
    ABS = "abs"
    SIGN = "sign"
    RECIPROCAL = "reciprocal"
    EXP = "exp"
    EXP2 = "exp2"
    EXPM1 = "expm1"
    LOG = "log"
    LOG2 = "log2"
    LOG10 = "log10"
    LOG1P = "log1p"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    SINH = "sinh"
    COSH = "cosh"
    TANH = "tanh"
    ASINH = "asinh"
    ACOSH = "acosh"
    ATANH = "atanh"
    ERF = "erf"
    ERFC = "erfc"
    ERFINV = "erfinv"
    LGAMMA = "lgamma"
    DIGAMMA = "digamma"
    SIGMOID = "sigmoid"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    TRUNC = "trunc"
    BITWISE_NOT = "bitwise_not"
    LOGICAL_NOT = "logical_not"
    ISNAN = "isnan"
    ISINF = "isinf"
    SIGNBIT = "signbit"
    # binary
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    TRUEDIV = "truediv"
    FLOORDIV = "floordiv"
    TRUNCDIV = "truncdiv"
    MOD = "mod"
    FMOD = "fmod"
    POW = "pow"
    ATAN2 = "atan2"
    HYPOT = "hypot"
    COPYSIGN = "copysign"
    NEXTAFTER = "nextafter"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    FMAX = "fmax"
    FMIN = "fmin"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    AND = "and"
    OR = "or"
    XOR = "xor"
    LSHIFT = "lshift"
    RSHIFT = "rshift"
    # the body of a scatter node, never inside another expression: args (value, index0,
    # index1, ...), the target's logical indices; arg "set" or "add" (accumulate)
    SCATTER = "scatter"
    # the body of a scan node, never inside another expression: args (value,); arg
    # (combine, dim): "sum" or "prod", folded along the node's dimension dim
    SCAN = "scan"
    # a float32 random number, a pure function of args (seed, offset), both int64: arg
    # "rand" (uniform in [0, 1), word offset % 4 of Philox4x32-10's counter offset // 4) or
    # "randn" (standard normal, words pair offset % 2 of counter offset // 2), key = seed
    # (``random``)
    RANDOM = "random"
    # a value checked where eager raises: args (value,); arg (kind, site, size). Kind "index":
    # a loaded index into a dimension of ``size``, ``value`` in [-size, size) gives it wrapped
    # into [0, size), anything else reports ``site`` and gives 0; kind "position": the same
    # with no negative index allowed (gather, scatter, index_select). Kind "divisor": an
    # integer divisor, given unchanged, reporting ``site`` when 0. The report goes to the
    # kernel's error record (``checked``)
    CHECK = "check"


ROUNDED = "rounded"  # the arg of a product kept out of fused multiply-adds (``rounded_mul``)
APPROX = "approx"  # the arg of CUDA's own rsqrt (``cuda_rsqrt``)
COMPARISONS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})
BOOL_RESULT = COMPARISONS | {Op.LOGICAL_NOT, Op.ISNAN, Op.ISINF, Op.SIGNBIT}
BINARY = frozenset({
    Op.ADD, Op.SUB, Op.MUL, Op.TRUEDIV, Op.FLOORDIV, Op.TRUNCDIV, Op.MOD, Op.FMOD, Op.POW,
    Op.ATAN2, Op.HYPOT, Op.COPYSIGN, Op.NEXTAFTER, Op.MAXIMUM, Op.MINIMUM, Op.FMAX, Op.FMIN,
    Op.AND, Op.OR, Op.XOR, Op.LSHIFT, Op.RSHIFT,
}) | COMPARISONS
LEAVES = frozenset({Op.CONST, Op.VAR, Op.LOAD, Op.VALUE})
UNARY = frozenset(op for op in Op
                  if op not in BINARY | LEAVES | {Op.WHERE, Op.SCATTER, Op.SCAN, Op.RANDOM, Op.CHECK})
# Ops whose cost in a loop body is well above one instruction: the inliner and the
# fusion cost model weigh them.
EXPENSIVE = frozenset({
    Op.EXP, Op.EXP2, Op.EXPM1, Op.LOG, Op.LOG2, Op.LOG10, Op.LOG1P, Op.SIN, Op.COS, Op.TAN,
    Op.ASIN, Op.ACOS, Op.ATAN, Op.SINH, Op.COSH, Op.TANH, Op.ASINH, Op.ACOSH, Op.ATANH,
    Op.ERF, Op.ERFC, Op.ERFINV, Op.LGAMMA, Op.DIGAMMA, Op.POW, Op.ATAN2, Op.HYPOT, Op.SIGMOID,
    Op.TRUEDIV, Op.FLOORDIV, Op.MOD, Op.FMOD, Op.SQRT, Op.RSQRT, Op.RANDOM,
})


class Expr:
    """One interned IR node. Build with the functions below, never directly."""

    __slots__ = ("op", "dtype", "args", "arg", "_memo", "_generation")

    _table: dict = {}

    def __new__(cls, op: Op, dtype, args: tuple = (), arg=None):
        key = (op, dtype, args, _payload_key(arg))
        node = cls._table.get(key)
        if node is None:
            node = object.__new__(cls)
            node.op, node.dtype, node.args, node.arg = op, dtype, args, arg
            node._memo = None
            cls._table[key] = node
        return node

    def __reduce__(self):
        return (Expr, (self.op, self.dtype, self.args, self.arg))

    def __repr__(self) -> str:
        from braze.ir.text import to_text  # (the text form lives in its own module)
        return to_text(self)

    __str__ = __repr__

    # shorthand accessors
    @property
    def is_const(self) -> bool:
        return self.op is Op.CONST

    @property
    def name(self) -> str:
        """The variable's or buffer's name (VAR, LOAD, VALUE)."""
        return self.arg[0] if self.op is Op.VAR else self.arg

    @property
    def size(self) -> int:
        """A variable's extent."""
        return self.arg[1]

    def memo(self) -> dict:
        """Results derived from this node (its text, bounds, linear form), forgotten
        with ``forget_derived``."""
        if self._memo is None or self._generation != _GENERATION[0]:
            self._memo, self._generation = {}, _GENERATION[0]
        return self._memo


def _payload_key(arg):
    if isinstance(arg, float):
        return ("float", arg.hex())
    if isinstance(arg, bool):
        return ("bool", arg)
    return arg


_CACHES: list = []
_GENERATION = [0]  # memos of an older generation are stale


def cached(fn):
    """``functools.lru_cache`` for pure functions returning expressions; emptied
    together with the intern table, so no stale node outlives it."""
    wrapped = functools.lru_cache(maxsize=None)(fn)
    _CACHES.append(wrapped.cache_clear)
    return wrapped


def cache_table() -> dict:
    """A plain dict of expression-keyed results, emptied with the intern table."""
    table: dict = {}
    _CACHES.append(table.clear)
    return table


@forgotten_on_context_change
def forget_derived() -> None:
    """Forget every memo and cached result, keeping the nodes."""
    _GENERATION[0] += 1
    for clear in _CACHES:
        clear()


def clear_intern_table(limit: int = 200_000) -> None:
    """Forget interned nodes once the table is large; called between graphs."""
    if len(Expr._table) > limit:
        Expr._table.clear()
        for clear in _CACHES:
            clear()


# ----------------------------------------------------------------------------- builders

_BITS = {torch.int8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64, torch.uint8: 8}


def _wrap(value: int, dtype) -> int:
    """``value`` as ``dtype`` holds it (two's complement), as eager converts scalars."""
    bits = _BITS[dtype]
    value &= (1 << bits) - 1
    if dtype is not torch.uint8 and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def const(value, dtype) -> Expr:
    if isinstance(value, Size) and dtype is not dtypes.INDEX:  # a symbolic size as a value
        return cast(Expr(Op.CONST, dtypes.INDEX, (), value), dtype)
    if isinstance(value, SizeFloat):  # a double computed from sizes, rounded as a number is
        return cast(size_float(value), dtype) if dtype not in dtypes.LOW_PRECISION else \
            cast(cast(size_float(value), torch.float32), dtype)  # (double, float, then bf16, as ``full``)
    if dtype is dtypes.INDEX:
        value = _integer(value)
    elif dtype in dtypes.INTEGERS:
        value = _wrap(int(value), dtype)
    elif dtype is torch.bool:
        value = bool(value)
    else:
        value = float(value)
    return Expr(Op.CONST, dtype, (), value)


_SIZE_FLOAT_OPS = {"add": Op.ADD, "sub": Op.SUB, "truediv": Op.TRUEDIV}


def size_float(value: SizeFloat) -> Expr:
    """The float64 expression of the size arguments that computes ``value`` as Python does,
    op by op (``ir/size_floats.py``); a product is rounded on its own, never fused."""
    f64 = torch.float64
    if value.op == "float":
        return cast(Expr(Op.CONST, dtypes.INDEX, (), value.args[0]), f64)
    args = [size_float(a) if isinstance(a, SizeFloat) else Expr(Op.CONST, f64, (), float(a)) for a in value.args]
    if value.op in ("neg", "sqrt"):
        return unary(Op.NEG if value.op == "neg" else Op.SQRT, args[0])
    if value.op == "mul":
        return rounded_mul(*args)
    return binary(_SIZE_FLOAT_OPS[value.op], *args)


def index(value: int) -> Expr:
    return Expr(Op.CONST, dtypes.INDEX, (), _integer(value))


def var(name: str, size: int) -> Expr:
    """A loop variable ranging over ``[0, size)``; extent 1 is the constant 0."""
    if size == 1:
        return index(0)
    return Expr(Op.VAR, dtypes.INDEX, (), (name, _integer(size)))


def _integer(value):
    """An index constant or extent: an int, or a symbolic ``Size`` kept as it is."""
    return value if isinstance(value, Size) else int(value)


def load(buffer: str, indices: Iterable[Expr], dtype) -> Expr:
    return Expr(Op.LOAD, dtype, tuple(indices), buffer)


def cast(value: Expr, dtype) -> Expr:
    if value.dtype == dtype:
        return value
    if value.op is Op.CAST and value.arg == "store" and value.args[0].dtype == dtype:
        return value.args[0]  # a value rounded only because it was once to be stored
    if value.op is Op.CAST and value.args[0].dtype == dtype and dtypes.holds_exactly(value.dtype, dtype):
        return value.args[0]  # there and back through a dtype that holds it (f16 -> f32 -> f16)
    if value.op is Op.CONST and dtype is not dtypes.INDEX and value.dtype is not dtypes.INDEX:
        return const(_convert_constant(value.arg, value.dtype, dtype), dtype)
    if value.op is Op.CONST and dtype is dtypes.INDEX:
        return index(value.arg)
    return Expr(Op.CAST, dtype, (value,))


def store_cast(value: Expr, dtype) -> Expr:
    """``value`` rounded to a stored dtype; undone by a cast back (round once, on store)."""
    if value.dtype == dtype:
        return value
    return Expr(Op.CAST, dtype, (value,), "store")


def _convert_constant(value, src, dtype):
    """The constant ``value`` of dtype ``src`` converted to ``dtype`` as torch converts it:
    a float constant holds its own dtype's rounding (float32(0.1), not the double 0.1)."""
    if src in dtypes.FLOATS:
        value = torch.tensor(value, dtype=src).item()
    if dtype is torch.bool:
        return bool(value)
    if dtype in dtypes.INTEGERS:
        if isinstance(value, float):
            if not math.isfinite(value):
                return torch.tensor(value).to(dtype).item()
            value = math.trunc(value)
        return torch.tensor(int(value), dtype=torch.int64).to(dtype).item()
    return torch.tensor(value, dtype=src).to(dtype).item()


def unary(op: Op, value: Expr) -> Expr:
    dtype = torch.bool if op in BOOL_RESULT else value.dtype
    return Expr(op, dtype, (value,))


def binary(op: Op, a: Expr, b: Expr) -> Expr:
    if a.dtype != b.dtype:
        raise TypeError(f"braze IR: {op.value} needs equal dtypes, got {a.dtype} and {b.dtype}")
    dtype = torch.bool if op in COMPARISONS else a.dtype
    if dtype is torch.bool and op in (Op.AND, Op.OR):
        folded = _fold_logic(op, a, b)
        if folded is not None:
            return folded
    return Expr(op, dtype, (a, b))


def _fold_logic(op: Op, a: Expr, b: Expr) -> Expr | None:
    """``a & b`` or ``a | b`` of booleans where one side is a constant: the other side, or
    the constant that decides (a mask that is never true folds away with what it guards)."""
    for known, other in ((a, b), (b, a)):
        if known.op is Op.CONST:
            decides = bool(known.arg) == (op is Op.OR)
            return known if decides else other
    return None


def rounded_mul(a: Expr, b: Expr) -> Expr:
    """``a * b`` rounded on its own: never fused with an add that uses it into one fused
    multiply-add (eager rounds this product: ``lower.pointwise``'s divisions by a number)."""
    return Expr(Op.MUL, binary(Op.MUL, a, b).dtype, (a, b), ROUNDED)


def cuda_rsqrt(x: Expr) -> Expr:
    """``1 / sqrt(x)`` as CUDA's ``rsqrt`` computes it (``rsqrt.approx``, within 2 ulps), the
    function eager's CUDA kernels call for ``rsqrt`` and LayerNorm's ``rstd``."""
    return Expr(Op.RSQRT, x.dtype, (x,), APPROX)


RANDOM_WORDS = {"rand": 1, "randn": 2, "bits": 1}  # Philox words one number of each kind takes (below)
COUNTER_WORDS = 4  # words one Philox counter gives


def random(seed: Expr, offset: Expr, kind: str) -> Expr:
    """Element ``offset`` of the random stream ``seed``: ``kind`` "rand" (uniform in [0, 1))
    or "randn" (standard normal), float32, or "bits" (a 32-bit word, int64 in [0, 2^32)).
    The same (seed, offset) gives the same number wherever it is computed, so a random
    value may be recomputed like any other.

    One Philox4x32-10 counter gives four 32-bit words: "rand" and "bits" take word ``offset
    % 4`` of counter ``offset // 4``, "randn" the pair of words ``offset % 2`` of counter
    ``offset // 2`` (Box-Muller). Neighbouring offsets share a counter, so a kernel whose
    threads hold aligned runs of offsets computes one Philox per four uniforms (the compiler
    sees the equal counters), as eager's ``curand_uniform4`` does."""
    if kind not in RANDOM_WORDS or seed.dtype is not torch.int64 or offset.dtype is not torch.int64:
        raise TypeError(f"braze IR: random needs kind {', '.join(RANDOM_WORDS)} and int64 seed and offset, "
                        f"got {kind}, {seed.dtype}, {offset.dtype}")
    return Expr(Op.RANDOM, torch.int64 if kind == "bits" else torch.float32, (seed, offset), kind)


def checked(value: Expr, kind: str, site: int, size: int = 0) -> Expr:
    """``value`` checked at run time (``Op.CHECK``): ``kind`` "index" (an index into a
    dimension of ``size``, negative values wrapped; the result has dtype ``INDEX``),
    "position" (the same, negative values refused) or "divisor" (an integer divisor that must
    not be 0). ``site``: the graph's record of what to raise (``braze.ir.graph.CheckSite``)."""
    if kind in ("index", "position"):
        return Expr(Op.CHECK, dtypes.INDEX, (value,), (kind, int(site), _integer(size)))
    if kind == "divisor":
        return Expr(Op.CHECK, value.dtype, (value,), (kind, int(site), 0))
    raise TypeError(f"braze IR: check kind {kind!r} is not 'index', 'position' or 'divisor'")


DOMAINS = ("both", "then")  # a where's branches eager computes only where taken (``where``)


def where(cond: Expr, a: Expr, b: Expr, domain: str | None = None) -> Expr:
    """``cond ? a : b``. ``domain``: which branches eager computes only in the lanes that take
    them, so a run-time check inside them checks only there (``fuse/check_domains.py``):
    "both" (a ``cat`` picking its operand, a ``pad``), "then" (a ``slice_scatter``'s or
    ``diagonal_scatter``'s source, a pooling window's element inside the input),
    None (``torch.where``: eager computes both branches everywhere)."""
    if a.dtype != b.dtype:
        raise TypeError(f"braze IR: where needs equal branch dtypes, got {a.dtype} and {b.dtype}")
    if domain not in (None,) + DOMAINS:
        raise TypeError(f"braze IR: where's domain is one of {DOMAINS} or None, got {domain!r}")
    if cond.op is Op.CONST:
        return a if cond.arg else b
    if a is b:
        return a
    return Expr(Op.WHERE, a.dtype, (cond, a, b), domain)


def scatter_store(value: Expr, indices, accumulate: bool) -> Expr:
    """A scatter node's body: ``value`` written to (or, ``accumulate``, added into) the
    element of the target at logical ``indices``."""
    return Expr(Op.SCATTER, value.dtype, (value,) + tuple(indices), "add" if accumulate else "set")


def scan(value: Expr, combine: str, dim: int) -> Expr:
    """A scan node's body: element ``k`` along ``dim`` folds ``value`` at ``0..k`` with
    ``combine`` ("sum" or "prod")."""
    return Expr(Op.SCAN, value.dtype, (value,), (combine, dim))


# ----------------------------------------------------------------------------- traversal

def walk(root: Expr | Iterable[Expr]) -> list[Expr]:
    """Every distinct node reachable from ``root``, children before parents
    (remembered on a single root: do not mutate the list)."""
    if isinstance(root, Expr):
        memo = root.memo()
        order = memo.get("walk")
        if order is None:
            order = memo["walk"] = _walk([root])
        return order
    return _walk(list(root))


def search(roots: Iterable[Expr], children) -> list[Expr]:
    """Every distinct node reached from ``roots`` by following ``children(node)`` (the
    arguments to visit: all of ``node.args``, some, or none to stop there), in visit order."""
    seen: set = set()
    found: list[Expr] = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        found.append(node)
        stack.extend(children(node))
    return found


def _walk(roots: list) -> list[Expr]:
    seen: set = set()
    order: list[Expr] = []
    stack = [(r, False) for r in reversed(roots)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for child in reversed(node.args):
            if id(child) not in seen:
                stack.append((child, False))
    return order


def free_vars(e: Expr) -> frozenset:
    """The VAR nodes ``e`` depends on."""
    memo = e.memo()
    found = memo.get("vars")
    if found is None:
        if e.op is Op.VAR:
            found = frozenset((e,))
        elif not e.args:
            found = frozenset()
        else:
            found = frozenset().union(*(free_vars(a) for a in e.args))
        memo["vars"] = found
    return found


def loads(root: Expr | Iterable[Expr]) -> list[Expr]:
    if isinstance(root, Expr):
        memo = root.memo()
        found = memo.get("loads")
        if found is None:
            found = memo["loads"] = [n for n in walk(root) if n.op is Op.LOAD]
        return found
    return [n for n in walk(root) if n.op is Op.LOAD]


def op_count(root: Expr | Iterable[Expr]) -> int:
    """Distinct non-leaf nodes, expensive ones counted four times."""
    return sum(4 if n.op in EXPENSIVE else 1 for n in walk(root) if n.op not in LEAVES)


def rewrite(root: Expr, visit: Callable[[Expr, tuple], Expr | None], memo: dict | None = None) -> Expr:
    """Rebuild ``root`` bottom-up. ``visit(node, new_args)`` may return a replacement;
    returning None keeps the node (rebuilt with its new children)."""
    memo = {} if memo is None else memo
    for node in walk(root):
        if id(node) in memo:
            continue
        new_args = tuple(memo[id(a)] for a in node.args)
        out = visit(node, new_args)
        if out is None:
            out = node if all(x is y for x, y in zip(new_args, node.args)) else rebuild(node, new_args)
        memo[id(node)] = out
    return memo[id(root)]


def rebuild(node: Expr, args: tuple) -> Expr:
    """``node`` with new children, re-simplified when it is index arithmetic."""
    from braze.ir import simplify
    if node.op is Op.LOAD:
        return load(node.arg, args, node.dtype)
    if node.op is Op.CAST:
        return store_cast(args[0], node.dtype) if node.arg == "store" else cast(args[0], node.dtype)
    if node.op is Op.WHERE:
        if node.dtype is dtypes.INDEX:
            return simplify.where(*args)
        return where(*args, domain=node.arg)
    if node.dtype is dtypes.INDEX or (node.op in COMPARISONS and args[0].dtype is dtypes.INDEX):
        return simplify.build(node.op, args, node.arg)
    return Expr(node.op, node.dtype, args, node.arg)


def substitute(root: Expr, mapping: dict, memo: dict | None = None) -> Expr:
    """Replace nodes (usually VARs) by other expressions, re-simplifying index math."""
    if not mapping:
        return root
    return rewrite(root, lambda node, args: mapping.get(node), memo)


def iter_vars(names: Iterable[str], sizes: Iterable[int]) -> Iterator[Expr]:
    for name, size in zip(names, sizes):
        yield var(name, size)
