"""Every Triton kernel shape, chosen where it should be and computing what eager computes.

Runs the Triton backend on CPU tensors through Triton's interpreter
(``TRITON_INTERPRET=1``); sizes are small, but large enough that each shape is
chosen: 2-D tiles for transposes, persistent and looped rows, columns, and
reductions split across programs. Also: kernels are deduplicated by their text,
a warm cache compiles nothing, and int64 index math is used where needed.
"""

import re

import pytest
import torch
import torch.nn.functional as F

import braze
from braze.codegen.triton import shapes as triton_shapes
from helpers import TRITON_ONLY, Compiled, check

pytest.importorskip("triton")
pytestmark = TRITON_ONLY



def shapes_of(fn, *args):
    report = braze.explain(fn, *args)
    assert not report.failures, report.failures
    assert all(k.backend == "triton" for k in report.kernels)
    return [k.shape for k in report.kernels], report


def assert_shape(expected, fn, *args, **check_kwargs):
    """``fn`` compiles to kernels of the ``expected`` shapes and matches eager."""
    found, report = shapes_of(fn, *args)
    assert found == expected, (found, str(report))
    check(fn, *args, **check_kwargs)
    return report


def test_pointwise_1d():
    x, y = torch.randn(33, 17), torch.randn(17)
    assert_shape(["pointwise"], lambda x, y: (x.sin() * y + 1).relu(), x, y)


def test_a_symbolic_row_length_takes_blocks_of_rows_not_a_division_per_element():
    """A pointwise kernel whose row length is a size symbol: 2-D blocks of row segments, so
    no element's index is divided by a length known only at run time; right for every
    length of its class (odd ones too)."""
    def f(x):
        gate, up = x.chunk(2, -1)
        return F.silu(gate) * up
    g = torch.compile(f, backend="braze", dynamic=True)
    with Compiled() as compiled:
        for n in (24, 40, 38):
            x = torch.randn(5, n)
            torch.testing.assert_close(g(x), f(x))
    source = compiled.graphs[0].source
    assert "def triton_tiled_" in source and "xindex //" not in source and "xindex %" not in source


def test_tiled_transpose():
    x = torch.randn(48, 80)
    report = assert_shape(["tiled"], lambda x: x.t().contiguous() * 2, x)
    assert "YBLOCK" in report.graphs[0].source


def test_tiled_permute_3d():
    x = torch.randn(6, 40, 24)
    assert_shape(["tiled"], lambda x: x.permute(2, 0, 1).contiguous().exp(), x)


def test_tiled_channels_last_to_contiguous():
    x = torch.randn(2, 16, 6, 7).to(memory_format=torch.channels_last)
    assert_shape(["tiled"], lambda x: (x + 1).contiguous(memory_format=torch.contiguous_format), x)


def test_row_persistent_with_prologue_and_epilogue():
    x = torch.randn(64, 100)
    assert_shape(["row"], lambda x: (x.exp().sum(-1) * 2).sigmoid(), x)


def test_row_softmax_is_one_persistent_kernel():
    x = torch.randn(16, 1000)
    assert_shape(["row"], lambda x: torch.softmax(x, -1), x)


@pytest.fixture
def short_registers(monkeypatch):
    """Rows past 512 fp32 elements are looped, so the interpreter sees ``row_loop`` at small sizes."""
    monkeypatch.setattr(triton_shapes, "PERSISTENT_BYTES", 2048)


def test_row_persistent_up_to_32_kib():
    x, w, b = torch.randn(4, 4100), torch.randn(4100), torch.randn(4100)
    report = assert_shape(["row"], lambda x, w, b: F.layer_norm(x, (4100,), w, b), x, w, b, atol=1e-5, rtol=1e-4)
    assert "welford_combine" not in report.graphs[0].source  # two passes over the registers


@pytest.mark.parametrize("count, combines", [(2, ["add2"]), (3, ["add3"]), (4, ["add3", "add"])])
def test_row_sums_of_one_level_share_one_tree(count, combines):
    """Sums folded side by side in a row kernel go through one ``tl.reduce`` of a tuple (up
    to three), with the results each would have alone."""
    x, y = torch.randn(24, 300), torch.randn(24, 300)
    fn = lambda x, y: [(x * y ** k).sum(-1) for k in range(count)]  # noqa: E731
    report = assert_shape(["row"], fn, x, y)
    trees = re.findall(r"tl\.reduce\(.*, 1, (\w+), keep_dims=True\)", report.graphs[0].source)
    assert trees == combines
    ours = torch.compile(fn, backend="braze")(x, y)
    alone = [torch.compile(lambda x, y, k=k: (x * y ** k).sum(-1), backend="braze")(x, y) for k in range(count)]
    assert all(torch.equal(a, b) for a, b in zip(ours, alone))


