"""Random well-typed PyTorch programs: a Hypothesis strategy, or from a seed.

Takes: the op catalogue (``fuzz_ops.OPS``: name -> rule) and switches in
``FuzzConfig``. Gives: ``programs(config)``, a strategy of ``Program``s (for
pytest: Hypothesis shrinks a failure), and ``program_from_seed(seed, config)``,
the same generator driven by ``random.Random(seed)`` (for ``fuzz_run``, many
programs fast, each rebuilt from its seed): chains and DAGs of pointwise,
reduction, normalization, scan, view, cast, indexing and in-place ops over inputs
with random sizes, broadcasts, dtypes and layouts (strides). Both draw through a
``Chooser`` (``integer``, ``coin``, ``choice``).

Each rule draws its operands and parameters through a ``Builder`` and emits one
expression; the builder runs it at once on the program's real inputs, so every
value's sizes and dtype are known (and the program is valid for eager by
construction). A value is *exact* when braze and eager must compute it bit for
bit (integers, bools, and floats built only from inputs by views, casts,
max/min, abs, neg, where); discontinuous ops (comparisons, rounding, float ->
int casts, argmax, floor division) only take exact operands, so that a
rounding difference allowed by the float tolerances cannot turn into a
different bool or integer.
"""
from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from hypothesis import assume
from hypothesis import strategies as st

from fuzz_program import DTYPES, LAYOUTS, LOW_PRECISION, InputSpec, Program, make_input, wants_grad

SIZES = (1, 2, 3, 4, 5, 7, 8, 16, 17, 33)
MAX_NUMEL = 4096
MAX_VALUE_NUMEL = 20000
# eager errors that mean "not this operand" (the rule is skipped): an empty reduction,
# an op without a kernel for the dtype on the CPU
DECLINED = ("non-zero size", "empty", "numel() == 0", "not implemented for")


@dataclass
class Value:
    name: str
    shape: tuple
    dtype: torch.dtype
    exact: bool
    is_input: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class FuzzConfig:
    """What the generator may use; ``disabled`` holds op names quarantined because
    of a known bug (each with a regression test in tests/e2e/test_fuzz_regressions.py)."""
    min_ops: int = 1
    max_ops: int = 12
    dtypes: tuple = DTYPES
    layouts: tuple = LAYOUTS
    disabled: frozenset = field(default_factory=frozenset)


class Chooser:
    """Choices from Hypothesis's ``draw`` (``draw`` given) or from ``random.Random``."""

    def __init__(self, draw=None, rng: random.Random | None = None):
        self.draw, self.rng = draw, rng

    def integer(self, low: int, high: int) -> int:
        if self.draw is not None:
            return self.draw(st.integers(low, high))
        return self.rng.randint(low, high)

    def coin(self) -> bool:
        return self.draw(st.booleans()) if self.draw is not None else self.rng.random() < 0.5

    def choice(self, options):
        options = list(options)
        return options[self.integer(0, len(options) - 1)]


class Builder:
    """Draws choices and records lines; runs every line at once on real inputs (the
    data inputs of a gradient program require grad there too, so that an in-place op
    autograd rejects is found while building)."""

    def __init__(self, chooser: Chooser, config: FuzzConfig, seed: int):
        self.chooser, self.config = chooser, config
        self.program = Program(seed=seed)
        self.values: list[Value] = []
        self.env: dict = {}
        self._names = 0
        self.broken = False  # see ``mutate``

    # ------------------------------------------------------------ drawing

    def integer(self, low: int, high: int) -> int:
        return self.chooser.integer(low, high)

    def choice(self, options):
        return self.chooser.choice(options)

    def coin(self) -> bool:
        return self.chooser.coin()

    def pick(self, accept=lambda v: True) -> Value | None:
        """An existing value that ``accept``s: often the latest one (chains), else any (DAGs)."""
        candidates = [v for v in self.values if accept(v)]
        if not candidates:
            return None
        if self.coin():
            return candidates[-1]
        return self.choice(candidates)

    def dim(self, value: Value) -> int:
        return self.integer(0, value.ndim - 1) - (value.ndim if self.coin() else 0)

    # ------------------------------------------------------------ inputs

    def add_input(self, spec: InputSpec) -> Value:
        position = len(self.program.inputs)
        self.program.inputs.append(spec)
        name = f"a{position}"
        self.env[name] = make_input(spec, self.program.seed * 1000 + position)
        if self.program.grad and wants_grad(spec):
            self.env[name].requires_grad_()
        value = Value(name, spec.shape, spec.dtype, exact=True, is_input=True)
        if spec.low is None:  # index tensors are not operands of other ops
            self.values.append(value)
        return value

    def data_input(self, shape: tuple, dtype=None) -> Value:
        dtype = dtype if dtype is not None else self.choice(self.config.dtypes)
        layout = self.choice(self.config.layouts)
        expand, perm = (), ()
        if layout == "expanded":
            expand = tuple(d for d, s in enumerate(shape) if s > 1 and self.coin())
            layout = layout if expand else "contiguous"
        if layout in ("transposed", "permuted") and len(shape) < 2:
            layout = "contiguous"
        if layout == "permuted":
            perm = self.permutation(len(shape))
            layout = layout if perm != tuple(range(len(shape))) else "transposed"
            perm = perm if layout == "permuted" else ()
        return self.add_input(InputSpec(tuple(shape), dtype, layout, expand, perm))

    def permutation(self, n: int) -> tuple:
        perm = list(range(n))
        for k in range(n - 1, 0, -1):
            j = self.integer(0, k)
            perm[k], perm[j] = perm[j], perm[k]
        return tuple(perm)

    def index_input(self, shape: tuple, high: int, *, negative=False, unique=False,
                    dtype=torch.int64) -> str:
        """An integer tensor of indices into a dim of size ``high`` (``[-high, high)``
        with ``negative``); returns its name."""
        low = 0 if unique or not negative else -high
        return self.add_input(InputSpec(tuple(shape), dtype, low=low, high=high, unique=unique)).name

    # ------------------------------------------------------------ emitting

    def emit(self, expr: str, exact: bool) -> Value | None:
        """Add ``vN = expr``; None (and nothing added) if the value is too large."""
        name = f"v{self._names}"
        try:
            result = eval(expr, {"torch": torch, "F": F}, self.env)
        except (IndexError, RuntimeError) as exc:  # a reduction over a dim of size 0
            if any(w in str(exc) for w in DECLINED):
                return None
            raise
        if not isinstance(result, torch.Tensor):
            raise TypeError(f"fuzz rule produced {type(result)} from {expr}")
        if result.numel() > MAX_VALUE_NUMEL:
            return None
        self._names += 1
        self.env[name] = result
        self.program.lines.append(f"{name} = {expr}")
        value = Value(name, tuple(result.shape), result.dtype, exact or not result.dtype.is_floating_point)
        self.values.append(value)
        return value

    def mutate(self, value: Value, statement: str, exact: bool) -> bool:
        """An in-place statement (``a0.mul_(2)``, ``v3[0].neg_()``); False (and nothing
        recorded) where eager rejects it (autograd: a leaf that requires grad, or a view
        of one; a target with stride 0). A float changed by an inexact op makes every float value inexact (its
        views are not tracked). In a gradient program an in-place change to a value
        autograd saved for the backward breaks the backward: ``broken`` is set, and the
        program is dropped."""
        try:
            exec(statement, {"torch": torch, "F": F}, self.env)
        except RuntimeError:  # (raised before anything is written)
            return False
        self.program.lines.append(statement)
        if not exact:
            for v in self.values:
                v.exact = v.exact and not v.dtype.is_floating_point
        if self.program.grad and not self._differentiable():
            self.broken = True
        return True

    def _differentiable(self) -> bool:
        """Can eager still differentiate every value so far?"""
        outs = [t for t in self.env.values() if isinstance(t, torch.Tensor) and t.requires_grad]
        leaves = [t for t in outs if t.is_leaf]
        outs = [t for t in outs if not t.is_leaf]
        if not outs or not leaves:
            return True
        try:
            torch.autograd.grad([t.float().sum() for t in outs], leaves, allow_unused=True)
        except RuntimeError:
            return False
        return True


