"""Products of one left operand run as one in inference graphs (lower/matmul_groups.py)."""
import pytest
import torch
import torch.nn.functional as F

import braze
from helpers import check_low_precision


def _attention_inputs(seed: int, dtype=torch.float32, bias: bool = True):
    gen = torch.Generator(device=torch.get_default_device()).manual_seed(seed)
    x = torch.randn(2, 16, 32, generator=gen).to(dtype)
    weights = [torch.randn(32, 32, generator=gen).to(dtype) / 6 for _ in range(3)]
    biases = [torch.randn(32, generator=gen).to(dtype) if bias else None for _ in range(3)]
    return x, weights, biases


def _attention(x, wq, wk, wv, bq, bk, bv):
    def heads(t):
        return t.view(2, 16, 4, 8).transpose(1, 2)
    q, k, v = heads(F.linear(x, wq, bq)), heads(F.linear(x, wk, bk)), heads(F.linear(x, wv, bv))
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 16, 32).relu()


def _externs(report):
    return [str(e) for e in report.externs]


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("bias", [True, False])
def test_query_key_value_projections_run_as_one_product(backend, bias):
    x, weights, biases = _attention_inputs(1, bias=bias)
    args = (x, *weights, *biases)
    product = "aten.addmm.default" if bias else "aten.mm.default"
    with braze.config.patch(cpu_backend=backend), torch.no_grad():
        report = braze.explain(_attention, *args)
        out = torch.compile(_attention, backend="braze")(*args)
        with braze.config.patch(group_matmuls=False):
            separate = braze.explain(_attention, *args)
    torch._dynamo.reset()
    assert _externs(report).count(product) == 1 and not report.fallbacks, report
    assert _externs(separate).count(product) == 3
    torch.testing.assert_close(out, _attention(*args))


def test_gate_and_up_projections_in_bfloat16_as_eager_within_rounding():
    """SwiGLU's two products of one input; bf16 weights from a cast (as under autocast)."""
    gen = torch.Generator(device=torch.get_default_device()).manual_seed(2)
    x = torch.randn(8, 64, generator=gen).to(torch.bfloat16)
    w_gate, w_up = (torch.randn(96, 64, generator=gen) / 8 for _ in range(2))

    def swiglu(x, w_gate, w_up):
        return F.silu(x @ w_gate.to(x.dtype).t()) * (x @ w_up.to(x.dtype).t())
    with torch.no_grad():
        report = braze.explain(swiglu, x, w_gate, w_up)
        check_low_precision(swiglu, x, w_gate, w_up)
    assert _externs(report) == ["aten.mm.default"], report


def test_a_product_whose_weight_reads_another_is_not_grouped():
    x, (w1, w2, _), _ = _attention_inputs(3)

    def chained(x, w1, w2):
        first = x @ w1.t()
        return first, x @ (w2 + first[0, 0, :1]).t()
    with torch.no_grad():
        report = braze.explain(chained, x, w1, w2)
        out = torch.compile(chained, backend="braze")(x, w1, w2)
    assert _externs(report) == ["aten.mm.default"] * 2, report
    torch.testing.assert_close(out, chained(x, w1, w2))


def test_training_graphs_keep_separate_products_and_match_eager():
    x, weights, biases = _attention_inputs(4)
    args = [t.requires_grad_() for t in (x, *weights, *biases)]
    report = braze.explain(_attention, *args)
    forward = report.graphs[0]
    assert [str(e) for e in forward.externs].count("aten.addmm.default") == 3
    out = torch.compile(_attention, backend="braze")(*args)
    grads = torch.autograd.grad(out.square().sum(), args)
    expected_args = [t.detach().clone().requires_grad_() for t in args]
    expected = _attention(*expected_args)
    grads_e = torch.autograd.grad(expected.square().sum(), expected_args)
    torch.testing.assert_close(out, expected)
    for got, want in zip(grads, grads_e):
        torch.testing.assert_close(got, want)


def test_products_of_different_widths_add_their_biases_in_the_reading_kernels():
    """Grouped addmm read only by generated kernels (float32): one mm, each bias added where
    its columns are read; widths 48, 16, 16 (grouped-query attention's q, k, v)."""
    gen = torch.Generator(device=torch.get_default_device()).manual_seed(5)
    x = torch.randn(10, 32, generator=gen)
    ws = [torch.randn(n, 32, generator=gen) for n in (48, 16, 16)]
    bs = [torch.randn(n, generator=gen) for n in (48, 16, 16)]

    def projections(x, w1, w2, w3, b1, b2, b3):
        q, k, v = F.linear(x, w1, b1), F.linear(x, w2, b2), F.linear(x, w3, b3)
        return q.relu(), (k * v).sum(-1)
    with torch.no_grad():
        report = braze.explain(projections, x, *ws, *bs)
        out = torch.compile(projections, backend="braze")(x, *ws, *bs)
    assert _externs(report) == ["aten.mm.default"], report
    torch.testing.assert_close(out, projections(x, *ws, *bs))


def test_autocast_casts_of_one_input_make_one_left_operand():
    """Under autocast each linear casts the input to bf16 itself: still one product."""
    x, weights, biases = _attention_inputs(6)
    args = (x, *weights, *biases)
    with torch.no_grad(), torch.autocast(torch.get_default_device().type, torch.bfloat16):
        report = braze.explain(_attention, *args)
        out = torch.compile(_attention, backend="braze")(*args)
        expected = _attention(*args)
    assert _externs(report).count("aten.addmm.default") == 1, report
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected)