def test_row_statistics_divide_by_a_power_of_two_as_a_product():
    """The mean and variance of 1024-element rows divide by 1024 as a product by 2^-10 (the
    same bits as Triton's ``div_rn``, without its cost); a 1000-element row divides."""
    for cols, divided in ((1024, False), (1000, True)):
        x = torch.randn(8, cols) * 3 + 1
        report = assert_shape(["row"], lambda x: torch.var_mean(x, -1, correction=0), x)
        assert ("div_rn" in report.graphs[0].source) == divided
        assert ("* 0.0009765625" in report.graphs[0].source) == (not divided)


def test_layer_norm_row_sums_the_row_then_its_squared_deviations():
    x, w, b = torch.randn(8, 1024), torch.randn(1024), torch.randn(1024)
    report = assert_shape(["row"], lambda x, w, b: F.layer_norm(x, (1024,), w, b), x, w, b, atol=1e-5, rtol=1e-4)
    trees = re.findall(r"tl\.reduce\(.*, 1, (\w+), keep_dims=True\)", report.graphs[0].source)
    assert trees == ["add", "add"]  # two levels: the mean's sum, then the squared deviations' sum


@pytest.mark.parametrize("shape, dims, kind", [
    ((4, 4096), (1,), "row_loop"), ((4, 4100), (1,), "row_loop"),
    ((16, 4, 64, 64), (0, 2, 3), "split"), ((16, 4, 60, 60), (0, 2, 3), "split")])
def test_looped_variance_divides_once_per_step(shape, dims, kind, short_registers):
    """A loop's lanes leave the row only at their end, so each lane still in it has folded
    the same count: Welford's step takes its weights as scalars (``welford_step``, one
    division per chunk, not per element), lanes past the row adding nothing. Rows that are
    and are not a whole number of chunks, against float64."""
    x = torch.randn(shape, dtype=torch.float64) * 2 + 50
    fn = lambda x: torch.var_mean(x, dims, correction=0)  # noqa: E731
    report = assert_shape([kind], fn, x.float())
    first = report.graphs[0].source.split("_finish")[0]
    assert "welford_step(acc" in first and "welford_combine(acc" not in first
    (var, mean), (exact_var, exact_mean) = torch.compile(fn, backend="braze")(x.float()), fn(x)
    assert ((var.double() - exact_var).abs() / exact_var).max() < 1e-5
    assert ((mean.double() - exact_mean).abs() / exact_mean).max() < 1e-6


def test_loss_gathers_in_the_row_kernel_not_in_its_one_program_mean():
    """cross_entropy over 4096 rows: the pick of each row's target logit is a gather; its
    mean runs in one program, which would wait for the gathers chunk after chunk, so the
    rows' kernel gathers and stores each row's loss, and the mean only sums them."""
    logits, target = torch.randn(4096, 100), torch.randint(0, 100, (4096,))
    target[::7] = -100
    fn = lambda logits, target: F.cross_entropy(logits, target)  # noqa: E731
    report = assert_shape(["row", "row"], fn, logits, target)
    rows, mean = report.kernels
    assert "aten.gather.default" in rows.ops and "aten.gather.default" not in mean.ops
    assert any(d.reason == "gathers for a reduction of few long rows" for d in report.graphs[0].decisions)
    few = F.cross_entropy(logits[:1024], target[:1024])  # 1024 rows: one chunk, gathered in the mean
    small = braze.explain(fn, logits[:1024], target[:1024])
    assert "aten.gather.default" in small.kernels[-1].ops
    assert torch.allclose(torch.compile(fn, backend="braze")(logits[:1024], target[:1024]), few)


def test_row_variance_with_a_large_mean_is_as_accurate_as_eager():
    """Rows near 1000, against float64: no cancellation in the register two-pass variance.
    The variance: within 4 float32 ulps of the exact value (float32 trees over 4100
    elements; one-pass E[x²] - E[x]² would be off by about 1e-2 here; summing the squares
    in float64 makes LayerNorm+GELU 16% slower on the H100 for less than one ulp). LayerNorm's
    output: eager and braze both round the mean (about 1000) to float32 first, so both are
    off by about 1e-4 and which one is closer is a coin toss: at most twice eager's error,
    the bound ``check_low_precision`` uses."""
    x, w, b = torch.randn(4, 4100) + 1000.0, torch.randn(4100), torch.randn(4100)
    fn = lambda x, w, b: (F.layer_norm(x, (4100,), w, b), x.var(-1))  # noqa: E731
    exact = fn(x.double(), w.double(), b.double())
    (norm, var), (eager_norm, _) = torch.compile(fn, backend="braze")(x, w, b), fn(x, w, b)
    error = lambda ours, exact: (ours.double() - exact).abs().max()  # noqa: E731
    assert error(norm, exact[0]) <= 2 * error(eager_norm, exact[0])
    assert error(var, exact[1]) <= 4 * torch.finfo(torch.float32).eps * exact[1].abs().max()


