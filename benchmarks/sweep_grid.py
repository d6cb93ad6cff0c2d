"""The reduction workloads of the sweep: points drawn on a grid no single rule can game.

Takes: a seed, a number of points and a size (elements per input, ``--elements``).
Gives: ``Point``s, each a reduction workload described in words (``point.name``), and
``build(point, device)``: the function, its fresh random inputs and the bytes it must move.

A point picks, independently:
- the reduction: sum, mean, amax, argmax, var_mean (Welford), a count of positives into
  int64, any, logsumexp, or row statistics beside column sums (as norm backwards produce);
- the axes: the last, the first, a middle one, several (N, H, W of an NCHW tensor: the
  per-channel statistics of a BatchNorm), or all;
- the layout of the input: contiguous, transposed (the reduced axis swapped with the
  kept one in memory), sliced (rows longer than the tensor), channels-last, or with a
  broadcast operand in the prologue (a per-channel or per-row scale);
- the dtype (float32, bfloat16, float16, int32, bool; each only where the reduction takes it);
- the reduced length from 1 to 2^20 (log-uniform; a third of them odd or prime) and the kept
  count from what is left of the size (all of the size and 1 when all axes are reduced);
- a pointwise prologue (none, ``x * s + b``, ``relu``, a float32 upcast) and epilogue (none,
  ``* 2 + 1``, ``sqrt(abs())``, a cast back to the input's dtype).
Sizes and the draw come from the seed: a new seed is a new sweep.
"""
from __future__ import annotations

import dataclasses
import math
import random

import torch

KINDS = ("sum", "mean", "amax", "argmax", "var_mean", "count", "any", "logsumexp", "rows_and_columns")
AXES = ("last", "first", "middle", "several", "all")
LAYOUTS = ("contiguous", "transposed", "sliced", "channels_last", "broadcast")
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.bool)
PROLOGUES = ("none", "scale_shift", "relu", "upcast")
EPILOGUES = ("none", "affine", "sqrt_abs", "cast_back")
MAX_REDUCED = 1 << 20
FLOAT_ONLY = ("mean", "var_mean", "logsumexp", "rows_and_columns")
PRIMES = (3, 7, 17, 31, 127, 509, 1021, 4093, 8191, 65521, 131071, 524287)


@dataclasses.dataclass(frozen=True)
class Point:
    kind: str
    axes: str
    layout: str
    dtype: torch.dtype
    reduced: int
    kept: int
    prologue: str
    epilogue: str

    @property
    def name(self) -> str:
        dtype = str(self.dtype).replace("torch.", "")
        extra = "".join(f" {p}" for p in (self.prologue, self.epilogue) if p != "none")
        return f"{self.kind} {self.axes} {self.layout} {dtype} r={self.reduced} k={self.kept}{extra}"


def draw(seed: int, count: int, elements: int) -> list[Point]:
    """``count`` points of about ``elements`` input elements each (kept × reduced)."""
    rng = random.Random(seed)
    points = []
    while len(points) < count:
        point = _draw_one(rng, elements)
        if point is not None and point not in points:
            points.append(point)
    return points


