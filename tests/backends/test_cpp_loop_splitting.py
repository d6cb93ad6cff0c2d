"""The cpp backend's faster row and pointwise kernels: values against eager (or the
float64 result) on fresh random inputs, and the generated-source properties the speed
rests on: float32 row sums through float partials folded into double, moments in two
passes over the kept row, NaN-propagating max and min, innermost loops cut where a
condition on their index flips (cat, pad, rotary embeddings), vector-math calls in
loops of their own where their argument is live across them."""
import math

import pytest
import torch
import torch.nn.functional as F

import braze
from braze.codegen.cpp.lanes import CHUNK
from braze.codegen.cpp.rows import SCRATCH_MAX
from helpers import Compiled, check, check_low_precision

LANES = braze.config.cpp_lanes
ROW_LENGTHS = [1, 7, LANES, LANES * CHUNK + 3, 1000, 1024, 4099]


@pytest.fixture(autouse=True)
def cpp():
    with braze.config.patch(cpu_backend="cpp"):
        yield


def compiled_source(fn, *args):
    """braze's result and its kernels' source (one graph, compiled, no fallback)."""
    torch._dynamo.reset()
    with Compiled() as compiled:
        out = torch.compile(fn, backend="braze")(*args)
    assert len(compiled.graphs) == 1 and not compiled.failures
    source = compiled.graphs[0].source
    return out, source[source.index("// kernel"):]


@pytest.mark.parametrize("n", ROW_LENGTHS + [SCRATCH_MAX + 5])
def test_row_sum_as_exact_as_float32_holds(n):
    """float32 partials of at most CHUNK elements per lane, folded into double."""
    x = torch.randn(23, n)
    actual, source = compiled_source(lambda x: x.sum(-1), x)
    torch.testing.assert_close(actual, x.double().sum(-1).float())
    if n >= LANES * CHUNK:
        assert "float a0c_v[" in source and "double a0_v[" in source, source


@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_row_mean_of_large_values(n):
    x = torch.randn(9, n) * 1e4 + 3e5
    actual, _ = compiled_source(lambda x: x.mean(-1), x)
    torch.testing.assert_close(actual, x.double().mean(-1).float())


@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_softmax_rows(n):
    check(lambda x: torch.softmax(x, -1), torch.randn(13, n) * 5)


@pytest.mark.parametrize("n", ROW_LENGTHS[1:])
def test_var_mean_rows_in_two_passes(n):
    x = torch.randn(17, n) * 3 + 50  # a large mean: one-pass sums of squares would cancel
    actual, source = compiled_source(lambda x: torch.var_mean(x, -1), x)
    var, mean = (t.double() for t in torch.var_mean(x.double(), -1))
    torch.testing.assert_close(actual[1], mean.float())
    torch.testing.assert_close(actual[0], var.float())
    assert "keep0[r0] - " in source and "blocks" not in source, source


@pytest.mark.parametrize("n", [5, 1000, 1024, 4099, SCRATCH_MAX + 5])
def test_layer_norm_rows(n):
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


def test_softmax_float16_rows():
    check_low_precision(lambda x: torch.softmax(x, -1), (torch.randn(9, 1000) * 3).half())


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


def rotary(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


@pytest.mark.parametrize("dim", [128, 7, 2])
def test_rotary_in_pieces(dim):
    """The innermost loop cut where ``cat`` switches inputs: no clamped loads left."""
    x, cos, sin = torch.randn(2, 3, 33, dim), torch.randn(33, dim), torch.randn(33, dim)
    compiled = check(rotary, x, cos, sin, expect_kernels=1)
    source = compiled.graphs[0].source
    source = source[source.index("// kernel"):]
    assert "idx_clamp" not in source and source.count("#pragma omp simd") == 2, source


@pytest.mark.parametrize("fn, pieces", [
    (lambda x, y: F.pad(x, (2, 3)) * 2, 3),
    (lambda x, y: torch.cat([x, y, x.exp()], -1), 3),
    (lambda x, y: torch.cat([x, y] * 3, -1) + 1, 6),
    (lambda x, y: torch.cat([x, y] * 5, -1) + 1, 1),  # more cuts than pieces: one loop
    (lambda x, y: torch.where(torch.arange(x.shape[-1]) == 4, x, y), 1),  # not index arithmetic
], ids=["pad", "cat3", "cat6", "cat10", "arange_eq"])
def test_last_dim_conditions(fn, pieces):
    x, y = torch.randn(5, 4, 9), torch.randn(5, 4, 9)
    x[0, 0, 0] = math.nan
    compiled = check(fn, x, y, expect_kernels=1)
    source = compiled.graphs[0].source
    source = source[source.index("// kernel"):]
    assert source.count("#pragma omp simd") == pieces, source
    assert pieces == 1 or "idx_clamp(" not in source, source


def _own_loop_calls(source: str, name: str) -> bool:
    """Is some ``name`` call alone in an ``omp simd`` loop (``calls.BlockCalls``)?"""
    lines = source.splitlines()
    return any(name + "(" in line and "[l] = " in line and lines[k - 2].strip() == "#pragma omp simd"
               for k, line in enumerate(lines))


@pytest.mark.parametrize("n", [3, 7, LANES, LANES * CHUNK + 3, 1024])
def test_layer_norm_gelu_calls_erf_in_a_loop_of_its_own(n):
    """GELU's input is live across ``erff``: each block of lanes (4 or more) computes it
    and the calls first; rows shorter than 4 have no blocks."""
    x, w, b = torch.randn(37, n) * 3, torch.randn(n), torch.randn(n)
    fn = lambda x, w, b: F.gelu(F.layer_norm(x, (n,), w, b))  # noqa: E731
    compiled = check(fn, x, w, b, expect_kernels=1)
    source = compiled.graphs[0].source
    assert _own_loop_calls(source, "erff") == (n >= 4), source


def test_layer_norm_gelu_backward_with_calls_in_their_own_loop():
    x = torch.randn(29, 1000, requires_grad=True)
    w, b = torch.randn(1000, requires_grad=True), torch.randn(1000, requires_grad=True)
    check(lambda x, w, b: F.gelu(F.layer_norm(x, (1000,), w, b)), x, w, b)


def test_softmax_keeps_exp_in_its_loop():
    """Nothing but exp's result is live across it: a loop of its own would only add traffic."""
    _, source = compiled_source(lambda x: torch.softmax(x, -1), torch.randn(13, 1000))
    assert "expf(" in source and not _own_loop_calls(source, "expf"), source