def base_shape(c: Chooser) -> tuple:
    ndim = c.integer(0, 4)
    shape = []
    for _ in range(ndim):
        options = [s for s in SIZES if math.prod(shape) * s <= MAX_NUMEL]
        shape.append(c.choice(options))
    return tuple(shape)


def broadcast_shape(b: Builder, shape: tuple) -> tuple:
    """``shape``, a suffix of it, or it with some dims set to 1."""
    if shape and b.coin():
        if b.coin():
            return shape[b.integer(0, len(shape)):]
        return tuple(1 if b.coin() else s for s in shape)
    return shape


@st.composite
def programs(draw, config: FuzzConfig = FuzzConfig()) -> Program:
    program = generate(Chooser(draw=draw), config, draw(st.integers(0, 2 ** 16)))
    assume(program is not None)  # every rule declined: nothing to compile
    return program


def program_from_seed(seed: int, config: FuzzConfig = FuzzConfig()) -> Program | None:
    """The program of ``seed`` (None where every rule declined)."""
    return generate(Chooser(rng=random.Random(seed)), config, seed % 2 ** 16)


def generate(c: Chooser, config: FuzzConfig, seed: int) -> Program | None:
    from fuzz_ops import OPS
    b = Builder(c, config, seed)
    b.program.grad = c.integer(0, 2) == 0  # a third of the programs: gradients too
    shape = base_shape(c)
    uniform_dtype = c.choice(config.dtypes) if c.coin() else None
    for _ in range(c.integer(1, 3)):
        b.data_input(broadcast_shape(b, shape), uniform_dtype)
    names = [n for n in sorted(OPS) if n not in config.disabled]
    for _ in range(c.integer(config.min_ops, config.max_ops)):
        for _attempt in range(5):
            try:
                if OPS[b.choice(names)](b) is not None:
                    break
            except (RuntimeError, IndexError):  # eager rejects these operands: another rule
                pass
    if not b.program.lines or b.broken:
        return None
    if b.program.grad and not any(wants_grad(spec) for spec in b.program.inputs):
        b.program.grad = False
    b.program.outputs = _outputs(b)
    return b.program


def _outputs(b: Builder) -> list:
    """Values no op read (the sinks), at most six; the last value always. (Inputs
    changed in place are compared after the call, not returned.)"""
    used = set()
    for line in b.program.lines:
        if " = " in line:
            used.update(_names_in(line.split("=", 1)[1]))
        else:  # an in-place statement: its target (the first name) changes, the others are read
            used.update(list(_names_in(line))[1:])
    sinks = [v.name for v in b.values if v.name not in used and not v.is_input]
    if b.values and b.values[-1].name not in sinks:
        sinks.append(b.values[-1].name)
    return sinks[-6:] or [b.values[-1].name]


def _names_in(expr: str):
    token = ""
    for ch in expr + " ":
        if ch.isalnum() or ch == "_":
            token += ch
        else:
            if token[:1] in ("v", "a") and token[1:].isdigit():
                yield token
            token = ""


def examples_from_env(default: int) -> int:
    """``BRAZE_FUZZ_EXAMPLES`` (0: practically unbounded), else ``default``."""
    text = os.environ.get("BRAZE_FUZZ_EXAMPLES", "")
    if not text.strip():
        return default
    return int(text) or 10 ** 9
