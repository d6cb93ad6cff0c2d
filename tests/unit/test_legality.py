"""Tier 1: when nodes may share one loop nest (``braze/fuse/legality.py``), on graphs built by
hand, without code generation.

The group's iteration space (``group_domain``) and each node's role in it; the kernel
dimensions as the common refinement of every node's sizes (``refine``, ``build_nest``);
the levels of work inside one row (a reduction's result usable after its loop, an input's
overwrite after its last read); and every reason ``check_merge`` refuses a merge, with the
C++-only column sums. Also the pure rules the scheduler and the Triton shapes share:
``gathers`` and ``reads_columns``; and the Triton target's rules (``braze.codegen.triton.policy``):
``slow_gather_rows``, ``few_programs``, its ``fill``."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from braze import config
from braze.codegen.cpp.policy import CppTarget
from braze.codegen.triton import policy as P
from braze.codegen.triton.policy import TritonTarget
from braze.fuse import legality as L
from braze.fuse.legality import Reason
from braze.ir import dtypes, symbols
from braze.ir import simplify as S
from braze.ir.expr import Op, binary, cast, const, index, load, scan, scatter_store, unary, var
from braze.ir.graph import ComputeNode, Graph, InputNode, Layout, ReduceOp, Reduction, out_vars, reduce_vars

F32 = torch.float32


class Builder:
    """A graph of inputs and compute nodes; bodies are functions of the node's variables."""

    def __init__(self, device="cpu"):
        self.graph = Graph(device=torch.device(device), target=CppTarget())

    def input(self, name, sizes, dtype=F32):
        n = len([x for x in self.graph.nodes if isinstance(x, InputNode)])
        self.graph.add(InputNode(name, dtype, tuple(sizes), position=n, layout=Layout.contiguous(sizes)))

    def pointwise(self, name, sizes, body, dtype=F32, **kw):
        node = ComputeNode(name, dtype, tuple(sizes), body=body(*out_vars(sizes)), **kw)
        return self.graph.add(node)

    def reduction(self, name, sizes, reduced, body, op=ReduceOp.SUM, dtype=F32):
        node = ComputeNode(name, dtype, tuple(sizes), body=body(*out_vars(sizes), *reduce_vars(reduced)),
                           reduction=Reduction(op, tuple(reduced)), layout=Layout.contiguous(sizes))
        return self.graph.add(node)


def ld(name, *indices, dtype=F32):
    return load(name, list(indices), dtype)


def times(e, k):
    return binary(Op.MUL, e, const(float(k), F32))


def row_kernel(n_rows=4, n_cols=8):
    """arg0 [rows, cols]; buf0 = row sums; buf1 = arg0 - buf0 (per element); buf2 = buf0 * 2
    (per row)."""
    b = Builder()
    b.input("arg0", (n_rows, n_cols))
    rows = b.reduction("buf0", (n_rows,), (n_cols,), lambda x0, r0: ld("arg0", x0, r0))
    centred = b.pointwise("buf1", (n_rows, n_cols), lambda x0, x1: binary(Op.SUB, ld("arg0", x0, x1), ld("buf0", x0)))
    scaled = b.pointwise("buf2", (n_rows,), lambda x0: times(ld("buf0", x0), 2))
    return b.graph, rows, centred, scaled


# ----------------------------------------------------------------------------- domains and roles

def test_group_domain_of_pointwise_nodes_and_reductions():
    graph, rows, centred, scaled = row_kernel()
    assert L.group_domain([centred]) == (32, 1)
    assert L.group_domain([rows]) == L.group_domain([rows, centred, scaled]) == (4, 8)
    b = Builder()
    other = b.pointwise("other", (3,), lambda x0: const(1.0, F32))
    assert L.group_domain([centred, other]) is None
    assert L.group_domain([rows, other]) is None  # 3 elements: neither a row nor an element


def test_roles_in_a_row_kernel():
    graph, rows, centred, scaled = row_kernel()
    assert [L.role_of(n, 4, 8) for n in (rows, centred, scaled)] == [L.REDUCTION, L.INNER, L.OUTER]
    assert L.role_of(centred, 32, 1) == L.INNER
    b = Builder()
    columns = b.reduction("cols", (8,), (4,), lambda x0, r0: ld("arg0", r0, x0))
    assert L.role_of(columns, 4, 8) == L.COLUMN


def test_transposed_reductions_take_the_domain_of_the_one_the_group_reads():
    graph, rows, centred, _ = row_kernel()
    b = Builder()
    columns = b.reduction("cols", (8,), (4,), lambda x0, r0: ld("arg0", r0, x0))
    assert L.group_domain([rows, columns]) is None  # nothing reads either: ambiguous
    assert L.group_domain([rows, columns, centred]) == (4, 8)  # centred reads the row sums