def _draw_one(rng: random.Random, elements: int) -> Point | None:
    kind, axes, layout = rng.choice(KINDS), rng.choice(AXES), rng.choice(LAYOUTS)
    dtype = rng.choice(DTYPES)
    if not _takes(kind, dtype):
        return None
    if kind == "rows_and_columns":
        axes = "last"
    if kind == "argmax" and axes == "several":
        axes = "middle"  # one axis, or all
    reduced = elements if axes == "all" else _length(rng, min(MAX_REDUCED, elements))
    kept = 1 if axes == "all" else max(1, elements // reduced)
    if axes in ("middle", "several") and kept < 2:
        return None
    prologue = rng.choice(PROLOGUES if dtype.is_floating_point else ("none", "scale_shift"))
    epilogue = rng.choice(EPILOGUES) if kind not in ("argmax", "count", "any") else "none"
    if kind in ("count", "any") and prologue == "upcast":
        prologue = "none"
    return Point(kind, axes, layout, dtype, reduced, kept, prologue, epilogue)


def _takes(kind: str, dtype) -> bool:
    if dtype is torch.bool:
        return kind in ("sum", "count", "any")
    if dtype is torch.int32:
        return kind not in FLOAT_ONLY
    return True


def _length(rng: random.Random, most: int) -> int:
    """Log-uniform in [1, most]; a third of the draws odd, a sixth prime."""
    n = max(1, min(most, int(2 ** rng.uniform(0, math.log2(most)))))
    shape = rng.random()
    if shape < 1 / 6:
        return max([p for p in PRIMES if p <= most] or [1], key=lambda p: -abs(math.log(p / n)))
    if shape < 1 / 3:
        return n | 1
    return n


# ----------------------------------------------------------------------------- building

def build(point: Point, device: str):
    """(fn, args, bytes moved) of ``point`` on ``device``, with fresh random inputs."""
    x, dims = _input(point, device)
    scale = _broadcast_operand(point, x, dims, device)
    fn = _function(point, dims)
    args = (x, scale)
    out = fn(*args)
    moved = _bytes_read(x) + (scale.numel() * scale.element_size()) + sum(
        t.numel() * t.element_size() for t in torch.utils._pytree.tree_leaves(out))
    return fn, args, moved


def _input(point: Point, device: str):
    """The input tensor in the point's layout, and the dims to reduce."""
    r, k = point.reduced, point.kept
    shape, dims = _logical_shape(point.axes, r, k)
    if point.layout == "channels_last" and len(shape) != 4:
        shape, dims = _as_nchw(point.axes, r, k)
    memory = list(shape)
    if point.layout == "transposed" and len(shape) >= 2:
        memory[-1], memory[-2] = memory[-2], memory[-1]
    if point.layout == "sliced":
        memory[-1] += 3
    base = _random(memory, point.dtype, device)
    if point.layout == "transposed" and len(shape) >= 2:
        base = base.transpose(-1, -2)
    if point.layout == "sliced":
        base = base[..., :shape[-1]]
    if point.layout == "channels_last" and len(shape) == 4:
        base = base.contiguous(memory_format=torch.channels_last)
    return base, dims


def _logical_shape(axes: str, r: int, k: int):
    if axes == "last":
        return (k, r), (1,)
    if axes == "first":
        return (r, k), (0,)
    if axes == "all":
        return _split(r), (0, 1)
    outer, inner = _split(k)
    if axes == "middle":
        return (outer, r, inner), (1,)
    r_outer, r_inner = _split(r)
    return (r_outer, k, r_inner), (0, 2)  # several: N and H*W of an NCHW tensor


def _as_nchw(axes: str, r: int, k: int):
    """A 4-D channels-last input for the point: C is the kept axis, or the reduced one."""
    if axes in ("middle", "last", "first"):  # reduce C of (N, C, H, W): kept N*H*W
        n, hw = _split(k)
        h, w = _split(hw)
        return (n, r, h, w), (1,)
    if axes == "several":  # per-channel statistics: reduce N, H, W
        n, hw = _split(r)
        h, w = _split(hw)
        return (n, k, h, w), (0, 2, 3)
    n, chw = _split(r)
    c, hw = _split(chw)
    h, w = _split(hw)
    return (n, c, h, w), (0, 1, 2, 3)


def _split(n: int):
    """``n`` as ``a * b`` with ``a`` the largest divisor not above sqrt(n) (1 for a prime)."""
    a = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return a, n // a


def _random(shape, dtype, device):
    if dtype is torch.bool:
        return torch.rand(shape, device=device) > 0.5
    if dtype is torch.int32:
        return torch.randint(-100, 100, shape, dtype=dtype, device=device)
    return torch.randn(shape, device=device).to(dtype)


def _broadcast_operand(point: Point, x, dims, device):
    """A per-kept-position scale for the broadcast layout (else a 1-element one)."""
    if point.layout != "broadcast" or point.axes == "all":
        return torch.ones((), device=device, dtype=torch.float32) * 1.5
    shape = [1 if d in dims else size for d, size in enumerate(x.shape)]
    return torch.rand(shape, device=device) + 0.5


def _bytes_read(x) -> int:
    return x.numel() * x.element_size()


def _function(point: Point, dims):
    prologue, reduce_, epilogue = _PROLOGUE[point.prologue], _reduction(point, dims), _epilogue(point)

    def fn(x, scale):
        return epilogue(reduce_(prologue(x, scale)), x.dtype)
    fn.__name__ = point.name.replace(" ", "_").replace("=", "")
    return fn


_PROLOGUE = {
    "none": lambda x, s: x * s if s.dim() else x,
    "scale_shift": lambda x, s: x * s + 0.25,
    "relu": lambda x, s: torch.relu(x * s),
    "upcast": lambda x, s: x.float() * s,
}


def _reduction(point: Point, dims):
    one = dims if len(dims) == 1 else None
    table = {
        "sum": lambda v: v.sum(dims),
        "mean": lambda v: v.mean(dims),
        "amax": lambda v: v.amax(dims),
        "argmax": lambda v: v.argmax(one[0]) if one else v.argmax(),
        "var_mean": lambda v: torch.var_mean(v, dims),
        "count": lambda v: (v > 0).sum(dims, dtype=torch.int64),
        "any": lambda v: (v > 0).any(dims),
        "logsumexp": lambda v: torch.logsumexp(v, dims),
        "rows_and_columns": lambda v: (v.sum(-1), (v * v).sum(0)),
    }
    return table[point.kind]


def _epilogue(point: Point):
    def each(fn):
        return lambda out, dtype: torch.utils._pytree.tree_map(lambda t: fn(t, dtype), out)
    table = {
        "none": lambda out, dtype: out,
        "affine": each(lambda t, dtype: t * 2 + 1),
        "sqrt_abs": each(lambda t, dtype: t.abs().sqrt()),
        "cast_back": each(lambda t, dtype: t.to(dtype) if t.dtype.is_floating_point else t),
    }
    return table[point.epilogue]
