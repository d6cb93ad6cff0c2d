"""Mismatches found by the differential fuzzer (tests/fuzz), as minimal repros.

Each test is the smallest program hypothesis shrank a failure to, written out by
hand. A test that fails today is marked ``xfail(strict=True)`` with the cause,
so it turns into a failure (and must be unmarked) the day the bug is fixed; the
fuzzer's ``KNOWN_BUGS`` (or a named exclusion in the generator) keeps the op
out of the CI fuzz run meanwhile, and names this file.
"""
import pytest
import torch
import torch.nn.functional as F

from helpers import check

TORCH_2_13 = torch.__version__ < "2.14"


@pytest.mark.xfail(TORCH_2_13, strict=True, raises=AssertionError,
                   reason="torch 2.13 AOTAutograd drops an in-place op on a 0-d float64 graph input: "
                          "the captured graph is empty, the input keeps its value (backend='aot_eager' "
                          "too; float32/int64/bf16 0-d and float64 1-d are fine; fixed in torch 2.14)")
def test_in_place_mul_of_zero_dim_float64_input():
    def fn(a0):
        a0.mul_(2)
        return a0 + 0
    x = torch.tensor(1.5, dtype=torch.float64)
    expected = fn(x.clone())
    actual_input = x.clone()
    actual = torch.compile(fn, backend="braze")(actual_input)
    assert actual.item() == expected.item() == 3.0
    assert actual_input.item() == 3.0


def test_in_place_mul_of_zero_dim_float32_input():
    """The float32 twin of the case above works on every torch version."""
    def fn(a0):
        a0.mul_(2)
        return a0 + 0
    check(fn, torch.tensor(1.5))


def test_sum_over_size_one_dim_of_negative_zero():
    """Fixed: a sum over one element adds 0.0, as eager's does (-0.0 becomes +0.0)."""
    def fn(x):
        return 1 / x.sum(1), torch.atan2(x.mean(1), torch.tensor(-1.0))
    # eager: 1/x [inf, 0.5], atan2 [pi, 2.03] (braze gave [-inf, 0.5], [-pi, 2.03] before the fix)
    check(fn, torch.tensor([[-0.0], [2.0]]))


def test_vector_call_reading_a_value_of_its_own_loop():
    """Fixed: a row kernel moved ``cos``'s argument, ``where(v > 0, x, v)``, into the
    arguments loop at the head of each block of lanes (``codegen/cpp/calls.py``), but
    ``v`` (the LayerNorm output, stored as an output) is computed by the block's main
    loop, after that head: KeyError: 'buf6' at code generation, and the graph ran eagerly."""
    def fn(x):
        v = F.layer_norm(x, (33,))
        w = torch.where(v > 0, x, v)
        return torch.cos(w) != w, v
    check(fn, torch.randn(4, 33))


def test_vector_call_reading_a_value_of_its_own_loop_shared():
    """The same rule for any call and any shared part of its argument: ``exp(v * x)``
    where ``v * x`` is also an output and ``v`` a stored LayerNorm output."""
    def fn(x):
        v = F.layer_norm(x, (64,))
        p = v * x
        return torch.exp(p) + torch.sin(x), p, v
    check(fn, torch.randn(3, 64))


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="torch 2.13 AOTAutograd: an output that is an overlapping view (unfold) of an "
                          "intermediate gets the gradient of as_strided's backward, not unfold's: the "
                          "shared element's gradient is wrong (backend='aot_eager' too). The fuzzer "
                          "makes no unfold in gradient programs (fuzz_ops_shape.small_views)")
def test_gradient_of_overlapping_view_output():
    def fn(x):
        return (x * 2).unfold(0, 2, 1)
    x = torch.tensor([0.5, -1.0, 2.0])
    cotangent = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    grads = []
    for f in (fn, torch.compile(fn, backend="braze")):  # (backend="aot_eager" gives the same)
        leaf = x.clone().requires_grad_()
        f(leaf).backward(cotangent)
        grads.append(leaf.grad)
    assert grads[0].tolist() == [2.0, 10.0, 8.0]
    assert torch.equal(grads[1], grads[0]), f"braze {grads[1].tolist()}"  # [2.0, 12.0, 8.0]


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="torch 2.13 functionalization drops an in-place write through an expanded "
                          "(overlapping) view of a graph input: the input and the view keep their values "
                          "(backend='aot_eager' too). The fuzzer writes through no view with stride 0 "
                          "(fuzz_ops_more.in_place)")
def test_in_place_write_through_expanded_view():
    def fn(a):
        v = a.expand(2, 3)
        v[:, 0:].fill_(0.25)
        return v + 0
    x = torch.tensor([[1.0, 2.0, 3.0]])
    actual_input = x.clone()
    actual = torch.compile(fn, backend="braze")(actual_input)
    assert torch.equal(actual, torch.full((2, 3), 0.25)), actual
    assert torch.equal(actual_input, torch.full((1, 3), 0.25)), actual_input


def test_float64_divisions_keep_their_operands_whole(backend):
    """Triton printed a float64 division without parentheses: sigmoid's ``1 / (1 + exp(-a))``
    became ``1.0 / 1.0 + exp(-a)`` (silu, rsqrt and reciprocal alike)."""
    x = torch.randn(33, dtype=torch.float64)
    check(lambda x: (torch.sigmoid(x), F.silu(x), torch.rsqrt(x.abs() + 1), torch.reciprocal(x + 4)), x)