# ----------------------------------------------------------------------------- loop nests

def test_kernel_dimensions_refine_every_nodes_sizes():
    b = Builder()
    b.input("arg0", (4, 8))
    rows = b.reduction("rows", (4,), (8,), lambda x0, r0: ld("arg0", x0, r0))
    halves = b.pointwise("halves", (2, 16), lambda x0, x1: times(ld("arg0", S.add(S.mul(x0, 2), S.floordiv(x1, 8)),
                                                                      S.mod(x1, 8)), 3))
    roles = {"rows": L.REDUCTION, "halves": L.INNER}
    assert L.refine([rows, halves], roles, 4, 8, {}) == ([2, 2, 8], 2)
    nest = L.build_nest([rows, halves])
    assert (nest.dims, nest.n_outer, nest.outer_numel, nest.reduce_numel) == ([2, 2, 8], 2, 4, 8)
    x0, x1, r0 = nest.kernel_vars()
    assert (str(x0), str(x1), str(r0)) == ("x0", "x1", "r0")
    (h0, h1) = out_vars((2, 16))
    assert nest.maps["halves"] == {h0: x0, h1: S.add(S.mul(x1, 8), r0)}
    assert L.write_index(rows, nest) == (S.add(S.mul(x0, 2), x1),)


def test_sizes_split_differently_have_no_common_loops():
    b = Builder()
    a = b.pointwise("a", (6, 4), lambda x0, x1: const(1.0, F32))
    c = b.pointwise("c", (4, 6), lambda x0, x1: const(2.0, F32))
    assert L.refine([a, c], {"a": L.INNER, "c": L.INNER}, 24, 1, {}) is None
    assert L.build_nest([a, c]) == L.Verdict(False, Reason.NO_COMMON_LOOPS)
    d = b.pointwise("d", (5,), lambda x0: const(1.0, F32))
    assert L.build_nest([a, d]) == L.Verdict(False, Reason.DOMAIN)


