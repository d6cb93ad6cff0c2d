"""Kernel shapes and their launch parameters, in closed form.

Takes: a ``KernelPlan`` and the device's properties (``DeviceInfo``). Gives:
``Shape``: which kernel shape the plan gets, the block sizes (constexprs), the
number of warps and the grid, all computed once at compile time.

Shapes:
- ``pointwise``: 1-D blocks over the flattened outer loops (a scatter node's too:
  its stores go where loaded indices say; accumulating ones add atomically).
- ``foreach``: several independent 1-D pointwise plans in one launch (an
  optimizer step): one ``XBLOCK`` for all, the grid the concatenation of each
  plan's blocks (``braze.codegen.triton.foreach``).
- ``tiled``: 2-D ``[YBLOCK, XBLOCK]`` tiles when a load (or a second store) is
  contiguous along another loop than the primary store (transpose, permute,
  channels-last): both sides read or write whole rows of the tile.
- ``row``: a reduction whose rows fit in registers (``RBLOCK >= rnumel``):
  each level is computed once, loads shared between levels, so the row is read
  from memory once. Rows up to 32 KiB of their widest buffer (8192 fp32, 16384
  bf16 elements) are kept in registers, with warps scaled to the block.
- ``row_loop``: long rows: each reduce level loops over ``RBLOCK`` chunks with
  one accumulator per lane, merged at the end of the loop (a softmax's max and
  sum of exponentials share one loop: ``online``).
- ``column``: the reduced loop is strided and the innermost outer loop is
  contiguous (``x.sum(0)``): tiles ``[RBLOCK, XBLOCK]`` reduced along axis 0; over
  few rows, wider tiles that hold them all, reduced without a loop.
- ``scan``: a cumulative sum or product: a row of up to 4096 elements in one
  chunk; longer rows in ``[XBLOCK, RBLOCK]`` chunks in order, each chunk's scan
  offset by the running value of the chunks before.
- ``split``: few outer elements and long rows (a full sum): ``RSPLIT``
  programs per outer block each reduce one chunk into a workspace, a second
  kernel merges the partials in order (deterministic) and runs the epilogue.
  Each step of a chunk loads ``SPLIT_STEP_BYTES`` whatever the dtype.

With symbolic sizes, a block that must hold a whole row (``row``: ``RBLOCK >= rnumel``)
guards its power-of-two class. Every other block size is one any size runs correctly with
(the kernel masks or loops): it is chosen from the compiling call's sizes, unguarded
(``symbols.hint``), so that it does not split the graph into a size class per choice.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import torch

from braze.codegen.triton.policy import few_programs
from braze.fuse.legality import INNER, REDUCTION, reads_columns
from braze.ir import simplify as S
from braze.ir.reductions import LANE_CHAIN_MAX
from braze.ir import symbols, unbacked
from braze.ir.expr import Op, free_vars, walk
from braze.ir.graph import ReduceOp

# Persistent rows. Values are computed in float32 (or wider) whatever the stored dtype, so a
# row costs registers per element: RBLOCK / (32 * num_warps) registers per thread for each
# row-sized value that is live at once (the loaded row, a centered copy, a weight row).
# At 16 warps an 8192-element row is 16 registers per value per thread, a 16384-element one
# 32; a LayerNorm keeps about three such values live (about 100 registers of the 255 a
# thread may use; one 512-thread program per SM at the largest rows). Half-width buffers
# also halve the load registers, hence the limit in bytes of the widest buffer, capped in
# elements.
PERSISTENT_MAX = 16384  # longest row kept in registers, in elements
PERSISTENT_BYTES = 32768  # ... and in bytes of its widest buffer
ROW_WARPS_MAX = 16  # 512 threads: 32 elements each at 16384
LOOP_RBLOCK = 2048  # chunk of a reduction loop
# Elements of a loop chunk per warp: 4 per thread (16 warps at 2048). More warps keep more
# loads in flight on a long row; at 8 per thread a looped row (cross-entropy's online max and
# sum of exponentials) ran measurably slower (docs/benchmarks.md, "Reductions by layout").
LOOP_WARP_ELEMENTS = 128
COLUMN_SPLIT_TILE = 2048  # elements of a split column reduction's [RBLOCK, XBLOCK] tile
COLUMN_BLOCK_MAX = 1024  # the most columns a column reduction's block takes (few rows)
# A row split's step loads SPLIT_STEP_BYTES, in a tile of SPLIT_TILE_MIN to SPLIT_TILE_MAX
# elements: 1024 elements a step (4 KB of float32, 1 KB of bool) left whole-tensor sums at
# 50-65 % of the copy's rate on the H100 (docs/benchmarks.md, "Reduction sweep"). Welford's
# tile is the least (three accumulators an element: larger tiles were slower). The tile
# takes 8 warps, more where a thread would hold over SPLIT_THREAD_ELEMENTS elements.
SPLIT_STEP_BYTES = 8192
SPLIT_TILE_MIN, SPLIT_TILE_MAX = 1024, 8192
SPLIT_THREAD_ELEMENTS = 16
SPLIT_FILLS = 2  # a split reduction launches this many times the device's fill of programs
# (more were no faster and slowed other splits: ``python -m benchmarks.split_fills``)
# A split reduction takes enough splits (up to 1024) that its lanes fold at most
# ``LANE_CHAIN_MAX`` elements each, past which float32 sums and moments are kept in float64
# (``kernel._long_lanes``): float64 Welford, with a division per element, runs far below the
# memory's rate (ResNet-50's BatchNorm statistics; docs/benchmarks.md, "Reductions by layout").
WIDE = 2 ** 31 - 2 ** 17  # element counts from which index math is int64
# A scan folds a row of up to SCAN_ROW_MAX elements as one chunk (no running value), a longer one in
# chunks of SCAN_RBLOCK_MAX. One chunk carries no running value and no reduction of each chunk's
# total, and runs a 4096-element row at the copy's rate; chunks of 1024 were slower
# (`python -m benchmarks.scan_variants`; docs/benchmarks.md, "Scans").
SCAN_ROW_MAX = 4096
SCAN_RBLOCK_MAX = 1024


@dataclass(frozen=True)
class DeviceInfo:
    """What launch parameters are computed from. ``sm_count`` decides shapes (the same
    on a GPU and under the interpreter): ``fill``, two programs per SM, is how many programs
    fill the device. The rest sizes blocks: ``min_programs``, the programs a block size is
    shrunk to reach (``fill`` on a GPU; 1 under the interpreter, whose cost is per program),
    and the most elements a block of a reduction or a pointwise kernel holds."""
    name: str
    sm_count: int
    min_programs: int  # programs a block size is shrunk to reach
    block_elements: int = 2048  # reductions: XBLOCK * RBLOCK at most
    pointwise_block: int = 1024
    loop_rows: int = 1  # rows per program of a looped reduction
    tile: int = 64  # the side of a tile (tiled kernels) and the columns of a column reduction
    splits: int = 0  # programs per row of a split reduction (0: from fill)

    @property
    def fill(self) -> int:
        """Programs that fill the device: two per SM."""
        return 2 * self.sm_count


def gpu_info(name: str, sm_count: int) -> DeviceInfo:
    return DeviceInfo(name, sm_count, min_programs=2 * sm_count)


# CPU tests (TRITON_INTERPRET=1) choose shapes as for the H100 the code is written for,
# but with large blocks: the interpreter's cost is per program and per operation, not
# per element (a kernel is the same text whatever its block sizes).
INTERPRETER = DeviceInfo("interpreter (H100 shapes)", 132, min_programs=1, block_elements=1 << 15,
                         pointwise_block=1 << 14, loop_rows=64, tile=1024, splits=8)


@functools.lru_cache(maxsize=None)
def device_info(device) -> DeviceInfo:
    """The device's facts; the interpreter's for CPU tensors, and for CUDA ones where no GPU
    is present (a graph of fake CUDA tensors lowered in a test)."""
    import torch
    if getattr(device, "type", "cpu") != "cuda" or not torch.cuda.is_available():
        return INTERPRETER
    props = torch.cuda.get_device_properties(device)
    return gpu_info(props.name, props.multi_processor_count)


@dataclass
class Shape:
    name: str
    blocks: dict  # constexpr name -> value
    num_warps: int
    grid: tuple
    orientation: str = "row"  # reductions: "row" ([XBLOCK, RBLOCK]) or "column" ([RBLOCK, XBLOCK])
    tile_split: int = 0  # tiled: how many outer loops form the Y axis
    finish: dict = field(default_factory=dict)  # split: the second kernel's blocks, warps, grid
    wide: bool = False  # int64 index math


def next_pow2(n: int, cap: int | None = None) -> int:
    """The least power of two >= ``n``, at most ``cap``; for a symbolic ``n``, its size
    class guarded (``ir/symbols.py``)."""
    if symbols.is_symbolic(n):
        return symbols.next_power_of_two(n, cap)
    p = 1 << max(0, math.ceil(math.log2(max(1, n))))
    return p if cap is None else min(cap, p)


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for ``a >= 0, b > 0`` (a size's text stays free of negative dividends)."""
    return (a + b - 1) // b


