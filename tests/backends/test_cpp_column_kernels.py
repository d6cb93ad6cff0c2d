"""The C++ backend's column kernels (reductions over the leading dimension): float32
columns summed in double, as close to the exact sum as float32 holds and never further
than eager's; integer and bool sums exact; var, amax, argmax/argmin (ties: the first
index) and epilogues; strided and permuted inputs; and the generated source's blocks of
columns (one block per thread, rows folded four at a time into float partials)."""
import pytest
import torch

import braze
from helpers import Compiled, check, kernel_source


@pytest.fixture(autouse=True)
def cpp():
    with braze.config.patch(cpu_backend="cpp"):
        yield


def compiled_run(fn, *args, shape=None):
    """braze's result, after checking it compiled (one kernel of ``shape``, if given)."""
    with Compiled() as compiled:
        out = torch.compile(fn, backend="braze")(*args)
    assert compiled.graphs and not compiled.failures
    if shape is not None:
        assert [k.shape for k in compiled.kernels] == [shape]
    return out


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
    assert "const int b_threads = 2;" in source and "xb += 1024" in source, source


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