def test_row_persistent_argmax_ties_and_nan():
    x = torch.randn(5, 300)
    x[1, 123] = float("nan")
    x[2, 10:40] = 9.0
    x[3, 7:9] = -9.0
    assert_shape(["row"], lambda x: (x.argmax(-1), x.argmin(-1)), x)


def test_row_loop_layer_norm_is_one_kernel(short_registers):
    x, w, b = torch.randn(4, 4100), torch.randn(4100), torch.randn(4100)
    assert_shape(["row_loop"], lambda x, w, b: F.layer_norm(x, (4100,), w, b), x, w, b, atol=1e-5, rtol=1e-4)


def test_row_loop_softmax_folds_its_sum_into_the_max_loop(short_registers):
    x = torch.randn(6, 3000) * 20
    x[1] = float("-inf")  # all -inf: NaN, as eager
    x[2, 5] = float("nan")
    x[3, :1000] = float("-inf")
    x[4, 2999] = 300.0  # the max grows late: earlier totals are rescaled
    report = assert_shape(["row_loop"], lambda x: torch.softmax(x, -1), x)
    assert "online_sum_exp" in report.graphs[0].source
    assert_shape(["row_loop"], lambda x: (torch.softmax(x, -1), torch.logsumexp(x, -1)), x)


def test_row_loop_argmax_and_variance(short_registers):
    x = torch.randn(3, 5000)
    x[1, 4321] = float("nan")
    x[2, 100:300] = 7.0  # ties: the first index wins
    found, _ = shapes_of(lambda x: (x.argmax(-1), x.var(-1)), x)
    assert set(found) == {"row_loop"}
    check(lambda x: (x.argmax(-1), x.argmin(-1), x.var(-1), x.amax(-1)), x, rtol=1e-4, atol=1e-5)


def test_cat_branches_mask_their_loads_instead_of_clamping():
    x = torch.randn(2, 4, 8, 16)
    half = 8
    report = assert_shape(["pointwise"], lambda x: torch.cat([-x[..., half:], x[..., :half]], -1) * 2, x)
    assert "tl.minimum(tl.maximum" not in report.graphs[0].source


def test_scan_rows_up_to_4096_are_one_chunk():
    """A row of up to ``SCAN_ROW_MAX`` elements scans as one chunk, with no running value;
    a longer one in chunks of 1024, each offset by the sum of those before it."""
    for cols, chunked in ((4096, False), (4097, True)):
        x = torch.randn(3, cols)
        report = assert_shape(["scan"], lambda x: x.exp().cumsum(1), x, rtol=1e-5, atol=1e-4)
        assert ("running" in report.graphs[0].source) == chunked
        assert f"RBLOCK={1024 if chunked else 4096}" in report.graphs[0].source


def test_column_reduction_with_epilogue():
    # its own generator: the column sums of 300 floats in braze's order differ from eager's
    # by up to about 2e-5 on some inputs, past the default atol; tests that run before this
    # one must not decide which input it gets
    gen = torch.Generator(torch.empty(0).device).manual_seed(11)
    x, w = torch.randn(300, 64, generator=gen), torch.randn(64, generator=gen)
    assert_shape(["column"], lambda x, w: (x.sum(0) * w).tanh(), x, w)


def test_reduction_along_a_strided_axis_reads_columns():
    """A sum over W of a channels-last tensor: W is strided in memory, C contiguous. The
    kernel's outer loops follow the load (C innermost), not the store: a column kernel
    reading whole lines of C, not a row kernel reading one element of each line per row."""
    x = torch.randn(4, 16, 10, 12).to(memory_format=torch.channels_last)
    assert_shape(["column"], lambda x: x.sum(-1) * 2, x)


def test_split_full_sum():
    x = torch.randn(40000)
    assert_shape(["split"], lambda x: x.sum(), x, rtol=1e-4, atol=1e-4)


