"""C++/OpenMP source for one kernel plan.

Takes: a ``KernelPlan`` (``braze.fuse.kernel``), the thread count and the SIMD
lane count. Gives: ``CppKernel``, the ``extern "C"`` function text and the order
of its buffer arguments.

Seven shapes, chosen from the plan:
- ``pointwise``: outer loops in parallel, the innermost one ``omp simd`` (cut into
  pieces where a condition on its index flips: ``pieces``).
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
- ``scatter``: a scatter node, in one thread and in order (``sequential``).
- ``scan``: a scan node: rows in parallel, each in order (``sequential``).
Between reduce loops (even levels) run the ``outer`` members: epilogues.
"""
from __future__ import annotations

import itertools

from braze.codegen.cpp.accumulate import accumulator_for, result_of
from braze.codegen.cpp.calls import block_calls
from braze.codegen.cpp.colsums import ColumnSums
from braze.codegen.cpp.columns import emit_column
from braze.codegen.cpp.draws import BlockDraws
from braze.codegen.cpp.exprs import CPrinter, convert, ctype, pointer_type
from braze.codegen.cpp.lanes import TwoPass, emit_lanes, moment_keeps
from braze.codegen.cpp.pieces import over_piece, piece_name, piece_var, pieces
from braze.codegen.cpp.rows import keeps, prefetches
from braze.codegen.cpp.sequential import emit_scan, emit_scatter
from braze.codegen.cpp.split import emit_split
from braze.codegen.cpp.streams import RowStream, emit_streamed, streamed
from braze.codegen.cpp.tiles import emit_tiled, tile_var
from braze.fuse.kernel import KernelPlan
from braze.fuse.legality import COLUMN
from braze.ir import simplify as S
from braze.ir.expr import Op, free_vars, walk

PARALLEL_MIN_WORK = 1 << 15  # elements below which threads cost more than they give
SPLIT_MIN_REDUCE = 1 << 13
LINE_BYTES = 64  # cache line


