"""Channels-last convolutions (braze/lower/layouts.py), forced on for CPU tensors:
values and gradients as eager's, user-visible strides as eager's, saved tensors
channels-last, the backward compiled for the strides it really receives."""
import pytest
import torch

import braze
from braze.backend import Recording

CHANNELS_LAST = (2304, 1, 192, 16)  # a (4, 16, 12, 12) tensor in channels-last


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16)
        self.c2, self.b2 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=4), torch.nn.BatchNorm2d(16)
        self.fc = torch.nn.Linear(16, 5)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        z = torch.relu(self.b2(self.c2(y)) + y)
        return self.fc(z.mean((2, 3))), z


def _run(model, x, compiled: bool):
    x = x.clone().requires_grad_()
    fn = torch.compile(model, backend="braze") if compiled else model
    out, feature = fn(x)
    (out.sum() + feature.square().mean()).backward()
    return out, feature, [x.grad] + [p.grad for p in model.parameters()]


def _close(a, b, tol=1e-5):
    assert a.shape == b.shape
    assert ((a - b).norm() / b.norm().clamp_min(1e-12)).item() < tol


def test_training_block_matches_eager():
    torch.manual_seed(0)
    eager, braze_model = Block(), Block()
    braze_model.load_state_dict(eager.state_dict())
    x = torch.randn(4, 3, 12, 12)
    torch._dynamo.reset()
    with braze.config.patch(channels_last_convs="on", strict=True), Recording() as rec:
        out, feature, grads = _run(braze_model, x, compiled=True)
    ref_out, ref_feature, ref_grads = _run(eager, x, compiled=False)
    _close(out, ref_out)
    _close(feature, ref_feature)
    assert feature.stride() == ref_feature.stride()  # the user sees eager's strides
    skip = {2, 6}  # conv biases in front of BatchNorm: gradients that are rounding noise around 0
    for k, (g, ref) in enumerate(zip(grads, ref_grads)):
        assert g.stride() == ref.stride()
        if k not in skip:
            _close(g, ref, 1e-4)
    _close(braze_model.b1.running_mean, eager.b1.running_mean)
    _close(braze_model.b2.running_var, eager.b2.running_var)
    forward, backward = [g for g in rec.graphs if g.kind == "forward"], [g for g in rec.graphs if g.kind == "backward"]
    assert forward[0].restrided and backward
    assert CHANNELS_LAST in {n.layout.strides for n in forward[0].graph.nodes if getattr(n, "layout", None)}


@pytest.mark.parametrize("setting", ["on", "off"])
def test_inference_conv_output_keeps_eager_strides(setting):
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(8, 6, 3, padding=1).eval()
    x = torch.randn(2, 8, 9, 7)

    def fn(x):
        return torch.nn.functional.gelu(conv(x)) * 2.0, conv(x).sum((2, 3))

    torch._dynamo.reset()
    with torch.no_grad(), braze.config.patch(channels_last_convs=setting, strict=True):
        got = torch.compile(fn, backend="braze")(x)
        want = fn(x)
    for g, w in zip(got, want):
        _close(g, w)
        assert g.stride() == w.stride()


def test_off_by_default_on_cpu():
    conv = torch.nn.Conv2d(3, 4, 1)
    report = braze.explain(lambda x: conv(x).relu(), torch.randn(1, 3, 4, 4))
    assert not any(g.restrided for g in report.graphs)