_S0, _S1, _S2 = (symbols.symbol(f"s{k}") for k in range(3))
SYMBOLIC_EXTENTS = [_S0, _S1 - 1, _S0 + 1, 2 * _S1 - 2, (_S2 + 1) // 2, _S0 * _S1 - _S0, 3]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(range(len(SYMBOLIC_EXTENTS))), min_size=1, max_size=4), st.integers(0, 3))
def test_one_node_always_has_its_own_loop_nest(picks, kept):
    """The scheduler asks legality only about merges: a group of one node is planned unasked,
    so its own sizes must always give a loop nest. With symbolic sizes that needs each suffix
    product of the sizes to divide the next (a slice's ``s - 1`` times another: ``x[1:, 1:]``)."""
    sizes = [SYMBOLIC_EXTENTS[k] for k in picks]
    hints = {"s0": 5, "s1": 7, "s2": 9}
    with symbols.deciding(symbols.Context(hints, {name: (2, symbols.INF) for name in hints})):
        b = Builder()
        b.input("arg0", sizes)
        node = b.pointwise("buf0", sizes, lambda *v: times(ld("arg0", *v), 2))
        assert isinstance(L.build_nest([node]), L.Nest), sizes
        kept = min(kept, len(sizes) - 1)
        rows = b.reduction("buf1", sizes[:kept], sizes[kept:], lambda *v: ld("arg0", *v))
        nest = L.build_nest([rows])
        assert isinstance(nest, L.Nest) and L.assign_levels([rows], nest, b.graph).ok, sizes


def test_levels_order_the_work_inside_a_row():
    """Reductions and elements run in odd levels (loops over the row), per-row work in
    even ones; a node reading a row's result runs in a later loop than the reduction."""
    graph, rows, centred, scaled = row_kernel()
    nodes = [rows, centred, scaled]
    nest = L.build_nest(nodes)
    assert L.assign_levels(nodes, nest, graph).ok
    assert nest.levels == {"buf0": 1, "buf1": 3, "buf2": 2}


def test_an_overwrite_of_an_input_waits_for_its_last_reader():
    graph, rows, centred, _ = row_kernel()
    b = Builder()
    b.graph = graph
    writer = b.pointwise("buf3", (4, 8), lambda x0, x1: times(ld("arg0", x0, x1), 2), mutates="arg0")
    nodes = [rows, centred, writer]
    nest = L.build_nest(nodes)
    assert L.assign_levels(nodes, nest, graph).ok
    assert nest.levels["buf3"] == nest.levels["buf1"] == 3  # not the first loop, where arg0 is still needed


# ----------------------------------------------------------------------------- check_merge

def test_a_row_kernel_merges():
    graph, rows, centred, scaled = row_kernel()
    assert L.check_merge(graph, [rows], [centred, scaled]) == L.Verdict(True)


def test_a_read_at_another_index_than_written_is_refused():
    b = Builder()
    b.input("arg0", (8, 8))
    p = b.pointwise("buf0", (8, 8), lambda x0, x1: times(ld("arg0", x0, x1), 2))
    q = b.pointwise("buf1", (8, 8), lambda x0, x1: times(ld("buf0", x1, x0), 3))  # transposed
    verdict = L.check_merge(b.graph, [p], [q])
    assert (verdict.ok, verdict.reason, verdict.detail) == (False, Reason.INDEX, "buf1 reads buf0")


def test_a_per_row_node_may_not_read_a_per_element_node():
    graph, rows, centred, _ = row_kernel()
    b = Builder()
    b.graph = graph
    first = b.pointwise("buf3", (4,), lambda x0: binary(Op.ADD, ld("buf0", x0), ld("buf1", x0, index(0))))
    verdict = L.check_merge(graph, [rows, centred], [first])
    assert verdict.reason is Reason.ROW_READS_ELEMENT and verdict.detail == "buf3 reads buf1"


def test_an_input_read_elsewhere_than_it_is_overwritten_is_refused():
    b = Builder()
    b.input("arg0", (32,))
    shifted = b.pointwise("buf0", (32,), lambda x0: times(ld("arg0", S.mod(S.add(x0, 1), 32)), 3))
    writer = b.pointwise("buf1", (32,), lambda x0: times(ld("arg0", x0), 2), mutates="arg0")
    verdict = L.check_merge(b.graph, [shifted], [writer])
    assert verdict.reason is Reason.OVERWRITE and verdict.detail == "buf0 reads arg0, buf1 overwrites it"
    same = b.pointwise("buf2", (32,), lambda x0: times(ld("arg0", x0), 5))
    assert L.check_merge(b.graph, [same], [writer]).ok


def test_siblings_fuse_only_when_they_share_a_read():
    b = Builder()
    b.input("arg0", (32,))
    b.input("arg1", (32,))
    a = b.pointwise("buf0", (32,), lambda x0: times(ld("arg0", x0), 2))
    c = b.pointwise("buf1", (32,), lambda x0: times(ld("arg1", x0), 3))
    d = b.pointwise("buf2", (32,), lambda x0: unary(Op.EXP, ld("arg0", x0)))
    assert L.check_merge(b.graph, [a], [c]).reason is Reason.NOTHING_SHARED
    assert L.check_merge(b.graph, [a], [d]).ok


def test_scatters_and_scans_run_alone():
    b = Builder()
    b.input("arg0", (32,))
    b.input("idx", (32,), torch.int64)
    p = b.pointwise("buf0", (32,), lambda x0: times(ld("arg0", x0), 2))
    where_to = lambda x0: cast(ld("idx", x0, dtype=torch.int64), dtypes.INDEX)  # noqa: E731
    s = b.pointwise("buf1", (32,), lambda x0: scatter_store(ld("buf0", x0), [where_to(x0)], True), mutates="arg0")
    c = b.pointwise("buf2", (32,), lambda x0: scan(ld("buf0", x0), "sum", 0))
    assert L.check_merge(b.graph, [p], [s]) == L.Verdict(False, Reason.SCATTER, "buf1 scatters into arg0")
    assert L.check_merge(b.graph, [p], [c]) == L.Verdict(False, Reason.SCAN, "buf2 is a cumulative sum")


def test_reductions_and_elements_stay_apart_when_the_knob_says_so():
    graph, rows, centred, _ = row_kernel()
    with config.patch(fuse_reductions=False):
        assert L.check_merge(graph, [rows], [centred]).reason is Reason.DISABLED
        b = Builder()
        b.graph = graph
        maxima = b.reduction("buf3", (4,), (8,), lambda x0, r0: ld("arg0", x0, r0), op=ReduceOp.MAX)
        assert L.check_merge(graph, [rows], [maxima]).ok  # reductions only


def _layer_norm_like(dtype=F32):
    """Row sums, the centred rows, and the column sums of the input (a weight gradient)."""
    graph, rows, centred, _ = row_kernel()
    b = Builder()
    b.graph = graph
    body = (lambda x0, r0: ld("arg0", r0, x0)) if dtype is F32 else \
        (lambda x0, r0: cast(ld("arg0", r0, x0), dtype))
    columns = b.reduction("buf3", (8,), (4,), body, dtype=dtype)
    return graph, rows, centred, columns


def test_column_sums_join_a_row_kernel_in_cpp_only():
    graph, rows, centred, columns = _layer_norm_like()
    assert L.check_merge(graph, [rows, centred], [columns]).ok
    graph.target = TritonTarget()
    verdict = L.check_merge(graph, [rows, centred], [columns])
    assert verdict.reason is Reason.COLUMN_SUM and verdict.detail == "buf3: not on triton"


def test_integer_column_sums_stay_apart():
    graph, rows, centred, columns = _layer_norm_like(torch.int64)
    verdict = L.check_merge(graph, [rows, centred], [columns])
    assert verdict.reason is Reason.COLUMN_SUM and verdict.detail == "buf3 is not a float sum"


def test_nothing_in_the_row_kernel_may_read_a_column_sum():
    """A column sum is complete only after the last row. A member reading it reads both
    transposed reductions, and the group has no one iteration space left."""
    graph, rows, centred, columns = _layer_norm_like()
    b = Builder()
    b.graph = graph
    reader = b.pointwise("buf4", (4, 8), lambda x0, x1: binary(Op.ADD, ld("buf1", x0, x1), ld("buf3", x1)))
    assert L.check_merge(graph, [rows, centred, columns], [reader]).reason is Reason.DOMAIN
    assert L.check_merge(graph, [rows, centred], [columns]).ok


# ----------------------------------------------------------------------------- pure rules

def test_a_body_gathers_when_it_loads_at_a_loaded_index():
    x0 = var("x0", 8)
    i = cast(ld("idx", x0, dtype=torch.int64), dtypes.INDEX)
    assert L.gathers(unary(Op.EXP, ld("arg0", i)))
    assert not L.gathers(binary(Op.ADD, ld("arg0", x0), ld("idx", x0, dtype=F32)))


@pytest.mark.parametrize("outer, reduce, fill, slow", [
    (100, 4096, 264, True), (1000, 4096, 264, False), (100, 2048, 264, False),
    (100, P.SPLIT_MIN_ROW, 264, False), (100, 4096, 0, False),
])
def test_slow_gather_rows(outer, reduce, fill, slow):
    """Fewer rows than programs fill the device, each longer than one chunk and too short to be split."""
    assert P.slow_gather_rows(outer, reduce, fill) is slow


def test_few_programs_for_rows_and_for_columns():
    fill = 264
    assert P.few_programs(8, P.SPLIT_MIN_ROW, False, fill)
    assert not P.few_programs(8, P.SPLIT_MIN_ROW - 1, False, fill)
    assert not P.few_programs(fill, P.SPLIT_MIN_ROW, False, fill)
    assert P.few_programs(16 * (fill - 1), P.SPLIT_MIN_COLUMN, True, fill)
    assert not P.few_programs(16 * fill * 4, P.SPLIT_MIN_COLUMN, True, fill)
    assert P.few_programs(64 * (fill // 2 - 1), P.SPLIT_MIN_COLUMN, True, fill)  # few wide blocks
    assert not P.few_programs(16, P.SPLIT_MIN_COLUMN - 1, True, fill)


def test_reads_columns_is_a_vote_of_the_loads():
    x, r = var("x1", 64), var("r0", 32)
    along_rows = (S.add(S.mul(x, 32), r), "a")  # row-major [x, r]: r steps by 1
    along_columns = (S.add(x, S.mul(r, 64)), "b")  # [r, x]: x steps by 1
    per_row = (S.mul(x, 1), "c")  # no r: not a vote
    assert L.reads_columns([along_columns], x, r)
    assert not L.reads_columns([along_rows], x, r)
    assert not L.reads_columns([along_columns, along_rows], x, r)  # a tie is not columnar
    assert L.reads_columns([along_columns, along_columns, along_rows, per_row], x, r)
    assert not L.reads_columns([(S.add(var("x1", 3), S.mul(r, 3)), "d")], var("x1", 3), r)  # under 4 columns


def test_the_cpp_vote_weighs_each_load_by_its_buffer():
    """C++ streams every buffer: a big buffer read along its rows outvotes two small ones read
    along columns, and a per-column vector that moves along the rows alone votes too."""
    x, r = var("x1", 64), var("r0", 32)
    sizes = {"big": 64 * 32, "small": 64, "vector": 100}
    loads = [(S.add(S.mul(x, 32), r), "big"), (S.add(x, S.mul(r, 64)), "small"), (S.add(x, S.mul(r, 64)), "small")]
    assert L.reads_columns(loads, x, r) and not L.reads_columns(loads, x, r, weight=sizes.__getitem__)
    vector = [(r, "vector"), (S.add(x, S.mul(r, 64)), "small")]
    assert L.reads_columns(vector, x, r) and not L.reads_columns(vector, x, r, weight=sizes.__getitem__)


def test_fill_is_two_programs_per_sm_on_the_triton_target_and_none_in_cpp():
    from braze.codegen import target_for
    from braze.codegen.triton.shapes import INTERPRETER
    with config.patch(cpu_backend="triton"):
        assert target_for(torch.device("cpu")).fill == 2 * INTERPRETER.sm_count
    with config.patch(cpu_backend="cpp"):
        assert target_for(torch.device("cpu")).fill == 0
