"""The inliner weighs each op by its cost on the graph's device (braze/fuse/inline.py).

On a CPU erf, exp, tanh and the like cost tens of adds, so a buffer holding them
that several kernels read is stored once, not recomputed in each; cheap buffers,
buffers of one element and values read twice within one expression are still
recomputed (these tests build CPU tensors explicitly: the CUDA plugin makes the GPU the
default device); on a GPU costly ops count 4, but sin, cos and the other ops whose libdevice
code is large count more than ``inline_max_ops``: a rotary embedding's cos and sin tables,
read by every layer, are stored once. Checked through ``braze.explain`` and against eager;
``unit/test_inline.py`` checks the decisions and ``op_cost`` without code generation.
"""
import pytest
import torch
import torch.nn.functional as F

import braze
from helpers import check

ERF = "aten.erf.default"


def _row_and_column_sums(x):
    y = torch.erf(x) * torch.exp(-x * x)  # costly, read by a row and by a column reduction
    return y.sum(1), y.sum(0)


def _cheap_row_and_column_sums(x):
    y = x * 2.0 + 1.0
    return y.sum(1), y.sum(0)


def _tanh_derivative_sums(x):
    t = torch.tanh(x * 0.5)  # read twice, but both reads end in one expression: computed once there
    y = (t + 1.0) * (1.0 - t * t)
    return y.sum(1), y.sum(0)


def _kernels_with(report, op: str) -> list:
    return [k for k in report.kernels if op in k.ops]


def test_costly_buffer_read_by_two_kernels_is_stored():
    report = braze.explain(_row_and_column_sums, torch.randn(64, 48, device="cpu"))
    assert len(report.kernels) == 2
    assert len(_kernels_with(report, ERF)) == 1, [k.ops for k in report.kernels]
    reasons = [d.reason for d in report.graphs[0].decisions if d.stored]
    assert any("costly to recompute" in r for r in reasons), reasons


def test_costly_value_read_twice_in_one_expression_is_stored_with_it():
    """The whole expression is stored, so the second kernel only loads it."""
    report = braze.explain(_tanh_derivative_sums, torch.randn(64, 48, device="cpu"))
    assert len(report.kernels) == 2
    assert len(_kernels_with(report, "aten.tanh.default")) == 1, [k.ops for k in report.kernels]
    other = next(k for k in report.kernels if "aten.tanh.default" not in k.ops)
    assert other.ops == ["aten.sum.dim_IntList"], other.ops


def test_cheap_buffer_read_by_two_kernels_is_recomputed():
    report = braze.explain(_cheap_row_and_column_sums, torch.randn(64, 48, device="cpu"))
    assert len(report.kernels) == 2
    assert len(_kernels_with(report, "aten.mul.Tensor")) == 2, [k.ops for k in report.kernels]
    assert not any("costly" in d.reason for d in report.graphs[0].decisions), report.graphs[0].decisions


def test_costly_buffer_matches_eager_on_fresh_inputs(backend):
    for seed in range(2):
        torch._dynamo.reset()
        x = torch.randn(64, 48, device="cpu", generator=torch.Generator().manual_seed(seed))
        check(_row_and_column_sums, x, atol=1e-5, rtol=1e-5)
        torch._dynamo.reset()
        check(_tanh_derivative_sums, x, atol=1e-5, rtol=1e-5)


def _gelu_block(x, w1, b1, g, beta, w2):
    h = F.gelu(F.layer_norm(x @ w1 + b1, (w1.shape[1],), g, beta))
    return (h @ w2).square().mean()


def _gelu_args(seed: int):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(32, 24), (24, 40), (40,), (40,), (40,), (40, 8)]
    return [torch.randn(s, device="cpu", generator=gen).requires_grad_() for s in shapes]


def test_gelu_derivative_is_computed_once_in_the_backward():
    """The MLP benchmark's pattern: GELU's derivative, read by the LayerNorm backward's
    row reductions and by the column reductions of the weight and bias gradients. On the
    CPU the derivative is one exp (braze.decompositions._gelu_backward), no erf."""
    report = braze.explain(_gelu_block, *_gelu_args(0))
    backward = report.kernels_of("backward")
    assert len(_kernels_with(report.graph("backward"), "aten.exp.default")) == 1, [k.ops for k in backward]
    assert not _kernels_with(report.graph("backward"), ERF), [k.ops for k in backward]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gelu_gradient_with_one_exp_matches_eager_over_its_range(dtype):
    """The CPU derivative shares one exp between the density and ATen's erf formula: it
    matches eager's CPU kernel from -12 to 12, and at 0, -0, the infinities and NaN each
    alone (eager's own vectorized float32 kernel gives NaN for gelu(+inf) on AVX-512 CPUs
    and inf on AVX2 ones and in its scalar path: one element at a time is the same everywhere)."""
    gen = torch.Generator().manual_seed(3)
    check(F.gelu, (torch.rand(4000, generator=gen) * 24 - 12).to(dtype).requires_grad_(), grad=True)
    for special in (0.0, -0.0, 1e-30, float("inf"), float("-inf"), float("nan")):
        torch._dynamo.reset()
        check(F.gelu, torch.tensor([special]).to(dtype).requires_grad_(), grad=True)


def test_gelu_block_gradients_match_eager(backend):
    for seed in (1, 2):
        torch._dynamo.reset()
        check(_gelu_block, *_gelu_args(seed), grad=True, atol=1e-4, rtol=1e-4)


def _rotate_half(t):
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def _rotary_layers(x, w1, w2, inv_freq):
    """cos and sin of one angle table, read by the rotary embedding of two layers."""
    angles = torch.arange(x.shape[0], device=x.device, dtype=torch.float32)[:, None] * inv_freq
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    for w in (w1, w2):
        q = x @ w
        x = q * cos + _rotate_half(q) * sin
    return x


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU's op costs decide it on CUDA tensors")
def test_rotary_tables_are_computed_once_on_a_gpu():
    gen = torch.Generator(device="cuda").manual_seed(0)
    args = [torch.randn(s, device="cuda", generator=gen) for s in ((128, 64), (64, 64), (64, 64))]
    args.append(1.0 / 10000 ** (torch.arange(0, 64, 2, device="cuda") / 64))
    report = braze.explain(_rotary_layers, *args)
    assert len(_kernels_with(report, "aten.cos.default")) == 1, [k.ops for k in report.kernels]
    torch.testing.assert_close(braze.compile(_rotary_layers)(*args), _rotary_layers(*args), atol=1e-4, rtol=1e-4)


def test_one_element_buffer_stays_inlined():
    """Adam's bias corrections: recomputed once per kernel, not stored by a kernel of their own."""
    def fn(step, a, b):
        c = 1.0 - torch.pow(0.9, step)
        return a / c, b / c
    report = braze.explain(fn, torch.tensor(3.0, device="cpu"), torch.randn(64, device="cpu"),
                           torch.randn(32, device="cpu"))
    assert not any("costly" in d.reason for d in report.graphs[0].decisions), report.graphs[0].decisions
