"""2-D max pooling lowered by braze (braze/lower/pooling.py), on both code generators.

Forward values and indices must equal eager's exactly (ties keep the first maximum, a
NaN propagates with the index of the window's last NaN); gradients match eager's
(float32) or are as close to a float64 reference as eager's (bfloat16); and
``braze.explain`` shows the ops as fused kernels, not ATen fallbacks.
"""
import pytest
import torch
import torch.nn.functional as F

import braze
from helpers import Compiled, check

aten = torch.ops.aten
POOL_OPS = {"aten.max_pool2d_with_indices.default", "aten.max_pool2d_with_indices_backward.default"}

# (input sizes, kernel_size, stride, padding, dilation, ceil_mode)
CONFIGS = [
    ((2, 3, 9, 10), 3, 2, 1, 1, False),            # ResNet's stem pooling
    ((2, 3, 8, 8), 2, None, 0, 1, False),           # stride defaults to the kernel
    ((1, 4, 11, 9), (3, 2), (1, 2), (1, 0), 1, False),
    ((2, 2, 10, 11), 3, 2, 1, 1, True),              # ceil mode: partial windows at the end
    ((1, 3, 12, 13), (2, 3), (2, 1), (1, 1), (2, 3), False),  # dilation
    ((1, 2, 9, 9), 5, 1, 2, 1, True),                # 25 elements, the most unrolled
    ((3, 7, 8), 3, 2, 1, 1, False),                  # 3-D (C, H, W) input
]
IDS = ["resnet", "default-stride", "rect", "ceil", "dilation", "k5s1", "3d"]


def _pool(config):
    _, kernel, stride, padding, dilation, ceil_mode = config

    def pool(x):
        return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
    return pool


def _as_layout(x, channels_last: bool):
    return x.contiguous(memory_format=torch.channels_last) if channels_last and x.ndim == 4 else x


def _inputs(sizes, dtype, gen):
    """Random values; small integers (many ties, -inf windows, -0.0 against 0.0); NaNs."""
    plain = torch.randn(sizes, generator=gen)
    ties = torch.randint(-3, 3, sizes, generator=gen).float()
    ties[ties == -3] = -float("inf")
    ties[ties == 2] = -0.0
    nans = torch.randn(sizes, generator=gen)
    nans[torch.rand(sizes, generator=gen) < 0.15] = float("nan")
    if not dtype.is_floating_point:
        return [torch.randint(-50, 50, sizes, generator=gen, dtype=dtype),
                torch.randint(-2, 2, sizes, generator=gen, dtype=dtype)]
    return [t.to(dtype) for t in (plain, ties, nans)]


def _assert_identical(actual, expected, what):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    if expected.dtype.is_floating_point:
        nan = actual.isnan() & expected.isnan()  # a NaN's sign is not compared
        same = nan | ((actual == expected) & (actual.signbit() == expected.signbit()))
        assert bool(same.all()), f"{what}: values differ\n{actual}\n{expected}"
    else:
        assert torch.equal(actual, expected), f"{what}: differ\n{actual}\n{expected}"


def _no_pool_fallbacks(compiled):
    fallbacks = {f for g in compiled.graphs for f in g.fallbacks}
    assert not fallbacks & POOL_OPS, fallbacks


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
@pytest.mark.parametrize("dtype,channels_last", [(torch.float32, False), (torch.float32, True),
                                                 (torch.bfloat16, True), (torch.bfloat16, False)],
                         ids=["f32", "f32-cl", "bf16-cl", "bf16"])
def test_forward_matches_eager_exactly(backend, config, dtype, channels_last):
    pool = _pool(config)
    gen = torch.Generator().manual_seed(sum(map(ord, repr(config) + str(dtype))))
    with Compiled() as compiled:
        compiled_pool = torch.compile(pool, backend="braze")
        for k, x in enumerate(_inputs(config[0], dtype, gen)):
            x = _as_layout(x, channels_last)
            (values, indices), (want_values, want_indices) = compiled_pool(x), pool(x)
            _assert_identical(values, want_values, f"values of input {k}")
            _assert_identical(indices, want_indices, f"indices of input {k}")
            assert values.stride() == want_values.stride() and indices.stride() == want_indices.stride()
    assert compiled.graphs and not compiled.failures
    _no_pool_fallbacks(compiled)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_forward_matches_eager_exactly(backend, dtype):
    config = CONFIGS[0]
    pool = _pool(config)
    with Compiled() as compiled:
        compiled_pool = torch.compile(pool, backend="braze")
        for k, x in enumerate(_inputs(config[0], dtype, torch.Generator().manual_seed(3))):
            for got, want in zip(compiled_pool(x), pool(x)):
                _assert_identical(got, want, f"input {k}")
    _no_pool_fallbacks(compiled)


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_gradients_match_eager(backend, config):
    _, kernel, stride, padding, dilation, ceil_mode = config
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(config[0], generator=gen).requires_grad_()

    def fn(x):
        return F.max_pool2d(x * 2, kernel, stride, padding, dilation, ceil_mode)
    compiled = check(fn, x, grad=True)
    _no_pool_fallbacks(compiled)


