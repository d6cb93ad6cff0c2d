"""When can nodes share one loop nest, and what is that loop nest?

Takes: stored compute nodes (one candidate kernel). Gives: the kernel's
iteration space and each node's place in it, or the reason there is none.

A kernel iterates over ``outer x reduce`` elements. Each node takes a role:
- ``inner``: a pointwise node over all ``outer * reduce`` elements,
- ``reduction``: folds ``reduce`` elements into each of ``outer`` results,
- ``outer``: a pointwise node over the ``outer`` elements (an epilogue),
- ``column``: a sum over the ``outer`` elements, one per reduce element (a
  LayerNorm backward's weight gradient beside its row reductions): C++ only, each
  thread sums its rows into a partial per column.

The kernel's dimensions are the common refinement of every node's sizes (in
row-major order): each node dimension is then a product of consecutive kernel
dimensions, so each node variable is an affine expression of kernel variables.

Levels order the work inside one outer element: odd levels are loops over the
reduce dimensions, even levels run between them. A reduction's result is usable
from the level after its loop; an inner node reads another inner node only at
the index that node writes in the same iteration. Read from a later level, an inner
node is recomputed there, which may round otherwise: no node compares such a value for
equality (amin's backward: ``input == result``).
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from braze import config
from braze.ir import simplify as S
from braze.ir import divisors, symbols, unbacked
from braze.ir.expr import Expr, Op, cache_table, cached, free_vars, index, loads, substitute, var, walk
from braze.ir.graph import ComputeNode, Graph, ReduceOp, out_vars, reduce_vars

INNER, OUTER, REDUCTION = "inner", "outer", "reduction"
COLUMN = "column"  # a sum over the kernel's rows, one per reduce element (C++: per-thread partials)
COLUMN_PARTIALS_MAX = 1 << 14  # doubles of column partials one C++ thread may keep (128 KB)


class Reason(enum.Enum):
    """Why two groups were, or were not, fused: the fusion log's vocabulary."""
    FUSED = "fused"
    SAME_KERNEL = "already in one kernel"
    EXTERN = "an ATen call is never fused"
    DISABLED = "fusion disabled by config"
    CYCLE = "fusing would create a cycle"
    MUTATION = "a write in place into a buffer they share must run between them"
    DOMAIN = "different iteration spaces"
    NO_COMMON_LOOPS = "no common loop nest (sizes split differently)"
    INDEX = "read at another index than it is written"
    ROW_READS_ELEMENT = "a per-row node reads a per-element node"
    OVERWRITE = "an input is read at another index than it is overwritten"
    NOTHING_SHARED = "fused, they would read no element in common"
    FEW_ROWS = "a second pass over few long rows would keep the reduction from being split"
    SCATTER = "a scatter writes at indices read from memory: it runs alone"
    SCAN = "a scan carries a running value along its dimension: it runs alone"
    SLOW_GATHER = "a gather would run in few programs, one chunk of the row after another"
    COLUMN_SUM = "a sum over the rows joins a row kernel only in C++, for float sums of few columns"
    READS_COLUMN_SUM = "reads a sum over the rows, complete only after the last row"
    RECOMPUTED_COMPARED = "compares for equality a value the kernel would recompute in a later loop"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: Reason = Reason.FUSED
    detail: str = ""


@dataclass
class Nest:
    """One loop nest: kernel dimensions and each node's variables expressed in them."""
    outer_numel: int
    reduce_numel: int
    dims: list  # kernel dimension sizes, outer first
    n_outer: int
    roles: dict  # node name -> role
    maps: dict  # node name -> {node VAR: kernel index expression}
    levels: dict  # node name -> level

    def kernel_vars(self) -> list:
        return [var(_kernel_var_name(j, self.n_outer), size) for j, size in enumerate(self.dims)]


def _kernel_var_name(j: int, n_outer: int) -> str:
    return f"x{j}" if j < n_outer else f"r{j - n_outer}"


