"""The cpp backend's row and column kernels: values against eager on fresh random inputs,
and the generated-source properties their speed rests on (one exp per softmax element,
next-row prefetches, wide unrolled column blocks)."""
import re

import pytest
import torch
import torch.nn.functional as F

import braze
from helpers import Compiled, check, check_low_precision

LANES = braze.config.cpp_lanes


@pytest.fixture(autouse=True)
def cpp():
    with braze.config.patch(cpu_backend="cpp"):
        yield


def kernel_source(compiled) -> str:
    """The generated kernel functions of the one compiled graph (no prelude)."""
    (graph,) = compiled.graphs
    return graph.source[graph.source.index("// kernel"):]


def compiled_run(fn, *args, shape=None):
    """braze's result, after checking it compiled (one kernel of ``shape``, if given)."""
    with Compiled() as compiled:
        out = torch.compile(fn, backend="braze")(*args)
    assert compiled.graphs and not compiled.failures
    if shape is not None:
        assert [k.shape for k in compiled.kernels] == [shape]
    return out


def lane_loops(n: int) -> int:
    """Copies of a row loop's body: the vectorized blocks (of the widest power of two
    lanes the row fills) and the tail."""
    lanes = 1
    while lanes * 2 <= min(LANES, n):
        lanes *= 2
    return 1 + (n % lanes != 0)


ROW_LENGTHS = [1, 7, LANES, 1000, 1024, 4099]


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


COLUMN_SHAPES = [(2048, 2048), (1001, 33), (3, 5), (7, 3000), (4097, 64), (1, 100), (6, 1)]


@pytest.mark.parametrize("shape", COLUMN_SHAPES, ids=str)
def test_column_sum_float64(shape):
    check(lambda x: x.sum(0), torch.randn(shape, dtype=torch.float64))


@pytest.mark.parametrize("shape", COLUMN_SHAPES, ids=str)
def test_column_sum_float32(shape):
    """float32 columns sum in double: as close to the exact sum as float32 holds it, and
    never further from it than eager's float32 sum (2048 rows: eager is 1e-4 off)."""
    x = torch.randn(shape)
    exact = x.double().sum(0)
    actual = compiled_run(lambda x: x.sum(0), x, shape="column" if shape[1] > 1 and shape[0] > 1 else None)
    torch.testing.assert_close(actual, exact.float())
    assert (actual.double() - exact).abs().max() <= (x.sum(0).double() - exact).abs().max()


@pytest.mark.parametrize("shape", COLUMN_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_column_sum_exact(shape, dtype):
    if dtype is torch.bool:
        x = torch.rand(shape) > 0.5
    else:
        x = torch.randint(-2 ** 30, 2 ** 30, shape, dtype=dtype)
        if dtype is torch.int64:
            x = x * 2 ** 20  # large values: exact sums, no float in between
    check(lambda x: x.sum(0), x)


def test_column_sum_source_single_thread():
    """2048 fp32 columns: one block of all columns (double accumulators, 16 KiB), rows
    folded four at a time, each in order, into a float partial added to the double once."""
    with braze.config.patch(num_threads=1):
        compiled = check(lambda x: x.sum(0), torch.randn(512, 2048))
    (kernel,) = compiled.kernels
    source = kernel_source(compiled)
    assert kernel.shape == "column"
    assert "xb += 2048" in source and "double a0_v[2048]" in source, source
    assert "rb += 4" in source and source.count("a0c_v[l] = (a0c_v[l] + ") == 4, source
    assert source.count("a0_v[l] = (a0_v[l] + (double)(a0c_v[l]));") == 1, source


def test_column_sum_blocks_for_every_thread():
    with braze.config.patch(num_threads=2):
        compiled = check(lambda x: x.sum(0), torch.randn(512, 2048))
    source = kernel_source(compiled)
    assert "num_threads(2)" in source and "xb += 1024" in source, source


@pytest.mark.parametrize("fn", [
    lambda x: x.var(0),
    lambda x: x.amax(0),
    lambda x: (x - x.mean(0)).abs().sum(0),
    lambda x: x.sum(0).tanh() * 3,
    lambda x: x.sum(1),  # (A, R, C): reduce the middle dimension
    lambda x: x.sum((0, 1)),
], ids=["var", "amax", "centered", "epilogue", "middle", "two_dims"])
@pytest.mark.parametrize("shape", [(37, 5, 301), (9, 1027, 70)], ids=str)
def test_column_reductions(fn, shape):
    """Against the float64 result rounded to float32 (braze sums float32 in double;
    eager's float32 sums of 9243 elements are further off than the default tolerance)."""
    x = torch.randn(shape)
    actual = compiled_run(fn, x, shape="column")
    torch.testing.assert_close(actual, fn(x.double()).float())


@pytest.mark.parametrize("make", [
    lambda: torch.randn(1030, 600)[:, ::2],  # columns every other element
    lambda: torch.randn(300, 1030).t()[:, 10:],  # the "columns" are contiguous rows of the storage
    lambda: torch.randn(40, 600, 3).permute(2, 0, 1)[1],
], ids=["step2", "transposed", "permuted"])
def test_column_sum_noncontiguous(make):
    x = make()
    actual = compiled_run(lambda x: x.sum(0), x)
    torch.testing.assert_close(actual, x.double().sum(0).float())


@pytest.mark.parametrize("shape", [(37, 5, 301), (9, 1027, 70)], ids=str)
def test_column_argmax_argmin(shape):
    check(lambda x: (x.argmax(1), x.argmin(0)), torch.randn(shape))


def test_column_argmax_ties_first_index():
    x = torch.randint(0, 3, (1001, 67)).float()
    check(lambda x: (x.argmax(0), x.argmin(0)), x)
