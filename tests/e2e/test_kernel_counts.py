"""How many kernels common patterns compile to, read from ``braze.explain`` (C++ backend):
sin² + cos², add + relu, an integer cast chain, RMSNorm, LayerNorm and softmax are one
kernel each, an MSE forward and backward at most two, an optimizer step over many tensors
one foreach kernel; the report names ATen calls and fallbacks."""
import torch
import torch.nn.functional as F

import braze


def counts(fn, *args):
    report = braze.explain(fn, *args)
    assert not report.failures, report.failures
    return report


def test_sin2_cos2_is_one_kernel():
    r = counts(lambda x: torch.sin(x) ** 2 + torch.cos(x) ** 2, torch.randn(256, 33))
    assert len(r.kernels) == 1 and not r.fallbacks
    assert {"aten.sin.default", "aten.cos.default", "aten.add.Tensor"} <= set(r.kernels[0].ops)


def test_add_relu_is_one_kernel():
    r = counts(lambda x: (x + 1.0).relu(), torch.randn(2, 32, 128, 5))
    assert len(r.kernels) == 1


def test_int_cast_chain_is_one_kernel():
    a = torch.randint(-1000, 1000, (100, 130))
    b = torch.randint(-1000, 1000, (100, 130))
    c = torch.randint(-1000, 1000, (100, 130), dtype=torch.int32)
    r = counts(lambda a, b, c: ((a.to(torch.int32) + b) * c).to(torch.int64), a, b, c)
    assert len(r.kernels) == 1


def test_manual_rmsnorm_is_one_kernel():
    x, w = torch.randn(64, 256), torch.randn(256)
    r = counts(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, x, w)
    assert len(r.kernels) == 1


def test_layer_norm_is_one_kernel():
    x, w, b = torch.randn(64, 256), torch.randn(256), torch.randn(256)
    r = counts(lambda x, w, b: F.layer_norm(x, (256,), w, b), x, w, b)
    assert len(r.kernels) == 1


def test_softmax_is_one_kernel():
    r = counts(lambda x: torch.softmax(x, -1), torch.randn(64, 1000))
    assert len(r.kernels) == 1


def test_mse_of_sin2_cos2_forward_and_backward_at_most_two():
    x = torch.randn(128, 64, requires_grad=True)
    y = torch.randn(128, 64)
    r = counts(lambda x, y: F.mse_loss(torch.sin(x) ** 2 + torch.cos(x) ** 2, y), x, y)
    assert len(r.kernels_of("forward")) <= 2
    assert len(r.kernels_of("backward")) <= 2


def test_report_lists_externs_and_fallbacks():
    x, w = torch.randn(16, 32), torch.randn(8, 32)
    r = counts(lambda x, w: torch.logcumsumexp((x @ w.t()).relu(), 1), x, w)
    assert "aten.mm.default" in r.externs
    assert any("logcumsumexp" in f for f in r.fallbacks)
    text = str(r)
    assert "kernel0" in text and "extern" in text and "fallback" in text


def test_optimizer_step_over_many_tensors_is_one_foreach_kernel():
    params = [torch.randn(n) for n in (100, 37, 1, 64)]
    grads = [torch.randn_like(p) for p in params]
    state = [torch.randn_like(p) for p in params]

    def step(params, grads, state):
        for p, g, m in zip(params, grads, state):
            m.mul_(0.9).add_(g, alpha=0.1)
            p.sub_(m * 0.01)
    r = counts(step, params, grads, state)
    assert len(r.kernels) == 1 and r.kernels[0].shape == "foreach"