def node_domain(node: ComputeNode) -> tuple:
    if node.is_reduction:
        return node.numel, node.reduction.numel
    return node.numel, 1


def group_domain(nodes) -> tuple | None:
    """(outer numel, reduce numel) shared by ``nodes``, or None. Of two transposed
    domains, the one whose reductions the group reads; the others are column sums."""
    reductions = {node_domain(n) for n in nodes if n.is_reduction}
    if len(reductions) == 2:
        reductions = _read_domains(nodes, reductions)
    if len(reductions) > 1:
        return None
    if reductions:
        outer, red = next(iter(reductions))
        if all(n.is_reduction or n.numel in (outer, outer * red) for n in nodes):
            return outer, red
        return None
    sizes = {n.numel for n in nodes}
    return (sizes.pop(), 1) if len(sizes) == 1 else None


def _read_domains(nodes, domains: set) -> set:
    """Of two transposed domains, those of the reductions the group reads; else both."""
    a, b = domains
    if a != b[::-1]:
        return domains
    reductions = {n.name: node_domain(n) for n in nodes if n.is_reduction}
    read = {reductions[name] for n in nodes for name in n.reads() if name in reductions}
    return read if len(read) == 1 else domains


def role_of(node: ComputeNode, outer: int, red: int) -> str:
    if node.is_reduction:
        return REDUCTION if node_domain(node) == (outer, red) else COLUMN
    if red == 1 or node.numel == outer * red:
        return INNER
    return OUTER


def _suffixes(sizes, scale: int = 1) -> set:
    out, acc = set(), scale
    for size in reversed(sizes):
        out.add(acc)
        acc *= size
    out.add(acc)
    return out


def _boundaries(node: ComputeNode, role: str, red: int, sizes) -> set:
    if role == REDUCTION:
        return _suffixes(node.reduction.sizes) | _suffixes(node.sizes, red)
    if role == COLUMN:
        return _suffixes(node.sizes) | _suffixes(node.reduction.sizes, red)
    if role == OUTER:
        return _suffixes(sizes, red)
    return _suffixes(sizes)


