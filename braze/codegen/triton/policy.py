"""The Triton target: what the passes may assume when a graph runs as Triton kernels, on a
GPU or in Triton's interpreter (CPU tests, shaped as for the H100).

Takes: the graph's device and its ``DeviceInfo`` (``shapes.device_info``). Gives:
``TritonTarget`` (``braze.target.Target``): ``fill`` (programs that fill the device, two per
SM), the op costs inlining weighs, atomic adds for scatters, which scans are worth a kernel,
and the fusions a GPU refuses (``veto``): a second pass over few long rows, which would keep
a reduction from being split across programs (``few_programs``), and a gather read by a
reduction of few long rows (``slow_gather_rows``).

Op costs. A load costs about 100 flops and libdevice's exp, log, erf take 10-35
instructions per element: recomputing is cheap, and each costly op counts 4; but sin, cos,
tan, acosh and lgamma take 87-309 (their slow argument reductions are inlined for every
element a thread handles), and code size is compile time (LLaMA's rotary kernel
recomputing sin and cos was its graph's slowest kernel to compile: docs/benchmarks.md,
"Where compile time goes"): they count 25, over
``config.inline_max_ops``, so a buffer holding one, read by several kernels, is stored. A
random number (``Op.RANDOM``: Philox's 10 rounds, about 100 integer instructions) counts 25.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from braze.fuse.legality import INNER, Reason, Verdict, columnar, gathers, multi_pass
from braze.ir import unbacked
from braze.ir.expr import EXPENSIVE, Op
from braze.target import Target

OP_COSTS = {**dict.fromkeys(EXPENSIVE, 4),
            **dict.fromkeys((Op.SIN, Op.COS, Op.TAN, Op.ACOSH, Op.LGAMMA, Op.RANDOM), 25)}
ATOMIC_ADD_DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)  # Triton's atomic_add
SCAN_FEW_ROWS = 128  # on a GPU, scans of fewer rows than this ...
SCAN_LONG_ROW = 8192  # ... that are longer than this run through ATen (its device-wide scan)

SPLIT_MIN_ROW = 1 << 14  # rows shorter than this are never split across programs
SPLIT_MIN_COLUMN = 1 << 10  # columns shorter than this are never split
COLUMN_BLOCK_MIN = 16  # the fewest columns one program of a column reduction takes
# A column reduction is also split where its columns make fewer blocks of this many than
# the device has SMs: one program per block would then take 16-32 columns (64-128-byte
# pieces of each row), too narrow to read at the memory's rate; row chunks over several
# programs keep 64 columns a program (``python -m benchmarks.column_sums``).
COLUMN_BLOCK_WIDE = 64
GATHER_ROW_MIN = 2048  # a reduction's row longer than this (one loop chunk) gathers in several rounds


@dataclass
class TritonTarget(Target):
    name: str = "triton"
    op_costs: dict = field(default_factory=lambda: OP_COSTS)
    supports_foreach: bool = True
    takes_sizes: bool = True

    @classmethod
    def for_device(cls, device) -> "TritonTarget":
        from braze.codegen.triton.shapes import device_info
        device = torch.device(device)
        return cls(device=device, fill=device_info(device).fill)

    def scatter_adds(self, dtype) -> bool:
        if torch.are_deterministic_algorithms_enabled():
            return False  # atomics add in any order
        return dtype in ATOMIC_ADD_DTYPES

    def scans_rows(self, rows: int, length: int) -> bool:
        if _late(rows, length):
            return True
        return self.device.type != "cuda" or rows >= SCAN_FEW_ROWS or length <= SCAN_LONG_ROW

    def gathers_slowly(self, outer: int, reduce: int) -> bool:
        return not _late(outer, reduce) and slow_gather_rows(outer, reduce, self.fill)

    def veto(self, nodes, nest, graph):
        outer, reduce = nest.outer_numel, nest.reduce_numel
        if _late(outer, reduce):  # (no split for such a size: ``shapes._reduction``)
            return None
        if multi_pass(nest) and few_programs(outer, reduce, columnar(nodes, nest, graph), self.fill):
            return Verdict(False, Reason.FEW_ROWS, f"{outer} rows of {reduce}")
        if slow_gather_rows(outer, reduce, self.fill):
            gather = next((n for n in nodes if nest.roles[n.name] == INNER and gathers(n.body)), None)
            if gather is not None:
                return Verdict(False, Reason.SLOW_GATHER, f"{gather.name} gathers for {outer} rows of {reduce}")
        return None

    def compile(self, plans):
        from braze.codegen.triton import TritonBackend
        return TritonBackend(self.device).compile(plans)


def _late(*sizes) -> bool:
    """Does a size rest on a symbol known only once the graph runs? Then no speed choice is
    made on it (no class can be guarded): the general code."""
    return any(unbacked.unbacked_in(n) for n in sizes)


def slow_gather_rows(outer: int, reduce: int, fill: int) -> bool:
    """Would a reduction of ``outer`` rows of ``reduce`` elements that gathers (loads at
    indices it loads) wait on its gathers chunk after chunk? Fewer rows than programs fill
    the device, each longer than ``GATHER_ROW_MIN`` and too short to be split. (A loss's
    per-row pick from the logits, summed in one program, waits on each chunk's gathers
    before the next; the kernel that computes the rows' max and sum gathers them in
    passing instead: docs/benchmarks.md, "Reductions by layout".)"""
    return outer < fill and GATHER_ROW_MIN < reduce < SPLIT_MIN_ROW


def few_programs(outer: int, reduce: int, columnar: bool, fill: int) -> bool:
    """Would a reduction of ``outer`` rows of ``reduce`` elements, one program per row (per
    block of columns when ``columnar``), give fewer than ``fill`` programs (two per SM) for
    rows long enough to be split across programs instead? Columns: fewer than ``fill``
    blocks of ``COLUMN_BLOCK_MIN``, or than ``fill / 2`` of ``COLUMN_BLOCK_WIDE``."""
    if columnar:
        blocks = -(-outer // COLUMN_BLOCK_MIN)
        wide_blocks = -(-outer // COLUMN_BLOCK_WIDE)
        return reduce >= SPLIT_MIN_COLUMN and (blocks < fill or wide_blocks < fill // 2)
    return reduce >= SPLIT_MIN_ROW and outer < fill
