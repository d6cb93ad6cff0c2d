"""Optional, bounded autotuning of launch parameters (``braze.config.autotune``).

Takes: a kernel's shape (the closed-form choice) and, at its first launch, the
real arguments. Gives: ``candidates(plan, shape)``, at most four variants of
the block sizes and warps that the same kernel text accepts, a ``Tuner``
launcher that times each variant once (``triton.testing.do_bench``), keeps
the fastest and records it on disk, and ``recorded(key)`` / ``apply`` to use
a recorded choice directly (a warm cache tunes and compiles nothing extra).

Tuning runs only on a GPU. The buffers a kernel writes are cloned for the
trial launches, so timing never changes the program's values (in-place updates
of inputs included).
"""
from __future__ import annotations

import json
import math
from dataclasses import replace

from braze.codegen.triton.shapes import Shape, _warps, cdiv, holds_whole_rows, loop_warps, next_pow2, row_warps
from braze.runtime import cache

MAX_CANDIDATES = 4


def record_key(module_key: str, device_name: str) -> str:
    return cache.key_of("triton-autotune", module_key, device_name)


def recorded(key: str) -> dict | None:
    path = cache.lookup(key, ".json")
    if path is None:
        return None
    with open(path) as f:
        return json.load(f)


def save(key: str, choice: dict) -> None:
    text = json.dumps(choice, sort_keys=True)
    cache.store(key, ".json", lambda out: open(out, "w").write(text))


def apply(plan, shape: Shape, choice: dict) -> Shape:
    """``shape`` with the block sizes and warps of ``choice``, and the grid they give."""
    blocks = {**shape.blocks, **choice["blocks"]}
    return replace(shape, blocks=blocks, num_warps=choice["num_warps"], grid=_grid(plan, shape, blocks))


def _grid(plan, shape: Shape, blocks: dict) -> tuple:
    if shape.name == "tiled":
        y = math.prod(v.size for v in plan.outer[:shape.tile_split])
        x = math.prod(v.size for v in plan.outer[shape.tile_split:])
        return (cdiv(y, blocks["YBLOCK"]) * cdiv(x, blocks["XBLOCK"]), 1, 1)
    return (cdiv(plan.outer_numel(), blocks["XBLOCK"]), 1, 1)


def candidates(plan, shape: Shape) -> list:
    """Up to ``MAX_CANDIDATES`` choices ({"blocks", "num_warps"}), the closed form first."""
    b = shape.blocks
    first = {"blocks": {k: v for k, v in b.items() if k in ("XBLOCK", "YBLOCK", "RBLOCK")},
             "num_warps": shape.num_warps}
    if shape.name == "pointwise":
        options = [{"XBLOCK": x} for x in (b["XBLOCK"] // 2, b["XBLOCK"] * 2, 4096) if 128 <= x <= 4096]
    elif shape.name == "tiled":
        options = [{"YBLOCK": y, "XBLOCK": x} for y, x in ((32, 32), (64, 64), (32, 128), (16, 64))]
    elif shape.name == "row":
        options = [{"XBLOCK": x} for x in (b["XBLOCK"] // 2, b["XBLOCK"] * 2, b["XBLOCK"] * 4)
                   if x >= 1 and x * b["RBLOCK"] <= 8192 and x <= next_pow2(plan.outer_numel())]
    elif shape.name == "row_loop":
        options = [{"RBLOCK": r} for r in (1024, 2048, 4096) if r != b["RBLOCK"]]
    elif shape.name == "column" and holds_whole_rows(plan, shape):  # its text has no loop: RBLOCK stays
        options = [{"XBLOCK": x} for x in (b["XBLOCK"] // 2, b["XBLOCK"] * 2) if x >= 16]
    elif shape.name == "column":
        options = [{"XBLOCK": x, "RBLOCK": r} for x, r in ((32, 64), (64, 32), (128, 16))]
    else:
        options = []
    found = [first]
    for blocks in options:
        size = math.prod(blocks.get(k, b.get(k, 1)) for k in ("XBLOCK", "YBLOCK", "RBLOCK"))
        if shape.name == "row":
            warps = row_warps(size)
        else:
            warps = loop_warps(size) if shape.name == "row_loop" else _warps(size, 256, 8)
        choice = {"blocks": blocks, "num_warps": warps}
        if choice not in found:
            found.append(choice)
    return found[:MAX_CANDIDATES]


class Tuner:
    """A launcher that, on its first call, times every candidate and keeps the fastest."""

    def __init__(self, name: str, launchers: list, choices: list, key: str, written: list):
        self.name, self.launchers, self.choices, self.key = name, launchers, choices, key
        self.written = written  # positions of arguments the kernel writes
        self.best = None

    def __call__(self, *args):
        if self.best is None:
            self.best = self._tune(args)
        return self.best(*args)

    def _tune(self, args):
        from triton.testing import do_bench
        trial = [a.clone() if k in self.written else a for k, a in enumerate(args)]
        times = []
        for launcher in self.launchers:
            try:
                times.append(do_bench(lambda: launcher(*trial), warmup=5, rep=20))
            except Exception:  # a variant that does not fit the device (shared memory, registers)
                times.append(math.inf)
        k = min(range(len(times)), key=times.__getitem__)
        save(self.key, self.choices[k])
        return self.launchers[k]
