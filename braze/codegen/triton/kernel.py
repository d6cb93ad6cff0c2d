"""Triton source for one kernel plan.

Takes: a ``KernelPlan`` (``braze.fuse.kernel``) and its ``Shape``
(``braze.codegen.triton.shapes``). Gives: ``TritonKernel``: the text of the
``@triton.jit`` function(s) under a given name, the helpers they call, and the
order of their buffer parameters (read-only buffers ``in0, in1, ...``, then
written ones ``out0, ...``, then workspaces ``ws0, ...`` of a split kernel).

The text depends on nothing but the plan's loops, expressions and dtypes: two
plans that compute the same thing give the same text (deduplicated by the
backend). Sizes are literals (shapes are static); block sizes are constexpr
parameters, so a launch configuration never changes the source.

Inside a kernel, each loop variable (``x0``, ``r1``, ...) is derived from the
flat block index of its axis (``xindex``, ``yindex``, ``rindex``); values are
tensors over the block axes they depend on. ``inner`` and ``reduction`` members
(roles: ``braze.fuse.legality``) are computed at odd levels, over the elements of
a row (``[XBLOCK, RBLOCK]`` blocks); ``outer`` members at even levels (epilogues),
as ``[XBLOCK, 1]`` tensors. A column kernel (shape ``column``: the reduced loop
strided, the innermost outer loop contiguous, ``shapes``) lays its blocks out
``[RBLOCK, XBLOCK]`` (epilogues ``[1, XBLOCK]``) and reduces along axis 0; the
``column`` role (sums over a row kernel's rows) is the C++ backend's alone.

Each shape's function is written by its entry in ``SHAPE_EMITTERS``, through the
kernel's ``Emitter`` (``braze.codegen.emitter``), one per generated function;
``rows`` finishes a ``row`` kernel's reductions through the public methods.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from braze.codegen.emitter import PYTHON_INDENT, Emitter
from braze.codegen.triton.exprs import Printer, Term, convert, full
from braze.codegen.triton.guards import guarded_loads
from braze.codegen.triton.helpers import is_helper
from braze.codegen.triton.online import OnlineSum
from braze.codegen.triton.reduce import Accumulator, accumulator_for
from braze.codegen.triton.rows import finish_level
from braze.codegen.triton.shapes import LOOP_RBLOCK, Shape, holds_whole_rows
from braze.fuse.kernel import KernelPlan, Member
from braze.ir import symbols, unbacked
from braze.ir.reductions import LANE_CHAIN_MAX

# Looped reductions over more elements than this keep float32 sums in float64: each lane
# then folds more than LANE_CHAIN_MAX (32) elements in sequence (64 if autotuning halves
# RBLOCK). Shorter ones (a 32k-vocabulary row: 16 per lane) are as accurate in float32 as
# eager's CUDA reductions, and their loop is cheaper.
LOOP_WIDE_FROM = LANE_CHAIN_MAX * LOOP_RBLOCK

MASKS = {"x": "xmask", "y": "ymask", "r": "rmask"}


def parameters(plan) -> dict:
    """Buffer -> kernel parameter name: read-only buffers ``in0, ...``, then written ones
    ``out0, ...`` (the order of a kernel's parameters and of its launcher's arguments)."""
    reads = [b for b in plan.reads if b not in plan.writes]
    params = {b: f"in{k}" for k, b in enumerate(reads)}
    params.update({b: f"out{k}" for k, b in enumerate(plan.writes)})
    return params


def size_parameters(interpreted: bool) -> list:
    """The kernel's parameters for the symbolic sizes (``ir/symbols.py``): run-time integers;
    ``tl.constexpr`` under the interpreter, which gives a scalar argument to ``range`` as a
    one-element array that NumPy 2 will not convert."""
    return [f"{name}: tl.constexpr" if interpreted else name for name in symbols.parameters()]


def divisible_sizes() -> list:
    """The size parameters compiled as multiples of 16 (their value in the call compiled is
    one; ``:16`` in the signature, checked by the launcher). Unbacked sizes' hints are
    stand-ins, never marked."""
    late = symbols.unbacked()
    return [name for name in symbols.parameters()
            if name not in late and symbols.hint(symbols.symbol(name)) % 16 == 0]


def alignment_lines(interpreted: bool) -> tuple:
    """(constexprs, lines) that tell LLVM what the launcher checked: ``ALIGNED`` (True where
    the launcher verified every size marked ``:16``, False on Triton's own launch) and
    ``tl.assume(s % 16 == 0)`` under it. Triton's divisibility attribute vectorizes loads;
    only the assumption lets LLVM see that ``x0*s + r0`` and its three right neighbours
    share ``>> 2``, which a dropout's Philox counters need to be computed once per four
    elements (the PTX of a symbolic dropout row kernel: 609 ``mul.hi`` without, 153 with)."""
    sizes = [] if interpreted else divisible_sizes()
    if not sizes:
        return [], []
    return ["ALIGNED"], ["    if ALIGNED:"] + [f"        tl.assume({s} % 16 == 0)" for s in sizes]


def numel_line(name: str, numel, interpreted: bool) -> str:
    """``xnumel: tl.constexpr = 4096``; a symbolic size is computed from the kernel's size
    arguments at run time (``xnumel = 64*s0``; constexpr under the interpreter, whose
    ``range`` fails on an integer assigned without the annotation)."""
    if symbols.is_symbolic(numel) and not interpreted:
        return f"{name} = {symbols.text_of(numel, 'python')}"
    return f"{name}: tl.constexpr = {symbols.text_of(numel, 'python')}"


class TritonKernel:
    def __init__(self, plan: KernelPlan, shape: Shape, params: dict | None = None, interpreted: bool = False):
        """``params``: the parameter names of the plan's buffers when the plan is one part
        of a larger function (a foreach kernel), else ``parameters(plan)``. ``interpreted``:
        for Triton's interpreter (``size_parameters``)."""
        self.plan, self.shape, self.interpreted = plan, shape, interpreted
        self.index_type = "tl.int64" if shape.wide else "tl.int32"
        self.params = params or parameters(plan)
        self.buffers = list(parameters(plan))
        self.helpers: set = set()
        self.extents = plan.extents
        self.emitter = Emitter(PYTHON_INDENT)  # the lines of the function being written
        self.names: dict = {}  # loop variable -> its Term
        self.values: dict = {}  # member name -> its Term
        self.accs: dict = {}  # member name -> Accumulator
        self.workspaces: list = []  # split: (param, torch dtype, neutral) per partial field
        self.block_axes = ("x",)
        self.reduce_axis = 1  # the block axis a reduction folds (0 in a column kernel's [RBLOCK, XBLOCK])
        self.sources: list = []
        self.constexprs: list = []  # per function: its constexpr parameters
        self.unmasked: set = set()  # block axes that never run past their loop (no mask)
        self.guards = guarded_loads(plan.expressions(), plan.extents)  # loads masked by where-conditions
        self.run_time: dict = {}  # constexpr -> (its value in the call compiled, Python text of it at a call)

    # ------------------------------------------------------------------ interface

    def source(self, name: str) -> str:
        """The kernel's function(s), named ``name`` (``name_finish`` for a split's second)."""
        self.sources, self.constexprs, self.unmasked = [], [], set()
        SHAPE_EMITTERS[self.shape.name](self, name)
        return "\n\n".join(self.sources)

    def mask_for(self, axes) -> str:
        """The masks of the block ``axes`` that may run past their loop (``&``-joined)."""
        return " & ".join(MASKS[a] for a in sorted(axes) if a not in self.unmasked)

    # ------------------------------------------------------------------ pieces

    def _begin(self, name: str, constexprs, workspaces: bool = False) -> Emitter:
        """Start the function ``name``: its head, a fresh emitter (given) and fresh names."""
        params = [self.params[b] for b in self.buffers]
        if workspaces:
            params += [w[0] for w in self.workspaces]
        params += size_parameters(self.interpreted)
        aligned, assumptions = alignment_lines(self.interpreted)
        constexprs = list(constexprs) + aligned
        params += [f"{c}: tl.constexpr" for c in constexprs]
        self.emitter = Emitter(PYTHON_INDENT, ["@triton.jit", f"def {name}({', '.join(params)}):", *assumptions])
        self.constexprs.append(constexprs)
        self.names, self.values = {}, {}
        return self.emitter

    def _end(self) -> None:
        self.sources.append(self.emitter.text())

    def _printer(self, indent: str) -> Printer:
        return Printer(self, self.emitter, indent)

    def _pid(self, axis: int = 0) -> str:
        pid = f"tl.program_id({axis})"
        return f"{pid}.to(tl.int64)" if self.shape.wide else pid

    def _flat_index(self, axis: str, block: str, offset: str, layout: str, indent: str = "    ") -> None:
        """``{axis}index``, the block's flat positions along one axis, and its mask."""
        em = self.emitter
        em.emit(indent, f"{axis}index = {offset} + tl.arange(0, {block}){layout}")
        em.emit(indent, f"{axis}mask = {axis}index < {axis}numel")

    def _define_vars(self, loop_vars, axis: str, indent: str = "    ") -> None:
        """Each loop variable from the flat index of its axis (outermost first)."""
        em = self.emitter
        suffix = math.prod(v.size for v in loop_vars)
        for k, v in enumerate(loop_vars):
            suffix //= v.size
            text = f"{axis}index"
            if suffix > 1:
                text = f"{text} // {suffix}"
            if k > 0:
                text = f"{text} % {v.size}"
            em.emit(indent, f"{v.name} = {text}")
            self.names[v] = Term(v.name, frozenset(axis))

    def _members_at(self, level: int) -> list:
        return [m for m in self.plan.members if m.level == level]

    def _store(self, member, value: Term, printer: Printer, indent: str, axes) -> None:
        """Store ``value`` (the member's in-kernel value) at the member's position."""
        em = self.emitter
        if member.store is None:
            return
        pos = printer(member.store)
        text = printer.tensor(value, member.value_dtype)
        if member.value_dtype != member.node.dtype:
            text = convert(f"({text})" if " " in text else text, member.value_dtype, member.node.dtype)
        pointer = f"{self.params[member.target]} + {pos.text if pos.precedence >= 3 else f'({pos.text})'}"
        pointer_axes = pos.axes
        if not value.axes <= pos.axes:  # a position that ignores an axis the value varies along
            pointer = f"tl.broadcast_to({pointer}, {self._block_shape(axes)})"
            pointer_axes = frozenset(axes)
        mask = self.mask_for(pointer_axes)
        if member.node.accumulates:  # several elements may add into one: atomically
            em.emit(indent, f"tl.atomic_add({pointer}, {text}{', mask=' + mask if mask else ''}, sem='relaxed')")
            return
        em.emit(indent, f"tl.store({pointer}, {text}{', ' + mask if mask else ''})")

    def _block_shape(self, axes) -> str:
        order = self.block_axes
        return "[" + ", ".join(f"{a.upper()}BLOCK" if a in axes else "1" for a in order) + "]"

    def _compute(self, members, printer: Printer, indent: str, axes, store: bool = True) -> None:
        for m in members:
            if m.reduce_op is not None:
                continue
            value = printer(m.value)
            self.values[m.name] = value
            if store:
                self._store(m, value, printer, indent, axes)

    # ------------------------------------------------------------------ pointwise shapes

    def pointwise_body(self, pid: str, indent: str, known: dict, counter) -> list:
        """The statements of the plan's pointwise kernel for block ``pid`` (an int64 value
        if the shape is wide), at ``indent``: a foreach kernel runs several in one function.
        ``known``: the printed values (``Term`` by ``id`` of the expression) that the
        function computed before; ``counter`` numbers temporaries after them."""
        self.emitter = Emitter(PYTHON_INDENT, counter=counter)
        self.names, self.values = {}, {}
        self._pointwise_body(pid, indent, known)
        return self.emitter.lines

    def emit_pointwise(self, name: str) -> None:
        self._begin(name, ["XBLOCK"])
        self._pointwise_body(self._pid(), "    ", {})
        self._end()

    def _pointwise_body(self, pid: str, indent: str, known: dict) -> None:
        em = self.emitter
        plan = self.plan
        em.emit(indent, numel_line("xnumel", plan.outer_numel(), self.interpreted))
        self._flat_index("x", "XBLOCK", f"{pid} * XBLOCK", "", indent)
        self._define_vars(plan.outer, "x", indent)
        self.block_axes = ("x",)
        printer = self._printer(indent)
        printer.memo.update(known)
        self._compute(plan.members, printer, indent, {"x"})

    def emit_tiled(self, name: str) -> None:
        plan, split = self.plan, self.shape.tile_split
        ynumel = math.prod(v.size for v in plan.outer[:split])
        xnumel = math.prod(v.size for v in plan.outer[split:])
        em = self._begin(name, ["YBLOCK", "XBLOCK"])
        em.emit("    ", numel_line("ynumel", ynumel, self.interpreted))
        em.emit("    ", numel_line("xnumel", xnumel, self.interpreted))
        em.emit("    ", "xtiles = (xnumel + XBLOCK - 1) // XBLOCK")
        em.emit("    ", f"pid = {self._pid()}")
        self._flat_index("y", "YBLOCK", "pid // xtiles * YBLOCK", "[:, None]")
        self._flat_index("x", "XBLOCK", "pid % xtiles * XBLOCK", "[None, :]")
        self._define_vars(plan.outer[:split], "y")
        self._define_vars(plan.outer[split:], "x")
        self.block_axes = ("y", "x")
        self._compute(plan.members, self._printer("    "), "    ", {"y", "x"})
        self._end()

    # ------------------------------------------------------------------ reduction shapes

    def _reduction_head(self, name: str, extra: tuple = (), one_block: bool = False) -> Emitter:
        """Start a reduction kernel's function: sizes, the outer block, the reduce block's
        base; gives its emitter. ``extra``: constexprs after the blocks. ``one_block``: its
        rows fit one block; a symbolic row length is then the constexpr ``RBLOCK`` where the
        launcher saw that a call's is the block's (``ROWFULL``): Triton folds every mask
        along the row, as in a static kernel of that length (LayerNorm+GELU over rows of
        4096 on the H200: 98 µs masked, 90 µs static). Triton compiles each value of
        ``ROWFULL`` once; no class is split."""
        plan = self.plan
        column = self.shape.orientation == "column"
        rnumel = plan.reduce_numel()
        decided = one_block and symbols.is_symbolic(rnumel) and not unbacked.unbacked_in(rnumel)  # (at each call)
        em = self._begin(name, ["XBLOCK", "RBLOCK", *extra] + (["ROWFULL"] if decided else []))
        em.emit("    ", numel_line("xnumel", plan.outer_numel(), self.interpreted))
        if decided:
            block = self.shape.blocks["RBLOCK"]
            self.run_time["ROWFULL"] = (symbols.hint(rnumel) == block,
                                        f"({symbols.text_of(rnumel, 'python')} == {block})")
            em.emit_lines("    ", ["if ROWFULL:", "    rnumel: tl.constexpr = RBLOCK", "else:"])
        em.emit("        " if decided else "    ", numel_line("rnumel", rnumel, self.interpreted))
        layout_x, layout_r = ("[None, :]", "[:, None]") if column else ("[:, None]", "[None, :]")
        self.block_axes = ("r", "x") if column else ("x", "r")
        self.reduce_axis = 0 if column else 1
        self._flat_index("x", "XBLOCK", f"{self._pid()} * XBLOCK", layout_x)
        em.emit("    ", f"rbase = tl.arange(0, RBLOCK){layout_r}")
        self._define_vars(plan.outer, "x")
        return em

    def _r_index(self, offset: str, indent: str) -> None:
        em = self.emitter
        em.emit(indent, f"rindex = {offset}rbase")
        if "r" not in self.unmasked:
            em.emit(indent, "rmask = rindex < rnumel")
        self._define_vars(self.plan.reduce, "r", indent)

    def emit_row(self, name: str) -> None:
        """Whole rows in registers: each level once, loads shared between levels. A row
        whose length is a power of two is exactly ``RBLOCK`` long (``shapes._row``; tuning
        changes only ``XBLOCK``): it needs no ``rmask``. A symbolic length is ``RBLOCK``
        or not at each call: the launcher passes ``ROWFULL`` (``_reduction_head``)."""
        rnumel = self.plan.reduce_numel()
        exact = not symbols.is_symbolic(rnumel) and rnumel == self.shape.blocks["RBLOCK"]
        self.unmasked = {"r"} if exact else set()
        self._reduction_head(name, one_block=True)
        self._r_index("", "    ")
        printer = self._printer("    ")
        for level in self.plan.levels:
            members = self._members_at(level)
            if level % 2 == 0:
                self._compute(members, printer, "    ", {"x"})
                continue
            self._compute(members, printer, "    ", {"x", "r"})
            finish_level(self, self._accumulators(members), printer)
        self._end()

    def emit_row_loop(self, name: str) -> None:
        self._reduction_head(name)
        self._levels_looped("range(0, rnumel, RBLOCK)")
        self._end()

    def emit_scan(self, name: str) -> None:
        """A scan node: each row in chunks of ``RBLOCK``, in order; a chunk's cumulative
        sum (product) is offset by (multiplied with) the running value of the chunks
        before it; a row of one chunk has none, and no loop (a loop over a run-time
        length stays a loop in the compiled kernel). Float32 rows longer than ``LANE_CHAIN_MAX``
        run in float64: the running value is one chain along the whole row (eager's CPU
        kernels keep it in double)."""
        m = self.plan.scan
        chunks = self.shape.blocks["RBLOCK"] < self.plan.reduce_numel()
        prod = m.node.body.arg[0] == "prod"
        dtype = m.value.dtype
        if dtype is torch.float32 and self.plan.reduce_numel() > LANE_CHAIN_MAX:
            dtype = torch.float64
        neutral = "1" if prod else "0"
        em = self._reduction_head(name, one_block=not chunks)  # (a column scan: [RBLOCK, XBLOCK])
        axis, block = self.reduce_axis, self._block_shape({"x", "r"})
        ind = "        " if chunks else "    "  # (one chunk: no loop, which a run-time length would keep)
        if chunks:
            em.emit("    ", f"running = {full(neutral, dtype, self._block_shape({'x'}), self.index_type)}")
            em.emit("    ", "for roffset in range(0, rnumel, RBLOCK):")
        self._r_index("roffset + " if chunks else "", ind)
        printer = self._printer(ind)
        value = printer.tensor(printer(m.value), m.value.dtype)
        if dtype != m.value.dtype:
            value = f"{value}.to(tl.float64)"
        em.emit(ind, f"chunk = tl.where(rmask, tl.broadcast_to({value}, {block}), {neutral})")
        combine, op = ("multiply", "*") if prod else ("add", "+")
        self.helpers.add(combine)  # (tl.cumsum's own combine fails in the interpreter once Triton is imported)
        scanned = f"tl.associative_scan(chunk, {axis}, {combine})"
        em.emit(ind, f"scanned = {scanned} {op} running" if chunks else f"scanned = {scanned}")
        if chunks:
            total = f"tl.reduce(chunk, {axis}, {combine})[{':, None' if axis == 1 else 'None, :'}]"
            em.emit(ind, f"running = running {op} {total}")
        if dtype != m.value.dtype:
            em.emit(ind, "scanned = scanned.to(tl.float32)")
        self._store(m, Term("scanned", frozenset({"x", "r"})), printer, ind, {"x", "r"})
        self._end()

    def emit_column(self, name: str) -> None:
        """The loop of ``row_loop`` over ``[RBLOCK, XBLOCK]`` tiles, reduced along axis 0;
        a tile that holds the whole reduced extent (``holds_whole_rows``: a statistic over
        a few rows per column) is reduced as a row kernel's registers are, with no loop (a
        variance from two sums instead of a Welford step per element and a combine with a
        division per pair)."""
        if holds_whole_rows(self.plan, self.shape):
            self.emit_row(name)
        else:
            self.emit_row_loop(name)

    def _levels_looped(self, loop: str, outer_stores: bool = True, final: bool = True,
                       offset: str = "roffset + ") -> list:
        """Each odd level a loop over ``RBLOCK`` chunks; returns the partial fields. Not
        ``final`` (a split's first kernel): only the levels up to the first loop."""
        em = self.emitter
        partials = []
        for level in self.plan.levels:
            if not final and level > 1:
                break
            members = self._members_at(level)
            if level % 2 == 0:
                self._compute(members, self._printer("    "), "    ", {"x"}, store=outer_stores)
                continue
            accs = self._accumulators(members, wide=self._long_lanes())
            for acc, _ in accs:
                for field_name, f in zip(acc.field_names(), acc.fields()):
                    shape = self._block_shape({"x", "r"})
                    em.emit("    ", f"{field_name} = {full(f.neutral, f.dtype, shape)}")
            em.emit("    ", f"for roffset in {loop}:")
            self._r_index(offset, "        ")
            printer = self._printer("        ")
            self._compute(members, printer, "        ", {"x", "r"})
            for acc, owners in accs:
                self._accumulate(acc, self.elements(acc, owners[0], printer), "        ")
            for acc, owners in accs:
                if acc.family == "online":
                    fields = self._online_total(acc, owners[0], "    ")
                else:
                    fields = self.reduce(acc, acc.field_names(), "    ")
                partials.append((acc, owners, fields))
                if final:
                    self.finish(acc, owners, fields, self._printer("    "))
        return partials

    def _long_lanes(self) -> bool:
        """Does a lane of the reduction loop fold a long sequence of elements?"""
        blocks = self.shape.blocks
        if "RCHUNK" in blocks:
            return unbacked.decide(blocks["RCHUNK"], ">", LANE_CHAIN_MAX * blocks["RBLOCK"], unbacked=True)
        return unbacked.decide(self.plan.reduce_numel(), ">", LOOP_WIDE_FROM, unbacked=True)  # (u0: the accurate one)

    # ------------------------------------------------------------------ split

    def emit_split(self, name: str) -> None:
        chunk = self.shape.blocks["RCHUNK"]
        symbolic = symbols.is_symbolic(chunk)  # (then computed from the sizes: ``shapes._splits``)
        em = self._reduction_head(name, () if symbolic else ("RCHUNK",))
        if symbolic:
            em.emit("    ", numel_line("rchunk", chunk, self.interpreted))
        step = "rchunk" if symbolic else "RCHUNK"
        em.emit("    ", f"rstart = {self._pid(1)} * {step}")
        self.workspaces = []
        partials = self._levels_looped(f"range(0, {step}, RBLOCK)", outer_stores=False, final=False,
                                       offset="rstart + roffset + ")
        for acc, owners, fields in partials:
            for text, f in zip(fields, acc.fields()):
                param = f"ws{len(self.workspaces)}"
                self.workspaces.append((param, f.dtype, f.neutral))
                em.emit("    ", f"tl.store({param} + ({self._pid(1)} * xnumel + xindex), {text}, xmask)")
        lines = em.lines
        head = lines[1]  # the workspaces are known now: add them to the parameters
        params = [self.params[b] for b in self.buffers] + [w[0] for w in self.workspaces] \
            + size_parameters(self.interpreted)
        lines[1] = head[:head.index("(") + 1] + ", ".join(params) + head[head.index(", XBLOCK"):]
        self._end()
        self._split_finish(f"{name}_finish", partials)

    def _split_finish(self, name: str, partials: list) -> None:
        """Merge the partials of each outer element in order, then the epilogues."""
        plan = self.plan
        em = self._begin(name, ["XBLOCK", "SBLOCK", "RSPLIT"], workspaces=True)
        em.emit("    ", numel_line("xnumel", plan.outer_numel(), self.interpreted))
        self.block_axes, self.reduce_axis = ("x", "r"), 1
        self._flat_index("x", "XBLOCK", f"{self._pid()} * XBLOCK", "[:, None]")
        em.emit("    ", "sindex = tl.arange(0, SBLOCK)[None, :]")
        self._define_vars(plan.outer, "x")
        printer = self._printer("    ")
        workspaces = iter(self.workspaces)
        for level in plan.levels:
            if level % 2 == 0:
                self._compute(self._members_at(level), printer, "    ", {"x"})
                continue
            for acc, owners, _ in partials:
                loaded = []
                for f in acc.fields():
                    param = next(workspaces)[0]
                    name_ = em.fresh("partial")
                    em.emit("    ", f"{name_} = tl.load({param} + (sindex * xnumel + xindex), "
                                       f"xmask & (sindex < RSPLIT), other={f.neutral})")
                    loaded.append(name_)
                self.finish(acc, owners, self.reduce(acc, loaded, "    "), printer)
        self._end()

    # ------------------------------------------------------------------ accumulators

    def _accumulators(self, members, wide: bool = False) -> list:
        """(Accumulator, its members) for the reductions of one level; members folding the
        same value in the same way share one (mean and m2 of a variance)."""
        unique: dict = {}
        for m in members:
            if m.reduce_op is None:
                continue
            if isinstance(m, OnlineSum):
                acc = Accumulator("", "online", m.value.dtype, wide)
            else:
                acc = accumulator_for(m, "", wide)
            key = (acc.family, id(m.value))
            if key not in unique:
                acc.name = f"acc{len(self.accs)}"
                unique[key] = (acc, [])
            unique[key][1].append(m)
            self.accs[m.name] = unique[key][0]
        # an online sum is finished after the max it is relative to
        return sorted(unique.values(), key=lambda item: item[0].family == "online")

    def elements(self, acc: Accumulator, member: Member, printer: Printer) -> list[str]:
        """The fields of each lane's element, neutral where the lane is outside the row."""
        value = printer(member.value)
        index = printer(member.reduce_index) if member.reduce_index is not None else None
        value_text = printer.tensor(value, member.value.dtype)
        index_text = f"({index.text})" if index is not None else None
        texts = acc.element(value_text, index_text)
        constants = acc.constant_fields("rmask", self._block_shape({"x", "r"}))
        axes = [value.axes, index.axes if index is not None else frozenset()]
        out = []
        for k, (text, f) in enumerate(zip(texts, acc.fields())):
            out.append(constants[k] if text is None else self.as_lanes(text, axes[k], f.neutral))
        return out

    def as_lanes(self, text: str, axes: frozenset, neutral: str) -> str:
        """``text`` (varying along ``axes``) as a full ``[XBLOCK, RBLOCK]`` block, lanes
        past the row holding ``neutral``."""
        if "r" in self.unmasked:
            full_block = set(axes) == {"x", "r"}
        else:
            text = f"tl.where(rmask, {text}, {neutral})"
            full_block = "x" in axes  # the where adds the row axis
        return text if full_block else f"tl.broadcast_to({text}, {self._block_shape({'x', 'r'})})"

    def _accumulate(self, acc, elements: list, indent: str) -> None:
        em = self.emitter
        names = acc.field_names()
        if acc.family == "sum":
            em.emit(indent, f"{names[0]} = {names[0]} + {elements[0]}")
            return
        if acc.family == "welford":  # a loop's step: lanes fold one element (or none, past the row)
            self._use("welford_step")
            em.emit(indent, f"{', '.join(names)} = welford_step({', '.join(names)}, {elements[0]}, "
                            f"{elements[2]}, roffset // RBLOCK)")
            return
        self._use(acc.combine)
        em.emit(indent, f"{', '.join(names)} = {acc.combine}({', '.join(names + elements)})")

    def _online_total(self, acc, member, indent: str) -> list:
        """An online sum's lanes made relative to the row's max, then summed."""
        em = self.emitter
        lanes = em.fresh("tmp")
        largest = self.values[member.max_member].text
        self._use("online_sum_total")
        em.emit(indent, f"{lanes} = online_sum_total({', '.join(acc.field_names())}, {largest})")
        total = em.fresh("tmp")
        self._use("add")
        em.emit(indent, f"{total} = tl.reduce({lanes}, {self.reduce_axis}, add, keep_dims=True)")
        return [total]

    def reduce(self, acc: Accumulator, fields: list[str], indent: str) -> list[str]:
        """Fold ``fields`` along the reduce axis by the accumulator's combine."""
        return self.tree(fields, acc.combine, indent)

    def tree(self, fields: list[str], combine: str, indent: str) -> list[str]:
        """One ``tl.reduce`` of ``fields`` (a tuple if several) along the reduce axis by
        ``combine``; returns the names of the results."""
        em = self.emitter
        outs = [em.fresh("tmp") for _ in fields]
        self._use(combine)
        args = fields[0] if len(fields) == 1 else f"({', '.join(fields)})"
        em.emit(indent, f"{', '.join(outs)} = tl.reduce({args}, {self.reduce_axis}, {combine}, keep_dims=True)")
        return outs

    def finish(self, acc: Accumulator, owners: list[Member], fields: list[str], printer: Printer) -> None:
        """Bind each member's result and store it."""
        for m in owners:
            result = Term(acc.result(m.reduce_op, fields), frozenset("x"))
            if result.text not in fields:
                result = printer.temp(result.text, result.axes)
            self.values[m.name] = result
            self._store(m, result, printer, printer.indent, {"x"})

    def _use(self, helper: str) -> None:
        if is_helper(helper):
            self.helpers.add(helper)


SHAPE_EMITTERS: dict[str, Callable[[TritonKernel, str], None]] = {
    "pointwise": TritonKernel.emit_pointwise,
    "tiled": TritonKernel.emit_tiled,
    "row": TritonKernel.emit_row,
    "row_loop": TritonKernel.emit_row_loop,
    "scan": TritonKernel.emit_scan,
    "column": TritonKernel.emit_column,
    "split": TritonKernel.emit_split,
}