def test_gradients_channels_last_with_ties(backend):
    gen = torch.Generator().manual_seed(5)
    x = torch.randint(-2, 3, (2, 3, 9, 10), generator=gen).float()
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    compiled = check(lambda x: F.max_pool2d(x, 3, 1, 1), x, grad=True)
    _no_pool_fallbacks(compiled)


@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[5]], ids=["resnet", "k5s1"])
def test_bfloat16_gradients_as_close_as_eager(backend, config):
    """braze adds the (up to 25) gradients of one position in float32 and rounds once;
    eager's CPU kernel rounds to bf16 after every addition: braze's error against a float64
    reference must stay within eager's."""
    _, kernel, stride, padding, dilation, ceil_mode = config
    gen = torch.Generator().manual_seed(2)
    x = torch.randint(-2, 3, config[0], generator=gen).to(torch.bfloat16)  # many repeated maxima
    grad = torch.randn(F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode).shape, generator=gen)

    def gradient(fn, x, grad):
        x = x.detach().clone().requires_grad_()
        fn(x).backward(grad.to(x.dtype))
        return x.grad

    def fn(x):
        return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
    with Compiled() as compiled:
        got = gradient(torch.compile(fn, backend="braze"), x, grad)
    eager, reference = gradient(fn, x, grad), gradient(fn, x.double(), grad)
    assert got.dtype == torch.bfloat16
    err_braze = (got.double() - reference).abs().max().item()
    err_eager = (eager.double() - reference).abs().max().item()
    assert err_braze <= max(err_eager, 1e-2 * reference.abs().max().item()), (err_braze, err_eager)
    _no_pool_fallbacks(compiled)


def _randn(*sizes):
    """Fresh values from a local generator (the global one is left as later tests expect)."""
    return torch.randn(sizes, generator=torch.Generator().manual_seed(len(sizes) + sum(sizes)))


def test_relu_max_pool_forward_is_one_kernel(backend):
    x = _randn(2, 8, 16, 16)
    report = braze.explain(lambda x: F.max_pool2d(x.relu(), 3, 2, 1), x)
    assert not report.failures and not report.fallbacks, report
    assert len(report.kernels) == 1, report
    assert {"aten.relu.default", "aten.max_pool2d_with_indices.default"} <= set(report.kernels[0].ops)


def test_training_has_no_pooling_fallback(backend):
    x = _randn(2, 8, 16, 16).contiguous(memory_format=torch.channels_last).requires_grad_()
    report = braze.explain(lambda x: F.max_pool2d(x.relu(), 3, 2, 1), x)
    assert not report.failures and not report.fallbacks, report
    ops = {op for k in report.kernels for op in k.ops}
    assert POOL_OPS <= ops, ops


def test_large_windows_run_through_aten():
    x = _randn(1, 2, 12, 12).requires_grad_()
    report = braze.explain(lambda x: F.max_pool2d(x, 6, 1), x)  # 36 elements per window
    assert set(report.fallbacks) == POOL_OPS, report
    check(lambda x: F.max_pool2d(x, 6, 1), x, grad=True)


def test_triton_masks_a_load_only_under_a_condition_that_bounds_it():
    """A load that may point outside its buffer is masked instead of clamped only in a
    branch whose condition states index bounds: under relu's backward (``x <= 0``, a
    loaded value) the pooling backward's index loads stay clamped (masked by that
    condition alone, they fault on the GPU)."""
    from braze.codegen.triton.guards import guarded_loads
    from braze.ir import simplify as S
    from braze.ir.expr import Op, binary, const, load, var, where
    x0 = var("x0", 8)
    shifted = load("a", [S.sub(x0, 1)], torch.float32)  # a[x0 - 1]: position -1 at x0 == 0
    zero = const(0.0, torch.float32)
    by_value = where(binary(Op.LE, load("b", [x0], torch.float32), zero), zero, shifted)
    by_index = where(S.compare(Op.GE, x0, 1), shifted, zero)
    extents = {"a": 8, "b": 8}
    assert guarded_loads([by_value], extents) == {}
    assert list(guarded_loads([by_index], extents)) == [id(shifted)]
    nested = where(binary(Op.LE, load("b", [x0], torch.float32), zero), zero, by_index)
    [path] = guarded_loads([nested], extents)[id(shifted)]  # one path through both branches
    assert [term for term, _ in path] == [by_index.args[0]]  # only the index bound masks it
    two_ways = binary(Op.ADD, by_index, where(S.compare(Op.LE, x0, 6), shifted, zero))
    paths = guarded_loads([two_ways], extents)[id(shifted)]
    assert [len(p) for p in paths] == [1, 1]  # either branch's condition: the union masks it
