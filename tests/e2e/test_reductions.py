"""Reductions against eager, through each code generator: every reduction over every
subset of dimensions, with and without keepdim, forward and backward; ties and NaN in
argmax/argmin; integer and bool reductions (exact); rows and columns long enough to be
split across threads or programs; epilogues after a column reduction; variances of
long rows with a large mean (no one-pass cancellation)."""
import math

import pytest
import torch

from helpers import check, rand


REDUCTIONS = {
    "sum": lambda x, d, k: x.sum(d, keepdim=k), "mean": lambda x, d, k: x.mean(d, keepdim=k),
    "prod": lambda x, d, k: x.prod(d[0], keepdim=k) if len(d) == 1 else x.prod(),
    "amax": lambda x, d, k: x.amax(d, keepdim=k), "amin": lambda x, d, k: x.amin(d, keepdim=k),
    "var": lambda x, d, k: x.var(d, keepdim=k), "std": lambda x, d, k: x.std(d, keepdim=k, correction=0),
    "var_mean": lambda x, d, k: torch.var_mean(x, d, keepdim=k),
    "argmax": lambda x, d, k: x.argmax(d[0], keepdim=k) if len(d) == 1 else x.argmax(),
    "argmin": lambda x, d, k: x.argmin(d[0], keepdim=k) if len(d) == 1 else x.argmin(),
    "max_dim": lambda x, d, k: x.max(d[0], keepdim=k) if len(d) == 1 else x.max(),
    "logsumexp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k),
    "norm": lambda x, d, k: torch.linalg.vector_norm(x, 2, d, keepdim=k),
}


DIMS = [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", DIMS, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(name, dims, keepdim, backend):
    x = rand(6, 33, 10, grad=name not in ("argmax", "argmin"))
    if name == "prod":
        # |x| in [0.9, 1.1] with random signs: products of up to 1980 elements and all their
        # partial products stay inside float32. With wider inputs the partial products of the
        # traced backward (cumprod of prefixes and suffixes, prod_backward's branch-free form)
        # overflow for some draws where eager's (result / x) does not.
        magnitude = rand(6, 33, 10, low=0.9, high=1.1)
        x = (magnitude * torch.where(rand(6, 33, 10) > 0, 1.0, -1.0)).requires_grad_()
    # A float32 sum of up to 1980 elements in [-3, 3) is off by up to about 1e-5 in eager
    # itself, the default atol: sums are compared with the float64 result instead.
    check(lambda x: REDUCTIONS[name](x, list(dims), keepdim), x, grad=name not in ("argmax", "argmin"),
          reference="float64" if name == "sum" else "eager")


def test_argmax_ties_and_nan(backend):
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [float("nan"), 1.0, float("nan"), 5.0], [2.0, 2.0, 2.0, 2.0]])
    check(lambda x: (x.argmax(1), x.argmin(1), x.amax(1), x.amin(0), x.argmax(0)), x)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.bool])
def test_integer_reductions(dtype, backend):
    x = rand(9, 40, dtype=dtype)
    if dtype is torch.bool:
        check(lambda x: (x.sum(1), x.sum(), x.amax(0), x.amin(1), x.any(1), x.all(0)), x)
    else:
        check(lambda x: (x.sum(1), x.sum(), x.amax(0), x.amin(1), x.argmax(1), x.any(1), x.all(0), x.prod(1)), x)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(3, 200000), (200000, 3), (1, 300001), (70000,), (512, 4096)], ids=str)
def test_large_reductions(shape, backend):
    x = rand(*shape)
    check(lambda x: (x.sum(-1), x.sum(0), x.amax(-1), x.var(-1), x.argmax(-1), x.softmax(-1)), x, rtol=1e-4, atol=1e-4)


def test_column_reduction_with_epilogue(backend):
    x, w = rand(4096, 100), rand(100)
    check(lambda x, w: ((x.sum(0) * w).sigmoid(), (x - x.mean(0)).abs().amax(0)), x, w)


@pytest.mark.slow
def test_reduction_precision_long_rows(backend):
    x = rand(2, 1 << 20) + 10  # large mean: a naive one-pass variance would lose digits
    check(lambda x: (x.var(1), x.mean(1), x.sum(1)), x, rtol=1e-4, atol=1e-3)
    assert math.isfinite(x.var().item())