def choose(plan, device: DeviceInfo) -> Shape:
    if plan.scan is not None:
        shape = _scan(plan, device)
    elif not plan.reduce:
        split = 0 if plan.scatters else _tile_split(plan)
        rows = 0 if plan.scatters or split else _symbolic_rows(plan)
        shape = _tiled(plan, split, device) if split else _rows(plan, rows, device) if rows else _pointwise(plan, device)
    else:
        shape = _reduction(plan, device)
    shape.wide = _needs_int64(plan, shape)
    return shape


def _needs_int64(plan, shape: Shape) -> bool:
    extents = [plan.outer_numel() * max(1, plan.reduce_numel()), shape.blocks.get("RSPLIT", 1) * plan.outer_numel()]
    return any(unbacked.decide(n, ">=", WIDE, unbacked=True) for n in extents + list(plan.extents.values()))


# ----------------------------------------------------------------------------- pointwise

def _warps(elements: int, per_warp: int = 256, most: int = 8) -> int:
    return max(1, min(most, next_pow2(elements) // per_warp))


def _pointwise(plan, device: DeviceInfo) -> Shape:
    return _blocks_1d("pointwise", [plan.outer_numel()], device)


def foreach(parts: list, device: DeviceInfo) -> Shape:
    """A foreach kernel over independent 1-D pointwise ``parts``: one ``XBLOCK`` for all,
    the grid the concatenation of each part's blocks."""
    return _blocks_1d("foreach", [p.outer_numel() for p in parts], device)


def _blocks_1d(name: str, sizes: list, device: DeviceInfo) -> Shape:
    """1-D blocks over loops of ``sizes`` elements: the pointwise block, no larger than the
    largest loop needs, halved (down to 128) while all loops together give fewer blocks
    than the device's fill."""
    hinted = [symbols.hint(n) for n in sizes]
    block = next_pow2(max(hinted), device.pointwise_block)
    while block > 128 and sum(cdiv(n, block) for n in hinted) < device.min_programs:
        block //= 2
    grid = (sum(cdiv(n, block) for n in sizes), 1, 1)
    return Shape(name, {"XBLOCK": block}, _warps(block, 256, 4), grid)


def _tile_split(plan) -> int:
    """For a transposing kernel: the number of outer loops that form the tile's Y axis
    (the innermost of them is contiguous for some access), else 0."""
    outer = plan.outer
    if len(outer) < 2:
        return 0
    votes = [0] * len(outer)
    for position in _accesses(plan):
        for j, v in enumerate(outer[:-1]):
            if S.coefficient(position, v) == 1 and S.coefficient(position, outer[-1]) not in (None, 1):
                votes[j] += 1
    j = max(range(len(outer)), key=lambda k: votes[k])
    if not votes[j]:
        return 0
    y = math.prod(v.size for v in outer[:j + 1])
    x = math.prod(v.size for v in outer[j + 1:])
    return j + 1 if min(x, outer[j].size) >= 4 and y * x >= 64 else 0


def _symbolic_rows(plan) -> int:
    """For a pointwise kernel with an inner loop whose extent is known only at run time:
    the outer loops that form the rows of 2-D blocks (all but the innermost), else 0. A
    flat 1-D block would divide each element's index by that extent (an integer division
    by a run-time value: tens of instructions per element), and its loads could not
    vectorize along the row."""
    outer = plan.outer
    if len(outer) < 2 or not any(symbols.is_symbolic(v.size) for v in outer[1:]):
        return 0
    return len(outer) - 1 if any(not _row_major(position, outer) for position in _accesses(plan)) else 0


def _row_major(position, outer: list) -> bool:
    """Is ``position`` a multiple of the flat index over ``outer`` (each loop's coefficient
    the next one's times its extent, as the ranges prove)? Then a flat block's index
    simplifies away: no division."""
    expected = S.coefficient(position, outer[-1])
    for inner, v in zip(reversed(outer), reversed(outer[:-1])):
        if expected is None:
            return False
        expected = expected * inner.size
        found = S.coefficient(position, v)
        if found is None or symbols.known(found, "==", expected) is not True:  # (no guard added)
            return False
    return expected is not None


def _rows(plan, split: int, device: DeviceInfo) -> Shape:
    """2-D blocks of row segments (a ``tiled`` kernel): ``XBLOCK`` along the row up to the
    pointwise block, ``YBLOCK`` rows for the rest of it. Only the program id is divided
    (by the blocks per row), once per program."""
    extents = _extents_2d(plan, split)
    ys, xs = (symbols.hint(n) for n in extents)
    xblock = next_pow2(xs, device.pointwise_block)
    yblock = max(1, min(next_pow2(ys), device.pointwise_block // xblock))
    return _filling_2d(extents, split, device, yblock, xblock, least=128, per_warp=256, rows_first=True)


def _accesses(plan) -> list:
    found = [m.store for m in plan.members if m.store is not None]
    found += [e.args[0] for e in walk([m.value for m in plan.members]) if e.op is Op.LOAD]
    return found


def _tiled(plan, split: int, device: DeviceInfo) -> Shape:
    """Tiles up to ``device.tile`` a side (a transpose)."""
    extents = _extents_2d(plan, split)
    ys, xs = (symbols.hint(n) for n in extents)
    return _filling_2d(extents, split, device, next_pow2(ys, device.tile), next_pow2(xs, device.tile),
                       least=256, per_warp=512, rows_first=False)


def _extents_2d(plan, split: int) -> tuple:
    """The extents of the loops before ``split`` (Y) and from it (X)."""
    return math.prod(v.size for v in plan.outer[:split]), math.prod(v.size for v in plan.outer[split:])


def _filling_2d(extents: tuple, split: int, device: DeviceInfo, yblock: int, xblock: int, least: int,
                per_warp: int, rows_first: bool) -> Shape:
    """``tiled`` blocks of ``yblock`` by ``xblock``, halved (the rows first, else the larger
    side) while above ``least`` elements and giving fewer programs than the device's fill."""
    (ynumel, xnumel), (ys, xs) = extents, (symbols.hint(n) for n in extents)
    while yblock * xblock > least and cdiv(ys, yblock) * cdiv(xs, xblock) < device.min_programs:
        if (yblock > 1) if rows_first else (yblock >= xblock):
            yblock //= 2
        else:
            xblock //= 2
    grid = (cdiv(ynumel, yblock) * cdiv(xnumel, xblock), 1, 1)
    return Shape("tiled", {"YBLOCK": yblock, "XBLOCK": xblock}, _warps(yblock * xblock, per_warp, 4), grid,
                 tile_split=split)


def _scan(plan, device: DeviceInfo) -> Shape:
    """A row reduction's blocks (``_row``) over the whole row up to ``SCAN_ROW_MAX``
    elements, else over chunks of ``SCAN_RBLOCK_MAX``; a column reduction's (``_column``)
    for a scan down columns."""
    xnumel, rnumel = plan.outer_numel(), plan.reduce_numel()
    if plan.outer and _columnar(plan):
        return replace(_column(xnumel, rnumel, device, widen=False), name="scan")
    row = _row(xnumel, rnumel if rnumel <= SCAN_ROW_MAX else SCAN_RBLOCK_MAX, device)
    elements = row.blocks["XBLOCK"] * row.blocks["RBLOCK"]  # a scan keeps 8 per thread (faster than 32)
    return replace(row, name="scan", num_warps=_warps(elements, 256, ROW_WARPS_MAX))


# ----------------------------------------------------------------------------- reductions

def _reduction(plan, device: DeviceInfo) -> Shape:
    xnumel, rnumel = plan.outer_numel(), plan.reduce_numel()
    orientation = "column" if plan.outer and _columnar(plan) else "row"
    late = unbacked.unbacked_in(xnumel) or unbacked.unbacked_in(rnumel)  # (no class to guard: no split)
    if not late and _splittable(plan) and few_programs(xnumel, rnumel, orientation == "column", device.fill):
        return _split(plan, orientation, device)
    if orientation == "column":
        return _column(xnumel, rnumel, device, _half_width(plan), _row_itemsize(plan) < 8)
    if not unbacked.unbacked_in(rnumel) and next_pow2(rnumel) <= persistent_max(plan):  # (else a loop: any length)
        return _row(xnumel, rnumel, device)
    xblock = next_pow2(symbols.hint(xnumel), device.loop_rows)
    rblock = LOOP_RBLOCK if symbols.hint(rnumel) >= 4 * LOOP_RBLOCK else LOOP_RBLOCK // 2
    rblock = max(rblock, next_pow2(symbols.hint(rnumel), device.block_elements // xblock))
    return Shape("row_loop", {"XBLOCK": xblock, "RBLOCK": rblock}, loop_warps(xblock * rblock),
                 (cdiv(xnumel, xblock), 1, 1))


def persistent_max(plan) -> int:
    """The longest row (a power of two) the plan keeps in registers: 32 KiB of the widest
    buffer it loads or stores along the row, at most ``PERSISTENT_MAX`` elements. A
    64-bit value computed along the row (float64, int64) counts as an 8-byte buffer."""
    return min(PERSISTENT_MAX, PERSISTENT_BYTES // _row_itemsize(plan))


def _row_itemsize(plan) -> int:
    rvars = set(plan.reduce)
    sizes = [1] + [plan.dtypes[name].itemsize for name, _ in _row_loads(plan)]
    for m in plan.members:
        if m.store is not None and free_vars(m.store) & rvars:
            sizes.append(plan.dtypes[m.target].itemsize)
        along_row = m.role == REDUCTION or free_vars(m.value) & rvars
        if along_row and m.value.dtype in (torch.float64, torch.int64):
            sizes.append(8)
    return max(sizes)


def row_warps(elements: int) -> int:
    """Warps of a persistent row block: 32 elements per thread (4 warps for 4096). A sweep
    of 1-16 warps on the H100 found it the best, or within noise of the best, for LayerNorm,
    LayerNorm+GELU, RMSNorm and softmax rows of 512-8192 elements, fp32 and bf16; fewer
    elements per thread were slower on the LayerNorm rows (docs/benchmarks.md,
    "Normalizations")."""
    return _warps(elements, 1024, ROW_WARPS_MAX)


def loop_warps(elements: int) -> int:
    """Warps of a looped row's chunk (``LOOP_WARP_ELEMENTS`` to a warp)."""
    return _warps(elements, LOOP_WARP_ELEMENTS, ROW_WARPS_MAX)


def _row(xnumel: int, rnumel: int, device: DeviceInfo) -> Shape:
    rblock = next_pow2(rnumel)  # the whole row in one block: its size class is guarded
    rows = symbols.hint(xnumel)
    xblock = next_pow2(rows, max(1, device.block_elements // rblock))
    while xblock > 1 and cdiv(rows, xblock) < device.min_programs:
        xblock //= 2
    return Shape("row", {"XBLOCK": xblock, "RBLOCK": rblock}, row_warps(xblock * rblock),
                 (cdiv(xnumel, xblock), 1, 1))


def _column(xnumel: int, rnumel: int, device: DeviceInfo, half_width: bool = False, widen: bool = True) -> Shape:
    """``[RBLOCK, XBLOCK]`` blocks of the device's block elements. One half-width input
    (``_half_width``) takes four times the elements, so a program has as many bytes in
    flight as a float32 one (``python -m benchmarks.column_sums``; docs/benchmarks.md,
    "Reductions by layout"). ``device.tile`` columns, more where few rows leave the block
    unfilled (up to ``COLUMN_BLOCK_MAX``: a sum over 4 rows takes 512 columns, not 64 of 4
    rows, a block 8 times too small to keep the memory busy), halved while the programs do
    not fill the device. Not with 64-bit values along the rows (``widen`` false): int64
    counts over 4 rows ran 3 times slower at 128-1024 columns than at 64 (H200; the
    cause is not known)."""
    columns, rows = symbols.hint(xnumel), symbols.hint(rnumel)
    elements = device.block_elements * (4 if half_width else 1)
    widest = max(device.tile, min(COLUMN_BLOCK_MAX if widen else 0, elements // next_pow2(rows)))
    xblock = next_pow2(columns, widest)
    while xblock > 16 and cdiv(columns, xblock) < device.min_programs:
        xblock //= 2
    rblock = next_pow2(rows, max(1, elements // xblock))
    return Shape("column", {"XBLOCK": xblock, "RBLOCK": rblock}, _warps(xblock * rblock),
                 (cdiv(xnumel, xblock), 1, 1), orientation="column")


def holds_whole_rows(plan, shape: Shape) -> bool:
    """Does a column kernel's block hold the whole reduced extent (no loop over it)?"""
    rnumel = plan.reduce_numel()
    return shape.name == "column" and not symbols.is_symbolic(rnumel) and rnumel <= shape.blocks["RBLOCK"]


def _columnar(plan) -> bool:
    """Do the reductions read along the innermost outer loop rather than the reduce one?"""
    loads = [(e.args[0], e.arg) for e in walk(plan.expressions()) if e.op is Op.LOAD]
    return reads_columns(loads, plan.outer[-1], plan.reduce[-1])


def _splittable(plan) -> bool:
    """One reduce level (1), epilogues before (0) and after (2) it."""
    for m in plan.members:
        if m.role == REDUCTION and m.level != 1 or m.level > 2 or m.role == INNER and m.level != 1:
            return False
    return True


def _split_tile(plan, column: bool, device: DeviceInfo) -> int:
    """Elements of a split reduction's tile: ``COLUMN_SPLIT_TILE`` for a column split,
    doubled where it loads half the bytes (``_half_width``), for as many bytes in flight
    as a float32 tile. A row split's tile loads ``SPLIT_STEP_BYTES`` (2048 float32, 4096
    bf16 elements); Welford's takes ``SPLIT_TILE_MIN``."""
    if column:
        return COLUMN_SPLIT_TILE * (2 if _half_width(plan) else 1)
    if _welford(plan):
        return SPLIT_TILE_MIN
    fitting = SPLIT_STEP_BYTES // max(1, _row_load_bytes(plan))
    return max(SPLIT_TILE_MIN, min(SPLIT_TILE_MAX, 1 << (fitting.bit_length() - 1)))


def _half_width(plan) -> bool:
    """Does a column reduction load at most 2 bytes per element of its reduced loop (one
    bf16 or fp16 input)? Its blocks then take more elements, for as many bytes in flight as
    a float32 input. Not with Welford's three accumulators per element (ResNet-50's
    BatchNorm statistics ran slower), nor for ``sum(x * y)`` in bf16 (4 bytes an element
    already: larger split tiles were slower)."""
    return not _welford(plan) and _row_load_bytes(plan) <= 2


def _welford(plan) -> bool:
    return any(m.reduce_op in (ReduceOp.WELFORD_MEAN, ReduceOp.WELFORD_M2) for m in plan.members)


def _row_load_bytes(plan) -> int:
    """Bytes the plan loads per element of its reduced loop (distinct loads along it)."""
    return sum(plan.dtypes[name].itemsize for name, _ in _row_loads(plan))


def _row_loads(plan) -> set:
    """The distinct loads along the reduced loops: ``(buffer, storage position)``."""
    rvars = set(plan.reduce)
    return {(e.arg, e.args[0]) for e in walk(plan.expressions()) if e.op is Op.LOAD and free_vars(e.args[0]) & rvars}


def _splits(xblocks: int, rnumel: int, rblock: int, device: DeviceInfo) -> int:
    """Programs per outer block of a split reduction, for these sizes. A symbolic reduced
    length keeps the count of the call compiled, and each program's chunk
    (``RCHUNK``) follows the length: computed in the kernel, the last programs' chunks
    may be empty."""
    wanted = max(device.splits or cdiv(SPLIT_FILLS * device.min_programs, xblocks), cdiv(rnumel, LANE_CHAIN_MAX * rblock))
    return max(2, min(wanted, cdiv(rnumel, rblock), 1024))


def _split(plan, orientation: str, device: DeviceInfo) -> Shape:
    xnumel, rnumel = plan.outer_numel(), plan.reduce_numel()
    column = orientation == "column"
    xblock = next_pow2(xnumel, 64 if column else 8)
    rblock = max(16, _split_tile(plan, column, device) // xblock)
    xblocks = cdiv(xnumel, xblock)
    splits = _splits(symbols.hint(xblocks), symbols.hint(rnumel), rblock, device)
    chunk = cdiv(cdiv(rnumel, splits), rblock) * rblock
    if not symbols.is_symbolic(chunk):
        splits = cdiv(rnumel, chunk)
    sblock = next_pow2(splits)
    fblock = max(1, next_pow2(xnumel, 4096 // sblock))
    finish = {"blocks": {"XBLOCK": fblock, "SBLOCK": sblock}, "num_warps": _warps(fblock * sblock),
              "grid": (cdiv(xnumel, fblock), 1, 1)}
    blocks = {"XBLOCK": xblock, "RBLOCK": rblock, "RSPLIT": splits, "RCHUNK": chunk}
    tile = xblock * rblock
    warps = _warps(tile, most=max(8, tile // (32 * SPLIT_THREAD_ELEMENTS)))
    return Shape("split", blocks, warps, (xblocks, splits, 1), orientation, finish=finish)
