"""The C++ backend's row kernels (softmax, log-softmax, LayerNorm, sums, means and
moments along the last dimension): values against eager, or against the float64 result
where eager's float32 sums are further off, on fresh random inputs; and the
generated-source properties their speed rests on: one ``exp`` per softmax element, the
next row prefetched, float32 row sums through float partials folded into double, moments
in two passes over the kept row (Welford only for rows too long to keep), NaN-propagating
max and min, and ``exp`` kept in the loop that uses it."""
import math
import re

import pytest
import torch
import torch.nn.functional as F

import braze
from braze.codegen.cpp.lanes import CHUNK
from braze.codegen.cpp.rows import SCRATCH_MAX
from braze.ir.reductions import LANE_CHAIN_MAX
from helpers import check, check_low_precision, compiled_source, kernel_source

LANES = braze.config.cpp_lanes


@pytest.fixture(autouse=True)
def cpp():
    """The C++ backend, its row loops in ``LANES`` lanes (more lanes for long rows:
    ``test_a_long_row_folds_into_more_lanes``)."""
    with braze.config.patch(cpu_backend="cpp", cpp_reduce_lanes_max=LANES):
        yield


def lane_loops(n: int) -> int:
    """Copies of a row loop's body: the vectorized blocks (of the widest power of two
    lanes the row fills) and the tail."""
    lanes = 1
    while lanes * 2 <= min(LANES, n):
        lanes *= 2
    return 1 + (n % lanes != 0)


ROW_LENGTHS = [1, 7, LANES, 1000, 1024, 4099]


# Row lengths about the chunk of float partials (``LANES * CHUNK``) too.
CHUNKED_ROW_LENGTHS = [1, 7, LANES, LANES * CHUNK + 3, 1000, 1024, 4099]


@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_softmax_one_exp_per_element(n):
    x = torch.randn(37, n) * 4
    compiled = check(lambda x: torch.softmax(x, -1), x, expect_kernels=1)
    source = kernel_source(compiled)
    # exp(x - max) is computed in the sum loop only (its copies: blocks, tail) and kept
    assert source.count("expf(") == lane_loops(n), source
    if n > 1:
        assert re.search(r"keep0\[r0\] = t\d+;", source), source


@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_log_softmax_rows(n):
    check(lambda x: torch.log_softmax(x, -1), torch.randn(19, n) * 3, expect_kernels=1)


@pytest.mark.parametrize("n", [7, 1000, 1024])
def test_masked_softmax_keeps_the_shared_input(n):
    """x / 2 + mask feeds the max loop and the exp loop: kept once, not recomputed."""
    x, mask = torch.randn(23, n), torch.randn(n)
    compiled = check(lambda x, m: torch.softmax(x / 2 + m, -1), x, mask, expect_kernels=1)
    source = kernel_source(compiled)
    assert source.count("arg1[") == lane_loops(n), source  # the mask is read in the max loop only
    assert source.count("expf(") == lane_loops(n), source


@pytest.mark.parametrize("n", [5, 1000, 1024])
def test_layer_norm_rows(n):
    x, w, b = torch.randn(31, n), torch.randn(n), torch.randn(n)
    check(lambda x, w, b: F.layer_norm(x, (n,), w, b), x, w, b)


def test_softmax_prefetches_the_next_row():
    compiled = check(lambda x: torch.softmax(x, -1), torch.randn(16, 1024), expect_kernels=1)
    source = kernel_source(compiled)
    assert "__builtin_prefetch(&arg0[" in source and re.search(r"__builtin_prefetch\(&buf\d+\[", source), source


@pytest.mark.parametrize("make", [
    lambda: torch.randn(1000, 64).t(),  # rows strided
    lambda: torch.randn(64, 2000)[:, ::2],  # every other element
    lambda: torch.randn(8, 64, 100).permute(0, 2, 1),
    lambda: torch.randn(1, 1000),
    lambda: torch.randn(1000, 1),
], ids=["transposed", "step2", "permuted", "one_row", "rows_of_one"])
def test_softmax_noncontiguous_and_size_one(make):
    x = make()
    check(lambda x: torch.softmax(x, -1), x)
    torch._dynamo.reset()
    check(lambda x: torch.log_softmax(x * 2, -1), x)


@pytest.mark.parametrize("n", [7, 1000])
def test_softmax_bf16(n):
    check_low_precision(lambda x: torch.softmax(x, -1), (torch.randn(9, n) * 3).bfloat16())


def test_softmax_float16_rows():
    check_low_precision(lambda x: torch.softmax(x, -1), (torch.randn(9, 1000) * 3).half())


@pytest.mark.parametrize("n", CHUNKED_ROW_LENGTHS + [SCRATCH_MAX + 5])
def test_row_sum_as_exact_as_float32_holds(n):
    """float32 partials of at most CHUNK elements per lane, folded into double; a row whose
    lanes fold at most LANE_CHAIN_MAX elements each sums in float32 lanes merged as a tree."""
    x = torch.randn(23, n)
    actual, source = compiled_source(lambda x: x.sum(-1), x)
    torch.testing.assert_close(actual, x.double().sum(-1).float())
    if n > LANE_CHAIN_MAX * LANES:
        assert "float a0c_v[" in source and "double a0_v[" in source, source
    else:
        assert "double" not in source.split("void kernel0")[1], source


@pytest.mark.parametrize("n", CHUNKED_ROW_LENGTHS)
def test_row_mean_of_large_values(n):
    x = torch.randn(9, n) * 1e4 + 3e5
    actual, _ = compiled_source(lambda x: x.mean(-1), x)
    torch.testing.assert_close(actual, x.double().mean(-1).float())