def refine(nodes, roles: dict, outer: int, red: int, orders: dict) -> tuple | None:
    """Kernel dimension sizes (outer first) and how many are outer, or None."""
    cuts = {1, red, outer * red}
    for n in nodes:
        cuts |= _boundaries(n, roles[n.name], red, iteration_sizes(n, orders))
    cuts = [c for c in cuts if unbacked.decide(c, ">", 0, unbacked=True)]  # (u0 = 0: loops that run none)
    if any(symbols.is_symbolic(c) for c in cuts):
        cuts = divisors.divisor_chain(cuts)  # (ordered: each divides the next)
        if cuts is None:
            return None
        at = next((k for k, c in enumerate(cuts) if symbols.same((c,), (red,))), 0)  # (0: red = 0, dropped)
        n_outer = len(cuts) - 1 - at  # the cuts from ``red`` on (each at least ``red``), but the last
    else:
        cuts = sorted(cuts)
        if any(b % a for a, b in zip(cuts, cuts[1:])):
            return None
        n_outer = sum(1 for a in cuts[:-1] if a >= red)
    dims = [b // a for a, b in zip(cuts, cuts[1:])][::-1]
    return dims, n_outer


def iteration_sizes(node: ComputeNode, orders: dict) -> list:
    order = orders.get(node.name)
    return [node.sizes[k] for k in order] if order else list(node.sizes)


def reduction_orders(nodes, roles: dict) -> dict:
    """Loop orders that let pointwise nodes iterate like the group's reductions: the
    dims they share with a reduction's kept dims first, then the reduced ones (e.g.
    BatchNorm's normalization of [N, C, H, W] iterates C, then N, H, W)."""
    reductions = [n for n in nodes if roles[n.name] == REDUCTION]
    orders = {}
    for n in nodes:
        if roles[n.name] != INNER or not reductions:
            continue
        ranks = _ranks_from_results(n, reductions) or _ranks_from_shared_reads(n, reductions)
        if ranks:
            first = sorted((k for k in ranks if ranks[k][0] == 0), key=lambda k: ranks[k])
            rest = sorted((k for k in range(len(n.sizes)) if k not in first),
                          key=lambda k: ranks.get(k, (1, k)))
            orders[n.name] = tuple(first + rest)
    return orders


def _dims_of(node: ComputeNode) -> dict:
    return {v: k for k, v in enumerate(out_vars(node.sizes)) if v.op is Op.VAR}


def _ranks_from_results(node: ComputeNode, reductions) -> dict:
    """Dims of ``node`` that index a reduction's result are kept (outer) dims."""
    dims, ranks = _dims_of(node), {}
    names = {r.name for r in reductions}
    for e in walk(node.body):
        if e.op is Op.LOAD and e.arg in names:
            for pos, idx in enumerate(e.args):
                if idx in dims:
                    ranks[dims[idx]] = (0, pos)
    return ranks


def _ranks_from_shared_reads(node: ComputeNode, reductions) -> dict:
    """Match dims through a buffer both read with plain variable indices."""
    dims = _dims_of(node)
    mine = {e.arg: e.args for e in walk(node.body) if e.op is Op.LOAD}
    for r in reductions:
        outer_pos = {v: k for k, v in enumerate(out_vars(r.sizes))}
        reduce_pos = {v: k for k, v in enumerate(reduce_vars(r.reduction.sizes))}
        for e in walk(r.body):
            if e.op is not Op.LOAD or e.arg not in mine:
                continue
            ranks = {}
            for a, b in zip(mine[e.arg], e.args):
                if a in dims and b in outer_pos:
                    ranks[dims[a]] = (0, outer_pos[b])
                elif a in dims and b in reduce_pos:
                    ranks[dims[a]] = (1, reduce_pos[b])
            if ranks:
                return ranks
    return {}


def _span_map(sizes, variables, kernel_vars, dims_suffix: list, base: int) -> dict:
    """Map each node variable (sizes, row-major over a span ending at suffix ``base``)
    to a sum of kernel variables."""
    mapping = {}
    lo = base
    for size, v in zip(reversed(sizes), reversed(variables)):
        hi = lo * size
        if size != 1:
            terms = [S.mul(kv, suffix // lo) for kv, suffix in zip(kernel_vars, dims_suffix)
                     if lo <= suffix < hi]
            mapping[v] = S.sum_of(terms)
        lo = hi
    return mapping


def build_nest(nodes) -> Nest | Verdict:
    """The loop nest computing ``nodes`` (topologically ordered), or why there is none."""
    domain = group_domain(nodes)
    if domain is None:
        return Verdict(False, Reason.DOMAIN)
    outer, red = domain
    roles = {n.name: role_of(n, outer, red) for n in nodes}
    orders: dict = {}
    refined = refine(nodes, roles, outer, red, orders)
    if refined is None and red > 1:
        orders = reduction_orders(nodes, roles)
        refined = refine(nodes, roles, outer, red, orders)
    if refined is None:
        return Verdict(False, Reason.NO_COMMON_LOOPS)
    dims, n_outer = refined
    nest = Nest(outer, red, dims, n_outer, roles, {}, {})
    for n in nodes:
        role = roles[n.name]
        red_sizes = tuple(n.reduction.sizes) if role in (REDUCTION, COLUMN) else ()
        nest.maps[n.name] = _node_map(role, tuple(n.sizes), red_sizes, orders.get(n.name), tuple(dims), n_outer, red)
    return nest


@cached
def _node_map(role: str, sizes: tuple, red_sizes: tuple, order, dims: tuple, n_outer: int, red: int) -> dict:
    """Each variable of a node (its sizes, role and loop order) as kernel variables."""
    kvars = [var(_kernel_var_name(j, n_outer), size) for j, size in enumerate(dims)]
    suffix = [math.prod(dims[j + 1:]) for j in range(len(dims))]
    if role in (REDUCTION, COLUMN):  # a column sum reduces the outer span, keeps the reduce one
        reduced, kept = (1, red) if role == REDUCTION else (red, 1)
        mapping = _span_map(red_sizes, reduce_vars(red_sizes), kvars, suffix, reduced)
        mapping.update(_span_map(sizes, out_vars(sizes), kvars, suffix, kept))
        return mapping
    variables = out_vars(sizes)
    if order:
        sizes, variables = [sizes[k] for k in order], [variables[k] for k in order]
    return _span_map(sizes, variables, kvars, suffix, red if role == OUTER else 1)


def write_index(node: ComputeNode, nest: Nest) -> tuple:
    mapping = nest.maps[node.name]
    return tuple(mapping.get(v, index(0)) for v in out_vars(node.sizes))


def in_kernel_reads(node: ComputeNode, members: dict) -> list:
    """(producer name, LOAD expression) for each read of another member's buffer."""
    found = []
    for e in walk(node.body):
        if e.op is Op.LOAD and e.arg in members and e.arg != node.name:
            found.append((e.arg, e))
    return found


def assign_levels(nodes, nest: Nest, graph: Graph) -> Verdict:
    members = {n.name: n for n in nodes}
    for n in nodes:
        role = nest.roles[n.name]
        level = 1 if role != OUTER else 0
        reads = in_kernel_reads(n, members)
        for producer, load_expr in reads:
            p_role = nest.roles[producer]
            p_level = nest.levels[producer]
            if role == OUTER and p_role == INNER:
                return Verdict(False, Reason.ROW_READS_ELEMENT, f"{n.name} reads {producer}")
            if p_role == COLUMN:
                return Verdict(False, Reason.READS_COLUMN_SUM, f"{n.name} reads {producer}")
            if not _same_element(load_expr, n, members[producer], nest):
                return Verdict(False, Reason.INDEX, f"{n.name} reads {producer}")
            level = max(level, p_level if p_role == INNER else p_level + 1)
        nest.levels[n.name] = _parity(level, role)
        for producer, load_expr in reads:
            if nest.roles[producer] == INNER and nest.levels[producer] != nest.levels[n.name] \
                    and _compares(n, load_expr):  # recomputed there, it may round otherwise (a math call)
                return Verdict(False, Reason.RECOMPUTED_COMPARED, f"{n.name} compares {producer}")
    _overwrite_after_reads(nodes, nest)
    return Verdict(True)


def _compares(node: ComputeNode, load_expr: Expr) -> bool:
    """Does ``node`` compare the value ``load_expr`` reads for equality (``amin``'s backward:
    ``input == result``)?"""
    return any(e.op in (Op.EQ, Op.NE) and any(x is load_expr for a in e.args for x in walk(a))
               for e in walk(node.body))


def _parity(level: int, role: str) -> int:
    """Odd levels are reduce loops (inner nodes, reductions), even ones run between."""
    return level + ((level % 2 == 0) if role != OUTER else (level % 2 == 1))


def _overwrite_after_reads(nodes, nest: Nest) -> None:
    """A node overwriting an input runs no earlier than the last level reading it, the
    reads of inner members recomputed at a later level (``kernel._resolve``) included: a
    LayerNorm's normalizing loop recomputes its input from the old value. Writers have no
    readers inside the kernel, so raising them moves nothing else."""
    writers = [n for n in nodes if n.mutates]
    if not writers:
        return
    reads = _recomputed_reads(nodes, nest)
    for n in writers:
        readers = [m for m in nodes if m is not n and n.mutates in reads[m.name]]
        level = max([nest.levels[n.name]] + [nest.levels[m.name] for m in readers])
        nest.levels[n.name] = _parity(level, nest.roles[n.name])


def _recomputed_reads(nodes, nest: Nest) -> dict:
    """Node name -> the buffers it loads at its level: its own reads and, transitively,
    those of the inner members it reads (recomputed where their level is earlier)."""
    members = {n.name for n in nodes}
    found: dict = {}
    for n in nodes:  # topological: producers first
        reads = set(n.reads())
        for name in n.reads():
            if name in members and name != n.name and nest.roles[name] == INNER:
                reads |= found[name]
        found[n.name] = reads
    return found


_IN_KERNEL = cache_table()


def in_kernel(e: Expr, mapping: dict) -> Expr:
    """``e`` in kernel variables (node maps are cached, so results are too)."""
    key = (id(mapping), e)
    found = _IN_KERNEL.get(key)
    if found is None:
        found = _IN_KERNEL[key] = substitute(e, mapping)
    return found


def _same_element(load_expr: Expr, reader: ComputeNode, producer: ComputeNode, nest: Nest) -> bool:
    read = [in_kernel(i, nest.maps[reader.name]) for i in load_expr.args]
    return all(a is b for a, b in zip(read, write_index(producer, nest)))


def _mutation_reads_ok(nodes, nest: Nest) -> Verdict:
    for writer in nodes:
        if not writer.mutates:
            continue
        target = write_index(writer, nest)
        for reader in nodes:
            for e in walk(reader.body):
                if e.op is Op.LOAD and e.arg == writer.mutates:
                    read = [in_kernel(i, nest.maps[reader.name]) for i in e.args]
                    if not all(a is b for a, b in zip(read, target)):
                        return Verdict(False, Reason.OVERWRITE,
                                       f"{reader.name} reads {writer.mutates}, {writer.name} overwrites it")
    return Verdict(True)


def check_merge(graph: Graph, a_nodes, b_nodes) -> Verdict:
    """Can the nodes of two groups run in one kernel, and is it worth it?"""
    nodes = sorted(a_nodes + b_nodes, key=lambda n: _rank(graph, n))
    scatter = next((n for n in nodes if n.is_scatter), None)
    if scatter is not None:
        return Verdict(False, Reason.SCATTER, f"{scatter.name} scatters into {scatter.mutates}")
    scan = next((n for n in nodes if n.is_scan), None)
    if scan is not None:
        return Verdict(False, Reason.SCAN, f"{scan.name} is a cumulative {scan.body.arg[0]}")
    if any(n.is_reduction for n in nodes) and not all(n.is_reduction for n in nodes) \
            and not config.fuse_reductions:
        return Verdict(False, Reason.DISABLED, "fuse_reductions is off")
    nest = build_nest(nodes)
    if isinstance(nest, Verdict):
        return nest
    verdict = assign_levels(nodes, nest, graph)
    if not verdict.ok:
        return verdict
    verdict = _mutation_reads_ok(nodes, nest)
    if verdict.ok:
        verdict = _column_sums_ok(nodes, nest, graph)
    if verdict.ok:
        verdict = graph.target.veto(nodes, nest, graph) or verdict
    if verdict.ok and not _connected(a_nodes, b_nodes) and not _shared_elements(a_nodes, b_nodes, nest):
        return Verdict(False, Reason.NOTHING_SHARED)
    return verdict


def _column_sums_ok(nodes, nest: Nest, graph: Graph) -> Verdict:
    """Column sums join a row kernel where the target can (``Target.column_sums``), as float sums whose per-thread
    partials fit ``COLUMN_PARTIALS_MAX``, where the rows are read along them (not a
    column kernel's strided walk)."""
    columns = [n for n in nodes if nest.roles[n.name] == COLUMN]
    if not columns:
        return Verdict(True)
    names = ", ".join(n.name for n in columns)
    if not graph.target.column_sums:
        return Verdict(False, Reason.COLUMN_SUM, f"{names}: not on {graph.target.name}")
    odd = next((n for n in columns if n.reduction.op is not ReduceOp.SUM or not n.dtype.is_floating_point
                or n.mutates), None)
    if odd is not None:
        return Verdict(False, Reason.COLUMN_SUM, f"{odd.name} is not a float sum")
    if len(columns) * nest.reduce_numel > COLUMN_PARTIALS_MAX or nest.outer_numel < 2:
        return Verdict(False, Reason.COLUMN_SUM, f"{names}: {len(columns)} × {nest.reduce_numel} columns")
    if columnar(nodes, nest, graph):
        return Verdict(False, Reason.COLUMN_SUM, f"{names}: the rows are read along columns")
    return Verdict(True)


def gathers(body: Expr) -> bool:
    """Does ``body`` load at an index computed from a load?"""
    return any(loads(index) for ld in loads(body) for index in ld.args)


def multi_pass(nest: Nest) -> bool:
    """Does the kernel loop over the reduce dimensions more than once?"""
    return max(nest.levels.values()) >= 3


def columnar(nodes, nest: Nest, graph: Graph) -> bool:
    """Do the reductions load along the innermost outer loop (columns), in storage order?"""
    if not nest.n_outer:
        return False
    kernel_vars = nest.kernel_vars()
    positions = []
    for n in nodes:
        if nest.roles[n.name] != REDUCTION:
            continue
        for e in walk(n.body):
            layout = graph.layout_of(e.arg) if e.op is Op.LOAD else None
            if layout is not None:
                positions.append((layout.position([in_kernel(i, nest.maps[n.name]) for i in e.args]), e.arg))
    return reads_columns(positions, kernel_vars[nest.n_outer - 1], kernel_vars[-1])


def reads_columns(loads, x_in, r_in, weight=None) -> bool:
    """Do ``loads`` (``(storage position in kernel variables, buffer)`` pairs) step along the
    innermost outer loop ``x_in`` rather than the innermost reduce loop ``r_in``? A vote of
    the loads: +1 for a load contiguous along ``x_in`` and strided along ``r_in``, -1 for one
    contiguous along ``r_in``. Fewer than 4 columns are never columnar.

    ``weight`` (buffer -> int; the C++ kernel's vote) weighs each load by its buffer's size
    and counts the loads that move along ``r_in`` alone: in C++ a thread streams every
    buffer from memory, so the big buffers decide. Without it (legality, Triton) a load the
    same for every ``x_in`` (a per-row statistic of a LayerNorm backward) does not vote: it
    is one short vector, read from cache by every column."""
    if x_in.size < 4:
        return False
    votes = 0
    for position, buffer in loads:
        names = free_vars(position)
        if r_in not in names or weight is None and x_in not in names:
            continue
        kx, kr = S.coefficient(position, x_in), S.coefficient(position, r_in)
        vote = 1 if kx == 1 and kr not in (None, 1) else -1 if kr == 1 else 0
        votes += vote * (weight(buffer) if weight is not None else 1)
    return votes > 0


def _connected(a_nodes, b_nodes) -> bool:
    """Does one group read what the other writes (or overwrites)?"""
    a_out = {n.target for n in a_nodes} | {n.name for n in a_nodes}
    b_out = {n.target for n in b_nodes} | {n.name for n in b_nodes}
    return any(set(n.reads()) & a_out for n in b_nodes) or any(set(n.reads()) & b_out for n in a_nodes)


def _shared_elements(a_nodes, b_nodes, nest: Nest) -> bool:
    """Siblings are worth fusing only if some element both read is loaded once for both."""
    def elements(nodes) -> set:
        found = set()
        for n in nodes:
            for e in walk(n.body):
                if e.op is Op.LOAD:
                    found.add((e.arg, tuple(in_kernel(i, nest.maps[n.name]) for i in e.args)))
        return found
    return bool(elements(a_nodes) & elements(b_nodes))


def _rank(graph: Graph, node) -> int:
    ranks = getattr(graph, "_ranks", None)
    if ranks is None or len(ranks) != len(graph.nodes):
        ranks = {n.name: k for k, n in enumerate(graph.nodes)}
        graph._ranks = ranks
    return ranks[node.name]
