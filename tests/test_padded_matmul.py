"""Matrix products whose rows are not a multiple of 16 bytes (``pad_matmul_rows``,
forced on for CPU tensors): stored with padded rows, values and gradients as eager's,
user-visible products returned padded (as Inductor's are), gradients with eager's
strides, and a padded product saved for the backward read through its real strides."""
import pytest
import torch
import torch.nn.functional as F

import braze
from braze.backend import Recording


def _loss_and_logits(x, w, b, target):
    logits = F.linear(torch.tanh(x), w, b)
    return F.cross_entropy(logits, target), logits


def _inputs(seed: int, vocab: int = 1001):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(12, 64, generator=gen).requires_grad_()
    w = torch.randn(vocab, 64, generator=gen).requires_grad_()
    b = torch.randn(vocab, generator=gen).requires_grad_()
    target = torch.randint(0, vocab, (12,), generator=gen)
    return x, w, b, target


@pytest.mark.parametrize("setting", ["on", "off"])
def test_training_step_matches_eager(setting):
    with braze.config.patch(pad_matmul_rows=setting), Recording() as rec:
        fn = torch.compile(_loss_and_logits, backend="braze")
        x, w, b, target = _inputs(1)
        loss, logits = fn(x, w, b, target)
        grads = torch.autograd.grad(loss + logits.square().mean(), (x, w, b))
    xe, we, be, _ = _inputs(1)
    loss_e, logits_e = _loss_and_logits(xe, we, be, target)
    grads_e = torch.autograd.grad(loss_e + logits_e.square().mean(), (xe, we, be))
    assert not rec.failures
    torch.testing.assert_close(loss, loss_e)
    torch.testing.assert_close(logits, logits_e)
    assert logits.stride() == ((1004, 1) if setting == "on" else (1001, 1))
    for got, want in zip(grads, grads_e):
        torch.testing.assert_close(got, want)
        assert got.stride() == want.stride()


def test_inference_product_consumed_by_a_kernel():
    x, w = torch.randn(30, 16), torch.randn(77, 16)

    def f(x, w):
        return torch.softmax(x @ w.t(), -1), x @ w.t()

    with braze.config.patch(pad_matmul_rows="on"), torch.no_grad():
        soft, raw = torch.compile(f, backend="braze")(x, w)
    soft_e, raw_e = f(x, w)
    torch.testing.assert_close(soft, soft_e)
    torch.testing.assert_close(raw, raw_e)
    assert soft.stride() == soft_e.stride()  # a kernel's output keeps eager's strides
    assert raw.stride() == (80, 1)


def test_aligned_rows_are_not_padded():
    x, w = torch.randn(30, 16), torch.randn(64, 16)
    with braze.config.patch(pad_matmul_rows="on"), torch.no_grad():
        report = braze.explain(lambda x, w: x @ w.t(), x, w)
    assert "_aligned_matmul" not in report.graphs[0].wrapper