@pytest.mark.parametrize("n", CHUNKED_ROW_LENGTHS)
def test_softmax_rows(n):
    check(lambda x: torch.softmax(x, -1), torch.randn(13, n) * 5)


@pytest.mark.parametrize("n", CHUNKED_ROW_LENGTHS[1:])
def test_var_mean_rows_in_two_passes(n):
    x = torch.randn(17, n) * 3 + 50  # a large mean: one-pass sums of squares would cancel
    actual, source = compiled_source(lambda x: torch.var_mean(x, -1), x)
    var, mean = (t.double() for t in torch.var_mean(x.double(), -1))
    torch.testing.assert_close(actual[1], mean.float())
    torch.testing.assert_close(actual[0], var.float())
    assert "keep0[r0] - " in source and "blocks" not in source, source


@pytest.mark.parametrize("n", [5, 1000, 1024, 4099, SCRATCH_MAX + 5])
def test_layer_norm_rows_of_large_mean(n):
    x, w, b = torch.randn(11, n) * 2 + 7, torch.randn(n), torch.randn(n)
    check(lambda x, w, b: F.layer_norm(x, (n,), w, b), x, w, b)


def test_long_rows_keep_welford():
    """Rows too long to keep in a scratch array: one pass (Welford)."""
    n = SCRATCH_MAX + 5
    x = torch.randn(3, n)
    _, source = compiled_source(lambda x: torch.var_mean(x, -1), x)
    assert "blocks" in source and "keep0" not in source, source


@pytest.mark.parametrize("n", [7, 1000, 1024])
def test_bias_residual_layer_norm_bf16(n):
    """The normalizing loop reads the kept sum instead of recomputing it from the inputs."""
    def fn(x, bias, residual, w, b):
        h = x + bias + residual
        return F.layer_norm(h, (n,), w, b), h
    args = [torch.randn(33, n).bfloat16(), torch.randn(n).bfloat16(), torch.randn(33, n).bfloat16(),
            torch.randn(n).bfloat16(), torch.randn(n).bfloat16()]
    check_low_precision(fn, *args)
    _, source = compiled_source(fn, *args)
    assert source.count("= arg2[") == 1 + (n % LANES != 0), source  # the residual: loaded in the first loop only


@pytest.mark.parametrize("n", [64, 1000])
def test_layer_norm_gelu_training(n):
    x = torch.randn(24, n, requires_grad=True)
    w = torch.randn(n, requires_grad=True)
    b = torch.randn(n, requires_grad=True)
    check(lambda x, w, b: F.gelu(F.layer_norm(x, (n,), w, b)), x, w, b, grad=True)


def test_var_over_two_dims_keeps_welford():
    check(lambda x: torch.var_mean(x, (1, 2)), torch.randn(6, 30, 70) + 4)


@pytest.mark.parametrize("where", [0, 5, -1])
@pytest.mark.parametrize("n", [7, 1024, 1000])
def test_max_min_propagate_nan(where, n):
    x = torch.randn(6, n)
    x[1, where] = math.nan
    x[3, :] = -math.inf
    x[4, where] = math.inf
    check(lambda x: (x.amax(-1), x.amin(-1), torch.maximum(x, x.flip(-1)), torch.minimum(x, x.flip(-1))), x)
    torch._dynamo.reset()
    check(lambda x: torch.softmax(x, -1), x)


def test_split_sum_keeps_double_lanes():
    """Few long rows, shared by threads: partials per thread, no chunks."""
    with braze.config.patch(num_threads=2):
        x = torch.randn(1, 40000)
        actual, source = compiled_source(lambda x: x.sum(-1), x)
    torch.testing.assert_close(actual, x.double().sum(-1).float())


def test_two_layer_norms_in_one_row():
    """Moments at two levels of one row kernel, each kept and computed in two passes."""
    n = 300
    x, w = torch.randn(19, n) * 4 + 2, torch.randn(n)
    check(lambda x, w: F.layer_norm(F.layer_norm(x, (n,)) * w + 3, (n,)), x, w)


def test_sibling_moments_in_one_row():
    x, y = torch.randn(21, 700) + 5, torch.randn(21, 700) * 3
    check(lambda x, y: (torch.var_mean(x, -1), torch.var_mean(y, -1, correction=0), x.sum(-1)), x, y)


@pytest.mark.parametrize("n", [1000, 100000])
def test_var_of_one_long_row(n):
    x = torch.randn(n) * 2 + 9
    actual, _ = compiled_source(lambda x: torch.var_mean(x), x)
    var, mean = torch.var_mean(x.double())
    torch.testing.assert_close(actual, (var.float(), mean.float()))


@pytest.mark.parametrize("n, lanes", [(100, 16), (1000, 64), (4099, 64), (65537, 64)])
@pytest.mark.parametrize("reduce", ["sum", "amax", "argmax", "var_mean"])
def test_a_long_row_folds_into_more_lanes(n, lanes, reduce):
    """A row of at least 8 elements a lane takes up to ``cpp_reduce_lanes_max`` lanes
    (independent accumulator chains); sums stay as exact as float32 holds, and NaN and
    ties keep eager's answers."""
    fn = {"sum": lambda x: x.sum(-1), "amax": lambda x: x.amax(-1), "argmax": lambda x: x.argmax(-1),
          "var_mean": lambda x: torch.var_mean(x, -1)}[reduce]
    x = torch.randn(5, n)
    x[1, n // 3] = float("nan")
    x[2, [n // 5, n - 1]] = 9.0  # a tie: the first index
    with braze.config.patch(cpp_reduce_lanes_max=64):
        actual, source = compiled_source(fn, x)
    assert re.search(rf"_(v|mean)\[{lanes}\];", source), source
    expected = x.double().sum(-1).float() if reduce == "sum" else fn(x)
    torch.testing.assert_close(actual, expected, equal_nan=True)
