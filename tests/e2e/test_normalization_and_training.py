"""Normalization, losses and training steps against eager, through each code generator:
LayerNorm, softmax, RMSNorm, cross entropy and MSE with their gradients, BatchNorm in
training mode (its running statistics updated as eager's), bf16/fp16 graphs against a
float64 reference, and a small MLP trained for two SGD steps."""
import pytest
import torch
import torch.nn.functional as F

from helpers import check, check_low_precision, rand


def test_composites_with_gradients(backend):
    x, w, b = rand(16, 64, grad=True), rand(64, grad=True), rand(64, grad=True)
    y = rand(16, 64)
    check(lambda x, w, b, y: (F.layer_norm(x, (64,), w, b).softmax(-1), F.mse_loss(x.sin() * w, y),
                              F.log_softmax(x, 0), (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w),
                              F.cross_entropy(x, torch.arange(16) % 64), F.gelu(x + b)), x, w, b, y, grad=True)


def test_batch_norm_training_updates_running_stats(backend):
    bn = torch.nn.BatchNorm2d(3)
    bn2 = torch.nn.BatchNorm2d(3)
    x = rand(4, 3, 6, 6, grad=True)
    x2 = x.detach().clone().requires_grad_()
    out = bn(x)
    out.sum().backward()
    compiled = torch.compile(bn2, backend="braze")
    out2 = compiled(x2)
    out2.sum().backward()
    torch.testing.assert_close(out2, out)
    torch.testing.assert_close(x2.grad, x.grad)
    torch.testing.assert_close(bn2.running_mean, bn.running_mean)
    torch.testing.assert_close(bn2.running_var, bn.running_var)
    assert bn2.num_batches_tracked.item() == bn.num_batches_tracked.item() == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision(dtype, backend):
    x, y, w = rand(32, 128, dtype=dtype), rand(32, 128, dtype=dtype), rand(128, dtype=dtype)
    check_low_precision(lambda x, y, w: ((x * y).sum(-1), F.layer_norm(x, (128,), w), x.softmax(-1),
                                         F.gelu(x) * w, (x.float() + 1).to(dtype), x.amax(0)), x, y, w)


def test_mlp_training_step(backend):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                                torch.nn.Linear(64, 10))
    copy = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                               torch.nn.Linear(64, 10))
    copy.load_state_dict(model.state_dict())
    x, y = rand(16, 32), torch.randint(0, 10, (16,))
    compiled = torch.compile(copy, backend="braze")
    for m, run in ((model, model), (copy, compiled)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            F.cross_entropy(run(x), y).backward()
            opt.step()
    for p, q in zip(model.parameters(), copy.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
