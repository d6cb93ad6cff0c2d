"""C++/OpenMP source for one kernel plan.

Takes: a ``KernelPlan`` (``braze.fuse.kernel``), the thread count and the SIMD
lane count. Gives: ``CppKernel``, the ``extern "C"`` function text and the order
of its buffer arguments; the kernel's public methods are the interface of the
modules that emit its shapes (they write through ``kernel.emitter``, the
``braze.codegen.emitter.Emitter`` of the function's lines).

Seven shapes, chosen from the plan, each emitted by its entry in ``SHAPE_EMITTERS``:
- ``pointwise``: outer loops in parallel, the innermost one ``omp simd`` (cut into
  pieces where a condition on its index flips: ``pieces``) (``pointwise``).
- ``tiled``: a transposing pointwise kernel, in tiles (``tiles``).
- ``row``: a reduction per outer element (rows in parallel); each reduce loop is
  split into blocks of ``lanes`` elements with one accumulator per lane, so the
  block vectorizes; lanes are merged after the loop (``lanes``: float32 sums in
  float partials folded into double, moments in two passes over the kept row). A
  row walked by several loops keeps costly values for the later ones and
  prefetches the next row (``rows``). A block's vector-math calls whose argument
  the block also needs run first, in loops of their own (``calls``).
- ``column``: the reduced dimension is strided but the innermost outer dimension
  is contiguous (a column sum): blocks of columns in parallel, one accumulator
  per column, vectorized across the columns (``columns``).
- ``split``: few outer elements and long reductions (a full sum): each reduce
  loop is shared by all threads, per-thread partials merged in thread order
  (deterministic) (``split``).
- ``scatter``: a scatter node; threads own ranges of the target, each element written
  in index order (``scatter``).
- ``scan``: a scan node: rows in parallel, each in order (``sequential``).

The members' roles (``braze.fuse.legality``) place them in the loops: an ``inner``
member is computed per element of ``outer x reduce`` (inside a reduce loop, an odd
level), a ``reduction`` folds a reduce loop into one value per outer element, an
``outer`` member is computed once per outer element between reduce loops (an even
level: an epilogue), and a ``column`` member sums over the outer elements, one sum
per reduce element. "Column" thus names two things here: the ``column`` shape above
(a reduction down a strided dimension, ``columns``), and the ``column`` role, the
sums over a row kernel's rows (``plan.columns``, kept as per-thread partials:
``colsums``).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence

from braze.codegen.cpp.accumulate import Accumulator, accumulator_for, result_of
from braze.codegen.cpp.calls import block_calls, width_attribute
from braze.codegen.cpp.colsums import ColumnSums
from braze.codegen.cpp.columns import emit_column
from braze.codegen.cpp.draws import BlockDraws
from braze.codegen.cpp.exprs import CPrinter, convert, ctype, pointer_type
from braze.codegen.cpp.halves import BlockHalves, block_halves, float_of
from braze.codegen.cpp.lanes import TwoPass, emit_lanes, merge_lanes, moment_keeps, reduce_lanes
from braze.codegen.cpp.pointwise import emit_pointwise
from braze.codegen.cpp.rows import keeps, prefetches
from braze.codegen.cpp.scatter import emit_scatter
from braze.codegen.cpp.sequential import emit_scan
from braze.codegen.cpp.split import emit_split
from braze.codegen.cpp.streams import RowStream
from braze.codegen.cpp.tiles import emit_tiled, tile_var
from braze.codegen.emitter import CPP_INDENT, Emitter
from braze.fuse.kernel import KernelPlan, Member
from braze.fuse.legality import COLUMN, reads_columns
from braze import config
from braze.ir import symbols, unbacked
from braze.ir.expr import Expr, Op, free_vars, walk
from braze.ir.reductions import FAMILY, LANE_CHAIN_MAX

PARALLEL_MIN_WORK = 1 << 15  # elements below which threads cost more than they give
SPLIT_MIN_REDUCE = 1 << 13
LINE_BYTES = 64  # cache line
TEAM = "b_threads"  # the C name of a kernel's thread count (``team_size``)


class CppKernel:
    team = TEAM

    def __init__(self, plan: KernelPlan, threads: int, lanes: int, nested: bool = False,
                 counter: Iterator[int] | None = None):
        """``nested``: a part of a foreach kernel, inside its parallel region; ``counter``:
        the numbers of the foreach kernel's temporaries, which the part goes on with."""
        self.plan, self.threads = plan, max(1, threads)
        self.nested = nested
        self.lanes = lanes
        self.emitter = Emitter(CPP_INDENT, counter=counter)
        self.names = {v: v.name for v in plan.outer + plan.reduce}  # loop variable -> its C name
        self.values: dict = {}  # member name -> its C value where it is read
        self.accs: dict = {}  # member name -> Accumulator
        self.hoisted: dict = {}  # loop-invariant expressions computed at the top
        self.keep: dict = {}  # level -> [(expression, scratch array)] to save in that loop
        self.reuse_ids: dict = {}  # id(expression) -> scratch array holding it
        self.row_invariants: dict = {}  # id(expression) -> its name, computed once per row
        self.prefetch: dict = {}  # level -> next-row lines to prefetch in that loop (rows.Prefetch)
        self.moments: dict = {}  # member name -> its value, for moments computed in two passes
        self.row_stream: RowStream | None = None  # a row kernel's streamed stores
        self.column_sums: ColumnSums | None = None  # a row kernel's sums over its rows
        self.array_ids = itertools.count()  # numbers of accumulator and block arrays
        self.shape = self._choose_shape()

    # ------------------------------------------------------------------ interface

    @property
    def args(self) -> list:
        """Buffer names in parameter order."""
        return kernel_args(self.plan)

    def source(self) -> str:
        plan = self.plan
        head = [f"// {plan.name}: {self.shape}; ops: {', '.join(plan.origins)}", signature(plan), team_size()]
        return "\n".join(head + self.body() + ["}"])

    def body(self, hoisted: dict | None = None) -> list:
        """The lines of the function's body; ``hoisted``: the invariants a foreach kernel
        computed before its parts (else they are computed here, first)."""
        if hoisted is None:
            hoisted = hoist_invariants(self.emitter, self.plan.expressions(), self.plan.extents)
        self.hoisted = hoisted
        SHAPE_EMITTERS[self.shape](self)
        return self.emitter.lines

    # ------------------------------------------------------------------ choice

    def _choose_shape(self) -> str:
        plan = self.plan
        if plan.scatters:
            return "scatter"
        if plan.scan is not None:
            return "scan"
        if not plan.reduce:
            return "tiled" if tile_var(self) is not None else "pointwise"
        if plan.columns:
            return "row"
        work = plan.outer_numel() * plan.reduce_numel()
        long_rows = unbacked.decide(plan.reduce_numel(), ">=", SPLIT_MIN_REDUCE, unbacked=True)  # (u0: any length)
        if self.threads > 1 and plan.outer_numel() < 2 * self.threads and long_rows \
                and unbacked.decide(work, ">=", PARALLEL_MIN_WORK, unbacked=True):
            return "split"
        if plan.outer and self._columnar():
            return "column"
        return "row"

    def _columnar(self) -> bool:
        """Do the reductions mostly read along the innermost outer dimension rather than the
        reduce one? Each load votes with the size of its buffer (``legality.reads_columns``)."""
        loads = [(e.args[0], e.arg) for e in walk(self.plan.expressions()) if e.op is Op.LOAD]
        return reads_columns(loads, self.plan.outer[-1], self.plan.reduce[-1],
                             weight=self.plan.extents.__getitem__)

    # ------------------------------------------------------------------ text

    def printer(self, indent: str, renamed: dict | None = None, preset: dict | None = None) -> CPrinter:
        """A printer of the plan's expressions at ``indent``. ``renamed``: loop variables
        printed as other C names (a block's start, ``rb``); ``preset``: what it reads
        ready-made (by default the invariants hoisted above every loop)."""
        names = {**self.names, **renamed} if renamed else self.names
        return CPrinter(self.emitter, indent, names, self.values, self.plan.extents,
                        self.hoisted if preset is None else preset)

    def array_name(self, prefix: str) -> str:
        """A fresh name for an array of the kernel (accumulator fields, a block's call
        results), numbered apart from the printers' temporaries."""
        return f"{prefix}{next(self.array_ids)}"

    def threaded(self) -> bool:
        """Is there work enough for the parallel loop to use its threads?"""
        work = self.plan.outer_numel() * max(self.plan.reduce_numel(), 1)
        return unbacked.decide(work, ">=", PARALLEL_MIN_WORK, unbacked=True)

    def _threads_clause(self) -> str:
        """The ``if`` clause of a parallel pragma: none where the work is enough for the
        threads, ``if(parallel: 0)`` where it is not, and the test itself where the work is a
        symbolic size (decided at each call, not a size class). The modifier matters: in
        ``parallel for simd`` a plain ``if`` applies to ``simd`` as well (OpenMP 5), and
        ``if(0)`` there left every loop of a small kernel scalar, its vector math too."""
        work = self.plan.outer_numel() * max(self.plan.reduce_numel(), 1)
        enough = symbols.known(work, ">=", PARALLEL_MIN_WORK)
        if enough is None:
            return f" if(parallel: {symbols.text_of(work, 'c')} >= {PARALLEL_MIN_WORK})"
        return "" if enough else " if(parallel: 0)"

    def parallel(self, collapse: int, simd: bool = False) -> str:
        """The pragma of the kernel's parallel loop over ``collapse`` loops (in a foreach
        kernel, a loop its region's threads share)."""
        if self.nested:
            return self.shared_loop(collapse, simd)
        clause = f" collapse({collapse})" if collapse > 1 else ""
        kind = "parallel for simd" if simd else "parallel for"
        return f"#pragma omp {kind}{clause} num_threads({TEAM}) schedule(static){self._threads_clause()}"

    def region(self) -> str:
        """``omp parallel`` opening a region of the kernel's threads (one where work is small)."""
        return f"#pragma omp parallel num_threads({TEAM}){self._threads_clause()}"

    @staticmethod
    def shared_loop(collapse: int, simd: bool = False, nowait: bool = True) -> str:
        """The ``omp for`` of loops that the threads of an enclosing region share."""
        clause = f" collapse({collapse})" if collapse > 1 else ""
        return f"#pragma omp for{' simd' if simd else ''}{clause} schedule(static){' nowait' if nowait else ''}"

    def open_loops(self, loop_vars: Sequence[Expr], indent: str) -> str:
        """A ``for`` over each loop variable, outermost first; gives the indent inside."""
        for v in loop_vars:
            self.emitter.emit(indent, f"for (int64_t {v.name} = 0; {v.name} < {v.size}; {v.name}++) {{")
            indent = self.emitter.deeper(indent)
        return indent

    def close_loops(self, count: int, indent: str) -> None:
        """Close ``count`` loops opened by ``open_loops``, whose body is at ``indent``."""
        for k in range(count):
            self.emitter.emit(self.emitter.shallower(indent, k + 1), "}")

    # ------------------------------------------------------------------ members

    def members_at(self, level: int) -> list[Member]:
        """The members computed at ``level``, but the column sums (``colsums``)."""
        return [m for m in self.plan.members if m.level == level and m.role != COLUMN]

    def columns_at(self, level: int) -> list[Member]:
        """The column sums (``colsums``) that add up an element at ``level``."""
        return [m for m in self.plan.columns if m.level == level]

    def preload(self, members: list[Member], printer: CPrinter) -> None:
        """Load every element this body reads from a buffer it also overwrites before
        any store: all readers then see the old value (loads are shared)."""
        overwritten = set(self.plan.reads) & set(self.plan.writes)
        if overwritten:
            for e in walk([m.value for m in members]):
                if e.op is Op.LOAD and e.arg in overwritten:
                    printer(e)

    def compute(self, member: Member, printer: CPrinter, indent: str, store_guard: str = "",
                exprs: tuple | None = None, stage: str | None = None, float_stage: str | None = None) -> str:
        """Compute a member (``exprs``: its value and store rewritten) and store it (into
        ``stage``, an element of a scratch array, instead: ``streams``; its float32 value into
        ``float_stage``: ``halves``); gives its value."""
        value_expr, store = exprs or (member.value, member.store)
        value = printer(value_expr)
        self.values[member.name] = value
        if float_stage:
            self.emitter.emit(indent, f"{float_stage} = {printer(float_of(value_expr))};")
        elif store is not None:
            dtype = member.value_dtype
            stored = convert(value, dtype, member.node.dtype) if dtype != member.node.dtype else value
            where = stage or f"{member.target}[{printer(store)}]"
            self.emitter.emit(indent, f"{store_guard}{where} = {stored};")
        return value

    # ------------------------------------------------------------------ reductions

    def accumulators(self, members: list[Member]) -> list[Accumulator]:
        """The accumulators of ``members`` (reductions), bound to each in ``accs``: those
        folding the same value in the same way share one (a variance's mean and m2)."""
        unique: dict = {}
        short = self._short_chains()
        for m in members:
            key = (FAMILY[m.reduce_op], id(m.value))
            if key not in unique:
                unique[key] = accumulator_for(m, self.array_name("a"), short)
            self.accs[m.name] = unique[key]
        return list(unique.values())

    def _short_chains(self) -> bool:
        """Does each lane of a row kernel fold at most ``LANE_CHAIN_MAX`` elements (one reduce
        loop, proven short for every size of the class)?"""
        reduce = self.plan.reduce
        if self.shape != "row" or len(reduce) != 1:
            return False
        return symbols.known(reduce[0].size, "<=", LANE_CHAIN_MAX * reduce_lanes(self)) is True

    def _plan_scratch(self, indent: str) -> None:
        """Declare the per-row arrays of the values a later loop of the row needs again
        (``rows.keeps``: softmax's exp(x - max)), kept rather than recomputed, and the
        values whose moments take two passes (``lanes.moment_keeps``)."""
        for e, level in keeps(self.plan) + moment_keeps(self.plan):
            if id(e) in self.reuse_ids:
                continue
            name = f"keep{len(self.reuse_ids)}"
            self.reuse_ids[id(e)] = name
            self.keep.setdefault(level, []).append((e, name))
            self.emitter.emit(indent, f"{ctype(e.dtype)} {name}[{self.plan.reduce[0].size}];")

    def _prefetch(self, level: int, indent: str, lanes: int) -> None:
        """Prefetch the next row's lines of this block of ``lanes`` (``rows.prefetches``)."""
        if not self.prefetch.get(level):
            return
        printer = self.printer(indent, {self.plan.reduce[-1]: "rb"}, {**self.hoisted, **self.row_invariants})
        for p in self.prefetch[level]:
            position = printer(p.position)
            step = max(1, LINE_BYTES // self.plan.dtypes[p.buffer].itemsize)
            for offset in range(0, lanes, step):
                self.emitter.emit(indent, f"__builtin_prefetch(&{p.buffer}[{position} + {p.row_step + offset}], "
                                          f"{int(p.write)}, 3);")

    def _hoist_row_invariants(self, level: int, indent: str) -> None:
        """Compute before a row's reduce loop what depends on no reduce variable (per-row
        loads, math on earlier levels' results): once per row, not per element. Left in
        the lane loop, such values also let gcc's PRE put code in the loop's latch, and
        the loop was then not vectorized (a LayerNorm backward ran 6x slower)."""
        rvars = set(self.plan.reduce)
        printer = self.printer(indent)
        printer.memo.update(self.row_invariants)
        roots = [e for m in self.members_at(level) for e in (m.value, m.reduce_index) if e is not None]
        roots += [m.value for m in self.columns_at(level)]
        for e in walk(roots):
            if e.op not in (Op.CONST, Op.VAR, Op.VALUE) and not free_vars(e) & rvars and self._settled(e):
                printer(e)
        self.row_invariants = printer.memo

    def _settled(self, e) -> bool:
        """Are the members ``e`` reads (VALUE) all finished (earlier levels' results)?"""
        return all(n.arg in self.values for n in walk(e) if n.op is Op.VALUE)

    def lane_body(self, level: int, indent: str, lane: str, block: tuple[str, str] | None = None,
                  narrow: dict[int, Accumulator] | None = None, drawn: dict[int, str] | None = None,
                  halves: BlockHalves | None = None) -> None:
        """One element of a reduce loop at ``level``, folded into lane ``lane`` of each
        accumulator; ``block``: (count, 1/count) of a block, for Welford; ``narrow``:
        id(accumulator) -> the float partial to fold into instead (``lanes.emit_lanes``);
        ``drawn``: what the block's head computed for it (random values, ``draws``;
        library calls, ``calls``; float16 widened, ``halves``, whose stores it stages)."""
        printer = self.printer(indent)
        printer.memo.update(self._lane_preset(level))
        printer.memo.update(drawn or {})
        self.preload(self.members_at(level), printer)
        updated: set = set()  # accumulators folded already (members that share one)
        for m in self.members_at(level):
            if m.reduce_op is None:
                stream = self.row_stream if self.row_stream and narrow is not None else None
                wide = (halves and halves.stage_of(m)) or (stream and stream.float_stage_of(m))
                self.compute(m, printer, indent, stage=stream and stream.stage_of(m), float_stage=wide)
                continue
            acc = self.accs[m.name]
            value = printer(m.value)
            index = printer(m.reduce_index) if m.reduce_index is not None else None
            if id(acc) in updated:
                continue
            updated.add(id(acc))
            acc = (narrow or {}).get(id(acc), acc)
            self.emitter.emit_lines(indent, acc.update(lambda s, a=acc: f"{a.field(s)}[{lane}]", value, index, block))
        for m in self.columns_at(level):
            self.column_sums.add(m, printer, indent)
        for e, name in self.keep.get(level, []):
            self.emitter.emit(indent, f"{name}[{self.plan.reduce[0].name}] = {printer(e)};")

    def _lane_preset(self, level: int) -> dict:
        """What an element of a reduce loop reads as already computed: the row's
        invariants and the values earlier loops kept in scratch arrays."""
        preset = dict(self.row_invariants)
        if self.reuse_ids:
            saved_here = {id(e) for e, _ in self.keep.get(level, [])}
            r = self.plan.reduce[0].name
            preset.update({k: f"{name}[{r}]" for k, name in self.reuse_ids.items() if k not in saved_here})
        return preset

    def _level_exprs(self, level: int) -> list:
        """What a reduce level's loop computes: its members' values and indices, the
        values it keeps for later loops."""
        members = self.members_at(level)
        return ([m.value for m in members] + [m.reduce_index for m in members if m.reduce_index is not None]
                + [e for e, _ in self.keep.get(level, [])] + [m.value for m in self.columns_at(level)])

    def declare(self, accs: list[Accumulator], size: int, indent: str, count: str | None = None) -> None:
        """Arrays of ``size`` elements for each field of ``accs``, the first ``count``
        (default all) set to the field's initial value."""
        em = self.emitter
        for acc in accs:
            for suffix, t, init in acc.fields():
                em.emit(indent, f"{t} {acc.field(suffix)}[{size}];")
        n = count or str(size)
        if accs:
            em.emit(indent, f"for (int64_t l = 0; l < {n}; l++) {{")
            for acc in accs:
                for suffix, t, init in acc.fields():
                    em.emit(em.deeper(indent), f"{acc.field(suffix)}[l] = {init};")
            em.emit(indent, "}")

    def lanes_for(self, size: int) -> int:
        """Lanes of a loop over ``size`` elements: a power of two, at most ``lanes``."""
        lanes, most = 1, symbols.at_most(self.lanes, size)  # (a symbolic size: all of them)
        while lanes * 2 <= most:
            lanes *= 2
        return lanes

    def reduce_loops(self, level: int, indent: str, lanes: int, distribute: bool = False) -> None:
        """The reduce loop nest of one level; the innermost loop blocked into lanes.
        ``distribute``: the loop is shared by the threads of the region (``split``)."""
        *outer_r, last = self.plan.reduce
        if distribute and outer_r:
            self.emitter.emit(indent, "#pragma omp for schedule(static)")
        block_count = not outer_r and any(self.accs[m.name].family == "welford"
                                          for m in self.members_at(level) if m.reduce_op)
        if block_count:
            self.emitter.emit(indent, "double blocks = 0;  // every lane has seen this many elements")
        inner = self.open_loops(outer_r, indent)
        head, body, foot = self._lane_block(level, lanes, last, block_count)
        shared = distribute and not outer_r
        partials = [] if distribute else self.wide_sums(level)
        emit_lanes(self, inner, last, lanes, body, partials, head,
                   "#pragma omp for schedule(static)" if shared else "", "if (tid == 0) " if shared else "", foot,
                   spread_tail=not outer_r)  # (inside other reduce loops a short tail runs often: as it was)
        self.close_loops(len(outer_r), inner)

    def _lane_block(self, level: int, lanes: int, last, block_count: bool) -> tuple:
        """The ``head``, ``body`` and ``foot`` of ``emit_lanes`` for a reduce loop over ``last``:
        the block's prefetches, float16 conversions, random draws or library calls, Welford's
        block count, and the stores staged for the foot."""
        draws = BlockDraws(self, self._level_exprs(level), last, lanes) if lanes >= 4 else None
        preset = self._lane_preset(level)
        pending = frozenset(m.name for m in self.members_at(level) + self.columns_at(level))
        calls = None if lanes < 4 or draws else block_calls(self, self._level_exprs(level), preset, lanes, last,
                                                            pending)
        stream = self.row_stream if self.row_stream and level == self.row_stream.level else None
        halves = block_halves(self, self._level_exprs(level), self.members_at(level), lanes, last, preset,
                              frozenset(stream.stages) if stream else frozenset())
        row_preset = {**self.hoisted, **self.row_invariants}

        def head(ind: str) -> None:
            self._prefetch(level, ind, lanes)
            if halves:
                halves.emit_head(ind, row_preset)
            if draws:
                draws.emit_head(ind)
            if calls:
                calls.emit_head(ind, {**preset, **halves.memo()} if halves else preset)
            if block_count:
                self.emitter.emit(ind, "blocks += 1;")
                self.emitter.emit(ind, "const double inv_blocks = 1.0 / blocks;")

        def body(ind: str, narrow: dict | None) -> None:
            block = ("blocks", "inv_blocks") if block_count and narrow is not None else None
            block_memo = None if narrow is None else {**(halves.memo() if halves else {}),
                                                      **(draws.memo() if draws else calls.memo() if calls else {})}
            self.lane_body(level, ind, "l", block, narrow, block_memo, halves if narrow is not None else None)

        def foot(ind: str) -> None:
            if stream:
                stream.flush(ind)
            if halves:
                halves.flush(ind, row_preset)
        return head, body, foot if stream or halves else None

    def wide_sums(self, level: int) -> list[Accumulator]:
        """The accumulators of ``level`` that sum float32 in double."""
        found = {id(self.accs[m.name]): self.accs[m.name] for m in self.members_at(level) if m.reduce_op}
        return [a for a in found.values() if a.wide and a.family == "sum"]

    def set_results(self, level: int, at_of: Callable[[Accumulator], Callable[[str], str]]) -> None:
        """Bind the values of the reductions finished at ``level``: ``at_of(acc)`` maps a
        field suffix of ``acc`` to the C lvalue holding its final value."""
        for m in self.members_at(level):
            if m.name in self.moments:
                self.values[m.name] = self.moments[m.name]
            elif m.reduce_op is not None:
                acc = self.accs[m.name]
                self.values[m.name] = result_of(m, acc, at_of(acc))

    def store_results(self, level: int, indent: str, guard: str = "") -> None:
        """Stores of the reductions finished at ``level`` (each after ``guard``)."""
        printer = self.printer(indent)
        for m in self.members_at(level):
            if m.reduce_op is None or m.store is None:
                continue
            value = self.values[m.name]
            stored = convert(value, m.value_dtype, m.node.dtype) if m.value_dtype != m.node.dtype else value
            self.emitter.emit(indent, f"{guard}{m.target}[{printer(m.store)}] = {stored};")

    # ------------------------------------------------------------------ the row shape

    def emit_row(self) -> None:
        """The ``row`` shape: rows in parallel, each level in turn (``_row_reduce``)."""
        plan = self.plan
        indent = "  "
        sums = self.column_sums = ColumnSums(self) if plan.columns else None
        rows = self.row_stream = RowStream(self)
        region = sums or (rows if rows.members else None)  # a parallel region of their own
        if region:
            indent = region.open_region(indent)
        if plan.outer:
            collapse = len(plan.outer)
            self.emitter.emit(indent, region.loop_pragma(collapse) if region else self.parallel(collapse))
        inner = self.open_loops(plan.outer, indent)
        self._plan_scratch(inner)
        self.prefetch = prefetches(plan, skip=set(rows.targets))
        rows.declare(inner)
        for level in plan.levels:
            if level % 2 == 0:
                printer = self.printer(inner)
                self.preload(self.members_at(level), printer)
                for m in self.members_at(level):
                    self.compute(m, printer, inner)
            else:
                self._row_reduce(level, inner)
        self.close_loops(len(plan.outer), inner)
        if region:
            region.close_region(indent)

    def _row_reduce(self, level: int, indent: str) -> None:
        """One reduce level of a row: lanes declared, the loop, lanes merged, results."""
        lanes = reduce_lanes(self)
        moments = TwoPass(self, level, self.accumulators([m for m in self.members_at(level) if m.reduce_op]))
        self.declare(moments.accs, lanes, indent)
        self._hoist_row_invariants(level, indent)
        self.reduce_loops(level, indent, lanes)
        merge_lanes(self, moments.accs, lanes, indent)
        moments.emit_second_pass(indent, lanes)
        self.set_results(level, lambda acc: (lambda s: f"{acc.field(s)}[0]"))
        self.store_results(level, indent)


SHAPE_EMITTERS: dict[str, Callable[[CppKernel], None]] = {
    "pointwise": emit_pointwise,
    "tiled": emit_tiled,
    "row": CppKernel.emit_row,
    "column": emit_column,
    "split": emit_split,
    "scatter": emit_scatter,
    "scan": emit_scan,
}


def kernel_args(plan: KernelPlan) -> list:
    """Buffer names in parameter order: the buffers only read, then those written."""
    return [b for b in plan.reads if b not in plan.writes] + list(plan.writes)


def signature(plan: KernelPlan) -> str:
    """``extern "C" void name(...) {``: read-only buffers const, every pointer restrict
    except a buffer the kernel both reads and writes (updated in place)."""
    params = []
    for b in kernel_args(plan):
        t = pointer_type(plan.dtypes[b])
        if b not in plan.writes:
            params.append(f"const {t}* __restrict {b}")
        else:
            params.append(f"{t}* {'' if b in plan.reads else '__restrict '}{b}")
    params += [f"int64_t {name}" for name in symbols.parameters()]
    return f'extern "C" {width_attribute(plan)}void {plan.name}({", ".join(params)}) {{'


def team_size() -> str:
    """The first line of a kernel: its thread count, read at each call. Unless the knob
    fixes it, that is ``omp_get_max_threads()``, which in the calling thread is what
    ``torch.set_num_threads`` set (torch's own ops read it the same way). The count at compile
    time only guides plan choices (``CppKernel.threads``)."""
    count = config.num_threads or "omp_get_max_threads()"
    return f"  const int {TEAM} = {count};"


def hoist_invariants(emitter: Emitter, exprs: list, extents: dict) -> dict:
    """Compute once, before any loop, what depends on no loop variable: scalar loads
    and the math on them (Adam's bias corrections, powf of a step count). Returns
    the printed names, to seed every loop body's printer."""
    printer = CPrinter(emitter, "  ", {}, {}, extents)
    for e in walk(exprs):
        if e.op not in (Op.CONST, Op.VAR, Op.VALUE) and _invariant(e):
            printer(e)
    return printer.memo


def _invariant(e) -> bool:
    memo = e.memo()
    found = memo.get("invariant")
    if found is None:
        found = not free_vars(e) and not any(n.op is Op.VALUE for n in walk(e))
        memo["invariant"] = found
    return found


class CppForeach:
    """Several independent pointwise plans in one function and one parallel region."""

    shape = "foreach"

    def __init__(self, plan: KernelPlan, threads: int, lanes: int):
        self.plan, self.threads = plan, max(1, threads)
        self.counter = itertools.count()  # numbers of temporaries, shared by the parts
        self.parts = [CppKernel(part, threads, lanes, nested=True, counter=self.counter) for part in plan.parts]

    @property
    def args(self) -> list:
        return kernel_args(self.plan)

    def source(self) -> str:
        plan = self.plan
        em = Emitter(CPP_INDENT, [f"// {plan.name}: foreach of {len(self.parts)}; ops: {', '.join(plan.origins)}",
                                  signature(plan), team_size()], self.counter)
        exprs = [e for part in self.parts for e in part.plan.expressions()]
        hoisted = hoist_invariants(em, exprs, plan.extents)
        em.emit_lines("  ", [f"#pragma omp parallel num_threads({TEAM})", "{"])
        for part in self.parts:
            em.emit("  ", f"// {part.plan.name}: {part.shape}")
            em.emit_lines("  ", part.body(hoisted))
        em.emit("  ", "}")
        em.emit("", "}")
        return em.text()
