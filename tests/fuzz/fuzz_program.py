"""A fuzzed program: its inputs, its straight-line body, and its Python source.

Takes: input specs and lines of PyTorch code built by ``fuzz_generate``. Gives:
``Program``: ``source()`` (a readable ``def fn(a0, a1, ...)``, which is also the
repro printed on a mismatch), ``function()`` (that source, compiled), and
``make_inputs()`` (fresh tensors with the specs' sizes, dtypes and layouts; the
values depend only on the program seed and the input's position).

Layouts make inputs that are not contiguous, as models get them: ``transposed``
(dimensions stored in reverse order), ``permuted`` (stored in the order ``perm``),
``sliced`` (every other element of a larger tensor, with a storage offset),
``expanded`` (stride 0 along the dims in ``expand``).

``repro()`` is a standalone script: it rebuilds the program and runs the same
comparison as the fuzzer (``fuzz_check.main``), printing ``ok`` or the failure.
"""
from __future__ import annotations

import linecache
import math
import os
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
LOW_PRECISION = (torch.bfloat16, torch.float16)
INTS = (torch.int8, torch.uint8, torch.int32, torch.int64)
DTYPES = FLOATS + INTS + (torch.bool,)
LAYOUTS = ("contiguous", "transposed", "permuted", "sliced", "expanded")


def is_float(dtype) -> bool:
    return dtype.is_floating_point


def is_int(dtype) -> bool:
    return not dtype.is_floating_point and dtype is not torch.bool


@dataclass(frozen=True)
class InputSpec:
    """One argument of the fuzzed function. ``low``/``high`` bound integer values
    (index tensors); ``unique`` draws them without repetition (a permutation)."""
    shape: tuple
    dtype: torch.dtype
    layout: str = "contiguous"
    expand: tuple = ()  # dims stored with size 1 and expanded (layout 'expanded')
    perm: tuple = ()  # storage order of the dims, outermost first (layout 'permuted')
    low: int | None = None
    high: int | None = None
    unique: bool = False

    def __repr__(self) -> str:
        parts = [repr(self.shape), str(self.dtype)]
        parts += [f"{k}={getattr(self, k)!r}" for k in ("layout", "expand", "perm", "low", "high", "unique")
                  if getattr(self, k) != InputSpec.__dataclass_fields__[k].default]
        return f"InputSpec({', '.join(parts)})"


def wants_grad(spec: InputSpec) -> bool:
    """In a gradient program: the floating-point data inputs require grad."""
    return spec.dtype.is_floating_point and spec.low is None


def _values(spec: InputSpec, shape: tuple, gen: torch.Generator) -> torch.Tensor:
    """Contiguous values of ``shape`` for ``spec``'s dtype and range."""
    dtype = spec.dtype
    if spec.unique:
        return torch.randperm(spec.high, generator=gen)[:math.prod(shape)].reshape(shape).to(dtype)
    if spec.low is not None:
        return torch.randint(spec.low, spec.high, shape, generator=gen).to(dtype)
    if dtype is torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if is_float(dtype):
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * 6 - 3).to(dtype)
    info = torch.iinfo(dtype)
    if torch.rand((), generator=gen) < 0.5:  # small values, or the whole range (wrap-around)
        low, high = max(info.min, -20), min(info.max, 20)
    else:
        low, high = info.min, info.max
    return torch.randint(low, high, shape, generator=gen, dtype=torch.int64).to(dtype)


def make_input(spec: InputSpec, seed: int) -> torch.Tensor:
    """A tensor of ``spec``: sizes, dtype and layout, values from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    shape = spec.shape
    if spec.layout == "transposed" and len(shape) >= 2:
        return _values(spec, shape[::-1], gen).permute(*reversed(range(len(shape))))
    if spec.layout == "permuted" and len(spec.perm) == len(shape) >= 2:
        stored = _values(spec, tuple(shape[d] for d in spec.perm), gen)
        return stored.permute(*[spec.perm.index(d) for d in range(len(shape))])
    if spec.layout == "sliced" and len(shape) >= 1:
        big = _values(spec, tuple(2 * s + 1 for s in shape), gen)
        return big[tuple(slice(1, 1 + 2 * s, 2) for s in shape)]
    if spec.layout == "expanded" and spec.expand:
        small = tuple(1 if d in spec.expand else s for d, s in enumerate(shape))
        return _values(spec, small, gen).expand(shape)
    return _values(spec, shape, gen)


@dataclass
class Program:
    inputs: list = field(default_factory=list)  # InputSpec per argument a0, a1, ...
    lines: list = field(default_factory=list)  # statements of the body
    outputs: list = field(default_factory=list)  # names returned
    seed: int = 0
    grad: bool = False  # float32/float64 data inputs require grad; gradients are compared too

    def arg_names(self) -> list:
        return [f"a{k}" for k in range(len(self.inputs))]

    def source(self) -> str:
        body = self.lines + [f"return ({', '.join(self.outputs)},)"]
        return f"def fn({', '.join(self.arg_names())}):\n" + "".join(f"    {ln}\n" for ln in body)

    def function(self):
        """The program as a Python function (its source is visible to tracebacks)."""
        source = self.source()
        filename = f"<fuzz program {abs(hash(source)):x}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = {"torch": torch, "F": F}
        exec(compile(source, filename, "exec"), namespace)
        return namespace["fn"]

    def make_inputs(self) -> list:
        tensors = [make_input(spec, self.seed * 1000 + k) for k, spec in enumerate(self.inputs)]
        if self.grad:
            for spec, t in zip(self.inputs, tensors):
                if wants_grad(spec):
                    t.requires_grad_()
        return tensors

    def __repr__(self) -> str:
        return "\n" + self.repro()

    def repro(self, backend: str = "cpp", header: str = "", dynamic: bool = False) -> str:
        """A standalone script that rebuilds this program and compares braze with eager
        (the function's source is in it too, for reading)."""
        here = os.path.dirname(os.path.abspath(__file__))
        specs = "".join(f"        {spec!r},\n" for spec in self.inputs)
        lines = "".join(f"        {line!r},\n" for line in self.lines)
        comment = "".join(f"# {line}\n" for line in (header.splitlines() if header else []))
        source = "".join(f"#   {line}\n" for line in self.source().splitlines())
        return (f"{comment}# The program, as the fuzzer compiles it:\n{source}"
                "import sys\n"
                f"sys.path[:0] = [{here!r}, {os.path.dirname(here)!r}]\n"
                "import torch\n"
                "from fuzz_program import InputSpec, Program\n"
                "from fuzz_check import main\n\n"
                "program = Program(\n"
                f"    inputs=[\n{specs}    ],\n"
                f"    lines=[\n{lines}    ],\n"
                f"    outputs={self.outputs!r}, seed={self.seed}, grad={self.grad})\n"
                f"main(program, backend={backend!r}{', dynamic=True' if dynamic else ''})\n")