class CppKernel:
    def __init__(self, plan: KernelPlan, threads: int, lanes: int, nested: bool = False,
                 counter: itertools.count | None = None):
        self.plan, self.threads = plan, max(1, threads)
        self.nested = nested  # inside a foreach kernel's parallel region
        self.lanes = lanes
        self.lines: list[str] = []
        self.counter = counter or itertools.count()
        self.names = {v: v.name for v in plan.outer + plan.reduce}
        self.values: dict = {}
        self.accs: dict = {}  # member name -> Accumulator
        self._updated: set = set()  # accumulators already folded in the current loop body
        self.hoisted: dict = {}  # loop-invariant expressions computed at the top
        self.keep: dict = {}  # level -> [(expression, scratch array)] to save in that loop
        self.reuse_ids: dict = {}  # id(expression) -> scratch array holding it
        self.row_invariants: dict = {}  # id(expression) -> its name, computed once per row
        self.prefetch: dict = {}  # level -> next-row lines to prefetch in that loop (rows.Prefetch)
        self.moments: dict = {}  # member name -> its value, for moments computed in two passes
        self.row_stream = None  # a row kernel's streamed stores (``streams.RowStream``)
        self.acc_ids = itertools.count()
        self.shape = self._choose_shape()

    # ------------------------------------------------------------------ interface

    @property
    def args(self) -> list:
        """Buffer names in parameter order."""
        return kernel_args(self.plan)

    def source(self) -> str:
        plan = self.plan
        head = [f"// {plan.name}: {self.shape}; ops: {', '.join(plan.origins)}", signature(plan)]
        return "\n".join(head + self.body() + ["}"])

    def body(self, hoisted: dict | None = None) -> list:
        if hoisted is None:
            hoisted = hoist_invariants(self.lines, self.plan.expressions(), self.plan.extents, self.counter)
        self.hoisted = hoisted
        getattr(self, f"_{self.shape}")()
        return self.lines

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
        if self.threads > 1 and plan.outer_numel() < 2 * self.threads and plan.reduce_numel() >= SPLIT_MIN_REDUCE \
                and work >= PARALLEL_MIN_WORK:
            return "split"
        if plan.outer and self._columnar():
            return "column"
        return "row"

    def _columnar(self) -> bool:
        """Do the reductions mostly read along the innermost outer dimension rather
        than the reduce one? Each load votes with the size of its buffer."""
        x_in, r_in = self.plan.outer[-1], self.plan.reduce[-1]
        if x_in.size < 4:
            return False
        votes = 0
        for e in walk(self.plan.expressions()):
            if e.op is Op.LOAD and r_in in free_vars(e.args[0]):
                kx, kr = S.coefficient(e.args[0], x_in), S.coefficient(e.args[0], r_in)
                weight = self.plan.extents[e.arg]
                if kx == 1 and kr not in (None, 1):
                    votes += weight
                elif kr == 1:
                    votes -= weight
        return votes > 0

    # ------------------------------------------------------------------ pieces

    def _emit(self, indent: str, text: str) -> None:
        self.lines.append(indent + text)

    def _printer(self, indent: str) -> CPrinter:
        return CPrinter(self.lines, indent, self.names, self.values, self.plan.extents, self.counter,
                        self.hoisted)

    def _threaded(self) -> bool:
        """Is there work enough for the parallel loop to use its threads?"""
        return self.plan.outer_numel() * max(self.plan.reduce_numel(), 1) >= PARALLEL_MIN_WORK

    def _parallel(self, collapse: int, simd: bool = False) -> str:
        if self.nested:
            return self._shared_loop(collapse, simd)
        clause = f" collapse({collapse})" if collapse > 1 else ""
        kind = "parallel for simd" if simd else "parallel for"
        cond = "" if self._threaded() else " if(0)"
        return f"#pragma omp {kind}{clause} num_threads({self.threads}) schedule(static){cond}"

    def _region(self) -> str:
        """``omp parallel`` opening a region of the kernel's threads (one where work is small)."""
        return f"#pragma omp parallel num_threads({self.threads}){'' if self._threaded() else ' if(0)'}"

    @staticmethod
    def _shared_loop(collapse: int, simd: bool = False, nowait: bool = True) -> str:
        """The ``omp for`` of loops that the threads of an enclosing region share."""
        clause = f" collapse({collapse})" if collapse > 1 else ""
        return f"#pragma omp for{' simd' if simd else ''}{clause} schedule(static){' nowait' if nowait else ''}"

    def _open_loops(self, loop_vars, indent: str) -> str:
        for v in loop_vars:
            self._emit(indent, f"for (int64_t {v.name} = 0; {v.name} < {v.size}; {v.name}++) {{")
            indent += "  "
        return indent

    def _close_loops(self, count: int, indent: str) -> None:
        for k in range(count):
            self._emit(indent[:len(indent) - 2 * (k + 1)], "}")

    def _members_at(self, level: int) -> list:
        """The members computed at ``level``, but the column sums (``colsums``)."""
        return [m for m in self.plan.members if m.level == level and m.role != COLUMN]

    def _columns_at(self, level: int) -> list:
        return [m for m in self.plan.columns if m.level == level]

    def _preload(self, members, printer: CPrinter) -> None:
        """Load every element this body reads from a buffer it also overwrites before
        any store: all readers then see the old value (loads are shared)."""
        overwritten = set(self.plan.reads) & set(self.plan.writes)
        if overwritten:
            for e in walk([m.value for m in members]):
                if e.op is Op.LOAD and e.arg in overwritten:
                    printer(e)

    def _compute(self, member, printer: CPrinter, indent: str, store_guard: str = "",
                 exprs: tuple | None = None, stage: str | None = None) -> str:
        """Compute a member (``exprs``: its value and store rewritten) and store it (into
        ``stage``, an element of a scratch array, instead: ``streams``)."""
        value_expr, store = exprs or (member.value, member.store)
        value = printer(value_expr)
        self.values[member.name] = value
        if store is not None:
            dtype = member.value_dtype
            stored = convert(value, dtype, member.node.dtype) if dtype != member.node.dtype else value
            where = stage or f"{member.target}[{printer(store)}]"
            self._emit(indent, f"{store_guard}{where} = {stored};")
        return value

    def _accumulators(self, members) -> list:
        unique: dict = {}
        for m in members:
            key = (accumulator_for(m, "").family, id(m.value))
            if key not in unique:
                unique[key] = accumulator_for(m, f"a{next(self.acc_ids)}")
            self.accs[m.name] = unique[key]
        return list(unique.values())

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
            self._emit(indent, f"{ctype(e.dtype)} {name}[{self.plan.reduce[0].size}];")

    def _prefetch(self, level: int, indent: str) -> None:
        """Prefetch the next row's lines of this block (``rows.prefetches``)."""
        if not self.prefetch.get(level):
            return
        names = {**self.names, self.plan.reduce[-1]: "rb"}
        printer = CPrinter(self.lines, indent, names, self.values, self.plan.extents, self.counter,
                           {**self.hoisted, **self.row_invariants})
        for p in self.prefetch[level]:
            position = printer(p.position)
            step = max(1, LINE_BYTES // self.plan.dtypes[p.buffer].itemsize)
            for offset in range(0, self.lanes, step):
                self._emit(indent, f"__builtin_prefetch(&{p.buffer}[{position} + {p.row_step + offset}], "
                                   f"{int(p.write)}, 3);")

    def _hoist_row_invariants(self, level: int, indent: str) -> None:
        """Compute before a row's reduce loop what depends on no reduce variable (per-row
        loads, math on earlier levels' results): once per row, not per element. Left in
        the lane loop, such values also let gcc's PRE put code in the loop's latch, and
        the loop was then not vectorized (a LayerNorm backward ran 6x slower)."""
        rvars = set(self.plan.reduce)
        printer = self._printer(indent)
        printer.memo.update(self.row_invariants)
        roots = [e for m in self._members_at(level) for e in (m.value, m.reduce_index) if e is not None]
        roots += [m.value for m in self._columns_at(level)]
        for e in walk(roots):
            if e.op not in (Op.CONST, Op.VAR, Op.VALUE) and not free_vars(e) & rvars and self._settled(e):
                printer(e)
        self.row_invariants = printer.memo

    def _settled(self, e) -> bool:
        """Are the members ``e`` reads (VALUE) all finished (earlier levels' results)?"""
        return all(n.arg in self.values for n in walk(e) if n.op is Op.VALUE)

    def _lane_body(self, level: int, indent: str, lane: str, block: tuple | None = None,
                   narrow: dict | None = None, drawn: dict | None = None) -> None:
        """One element of a reduce loop; ``narrow``: id(accumulator) -> the float partial
        to fold into instead (``lanes.emit_lanes``); ``drawn``: what the block's head
        computed for it (random values, ``draws``; library calls, ``calls``)."""
        printer = self._printer(indent)
        printer.memo.update(self._lane_preset(level))
        printer.memo.update(drawn or {})
        self._preload(self._members_at(level), printer)
        for m in self._members_at(level):
            if m.reduce_op is None:
                stage = self.row_stream.stage_of(m) if self.row_stream and narrow is not None else None
                self._compute(m, printer, indent, stage=stage)
                continue
            acc = self.accs[m.name]
            value = printer(m.value)
            index = printer(m.reduce_index) if m.reduce_index is not None else None
            if id(acc) in self._updated:
                continue
            self._updated.add(id(acc))
            acc = (narrow or {}).get(id(acc), acc)
            for stmt in acc.update(lambda s, a=acc: f"{a.field(s)}[{lane}]", value, index, block):
                self._emit(indent, stmt)
        for m in self._columns_at(level):
            self.column_sums.add(m, printer, indent)
        for e, name in self.keep.get(level, []):
            self._emit(indent, f"{name}[{self.plan.reduce[0].name}] = {printer(e)};")

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
        members = self._members_at(level)
        return ([m.value for m in members] + [m.reduce_index for m in members if m.reduce_index is not None]
                + [e for e, _ in self.keep.get(level, [])] + [m.value for m in self._columns_at(level)])

    def _declare(self, accs, size: int, indent: str, count: str | None = None) -> None:
        for acc in accs:
            for suffix, t, init in acc.fields():
                self._emit(indent, f"{t} {acc.field(suffix)}[{size}];")
        n = count or str(size)
        if accs:
            self._emit(indent, f"for (int64_t l = 0; l < {n}; l++) {{")
            for acc in accs:
                for suffix, t, init in acc.fields():
                    self._emit(indent + "  ", f"{acc.field(suffix)}[l] = {init};")
            self._emit(indent, "}")

    def _lanes_for(self, size: int) -> int:
        lanes = 1
        while lanes * 2 <= min(self.lanes, size):
            lanes *= 2
        return lanes

    def _reduce_loops(self, level: int, indent: str, lanes: int, distribute: bool = False) -> None:
        """The reduce loop nest of one level; the innermost loop blocked into lanes."""
        *outer_r, last = self.plan.reduce
        if distribute and outer_r:
            self._emit(indent, "#pragma omp for schedule(static)")
        block_count = not outer_r and any(self.accs[m.name].family == "welford"
                                          for m in self._members_at(level) if m.reduce_op)
        if block_count:
            self._emit(indent, "double blocks = 0;  // every lane has seen this many elements")
        inner = self._open_loops(outer_r, indent)

        draws = BlockDraws(self, self._level_exprs(level), last, lanes) if lanes >= 4 else None
        preset = self._lane_preset(level)
        pending = frozenset(m.name for m in self._members_at(level) + self._columns_at(level))
        calls = None if lanes < 4 or draws else block_calls(self, self._level_exprs(level), preset, lanes, last,
                                                            pending)

        def head(ind: str) -> None:
            self._prefetch(level, ind)
            if draws:
                draws.emit_head(ind)
            if calls:
                calls.emit_head(ind, preset)
            if block_count:
                self._emit(ind, "blocks += 1;")
                self._emit(ind, "const double inv_blocks = 1.0 / blocks;")

        def body(ind: str, narrow: dict | None) -> None:
            self._updated = set()
            block = ("blocks", "inv_blocks") if block_count and narrow is not None else None
            block_memo = None if narrow is None else (draws.memo() if draws else calls.memo() if calls else None)
            self._lane_body(level, ind, "l", block, narrow, block_memo)
        shared = distribute and not outer_r
        partials = [] if distribute else self._wide_sums(level)
        foot = self.row_stream.flush if self.row_stream and level == self.row_stream.level else None
        emit_lanes(self, inner, last, lanes, body, partials, head,
                   "#pragma omp for schedule(static)" if shared else "", "if (tid == 0) " if shared else "", foot)
        self._close_loops(len(outer_r), inner)

    def _wide_sums(self, level: int) -> list:
        """The accumulators of ``level`` that sum float32 in double."""
        found = {id(self.accs[m.name]): self.accs[m.name] for m in self._members_at(level) if m.reduce_op}
        return [a for a in found.values() if a.wide and a.family == "sum"]

    def _merge_lanes(self, accs, lanes: int, indent: str) -> None:
        if lanes > 1 and accs:
            self._emit(indent, f"for (int64_t l = 1; l < {lanes}; l++) {{")
            for acc in accs:
                for stmt in acc.combine(lambda s, a=acc: f"{a.field(s)}[0]", lambda s, a=acc: f"{a.field(s)}[l]"):
                    self._emit(indent + "  ", stmt)
            self._emit(indent, "}")

    def _set_results(self, level: int, at_of) -> None:
        for m in self._members_at(level):
            if m.name in self.moments:
                self.values[m.name] = self.moments[m.name]
            elif m.reduce_op is not None:
                acc = self.accs[m.name]
                self.values[m.name] = result_of(m, acc, at_of(acc))

    def _store_results(self, level: int, indent: str, guard: str = "") -> None:
        """Stores of the reductions finished at ``level``."""
        printer = self._printer(indent)
        for m in self._members_at(level):
            if m.reduce_op is None or m.store is None:
                continue
            value = self.values[m.name]
            stored = convert(value, m.value_dtype, m.node.dtype) if m.value_dtype != m.node.dtype else value
            self._emit(indent, f"{guard}{m.target}[{printer(m.store)}] = {stored};")

    # ------------------------------------------------------------------ shapes

    def _pointwise(self) -> None:
        plan = self.plan
        indent = "  "
        loops = plan.outer
        if not loops and self.nested:
            self._emit(indent, "#pragma omp single nowait")
        cuts = pieces(self)
        draws = self._pointwise_draws(cuts)
        stream = [] if cuts or draws else streamed(self)
        if stream:
            emit_streamed(self, stream)
            return
        if len(loops) == 1 and not draws:
            self._emit(indent, self._parallel(1, simd=True))
        elif len(loops) > 1:
            self._emit(indent, self._parallel(len(loops) - 1))
        inner = self._open_loops(loops[:-1], indent)
        if cuts or draws:
            if draws:
                self._pointwise_blocks(inner, draws)
            for lo, hi in cuts:
                self._pointwise_piece(inner, lo, hi)
            self._close_loops(len(loops) - 1, inner)
            return
        checked = self._outer_checks(inner, loops[-1]) if len(loops) > 1 else {}
        if len(loops) > 1:
            self._emit(inner, "#pragma omp simd")
        inner = self._open_loops(loops[-1:], inner)
        if not loops:
            self._emit(inner, "{")
        printer = self._printer(inner)
        printer.memo.update(checked)
        self._preload(plan.members, printer)
        for m in plan.members:
            self._compute(m, printer, inner)
        if not loops:
            self._emit(inner, "}")
        self._close_loops(len(loops), inner)

    def _outer_checks(self, indent: str, inner_var) -> dict:
        """Run-time checks (``Op.CHECK``) that do not vary along the innermost loop (a row's
        index: ``x[rows]``, an embedding), printed before it: a check is a conditional call,
        which GCC does not vectorize. Returns their printed names, for the loop's printer."""
        printer = self._printer(indent)
        for e in walk(self.plan.expressions()):
            if e.op is Op.CHECK and inner_var not in free_vars(e) and not any(n.op is Op.VALUE for n in walk(e)):
                printer(e)
        return printer.memo

    def _pointwise_draws(self, cuts) -> BlockDraws | None:
        """The random values the innermost loop draws a block at a time (``draws``), if it
        runs whole (no pieces) and not inside a foreach kernel's parallel region."""
        loops = self.plan.outer
        lanes = self._lanes_for(loops[-1].size) if loops else 0
        if cuts or self.nested or lanes < 4:
            return None
        return BlockDraws(self, self.plan.expressions(), loops[-1], lanes)

    def _pointwise_blocks(self, indent: str, draws: BlockDraws) -> None:
        """The innermost loop in blocks of lanes, each block's random words drawn first."""
        def body(ind: str, narrow: dict | None) -> None:
            printer = self._printer(ind)
            if narrow is not None:
                printer.memo.update(draws.memo())
            self._preload(self.plan.members, printer)
            for m in self.plan.members:
                self._compute(m, printer, ind)
        pragma = self._parallel(1) if len(self.plan.outer) == 1 else ""
        emit_lanes(self, indent, self.plan.outer[-1], draws.lanes, body, head=draws.emit_head, pragma=pragma)

    def _pointwise_piece(self, indent: str, lo: int, hi: int) -> None:
        """The innermost loop over ``[lo, hi)`` (``pieces``), its expressions rewritten."""
        z = self.plan.outer[-1]
        name, v = piece_name(z, lo), piece_var(z, lo, hi)
        if v.op is Op.VAR:  # (a piece of one element is the constant 0)
            self.names[v] = name
        self._emit(indent, "#pragma omp simd")
        self._emit(indent, f"for (int64_t {name} = 0; {name} < {hi - lo}; {name}++) {{")
        printer, memo = self._printer(indent + "  "), {}
        for m in self.plan.members:
            self._compute(m, printer, indent + "  ", exprs=(over_piece(m.value, z, lo, hi, memo),
                                                            over_piece(m.store, z, lo, hi, memo)))
        self._emit(indent, "}")

    def _tiled(self) -> None:
        emit_tiled(self)

    def _scatter(self) -> None:
        emit_scatter(self)

    def _scan(self) -> None:
        emit_scan(self)

    def _row(self) -> None:
        plan = self.plan
        indent = "  "
        sums = self.column_sums = ColumnSums(self) if plan.columns else None
        rows = self.row_stream = RowStream(self)
        region = sums or (rows if rows.members else None)  # a parallel region of their own
        if region:
            indent = region.open_region(indent)
        if plan.outer:
            self._emit(indent, region.loop_pragma(len(plan.outer)) if region else self._parallel(len(plan.outer)))
        inner = self._open_loops(plan.outer, indent)
        self._plan_scratch(inner)
        self.prefetch = prefetches(plan, skip=set(rows.targets))
        rows.declare(inner)
        for level in plan.levels:
            if level % 2 == 0:
                printer = self._printer(inner)
                self._preload(self._members_at(level), printer)
                for m in self._members_at(level):
                    self._compute(m, printer, inner)
            else:
                self._row_reduce(level, inner)
        self._close_loops(len(plan.outer), inner)
        if region:
            region.close_region(indent)

    def _row_reduce(self, level: int, indent: str) -> None:
        """One reduce level of a row: lanes declared, the loop, lanes merged, results."""
        lanes = self._lanes_for(self.plan.reduce[-1].size)
        moments = TwoPass(self, level, self._accumulators([m for m in self._members_at(level) if m.reduce_op]))
        self._declare(moments.accs, lanes, indent)
        self._hoist_row_invariants(level, indent)
        self._reduce_loops(level, indent, lanes)
        self._merge_lanes(moments.accs, lanes, indent)
        moments.emit_second_pass(indent, lanes)
        self._set_results(level, lambda acc: (lambda s: f"{acc.field(s)}[0]"))
        self._store_results(level, indent)

    def _column(self) -> None:
        emit_column(self)

    def _split(self) -> None:
        emit_split(self)


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
    return f'extern "C" void {plan.name}({", ".join(params)}) {{'


def hoist_invariants(lines: list, exprs: list, extents: dict, counter) -> dict:
    """Compute once, before any loop, what depends on no loop variable: scalar loads
    and the math on them (Adam's bias corrections, powf of a step count). Returns
    the printed names, to seed every loop body's printer."""
    printer = CPrinter(lines, "  ", {}, {}, extents, counter)
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
        self.counter = itertools.count()
        self.parts = [CppKernel(part, threads, lanes, nested=True, counter=self.counter) for part in plan.parts]

    @property
    def args(self) -> list:
        return kernel_args(self.plan)

    def source(self) -> str:
        plan = self.plan
        lines = [f"// {plan.name}: foreach of {len(self.parts)}; ops: {', '.join(plan.origins)}", signature(plan)]
        exprs = [e for part in self.parts for e in part.plan.expressions()]
        hoisted = hoist_invariants(lines, exprs, plan.extents, self.counter)
        lines += [f"  #pragma omp parallel num_threads({self.threads})", "  {"]
        for part in self.parts:
            lines.append(f"  // {part.plan.name}: {part.shape}")
            lines += ["  " + line for line in part.body(hoisted)]
        return "\n".join(lines + ["  }", "}"])
