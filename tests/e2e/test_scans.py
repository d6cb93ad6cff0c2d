"""Cumulative ops (``braze.lower.scans``): ``cumsum`` and ``cumprod`` and what
decomposes into them (``prod``'s gradient), against eager on both code generators."""
import pytest
import torch

import braze
from helpers import check, check_low_precision


def rand(*shape, grad=False):
    return torch.randn(shape).requires_grad_(grad)


def compiled_scans(compiled) -> list:
    return [k for k in compiled.kernels if k.shape == "scan"]


def test_cumsum_and_cumprod_forms(backend):
    x, long = rand(4, 7, 5, grad=True), rand(3, 3000, grad=True)
    compiled = check(lambda x, long: (x.sin().cumsum(1) * 2, x.cumsum(0), x.cumsum(-1, dtype=torch.float64),
                                      (x * 0.5 + 1).cumprod(2), long.cumsum(1), x[:, :1].cumsum(1)),
                     x, long, grad=True)
    assert compiled_scans(compiled) and not [f for g in compiled.graphs for f in g.fallbacks]


def test_long_rows_carry_their_sum_across_chunks(backend):
    """Rows longer than a Triton scan's one chunk (4096) carry their running value across
    chunks of 1024 (up to 8192: on a GPU, fewer than 128 longer rows go to ATen). Small
    integer values make every partial sum exact in float32, so braze must equal eager bit
    for bit on any device, forward and backward (a cumsum from the other end), whatever
    order either adds in (on random values eager's CUDA scan, in float32, is about 1e-5
    from float64 at 5000)."""
    x, cotangent = (torch.randint(-8, 8, (3, 6000)).float() for _ in range(2))
    compiled = check(lambda x: x.cumsum(1), x)
    assert compiled_scans(compiled)
    leaf = x.clone().requires_grad_()
    out = torch.compile(lambda x: x.cumsum(1), backend="braze")(leaf)
    out.backward(cotangent)
    assert torch.equal(leaf.grad, cotangent.flip(1).cumsum(1).flip(1))


def test_integer_and_bool_cumsum_are_exact(backend):
    ints = torch.randint(-1000, 1000, (50, 6), dtype=torch.int32)
    check(lambda i, b: (i.cumsum(0), i.cumprod(1), (b > 0).cumsum(1), i.cumsum(0, dtype=torch.int16)),
          ints, rand(4, 40))


def test_product_gradients_with_zeros(backend):
    """``prod``'s gradient divides by the input where it is not zero and otherwise uses
    exclusive cumulative products from both ends."""
    x = rand(5, 8, grad=True)
    with torch.no_grad():
        x[1, 3] = 0
        x[2, 0] = x[2, 5] = 0
    compiled = check(lambda x: (x.prod(1), x.cumprod(1)), x, grad=True)
    assert not [f for g in compiled.graphs for f in g.fallbacks]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_cumprod_of_a_selected_row_with_zeros_and_negatives(dtype, backend):
    """A row picked by ``select`` or indexing (strided and contiguous), holding one zero, two
    zeros or none, with negative values: values and gradients as eager's."""
    x = torch.randn(6, 9, 4, dtype=dtype)
    with torch.no_grad():
        x[1, 4, :] = 0
        x[2, 1, 2] = x[2, 6, 2] = 0
        x[3] = -x[3].abs()
    x.requires_grad_()
    check(lambda x: (x.select(2, 2)[1].cumprod(0), x[2].cumprod(0), x.select(0, 3).cumprod(1),
                     x[:, 4, 1].cumprod(0), x.select(2, 2)[2].cumprod(0) * x[2, :, 0]), x, grad=True)

    check_low_precision(lambda x: x.cumsum(1), rand(4, 100).bfloat16())


def test_empty_and_scalar_scans(backend):
    check(lambda e, s: (e.cumsum(1), s.cumsum(0), s.cumprod(0)), rand(0, 4), rand())


def test_a_scan_runs_alone_and_says_why():
    report = braze.explain(lambda x: x.exp().cumsum(1) + 1, rand(6, 9))
    (graph,) = report.graphs
    assert [k.shape for k in graph.kernels] == ["scan", "pointwise"]
    assert "aten.exp.default" in graph.kernels[0].ops
    refused = [r for r in graph.fusion_log if not r.fused]
    assert refused and all(r.reason.value.startswith("a scan") for r in refused)
    assert "= cumulative sum along dim 1 of" in graph.graph.to_text()