def test_split_full_reductions_of_every_kind():
    x = torch.randn(20000, 2)
    x[12345, 1] = float("nan")
    found, _ = shapes_of(lambda x: (x.amax(), x.argmin(), torch.var_mean(x)), x)
    assert set(found) == {"split"}
    check(lambda x: (x.amax(), x.argmin(), x.argmax(), torch.var_mean(x), x.prod()), x, rtol=1e-4, atol=1e-4)


def test_split_column_orientation_with_epilogue():
    x = torch.randn(20000, 3)
    assert_shape(["split"], lambda x: x.sum(0).abs().sqrt() + x.mean(0), x, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_split_columns_when_wide_blocks_are_fewer_than_sms():
    """4480 columns: 280 blocks of 16 (more than two per SM of an H100: blocks of 16 alone would not split),
    70 of 64 (fewer than its 132 SMs): split over row chunks, 64 columns to a program."""
    x = torch.randn(1024, 4480)
    report = assert_shape(["split"], lambda x: x.sum(0), x, rtol=1e-4, atol=1e-4)
    assert "XBLOCK=64" in report.graphs[0].source.split("# ---- launchers")[1]
    assert_shape(["column"], lambda x: x.sum(0), torch.randn(1024, 8448), rtol=1e-4, atol=1e-4)


def test_split_lanes_fold_short_chains_in_float32():
    """A split takes enough splits that each lane folds at most LANE_CHAIN_MAX elements;
    its sums and moments then stay in float32 (float64 Welford is compute-bound on a GPU)."""
    x = torch.randn(300000, 4)
    report = assert_shape(["split"], lambda x: torch.var_mean(x, 0), x, rtol=1e-4, atol=1e-5)
    source = report.graphs[0].source
    rblock, rchunk = map(int, re.search(r"RBLOCK=(\d+), RCHUNK=(\d+)", source).groups())
    assert rchunk <= triton_shapes.LANE_CHAIN_MAX * rblock
    assert "tl.float64" not in source


def test_split_workspaces_live_with_the_graph_and_stay_correct():
    """Splits reuse their workspaces on every call (none allocated per call): two splits
    with two partial fields each, called on fresh inputs twice, as eager."""
    def f(x, y):
        return torch.var_mean(x), torch.var_mean(y * 2)
    compiled = torch.compile(f, backend="braze")
    for seed in (1, 2):
        gen = torch.Generator(torch.empty(0).device).manual_seed(seed)
        x, y = torch.randn(40000, generator=gen), torch.randn(40000, generator=gen)
        torch.testing.assert_close(compiled(x, y), f(x, y), rtol=1e-4, atol=1e-5)
    _, report = shapes_of(f, x, y)
    launchers = report.graphs[0].source.split("# ---- launchers")[1]
    assert "torch.empty" not in launchers and launchers.count("_workspaces.get(") >= 4


def test_integer_split_sum_is_exact():
    x = torch.randint(-1000, 1000, (40000,))
    assert_shape(["split"], lambda x: x.sum(), x)


def _kernel_names(report) -> list:
    return [line.split("(")[0] for g in report.graphs for line in g.source.splitlines()
            if line.startswith("def triton_")]


def test_equal_kernels_share_one_module():
    """A kernel is named by its text, not by the plan: the same computation in two
    graphs (different buffer and kernel names) is one module."""
    x, y, b = torch.randn(33, 17), torch.randn(33, 17), torch.randn(4, 4)
    _, first = shapes_of(lambda x: x.sin() * 3 + 1, x)
    with braze.config.patch(foreach=False):  # else the relu and the sin are one foreach kernel
        _, second = shapes_of(lambda b, y: ((b @ b).relu(), y.sin() * 3 + 1), b, y)
    assert len(_kernel_names(second)) == 2
    assert _kernel_names(first)[0] in _kernel_names(second)


def test_warm_cache_builds_nothing(tmp_path):
    """A second compile of the same graph (fresh Dynamo) finds every kernel module in
    the cache and writes nothing. (On a GPU the binaries are cached beside them, and a
    warm compile runs neither Triton's compiler nor ptxas.)"""
    fn = lambda x: ((x * 2).sum(-1), x.t().contiguous())  # noqa: E731
    x = torch.randn(8, 40)
    with braze.config.patch(cache_dir=str(tmp_path)):
        cold = braze.explain(fn, x)
        written = {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
        torch._dynamo.reset()
        warm = braze.explain(fn, x)
        after = {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert not cold.graphs[0].cache_hit and warm.graphs[0].cache_hit
    assert any(p.suffix == ".py" for p in written) and after == written


def test_launch_is_precomputed():
    """The wrapper's launch is one call of a launcher whose grid and constexprs are
    literals: nothing is computed from sizes at run time."""
    _, report = shapes_of(lambda x: torch.softmax(x, -1), torch.randn(16, 1000))
    graph = report.graphs[0]
    assert "kernel0(arg0, " in graph.wrapper
    launcher = graph.source.split("# ---- launchers")[1]
    assert re.search(r"\[\(\d+, 1, 1\)\]\(arg0, buf\d+, XBLOCK=\d+, RBLOCK=1024, num_warps=\d+\)", launcher)


def test_int64_indexing_where_sizes_need_it(monkeypatch):
    monkeypatch.setattr(triton_shapes, "WIDE", 1000)  # pretend 1000 elements overflow int32
    x = torch.randn(40, 50)
    fn = lambda x: (x.t().contiguous() + 1, x.sum(0), x.sum(-1), x.sum())  # noqa: E731
    _, report = shapes_of(fn, x)
    source = report.graphs[0].source
    assert source.count("tl.program_id(0).to(tl.int64)") >= 3
    check(fn, x, rtol=1e-5, atol=1e-5)


def test_int32_indexing_by_default():
    _, report = shapes_of(lambda x: x + 1, torch.randn(40, 50))
    assert "tl.int64" not in report.graphs[0].source


@pytest.fixture
def h100_blocks():
    """Blocks chosen as for an H100 (the interpreter's own are larger: its cost is per
    program), programs still not shrunk to fill the device; restored after the test. (On a
    GPU the device's own shapes apply: these tests check the interpreter's choice.)"""
    if torch.empty(0).device.type == "cuda":
        pytest.skip("checks shapes chosen under the interpreter with an H100's blocks")
    info, h100 = triton_shapes.INTERPRETER, triton_shapes.gpu_info("H100", 132)
    fields = ("block_elements", "pointwise_block", "loop_rows", "tile", "splits")
    saved = {f: getattr(info, f) for f in fields}
    for f in fields:
        object.__setattr__(info, f, getattr(h100, f))
    yield
    for f, value in saved.items():
        object.__setattr__(info, f, value)


def _launch(report) -> str:
    return report.graphs[0].source.split("# ---- launchers")[1]


@pytest.mark.parametrize("dtype, tile, warps", [
    (torch.float32, 2048, 8), (torch.bfloat16, 4096, 8), (torch.bool, 8192, 16)])
def test_split_steps_load_the_same_bytes_whatever_the_dtype(dtype, tile, warps, h100_blocks):
    """A row split's step loads 8 KB: 2048 float32, 4096 bf16, 8192 bool elements, at most 16
    a thread (1024 elements a step, 4 KB of float32, left whole-tensor sums far from the
    memory's rate)."""
    x = torch.randn(3, 40000) > 0 if dtype is torch.bool else torch.randn(3, 40000).to(dtype)
    fn = (lambda x: x.any()) if dtype is torch.bool else (lambda x: x.sum())  # noqa: E731
    report = assert_shape(["split"], fn, x, rtol=1e-2, atol=1e-2)
    assert f"RBLOCK={tile}," in _launch(report) and f"num_warps={warps})" in _launch(report)


def test_column_over_few_rows_takes_wide_blocks_without_a_loop(h100_blocks):
    """A reduction over 4 rows of columns takes 512 columns a program (not 64: a block 8
    times smaller than the device's), held whole: no loop, a variance from two sums, not
    Welford steps. int64 counts keep 64 columns (slower wide on an H200)."""
    x = torch.randn(4, 3000)
    report = assert_shape(["column"], lambda x: (x.sum(0) * 2).abs().sqrt(), x)
    assert "XBLOCK=512, RBLOCK=4" in _launch(report) and "for roffset" not in report.graphs[0].source
    report = assert_shape(["column"], lambda x: torch.var_mean(x, 0), torch.randn(9, 3000) * 3 + 100,
                          rtol=1e-4, atol=1e-4)
    assert "welford" not in report.graphs[0].source
    report = assert_shape(["column"], lambda x: (x > 0).sum(0), x)
    assert "XBLOCK=64, RBLOCK=4" in _launch(report)


def test_column_over_few_rows_argmax_ties_and_nan(h100_blocks):
    x = torch.randint(0, 3, (5, 700)).float()
    x[2, 7] = x[4, 9] = float("nan")
    assert_shape(["column"], lambda x: (x.argmax(0), x.argmin(0), x.amax(0)), x)
