"""Hypothesis strategy for random well-typed PyTorch programs.

Takes: the op catalogue (``fuzz_ops.OPS``: name -> rule) and switches in
``FuzzConfig``. Gives: ``programs(config)``, a strategy of ``Program``s: chains
and DAGs of pointwise, reduction, view, cast and indexing ops over inputs with
random sizes, broadcasts, dtypes and layouts.

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
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from hypothesis import assume
from hypothesis import strategies as st

from fuzz_program import DTYPES, LAYOUTS, InputSpec, Program, make_input

SIZES = (1, 2, 3, 4, 5, 7, 8, 16, 17, 33)
MAX_NUMEL = 4096
MAX_VALUE_NUMEL = 20000


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
    of a known bug (each with a regression test in tests/test_fuzz_regressions.py)."""
    max_ops: int = 10
    dtypes: tuple = DTYPES
    layouts: tuple = LAYOUTS
    disabled: frozenset = field(default_factory=frozenset)


class Builder:
    """Draws choices and records lines; runs every line at once on real inputs."""

    def __init__(self, draw, config: FuzzConfig, seed: int):
        self.draw, self.config = draw, config
        self.program = Program(seed=seed)
        self.values: list[Value] = []
        self.env: dict = {}
        self._names = 0

    # ------------------------------------------------------------ drawing

    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def choice(self, options):
        options = list(options)
        return options[self.draw(st.integers(0, len(options) - 1))]

    def coin(self) -> bool:
        return self.draw(st.booleans())

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
        value = Value(name, spec.shape, spec.dtype, exact=True, is_input=True)
        if spec.low is None:  # index tensors are not operands of other ops
            self.values.append(value)
        return value

    def data_input(self, shape: tuple, dtype=None) -> Value:
        dtype = dtype if dtype is not None else self.choice(self.config.dtypes)
        layout = self.choice(self.config.layouts)
        expand = ()
        if layout == "expanded":
            expand = tuple(d for d, s in enumerate(shape) if s > 1 and self.coin())
            layout = layout if expand else "contiguous"
        if layout in ("transposed",) and len(shape) < 2:
            layout = "contiguous"
        return self.add_input(InputSpec(tuple(shape), dtype, layout, expand))

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
            if any(w in str(exc) for w in ("non-zero size", "empty", "numel() == 0")):
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

    def mutate(self, value: Value, statement: str, exact: bool) -> None:
        """An in-place statement on an input (``a0.mul_(2)``)."""
        exec(statement, {"torch": torch, "F": F}, self.env)
        self.program.lines.append(statement)
        value.exact = value.exact and exact


def base_shape(draw) -> tuple:
    ndim = draw(st.integers(0, 4))
    shape = []
    for _ in range(ndim):
        options = [s for s in SIZES if math.prod(shape) * s <= MAX_NUMEL]
        shape.append(draw(st.sampled_from(options)))
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
    from fuzz_ops import OPS
    seed = draw(st.integers(0, 2 ** 16))
    b = Builder(draw, config, seed)
    b.program.grad = draw(st.integers(0, 2)) == 0  # a third of the programs: gradients too
    shape = base_shape(draw)
    uniform_dtype = draw(st.sampled_from(config.dtypes)) if draw(st.booleans()) else None
    for _ in range(draw(st.integers(1, 3))):
        b.data_input(broadcast_shape(b, shape), uniform_dtype)
    names = [n for n in sorted(OPS) if n not in config.disabled]
    for _ in draw(st.lists(st.just(None), min_size=1, max_size=config.max_ops)):
        for _attempt in range(5):
            if OPS[b.choice(names)](b) is not None:
                break
    assume(b.program.lines)  # every rule declined: nothing to compile
    if b.program.grad and any(spec.dtype is torch.bfloat16 for spec in b.program.inputs):
        b.program.grad = False  # bf16 rounding moves float32 gradients: judged by outputs only
    b.program.outputs = _outputs(b)
    return b.program


def _outputs(b: Builder) -> list:
    """Values no op read (the sinks), at most six; the last value always. (Inputs
    changed in place are compared after the call, not returned.)"""
    used = set()
    for line in b.program.lines:
        expr = line.split("=", 1)[1] if " = " in line else line
        used.update(tok for tok in _names_in(expr))
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
