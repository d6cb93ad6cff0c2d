"""The outputs the generated wrapper returns (``braze/runtime/wrapper.py``): a matrix
product into rows padded to 64 bytes (``_aligned_matmul``), an output the backward also
saves stored once, and two outputs of equal value kept two tensors."""
import torch

import braze
from helpers import check


def test_aligned_matmul_pads_rows_and_matches_eager():
    from braze.runtime.wrapper import _aligned_matmul
    a, b, bias = torch.randn(6, 5), torch.randn(13, 5).t(), torch.randn(13)
    out = _aligned_matmul(torch.ops.aten.mm.out, a, b)
    assert out.shape == (6, 13) and out.stride() == (16, 1)  # 13 floats padded to 16 (64 bytes)
    torch.testing.assert_close(out, a @ b)
    out = _aligned_matmul(torch.ops.aten.addmm.out, bias, a, b, beta=0.5)
    torch.testing.assert_close(out, torch.addmm(bias, a, b, beta=0.5))
    bias2d = torch.randn(6, 13)
    torch.testing.assert_close(_aligned_matmul(torch.ops.aten.addmm.out, bias2d, a, b),
                               torch.addmm(bias2d, a, b))


def test_an_output_also_saved_for_backward_is_stored_once():
    """A forward graph returns a user output that the backward also needs at two places:
    one buffer, written once (LLaMA's key and value caches), values and grads as eager."""
    def fn(x, w):
        k = torch.cat([x.sin(), x.cos()], -1)
        return k, (k * w).sum()
    x, w = torch.randn(64, 32, requires_grad=True), torch.randn(64, 64, requires_grad=True)
    check(fn, x, w, grad=True)
    forward = braze.explain(fn, x, w).graph("forward")
    assert [k.writes for k in forward.kernels] == [["buf2", "buf4"]]
    assert "return (buf2, buf4, arg0, arg1, buf2, )" in forward.wrapper


def test_two_graph_outputs_with_one_value_stay_two_tensors():
    """``y`` and ``y.clone()`` are distinct tensors in eager: writing into one leaves the other."""
    def fn(x):
        y = x.sin()
        return y, y.clone()
    x = torch.randn(16, 8)
    y, z = braze.compile(fn)(x)
    assert y.data_ptr() != z.data_ptr()
    y.add_(1)
    torch.testing.assert_close(z, x.sin())
